// Each task, after fork and just before exec: copy the precomputed RANK etc. into its
// environment. No I/O, locks or threads here. In strict mode a step that could not be planned
// fails here, where -1 fails the job cleanly (exit 1) instead of draining the node.
#include "contexts.hpp"
#include "remote_context.hpp"

namespace pipette::spank {

int remote_task_init(spank_t sp) {
  const RemoteContext& context = remote_context();
  if (!context.active) return 0;
  // user_init already put the reason in the job's stderr.
  if (!context.error.empty()) return context.strict ? -1 : 0;
  if (!context.per_task) return 0;
  int local_task = -1;
  if (spank_get_item(sp, S_TASK_ID, &local_task) != ESPANK_SUCCESS || local_task < 0 ||
      local_task >= static_cast<int>(context.task_environment.size())) {
    return context.strict ? -1 : 0;
  }
  for (const auto& [name, value] : context.task_environment[static_cast<std::size_t>(local_task)]) {
    spank_setenv(sp, name.c_str(), value.c_str(), 1);
  }
  return 0;
}

}  // namespace pipette::spank
