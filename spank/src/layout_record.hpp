#pragma once
// The layout a job's first planned step chose, kept so that a requeued or restarted job trains
// with the same tp/pp/dp/vpp, micro-batch, layer split, recompute, sequence parallelism and
// distributed optimizer, and its distributed checkpoint loads; only the placement may change with
// the nodes. The first planned step (the batch step, in a batch job) writes it on its first node to
// $SLURM_SUBMIT_DIR/.pipette-layout-<job id>, as the job user with mode 0600; later steps of the
// same GPU count, and every step of a restart, plan with it. A file that is not a regular file
// of the job user (or root), is writable by group or others, or does not parse is refused: the
// step runs unplanned rather than with a layout nobody chose.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/plan.hpp"
#include "pipette/core/result.hpp"

namespace pipette::spank {

struct RecordedLayout {
  std::string fix;                    // every knob, in --pipette-fix syntax (format_fixed_knobs)
  std::vector<int> layers_per_stage;
  int gpus = 0;                       // the step's GPUs: a step of another size plans on its own
  std::string plan_hash;              // of the first start's plan, for the log
};

RecordedLayout layout_of(const Plan& plan, const std::string& plan_hash);
std::string format_layout_record(const RecordedLayout& layout);
Result<RecordedLayout> parse_layout_record(std::string_view text, const std::string& path);

std::string layout_record_path(const std::string& directory, std::uint32_t job_id);

// What a restart plans with: the recorded knobs, overridden by those the user fixes
// (--pipette-fix still wins); the recorded split unless the user fixes another pp.
struct RestartKnobs {
  std::string fix;
  std::vector<int> layers_per_stage;
};
Result<RestartKnobs> restart_knobs(const RecordedLayout& recorded, const std::string& user_fix);

// The record at `path` with the caller's rights: found = false when there is none.
struct ReadLayout {
  bool found = false;
  RecordedLayout layout;
  std::string error;  // why the file cannot be used; empty when found or absent
};
ReadLayout read_layout_record(const std::string& path);

// Writes the record (mode 0600) through a temporary file linked into place, so a reader never
// sees half a record; an existing record stays. Returns an error or "".
std::string write_layout_record(const std::string& path, const RecordedLayout& layout);

}  // namespace pipette::spank
