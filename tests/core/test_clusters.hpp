#pragma once
// The test clusters and search settings several core test files share.
#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/synthetic_fabric.hpp"

namespace pipette::testing {

// `nodes` nodes of 8 H100 SXM on one switch.
inline Cluster h100_nodes(int nodes) {
  Cluster cluster = synthetic_cluster(uniform_fabric(nodes), 1);
  cluster.gpu = *find_gpu("H100-SXM");
  return cluster;
}

// Searches that keep Slurm's placement.
inline SearchOptions without_placement() {
  SearchOptions options;
  options.optimize_placement = false;
  return options;
}

}  // namespace pipette::testing
