#!/usr/bin/env bash
# `pipette calibrate --slurm-job` on a real cluster: a job the plugin plans (every knob fixed)
# prints Megatron-LM's own log lines (arguments block, iteration lines, report_memory lines, in the
# formats of megatron/training/{arguments.py:1990,training.py:3567,utils/common_utils.py:313} at
# Megatron-LM d98e8a64) with a time 20% and a peak memory 30% above what the plan predicted;
# calibrate finds the job's output (scontrol show job) and the plan the plugin kept in the user's
# state directory, fits, writes the calibration file the site file names, and the next job's plan
# predicts with it. Usage: calibrate_test.sh PLUGIN VERSION [PIPETTE_BINARY] (default: the
# `pipette` on PATH, as scripts/package-test.sh runs it against the installed package)
source "$(dirname "$0")/lib.sh"
pipette=$(realpath "${3:-$(command -v pipette)}") || { echo "usage: $0 PLUGIN VERSION [PIPETTE_BINARY]: no pipette binary" >&2; exit 1; }

write_link_cache "$work_dir/links.yaml"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml" \
  "calibration:" "  file: $work_dir/calibration.yaml"
start_cluster "config=$site_file"
export XDG_STATE_HOME=$work_dir/state  # the plan records of root's jobs stay inside this test

megatron_job=$work_dir/megatron_job.sh
cat >"$megatron_job" <<'JOB'
#!/bin/bash
# Prints what Megatron-LM prints, with the layout Pipette planned and measurements 20% (time) and
# 30% (memory) above its predictions.
arg() { printf '  %s %s %s\n' "$1" "$(printf '%*s' $((48 - ${#1})) '' | tr ' ' .)" "$2"; }
echo "------------------------ arguments ------------------------"
{
  arg data_parallel_size "$PIPETTE_DP"; arg global_batch_size "$PIPETTE_GLOBAL_BATCH"; arg hidden_size 4096
  arg micro_batch_size "$PIPETTE_MICRO_BATCH"; arg num_attention_heads 32; arg num_layers 32
  arg pipeline_model_parallel_size "$PIPETTE_PP"; arg recompute_granularity "$PIPETTE_RECOMPUTE"
  arg seq_length 4096; arg sequence_parallel True; arg tensor_model_parallel_size "$PIPETTE_TP"
  arg use_distributed_optimizer True; arg virtual_pipeline_model_parallel_size None; arg world_size 16
} | sort -f
echo "-------------------- end of arguments ---------------------"
ms=$(awk -v p="$PIPETTE_PREDICTED_ITER_MS" 'BEGIN { printf "%.1f", 1.2 * p }')
for it in 10 20 30 40 50 60 70 80; do
  printf ' [2026-12-02 10:00:%02d.000000] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s | global batch size: %5d | lm loss: 9.000000E+00 | loss scale: 1.0 |\n' \
    "$((it / 2))" "$it" 80 "$((it * 128))" "$([ "$it" = 10 ] && echo 30000.0 || echo "$ms")" 128
  [ "$it" = 10 ] && awk -v g="$PIPETTE_PREDICTED_MEM_GIB" 'BEGIN {
    printf "[Rank 0] (after 10 iterations) memory (MB) | allocated: %.2f | max allocated: %.2f | reserved: %.2f | max reserved: %.2f\n",
      600 * g, 1.1 * 1024 * g, 1.3 * 1024 * g, 1.3 * 1024 * g }'
done
env | grep '^PIPETTE_PREDICTED' | sort >"$1.predicted"
JOB
chmod 0755 "$megatron_job"

job_args=(-N2 --ntasks-per-node=8 --gres=gpu:8 --pipette=plan --pipette-model=llama3-8b --pipette-batch=128 --pipette-seq=4096
  --pipette-fix=tp=2,pp=2,dp=4,mbs=1,vpp=1,recompute=selective,sp=on,distopt=on)
run_batch first "${job_args[@]}" "$megatron_job" "$work_dir/first"
expect_eq "first job: exit status" 0 "$batch_status"
first_job=$job_id
plans=("$XDG_STATE_HOME"/pipette/jobs/*-"$first_job".plan)
[ -f "${plans[0]}" ] && pass "the plugin kept the plan (${plans[0]})" || fail "no plan record for job $first_job"
expect_eq "the plan record is private to the user" 600 "$(stat -c %a "${plans[0]}" 2>&1)"
expect_eq "its directory too" 700 "$(stat -c %a "$XDG_STATE_HOME/pipette/jobs" 2>&1)"
expect_contains "the plan record holds the layout" "tp=2" "${plans[0]}"
expect_contains "the plan record holds the layer split" "layers_per_stage=" "${plans[0]}"
expect_contains "the plan record holds the framework" "framework=megatron-core" "${plans[0]}"

"$pipette" calibrate --site "$site_file" --slurm-job "$first_job" >"$work_dir/calibrate.out" 2>"$work_dir/calibrate.err"
expect_eq "pipette calibrate --slurm-job: exit status" 0 "$?"
sed 's/^/    /' "$work_dir/calibrate.out" "$work_dir/calibrate.err"
expect_contains "calibrate read the job's log" "first.out:1  max reserved" "$work_dir/calibrate.out"
expect_contains "calibrate wrote the site's file" "wrote megatron-core on H100-SXM into $work_dir/calibration.yaml" "$work_dir/calibrate.out"
expect_contains "the calibration file holds a fitted factor" "_uncertainty" "$work_dir/calibration.yaml"

run_batch second "${job_args[@]}" "$megatron_job" "$work_dir/second"
expect_eq "second job: exit status" 0 "$batch_status"
before=$(sed -n 's/^PIPETTE_PREDICTED_MEM_GIB=//p' "$work_dir/first.predicted")
after=$(sed -n 's/^PIPETTE_PREDICTED_MEM_GIB=//p' "$work_dir/second.predicted")
awk -v b="$before" -v a="$after" 'BEGIN { exit !(a > 1.1 * b) }' &&
  pass "the next plan predicts with the calibration: peak memory $before GiB -> $after GiB" ||
  fail "the next plan's predicted memory ($after GiB) does not follow the calibration (was $before GiB)"

# Another user's job, or a job Pipette never planned, is refused with the reason.
"$pipette" calibrate --site "$site_file" --slurm-job 999999 >/dev/null 2>"$work_dir/unknown.err"
expect_eq "an unknown job: exit 1" 1 "$?"
expect_contains "an unknown job: the reason" "scontrol show job does not know it" "$work_dir/unknown.err"
expect_cluster_healthy "calibrate"
finish
