// Debian ships libyaml-cpp.a without -fPIC. Linking it into a shared object works except for one
// reference: libstdc++'s inlined reference counting reads glibc's `__libc_single_threaded`
// PC-relatively, which a shared object cannot resolve to libc. This hidden copy satisfies it
// inside the plugin. It stays 0 ("other threads may exist"), so that inlined code always takes
// the atomic path: correct in any process, and slurmstepd has threads anyway.
extern "C" {
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;  // NOLINT(bugprone-reserved-identifier)
}
