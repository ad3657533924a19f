#!/usr/bin/env bash
# Rebuilds the model-fidelity report and writes it into bench/RESULTS.md between the
# "<!-- BEGIN fidelity -->" and "<!-- END fidelity -->" markers (scripts/bench.sh's convention): predicted vs published iteration time / throughput for every row of
# ../shared/ground_truth_data/{megatron_sc21_table1,korthikanti2022_tables,
# nvidia_nemo_megatron_bridge_perf_summary}.csv (and the extra, never-fitted tables), per source the
# median and worst error of time split into rows used for fitting and rows held out, the memory
# figures of ultrascale_dp_tp_scaling.csv (memory has no fitted constant: all held out), whether
# every published run is predicted to fit, and the plans the search picks for SC21 Table 1.
# bench/fidelity/data/ holds the tables kept in the repository (BLOOM-176B on Jean Zay, Megatron-DeepSpeed; its
# prototypes' memory and time; torchtitan's FSDP + CP memory; its eager FSDP runs' memory and time).
# Environment: BUILD_DIR (default build). `fidelity --fit` refits the efficiency constants.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
[ -f "$build_dir/CMakeCache.txt" ] || cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build_dir" --target fidelity -j2
table=$("$build_dir/bench/fidelity/fidelity")
python3 - "$table" <<'PY'
import sys
table = sys.argv[1]
path = "bench/RESULTS.md"
text = open(path).read()
begin, end = "<!-- BEGIN fidelity -->", "<!-- END fidelity -->"
section = begin + "\n" + table.rstrip("\n") + "\n" + end
if begin in text and end in text:
    text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(text)
PY
echo "fidelity: bench/RESULTS.md updated"
