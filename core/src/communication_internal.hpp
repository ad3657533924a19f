#pragma once
// The per-entry pieces of communication_times, shared with the placement search so that a move
// recomputes only the entries it changed, with exactly the costs the full evaluation uses.
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/plan.hpp"

namespace pipette::detail {

// A placement seen from both sides.
struct RankMap {
  std::vector<int> gpu_of_rank;  // size world_size
  std::vector<int> rank_of_gpu;  // size cluster.num_gpus(); -1 where the GPU is idle
  // position_of_rank of every rank: independent of the placement, kept because the placement
  // search asks for it on every move.
  std::vector<RankPosition> position_of_rank;
};

RankMap make_rank_map(const Cluster& cluster, const ParallelConfig& config, const Placement& placement);

// One activation message of DP replica `replica` from stage `from_stage` to stage `to_stage`
// (the next stage, or for the interleaved schedule's wraparound the last stage to the first): the
// slowest of its tp GPUs, each sending while every other flow between the same two stages and the
// same two nodes sends too; forward and backward directions averaged, because the schedule sends
// each micro-batch once each way.
// Concurrent-flow counts of stage boundaries already priced, for callers that price many entries
// on one unchanged RankMap (the DP replicas of a node pair usually share one count): clear() it
// whenever the map changes.
class BoundaryFlowMemo {
 public:
  void clear() { counts_.clear(); }
  // The count for (from_node → to_node, from_stage → to_stage), computed by `count` on a miss.
  template <typename Count>
  int flows(int from_node, int to_node, int from_stage, int to_stage, Count count) {
    for (const Entry& entry : counts_)
      if (entry.from_node == from_node && entry.to_node == to_node && entry.from_stage == from_stage &&
          entry.to_stage == to_stage)
        return entry.flows;
    const int flows = count();
    counts_.push_back({from_node, to_node, from_stage, to_stage, flows});
    return flows;
  }

 private:
  struct Entry {
    int from_node, to_node, from_stage, to_stage, flows;
  };
  std::vector<Entry> counts_;  // few per move: a linear scan beats hashing
};

double stage_boundary_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                              double message_bytes, int from_stage, int to_stage, int replica,
                              BoundaryFlowMemo* memo = nullptr);

// The TP collectives of one micro-batch (forward + backward) of stage `stage`, replica `replica`.
double tp_collective_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                             const StageWork& work, int stage, int replica);

// The slowest of stage `stage`'s tp concurrent DP gradient reductions.
double dp_reduction_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                            const StageWork& work, int stage);

}  // namespace pipette::detail
