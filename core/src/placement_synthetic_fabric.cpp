#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "placement_random.hpp"

namespace pipette {

namespace {

double standard_normal(detail::Random& random) {
  // Box–Muller; 1 − unit() keeps the logarithm's argument in (0, 1].
  const double radius = std::sqrt(-2.0 * std::log(1.0 - random.unit()));
  return radius * std::cos(2.0 * std::numbers::pi * random.unit());
}

// The spread of 2-node all-reduce bandwidth on H100 (ultrascale_collective_bandwidth_vs_nodes.csv:
// p5 302, median 362, p95 436 GB/s: σ(ln) ≈ ln(436/302)/3.29 ≈ 0.11) and leaf switches of 8
// nodes whose cross-leaf pairs run ~9% slower (the bundled example cluster's generator).
SyntheticFabric measured_fabric(int nodes) {
  SyntheticFabric fabric = uniform_fabric(nodes);
  fabric.spread_sigma = 0.11;
  fabric.rack_size = 8;
  fabric.cross_rack_factor = 0.91;
  fabric.scatter_racks = true;
  return fabric;
}

// The measured fabric with faults a probe finds: one node pair in eight nodes at a quarter speed
// (a bad spine port or a cable trained down), at least two.
SyntheticFabric degraded_fabric(int nodes) {
  SyntheticFabric fabric = measured_fabric(nodes);
  fabric.degraded_pairs = std::max(2, nodes / 8);
  fabric.degraded_factor = 0.25;
  return fabric;
}

// 2:1 oversubscribed spine: cross-rack pairs get half the rails' bandwidth; racks of 8 nodes
// scattered over the job's node order.
SyntheticFabric oversubscribed_fabric(int nodes) {
  SyntheticFabric fabric = measured_fabric(nodes);
  fabric.cross_rack_factor = 0.5;
  return fabric;
}

}  // namespace

const std::vector<ComparisonFabric>& comparison_fabrics() {
  static const std::vector<ComparisonFabric> all{
      {"uniform", "every node pair at the 8-rail median", uniform_fabric},
      {"measured", "log-normal spread σ=0.11, leaves of 8 at 0.91 across", measured_fabric},
      {"degraded", "measured + max(2, nodes/8) pairs at 25%", degraded_fabric},
      {"oversubscribed", "measured + 2:1 spine: cross-rack pairs at 50%", oversubscribed_fabric},
  };
  return all;
}

Cluster comparison_cluster(std::size_t fabric_index, int nodes) {
  const std::uint64_t seed = 1000003ULL * static_cast<std::uint64_t>(nodes) + fabric_index;
  Cluster cluster = synthetic_cluster(comparison_fabrics().at(fabric_index).make(nodes), seed);
  cluster.gpu = *find_gpu("H100-SXM");
  return cluster;
}

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
