// sbatch, salloc (allocator context) and srun (local context) have the same duties: register the
// options so that they appear in --help and are forwarded to the job, and reject a submission
// whose Pipette options are invalid or contradict the environment, before anything is queued.
// Model files, presets and the site file are not checked here: they are read on the nodes,
// as the job user, where the paths may differ from the submit host's.
#include "contexts.hpp"
#include "plugin_config.hpp"
#include "spank_options.hpp"

namespace pipette::spank {

namespace {

std::string config_error;

}  // namespace

int submission_init(spank_t sp, int argc, char** argv) {
  config_error = parse_plugin_args(argc, argv).error;
  const std::string error = register_options(sp);
  if (error.empty()) return 0;
  slurm_error("pipette: %s", error.c_str());
  return -1;
}

int submission_init_post_opt(spank_t sp) { return validate_submission(sp, config_error); }

}  // namespace pipette::spank
