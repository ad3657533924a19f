#pragma once
// The layout a job's first planned step chose, kept so that a requeued or restarted job trains
// with the same tp/pp/dp/vpp, micro-batch, layer split, recompute, sequence parallelism and
// distributed optimizer, and its distributed checkpoint loads; only the placement may change with
// the nodes. The first planned step (the batch step, in a batch job) writes it on its first node to
// $SLURM_SUBMIT_DIR/.pipette-layout-<job id>, as the job user with mode 0600; later steps of the
// same GPU count, and every step of a restart, plan with it. A file that is not a regular file
// of the job user (or root), is writable by group or others, or does not parse is refused: the
// step runs unplanned rather than with a layout nobody chose. A record also names the request it
// was planned for (model, batch, sequence, framework): a step asking for another plans afresh. A
// requeued batch job keeps its script and environment, so a record that its batch step (always a
// job's first) disagrees with is another job's that had this id (the controller's ids start
// again after its state is cleared or MaxJobId wraps): the batch step replaces it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/result.hpp"
#include "options.hpp"

namespace pipette::spank {

struct RecordedLayout {
  std::string fix;                    // every knob, in --pipette-fix syntax (format_fixed_knobs)
  std::vector<int> layers_per_stage;
  int gpus = 0;                       // the step's GPUs: a step of another size plans on its own
  std::string plan_hash;              // of the first start's plan, for the log
  std::string request;                // describe_request of the first start; "" in a version-1 record
};

// What a step's plan was asked for, one line ("model=llama3-8b batch=256 seq=default framework=default");
// the fixed knobs are not part of it: the user's --pipette-fix is merged over a record's (restart_knobs).
std::string describe_request(const Settings& settings);

// `model`: the plan's; an MoE model's record fixes its ep and etp, even at 1 (a restart must not
// re-plan the expert groups whatever their size).
RecordedLayout layout_of(const ModelSpec& model, const Plan& plan, const std::string& plan_hash, const std::string& request);
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
// sees half a record. An existing record stays (the first writer wins) unless `replace`, when it
// is renamed over (another job's record). Returns an error or "".
enum class ExistingRecord { keep, replace };
std::string write_layout_record(const std::string& path, const RecordedLayout& layout,
                                ExistingRecord existing = ExistingRecord::keep);

}  // namespace pipette::spank
