#!/usr/bin/env bash
# sbatch, salloc and srun list Pipette's options, reject invalid values and command line vs
# environment conflicts before anything is queued, accept a repeated identical value, and a bad
# plugstack.conf only refuses the jobs that ask for Pipette.
source "$(dirname "$0")/lib.sh"

start_cluster
for tool in sbatch salloc srun; do
  "$tool" --help >"$work_dir/$tool.help" 2>&1
  for option in "--pipette=auto|plan|off" "--pipette-model=PRESET|FILE" "--pipette-batch=SEQUENCES" \
    "--pipette-seq=TOKENS" "--pipette-fix=KNOB=VALUE" "--pipette-strict"; do
    expect_contains "$tool --help lists $option" "$option" "$work_dir/$tool.help"
  done
done

refused bad-mode "pipette: --pipette: invalid value 'fast' (expected auto, plan or off)" -- --pipette=fast
refused zero-batch "pipette: --pipette-batch: invalid value '0' (expected a positive number of sequences)" \
  -- --pipette --pipette-batch=0
refused bad-seq "pipette: --pipette-seq: invalid value '4k' (expected a positive number of tokens)" \
  -- --pipette --pipette-seq=4k
refused empty-model "pipette: --pipette-model: invalid value ''" -- --pipette --pipette-model=
refused bad-env "pipette: PIPETTE_BATCH: invalid value 'many' (expected a positive number of sequences)" \
  PIPETTE_BATCH=many -- --pipette
refused bad-env-strict "pipette: PIPETTE_STRICT: invalid value 'maybe'" PIPETTE_STRICT=maybe -- --pipette
refused cli-env-conflict \
  "pipette: --pipette-model=llama2-7b conflicts with PIPETTE_MODEL=llama2-70b in the environment" \
  PIPETTE_MODEL=llama2-70b -- --pipette --pipette-model=llama2-7b
refused mode-conflict "pipette: --pipette=off conflicts with PIPETTE=auto in the environment" \
  PIPETTE=auto -- --pipette=off
refused given-twice "pipette: --pipette given twice with different values ('plan' and 'auto')" \
  -- --pipette=plan --pipette=auto

srun --pipette=sometimes -N1 true >"$work_dir/srun-bad.out" 2>&1 && fail "srun accepted --pipette=sometimes" ||
  pass "srun refuses --pipette=sometimes"
expect_contains "srun: message" "pipette: --pipette: invalid value 'sometimes'" "$work_dir/srun-bad.out"

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
