#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/model.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/result.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

struct PlacementEffort {
  // A work budget, not a time budget: every node must reach the same plan bit for bit.
  std::int64_t max_moves = 200000;
  std::uint64_t seed = 0x9E3779B97F4A7C15ULL;
  int exact_up_to_nodes = 8;     // exhaustive search with pruning at or below this node count
  // What one search may recompute, counted in GPUs of the communication entries its moves touch
  // (a node swap of a 1024-node job touches two 1024-GPU DP rings, of a 16-node job a few dozen
  // GPUs): the move budget is the smaller of max_moves and this over the job's work per move, so
  // the job-start time grows smoothly with the job instead of with max_moves × the cost of a move.
  std::int64_t max_move_work = 25'000'000;
  // The same over every candidate search_plans places for one job: runners-up share what the
  // earlier searches left, and keep Slurm's order once it is spent.
  std::int64_t max_job_move_work = 75'000'000;
};

struct SearchOptions {
  int top_k = 5;
  double memory_safety_margin_bytes = 0;  // plans over gpu.memory_bytes − margin are rejected
  RuntimeOverheads overheads;
  ComputeEfficiency efficiency = fitted_compute_efficiency();  // a site calibration corrects it
  bool optimize_placement = true;
  int placement_candidates = 8;           // best candidates re-ranked after placement
  PlacementEffort placement;
};

// A family of configurations the search dropped and why, e.g. {"pp=2", "stage 0 needs 92.1 GiB > 80 GiB"}.
struct Rejection {
  std::string family;
  std::string reason;
};

struct SearchResult {
  std::vector<Plan> plans;          // best first, at most top_k
  std::vector<Rejection> rejections;
  int candidates_evaluated = 0;
};

// Both price the model as launched (model_for_sequence) and keep only what training.target can
// build (launch_problem).
// Error when nothing fits: names the smallest change that would (more nodes, smaller micro-batch,
// recompute, ...).
Result<SearchResult> search_plans(const ModelSpec& model, const TrainingSpec& training,
                                  const Cluster& cluster, const SearchOptions& options);

// `config` completed as evaluate_plan prices it (the framework's own layer split, sp off at tp 1,
// one chunk at pp 1), or why no framework could run it on this job: the wrong GPU count, tp that
// does not divide the heads, a global batch that is not whole micro-batches per replica, a split
// that does not give every stage its layers. What ran is priced with this (a calibration record).
Result<ParallelConfig> complete_layout(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                                       const ParallelConfig& config);

// complete_layout, and also why the framework cannot build it as Pipette would export it
// (launch_problem, optimizer_problem). Memory is not judged.
Result<ParallelConfig> complete_configuration(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                                              const ParallelConfig& config);

// Evaluates one configuration exactly as the search would (memory, time, placement if asked); an
// error either from complete_configuration or, past it, that the configuration does not fit.
Result<Plan> evaluate_plan(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                           const ParallelConfig& config, const SearchOptions& options);

}  // namespace pipette
