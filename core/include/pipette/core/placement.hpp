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
  std::int64_t moves_evaluated = 0;
  bool exact = false;                    // true when proven optimal by the exact solver
};

// Finds the rank → GPU map minimising critical_path(...).iteration_seconds. Deterministic: the
// same inputs give the same placement on every node, process and thread count.
PlacementResult optimize_placement(const Cluster& cluster, const ParallelConfig& config,
                                   const WorkProfile& work, const TrainingSpec& training,
                                   const PlacementEffort& effort);

// node_order[k] = node index that gets NODE_RANK k (one-process-per-node launchers).
std::vector<int> node_order_of(const Cluster& cluster, const Placement& placement);

}  // namespace pipette
