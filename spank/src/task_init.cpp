// Each task, after fork and just before exec: copy the precomputed RANK etc. into its
// environment. No I/O, locks or threads here. In strict mode a step that could not be planned
// fails here: the task exits with status 1 before the user's program runs, which fails the job
// (FAILED 1:0) and leaves the node in service.
#include <unistd.h>

#include <string>

#include "contexts.hpp"
#include "remote_context.hpp"

namespace pipette::spank {

namespace {

// Slurm 22.05 ignores task_init's return value for an `optional` plugin (plugstack.c,
// _do_call_stack) and answers -1 from a `required` one with _exit(1) in this very process
// (slurmstepd/task.c, exec_task). Exiting here does the same whichever way the plugin is loaded,
// in the batch step (the script is its one task) as in srun steps.
[[noreturn]] void fail_task() { _exit(1); }

}  // namespace

int remote_task_init(spank_t sp) {
  const RemoteContext& context = remote_context();
  if (!context.active) return 0;
  // user_init already put the reason in the job's stderr.
  if (!context.error.empty()) {
    if (context.strict) fail_task();
    return 0;
  }
  if (!context.per_task) return 0;
  int local_task = -1;
  if (spank_get_item(sp, S_TASK_ID, &local_task) != ESPANK_SUCCESS || local_task < 0 ||
      local_task >= static_cast<int>(context.task_environment.size())) {
    if (context.strict) fail_task();
    return 0;
  }
  for (const auto& [name, value] : context.task_environment[static_cast<std::size_t>(local_task)]) {
    spank_setenv(sp, name.c_str(), value.c_str(), 1);
  }
  // Slurm sets each task's own CUDA_VISIBLE_DEVICES (per-task GPU binding) before task_init.
  if (context.one_task_per_gpu) {
    char devices[4096] = "";
    if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", devices, sizeof devices) == ESPANK_SUCCESS) {
      const std::string local_rank = std::to_string(visible_local_rank(local_task, context.step_devices, devices));
      spank_setenv(sp, "LOCAL_RANK", local_rank.c_str(), 1);
    }
  }
  return 0;
}

}  // namespace pipette::spank
