// The plugin's user_init and task_init work without Slurm, for valgrind (tests/hardening/
// CMakeLists.txt runs it under `valgrind --error-exitcode=1 --leak-check=full`).
//
// Boundary: this runs what the plugin's remote callbacks compute between reading Slurm's values
// and handing strings back to Slurm: the plugstack arguments, the site file's trust check and
// parsing (remote init), the option values and PIPETTE_* variables and their merge, and plan_step
// (user_init: plan_job with hwloc inspection of this machine, the model preset, the link cache,
// cluster assembly, search and placement, then the rank table, the step-wide PIPETTE_* variables
// and every local task's RANK/LOCAL_RANK/..., which task_init only copies). It does not run the
// spank_* / slurm_* calls themselves or slurm_hostlist_* (they belong to slurmstepd, which
// valgrind does not host here), nor dlopen the plugin: tests/slurm covers those on a real cluster.
#include <cstdio>
#include <optional>
#include <string>

#include "options.hpp"
#include "pipette/topology/hostlist.hpp"
#include "pipette/topology/link_cache.hpp"
#include "pipette/topology/site_config.hpp"
#include "plugin_config.hpp"
#include "step_plan.hpp"

namespace spank = pipette::spank;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "user_init_path: %s\n", what.c_str());
  return 1;
}

}  // namespace

// argv[1]: a scratch directory for the link cache this writes and reads.
int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: user_init_path SCRATCH_DIR");
  const std::string scratch = argv[1];

  // Remote init: plugstack.conf's arguments and the site file they name.
  const char* plugstack_args[] = {"config=/etc/slurm/pipette.yaml"};
  if (auto args = spank::parse_plugin_args(1, plugstack_args); !args.error.empty()) return fail(args.error);
  const std::string site_path = std::string(PIPETTE_SOURCE_DIR) + "/etc/pipette.yaml";
  spank::check_site_file_trust(site_path);  // the checkout's owner decides the answer; valgrind checks the code
  auto site = pipette::load_site_config(site_path);
  if (!site) return fail(site.error().message);
  site->gpu = "H100-SXM";  // this machine has no GPU for hwloc to name

  // A link cache with one measured pair, written and read back as the plugin reads it.
  pipette::LinkCache measured;
  measured.pairs.push_back({"gpu01", "gpu02", 1'800'000'000, "2.21.5", 45e9, 12e-6, {{1 << 20, 35e-6}, {1 << 26, 1.5e-3}}});
  site->link_cache = scratch + "/links.yaml";
  if (auto written = pipette::update_link_cache(site->link_cache, measured); !written) return fail(written.error().message);

  // The option callbacks, a PIPETTE_* variable, and their merge.
  spank::OptionRecorder recorder;
  for (const auto& [id, value] : {std::pair{spank::OptionId::mode, "auto"}, {spank::OptionId::model, "llama2-7b"},
                                  {spank::OptionId::global_batch, "512"}, {spank::OptionId::sequence_length, "4096"}}) {
    if (auto error = recorder.record(id, value, spank::info(id).name); !error.empty()) return fail(error);
  }
  std::string environment_error;
  const spank::OptionValues environment = spank::read_environment(
      [](const char* name) -> std::optional<std::string> {
        if (std::string(name) == "PIPETTE_FIX") return std::string("mbs=1");
        return std::nullopt;
      },
      environment_error);
  if (!environment_error.empty()) return fail(environment_error);
  if (auto conflict = spank::find_conflict(recorder.values(), environment); !conflict.empty()) return fail(conflict);

  // user_init on node 2 of an srun step of 4 nodes × 8 GPUs × 8 tasks, then the batch step.
  auto nodes = pipette::expand_hostlist("gpu[01-04]");
  if (!nodes) return fail(nodes.error().message);
  spank::StepRequest request;
  request.settings = spank::merge(recorder.values(), environment, spank::site_defaults(*site));
  request.layout = {*nodes, 8, 8};
  request.node_index = 2;
  request.job_id = 1234;
  request.step_id = 0;
  const spank::StepPlanResult step = spank::plan_step(request, *site);
  if (!step.error.empty()) return fail(step.error);
  if (step.plan.task_environment.size() != 8) return fail("expected the variables of 8 local tasks");
  request.layout.tasks_per_node = 0;
  if (const spank::StepPlanResult batch = spank::plan_step(request, *site); !batch.error.empty()) return fail(batch.error);

  // A bad input on the same path gives the error, not a plan.
  request.settings.fix = "tp=3";
  if (spank::plan_step(request, *site).error.empty()) return fail("tp=3 on 8 GPUs per node was planned");

  std::printf("ok: %s\n", step.plan.summary.c_str());
  return 0;
}
