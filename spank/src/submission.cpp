// sbatch, salloc (allocator context) and srun (local context) have the same duties: register the
// options so that they appear in --help and are forwarded to the job, and reject a submission
// whose Pipette options or PIPETTE_* variables are invalid or contradict each other, before
// anything is queued (how: spank_options.hpp, prepare_submission).
// Model files, presets and the site file are not checked here: they are read on the nodes,
// as the job user, where the paths may differ from the submit host's.
#include "contexts.hpp"
#include "plugin_config.hpp"
#include "spank_options.hpp"

namespace pipette::spank {

int submission_init(spank_t sp, int argc, char** argv) {
  const std::string error = register_options(sp);
  if (!error.empty()) {
    slurm_error("pipette: %s", error.c_str());
    return -1;
  }
  prepare_submission(parse_plugin_args(argc, argv).error);
  return 0;
}

}  // namespace pipette::spank
