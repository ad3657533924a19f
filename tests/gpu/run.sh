#!/usr/bin/env bash
# GPU check of pipette-probe on one multi-GPU machine, without Slurm: starts one probe task per
# GPU with the variables srun would set (one node, so only the intra-node rounds run), checks the
# link cache it writes, runs it again and checks that the merge kept everything.
#
# On a machine without GPUs it prints "skipped: no GPU" and exits 0 (ctest shows it as skipped).
# Environment: PIPETTE_PROBE=path of a built pipette-probe (else it is built in BUILD_DIR,
# default build-gpu, with PIPETTE_BUILD_PROBE=ON).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "skipped: no GPU (nvidia-smi is not installed)"
  exit 0
fi
gpu_count=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c '^[0-9]' || true)
if [ "$gpu_count" -eq 0 ]; then
  echo "skipped: no GPU (nvidia-smi finds none)"
  exit 0
fi
if [ "$gpu_count" -lt 2 ]; then
  echo "skipped: one GPU; the intra-node rounds need two (NCCL refuses two ranks on one GPU)"
  exit 0
fi

probe=${PIPETTE_PROBE:-}
if [ -z "$probe" ]; then
  build_dir=${BUILD_DIR:-build-gpu}
  cmake -S . -B "$build_dir" -DPIPETTE_BUILD_PROBE=ON -DPIPETTE_BUILD_TESTS=OFF -DPIPETTE_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build_dir" --target pipette-probe -j"$(nproc)"
  probe=$build_dir/tools/probe/pipette-probe
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node=$(hostname -s)
cache=$work/links.yaml

run_probe() {  # $1: label, then extra probe options
  local label=$1
  shift
  local pids=() rank status=0
  for ((rank = 0; rank < gpu_count; rank++)); do
    SLURM_PROCID=$rank SLURM_NTASKS=$gpu_count SLURM_LOCALID=$rank SLURM_NODEID=0 SLURMD_NODENAME=$node \
      SLURM_JOB_ID=gpucheck SLURM_STEP_ID=$label \
      "$probe" --out "$cache" --rendezvous "$work" --sizes 64K,1M,16M,64M --warmup 3 --iters 10 --timeout 120 "$@" \
      >"$work/$label.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  cat "$work/$label.rank0.log"
  if [ "$status" -ne 0 ]; then
    for ((rank = 1; rank < gpu_count; rank++)); do cat "$work/$label.rank$rank.log"; done
    echo "FAIL: pipette-probe ($label) exited non-zero" >&2
    exit 1
  fi
}

check_cache() {  # the node's entry: gpu_count × gpu_count, every GPU pair measured and plausible
  python3 - "$cache" "$node" "$gpu_count" <<'PY'
import datetime, re, sys
path, node, gpus = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(path).read()
assert re.search(r"^pipette_link_cache: 1$", text, re.M), "no format version line"
line = next((l for l in text.splitlines() if l.startswith("  %s: {" % node)), None)
assert line, "no entry for node %s" % node
def matrix(key):
    found = re.search(key + r": \[(\[.*?\](?:, \[.*?\])*)\]", line)
    assert found, "no %s in %s" % (key, line)
    return [[float(x) for x in row.split(",")] for row in re.findall(r"\[([^\[\]]*)\]", found.group(1))]
assert re.search(r"gpus: %d\b" % gpus, line), "gpus is not %d" % gpus
bandwidth, latency = matrix("bandwidth_gb_per_s"), matrix("latency_us")
assert len(bandwidth) == gpus and all(len(row) == gpus for row in bandwidth), "bandwidth matrix is not %dx%d" % (gpus, gpus)
for i in range(gpus):
    for j in range(gpus):
        if i != j:
            assert 1.0 < bandwidth[i][j] < 2000.0, "GPU %d->%d: %.2f GB/s is implausible" % (i, j, bandwidth[i][j])
            assert 0.0 <= latency[i][j] < 1000.0, "GPU %d->%d: %.2f us is implausible" % (i, j, latency[i][j])
            assert bandwidth[i][j] == bandwidth[j][i], "GPU pair %d-%d: directions differ" % (i, j)
assert re.search(r"nccl_version: \d+\.\d+\.\d+", line), "no NCCL version"
stamp = re.search(r"measured_at: (\S+?)[,}]", line).group(1)
measured = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
age = (datetime.datetime.now(datetime.timezone.utc) - measured).total_seconds()
assert -60 < age < 3600, "measured_at %s is not recent" % stamp
off = [bandwidth[i][j] for i in range(gpus) for j in range(gpus) if i != j]
print("cache ok: %s, %d GPUs, GPU-pair bandwidth %.1f..%.1f GB/s" % (node, gpus, min(off), max(off)))
PY
}

echo "== pipette-probe on $node, $gpu_count GPUs: intra-node rounds"
run_probe first
check_cache
cp "$cache" "$work/after-first.yaml"
echo "== second run with --no-intra: nothing new to record, nothing may be lost"
run_probe second --no-intra
check_cache
if ! grep -q "^  $node: " "$work/after-first.yaml" || ! diff <(grep "^  $node: " "$work/after-first.yaml") <(grep "^  $node: " "$cache"); then
  echo "FAIL: the node entry changed although the second run measured no GPU pair" >&2
  exit 1
fi

# --collectives needs two nodes: with 4 or more GPUs, the two halves of this machine stand in for
# two nodes (SLURM_NODEID 0 and 1, names $node-a and $node-b), and the curve's 2-node point must
# land in a cache of its own as format 3 with plausible bus bandwidths.
if [ "$gpu_count" -ge 4 ] && [ $((gpu_count % 2)) -eq 0 ]; then
  echo "== --collectives over two half-machine pseudo-nodes"
  half=$((gpu_count / 2))
  curve=$work/collectives.yaml
  pids=()
  status=0
  for ((rank = 0; rank < gpu_count; rank++)); do
    pseudo=$((rank / half))
    SLURM_PROCID=$rank SLURM_NTASKS=$gpu_count SLURM_LOCALID=$((rank % half)) SLURM_NODEID=$pseudo \
      SLURMD_NODENAME=$node-$([ "$pseudo" -eq 0 ] && echo a || echo b) SLURM_JOB_ID=gpucheck SLURM_STEP_ID=collectives \
      CUDA_VISIBLE_DEVICES=$rank "$probe" --out "$curve" --rendezvous "$work" --sizes 1M,16M --warmup 3 --iters 10 \
      --timeout 120 --no-intra --collectives --collective-size 64M >"$work/collectives.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  cat "$work/collectives.rank0.log"
  if [ "$status" -ne 0 ]; then
    echo "FAIL: pipette-probe --collectives exited non-zero" >&2
    exit 1
  fi
  python3 - "$curve" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
assert re.search(r"^pipette_link_cache: 3$", text, re.M), "a cache with a curve is not format 3"
line = next((l for l in text.splitlines() if l.startswith("  2: {")), None)
assert line, "no 2-node entry under collectives:"
for key in ("all_reduce_bus_gb_per_s", "all_gather_bus_gb_per_s"):
    value = float(re.search(key + r": ([0-9.e+-]+)", line).group(1))
    assert 1.0 < value < 5000.0, "%s %.2f GB/s is implausible" % (key, value)
assert "message_bytes: 67108864" in line, "the entry does not record --collective-size"
print("curve ok: " + line.strip())
PY
fi
echo "PASS: pipette-probe GPU check on $node"
