#pragma once
// Pieces of the closed-form critical path shared with the placement search.
#include <utility>
#include <vector>

#include "pipette/core/performance.hpp"

namespace pipette::detail {

// One replica's pipeline in per-chunk times: forward f[i], backward b[i] of one chunk of one
// micro-batch on rank i (compute + its TP share), link times c[i] between rank i and i + 1, and the
// interleaved schedule's hop from the last rank back to the first.
struct ReplicaPipeline {
  std::vector<double> forward;
  std::vector<double> backward;
  std::vector<double> link;
  double wraparound = 0;
};

// A replica pipeline's closed-form times.
struct PipelineTimes {
  double total_seconds = 0;
  double cycle_seconds = 0;  // steady-state time per (chunk) forward + backward pair
};

// An objective of the placement search that a move tells which DP replicas' entries (p2p, TP,
// wrap-around) it changed, so that it can keep per-replica work between moves. DP entries belong
// to no replica: an implementation must always read those from the table.
class IncrementalObjective {
 public:
  virtual ~IncrementalObjective() = default;
  virtual double of(const CommunicationTimes& communication) = 0;  // nothing kept is trusted
  // Only `changed_replicas` changed (and any DP entry) since the latest call.
  virtual double after_change(const CommunicationTimes& communication, const std::vector<int>& changed_replicas) = 0;
  virtual void undo_change() = 0;  // back to the state before the latest after_change
};

// iteration_seconds for a search whose moves change the entries of a few DP replicas: each
// replica's pipeline times are kept, and a move recomputes only those of the replicas it touched
// (then the slowest one's end of iteration). With dp = 64 a node swap touches at most 16. The
// result equals iteration_seconds of the same table bit for bit: the same functions compute it.
class IncrementalIterationSeconds final : public IncrementalObjective {
 public:
  IncrementalIterationSeconds(const ParallelConfig& config, const WorkProfile& work, const TrainingSpec& training);

  double of(const CommunicationTimes& communication) override;
  double after_change(const CommunicationTimes& communication, const std::vector<int>& changed_replicas) override;
  void undo_change() override;

 private:
  PipelineTimes replica_times(const CommunicationTimes& communication, int replica);
  double finish(const CommunicationTimes& communication);

  const ParallelConfig& config_;
  const WorkProfile& work_;
  const TrainingSpec& training_;
  std::vector<PipelineTimes> replica_times_;
  std::vector<std::pair<int, PipelineTimes>> saved_;
  ReplicaPipeline scratch_;
  std::vector<double> entries_;
  std::vector<double> previous_entries_;  // of the latest replica replica_times computed, and its times
  PipelineTimes previous_times_;
  bool has_previous_ = false;
  // The MoE stages' all-to-all seconds the kept replica times were computed with (empty: dense).
  std::vector<double> ep_seconds_;
  std::vector<double> saved_ep_seconds_;
  bool ep_changed_ = false;
};

}  // namespace pipette::detail
