// Placement search: which node plays which block of ranks, and which GPU of a node plays which
// rank of its block, to minimise the performance model's iteration time on an uneven fabric.
//
// Determinism: every node of a job computes the plan independently and all must agree bit for
// bit. The search is single-threaded, uses its own integer PRNG (no <random> distributions,
// whose algorithms differ between standard libraries), and stops on a move budget or on
// convergence, never on wall-clock time.
#include "pipette/core/placement.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "placement_evaluator.hpp"
#include "placement_random.hpp"

namespace pipette {

namespace {

using detail::PlacementEvaluator;
using detail::Random;

// Which permutations of GPUs inside nodes the search tries. On NVSwitch nodes every GPU pair is
// the same link, and measured matrices differ only by noise: repeated figures of one node's 56
// pairs spread by ±5% around their median (etc/example-cluster's H100 matrices, 345–380 GB/s), while
// GPU pairs that really differ do so by 2× or more (ground_truth_data/dgx1_p100_p2p_bandwidth_matrix.csv:
// 18.41 GB/s over NVLink, 9.19 GB/s over PCIe/QPI). Shuffling GPUs on such a node can only win
// noise, and it puts the node's inter-node neighbours on other rails (issue 18: 81% of them, for
// 0.14%). So a node's GPUs are permuted on their own only where its fastest pair beats its slowest
// by more than kLinkNoiseRatio (bandwidth) or kLatencyNoiseRatio (latency; ±15% of noise there), or
// where the layout itself puts inter-node neighbours on different local positions (a stage boundary
// inside a node), which only per-node orders can put back on one rail. Where any node's links
// differ, one permutation applied to every node at once keeps the rails aligned.
constexpr double kLinkNoiseRatio = 1.25;
constexpr double kLatencyNoiseRatio = 2.0;

bool links_differ_beyond_noise(const LinkMatrix& links) {
  double slowest = std::numeric_limits<double>::infinity(), fastest = 0;
  double lowest_latency = std::numeric_limits<double>::infinity(), highest_latency = 0;
  for (int a = 0; a < links.size(); ++a)
    for (int b = 0; b < links.size(); ++b) {
      if (a == b) continue;
      const Link& link = links.at(a, b);
      slowest = std::min(slowest, link.bandwidth_bytes_per_second);
      fastest = std::max(fastest, link.bandwidth_bytes_per_second);
      lowest_latency = std::min(lowest_latency, link.latency_seconds);
      highest_latency = std::max(highest_latency, link.latency_seconds);
    }
  if (links.size() < 2) return false;
  return fastest > kLinkNoiseRatio * slowest || highest_latency > kLatencyNoiseRatio * lowest_latency;
}

struct LocalMoveScope {
  std::vector<int> nodes;   // nodes whose GPUs may be permuted on their own (links differ), sorted
  bool everywhere = false;  // the same permutation on every node
  int block = 0;            // > 0: every node may exchange blocks of this many positions (a stage's share)
  bool any() const { return !nodes.empty() || everywhere || block > 0; }
};

LocalMoveScope local_move_scope(const Cluster& cluster, const ParallelConfig& config) {
  LocalMoveScope scope;
  if (cluster.gpus_per_node < 2) return scope;
  const int stage_share = std::gcd(config.stage_ranks(), cluster.gpus_per_node);
  if (stage_share < cluster.gpus_per_node && cluster.num_nodes() > 1 && cluster.nics_per_node > 1)
    scope.block = stage_share;
  for (int node = 0; node < cluster.num_nodes(); ++node) {
    const bool distinct = links_differ_beyond_noise(cluster.intra_node[static_cast<size_t>(node)]);
    scope.everywhere |= distinct;
    if (distinct) scope.nodes.push_back(node);
  }
  return scope;
}

struct SearchState {
  std::vector<int> node_of_slot;
  std::vector<int> local_gpus;
  double value = std::numeric_limits<double>::infinity();
  std::int64_t found_at_move = 0;

  static SearchState of(const PlacementEvaluator& evaluator, std::int64_t move) {
    return {evaluator.node_of_slot(), evaluator.local_gpus(), evaluator.value(), move};
  }
};

// An improvement smaller than this share of the objective is not progress that keeps the search
// going: it is far below what the model can resolve (its error on measured iterations is a few
// percent), and at 64+ nodes chasing such steps took most of the moves (a 64-node job spent 10,000
// moves of descent on 0.006%).
constexpr double kNegligibleImprovement = 1e-4;
bool improved_on(double value, double reference) { return value < reference * (1 - kNegligibleImprovement); }

// Takes every improving swap (slots, then GPUs inside nodes) in a fixed order until a sweep improves
// by no more than a negligible step: annealing ends near a local optimum, this makes sure it ends
// on or next to one.
void descend(PlacementEvaluator& evaluator, const LocalMoveScope& local_moves, SearchState& best, std::int64_t& moves,
             std::int64_t budget_end) {
  const auto keep_if_better = [&](double before, double after) {
    ++moves;
    if (after < before) {
      if (after < best.value) best = SearchState::of(evaluator, moves);
      return true;
    }
    evaluator.undo();
    return false;
  };
  bool improved = true;
  while (improved) {
    improved = false;
    const double sweep_start = evaluator.value();
    for (int a = 0; a < evaluator.active_slots(); ++a) {
      for (int b = a + 1; b < evaluator.node_count(); ++b) {
        if (moves >= budget_end) return;
        const double before = evaluator.value();
        improved |= keep_if_better(before, evaluator.swap_slots(a, b));
      }
      const int node = evaluator.node_of_slot()[static_cast<size_t>(a)];
      const int block = local_moves.block;
      for (int i = 0; block > 0 && i < evaluator.gpus_per_node(); i += block) {
        for (int j = i + block; j < evaluator.gpus_per_node(); j += block) {
          if (moves >= budget_end) return;
          const double before = evaluator.value();
          improved |= keep_if_better(before, evaluator.swap_local_blocks(node, i, j, block));
        }
      }
      if (!std::binary_search(local_moves.nodes.begin(), local_moves.nodes.end(), node)) continue;
      for (int i = 0; i < evaluator.gpus_per_node(); ++i) {
        for (int j = i + 1; j < evaluator.gpus_per_node(); ++j) {
          if (moves >= budget_end) return;
          const double before = evaluator.value();
          improved |= keep_if_better(before, evaluator.swap_local_gpus(node, i, j));
        }
      }
    }
    for (int i = 0; i < evaluator.gpus_per_node() && local_moves.everywhere; ++i) {
      for (int j = i + 1; j < evaluator.gpus_per_node(); ++j) {
        if (moves >= budget_end) return;
        const double before = evaluator.value();
        improved |= keep_if_better(before, evaluator.swap_local_gpus_everywhere(i, j));
      }
    }
    improved = improved && improved_on(evaluator.value(), sweep_start);
  }
}

struct AnnealSettings {
  std::int64_t max_moves = 0;
  std::uint64_t seed = 0;
  const LocalMoveScope& local_moves;
};

// Simulated annealing from the evaluator's current state, in cycles of geometric cooling (see
// below), or until the move budget is spent.
// `best` describes the evaluator's state on entry; on return it is the best state found, and the
// evaluator is in it.
void anneal(PlacementEvaluator& evaluator, const AnnealSettings& settings, SearchState& best, std::int64_t& moves) {
  const int nodes = evaluator.node_count();
  const int slots = evaluator.active_slots();
  const int gpus_per_node = evaluator.gpus_per_node();
  const bool node_moves = nodes >= 2;
  const LocalMoveScope& scope = settings.local_moves;
  const bool local_moves = (!scope.nodes.empty() || scope.block > 0) && gpus_per_node >= 2;
  if ((!node_moves && !local_moves) || settings.max_moves <= 0) return;
  Random random(settings.seed);

  const auto propose = [&]() {
    if (local_moves && (!node_moves || random.unit() < 0.25)) {
      // Per node only: uphill shared permutations that annealing accepts scramble every node at
      // once (a 2-node test lost its regrouping with them); descend() tries the shared ones.
      if (scope.block > 0 && (scope.nodes.empty() || random.unit() < 0.5)) {
        const int node = evaluator.node_of_slot()[static_cast<size_t>(random.below(slots))];
        const int blocks = gpus_per_node / scope.block;
        const int a = random.below(blocks);
        int b = random.below(blocks - 1);
        if (b >= a) ++b;
        return evaluator.swap_local_blocks(node, a * scope.block, b * scope.block, scope.block);
      }
      const int node = scope.nodes[static_cast<size_t>(random.below(static_cast<int>(scope.nodes.size())))];
      const int a = random.below(gpus_per_node);
      int b = random.below(gpus_per_node - 1);
      if (b >= a) ++b;
      return evaluator.swap_local_gpus(node, a, b);
    }
    const int a = random.below(slots);
    int b = random.below(nodes - 1);
    if (b >= a) ++b;
    return evaluator.swap_slots(a, b);
  };

  const std::int64_t budget_end = moves + settings.max_moves;
  const int neighbourhood = (node_moves ? nodes : 0) + (local_moves ? gpus_per_node : 0);
  const std::int64_t sample_moves = std::min<std::int64_t>(settings.max_moves / 10 + 1, 8 + 2 * neighbourhood);
  // The typical size of a change of the objective, sampled in both directions: from a poor start
  // nearly every move is downhill.
  double change_sum = 0;
  int change_count = 0;
  for (std::int64_t i = 0; i < sample_moves && moves < budget_end; ++i) {
    const double before = evaluator.value();
    const double after = propose();
    ++moves;
    if (after != before) {
      change_sum += std::abs(after - before);
      ++change_count;
    }
    if (after < best.value) best = SearchState::of(evaluator, moves);
    evaluator.undo();
  }
  if (change_count == 0) {  // no move changes the objective: nothing to anneal
    evaluator.assign(best.node_of_slot, best.local_gpus);
    return;
  }

  // One cycle cools from a temperature where a typical change uphill is accepted half the time
  // (colder starts lose the optimum on small clusters, where coordinated GPU swaps inside a node
  // must pass through worse states) until the search is frozen (almost no uphill move accepted in
  // a level) and the best state has not improved for several levels, then descends to a local
  // optimum where a full sweep of swaps is affordable (slots × nodes / 2 moves; beyond 64 nodes it
  // would cost more than the annealing). Cycles restart from the best state until one brings no
  // improvement; they reheat fully where a cycle is cheap (64 moves per level, up to 32 nodes) and
  // to 3% of the start temperature beyond, where a full reheat doubled the run for no better
  // placement on the benchmark's 128-node fabrics. The first cycle heats fully even from a block
  // layout (see start_from_best_block_layout), although where the layout matches the switches it
  // scrambles it and finds nothing better (1024 nodes: 160,000 moves per candidate): where the
  // switches are scattered over Slurm's order, starting at 3% instead left plans 0.8% (256 nodes)
  // and 2.6% (512 nodes, by simulation) slower.
  constexpr double typical_uphill_acceptance = 0.5;
  constexpr int max_descent_sweep = 64 * 64;
  const double start_temperature = change_sum / change_count / std::log(1 / typical_uphill_acceptance);
  const std::int64_t moves_per_level = std::max(64, 2 * neighbourhood);
  constexpr double cooling = 0.9;
  constexpr int patience_levels = 4;
  constexpr double frozen_uphill_acceptance = 0.01;
  constexpr int patience_cycles = 1;
  constexpr double restart_temperature_fraction = 0.03;
  // A full cycle cools from half to 1% uphill acceptance (about 18 levels) and then waits
  // patience_levels. Where the budget cannot pay for that (1024 nodes: about 6 levels), the first
  // cycle starts as much cooler as the levels it cannot afford: a scrambled layout that never
  // cools back is worse than the block layout it started from.
  const double levels_to_freeze =
      std::log(std::log(1 / frozen_uphill_acceptance) / std::log(1 / typical_uphill_acceptance)) / -std::log(cooling) +
      patience_levels;
  const double affordable_levels = static_cast<double>(budget_end - moves) / static_cast<double>(moves_per_level);
  const double first_cycle_temperature =
      start_temperature * std::pow(cooling, std::max(0.0, levels_to_freeze - affordable_levels));
  int cycles_without_improvement = 0;
  int cycle = 0;
  while (moves < budget_end && cycles_without_improvement < patience_cycles) {
    const double best_before_cycle = best.value;
    double temperature =
        cycle == 0 ? first_cycle_temperature
                   : moves_per_level <= 64 ? start_temperature : restart_temperature_fraction * start_temperature;
    ++cycle;
    int levels_without_improvement = 0;
    bool frozen = false;
    while (moves < budget_end && !(frozen && levels_without_improvement >= patience_levels)) {
      const double best_before_level = best.value;
      std::int64_t uphill_tried = 0;
      std::int64_t uphill_accepted = 0;
      for (std::int64_t i = 0; i < moves_per_level && moves < budget_end; ++i) {
        const double before = evaluator.value();
        const double after = propose();
        ++moves;
        const double uphill = after - before;
        if (uphill > 0) ++uphill_tried;
        if (uphill <= 0 || random.unit() < std::exp(-uphill / temperature)) {
          if (uphill > 0) ++uphill_accepted;
          if (after < best.value) best = SearchState::of(evaluator, moves);
        } else {
          evaluator.undo();
        }
      }
      levels_without_improvement = improved_on(best.value, best_before_level) ? 0 : levels_without_improvement + 1;
      frozen = uphill_accepted <= frozen_uphill_acceptance * static_cast<double>(uphill_tried);
      temperature *= cooling;
    }
    evaluator.assign(best.node_of_slot, best.local_gpus);
    if (slots * nodes <= max_descent_sweep) descend(evaluator, scope, best, moves, budget_end);
    cycles_without_improvement = improved_on(best.value, best_before_cycle) ? 0 : cycles_without_improvement + 1;
  }
}

// Where each node hosts ranks of one pipeline stage only (G divides tp·dp), stage s owns the
// S = tp·dp / G consecutive slots s·S … s·S + S − 1, and two whole-job layouts of Slurm's node
// order σ are natural: stage-major (slot s·S + j on σ[s·S + j], Slurm's order itself: the nodes of
// one stage adjacent, so data-parallel rings stay local) and pipeline-major (the pp nodes of one
// block of pipelines adjacent, so stage-to-stage hops stay local), with blocks of b slots in
// between. Slurm orders nodes by topology, so adjacent usually means near. Swaps can pass from one
// layout to another only through long chains of uphill moves, so every layout is evaluated first
// and the search starts from the best one (Slurm's order on ties). On a 64-node job with leaf
// switches of 16 nodes the pipeline-major layout alone beat what annealing from Slurm's order
// found, by 1.2%.
void start_from_best_block_layout(PlacementEvaluator& evaluator, const ParallelConfig& config, std::int64_t& moves) {
  const int ranks_per_stage = config.stage_ranks();
  if (config.pp < 2 || ranks_per_stage % evaluator.gpus_per_node() != 0) return;
  const int slots_per_stage = ranks_per_stage / evaluator.gpus_per_node();
  if (slots_per_stage < 2) return;  // one slot per stage: every layout is Slurm's order
  const std::vector<int> slurm_order = evaluator.node_of_slot();
  std::vector<int> best_order = slurm_order;
  double best_value = evaluator.value();
  for (int block = slots_per_stage / 2; block >= 1; --block) {
    if (slots_per_stage % block != 0) continue;
    std::vector<int> order = slurm_order;
    for (int stage = 0; stage < config.pp; ++stage)
      for (int j = 0; j < slots_per_stage; ++j)
        order[static_cast<size_t>(stage * slots_per_stage + j)] =
            slurm_order[static_cast<size_t>((j / block) * (config.pp * block) + stage * block + j % block)];
    evaluator.assign(order, evaluator.local_gpus());
    ++moves;
    if (evaluator.value() < best_value) {
      best_value = evaluator.value();
      best_order = std::move(order);
    }
  }
  evaluator.assign(best_order, evaluator.local_gpus());
}

// Branch and bound over node permutations, local GPU orders fixed as the evaluator holds them.
// Slots are assigned in order; a partial assignment's bound is the objective with every entry it
// does not decide yet at its best possible value (`optimistic`), a lower bound because the
// objective never decreases when a communication entry grows. Ties keep the first state found.
class ExactSearch {
 public:
  ExactSearch(PlacementEvaluator& evaluator, const CommunicationTimes& optimistic,
              const detail::PlacementObjective& objective, std::int64_t node_budget)
      : evaluator_(evaluator), bound_(optimistic), optimistic_(optimistic), objective_(objective),
        node_budget_(node_budget) {}

  // Improves `best` in place; false when the node budget ran out before the proof was complete.
  // The evaluator ends in the state it started in.
  bool run(SearchState& best, std::int64_t& moves) {
    best_ = &best;
    moves_ = &moves;
    return descend(0);
  }

 private:
  using EntryRef = PlacementEvaluator::EntryRef;

  double bound_after_placing(const std::vector<EntryRef>& decided) {
    for (const EntryRef& entry : decided)
      detail::entry_seconds(bound_, entry) = detail::entry_seconds(evaluator_.communication(), entry);
    return objective_(bound_);
  }

  // Children are tried best bound first (ties: lower position), so good complete placements, and
  // with them strong pruning, come early.
  bool descend(int assigned_slots) {
    if (assigned_slots == evaluator_.active_slots()) {
      if (evaluator_.value() < best_->value) *best_ = SearchState::of(evaluator_, *moves_);
      return true;
    }
    const auto& decided = evaluator_.entries_decided_by_slot()[static_cast<size_t>(assigned_slots)];
    std::vector<std::pair<double, int>> children;
    for (int candidate = assigned_slots; candidate < evaluator_.node_count(); ++candidate) {
      if (nodes_visited_++ >= node_budget_) return false;
      ++*moves_;
      if (candidate != assigned_slots) evaluator_.swap_slots(assigned_slots, candidate);
      const double bound = bound_after_placing(decided);
      if (candidate != assigned_slots) evaluator_.undo();
      if (bound < best_->value) children.emplace_back(bound, candidate);
    }
    std::sort(children.begin(), children.end());
    bool complete = true;
    for (const auto& [bound, candidate] : children) {
      if (bound >= best_->value) break;  // the incumbent improved meanwhile
      if (candidate != assigned_slots) evaluator_.swap_slots(assigned_slots, candidate);
      bound_after_placing(decided);
      complete = descend(assigned_slots + 1);
      if (candidate != assigned_slots) evaluator_.swap_slots(assigned_slots, candidate);
      if (!complete) break;
    }
    for (const EntryRef& entry : decided) detail::entry_seconds(bound_, entry) = detail::entry_seconds(optimistic_, entry);
    return complete;
  }

  PlacementEvaluator& evaluator_;
  CommunicationTimes bound_;
  CommunicationTimes optimistic_;
  const detail::PlacementObjective& objective_;
  std::int64_t node_budget_;
  std::int64_t nodes_visited_ = 0;
  SearchState* best_ = nullptr;
  std::int64_t* moves_ = nullptr;
};


// Inputs the search can place: sizes consistent and the ranks fit on the cluster's GPUs.
bool placeable(const Cluster& cluster, const ParallelConfig& config, const WorkProfile& work) {
  return config.tp >= 1 && config.pp >= 1 && config.dp >= 1 && cluster.gpus_per_node >= 1 &&
         config.world_size() <= cluster.num_gpus() && static_cast<int>(work.stages.size()) == config.pp &&
         static_cast<int>(cluster.intra_node.size()) == cluster.num_nodes() &&
         cluster.inter_node.size() == cluster.num_nodes();
}

// An objective cheap enough to recompute from the whole table after every move.
class RecomputedObjective final : public detail::IncrementalObjective {
 public:
  explicit RecomputedObjective(const detail::PlacementObjective& objective) : objective_(objective) {}
  double of(const CommunicationTimes& communication) override { return objective_(communication); }
  double after_change(const CommunicationTimes& communication, const std::vector<int>&) override {
    return objective_(communication);
  }
  void undo_change() override {}

 private:
  const detail::PlacementObjective& objective_;
};

// `objective` and `incremental` compute the same function; the exact search bounds with the first.
PlacementResult search_placement(const Cluster& cluster, const ParallelConfig& config, const WorkProfile& work,
                                 const TrainingSpec& training, const PlacementEffort& effort,
                                 const detail::PlacementObjective& objective, detail::IncrementalObjective& incremental,
                                 bool node_moves_only, bool allow_exact) {
  PlacementResult result;
  if (!placeable(cluster, config, work)) return result;
  const auto model_seconds = [&](const CommunicationTimes& communication) {
    return iteration_seconds(config, work, communication, training);
  };
  PlacementEvaluator evaluator(cluster, config, work, incremental);
  result.default_iteration_seconds = model_seconds(evaluator.communication());

  const LocalMoveScope local_moves = node_moves_only ? LocalMoveScope{} : local_move_scope(cluster, config);
  // The job's move budget (PlacementEffort::max_move_work): a count of moves, fixed by the inputs.
  const double work_per_move = std::max(1.0, evaluator.work_per_slot_swap());
  const std::int64_t move_budget =
      std::min(effort.max_moves, static_cast<std::int64_t>(static_cast<double>(effort.max_move_work) / work_per_move));
  std::int64_t moves = 0;
  start_from_best_block_layout(evaluator, config, moves);
  SearchState best = SearchState::of(evaluator, moves);
  bool proven = false;
  if (allow_exact && cluster.num_nodes() <= effort.exact_up_to_nodes) {
    // Half the budget for the proof; what it does not use, and all of it when it fails, is left
    // for annealing (which also explores the GPU orders inside nodes the proof keeps fixed).
    // Its expert groups' all-to-alls bound theirs here even where rails are shared (bound_all_to_all
    // says why not in general): node swaps keep each node's senders (communication.cpp
    // inter_node_senders_of_stage) and each node's share of every group.
    const CommunicationTimes optimistic = communication_times(with_best_links(cluster), config, work, default_placement(config));
    ExactSearch exact(evaluator, optimistic, objective, move_budget / 2);
    proven = exact.run(best, moves);
    evaluator.assign(best.node_of_slot, best.local_gpus);
  }
  if (!proven || local_moves.any()) anneal(evaluator, {move_budget - moves, effort.seed, local_moves}, best, moves);
  result.exact = proven && !local_moves.any();
  result.placement = evaluator.placement();
  result.iteration_seconds = model_seconds(evaluator.communication());
  result.move_budget = move_budget;
  result.move_work = static_cast<double>(moves) * work_per_move;
  result.local_moves = local_moves.any();
  result.identity_local_order_iteration_seconds = result.iteration_seconds;
  if (local_moves.any()) {
    std::vector<int> identity(evaluator.local_gpus().size());
    for (size_t gpu = 0; gpu < identity.size(); ++gpu) identity[gpu] = static_cast<int>(gpu) % cluster.gpus_per_node;
    if (identity != evaluator.local_gpus()) {
      evaluator.assign(evaluator.node_of_slot(), identity);
      result.identity_local_order_iteration_seconds = model_seconds(evaluator.communication());
    }
  }
  result.moves_evaluated = moves;
  result.moves_to_best = best.found_at_move;
  return result;
}

}  // namespace

namespace {

constexpr Link kNoLink{0, std::numeric_limits<double>::infinity(), true};

void improve(Link& best, const Link& link) {
  best.bandwidth_bytes_per_second = std::max(best.bandwidth_bytes_per_second, link.bandwidth_bytes_per_second);
  best.latency_seconds = std::min(best.latency_seconds, link.latency_seconds);
}

}  // namespace

NodeBestLinks best_links_of_nodes(const Cluster& cluster) {
  NodeBestLinks best;
  best.inter_node.assign(static_cast<size_t>(cluster.num_nodes()), kNoLink);
  best.intra_node.assign(static_cast<size_t>(cluster.num_nodes()), kNoLink);
  for (int node = 0; node < cluster.num_nodes(); ++node) {
    const LinkMatrix& links = cluster.intra_node[static_cast<size_t>(node)];
    for (int a = 0; a < links.size(); ++a)
      for (int b = 0; b < links.size(); ++b)
        if (a != b) improve(best.intra_node[static_cast<size_t>(node)], links.at(a, b));
    for (int other = 0; other < cluster.num_nodes(); ++other)
      if (other != node) improve(best.inter_node[static_cast<size_t>(node)], cluster.inter_node.at(node, other));
  }
  return best;
}

Cluster with_best_links(const Cluster& cluster) { return with_best_links(cluster, best_links_of_nodes(cluster)); }

Cluster with_best_links(const Cluster& cluster, const NodeBestLinks& of_nodes) {
  // The best of each kind over all nodes: maxima and minima, exact in any order.
  const auto best_of = [](const std::vector<Link>& links) {
    Link best = kNoLink;
    for (const Link& link : links) improve(best, link);
    return best;
  };
  const Link best_intra = best_of(of_nodes.intra_node);
  const Link best_inter = best_of(of_nodes.inter_node);
  Cluster best = cluster;
  for (LinkMatrix& links : best.intra_node) links = LinkMatrix(links.size(), best_intra);
  best.inter_node = LinkMatrix(cluster.num_nodes(), best_inter);
  best.rails.rail_of_local_gpu.assign(static_cast<size_t>(std::max(0, cluster.gpus_per_node)), 0);  // no flow crosses rails
  return best;
}

// Why the floor holds. ep_all_to_all_seconds (communication.cpp) prices expert group g of stage s
// as a2a · (slowest + gather), gather ≥ 0, slowest the maximum over the group's members of
// max(intra + intra latency, inter). Take a member on node A where k of the group's ep members
// sit (1 ≤ k ≤ min(ep, G), G the GPUs per node). With k < ep the group has ep − k members on
// other nodes, on at least one other node, and A's R rails are shared by S ≥ k GPUs sending out
// of A (this group's k and any other group's of the stage there), each at B_Ao · share(S), where
// share = Cluster::sender_share_of_node_pair = min(1/S, N/R), N the NICs one GPU drives, which
// never grows with S: share(S) ≤ share(k). So with B_A, L_A the best bandwidth and latency of
// A's links to other nodes
//   inter = Σ_o (n_o · bytes / (B_Ao · share(S)) + L_Ao) ≥ (ep − k) · bytes / (B_A · share(k)) + L_A;
// (k = ep: no inter-node part); and with k ≥ 2, b_A, l_A the best of A's own GPU pairs,
//   intra + intra latency = Σ over its k − 1 peers of bytes / b_link + the largest latency ≥ (k − 1) · bytes / b_A + l_A
// (on a full mesh, Cluster::intra_node_full_mesh, the largest of the k − 1 sends instead: ≥ bytes / b_A + l_A).
// So the group costs at least a2a · floor(A), floor(A) = min over k of the larger of the two,
// whatever k is. The groups partition the stage's ranks, so every node hosting a GPU of stage s
// hosts a member of one of its groups, and ep_seconds[s] (the slowest group) ≥ a2a · floor(A)
// for each such node; the stage's stage_ranks GPUs occupy at least ⌈stage_ranks / G⌉ nodes, so the
// largest of their floors is at least the ⌈stage_ranks / G⌉-th smallest floor of all nodes. Only
// ep_seconds is changed (what the iteration reads, performance.cpp fill_replica_pipeline), and the
// iteration time never drops when it grows.
// Which lower bound to keep. Where N · G ≤ R every member has share(S) = N/R whatever else sends, the
// price of one group's own members alone, and the best links in Slurm's order bound it as
// with_best_links says: the larger of that and the floor is kept (where ep > G). With N · G > R a
// node shares its rails among every GPU of the stage sending out, and a placement that gives a
// node fewer of them (mixing the stage with other stages' or idle GPUs) pays less per member than
// Slurm's order, whose full nodes share the rails G ways: the best links in Slurm's order are then
// no lower bound, and the floor replaces them, also where ep ≤ G (a group Slurm's order spreads
// over nodes, with etp > 1, shares full nodes' rails too).
void bound_all_to_all(const Cluster& cluster, const NodeBestLinks& best, const ParallelConfig& config,
                      const WorkProfile& work, CommunicationTimes& communication) {
  const int gpus_per_node = cluster.gpus_per_node;
  const bool rails_shared = detail::gpus_share_rails(cluster);
  if (config.ep == 1 || (config.ep <= gpus_per_node && !rails_shared) || communication.ep_seconds.empty()) return;
  const int most_on_a_node = std::min(config.ep, gpus_per_node);
  const size_t nodes = best.inter_node.size();
  const size_t occupied = std::min(nodes, static_cast<size_t>((config.stage_ranks() + gpus_per_node - 1) / gpus_per_node));
  std::vector<double> floor_of_node(nodes);
  double floor_bytes = -1;  // the stages' messages are mostly alike: the floor of the last size
  double stage_floor_seconds = 0;
  for (int s = 0; s < config.pp; ++s) {
    const StageWork& stage = work.stages[static_cast<size_t>(s)];
    if (stage.ep_all_to_alls_per_microbatch == 0) continue;
    const double bytes = stage.ep_bytes_per_peer;
    if (bytes != floor_bytes) {
      for (size_t node = 0; node < nodes; ++node) {
        const Link& inter_link = best.inter_node[node];
        const Link& intra_link = best.intra_node[node];
        double floor = std::numeric_limits<double>::infinity();
        for (int k = 1; k <= most_on_a_node; ++k) {
          const double inter =
              k < config.ep ? (config.ep - k) * bytes / (inter_link.bandwidth_bytes_per_second * cluster.sender_share_of_node_pair(k)) +
                                  inter_link.latency_seconds
                            : 0.0;
          const double sends_in_series = cluster.intra_node_full_mesh ? 1.0 : k - 1.0;
          const double intra =
              k >= 2 ? sends_in_series * bytes / intra_link.bandwidth_bytes_per_second + intra_link.latency_seconds : 0.0;
          floor = std::min(floor, std::max(inter, intra));
        }
        floor_of_node[node] = floor;
      }
      const auto nth = floor_of_node.begin() + static_cast<std::ptrdiff_t>(occupied - 1);
      std::nth_element(floor_of_node.begin(), nth, floor_of_node.end());
      floor_bytes = bytes;
      stage_floor_seconds = *nth;
    }
    double& seconds = communication.ep_seconds[static_cast<size_t>(s)];
    const double floor_seconds = stage.ep_all_to_alls_per_microbatch * stage_floor_seconds;
    seconds = rails_shared ? floor_seconds : std::max(seconds, floor_seconds);
  }
}

double pipette_paper_objective(const CommunicationTimes& communication) {
  double slowest_pipeline_seconds = 0;
  const size_t replicas = communication.tp_seconds.empty() ? 0 : communication.tp_seconds[0].size();
  for (size_t d = 0; d < replicas; ++d) {
    double transfer_seconds = 0;
    for (const auto& boundary : communication.p2p_seconds) transfer_seconds += boundary[d];
    slowest_pipeline_seconds = std::max(slowest_pipeline_seconds, transfer_seconds);
  }
  return slowest_pipeline_seconds + (communication.dp_seconds.empty() ? 0 : communication.dp_seconds[0]);
}

RailAlignment rail_alignment(const Cluster& cluster, const ParallelConfig& config, const Placement& placement) {
  RailAlignment alignment;
  const int gpus_per_node = std::max(1, cluster.gpus_per_node);
  const auto gpu_at = [&](int t, int d, int s) {
    return placement.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, d, s}))];
  };
  const auto count = [&](RailAlignment::Kind kind, int stage, int a, int b) {
    if (a / gpus_per_node == b / gpus_per_node) return;
    ++alignment.inter_node_neighbours;
    if (a % gpus_per_node == b % gpus_per_node) return;
    ++alignment.on_different_local_gpus;
    alignment.misaligned.push_back({kind, stage, a, b, cluster.rail_of(a % gpus_per_node) != cluster.rail_of(b % gpus_per_node)});
  };
  for (int s = 0; s + 1 < config.pp; ++s)
    for (int d = 0; d < config.dp_cp(); ++d)
      for (int t = 0; t < config.tp; ++t) count(RailAlignment::Kind::pipeline, s, gpu_at(t, d, s), gpu_at(t, d, s + 1));
  // A DP group's ring as NCCL runs it (core/src/communication.cpp): its nodes in order of first
  // appearance, and between two consecutive nodes one hop per sub-ring (the fewest GPUs the group
  // has on a node), each pairing a GPU with one of the same local index on the next node where
  // both nodes have one.
  struct NodeMembers {
    int node;
    std::uint64_t locals;  // bit set of local GPU indices (indices beyond 63 fold over)
    int count;
  };
  std::vector<NodeMembers> members;
  const auto first_local = [](std::uint64_t set) { return std::countr_zero(set); };
  for (int s = 0; s < config.pp && config.dp_cp() > 1; ++s)
    for (int t = 0; t < config.tp; ++t) {
      members.clear();
      for (int d = 0; d < config.dp_cp(); ++d) {
        const int gpu = gpu_at(t, d, s);
        const int node = gpu / gpus_per_node;
        auto it = std::find_if(members.begin(), members.end(), [node](const NodeMembers& m) { return m.node == node; });
        if (it == members.end()) it = members.insert(members.end(), {node, 0, 0});
        it->locals |= std::uint64_t{1} << (gpu % gpus_per_node % 64);
        ++it->count;
      }
      if (members.size() < 2) continue;
      int subrings = config.dp_cp();
      for (const NodeMembers& m : members) subrings = std::min(subrings, m.count);
      const size_t hops = members.size() == 2 ? 1 : members.size();
      for (size_t i = 0; i < hops; ++i) {
        const NodeMembers& a = members[i];
        const NodeMembers& b = members[(i + 1) % members.size()];
        const int unmatched = std::max(0, subrings - std::popcount(a.locals & b.locals));
        alignment.inter_node_neighbours += subrings;
        alignment.on_different_local_gpus += unmatched;
        if (unmatched == 0) continue;
        const int local_a = first_local(a.locals & ~b.locals), local_b = first_local(b.locals & ~a.locals);
        alignment.misaligned.push_back({RailAlignment::Kind::data_parallel, s, a.node * gpus_per_node + local_a,
                                        b.node * gpus_per_node + local_b,
                                        cluster.rail_of(local_a) != cluster.rail_of(local_b)});
      }
    }
  return alignment;
}

std::vector<int> node_order_of(const Cluster& cluster, const Placement& placement) {
  const int gpus_per_node = cluster.gpus_per_node;
  std::vector<int> order;
  for (size_t first = 0; first < placement.gpu_of_rank.size(); first += static_cast<size_t>(gpus_per_node)) {
    const int node = placement.gpu_of_rank[first] / gpus_per_node;
    const size_t last = std::min(placement.gpu_of_rank.size(), first + static_cast<size_t>(gpus_per_node));
    for (size_t rank = first; rank < last; ++rank)
      if (placement.gpu_of_rank[rank] / gpus_per_node != node) return {};
    order.push_back(node);
  }
  return order;
}

std::vector<std::vector<int>> local_gpu_order_of(const Cluster& cluster, const Placement& placement) {
  std::vector<std::vector<int>> order;
  if (node_order_of(cluster, placement).empty()) return order;
  const auto gpus_per_node = static_cast<size_t>(cluster.gpus_per_node);
  for (size_t first = 0; first < placement.gpu_of_rank.size(); first += gpus_per_node) {
    const size_t last = std::min(placement.gpu_of_rank.size(), first + gpus_per_node);
    std::vector<int>& locals = order.emplace_back();
    for (size_t rank = first; rank < last; ++rank) locals.push_back(placement.gpu_of_rank[rank] % cluster.gpus_per_node);
  }
  return order;
}

PlacementResult optimize_placement(const Cluster& cluster, const ParallelConfig& config, const WorkProfile& work,
                                   const TrainingSpec& training, const PlacementEffort& effort) {
  const detail::PlacementObjective model_seconds = [&](const CommunicationTimes& communication) {
    return iteration_seconds(config, work, communication, training);
  };
  detail::IncrementalIterationSeconds incremental(config, work, training);
  return search_placement(cluster, config, work, training, effort, model_seconds, incremental, false, true);
}

PlacementResult optimize_placement_pipette_paper(const Cluster& cluster, const ParallelConfig& config,
                                                 const WorkProfile& work, const TrainingSpec& training,
                                                 const PlacementEffort& effort) {
  // Pipette's code permutes whole nodes only.
  const detail::PlacementObjective paper_objective = pipette_paper_objective;
  RecomputedObjective recomputed(paper_objective);
  return search_placement(cluster, config, work, training, effort, paper_objective, recomputed, true, false);
}

}  // namespace pipette
