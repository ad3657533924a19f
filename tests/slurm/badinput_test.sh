#!/usr/bin/env bash
# The Slurm-level rows of the bad-input matrix (README "Reliability") that failure_policy_test.sh
# does not cover: very long and out-of-range option values and non-finite cache values (files the
# job user may not read: job_user_test.sh). Each bad input must give its message and job outcome,
# and no node may be drained nor any slurmd restarted. The unit-level rows are tests/hardening/badinput_test.cpp.
source "$(dirname "$0")/lib.sh"

write_link_cache "$work_dir/links.yaml"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml"
start_cluster "config=$site_file"

job_args=(-N2 --ntasks-per-node=8 --gres=gpu:8 --pipette=auto)
model_args=(--pipette-model=llama2-7b --pipette-batch=256 --pipette-seq=4096)

# Very long environment values: refused at submission, or run unplanned, never a crash.
long_fix=$(printf 'tp=8,%.0s' $(seq 1 20000))  # 100,000 characters
refused long-fix "PIPETTE_FIX: \"tp=8\": tp is given twice" PIPETTE_FIX="$long_fix" -- --pipette "${model_args[@]}"
long_model=$(head -c 100000 /dev/zero | tr '\0' m)
PIPETTE_MODEL=$long_model expect_unplanned long-model "unknown model preset" "${job_args[@]}" --pipette-batch=256 --pipette-seq=4096

# Out-of-range values.
refused huge-batch "--pipette-batch: invalid value '16777217' (expected a positive number of sequences, at most 16777216)" \
  -- --pipette --pipette-batch=16777217
refused negative-seq "--pipette-seq: invalid value '-4096'" -- --pipette --pipette-seq=-4096
refused huge-seq "--pipette-seq: invalid value '2147483647' (expected a positive number of tokens, at most 16777216)" \
  -- --pipette --pipette-seq=2147483647

# Non-finite values in the cache the site file names.
printf 'pipette_link_cache: 1\nnodes: {}\npairs:\n  n1 n2: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: .inf, latency_us: 5}\n' \
  >"$work_dir/inf-links.yaml"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/inf-links.yaml"
expect_unplanned inf-cache "bandwidth_gb_per_s is inf" "${job_args[@]}" "${model_args[@]}"

expect_cluster_healthy "the Slurm-level bad inputs"
finish
