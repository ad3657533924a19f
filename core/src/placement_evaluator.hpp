#pragma once
// Incremental evaluation of a placement for the placement search. A placement is a node
// permutation plus, per node, a permutation of its GPUs:
//   slot k (ranks k·G … k·G + G − 1 in Megatron order, G = GPUs per node) runs on node
//   node_of_slot[k]; local position j of that slot runs on GPU local_gpu[node · G + j] of the node.
// Slots at or beyond the active count hold idle nodes. A move (swap two slots' nodes, or two GPUs
// inside one node) recomputes only the communication entries whose GPUs moved, then the objective.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "communication_internal.hpp"
#include "performance_internal.hpp"
#include "pipette/core/cluster.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/plan.hpp"

namespace pipette::detail {

using PlacementObjective = std::function<double(const CommunicationTimes&)>;

class PlacementEvaluator {
 public:
  // Starts from the default order: slot k on node k, local position j on GPU j. `objective` must
  // outlive the evaluator.
  PlacementEvaluator(const Cluster& cluster, const ParallelConfig& config, const WorkProfile& work,
                     IncrementalObjective& objective);

  double value() const { return value_; }
  int node_count() const { return static_cast<int>(node_of_slot_.size()); }
  int active_slots() const { return active_slots_; }
  int gpus_per_node() const { return cluster_.gpus_per_node; }
  const std::vector<int>& node_of_slot() const { return node_of_slot_; }
  const std::vector<int>& local_gpus() const { return local_gpu_; }
  const CommunicationTimes& communication() const { return communication_; }
  // GPUs of the communication entries a swap of two active slots recomputes, on average.
  double work_per_slot_swap() const { return work_per_slot_swap_; }
  Placement placement() const { return Placement{map_.gpu_of_rank}; }

  // Each returns the objective after the move; undo() reverts the latest move exactly.
  double swap_slots(int slot_a, int slot_b);
  double swap_local_gpus(int node, int position_a, int position_b);
  // The same exchange of two local positions on every node, so that nodes whose GPU orders agreed
  // (and with them the rails their neighbours use) still agree.
  double swap_local_gpus_everywhere(int position_a, int position_b);
  // Exchanges positions first_a + k and first_b + k of one node for k < length: moves a whole
  // stage's share of the node onto other GPUs, where single swaps would pass through states no
  // better (a pipeline hop is as slow as its slowest flow).
  double swap_local_blocks(int node, int first_a, int first_b, int length);
  void undo();

  // Moves to a whole state (used to restore the best state found).
  void assign(const std::vector<int>& node_of_slot, const std::vector<int>& local_gpus);

  // One entry of a CommunicationTimes table.
  struct EntryRef {
    // ep: one MoE expert group's all-to-alls (replica holds the group index); ep_stage: the
    // stage's slowest group, which the objective reads (kept up to date by the evaluator).
    // p2p, tp and wraparound are per lane (replica holds the lane); cp: one DP replica's cp rings;
    // tied_embedding: the tied word embedding's gradient all-reduce, one for the whole job.
    enum Kind : std::uint8_t { p2p, tp, dp, wraparound, ep, ep_stage, cp, tied_embedding } kind;
    int stage;    // unused for wraparound and tied_embedding
    int replica;  // unused for dp, ep_stage and tied_embedding; the expert group for ep; the DP replica for cp
  };
  // entries_decided_by_slot()[k]: the entries whose GPUs all lie in slots 0 … k and at least one
  // in slot k, i.e. those that assigning slot k (after slots 0 … k − 1) decides.
  const std::vector<std::vector<EntryRef>>& entries_decided_by_slot() const { return decided_by_slot_; }

 private:
  struct SavedEntry {
    EntryRef entry;
    double seconds;
  };
  enum class MoveKind { none, slots, local_everywhere, local_blocks };

  void place_slot(int slot);
  void count_inter_node_senders();  // inter_node_senders_ of the whole map_
  void exchange_slot_nodes(int slot_a, int slot_b);
  void exchange_slot_senders(int slot_a, int slot_b);  // before node_of_slot_ swaps: the slots' counts follow them
  int exchange_local_blocks(int node, int first_a, int first_b, int length);  // returns the node's slot
  void exchange_local_gpus_everywhere(int position_a, int position_b);
  void recompute_after_move(std::span<const int> slots);
  void mark_lane_changed(int lane);  // the objective recomputes that lane's pipeline
  double compute_entry(const EntryRef& entry);

  const Cluster& cluster_;
  const ParallelConfig& config_;
  const WorkProfile& work_;
  IncrementalObjective& objective_;
  int active_slots_ = 0;
  std::vector<int> node_of_slot_;
  std::vector<int> local_gpu_;  // flat, node-major
  RankMap map_;
  CommunicationTimes communication_;
  double value_ = 0;
  double work_per_slot_swap_ = 0;
  // Per slot, the entries touching any of its GPUs (placement-independent: fixed by Megatron order).
  std::vector<std::vector<EntryRef>> entries_of_slot_;
  std::vector<std::vector<EntryRef>> decided_by_slot_;
  // Scratch for deduplicating entries of a move, stamped per move.
  std::vector<std::uint32_t> entry_stamp_;
  std::vector<std::uint32_t> replica_stamp_;
  std::uint32_t stamp_ = 0;
  std::vector<int> changed_replicas_;
  std::vector<int> changed_ep_stages_;
  bool has_ep_ = false;  // an MoE layout: expert-group entries exist
  // Per stage, inter_node_senders_of_stage of map_ (where has_ep_): a slot swap swaps its two
  // nodes' counts, a move inside nodes keeps them (the count is the slot's, whatever its node).
  std::vector<std::vector<int>> inter_node_senders_;
  std::vector<int> active_slot_list_;  // 0 … active_slots_ − 1
  BoundaryPriceMemo boundary_prices_;  // of the current move's map
  // The latest move, for undo().
  MoveKind last_move_ = MoveKind::none;
  int last_a_ = 0, last_b_ = 0, last_node_ = 0, last_length_ = 0;
  double last_value_ = 0;
  std::vector<SavedEntry> saved_;
};

// The seconds of one entry: a double& into a mutable table, a const double& into a const one.
template <typename Times>
auto& entry_seconds(Times& times, const PlacementEvaluator::EntryRef& entry) {
  const auto stage = static_cast<size_t>(entry.stage);
  switch (entry.kind) {
    case PlacementEvaluator::EntryRef::p2p:
      return times.p2p_seconds[stage][static_cast<size_t>(entry.replica)];
    case PlacementEvaluator::EntryRef::tp:
      return times.tp_seconds[stage][static_cast<size_t>(entry.replica)];
    case PlacementEvaluator::EntryRef::wraparound:
      return times.wraparound_p2p_seconds[static_cast<size_t>(entry.replica)];
    case PlacementEvaluator::EntryRef::ep:
      return times.ep_group_seconds[stage][static_cast<size_t>(entry.replica)];
    case PlacementEvaluator::EntryRef::ep_stage:
      return times.ep_seconds[stage];
    case PlacementEvaluator::EntryRef::cp:
      return times.cp_seconds[stage][static_cast<size_t>(entry.replica)];
    case PlacementEvaluator::EntryRef::tied_embedding:
      return times.tied_embedding_seconds;
    case PlacementEvaluator::EntryRef::dp:
      break;
  }
  return times.dp_seconds[stage];
}

}  // namespace pipette::detail
