#pragma once
// The per-entry pieces of communication_times, shared with the placement search so that a move
// recomputes only the entries it changed, with exactly the costs the full evaluation uses.
#include <algorithm>
#include <span>
#include <utility>
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
  // What a pipeline hop across nodes attains of its pair's figures: the fabric's contention over
  // the nodes holding a rank (stage_boundary_seconds). Placement moves permute nodes and the GPUs
  // inside them, so that count, and this factor, never change for a map.
  double pipeline_hop_contention = 1.0;
};

RankMap make_rank_map(const Cluster& cluster, const ParallelConfig& config, const Placement& placement);

// Flows between two nodes at a stage boundary already priced, for callers that price many
// entries of one message size on one unchanged RankMap (the DP replicas of a node pair usually
// share one price): clear() it whenever the map changes.
class BoundaryPriceMemo {
 public:
  struct Key {
    int sender_node, receiver_node, from_stage, to_stage;
    bool operator==(const Key&) const = default;
  };
  void clear() { prices_.clear(); }
  // The price for `key`, computed by `compute` on a miss.
  template <typename Compute>
  double seconds(const Key& key, Compute compute) {
    // Entries of consecutive replicas usually share the latest price computed: look there first.
    if (!prices_.empty() && prices_.back().first == key) return prices_.back().second;
    for (const auto& [known, seconds] : prices_)
      if (known == key) return seconds;
    prices_.emplace_back(key, compute());
    return prices_.back().second;
  }

 private:
  std::vector<std::pair<Key, double>> prices_;  // few per move: a linear scan beats hashing
};

// One activation message of DP replica `replica` from stage `from_stage` to stage `to_stage`
// (the next stage, or for the interleaved schedule's wraparound the last stage to the first): the
// slowest of its tp GPUs, each sending while every other flow between the same two stages and the
// same two nodes sends too; forward and backward directions averaged, because the schedule sends
// each micro-batch once each way. The schedule runs every replica's and every stage's exchanges
// at the same steps, so a hop across nodes meets the load of all the job's nodes sending at once
// and the step waits for its slowest flow: the fabric's contention over the job's nodes applies, as
// to a ring step over as many nodes (CollectiveScaling). A stack that runs the exchange's messages in series
// (WorkProfile::boundary_exchange) pays all of them at each hop: its data messages of
// `message_bytes` and its latency-bound ones.
double stage_boundary_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                              double message_bytes, const PipelineExchange& exchange, int from_stage, int to_stage,
                              int replica, BoundaryPriceMemo* memo = nullptr);

// The TP collectives of one micro-batch (forward + backward) of stage `stage`, replica `replica`.
double tp_collective_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                             const StageWork& work, int stage, int replica);

// The slowest of stage `stage`'s tp concurrent DP gradient reductions.
double dp_reduction_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                            const StageWork& work, int stage);

// The tied word embedding's gradient all-reduce (WorkProfile::tied_embedding_gradient_bytes): every
// (tp, lane) rank of the first stage with its counterpart on the stage holding the output layer, all
// at once; the slowest pair. 0 where nothing is tied across ranks.
double tied_embedding_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                              const WorkProfile& work);

// Whether a node's GPUs drive more NICs than it has, so that GPUs sending out of it share them
// (Cluster::sender_share_of_node_pair then falls as more of them send).
inline bool gpus_share_rails(const Cluster& cluster) {
  return cluster.nics_per_sending_gpu() * cluster.gpus_per_node > std::max(1, cluster.nics_per_node);
}

// MoE, per node: how many of its GPUs send all-to-all traffic to other nodes while stage
// `stage`'s expert groups run theirs (they share the node's rails). Empty where no GPUs share
// rails (gpus_share_rails), where ep_all_to_all_seconds does not read it.
std::vector<int> inter_node_senders_of_stage(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                                             int stage);

// MoE: the all-to-alls (and etp gathers) of one micro-batch, forward + backward, of expert group
// `group` (etp_index + etp·edp_index) of stage `stage`; `inter_node_senders` is
// inter_node_senders_of_stage of the same map and stage, counted once for all of its groups.
double ep_all_to_all_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                             const StageWork& work, int stage, int group, std::span<const int> inter_node_senders);

// Context parallelism: the ring K/V passes of one micro-batch, forward + backward, of stage
// `stage` of DP replica `replica` (its cp lanes, every tp index), as far as they last beyond the
// attention step each overlaps (CommunicationTimes::cp_seconds).
double cp_ring_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                       const StageWork& work, int stage, int replica);

}  // namespace pipette::detail
