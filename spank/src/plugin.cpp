// The plugin's face to Slurm: the symbols its loader looks for, and one dispatch per SPANK
// callback to the file of the context it runs in. SPANK_PLUGIN() would give these constants
// internal linkage in C++, so they are defined by hand with C linkage; the version script keeps
// every other symbol (and libstdc++, linked in statically) local.
#include <exception>

#include "contexts.hpp"

extern "C" {
__attribute__((visibility("default"))) extern const char plugin_name[] = "pipette";
__attribute__((visibility("default"))) extern const char plugin_type[] = "spank";
__attribute__((visibility("default"))) extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
__attribute__((visibility("default"))) extern const unsigned int spank_plugin_version = 1;
}

namespace {

using namespace pipette::spank;

// Every callback funnels through here: an exception must never unwind into Slurm's C frames.
// What a failure means depends on the context: refusing a submission is fine, failing a
// remote init or user_init drains the node, so those swallow everything.
template <typename Body>
int guarded(Body&& body, int on_exception) noexcept {
  try {
    return body();
  } catch (const std::exception& error) {
    slurm_error("pipette: internal error: %s", error.what());
  } catch (...) {
    slurm_error("pipette: internal error");
  }
  return on_exception;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int slurm_spank_init(spank_t sp, int argc, char** argv) noexcept {
  switch (spank_context()) {
    case S_CTX_ALLOCATOR:
    case S_CTX_LOCAL: return guarded([&] { return submission_init(sp, argc, argv); }, -1);
    case S_CTX_REMOTE: return guarded([&] { return remote_init(sp, argc, argv); }, 0);
    case S_CTX_SLURMD: return slurmd_init();
    default: return 0;
  }
}

__attribute__((visibility("default"))) int slurm_spank_user_init(spank_t sp, int, char**) noexcept {
  if (spank_context() != S_CTX_REMOTE) return 0;
  return guarded([&] { return remote_user_init(sp); }, 0);
}

__attribute__((visibility("default"))) int slurm_spank_task_init(spank_t sp, int, char**) noexcept {
  if (spank_context() != S_CTX_REMOTE) return 0;
  return guarded([&] { return remote_task_init(sp); }, -1);
}

}  // extern "C"
