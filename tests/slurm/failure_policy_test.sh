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

# check_case NAME REASON [sbatch arguments...]: the job once by default and once strict.
check_case() {
  local name=$1 reason=$2; shift 2
  local job_args=("${job_args[@]}")
  [ "${1:-}" = --no-gpus ] && { job_args=(-N4 --ntasks-per-node=8 --pipette=auto); shift; }
  run_batch "$name" "${job_args[@]}" "$@" "$rank_job" "$work_dir/$name"
  expect_eq "$name: runs unplanned (exit 0)" 0 "$batch_status"
  local status
  status=$(batch_variable "$work_dir/$name" PIPETTE_STATUS)
  case "$status" in
    error:*"$reason"*) pass "$name: PIPETTE_STATUS=$status" ;;
    *) fail "$name: PIPETTE_STATUS is '$status', expected error:...$reason..." ;;
  esac
  expect_eq "$name: no plan variables beside PIPETTE_STATUS" "PIPETTE_STATUS" \
    "$(cut -d= -f1 "$work_dir/$name.batch-env" | tr -d '\n')"
  expect_eq "$name: no task gets RANK" "-" "$(awk '{print $3}' "$work_dir/$name.tasks" | sort -u | tr -d '\n')"
  expect_contains "$name: reason in the job's stderr" "pipette: cannot plan the job step, it runs unplanned: " "$work_dir/$name.err"

  run_batch "$name-strict" "${job_args[@]}" --pipette-strict "$@" "$rank_job" "$work_dir/$name-strict"
  expect_eq "$name --pipette-strict: exit 1" 1 "$batch_status"
  expect_eq "$name --pipette-strict: job FAILED" "FAILED 1:0" "$(job_field "$job_id" JobState) $(job_field "$job_id" ExitCode)"
  expect_contains "$name --pipette-strict: reason in the job's stderr" \
    "pipette: cannot plan the job step, failing it (--pipette-strict): " "$work_dir/$name-strict.err"
  expect_contains "$name --pipette-strict: the reason names the input" "$reason" "$work_dir/$name-strict.err"
  [ -e "$work_dir/$name-strict.batch-env" ] && fail "$name --pipette-strict: the batch script ran" ||
    pass "$name --pipette-strict: the batch script never ran"
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

# A user's model file is read with the user's rights, never root's: as nobody, a file only root
# can read is an error; the same model readable by everyone plans.
write_site_file "${good_site[@]}"
user_dir=$work_dir/user
mkdir -m 1777 "$user_dir"
install -m 0600 "$source_dir/etc/models/llama2-7b.yaml" "$user_dir/private-model.yaml"
install -m 0644 "$source_dir/etc/models/llama2-7b.yaml" "$user_dir/model.yaml"
as_nobody=(--uid=65534 --gid=65534)
batch_dir=$user_dir run_batch nobody-private "${as_nobody[@]}" "${job_args[@]}" --pipette-model="$user_dir/private-model.yaml" \
  --pipette-batch=256 --pipette-seq=4096 "$rank_job" "$user_dir/nobody-private"
expect_eq "model file only root can read, job as nobody: runs (exit 0)" 0 "$batch_status"
case "$(batch_variable "$user_dir/nobody-private" PIPETTE_STATUS)" in
  error:*private-model.yaml*) pass "model file only root can read: PIPETTE_STATUS names it" ;;
  *) fail "model file only root can read, job as nobody: PIPETTE_STATUS is '$(batch_variable "$user_dir/nobody-private" PIPETTE_STATUS)'" ;;
esac
batch_dir=$user_dir run_batch nobody-open "${as_nobody[@]}" "${job_args[@]}" --pipette-model="$user_dir/model.yaml" \
  --pipette-batch=256 --pipette-seq=4096 "$rank_job" "$user_dir/nobody-open"
expect_eq "readable model file, job as nobody: planned" ok "$(batch_variable "$user_dir/nobody-open" PIPETTE_STATUS)"
expect_eq "readable model file, job as nobody: every task gets a RANK" 32 \
  "$(awk '$3 != "-"' "$user_dir/nobody-open.tasks" | wc -l)"

expect_cluster_healthy "the bad-input matrix"
finish
