#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipette/core/result.hpp"
#include "pipette/topology/run_records.hpp"

namespace pipette {

// What the plugin planned for a job, kept for `pipette calibrate --slurm-job`: the job user's
// own state directory (HOME/.local/state/pipette/jobs/JOBID.plan, directory 0700, file 0600), so
// no other user can read or alter it. One "key=value" per line:
//   pipette_plan_record=1, job_id, model, nodes, gpus_per_node, global_batch, sequence_length,
//   tp, pp, dp, vpp, mbs, recompute, sp, distopt (the PIPETTE_* values of the step).
inline constexpr int kPlanRecordFormatVersion = 1;

std::string plan_record_path(const std::string& home, std::uint32_t job_id);

// Writes atomically, creating the directories 0700; refuses a directory another user owns or may
// write to. Returns the path written.
Result<std::string> write_plan_record(const std::string& home, std::uint32_t job_id,
                                      const std::vector<std::pair<std::string, std::string>>& values);

// Reads it strictly ("FILE:LINE: ..."), refusing a file another user owns or may write to, into a
// description the job's log completes (complete_run).
Result<RunDescription> read_plan_record(const std::string& path);
Result<RunDescription> parse_plan_record(std::string_view text, const std::string& source_name);

}  // namespace pipette
