#!/usr/bin/env bash
# `sbatch -N4 --pipette=auto` on a real cluster of 4 nodes × 8 GPUs: the batch script sees the
# plan, an srun inside it gets RANK etc. forming a bijection equal to PIPETTE_RANK_ORDER, the same
# plan on every node and in every job (plan hash); also with --export=NONE, with the environment
# alone, in plan-only mode, with one launcher per node, and for an MoE model (ep, etp).
source "$(dirname "$0")/lib.sh"

write_link_cache "$work_dir/links.yaml"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml"
start_cluster "config=$site_file"

plan_variables="PIPETTE_TP PIPETTE_PP PIPETTE_DP PIPETTE_CP PIPETTE_VPP PIPETTE_MICRO_BATCH PIPETTE_GLOBAL_BATCH
  PIPETTE_NUM_MICROBATCHES PIPETTE_RECOMPUTE PIPETTE_SEQUENCE_PARALLEL PIPETTE_DISTRIBUTED_OPTIMIZER
  PIPETTE_RANK_ORDER PIPETTE_NODE_ORDER PIPETTE_PREDICTED_ITER_MS PIPETTE_PREDICTED_MEM_GIB
  PIPETTE_PLAN_HASH PIPETTE_MEGATRON_ARGS PIPETTE_STATUS"
job_args=(-N4 --ntasks-per-node=8 --gres=gpu:8)
model_args=(--pipette-model=llama2-7b --pipette-batch=256 --pipette-seq=4096)

expect_batch_plan() {  # expect_batch_plan WHAT PREFIX [GLOBAL_BATCH]
  local name
  for name in $plan_variables; do
    [ -n "$(batch_variable "$2" "$name")" ] || fail "$1: batch script lacks $name"
  done
  expect_eq "$1: PIPETTE_STATUS" ok "$(batch_variable "$2" PIPETTE_STATUS)"
  local tp pp dp cp
  tp=$(batch_variable "$2" PIPETTE_TP); pp=$(batch_variable "$2" PIPETTE_PP); dp=$(batch_variable "$2" PIPETTE_DP)
  cp=$(batch_variable "$2" PIPETTE_CP)
  expect_eq "$1: tp × cp × pp × dp = 32 GPUs" 32 "$((tp * cp * pp * dp))"
  expect_eq "$1: global batch" "${3:-256}" "$(batch_variable "$2" PIPETTE_GLOBAL_BATCH)"
  expect_contains "$1: Megatron arguments" "--tensor-model-parallel-size $tp --pipeline-model-parallel-size $pp" "$2.batch-env"
}

# Every task line: procid node rank local_rank world local_world node_rank addr port hash order status pet.
expect_remapped_tasks() {  # expect_remapped_tasks WHAT PREFIX
  local tasks=$2.tasks hash order
  hash=$(batch_variable "$2" PIPETTE_PLAN_HASH)
  order=$(batch_variable "$2" PIPETTE_RANK_ORDER)
  expect_eq "$1: 32 tasks reported" 32 "$(wc -l <"$tasks")"
  expect_eq "$1: every task has the batch step's plan hash" "$hash" "$(awk '{print $10}' "$tasks" | sort -u | tr -d '\n')"
  expect_eq "$1: every task has the same rank order" "$order" "$(awk '{print $11}' "$tasks" | sort -u | tr -d '\n')"
  expect_eq "$1: RANK is a bijection onto 0..31" "$(seq 0 31 | tr '\n' ' ')" "$(awk '{print $3}' "$tasks" | sort -n | tr '\n' ' ')"
  local mismatches
  mismatches=$(awk -v order="$order" 'BEGIN { n = split(order, o, ",") }
    { if (o[$3 + 1] != $1) print "task " $1 " plays rank " $3 " but PIPETTE_RANK_ORDER[" $3 "] = " o[$3 + 1] }' "$tasks")
  expect_eq "$1: PIPETTE_RANK_ORDER[RANK] = SLURM_PROCID for every task" "" "$mismatches"
  expect_eq "$1: LOCAL_RANK = SLURM_LOCALID" "" "$(awk '$4 != $1 % 8 {print $1}' "$tasks")"
  expect_eq "$1: WORLD_SIZE and LOCAL_WORLD_SIZE" "32 8" "$(awk '{print $5, $6}' "$tasks" | sort -u | tr -d '\n')"
  expect_eq "$1: one MASTER_ADDR:MASTER_PORT" 1 "$(awk '{print $8 ":" $9}' "$tasks" | sort -u | wc -l)"
  expect_eq "$1: MASTER_ADDR is the node of rank 0" "$(awk '$3 == 0 {print $2}' "$tasks")" "$(awk 'NR == 1 {print $8}' "$tasks")"
  local node_order expected_node_ranks
  node_order=$(batch_variable "$2" PIPETTE_NODE_ORDER)
  expected_node_ranks=$(awk -v order="$node_order" 'BEGIN { n = split(order, o, ","); for (i = 1; i <= n; i++) r[o[i]] = i - 1 }
    $7 != r[$2] { print "task " $1 " on " $2 " has NODE_RANK " $7 }' "$tasks")
  expect_eq "$1: NODE_RANK follows PIPETTE_NODE_ORDER" "" "$expected_node_ranks"
}

run_batch auto "${job_args[@]}" --pipette=auto "${model_args[@]}" "$rank_job" "$work_dir/auto"
expect_eq "auto: job exit status" 0 "$batch_status"
expect_batch_plan auto "$work_dir/auto"
expect_remapped_tasks auto "$work_dir/auto"
order=$(batch_variable "$work_dir/auto" PIPETTE_RANK_ORDER)
[ "$order" != "$(seq -s, 0 31)" ] && pass "auto: the degraded n1-n2 link moves ranks off Slurm's order ($order)" ||
  fail "auto: rank order is Slurm's own despite the degraded n1-n2 link"
expect_not_contains "auto: nothing on the job's stderr" "pipette" "$work_dir/auto.err"
for step in batch 0; do
  grep -h "pipette $expected_version: job $job_id step $step node " "$PIPETTE_SLURM_DIR"/log/slurmd-n*.log | grep -q "tp=" &&
    pass "slurmd log has the plugin's version and plan line for step $step" ||
    fail "no 'pipette $expected_version: job $job_id step $step node N: tp=...' line in the slurmd logs"
done
# What the plan assumed reaches the slurmd log once per step, from the step's first node.
expect_eq "the slurmd logs note once where the batch step's GPU model came from" 1 \
  "$(grep -h "pipette: job $job_id step batch: note: GPU H100-SXM from the site file's \`gpu\`" \
    "$PIPETTE_SLURM_DIR"/log/slurmd-n*.log | wc -l)"

# Determinism: another job, separately planned on every node, gets the same plan.
run_batch again "${job_args[@]}" --pipette=auto "${model_args[@]}" "$rank_job" "$work_dir/again"
expect_eq "a second job gets the same plan hash" "$(batch_variable "$work_dir/auto" PIPETTE_PLAN_HASH)" \
  "$(batch_variable "$work_dir/again" PIPETTE_PLAN_HASH)"
expect_remapped_tasks again "$work_dir/again"

# --export=NONE: the batch step gets no option callbacks, only Slurm's forwarded option variables.
run_batch export-none "${job_args[@]}" --export=NONE --pipette=auto "${model_args[@]}" "$rank_job" "$work_dir/none"
expect_eq "--export=NONE: job exit status" 0 "$batch_status"
expect_batch_plan "--export=NONE" "$work_dir/none"
expect_remapped_tasks "--export=NONE" "$work_dir/none"

# The environment alone switches Pipette on.
PIPETTE=auto PIPETTE_MODEL=llama2-7b PIPETTE_BATCH=256 PIPETTE_SEQ=4096 \
  run_batch env-only "${job_args[@]}" "$rank_job" "$work_dir/env"
expect_batch_plan "environment only" "$work_dir/env"
expect_remapped_tasks "environment only" "$work_dir/env"
expect_eq "environment only: same plan as the command line" "$(batch_variable "$work_dir/auto" PIPETTE_PLAN_HASH)" \
  "$(batch_variable "$work_dir/env" PIPETTE_PLAN_HASH)"

# plan: the variables, but no rank remapping.
run_batch plan "${job_args[@]}" --pipette=plan "${model_args[@]}" "$rank_job" "$work_dir/plan"
expect_batch_plan plan "$work_dir/plan"
expect_eq "plan: no task gets RANK" "-" "$(awk '{print $3}' "$work_dir/plan.tasks" | sort -u | tr -d '\n')"
expect_eq "plan: every task has the plan" ok "$(awk '{print $12}' "$work_dir/plan.tasks" | sort -u | tr -d '\n')"

# One launcher per node (torchrun): NODE_RANK and torchrun's PET_* defaults follow the node order.
run_batch per-node "${job_args[@]}" --pipette=auto "${model_args[@]}" "$rank_job" "$work_dir/launcher" --ntasks=4 --ntasks-per-node=1
expect_eq "per node: 4 launchers" 4 "$(wc -l <"$work_dir/launcher.tasks")"
node_order=$(batch_variable "$work_dir/launcher" PIPETTE_NODE_ORDER)
launcher_ranks=$(awk -v order="$node_order" 'BEGIN { n = split(order, o, ","); for (i = 1; i <= n; i++) r[o[i]] = i - 1 }
  $7 != r[$2] || $13 != r[$2] || $5 != 4 { print "launcher on " $2 ": NODE_RANK " $7 ", PET_NODE_RANK " $13 ", WORLD_SIZE " $5 }' \
  "$work_dir/launcher.tasks")
expect_eq "per node: NODE_RANK = PET_NODE_RANK = position in PIPETTE_NODE_ORDER" "" "$launcher_ranks"

# --pipette-framework: torchtitan's options instead of Megatron's, planned by torchtitan's rules.
run_batch torchtitan "${job_args[@]}" --pipette=auto --pipette-framework=torchtitan "${model_args[@]}" "$rank_job" \
  "$work_dir/torchtitan"
expect_eq "torchtitan: job exit status" 0 "$batch_status"
expect_contains "torchtitan: its options" "PIPETTE_TORCHTITAN_ARGS=--parallelism.tensor_parallel_degree" \
  "$work_dir/torchtitan.batch-env"
expect_eq "torchtitan: no Megatron arguments" "" "$(batch_variable "$work_dir/torchtitan" PIPETTE_MEGATRON_ARGS)"
expect_eq "torchtitan: replicated data parallelism" 0 "$(batch_variable "$work_dir/torchtitan" PIPETTE_DISTRIBUTED_OPTIMIZER)"
expect_remapped_tasks torchtitan "$work_dir/torchtitan"

# Engine switches (issue 14): nanotron re-gathering its TP inputs, as its main branch does by
# default (the profile's default keeps them, as its releases do); the overrides the batch script
# gets say so (nanotron's config/parallelism_config.py l.36 key).
run_batch nanotron-engine "${job_args[@]}" --pipette=auto --pipette-framework=nanotron \
  --pipette-engine=tp-recompute-allgather=on "${model_args[@]}" "$rank_job" "$work_dir/nanotron"
expect_eq "nanotron engine: job exit status" 0 "$batch_status"
expect_contains "nanotron engine: the switch reaches nanotron's overrides" "parallelism.tp_recompute_allgather=true" \
  "$work_dir/nanotron.batch-env"

# Issue 17: an MoE model. qwen3-30b-a3b (etc/models/qwen3-30b-a3b.yaml: 128 experts, top 8) on
# the 4 × 8 H100 plans expert parallelism; the batch script sees the expert layout, and the
# Megatron arguments carry it with the MoE layer as priced (core/src/launch.cpp
# megatron_arguments). ep divides the 128 experts and ep × etp a stage's tp × cp × dp ranks
# (Megatron-LM arguments.py @d98e8a64 l.1655-1658, parallel_state.py l.874-884).
run_batch moe "${job_args[@]}" --pipette=auto --pipette-model=qwen3-30b-a3b --pipette-batch=256 --pipette-seq=4096 \
  "$rank_job" "$work_dir/moe"
expect_eq "MoE: job exit status" 0 "$batch_status"
expect_eq "MoE: PIPETTE_STATUS" ok "$(batch_variable "$work_dir/moe" PIPETTE_STATUS)"
moe_tp=$(batch_variable "$work_dir/moe" PIPETTE_TP); moe_dp=$(batch_variable "$work_dir/moe" PIPETTE_DP)
moe_ep=$(batch_variable "$work_dir/moe" PIPETTE_EP); moe_etp=$(batch_variable "$work_dir/moe" PIPETTE_ETP)
moe_cp=$(batch_variable "$work_dir/moe" PIPETTE_CP)
expect_eq "MoE: expert parallelism planned (ep > 1)" 1 "$((moe_ep > 1))"
expect_eq "MoE: ep divides the 128 experts" 0 "$((128 % moe_ep))"
expect_eq "MoE: ep × etp divides a stage's tp × cp × dp ranks" 0 "$((moe_tp * moe_cp * moe_dp % (moe_ep * moe_etp)))"
expect_contains "MoE: Megatron's expert layout" \
  "--expert-model-parallel-size $moe_ep --expert-tensor-parallel-size $moe_etp --num-experts 128 --moe-router-topk 8" \
  "$work_dir/moe.batch-env"
expect_contains "MoE: the dispatcher and GEMMs as priced" "--moe-token-dispatcher-type alltoall --moe-grouped-gemm" \
  "$work_dir/moe.batch-env"
expect_remapped_tasks MoE "$work_dir/moe"

# A long-context job (issue 17): at 128K tokens the plan splits each sequence over cp GPUs, which
# the variables, Megatron's arguments and the rank order (tp fastest, then cp) carry.
run_batch long-context "${job_args[@]}" --pipette=auto --pipette-model=llama3-8b --pipette-batch=32 --pipette-seq=131072 \
  "$rank_job" "$work_dir/long"
expect_eq "long context: job exit status" 0 "$batch_status"
expect_batch_plan "long context" "$work_dir/long" 32
long_cp=$(batch_variable "$work_dir/long" PIPETTE_CP)
[ "${long_cp:-1}" -gt 1 ] && pass "long context: PIPETTE_CP=$long_cp" || fail "long context: PIPETTE_CP is '$long_cp', not > 1"
expect_contains "long context: Megatron's --context-parallel-size" "--context-parallel-size $long_cp " "$work_dir/long.batch-env"
expect_contains "long context: Megatron's --seq-length" "--seq-length 131072 " "$work_dir/long.batch-env"
expect_remapped_tasks "long context" "$work_dir/long"

# Per-task GPU binding: each task sees one GPU (CUDA_VISIBLE_DEVICES=k), so LOCAL_RANK is 0,
# the one device it can use, while RANK still follows the placement.
run_batch per-task "${job_args[@]}" --pipette=auto "${model_args[@]}" "$rank_job" "$work_dir/per-task" --gpus-per-task=1
expect_eq "--gpus-per-task=1: job exit status" 0 "$batch_status"
expect_eq "--gpus-per-task=1: 32 tasks" 32 "$(wc -l <"$work_dir/per-task.tasks")"
expect_eq "--gpus-per-task=1: every LOCAL_RANK is 0" 0 "$(awk '{print $4}' "$work_dir/per-task.tasks" | sort -u | tr -d '\n')"
expect_eq "--gpus-per-task=1: RANK is a bijection onto 0..31" "$(seq 0 31 | tr '\n' ' ')" \
  "$(awk '{print $3}' "$work_dir/per-task.tasks" | sort -n | tr '\n' ' ')"
per_task_order=$(batch_variable "$work_dir/per-task" PIPETTE_RANK_ORDER)
expect_eq "--gpus-per-task=1: PIPETTE_RANK_ORDER[RANK] = SLURM_PROCID" "" "$(awk -v order="$per_task_order" \
  'BEGIN { split(order, o, ",") } o[$3 + 1] != $1 { print $1 }' "$work_dir/per-task.tasks")"

# A requeued job keeps its first start's layout (issue 15), even on other nodes: the first start
# on two nodes records it, `scontrol requeue` restarts the job (SLURM_RESTART_COUNT=1) on the two
# others, where the step reads it back.
requeue_job=$work_dir/requeue_job.sh
cat >"$requeue_job" <<'JOB'
#!/bin/bash
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
start=${SLURM_RESTART_COUNT:-0}
env | grep '^PIPETTE_' | grep -v '^PIPETTE_SLURM_DIR=' | sort >"$1.batch-env.$start"
echo "$SLURM_JOB_NODELIST" >"$1.nodes.$start"
[ "$start" = 0 ] && sleep 120
exit 0
JOB
chmod 0755 "$requeue_job"
requeued=$(sbatch --parsable --requeue -N2 --ntasks-per-node=8 --gres=gpu:8 --pipette=plan "${model_args[@]}" \
  -o "$work_dir/requeue.out" -e "$work_dir/requeue.err" "$requeue_job" "$work_dir/requeue")
wait_for() {  # wait_for FILE SECONDS
  local deadline=$((SECONDS + $2))
  while [ ! -s "$1" ] && ((SECONDS < deadline)); do sleep 0.2; done
  [ -s "$1" ]
}
if wait_for "$work_dir/requeue.batch-env.0" 60; then
  record=$work_dir/.pipette-layout-$requeued
  expect_eq "requeue: the first start recorded its layout, for its user alone" "600 root" "$(stat -c '%a %U' "$record" 2>&1)"
  scontrol requeue "$requeued"
  scontrol update jobid="$requeued" ExcNodeList="$(cat "$work_dir/requeue.nodes.0")"
  scontrol release "$requeued" 2>/dev/null
  if wait_for "$work_dir/requeue.batch-env.1" 240; then
    expect_eq "requeue: the restart ran on other nodes" different \
      "$([ "$(cat "$work_dir/requeue.nodes.0")" != "$(cat "$work_dir/requeue.nodes.1")" ] && echo different || echo same)"
    for name in PIPETTE_STATUS PIPETTE_TP PIPETTE_PP PIPETTE_DP PIPETTE_VPP PIPETTE_MICRO_BATCH PIPETTE_NUM_MICROBATCHES \
      PIPETTE_RECOMPUTE PIPETTE_SEQUENCE_PARALLEL PIPETTE_DISTRIBUTED_OPTIMIZER PIPETTE_MEGATRON_ARGS; do
      expect_eq "requeue: $name as in the first start" "$(sed -n "s/^$name=//p" "$work_dir/requeue.batch-env.0")" \
        "$(sed -n "s/^$name=//p" "$work_dir/requeue.batch-env.1")"
    done
    grep -h "pipette: job $requeued step batch keeps the layout recorded in $record" "$PIPETTE_SLURM_DIR"/log/slurmd-n*.log >/dev/null &&
      pass "requeue: the slurmd log says the restart kept the recorded layout" ||
      fail "requeue: no 'job $requeued step batch keeps the layout recorded' line in the slurmd logs"
  else
    fail "requeue: the restart of job $requeued did not run within 240 s ($(job_field "$requeued" JobState))"
  fi
else
  fail "requeue: job $requeued did not start within 60 s"
fi
scancel "$requeued" 2>/dev/null
for _ in $(seq 1 100); do [ -z "$(squeue -h -j "$requeued" 2>/dev/null)" ] && break; sleep 0.2; done

# A corrupt record is never taken for a layout: the job runs unplanned and says which file to delete.
corrupt=$(sbatch --parsable --hold -o "$work_dir/corrupt.out" -e "$work_dir/corrupt.err" "${job_args[@]}" --pipette=auto \
  "${model_args[@]}" "$rank_job" "$work_dir/corrupt")
printf 'pipette_layout: 1\nfix: tp=3\n' >"$work_dir/.pipette-layout-$corrupt"
scontrol release "$corrupt"
for _ in $(seq 1 600); do
  case "$(job_field "$corrupt" JobState)" in PENDING | CONFIGURING | RUNNING | COMPLETING) sleep 0.1 ;; *) break ;; esac
done
expect_eq "corrupt record: the job ran unplanned" "COMPLETED 0:0" "$(job_field "$corrupt" JobState) $(job_field "$corrupt" ExitCode)"
expect_contains "corrupt record: PIPETTE_STATUS names the file and the fix" \
  "PIPETTE_STATUS=error:layout record $work_dir/.pipette-layout-$corrupt is corrupt (" "$work_dir/corrupt.batch-env"
expect_contains "corrupt record: the reason in the job's stderr" "delete it to plan the job afresh" "$work_dir/corrupt.err"
expect_eq "corrupt record: no task gets RANK" "-" "$(awk '{print $3}' "$work_dir/corrupt.tasks" | sort -u | tr -d '\n')"

# A record of another job that had this id (the controller's ids restart when its state is
# cleared) is not this job's layout: the batch step plans afresh, says so, and replaces it.
foreign=$(sbatch --parsable --hold -o "$work_dir/foreign.out" -e "$work_dir/foreign.err" "${job_args[@]}" --pipette=auto \
  "${model_args[@]}" "$rank_job" "$work_dir/foreign")
foreign_record=$work_dir/.pipette-layout-$foreign
printf 'pipette_layout: 2\nfix: tp=1,pp=32,dp=1,mbs=1,vpp=1,recompute=full,sp=off,distopt=off\nsplit: %s\ngpus: 32\nplan: 0123456789abcdef\nrequest: model=llama3-70b batch=64 seq=2048 framework=default\n' \
  "$(seq -s, 32 | sed 's/[0-9]\+/1/g')" >"$foreign_record"
chmod 0600 "$foreign_record"
scontrol release "$foreign"
for _ in $(seq 1 600); do
  case "$(job_field "$foreign" JobState)" in PENDING | CONFIGURING | RUNNING | COMPLETING) sleep 0.1 ;; *) break ;; esac
done
expect_eq "foreign record: the job ran" "COMPLETED 0:0" "$(job_field "$foreign" JobState) $(job_field "$foreign" ExitCode)"
expect_contains "foreign record: the job is planned" "PIPETTE_STATUS=ok" "$work_dir/foreign.batch-env"
expect_eq "foreign record: the pp a fresh plan gives, not the recorded one" "$(sed -n 's/^PIPETTE_PP=//p' "$work_dir/auto.batch-env")" \
  "$(sed -n 's/^PIPETTE_PP=//p' "$work_dir/foreign.batch-env")"
expect_eq "foreign record: replaced by this job's" "request: model=llama2-7b batch=256 seq=4096 framework=default" \
  "$(grep '^request: ' "$foreign_record")"
grep -h "pipette: job $foreign: the layout record $foreign_record was planned for another request" \
  "$PIPETTE_SLURM_DIR"/log/slurmd-n*.log >/dev/null &&
  pass "foreign record: the slurmd log says why the record was not used" ||
  fail "foreign record: no 'was planned for another request' line in the slurmd logs"

# Without Pipette nothing changes.
run_batch off "${job_args[@]}" "$rank_job" "$work_dir/off"
expect_eq "off: no PIPETTE_ variable" "" "$(cat "$work_dir/off.batch-env")"
expect_eq "off: no RANK" "-" "$(awk '{print $3}' "$work_dir/off.tasks" | sort -u | tr -d '\n')"

expect_cluster_healthy "planned jobs"
finish
