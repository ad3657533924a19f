#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/result.hpp"
#include "pipette/topology/hwloc_inspect.hpp"
#include "pipette/topology/link_cache.hpp"
#include "pipette/topology/site_config.hpp"
#include "pipette/topology/topology_conf.hpp"

namespace pipette {

struct AssemblyInput {
  std::vector<std::string> node_names;       // the job's nodes, in Slurm's order
  int gpus_per_node = 0;                      // 0: the local inspection's GPU count
  std::string gpu;                            // GPU model; "" = local inspection, then site.gpu
  const NodeInspection* local = nullptr;      // this node (every node of a job is assumed alike)
  const LinkTable* cache = nullptr;           // nullptr: no cache, every link is a prior
  const SwitchTree* switches = nullptr;       // from site.priors.topology_conf, if any; nodes it
                                              // does not list get the last switch_level_factor
  // The time staleness is measured against. The plugin passes the job's start time so every node
  // computes identical weights (and so the identical plan). 0 counts every entry as fresh.
  std::int64_t reference_time_unix_seconds = 0;
};

struct AssembledCluster {
  Cluster cluster;                    // Link.measured says which links came from the cache
  int measured_node_pairs = 0;
  int assumed_node_pairs = 0;
  int measured_nodes = 0;             // intra-node matrices taken from the cache
  // Human-readable, one line each: which links were measured and which assumed, and why
  // (no entry, stale, fingerprint differs). Long lists are summarised.
  std::vector<std::string> links_assumed;
  std::vector<std::string> notes;
};

Result<AssembledCluster> assemble_cluster(const AssemblyInput& input, const SiteConfig& site);

}  // namespace pipette
