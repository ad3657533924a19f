#!/usr/bin/env bash
# The README's main command: install the build dependencies, build the plugin, start a local
# Slurm cluster of 4 nodes × 8 (fake) GPUs that loads it, submit etc/examples/pipette_job.sh with
# sbatch (--pipette=auto), show what the job printed, and stop the cluster again.
# Run as root on Debian 12. Environment: BUILD_DIR (default build), PIPETTE_SLURM_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

bash scripts/install-deps.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" --target spank_pipette -j"$(nproc)"
plugin=$(cd "$build_dir" && pwd)/spank/spank_pipette.so

export PIPETTE_SLURM_DIR=${PIPETTE_SLURM_DIR:-/tmp/pipette-demo}
mkdir -p "$PIPETTE_SLURM_DIR"
chmod 0755 "$PIPETTE_SLURM_DIR"
trap 'bash "$repo/scripts/slurm-cluster.sh" stop >/dev/null' EXIT

# This machine has no GPUs for hwloc to recognise: the site file says which GPU the fake ones
# are; the link cache holds (synthetic) measurements of the four nodes, one pair degraded.
site_file=$PIPETTE_SLURM_DIR/pipette.yaml
links=$PIPETTE_SLURM_DIR/links.yaml
bash scripts/slurm/write-links.sh "$links"
printf 'gpu: H100-SXM\nlinks:\n  cache: %s\n' "$links" >"$site_file"
chmod 0644 "$site_file"

bash scripts/slurm-cluster.sh stop >/dev/null
PIPETTE_SLURM_PLUGSTACK="required $plugin config=$site_file" bash scripts/slurm-cluster.sh start
eval "$(bash scripts/slurm-cluster.sh env)"

output=$PIPETTE_SLURM_DIR/pipette-example.out
# The job is submitted from the run directory, where the plugin keeps its layout record
# (.pipette-layout-JOBID, README "Requeued and restarted jobs"). This cluster is new and numbers
# its jobs from 1 again, so a record left by an earlier demo would be taken for this job's.
rm -f "$PIPETTE_SLURM_DIR"/.pipette-layout-*
echo
echo "\$ sbatch --wait etc/examples/pipette_job.sh      # --pipette=auto --pipette-model=llama2-7b ..."
(cd "$PIPETTE_SLURM_DIR" && sbatch --wait --output="$output" "$repo/etc/examples/pipette_job.sh")
echo
cat "$output"
