#!/usr/bin/env bash
# Bad inputs never break a node or silently change a job: by default the job runs unplanned with
# PIPETTE_STATUS=error:<reason> (and the reason in its stderr); with --pipette-strict it fails with
# exit 1 and the reason in its stderr. No node is ever drained and no slurmd restarts.
source "$(dirname "$0")/lib.sh"

write_link_cache "$work_dir/links.yaml"
good_site=("gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml")
write_site_file "${good_site[@]}"
start_cluster "config=$site_file"

job_args=(-N4 --ntasks-per-node=8 --gres=gpu:8 --pipette=auto)
model_args=(--pipette-model=llama2-7b --pipette-batch=256 --pipette-seq=4096)

printf 'name: broken\nnum_layers: [32\n' >"$work_dir/malformed-model.yaml"
chmod 0644 "$work_dir/malformed-model.yaml"
printf 'pipette_link_cache: 1\nnodes: {}\npairs:\n  n1 n2: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: nan, latency_us: 5}\n' \
  >"$work_dir/corrupt-links.yaml"
chmod 0644 "$work_dir/corrupt-links.yaml"

# check_case NAME REASON [--no-gpus] [sbatch arguments...]: check_unplanned on this test's layout.
check_case() {
  local name=$1 reason=$2; shift 2
  local layout=("${job_args[@]}")
  [ "${1:-}" = --no-gpus ] && { layout=(-N4 --ntasks-per-node=8 --pipette=auto); shift; }
  check_unplanned "$name" "$reason" "${layout[@]}" "$@"
}

check_case unknown-preset "no-such-model" --pipette-model=no-such-model --pipette-batch=256 --pipette-seq=4096
check_case malformed-model "malformed-model.yaml" --pipette-model="$work_dir/malformed-model.yaml" \
  --pipette-batch=256 --pipette-seq=4096
check_case impossible-tp "tp" "${model_args[@]}" --pipette-fix=tp=3
check_case no-gpus "GPU" --no-gpus "${model_args[@]}"

write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/no-such-links.yaml" "  require_measurements: true"
check_case missing-cache "no-such-links.yaml" "${model_args[@]}"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/corrupt-links.yaml"
check_case corrupt-cache "corrupt-links.yaml" "${model_args[@]}"

write_site_file "${good_site[@]}" "colour: blue"
check_case malformed-site "colour" "${model_args[@]}"
write_site_file "${good_site[@]}"
chmod 0666 "$site_file"
check_case world-writable-site "world-writable" "${model_args[@]}"
write_site_file "${good_site[@]}"
chown 65534 "$site_file"
check_case foreign-site "owned by uid 65534" "${model_args[@]}"
rm -f "$site_file"
check_case missing-site "No such file or directory" "${model_args[@]}"

expect_cluster_healthy "the bad-input matrix"
finish
