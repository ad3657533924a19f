#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/units.hpp"

namespace pipette {

// A reproducible uneven cluster for tests and benchmarks: per node pair a log-normal bandwidth
// around a median (the spread pairwise measurements show), racks whose cross-rack pairs are
// slower (oversubscribed spine), a few degraded pairs (a flapping cable, a bad port), and racks
// scattered over the job's node order the way a busy scheduler hands them out.
struct SyntheticFabric {
  int nodes = 16;
  int gpus_per_node = 8;
  int nics_per_node = 8;
  Link intra_node{370 * units::gigabyte, 3 * units::microsecond, false};  // H100 NVSwitch ring, no NVLS
  double inter_node_median_bytes_per_second = 8 * 46 * units::gigabyte;  // 8x NDR, all rails
  double inter_node_latency_seconds = 8 * units::microsecond;
  double spread_sigma = 0.2;       // of the natural log of each pair's bandwidth
  int rack_size = 4;               // nodes per rack; 0: one flat switch
  double cross_rack_factor = 0.5;  // bandwidth of cross-rack pairs relative to in-rack
  int degraded_pairs = 2;
  double degraded_factor = 0.15;
  bool scatter_racks = true;       // the job's node order does not follow racks
};

// The same hardware with every node pair at the median: no spread, one flat switch, no degraded
// pair.
SyntheticFabric uniform_fabric(int nodes);

// Links are symmetric; the same fabric and seed give the same cluster on every platform.
Cluster synthetic_cluster(const SyntheticFabric& fabric, std::uint64_t seed);

// The fabrics of bench/compare's matrix (bench/RESULTS.md "Plans against the alternatives"), here
// so that the tests check the very clusters the bench reports on. Each starts from uniform_fabric:
// H100 SXM nodes with 8 NDR rails.
struct ComparisonFabric {
  const char* name;
  const char* description;
  SyntheticFabric (*make)(int nodes);
};
const std::vector<ComparisonFabric>& comparison_fabrics();

// The matrix's cluster of comparison_fabrics()[fabric_index] with `nodes` H100-SXM nodes. The seed
// depends on the size and the fabric only, so every model of the matrix is planned on one cluster.
Cluster comparison_cluster(std::size_t fabric_index, int nodes);

}  // namespace pipette
