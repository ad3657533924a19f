#include "pipette/core/cluster.hpp"

namespace pipette {

namespace {

std::string check_links(const LinkMatrix& matrix, int expected_size, const std::string& what) {
  if (matrix.size() != expected_size) {
    return what + " has " + std::to_string(matrix.size()) + " rows, expected " + std::to_string(expected_size);
  }
  for (int from = 0; from < matrix.size(); ++from) {
    for (int to = 0; to < matrix.size(); ++to) {
      if (from == to) continue;
      const Link& link = matrix.at(from, to);
      if (!(link.bandwidth_bytes_per_second > 0)) {
        return what + " link " + std::to_string(from) + "->" + std::to_string(to) +
               " has no positive bandwidth; measure it or give a prior in the site file";
      }
      if (!(link.latency_seconds >= 0)) {
        return what + " link " + std::to_string(from) + "->" + std::to_string(to) + " has a negative latency";
      }
    }
  }
  return {};
}

}  // namespace

std::string validate(const Cluster& cluster) {
  if (cluster.node_names.empty()) return "the cluster has no nodes";
  if (cluster.gpus_per_node < 1) return "gpus_per_node must be at least 1 (got " + std::to_string(cluster.gpus_per_node) + ")";
  if (cluster.nics_per_node < 1) return "nics_per_node must be at least 1 (got " + std::to_string(cluster.nics_per_node) + ")";
  if (!(cluster.gpu.memory_bytes > 0)) return "GPU '" + cluster.gpu.name + "' has no memory size";
  if (!(cluster.gpu.hbm_bytes_per_second > 0)) return "GPU '" + cluster.gpu.name + "' has no HBM bandwidth";
  if (!(cluster.gpu.peak_fp16_flop_per_second > 0) && !(cluster.gpu.peak_bf16_flop_per_second > 0)) {
    return "GPU '" + cluster.gpu.name + "' has no 16-bit peak FLOP/s";
  }
  if (static_cast<int>(cluster.intra_node.size()) != cluster.num_nodes()) {
    return "intra_node has " + std::to_string(cluster.intra_node.size()) + " matrices for " +
           std::to_string(cluster.num_nodes()) + " nodes";
  }
  for (int node = 0; node < cluster.num_nodes(); ++node) {
    const std::string message =
        check_links(cluster.intra_node[static_cast<size_t>(node)], cluster.gpus_per_node,
                    "intra-node matrix of " + cluster.node_names[static_cast<size_t>(node)]);
    if (!message.empty()) return message;
  }
  const RailFabric& rails = cluster.rails;
  if (!rails.rail_of_local_gpu.empty()) {
    if (static_cast<int>(rails.rail_of_local_gpu.size()) != cluster.gpus_per_node)
      return "rail_of_local_gpu names " + std::to_string(rails.rail_of_local_gpu.size()) + " GPUs for " +
             std::to_string(cluster.gpus_per_node) + " GPUs per node";
    for (const int rail : rails.rail_of_local_gpu)
      if (rail < 0 || rail >= cluster.nics_per_node)
        return "rail_of_local_gpu names rail " + std::to_string(rail) + " of " + std::to_string(cluster.nics_per_node) +
               " rails (0-based)";
  }
  if (!(rails.spine_bandwidth_fraction >= 0 && rails.spine_bandwidth_fraction <= 1))
    return "the spine's cross-rail bandwidth fraction must be in [0, 1]";
  if (!(rails.spine_extra_latency_seconds >= 0)) return "the spine's extra latency must be >= 0";
  if (rails.spine_bandwidth_fraction == 0 && !rails.pxn)
    return "a fabric without a spine path between rails needs PXN (NCCL_PXN_DISABLE=0) for cross-rail flows";
  return check_links(cluster.inter_node, cluster.num_nodes(), "inter-node matrix");
}

}  // namespace pipette
