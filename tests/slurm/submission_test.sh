#!/usr/bin/env bash
# sbatch, salloc and srun list Pipette's options, reject invalid values and command line vs
# environment conflicts before anything is queued, accept a repeated identical value, and a bad
# plugstack.conf only refuses the jobs that ask for Pipette.
source "$(dirname "$0")/lib.sh"

start_cluster
for tool in sbatch salloc srun; do
  "$tool" --help >"$work_dir/$tool.help" 2>&1
  for option in "--pipette=auto|plan|off" "--pipette-model=PRESET|FILE" "--pipette-batch=SEQUENCES" \
    "--pipette-seq=TOKENS" "--pipette-fix=KNOB=VALUE" "--pipette-strict" "--pipette-engine=KEY=VALUE" \
    "--pipette-precision=fp32|fp16|bf16|fp8"; do
    expect_contains "$tool --help lists $option" "$option" "$work_dir/$tool.help"
  done
done

refused bad-mode "pipette: --pipette: invalid value 'fast' (expected auto, plan or off)" -- --pipette=fast
refused zero-batch "pipette: --pipette-batch: invalid value '0' (expected a positive number of sequences, at most 16777216)" \
  -- --pipette --pipette-batch=0
refused bad-seq "pipette: --pipette-seq: invalid value '4k' (expected a positive number of tokens, at most 16777216)" \
  -- --pipette --pipette-seq=4k
refused empty-model "pipette: --pipette-model: invalid value ''" -- --pipette --pipette-model=
refused bad-precision "pipette: --pipette-precision: invalid value 'fp9' (expected fp32, fp16, bf16 or fp8)" \
  -- --pipette --pipette-precision=fp9
refused bad-env "pipette: PIPETTE_BATCH: invalid value 'many' (expected a positive number of sequences, at most 16777216)" \
  PIPETTE_BATCH=many -- --pipette
refused bad-env-strict "pipette: PIPETTE_STRICT: invalid value 'maybe'" PIPETTE_STRICT=maybe -- --pipette
refused cli-env-conflict \
  "pipette: --pipette-model=llama2-7b conflicts with PIPETTE_MODEL=llama2-70b in the environment" \
  PIPETTE_MODEL=llama2-70b -- --pipette --pipette-model=llama2-7b
refused mode-conflict "pipette: --pipette=off conflicts with PIPETTE=auto in the environment" \
  PIPETTE=auto -- --pipette=off
refused given-twice "pipette: --pipette given twice with different values ('plan' and 'auto')" \
  -- --pipette=plan --pipette=auto

# README "Options": the cases of issue 19, with the plugin loaded `optional` as the Debian package
# loads it (lib.sh), where Slurm ignores init_post_opt's return value.
refused issue-seq "pipette: PIPETTE_SEQ: invalid value 'abc'" PIPETTE_SEQ=abc -- --pipette --pipette-batch=256
refused issue-batch-conflict \
  "pipette: --pipette-batch=256 conflicts with PIPETTE_BATCH=512 in the environment; unset PIPETTE_BATCH or make them agree" \
  PIPETTE_BATCH=512 -- --pipette --pipette-batch=256
refused issue-mode-conflict "pipette: --pipette=auto conflicts with PIPETTE=off in the environment" \
  PIPETTE=off -- --pipette=auto
# No --pipette* option at all: nothing but the environment asks for Pipette or is invalid.
for tool in sbatch salloc srun; do
  refused_by "$tool" "$tool-env-only-seq" "pipette: PIPETTE_SEQ: invalid value 'abc' (expected a positive number of tokens, at most 16777216)" \
    PIPETTE=auto PIPETTE_SEQ=abc -- -N1
  expect_contains "$tool-env-only-seq: Slurm names the refusal" "Invalid argument (refused, see the pipette error above)" \
    "$work_dir/$tool-env-only-seq.out"
  refused_by "$tool" "$tool-env-only-strict" "pipette: PIPETTE_STRICT: invalid value 'maybe'" PIPETTE_STRICT=maybe -- -N1
  refused_by "$tool" "$tool-bad-option" "pipette: --pipette: invalid value 'sometimes'" -- -N1 --pipette=sometimes
  refused_by "$tool" "$tool-conflict" "pipette: --pipette-seq=4096 conflicts with PIPETTE_SEQ=8192" \
    PIPETTE_SEQ=8192 -- -N1 --pipette --pipette-seq=4096
done
# A batch script's #SBATCH lines are options like the command line's.
printf '#!/bin/bash\n#SBATCH --pipette --pipette-batch=256\ntrue\n' >"$work_dir/sbatch-lines.sh"
before=$(scontrol -o show jobs | grep -c JobId)
PIPETTE_BATCH=512 sbatch -N1 "$work_dir/sbatch-lines.sh" >"$work_dir/sbatch-lines.out" 2>&1 &&
  fail "#SBATCH --pipette-batch=256 with PIPETTE_BATCH=512 was queued" || pass "#SBATCH line conflict refused"
expect_contains "#SBATCH line conflict: message" "--pipette-batch=256 conflicts with PIPETTE_BATCH=512" "$work_dir/sbatch-lines.out"
expect_eq "#SBATCH line conflict: nothing queued" "$before" "$(scontrol -o show jobs | grep -c JobId)"

# Inside a job, srun inherits the job's options: a changed variable or another value refuses it.
run_batch inner-srun --pipette=off --pipette-batch=256 --wrap \
  'PIPETTE_BATCH=512 srun -N1 true; echo "variable $?"; srun --pipette-batch=512 -N1 true; echo "option $?"'
expect_contains "inner srun: a changed PIPETTE_BATCH refuses it" "variable 1" "$work_dir/inner-srun.out"
expect_contains "inner srun: the reason" "--pipette-batch=256 conflicts with PIPETTE_BATCH=512" "$work_dir/inner-srun.err"
expect_contains "inner srun: another --pipette-batch refuses it" "option 255" "$work_dir/inner-srun.out"
expect_contains "inner srun: the reason" "--pipette-batch given twice with different values ('256' and '512')" \
  "$work_dir/inner-srun.err"

# The same value twice (Slurm itself may call an option's callback twice) and agreeing sources run.
run_batch same-twice --pipette=off --pipette=off --wrap true
expect_eq "--pipette=off twice runs" 0 "$batch_status"
PIPETTE_MODEL=llama2-7b run_batch cli-env-agree --pipette=off --pipette-model=llama2-7b --wrap true
expect_eq "agreeing --pipette-model and PIPETTE_MODEL run" 0 "$batch_status"
expect_cluster_healthy "submission checks"

# A plugstack.conf argument the plugin does not know: jobs without Pipette are unaffected, jobs
# that ask for it are refused with a message that names the argument.
start_cluster config=relative/pipette.yaml
run_batch no-pipette --wrap true
expect_eq "bad plugstack.conf: a job without --pipette runs" 0 "$batch_status"
refused bad-plugstack "pipette: plugstack.conf: config=relative/pipette.yaml must be an absolute path" \
  -- --pipette
expect_cluster_healthy "a bad plugstack.conf"
finish
