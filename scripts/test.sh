#!/usr/bin/env bash
# Builds Pipette and runs every test: unit tests, CLI tests and the integration tests against a
# real local Slurm cluster. Installs the Debian packages it needs first (as root).
#
# Environment:
#   BUILD_DIR          build directory (default build)
#   PIPETTE_SANITIZE=1 build BUILD_DIR with ASan + UBSan (gcc) and run the suite that can run under
#                      them (see run_sanitized_suite), e.g.
#                      PIPETTE_SANITIZE=1 BUILD_DIR=build-asan scripts/test.sh
#   CI=true            what CI runs (.ci/run): these steps, quickest first (measured times in the
#                      README, "What CI runs"), so that a failure shows early; the first that fails
#                      stops the run. Each prints "==== CI step NAME"; the run ends with one line of
#                      each step's wall time.
#                        deps     scripts/install-deps.sh
#                        release  build-release/ (Release, -O3: GCC 12 warns there where -O2 does
#                                 not, and warnings are errors): everything builds, unit tests pass
#                        suite    build/ (RelWithDebInfo, gcc): every test, the real-Slurm ones too
#                        package  scripts/package-test.sh: the .debs from a clean copy, lintian,
#                                 `apt-get install ./….deb`, the real-Slurm integration tests
#                                 against the installed plugin and files, purge
#                        fuzz     scripts/fuzz.sh: every libFuzzer target (clang, ASan + UBSan,
#                                 build-fuzz/) for FUZZ_SECONDS (default 30) each
#                        asan     build-asan/ (gcc, ASan + UBSan): the suite that can run under
#                                 them, see run_sanitized_suite
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)

configure_and_build() {  # configure_and_build BUILD_DIR CMAKE_OPTIONS...
  local dir=$1
  shift
  cmake -S . -B "$dir" "$@"
  cmake --build "$dir" -j"$jobs"
}

run_suite() {  # run_suite BUILD_DIR: every test, the real-Slurm ones included
  configure_and_build "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPETTE_SANITIZE=OFF
  ctest --test-dir "$1" --output-on-failure -j"$jobs"
}

# Under ASan + UBSan every test runs except the `slurm` label (tests/slurm/CMakeLists.txt):
#  - slurm.submission, plan_job, failure_policy and badinput load spank_pipette.so into Debian's
#    sbatch, srun, slurmd and slurmstepd, which are not built with ASan; an ASan shared object
#    refuses to load into a process whose first library is not the ASan runtime;
#  - slurm.plugin_symbols checks the shipped shape of the .so (exports, NEEDED libraries), which an
#    ASan build changes by design (it needs libasan and libubsan, which need libstdc++).
# The plugin's own work in those paths runs here as unit tests (spank_logic_tests, badinput_tests,
# the CLI tests that run the `pipette` binary) and under valgrind in the suite (label valgrind,
# not registered in a sanitizer build: valgrind cannot run an ASan binary). The `gpu` check runs
# (it skips without two GPUs). Benchmarks are not tests and are not built.
# A sanitizer report fails the test that hits it: UBSan's too (the build passes
# -fno-sanitize-recover=all; halt_on_error covers a runtime built without it), and leaks count.
# protect_shadow_gap=0 lets the CUDA runtime map device memory in pipette-probe's GPU check. A
# subshell, so that these settings reach no later CI step (the fuzzers set their own).
run_sanitized_suite() (  # run_sanitized_suite BUILD_DIR
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:print_stacktrace=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1:protect_shadow_gap=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  configure_and_build "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPETTE_SANITIZE=ON -DPIPETTE_BUILD_BENCH=OFF
  ctest --test-dir "$1" --output-on-failure -j"$jobs" --label-exclude slurm
)

run_release_build() {  # run_release_build BUILD_DIR
  configure_and_build "$1" -DCMAKE_BUILD_TYPE=Release -DPIPETTE_SANITIZE=OFF
  ctest --test-dir "$1" --output-on-failure -j"$jobs" --label-regex unit
}

if [ "${CI:-false}" != true ]; then
  bash scripts/install-deps.sh
  if [ "${PIPETTE_SANITIZE:-0}" = 1 ]; then
    run_sanitized_suite "${BUILD_DIR:-build}"
  else
    run_suite "${BUILD_DIR:-build}"
  fi
  exit 0
fi

step_times=()
current_step=""
minutes() { echo "$(($1 / 60))m$(printf '%02d' $(($1 % 60)))s"; }
step() {  # step NAME COMMAND...: runs one CI step and records its wall time
  current_step=$1
  step_start=$SECONDS
  shift
  echo "==== CI step $current_step: $*"
  "$@"
  step_times+=("$current_step $(minutes $((SECONDS - step_start)))")
  current_step=""
}
timing_summary() {
  local status=$? summary
  [ -n "$current_step" ] && step_times+=("$current_step FAILED after $(minutes $((SECONDS - step_start)))")
  summary=$(printf ' | %s' "${step_times[@]}")
  echo "CI step times:${summary# |} | total $(minutes $SECONDS)$([ "$status" -eq 0 ] || echo ", exit $status")"
}
trap timing_summary EXIT

step deps bash scripts/install-deps.sh
step release run_release_build build-release
step suite run_suite "${BUILD_DIR:-build}"
step package bash scripts/package-test.sh
step fuzz bash scripts/fuzz.sh
step asan run_sanitized_suite build-asan
