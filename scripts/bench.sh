#!/usr/bin/env bash
# Regenerates every figure and plot of bench/RESULTS.md in one go: builds the benchmark programs
# (RelWithDebInfo, the project's default optimisation; tests off), runs each that exists, keeps their raw output under
# $BUILD_DIR/bench-results/, and rewrites the generated blocks of bench/RESULTS.md (between
# "<!-- BEGIN name -->" and "<!-- END name -->" markers) and the figures under bench/.
# Works on a clean clone after scripts/install-deps.sh.
#
# Environment: BUILD_DIR (default build-bench), JOBS (default 2: the build machine is shared),
# QUICK=1 for a smoke run (small comparison matrix, short benchmark runs; RESULTS.md untouched).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${BUILD_DIR:-build-bench}
jobs=${JOBS:-2}
quick=${QUICK:-0}
results_dir="$build_dir/bench-results"
results_md=bench/RESULTS.md

# Programs: every bench/*_bench.cpp (Google Benchmark) and every executable a bench/<dir>/CMakeLists.txt adds.
mapfile -t gbench < <(find bench -maxdepth 1 -name '*_bench.cpp' -printf '%f\n' | sed 's/\.cpp$//' | sort)
mapfile -t reports < <(find bench -mindepth 2 -maxdepth 2 -name CMakeLists.txt -exec \
  sed -n 's/^[[:space:]]*add_executable(\([A-Za-z0-9_-]*\).*/\1/p' {} + | sort)

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPETTE_BUILD_TESTS=OFF -DPIPETTE_BUILD_BENCH=ON >/dev/null
cmake --build "$build_dir" -j"$jobs" --target "${gbench[@]}" "${reports[@]}"
rm -rf "$results_dir"
mkdir -p "$results_dir"

# Replaces the block between the markers of `name` in RESULTS.md with the contents of `file`.
splice() {
  local name=$1 file=$2
  python3 - "$results_md" "$name" "$file" <<'EOF'
import sys
path, name, file = sys.argv[1:]
text = open(path).read()
begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
if begin not in text or end not in text:
    sys.exit(f"bench.sh: {path} has no {begin} ... {end} block; add one where the figure belongs")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + "\n" + open(file).read().rstrip("\n") + "\n" + end + tail)
EOF
}

machine="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, \
$(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -r), \
$(c++ --version | head -1), $(date -u +%Y-%m-%d)"

min_time=()
[ "$quick" = 1 ] && min_time=(--benchmark_min_time=0.01)
for name in "${gbench[@]}"; do
  echo "== $name"
  "$build_dir/bench/$name" "${min_time[@]}" --benchmark_counters_tabular=true \
    --benchmark_out="$results_dir/$name.json" --benchmark_out_format=json | tee "$results_dir/$name.txt"
done

for name in "${reports[@]}"; do
  echo "== $name"
  program=$(find "$build_dir/bench" -type f -name "$name" -perm -u+x | head -1)
  case "$name" in
    plan_comparison)
      if [ "$quick" = 1 ]; then
        "$program" --quick --out-dir "$results_dir" | tee "$results_dir/$name.md"
      else
        "$program" --out-dir bench/compare --markdown "$results_dir/$name.md"
      fi
      ;;
    fidelity) "$program" | tee "$results_dir/$name.md" ;;  # what scripts/fidelity.sh splices
    calibrate_check) "$program" | tee "$results_dir/$name.md" ;;
    *) "$program" | tee "$results_dir/$name.txt" ;;
  esac
done

[ "$quick" = 1 ] && { echo "bench.sh: quick run done; outputs in $results_dir (RESULTS.md untouched)"; exit 0; }

echo "Machine: $machine. Command: \`scripts/bench.sh\`." > "$results_dir/machine.md"
splice machine "$results_dir/machine.md"
for block in plan_comparison fidelity calibrate_check; do
  if [ -f "$results_dir/$block.md" ]; then splice "$block" "$results_dir/$block.md"; fi
done
if [ -f "$results_dir/jobstart_bench.txt" ]; then
  { echo '```'; grep -v '^\*\*\*' "$results_dir/jobstart_bench.txt"; echo '```'; } > "$results_dir/jobstart.md"
  splice jobstart_bench "$results_dir/jobstart.md"
fi
echo "bench.sh: bench/RESULTS.md and the figures under bench/ regenerated; raw outputs in $results_dir"
