#include <cmath>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "pipette/core/synthetic_fabric.hpp"
#include "placement_random.hpp"

namespace pipette {

namespace {

double standard_normal(detail::Random& random) {
  // Box–Muller; 1 − unit() keeps the logarithm's argument in (0, 1].
  const double radius = std::sqrt(-2.0 * std::log(1.0 - random.unit()));
  return radius * std::cos(2.0 * std::numbers::pi * random.unit());
}

}  // namespace

SyntheticFabric uniform_fabric(int nodes) {
  SyntheticFabric fabric;
  fabric.nodes = nodes;
  fabric.spread_sigma = 0;
  fabric.rack_size = 0;
  fabric.degraded_pairs = 0;
  fabric.scatter_racks = false;
  return fabric;
}

Cluster synthetic_cluster(const SyntheticFabric& fabric, std::uint64_t seed) {
  detail::Random random(seed);
  Cluster cluster;
  for (int n = 0; n < fabric.nodes; ++n) cluster.node_names.push_back("node" + std::to_string(n));
  cluster.gpus_per_node = fabric.gpus_per_node;
  cluster.nics_per_node = fabric.nics_per_node;
  cluster.intra_node.assign(static_cast<size_t>(fabric.nodes), LinkMatrix(fabric.gpus_per_node, fabric.intra_node));
  // Rail-optimized racks: a flow between rails crosses the spine, as cross-rack pairs do.
  if (fabric.rack_size > 0) cluster.rails.spine_bandwidth_fraction = fabric.cross_rack_factor;

  std::vector<int> rack_of_node(static_cast<size_t>(fabric.nodes));
  for (int n = 0; n < fabric.nodes; ++n) rack_of_node[static_cast<size_t>(n)] = fabric.rack_size > 0 ? n / fabric.rack_size : 0;
  if (fabric.scatter_racks)
    for (int n = fabric.nodes - 1; n > 0; --n) std::swap(rack_of_node[static_cast<size_t>(n)], rack_of_node[static_cast<size_t>(random.below(n + 1))]);

  cluster.inter_node = LinkMatrix(fabric.nodes, Link{});
  for (int a = 0; a < fabric.nodes; ++a) {
    for (int b = a + 1; b < fabric.nodes; ++b) {
      double bandwidth = fabric.inter_node_median_bytes_per_second * std::exp(fabric.spread_sigma * standard_normal(random));
      if (rack_of_node[static_cast<size_t>(a)] != rack_of_node[static_cast<size_t>(b)]) bandwidth *= fabric.cross_rack_factor;
      const Link link{bandwidth, fabric.inter_node_latency_seconds, true};
      cluster.inter_node.at(a, b) = link;
      cluster.inter_node.at(b, a) = link;
    }
  }
  for (int i = 0; i < fabric.degraded_pairs && fabric.nodes >= 2; ++i) {
    const int a = random.below(fabric.nodes);
    int b = random.below(fabric.nodes - 1);
    if (b >= a) ++b;
    for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}})
      cluster.inter_node.at(from, to).bandwidth_bytes_per_second *= fabric.degraded_factor;
  }
  return cluster;
}

}  // namespace pipette
