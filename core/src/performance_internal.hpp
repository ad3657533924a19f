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
  bool all_forward_all_backward = false;  // WorkProfile::pipeline_schedule; 1F1B (interleaved) otherwise
};

// Fills `pipe` (reusing its storage: the placement search calls this once per touched replica per
// move) with replica `replica`'s pipeline, as the closed form and the simulator both run it: a
// boundary exchange that blocks both ranks (StackProfile::pipeline_exchange) in the ranks' times
// and off the links.
void fill_replica_pipeline(const ParallelConfig& config, const WorkProfile& work, const CommunicationTimes& communication,
                           int replica, bool with_links, bool with_embedding_and_head, ReplicaPipeline& pipe);

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
// Interleaved MoE layouts keep nothing between moves and find the slowest replica by dominance
// instead (see the constructor).
class IncrementalIterationSeconds final : public IncrementalObjective {
 public:
  IncrementalIterationSeconds(const ParallelConfig& config, const WorkProfile& work, const TrainingSpec& training);

  double of(const CommunicationTimes& communication) override;
  double after_change(const CommunicationTimes& communication, const std::vector<int>& changed_replicas) override;
  void undo_change() override;

 private:
  PipelineTimes replica_times(const CommunicationTimes& communication, int replica);
  // Replicas a and b have equal TP and cp entries (their forward and backward times: ep_seconds is
  // every replica's), and also equal p2p and wrap-around entries.
  bool same_stage_entries(const CommunicationTimes& communication, int a, int b) const;
  bool same_own_entries(const CommunicationTimes& communication, int a, int b) const;
  // Every p2p and wrap-around entry of replica a is at most b's.
  bool links_at_most(const CommunicationTimes& communication, int a, int b) const;
  void all_replica_times(const CommunicationTimes& communication);  // every replica's, from scratch
  PipelineTimes computed_times(const CommunicationTimes& communication, int replica);
  // The first of the slowest replicas and its times, as slowest_replica picks it (see by_dominance_).
  std::pair<int, PipelineTimes> slowest_by_dominance(const CommunicationTimes& communication);
  // A total no faster than any of heads_[begin … end) (their links' maxima; infinite where their
  // TP or cp entries differ).
  double block_bound_seconds(const CommunicationTimes& communication, size_t begin, size_t end);
  double finish_after(const CommunicationTimes& communication, int replica, const PipelineTimes& times);
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
  std::vector<PipelineTimes> saved_all_times_;  // every replica's, before a change of ep_seconds
  // Interleaved MoE layouts (see the constructor): replica_times_ holds only the times
  // slowest_by_dominance computed for the current move; scratch per replica or head.
  bool by_dominance_ = false;
  std::vector<int> heads_, order_, front_;
  std::vector<double> link_sum_;
  std::vector<int> dominator_;  // an undominated head whose links are all at least this head's; −1: none
  bool ep_changed_ = false;
};

}  // namespace pipette::detail
