#include "placement_evaluator.hpp"

#include <algorithm>
#include <utility>

namespace pipette::detail {

namespace {

// p2p, tp and wraparound entries are per lane (dp·cp of them), cp entries per DP replica.
int entry_index(const ParallelConfig& config, const PlacementEvaluator::EntryRef& entry) {
  const int lanes = config.dp_cp();
  const int after_ep = 2 * config.pp * lanes + config.pp + lanes + config.pp * (expert_groups_per_stage(config) + 1);
  switch (entry.kind) {
    case PlacementEvaluator::EntryRef::p2p:
      return entry.stage * lanes + entry.replica;
    case PlacementEvaluator::EntryRef::tp:
      return (config.pp - 1 + entry.stage) * lanes + entry.replica;
    case PlacementEvaluator::EntryRef::wraparound:
      return 2 * config.pp * lanes + config.pp + entry.replica;
    case PlacementEvaluator::EntryRef::ep:
      return 2 * config.pp * lanes + config.pp + lanes + entry.stage * expert_groups_per_stage(config) + entry.replica;
    case PlacementEvaluator::EntryRef::ep_stage:
      return 2 * config.pp * lanes + config.pp + lanes + config.pp * expert_groups_per_stage(config) + entry.stage;
    case PlacementEvaluator::EntryRef::cp:
      return after_ep + entry.stage * config.dp + entry.replica;
    case PlacementEvaluator::EntryRef::tied_embedding:
      return after_ep + (config.cp > 1 ? config.pp * config.dp : 0);
    case PlacementEvaluator::EntryRef::dp:
      break;
  }
  return 2 * config.pp * lanes + entry.stage;
}

// The tied embedding's entry comes last.
int entry_count(const ParallelConfig& config) {
  return entry_index(config, {PlacementEvaluator::EntryRef::tied_embedding, 0, 0}) + 1;
}

bool has_wraparound(const ParallelConfig& config) { return config.virtual_stages > 1 && config.pp > 1; }

}  // namespace

PlacementEvaluator::PlacementEvaluator(const Cluster& cluster, const ParallelConfig& config, const WorkProfile& work,
                                       IncrementalObjective& objective)
    : cluster_(cluster), config_(config), work_(work), objective_(objective) {
  const int gpus_per_node = cluster.gpus_per_node;
  const int world = config.world_size();
  active_slots_ = (world + gpus_per_node - 1) / gpus_per_node;
  node_of_slot_.resize(static_cast<size_t>(cluster.num_nodes()));
  for (int k = 0; k < cluster.num_nodes(); ++k) node_of_slot_[static_cast<size_t>(k)] = k;
  local_gpu_.resize(static_cast<size_t>(cluster.num_gpus()));
  for (size_t gpu = 0; gpu < local_gpu_.size(); ++gpu) local_gpu_[gpu] = static_cast<int>(gpu) % gpus_per_node;
  map_ = make_rank_map(cluster, config, default_placement(config));

  // Which entries touch which slot, and the last slot each entry needs.
  entries_of_slot_.assign(static_cast<size_t>(active_slots_), {});
  decided_by_slot_.assign(static_cast<size_t>(active_slots_), {});
  entry_stamp_.assign(static_cast<size_t>(entry_count(config)), 0);
  replica_stamp_.assign(static_cast<size_t>(config.dp_cp()), 0);
  const auto register_entry = [&](const EntryRef& entry, const std::vector<int>& ranks) {
    int last_slot = 0;
    for (const int rank : ranks) {
      const int slot = rank / gpus_per_node;
      last_slot = std::max(last_slot, slot);
      auto& list = entries_of_slot_[static_cast<size_t>(slot)];
      if (list.empty() || entry_index(config, list.back()) != entry_index(config, entry)) list.push_back(entry);
    }
    decided_by_slot_[static_cast<size_t>(last_slot)].push_back(entry);
  };
  std::vector<int> ranks;
  for (int s = 0; s < config.pp; ++s) {
    for (int d = 0; d < config.dp_cp(); ++d) {
      ranks.clear();
      for (int t = 0; t < config.tp; ++t) {
        ranks.push_back(rank_of_position(config, {t, d, s}));
        if (s + 1 < config.pp) ranks.push_back(rank_of_position(config, {t, d, s + 1}));
      }
      if (s + 1 < config.pp) register_entry({EntryRef::p2p, s, d}, ranks);
      ranks.clear();
      for (int t = 0; t < config.tp; ++t) ranks.push_back(rank_of_position(config, {t, d, s}));
      register_entry({EntryRef::tp, s, d}, ranks);
    }
    ranks.clear();
    for (int d = 0; d < config.dp_cp(); ++d)
      for (int t = 0; t < config.tp; ++t) ranks.push_back(rank_of_position(config, {t, d, s}));
    register_entry({EntryRef::dp, s, 0}, ranks);
    // Context parallelism: each DP replica's cp rings (its cp lanes, every tp index).
    for (int d = 0; d < config.dp && config.cp > 1; ++d) {
      ranks.clear();
      for (int c = 0; c < config.cp; ++c)
        for (int t = 0; t < config.tp; ++t) ranks.push_back(rank_of_position(config, {t, lane_of(config, c, d), s}));
      register_entry({EntryRef::cp, s, d}, ranks);
    }
  }
  // MoE: each expert group's all-to-all touches its ep members and their etp groups.
  has_ep_ = std::any_of(work.stages.begin(), work.stages.end(),
                        [](const StageWork& stage) { return stage.ep_all_to_alls_per_microbatch > 0; });
  for (int s = 0; s < config.pp && has_ep_; ++s) {
    for (int g = 0; g < expert_groups_per_stage(config); ++g) {
      ranks.clear();
      for (int e = 0; e < config.ep; ++e)
        for (int i = 0; i < config.etp; ++i)
          ranks.push_back(rank_of_expert_position(config, s, {i, e, g / config.etp}));
      std::sort(ranks.begin(), ranks.end());
      register_entry({EntryRef::ep, s, g}, ranks);
    }
  }
  for (int d = 0; d < config.dp_cp() && has_wraparound(config); ++d) {
    ranks.clear();
    for (int t = 0; t < config.tp; ++t) {
      ranks.push_back(rank_of_position(config, {t, d, config.pp - 1}));
      ranks.push_back(rank_of_position(config, {t, d, 0}));
    }
    register_entry({EntryRef::wraparound, 0, d}, ranks);
  }
  if (work.tied_embedding_head_stage > 0) {
    ranks.clear();
    for (int d = 0; d < config.dp_cp(); ++d)
      for (const int stage : {0, work.tied_embedding_head_stage})
        for (int t = 0; t < config.tp; ++t) ranks.push_back(rank_of_position(config, {t, d, stage}));
    std::sort(ranks.begin(), ranks.end());
    register_entry({EntryRef::tied_embedding, 0, 0}, ranks);
  }
  // A slot's list may name an entry twice when its ranks interleave with another slot's.
  for (auto& list : entries_of_slot_) {
    std::sort(list.begin(), list.end(), [&](const EntryRef& a, const EntryRef& b) {
      return entry_index(config, a) < entry_index(config, b);
    });
    list.erase(std::unique(list.begin(), list.end(),
                           [&](const EntryRef& a, const EntryRef& b) { return entry_index(config, a) == entry_index(config, b); }),
               list.end());
  }

  const auto entry_gpus = [&](const EntryRef& entry) {
    switch (entry.kind) {
      case EntryRef::p2p:
      case EntryRef::wraparound:
        return 2.0 * config.tp;
      case EntryRef::tp:
        return static_cast<double>(config.tp);
      case EntryRef::ep:
        return static_cast<double>(config.ep) * config.etp;
      case EntryRef::ep_stage:
        return 0.0;
      case EntryRef::cp:
        return static_cast<double>(config.tp) * config.cp;
      case EntryRef::tied_embedding:
        return 2.0 * config.tp * config.dp_cp();
      case EntryRef::dp:
        break;
    }
    return static_cast<double>(config.tp) * config.dp_cp();
  };
  double slot_work = 0;
  for (const auto& list : entries_of_slot_)
    for (const EntryRef& entry : list) slot_work += entry_gpus(entry);
  work_per_slot_swap_ = active_slots_ > 0 ? 2 * slot_work / active_slots_ : 0;

  active_slot_list_.resize(static_cast<size_t>(active_slots_));
  for (int slot = 0; slot < active_slots_; ++slot) active_slot_list_[static_cast<size_t>(slot)] = slot;

  count_inter_node_senders();
  communication_ = communication_times(cluster, config, work, placement());
  value_ = objective_.of(communication_);
}

void PlacementEvaluator::place_slot(int slot) {
  const int gpus_per_node = cluster_.gpus_per_node;
  const int node = node_of_slot_[static_cast<size_t>(slot)];
  const int first_rank = slot * gpus_per_node;
  const int last_rank = std::min(first_rank + gpus_per_node, config_.world_size());
  for (int rank = first_rank; rank < last_rank; ++rank) {
    const int gpu = node * gpus_per_node + local_gpu_[static_cast<size_t>(node * gpus_per_node + rank - first_rank)];
    map_.gpu_of_rank[static_cast<size_t>(rank)] = gpu;
    map_.rank_of_gpu[static_cast<size_t>(gpu)] = rank;
  }
}

void PlacementEvaluator::count_inter_node_senders() {
  inter_node_senders_.clear();
  for (int s = 0; s < config_.pp && has_ep_; ++s)
    inter_node_senders_.push_back(inter_node_senders_of_stage(cluster_, config_, map_, s));
}

double PlacementEvaluator::compute_entry(const EntryRef& entry) {
  const StageWork& stage = work_.stages[static_cast<size_t>(entry.stage)];
  switch (entry.kind) {
    case EntryRef::p2p:
      // As communication_times prices it: nothing to send, nothing to pay.
      if (boundary_bytes(work_, entry.stage) <= 0) return 0.0;
      return stage_boundary_seconds(cluster_, config_, map_, boundary_bytes(work_, entry.stage), work_.boundary_exchange,
                                    entry.stage, entry.stage + 1, entry.replica, &boundary_prices_);
    case EntryRef::wraparound:
      return stage_boundary_seconds(cluster_, config_, map_, work_.p2p_bytes_per_microbatch, work_.boundary_exchange,
                                    config_.pp - 1, 0, entry.replica, &boundary_prices_);
    case EntryRef::tp:
      return tp_collective_seconds(cluster_, config_, map_, stage, entry.stage, entry.replica);
    case EntryRef::ep:
      return ep_all_to_all_seconds(cluster_, config_, map_, stage, entry.stage, entry.replica,
                                   inter_node_senders_[static_cast<size_t>(entry.stage)]);
    case EntryRef::ep_stage:
      return communication_.ep_seconds[static_cast<size_t>(entry.stage)];
    case EntryRef::cp:
      return cp_ring_seconds(cluster_, config_, map_, stage, entry.stage, entry.replica);
    case EntryRef::tied_embedding:
      return tied_embedding_seconds(cluster_, config_, map_, work_);
    case EntryRef::dp:
      break;
  }
  return dp_reduction_seconds(cluster_, config_, map_, stage, entry.stage);
}

void PlacementEvaluator::mark_lane_changed(int lane) {
  auto& replica_stamp = replica_stamp_[static_cast<size_t>(lane)];
  if (replica_stamp == stamp_) return;
  replica_stamp = stamp_;
  changed_replicas_.push_back(lane);
}

void PlacementEvaluator::recompute_after_move(std::span<const int> slots) {
  saved_.clear();
  changed_replicas_.clear();
  changed_ep_stages_.clear();
  boundary_prices_.clear();
  ++stamp_;
  for (const int slot : slots) {
    if (slot >= active_slots_) continue;
    for (const EntryRef& entry : entries_of_slot_[static_cast<size_t>(slot)]) {
      auto& stamp = entry_stamp_[static_cast<size_t>(entry_index(config_, entry))];
      if (stamp == stamp_) continue;
      stamp = stamp_;
      double& seconds = entry_seconds(communication_, entry);
      const double updated = compute_entry(entry);
      if (updated == seconds) continue;  // e.g. a swap of two equally linked nodes
      saved_.push_back({entry, seconds});
      seconds = updated;
      if (entry.kind == EntryRef::ep) {
        if (std::find(changed_ep_stages_.begin(), changed_ep_stages_.end(), entry.stage) == changed_ep_stages_.end())
          changed_ep_stages_.push_back(entry.stage);
        continue;
      }
      if (entry.kind == EntryRef::dp || entry.kind == EntryRef::tied_embedding) continue;  // no lane's pipeline
      if (entry.kind == EntryRef::cp) {
        // A replica's ring enters every one of its lanes.
        for (int c = 0; c < config_.cp; ++c) mark_lane_changed(lane_of(config_, c, entry.replica));
        continue;
      }
      mark_lane_changed(entry.replica);
    }
  }
  for (const int stage : changed_ep_stages_) {
    // The stage's slowest expert group, which every replica's pipeline reads.
    const auto& groups = communication_.ep_group_seconds[static_cast<size_t>(stage)];
    const double slowest = *std::max_element(groups.begin(), groups.end());
    double& seconds = communication_.ep_seconds[static_cast<size_t>(stage)];
    if (slowest == seconds) continue;
    saved_.push_back({{EntryRef::ep_stage, stage, 0}, seconds});
    seconds = slowest;
  }
  last_value_ = value_;
  value_ = objective_.after_change(communication_, changed_replicas_);
}

void PlacementEvaluator::exchange_slot_senders(int slot_a, int slot_b) {
  if (inter_node_senders_.empty() || inter_node_senders_.front().empty()) return;  // no rails shared
  const auto node_a = static_cast<size_t>(node_of_slot_[static_cast<size_t>(slot_a)]);
  const auto node_b = static_cast<size_t>(node_of_slot_[static_cast<size_t>(slot_b)]);
  // Only the stages with ranks in one of the two slots count senders on these nodes (an idle slot
  // has none; every other stage counts 0 on both): those stages' counts are swapped, each once.
  const auto stages_of_slot = [&](int slot) -> std::pair<int, int> {  // first and last; none when idle
    if (slot >= active_slots_) return {0, -1};
    const int first_rank = slot * cluster_.gpus_per_node;
    const int last_rank = std::min(first_rank + cluster_.gpus_per_node, config_.world_size()) - 1;
    return {first_rank / config_.stage_ranks(), last_rank / config_.stage_ranks()};
  };
  const auto [first_a, last_a] = stages_of_slot(slot_a);
  const auto [first_b, last_b] = stages_of_slot(slot_b);
  const auto swap_counts = [&](int stage) {
    std::vector<int>& senders = inter_node_senders_[static_cast<size_t>(stage)];
    std::swap(senders[node_a], senders[node_b]);
  };
  for (int stage = first_a; stage <= last_a; ++stage) swap_counts(stage);
  for (int stage = first_b; stage <= last_b; ++stage)
    if (stage < first_a || stage > last_a) swap_counts(stage);
}

void PlacementEvaluator::exchange_slot_nodes(int slot_a, int slot_b) {
  for (const int slot : {slot_a, slot_b}) {
    if (slot >= active_slots_) continue;
    const int first = node_of_slot_[static_cast<size_t>(slot)] * cluster_.gpus_per_node;
    std::fill(map_.rank_of_gpu.begin() + first, map_.rank_of_gpu.begin() + first + cluster_.gpus_per_node, -1);
  }
  exchange_slot_senders(slot_a, slot_b);
  std::swap(node_of_slot_[static_cast<size_t>(slot_a)], node_of_slot_[static_cast<size_t>(slot_b)]);
  for (const int slot : {slot_a, slot_b})
    if (slot < active_slots_) place_slot(slot);
}


int PlacementEvaluator::exchange_local_blocks(int node, int first_a, int first_b, int length) {
  const auto first = static_cast<size_t>(node * cluster_.gpus_per_node);
  for (int k = 0; k < length; ++k)
    std::swap(local_gpu_[first + static_cast<size_t>(first_a + k)], local_gpu_[first + static_cast<size_t>(first_b + k)]);
  const int slot = static_cast<int>(std::find(node_of_slot_.begin(), node_of_slot_.end(), node) - node_of_slot_.begin());
  if (slot < active_slots_) place_slot(slot);
  return slot;
}

double PlacementEvaluator::swap_local_blocks(int node, int first_a, int first_b, int length) {
  const int slot = exchange_local_blocks(node, first_a, first_b, length);
  last_move_ = MoveKind::local_blocks;
  last_node_ = node;
  last_a_ = first_a;
  last_b_ = first_b;
  last_length_ = length;
  const int slots[] = {slot};
  recompute_after_move(slots);
  return value_;
}

double PlacementEvaluator::swap_slots(int slot_a, int slot_b) {
  exchange_slot_nodes(slot_a, slot_b);
  last_move_ = MoveKind::slots;
  last_a_ = slot_a;
  last_b_ = slot_b;
  const int slots[] = {slot_a, slot_b};
  recompute_after_move(slots);
  return value_;
}

void PlacementEvaluator::exchange_local_gpus_everywhere(int position_a, int position_b) {
  // Idle nodes too: a node swapped in later must carry the same order.
  const auto gpus_per_node = static_cast<size_t>(cluster_.gpus_per_node);
  for (size_t first = 0; first < local_gpu_.size(); first += gpus_per_node)
    std::swap(local_gpu_[first + static_cast<size_t>(position_a)], local_gpu_[first + static_cast<size_t>(position_b)]);
  for (int slot = 0; slot < active_slots_; ++slot) place_slot(slot);
}

double PlacementEvaluator::swap_local_gpus_everywhere(int position_a, int position_b) {
  exchange_local_gpus_everywhere(position_a, position_b);
  last_move_ = MoveKind::local_everywhere;
  last_a_ = position_a;
  last_b_ = position_b;
  recompute_after_move(active_slot_list_);
  return value_;
}

double PlacementEvaluator::swap_local_gpus(int node, int position_a, int position_b) {
  return swap_local_blocks(node, position_a, position_b, 1);
}

void PlacementEvaluator::undo() {
  switch (last_move_) {
    case MoveKind::none:
      return;
    case MoveKind::slots:
      exchange_slot_nodes(last_a_, last_b_);
      break;
    case MoveKind::local_everywhere:
      exchange_local_gpus_everywhere(last_a_, last_b_);
      break;
    case MoveKind::local_blocks:
      exchange_local_blocks(last_node_, last_a_, last_b_, last_length_);
      break;
  }
  for (const SavedEntry& saved : saved_) entry_seconds(communication_, saved.entry) = saved.seconds;
  saved_.clear();
  objective_.undo_change();
  value_ = last_value_;
  last_move_ = MoveKind::none;
}

void PlacementEvaluator::assign(const std::vector<int>& node_of_slot, const std::vector<int>& local_gpus) {
  node_of_slot_ = node_of_slot;
  local_gpu_ = local_gpus;
  std::fill(map_.rank_of_gpu.begin(), map_.rank_of_gpu.end(), -1);
  for (int slot = 0; slot < active_slots_; ++slot) place_slot(slot);
  count_inter_node_senders();
  communication_ = communication_times(cluster_, config_, work_, placement());
  value_ = objective_.of(communication_);
  last_move_ = MoveKind::none;
  saved_.clear();
}

}  // namespace pipette::detail
