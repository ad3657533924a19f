#!/bin/bash
# An example job for Pipette: 4 nodes × 8 GPUs, one task per GPU. The plugin plans the job when
# it starts; this script prints the plan and then what every task was told (its rank and its
# tensor/data/pipeline position), where a real job would start its training processes:
#
#   srun python pretrain_gpt.py ... $PIPETTE_MEGATRON_ARGS        (Megatron-LM, see README.md)
#   srun python run_recipe.py ... $PIPETTE_NEMO_OVERRIDES         (--pipette-framework=nemo)
#   srun torchrun ... -m torchtitan.train ... $PIPETTE_TORCHTITAN_ARGS   (--pipette-framework=torchtitan)
#
#SBATCH --job-name=pipette-example
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=8
#SBATCH --gres=gpu:8
#SBATCH --pipette=auto
#SBATCH --pipette-model=llama2-7b
#SBATCH --pipette-batch=256
#SBATCH --pipette-seq=4096

if [ "${PIPETTE_STATUS:-}" != ok ]; then
  echo "Pipette did not plan this job (PIPETTE_STATUS=${PIPETTE_STATUS:-unset}); it runs as submitted."
fi
echo "Plan ${PIPETTE_PLAN_HASH:-}: tp=${PIPETTE_TP:-} pp=${PIPETTE_PP:-} dp=${PIPETTE_DP:-} vpp=${PIPETTE_VPP:-}" \
  "micro-batch=${PIPETTE_MICRO_BATCH:-} x ${PIPETTE_NUM_MICROBATCHES:-} micro-batches (global batch ${PIPETTE_GLOBAL_BATCH:-})"
echo "  recompute=${PIPETTE_RECOMPUTE:-} sequence-parallel=${PIPETTE_SEQUENCE_PARALLEL:-}" \
  "distributed-optimizer=${PIPETTE_DISTRIBUTED_OPTIMIZER:-}"
echo "  predicted ${PIPETTE_PREDICTED_ITER_MS:-} ms per iteration, ${PIPETTE_PREDICTED_MEM_GIB:-} GiB per GPU at peak"
echo "  node order (NODE_RANK 0, 1, ...): ${PIPETTE_NODE_ORDER:-}"
echo "  Megatron-LM arguments: ${PIPETTE_MEGATRON_ARGS:-}"
echo
echo "task  node  GPU  RANK  (tp, dp, pp)"
srun bash -c '
  if [ -n "${RANK:-}" ]; then
    tp=$((RANK % PIPETTE_TP)); dp=$((RANK / PIPETTE_TP % PIPETTE_DP)); pp=$((RANK / (PIPETTE_TP * PIPETTE_DP)))
    printf "%4d  %4s  %3d  %4d  (%d, %d, %d)\n" "$SLURM_PROCID" "$SLURMD_NODENAME" "$LOCAL_RANK" "$RANK" "$tp" "$dp" "$pp"
  else
    printf "%4d  %4s  %3d  unplanned\n" "$SLURM_PROCID" "$SLURMD_NODENAME" "$SLURM_LOCALID"
  fi' | sort -n
