#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipette/core/result.hpp"
#include "pipette/topology/run_records.hpp"

namespace pipette {

// What the plugin planned for a job, kept for `pipette calibrate --slurm-job` when the site
// calibrates (calibration.file is set): in the job user's own state directory
// (STATE/pipette/jobs/CLUSTER-JOBID.plan with STATE = $XDG_STATE_HOME or ~/.local/state; the
// directories 0700, the file 0600, written with the user's rights), so no other user can read or
// alter it. One "key=value" per line:
//   pipette_plan_record=2, job_id, model, gpu, nodes, node_list (comma-separated), gpus_per_node, global_batch, sequence_length,
//   tp, pp, dp, cp, ep, etp, vpp, mbs, recompute, sp, distopt, fsdp (the PIPETTE_* values of the step), layers_per_stage
//   (comma-separated), framework, and engine (the switches the site or the job set, in --engine syntax), so that calibrate
//   prices the job as it was planned. Version 1 records, without the last four and ep/etp, still read.
inline constexpr int kPlanRecordFormatVersion = 2;

// $XDG_STATE_HOME when it is an absolute path, else HOME/.local/state ("" when neither is usable).
std::string state_home(const char* xdg_state_home, const char* home);
std::string plan_record_path(const std::string& state_home, const std::string& cluster, std::uint32_t job_id);

// Writes atomically, creating the directories 0700; refuses a directory another user owns or may
// write to, and a cluster name that is not [A-Za-z0-9_-]. Returns the path written.
Result<std::string> write_plan_record(const std::string& state_home, const std::string& cluster, std::uint32_t job_id,
                                      const std::vector<std::pair<std::string, std::string>>& values);

// Reads it strictly ("FILE:LINE: ..."), refusing a file another user owns or may write to, into a
// description the job's log completes (complete_run).
Result<RunDescription> read_plan_record(const std::string& path);
Result<RunDescription> parse_plan_record(std::string_view text, const std::string& source_name);

}  // namespace pipette
