# Shared by the integration tests: a private Slurm cluster per test (scripts/slurm-cluster.sh in a
# fresh directory, random ports), stopped and removed on exit whatever happens, and small checks
# that count failures instead of stopping at the first.
#
# A test script sources this file with the plugin's path as $1 and calls `finish` at the end.
set -uo pipefail

source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
plugin=$(realpath "${1:?usage: $0 PATH/TO/spank_pipette.so VERSION}")
expected_version=${2:-}  # what pipette::version() returns, for the log line
test_name=$(basename "$0" .sh)
failures=0
checks=0

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: $test_name needs root (it starts slurmd, which runs jobs as their users)"
  exit 77
fi

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/pipette-$test_name.XXXXXX")
chmod 0755 "$work_dir"
# Jobs are submitted from here: it is their SLURM_SUBMIT_DIR, where a planned job records its
# layout for a restart (.pipette-layout-<job id>).
cd "$work_dir" || exit 1
export PIPETTE_SLURM_DIR="$work_dir/cluster"
export SLURM_CONF="$PIPETTE_SLURM_DIR/etc/slurm.conf"
# The submitting environment must not leak into the jobs the tests submit.
unset PIPETTE PIPETTE_MODEL PIPETTE_BATCH PIPETTE_SEQ PIPETTE_FIX PIPETTE_STRICT PIPETTE_FRAMEWORK
unset SLURM_JOB_ID SLURM_JOBID
unset "${!SLURM_SPANK_@}"
slurmd_pids_at_start=""

cleanup() {
  bash "$source_dir/scripts/slurm-cluster.sh" stop >/dev/null 2>&1 || true
  # A failed run keeps its job outputs and Slurm logs for a look.
  if [ "$failures" -eq 0 ]; then rm -rf "$work_dir"; else echo "$test_name: outputs and logs kept in $work_dir"; fi
}
trap cleanup EXIT
trap "exit 143" TERM INT HUP

# start_cluster [plugstack arguments...]: a fresh cluster that loads the plugin as
# $plugstack_kind: `optional` unless the test says otherwise, as the Debian package loads it, and
# the harder case (Slurm ignores every callback's return value of an optional plugin but an
# option callback's).
plugstack_kind=optional
start_cluster() {
  bash "$source_dir/scripts/slurm-cluster.sh" stop >/dev/null 2>&1 || true
  PIPETTE_SLURM_PLUGSTACK="$plugstack_kind $plugin $*" bash "$source_dir/scripts/slurm-cluster.sh" start ||
    { echo "FAIL: $test_name: the cluster did not start"; exit 1; }
  slurmd_pids_at_start=$(cat "$PIPETTE_SLURM_DIR"/run/slurmd-n*.pid | tr '\n' ' ')
}

pass() { checks=$((checks + 1)); echo "ok: $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }

expect_eq() {  # expect_eq WHAT EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi
}

expect_contains() {  # expect_contains WHAT NEEDLE FILE
  if grep -qF -- "$2" "$3"; then pass "$1"; else fail "$1: '$2' not in $3:"; sed 's/^/    /' "$3" | tail -20; fi
}

expect_not_contains() {  # expect_not_contains WHAT NEEDLE FILE
  if grep -qF -- "$2" "$3"; then fail "$1: '$2' unexpectedly in $3"; sed 's/^/    /' "$3" | tail -20; else pass "$1"; fi
}

# run_batch NAME [sbatch arguments...] SCRIPT [script arguments...]: runs a batch job to
# completion; its stdout and stderr land in ${batch_dir:-$work_dir}/NAME.out and NAME.err, the job id in
# $job_id, its exit code in $batch_status (1 when it was never submitted). Polls every 0.1 s:
# `sbatch --wait` sleeps in steps of seconds.
run_batch() {
  local name=$1 dir=${batch_dir:-$work_dir}; shift
  batch_status=1
  job_id=$(sbatch --parsable -o "$dir/$name.out" -e "$dir/$name.err" "$@" 2>"$work_dir/$name.submit") ||
    { job_id=""; return 0; }
  local deadline=$((SECONDS + 120)) state
  while ((SECONDS < deadline)); do
    state=$(job_field "$job_id" JobState)
    case "$state" in
      PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.1 ;;
      *) break ;;
    esac
  done
  [ "$state" = COMPLETING ] || [ "$state" = RUNNING ] && { fail "$name: job $job_id still $state after 120 s"; return 0; }
  # ExitCode is EXIT:SIGNAL; a job slurmstepd could not launch is 0:53, which must not read as 0.
  local exit_code
  exit_code=$(job_field "$job_id" ExitCode)
  batch_status=${exit_code%%:*}
  [ "${exit_code#*:}" = 0 ] || batch_status=$((128 + ${exit_code#*:}))
}

job_field() {  # job_field JOB_ID FIELD, e.g. JobState or ExitCode
  scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# No node may ever be drained or down, and no slurmd may have died or been restarted.
expect_cluster_healthy() {
  local states pids
  states=$(sinfo -h -N -o '%T' | sort -u | tr '\n' ' ')
  expect_eq "every node idle after $1" "idle " "$states"
  pids=$(cat "$PIPETTE_SLURM_DIR"/run/slurmd-n*.pid | tr '\n' ' ')
  expect_eq "every slurmd still the one started (after $1)" "$slurmd_pids_at_start" "$pids"
  local pid
  for pid in $pids; do kill -0 "$pid" 2>/dev/null || fail "slurmd $pid not running after $1"; done
}

finish() {
  echo "$test_name: $checks checks, $failures failed"
  [ "$failures" -eq 0 ]
  exit $?
}

# write_site_file [YAML lines...]: a trusted site file (root-owned, 0644) at $site_file.
site_file=$work_dir/pipette.yaml
write_site_file() {
  printf '%s\n' "$@" >"$site_file"
  chmod 0644 "$site_file"
}

# write_link_cache PATH: fresh, uneven measurements of n1..n4 (see scripts/slurm/write-links.sh).
write_link_cache() { bash "$source_dir/scripts/slurm/write-links.sh" "$1"; }

# A batch script that records what the batch step and every task of an srun inside it see.
# Usage: sbatch ... "$rank_job" OUTPUT_PREFIX [srun arguments...]
rank_job=$work_dir/rank_job.sh
cat >"$rank_job" <<'JOB'
#!/bin/bash
# Works with --export=NONE too, where the batch step starts without PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
prefix=$1; shift
env | grep '^PIPETTE_' | grep -v '^PIPETTE_SLURM_DIR=' | sort >"$prefix.batch-env"
srun "$@" /bin/bash -c 'echo "$SLURM_PROCID $SLURMD_NODENAME ${RANK:--} ${LOCAL_RANK:--} ${WORLD_SIZE:--} ${LOCAL_WORLD_SIZE:--} ${NODE_RANK:--} ${MASTER_ADDR:--} ${MASTER_PORT:--} ${PIPETTE_PLAN_HASH:--} ${PIPETTE_RANK_ORDER:--} ${PIPETTE_STATUS:--} ${PET_NODE_RANK:--}"' |
  sort -n >"$prefix.tasks"
JOB
chmod 0755 "$rank_job"

batch_variable() {  # batch_variable PREFIX NAME
  sed -n "s/^$2=//p" "$1.batch-env"
}

# refused NAME MESSAGE [env VAR=VALUE...] -- sbatch arguments...: refused at submission with
# MESSAGE in sbatch's output, and nothing queued.
refused() { refused_by sbatch "$@"; }

# refused_by TOOL NAME MESSAGE [env VAR=VALUE...] -- TOOL arguments...: the same for sbatch
# (running --wrap true), salloc or srun (running true). "Nothing queued": Slurm knows no job it
# did not know before (scontrol also lists jobs that already ended).
refused_by() {
  local tool=$1 name=$2 message=$3; shift 3
  local env_args=()
  while [ "$1" != "--" ]; do env_args+=("$1"); shift; done
  shift
  local command=(true)
  [ "$tool" = sbatch ] && command=(--wrap true)
  local before after status
  before=$(scontrol -o show jobs 2>/dev/null | grep -c JobId)
  env "${env_args[@]}" "$tool" "$@" "${command[@]}" >"$work_dir/$name.out" 2>&1
  status=$?
  after=$(scontrol -o show jobs 2>/dev/null | grep -c JobId)
  [ "$status" -ne 0 ] && pass "$name: $tool refused (exit $status)" || fail "$name: $tool accepted it"
  expect_contains "$name: message" "$message" "$work_dir/$name.out"
  expect_eq "$name: nothing queued" "$before" "$after"
}

# expect_unplanned NAME REASON [sbatch arguments...]: the job (running $rank_job, outputs in
# ${batch_dir:-$work_dir}) runs as README "When a job cannot be planned" says: with
# PIPETTE_STATUS=error:...REASON... and no other plan variable, no task gets RANK, and the reason
# is in its stderr.
expect_unplanned() {
  local name=$1 reason=$2 prefix=${batch_dir:-$work_dir}/$1; shift 2
  run_batch "$name" "$@" "$rank_job" "$prefix"
  expect_eq "$name: runs unplanned (exit 0)" 0 "$batch_status"
  local status
  status=$(batch_variable "$prefix" PIPETTE_STATUS)
  case "$status" in
    error:*"$reason"*) pass "$name: PIPETTE_STATUS=${status:0:200}" ;;
    *) fail "$name: PIPETTE_STATUS is '${status:0:300}', expected error:...${reason:0:300}..." ;;
  esac
  # Beside the user's own input variables (PIPETTE_MODEL etc.), which pass through as they were.
  expect_eq "$name: no plan variables beside PIPETTE_STATUS" "PIPETTE_STATUS" \
    "$(cut -d= -f1 "$prefix.batch-env" | grep -vxE 'PIPETTE(_MODEL|_BATCH|_SEQ|_FIX|_STRICT|_FRAMEWORK)?' | tr -d '\n')"
  expect_eq "$name: no task gets RANK" "-" "$(awk '{print $3}' "$prefix.tasks" | sort -u | tr -d '\n')"
  expect_contains "$name: reason in the job's stderr" "pipette: cannot plan the job step, it runs unplanned: " "$prefix.err"
}

# check_unplanned NAME REASON [sbatch arguments...]: expect_unplanned, then the same job with
# --pipette-strict fails with exit 1 (FAILED 1:0) before its script runs, REASON in its stderr.
check_unplanned() {
  expect_unplanned "$@"
  local name=$1-strict reason=$2 prefix=${batch_dir:-$work_dir}/$1-strict; shift 2
  run_batch "$name" --pipette-strict "$@" "$rank_job" "$prefix"
  expect_eq "$name: exit 1" 1 "$batch_status"
  expect_eq "$name: job FAILED" "FAILED 1:0" "$(job_field "$job_id" JobState) $(job_field "$job_id" ExitCode)"
  expect_contains "$name: reason in the job's stderr" \
    "pipette: cannot plan the job step, failing it (--pipette-strict): " "$prefix.err"
  expect_contains "$name: the reason names the input" "$reason" "$prefix.err"
  [ -e "$prefix.batch-env" ] && fail "$name: the batch script ran" || pass "$name: the batch script never ran"
}
