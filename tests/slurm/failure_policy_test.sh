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

# --pipette-strict fails the job in every launch shape (issue 19: with the plugin loaded
# `optional`, Slurm ignores task_init's -1 and such jobs ended COMPLETED 0:0).
strict_args=(--pipette --pipette-strict --pipette-model=no-such-model --pipette-batch=256 --pipette-seq=4096)
strict_reason="pipette: cannot plan the job step, failing it (--pipette-strict): unknown model preset 'no-such-model'"
job_named() {  # job_named NAME: the id of the job called NAME
  scontrol -o show jobs | tr ' ' '\n' | awk -v name="JobName=$1" '/^JobId=/ {id = substr($0, 7)} $0 == name {print id}'
}
expect_failed_job() {  # expect_failed_job WHAT JOB_ID STDERR_FILE
  # srun returns while its job may still be COMPLETING: wait (60 s at most) for the final state.
  for _ in $(seq 1 600); do
    case "$(job_field "$2" JobState)" in RUNNING | COMPLETING) sleep 0.1 ;; *) break ;; esac
  done
  expect_eq "$1: job FAILED 1:0" "FAILED 1:0" "$(job_field "$2" JobState) $(job_field "$2" ExitCode)"
  expect_contains "$1: the reason in its stderr" "$strict_reason" "$3"
}
run_batch strict-wrap -N2 --ntasks-per-node=8 --gres=gpu:8 "${strict_args[@]}" --wrap "touch $work_dir/strict-wrap.ran"
expect_failed_job "--wrap" "$job_id" "$work_dir/strict-wrap.err"
[ -e "$work_dir/strict-wrap.ran" ] && fail "--wrap: the command ran" || pass "--wrap: the command never ran"
printf '#!/bin/bash\ntouch %s\n' "$work_dir/strict-script.ran" >"$work_dir/no-srun.sh"
run_batch strict-script -N2 --ntasks-per-node=8 --gres=gpu:8 "${strict_args[@]}" "$work_dir/no-srun.sh"
expect_failed_job "batch script without srun" "$job_id" "$work_dir/strict-script.err"
[ -e "$work_dir/strict-script.ran" ] && fail "batch script without srun: it ran" || pass "batch script without srun: it never ran"
srun -J strict-srun -N2 --ntasks-per-node=8 --gres=gpu:8 "${strict_args[@]}" touch "$work_dir/strict-srun.ran" \
  >"$work_dir/strict-srun.out" 2>&1
expect_eq "srun alone: exit 1" 1 "$?"
expect_failed_job "srun alone" "$(job_named strict-srun)" "$work_dir/strict-srun.out"
[ -e "$work_dir/strict-srun.ran" ] && fail "srun alone: a task ran" || pass "srun alone: no task ran"
salloc -J strict-salloc -N2 --ntasks-per-node=8 --gres=gpu:8 "${strict_args[@]}" \
  srun touch "$work_dir/strict-salloc.ran" >"$work_dir/strict-salloc.out" 2>&1
expect_eq "salloc + srun: exit 1" 1 "$?"
expect_failed_job "salloc + srun" "$(job_named strict-salloc)" "$work_dir/strict-salloc.out"
[ -e "$work_dir/strict-salloc.ran" ] && fail "salloc + srun: a task ran" || pass "salloc + srun: no task ran"
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
