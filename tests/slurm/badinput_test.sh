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

# What planning may cost (issue 19). A model file far beyond the physical ranges is refused with
# file, line and the allowed range; one inside them that plans for long (1024 layers, a global
# batch of 2^20: about 12 s on this machine) stops at the site's planning.time_limit_seconds.
# Neither leaves a step COMPLETING or a node drained (expect_cluster_healthy below).
printf 'num_layers: 1000000000\nhidden_size: 4096\nnum_attention_heads: 32\nvocab_size: 32000\n' >"$work_dir/huge-layers.yaml"
check_unplanned huge-layers "$work_dir/huge-layers.yaml:1: key 'num_layers' must be an integer from 1 to 1024 (got 1000000000)" \
  "${job_args[@]}" --pipette-model="$work_dir/huge-layers.yaml" --pipette-batch=256 --pipette-seq=4096
printf 'num_layers: 1024\nhidden_size: 1024\nnum_attention_heads: 16\nvocab_size: 32000\n' >"$work_dir/deep.yaml"
slow_args=("${job_args[@]}" --pipette-model="$work_dir/deep.yaml" --pipette-batch=1048576 --pipette-seq=4096)
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml" "planning:" "  time_limit_seconds: 2"
start=$SECONDS
check_unplanned over-time "planning took longer than 2 s (the site's planning.time_limit_seconds)" "${slow_args[@]}"
((SECONDS - start < 60)) && pass "over-time: both jobs ended within 60 s" || fail "over-time: the jobs took $((SECONDS - start)) s"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml" "planning:" "  memory_limit_mib: 64"
check_unplanned over-memory "planning needed more than 64 MiB of memory (the site's planning.memory_limit_mib)" "${slow_args[@]}"
# scancel while a step plans: the job ends within the time limit and leaves the node in service.
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml"
cancelled=$(sbatch --parsable -o /dev/null -e /dev/null "${slow_args[@]}" --wrap true)
for _ in $(seq 1 50); do [ "$(job_field "$cancelled" JobState)" = RUNNING ] && break; sleep 0.1; done
sleep 1
scancel "$cancelled"
start=$SECONDS
while ((SECONDS - start < 40)); do
  case "$(job_field "$cancelled" JobState)" in RUNNING | COMPLETING) sleep 0.2 ;; *) break ;; esac
done
expect_eq "scancel while planning: job cancelled" CANCELLED "$(job_field "$cancelled" JobState)"
((SECONDS - start <= 13)) && pass "scancel while planning: ended within the 8 s time limit and a margin" ||
  fail "scancel while planning: took $((SECONDS - start)) s"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml"

# Non-finite values in the cache the site file names.
printf 'pipette_link_cache: 1\nnodes: {}\npairs:\n  n1 n2: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: .inf, latency_us: 5}\n' \
  >"$work_dir/inf-links.yaml"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/inf-links.yaml"
expect_unplanned inf-cache "bandwidth_gb_per_s is inf" "${job_args[@]}" "${model_args[@]}"

expect_cluster_healthy "the Slurm-level bad inputs"
finish
