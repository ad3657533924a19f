#pragma once
#include "pipette/core/cluster.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/search.hpp"

namespace pipette {

struct PlacementResult {
  Placement placement;
  double iteration_seconds = 0;          // critical_path of the returned placement
  double default_iteration_seconds = 0;  // critical_path of default_placement
  std::int64_t moves_evaluated = 0;      // layouts tried, annealing moves and exact-search nodes
  std::int64_t moves_to_best = 0;        // moves evaluated when the returned placement was first found
  bool exact = false;                    // true when proven optimal by the exact solver
  std::int64_t move_budget = 0;          // the moves it was allowed (PlacementEffort, scaled to the job)
  double move_work = 0;                  // moves_evaluated × the job's work per move (max_move_work's unit)
  bool local_moves = false;              // it permuted GPUs inside nodes (see core/src/placement.cpp)
  // The returned node order with every node's GPUs in CUDA order: what the GPU orders inside nodes
  // gained (iteration_seconds is at most this).
  double identity_local_order_iteration_seconds = 0;
};

// How many of a placement's inter-node data-parallel and pipeline neighbours (DP ring neighbours
// in rank order, stage s → s + 1 of one pipeline) sit on different local GPU indices, where a
// rail-optimized fabric sends them across rails (issue 18).
struct RailAlignment {
  enum class Kind { pipeline, data_parallel };
  struct Pair {
    Kind kind;
    int stage;        // the sending stage of a pipeline pair; the stage of a DP ring
    int gpu_a, gpu_b; // global GPU indices
    bool cross_rail;  // different rails (GPUs sharing a NIC are on one rail)
  };
  int inter_node_neighbours = 0;
  int on_different_local_gpus = 0;
  std::vector<Pair> misaligned;
  double misaligned_share() const {
    return inter_node_neighbours > 0 ? static_cast<double>(on_different_local_gpus) / inter_node_neighbours : 0;
  }
};
RailAlignment rail_alignment(const Cluster& cluster, const ParallelConfig& config, const Placement& placement);
// Issue 18's bound: at most this share of a plan's inter-node neighbours on different local GPUs,
// unless the GPU orders inside nodes predicted a gain (PlacementSearchSummary::gpu_orders_gained).
inline constexpr double kMaxMisalignedNeighbourShare = 0.05;

// Finds the rank → GPU map minimising critical_path(...).iteration_seconds. Deterministic: the
// same inputs give the same placement on every node, process and thread count.
PlacementResult optimize_placement(const Cluster& cluster, const ParallelConfig& config,
                                   const WorkProfile& work, const TrainingSpec& training,
                                   const PlacementEffort& effort);

// The same cluster with every link as good as the best one of its kind (highest bandwidth,
// lowest latency): communication costs on it bound those of any placement on the real cluster
// from below, because the iteration time never drops when a communication time grows.
Cluster with_best_links(const Cluster& cluster);

// Per node, its best links: to any other node (as sent from it) and between two of its GPUs.
struct NodeBestLinks {
  std::vector<Link> inter_node;  // per node
  std::vector<Link> intra_node;  // per node
};
NodeBestLinks best_links_of_nodes(const Cluster& cluster);
// with_best_links from the cluster's best_links_of_nodes, already computed.
Cluster with_best_links(const Cluster& cluster, const NodeBestLinks& of_nodes);

// Makes every stage's ep_seconds, priced on with_best_links in Slurm's order, a lower bound of
// what the expert all-to-all costs in any placement on `cluster` (whose best_links_of_nodes is
// `best`) when an all-to-all group (ep members) has more members than a node has GPUs: raises it to
// the floor every placement pays, or, with fewer rails than GPUs per node, replaces it by that
// floor. The proof is at the definition.
void bound_all_to_all(const Cluster& cluster, const NodeBestLinks& best, const ParallelConfig& config,
                               const WorkProfile& work, CommunicationTimes& communication);

// node_order[k] = node index that gets NODE_RANK k (one-process-per-node launchers): the node
// that hosts ranks k·G … k·G + G − 1. Empty when a block of G consecutive ranks spans nodes
// (no placement optimize_placement returns does).
std::vector<int> node_order_of(const Cluster& cluster, const Placement& placement);

// For one-process-per-node launchers: local_gpu_order[k][j] = the GPU of its node (CUDA device
// index) that LOCAL_RANK j of NODE_RANK k must use, e.g. the CUDA_VISIBLE_DEVICES order. The
// identity unless the search regrouped GPUs inside nodes. Empty when node_order_of is.
std::vector<std::vector<int>> local_gpu_order_of(const Cluster& cluster, const Placement& placement);

// The objective of Pipette's released code (DATE 2024), for comparison: the slowest pipeline's
// summed stage-to-stage transfer time plus stage 0's data-parallel reduction alone. It ignores
// compute, the 1F1B critical path, TP and every other stage's DP ring.
double pipette_paper_objective(const CommunicationTimes& communication);

// The same search as optimize_placement (same moves, seed and move budget; annealing only)
// steered by pipette_paper_objective; the result is then scored by critical_path, so it can be
// compared with optimize_placement's.
PlacementResult optimize_placement_pipette_paper(const Cluster& cluster, const ParallelConfig& config,
                                                 const WorkProfile& work, const TrainingSpec& training,
                                                 const PlacementEffort& effort);

}  // namespace pipette
