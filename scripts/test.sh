#!/usr/bin/env bash
# Builds Pipette and runs every test: unit tests, CLI tests and the integration tests against a
# real local Slurm cluster. Installs the Debian packages it needs first (as root).
# Environment: BUILD_DIR (default build), PIPETTE_SANITIZE=1 for an ASan+UBSan build.
# With CI=true it then also runs every fuzzer for FUZZ_SECONDS (default 30) each (scripts/fuzz.sh,
# clang with ASan and UBSan in build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

build_dir=${BUILD_DIR:-build}
sanitize=OFF
[ "${PIPETTE_SANITIZE:-0}" = 1 ] && sanitize=ON

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPETTE_SANITIZE="$sanitize"
cmake --build "$build_dir" -j"$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)"

if [ "${CI:-false}" = true ]; then
  bash scripts/fuzz.sh
fi
