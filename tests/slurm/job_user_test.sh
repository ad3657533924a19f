#!/usr/bin/env bash
# Jobs of an unprivileged user (nobody; root submits them with sbatch --uid) on the real cluster:
# the plugin reads a user's model file with the user's rights, never root's. A model file only
# the user may read plans; one only root may read, named directly or through the user's symlink,
# runs unplanned (strict: fails) with a message naming it, while a root job plans with the same
# file. No node is drained and no slurmd restarts.
# The user's files and the jobs' outputs live in a directory the user owns: slurmstepd opens a
# job's stdout/stderr with the user's rights, and a path the user cannot write fails the launch.
source "$(dirname "$0")/lib.sh"

job_user=nobody  # in every Debian install (base-passwd), so nothing to create or remove
job_group=$(id -gn "$job_user") || { fail "no user $job_user on this machine"; finish; }

write_link_cache "$work_dir/links.yaml"
write_site_file "gpu: H100-SXM" "links:" "  cache: $work_dir/links.yaml"
start_cluster "config=$site_file"

user_dir=$work_dir/$job_user
install -d -o "$job_user" -g "$job_group" -m 0755 "$user_dir"
install -o "$job_user" -g "$job_group" -m 0600 "$source_dir/etc/models/llama2-7b.yaml" "$user_dir/model.yaml"
root_only_model=$work_dir/root-only-model.yaml  # beside $user_dir: the same directories to traverse
install -o root -g root -m 0600 "$source_dir/etc/models/llama2-7b.yaml" "$root_only_model"
user_link=$user_dir/my-model.yaml
ln -s "$root_only_model" "$user_link"
chown -h "$job_user:$job_group" "$user_link"

batch_dir=$user_dir
layout=(-N2 --ntasks-per-node=8 --gres=gpu:8 --pipette=plan --pipette-batch=256 --pipette-seq=4096)
as_user=(--uid="$job_user" --gid="$job_group" --chdir="$user_dir")

# expect_planned NAME OWNER: the job NAME ran as OWNER and was planned, in its batch step and in
# each of its 16 tasks.
expect_planned() {
  local prefix=$user_dir/$1
  expect_eq "$1: exit 0" 0 "$batch_status"
  expect_eq "$1: the batch script ran as $2" "$2" "$(stat -c %U "$prefix.batch-env" 2>&1)"
  expect_eq "$1: PIPETTE_STATUS" ok "$(batch_variable "$prefix" PIPETTE_STATUS)"
  expect_eq "$1: every task sees PIPETTE_STATUS=ok" "16 ok" "$(awk '{print $12}' "$prefix.tasks" | uniq -c | xargs)"
}

run_batch own-model "${as_user[@]}" "${layout[@]}" --pipette-model="$user_dir/model.yaml" "$rank_job" "$user_dir/own-model"
expect_planned own-model "$job_user"

cannot_read="cannot read the model file; check the path and its permissions"
check_unplanned root-only-model "$root_only_model: $cannot_read" \
  "${as_user[@]}" "${layout[@]}" --pipette-model="$root_only_model"
check_unplanned symlink-to-root-only "$user_link: $cannot_read" \
  "${as_user[@]}" "${layout[@]}" --pipette-model="$user_link"

# Control: the same file plans for a root job, so the rows above fail for lack of rights alone.
run_batch root-job "${layout[@]}" --pipette-model="$user_link" "$rank_job" "$user_dir/root-job"
expect_planned root-job root

expect_cluster_healthy "the jobs of $job_user"
finish
