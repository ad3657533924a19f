#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang-14, ASan and UBSan in their own build directory,
# then runs each for a bounded time on a corpus seeded from etc/, tests/data and fuzz/seeds.
# Any crash, sanitizer report, violated property, timeout or out-of-memory fails the script and
# leaves the input under $FUZZ_BUILD_DIR/fuzz-artifacts/<target>/; turn it into a regression test.
#
# Environment:
#   FUZZ_SECONDS     seconds per target (default 30)
#   FUZZ_TARGETS     space-separated targets (default: every target the build defines)
#   FUZZ_BUILD_DIR   build directory (default build-fuzz)
#   FUZZ_BUILD_JOBS  parallel compile jobs (default 2)
# Reproduce a crash: $FUZZ_BUILD_DIR/fuzz/<target> <artifact file>
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-30}
build_jobs=${FUZZ_BUILD_JOBS:-2}

mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPIPETTE_SANITIZE=ON -DPIPETTE_FUZZ=ON -DPIPETTE_BUILD_TESTS=OFF -DPIPETTE_BUILD_BENCH=OFF \
  -DPIPETTE_BUILD_PROBE=OFF >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
cmake --build "$build_dir" -j"$build_jobs" --target fuzzers

all_targets=$(cd "$build_dir/fuzz" && ls -- *_fuzz)
targets=${FUZZ_TARGETS:-$all_targets}

# Seed files of a target, referenced where they live (never copied into fuzz/).
seed_files() {
  case "$1" in
    site_config_fuzz | model_file_fuzz | job_start_planner_fuzz)
      find etc tests/data -name '*.yaml' -type f 2>/dev/null ;;
    link_cache_fuzz)
      find fuzz/seeds/link_cache etc tests/data -name '*.yaml' -type f 2>/dev/null ;;
    topology_conf_fuzz)
      find fuzz/seeds/topology_conf etc tests/data -name '*.conf' -type f 2>/dev/null ;;
    run_records_fuzz)
      find tests/data/run-records fuzz/seeds/run_records -type f 2>/dev/null ;;
    *)
      local dir=fuzz/seeds/${1%_fuzz}
      [ -d "$dir" ] && find "$dir" -type f ;;
  esac
}

# A target's own options: short inputs for one-line grammars.
target_options() {
  case "$1" in
    hostlist_fuzz | fixed_knobs_fuzz | plugin_options_fuzz) echo "-max_len=1024" ;;
    # The plugin's planning budget (site file `planning:`, defaults): 4096 MiB.
    job_start_planner_fuzz) echo "-rss_limit_mb=4096" ;;
    *) echo "" ;;
  esac
}

summary="$build_dir/fuzz-summary.txt"
: >"$summary"
failed=()
total_inputs=0
for target in $targets; do
  binary="$build_dir/fuzz/$target"
  [ -x "$binary" ] || { echo "fuzz: no target $target (have: $all_targets)" >&2; exit 2; }
  corpus="$build_dir/fuzz-corpus/$target"     # grows across local runs
  seeds="$build_dir/fuzz-seeds/$target"
  artifacts="$build_dir/fuzz-artifacts/$target"
  log="$build_dir/fuzz-logs/$target.log"
  rm -rf "$seeds"
  mkdir -p "$corpus" "$seeds" "$artifacts" "$(dirname "$log")"
  while IFS= read -r file; do
    [ -n "$file" ] && ln -sf "$PWD/$file" "$seeds/$(echo "$file" | tr / _)"
  done < <(seed_files "$target")
  dictionary=fuzz/dictionaries/${target%_fuzz}.dict
  [ "$target" = job_start_planner_fuzz ] && dictionary=fuzz/dictionaries/model_file.dict  # its input is a model file
  dictionary_option=()
  [ -f "$dictionary" ] && dictionary_option=(-dict="$dictionary")

  echo "fuzz: $target for ${seconds}s ($(ls "$seeds" | wc -l) seed files)"
  status=0
  # shellcheck disable=SC2046
  "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dictionary_option[@]}" $(target_options "$target") \
    "$corpus" "$seeds" >"$log" 2>&1 || status=$?
  inputs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  inputs=${inputs:-0}
  total_inputs=$((total_inputs + inputs))
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
    echo "fuzz: $target FAILED (exit $status) after $inputs inputs; log $log, input in $artifacts/" >&2
    grep -E -A30 'ERROR: |runtime error|fuzz property violated|==[0-9]+==' "$log" | head -60 >&2 || tail -40 "$log" >&2
  fi
  printf '%-22s %12d inputs  %s\n' "$target" "$inputs" "$([ "$status" -eq 0 ] && echo ok || echo "FAILED (exit $status)")" | tee -a "$summary"
done
printf '%-22s %12d inputs  %d failed, %ss per target\n' total "$total_inputs" "${#failed[@]}" "$seconds" | tee -a "$summary"
[ "${#failed[@]}" -eq 0 ]
