#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/units.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

using units::gigabyte;
using units::microsecond;

Cluster uniform_cluster(int nodes, int gpus_per_node, int rails, Link intra, Link inter) {
  Cluster cluster;
  for (int n = 0; n < nodes; ++n) cluster.node_names.push_back('n' + std::to_string(n));
  cluster.gpus_per_node = gpus_per_node;
  cluster.nics_per_node = rails;
  cluster.intra_node.assign(static_cast<size_t>(nodes), LinkMatrix(gpus_per_node, intra));
  cluster.inter_node = LinkMatrix(nodes, inter);
  return cluster;
}

const Link nvlink{200 * gigabyte, 2 * microsecond, true};
const Link fabric{100 * gigabyte, 5 * microsecond, true};  // all rails of one node pair together

TEST(P2p, IntraNodeIsLatencyPlusBytesOverTheGpuPairLink) {
  Cluster cluster = uniform_cluster(1, 4, 2, nvlink, fabric);
  cluster.intra_node[0].at(1, 3) = Link{50 * gigabyte, 3 * microsecond, true};
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 2, 1e9, 1), 2e-6 + 1e9 / 200e9);
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 1, 3, 1e9, 4), 3e-6 + 1e9 / 50e9);  // flows do not share GPU pairs
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 2, 2, 1e9, 1), 0.0);
}

TEST(P2p, ConcurrentFlowsOfANodePairShareMinOfFlowsAndRails) {
  const Cluster cluster = uniform_cluster(2, 8, 4, nvlink, fabric);
  // One flow rides one of four rails: a quarter of the node pair's 100 GB/s.
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 8, 1e9, 1), 5e-6 + 1e9 / 25e9);
  // Four flows use all four rails, still 25 GB/s each.
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 8, 1e9, 4), 5e-6 + 1e9 / 25e9);
  // Eight flows share the four rails: 12.5 GB/s each.
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 3, 11, 1e9, 8), 5e-6 + 1e9 / 12.5e9);
}

// A node with more NICs than GPUs: NCCL spreads each GPU's channels over the NICs nearest it,
// DIVUP(local NICs, local GPUs) of them (src/graph/topo.cc @5067397c l.2039-2075
// ncclTopoGetLocalNetType). An AWS p5 (8 H100, 32 EFA NICs of 100 Gb/s) gives a GPU four, the
// 400 Gb/s a DGX H100 gives it with one NIC: the same node pair prices the same flows.
TEST(P2p, AGpuSendsOnEveryNicOfItsOwn) {
  const Cluster eight_nics = uniform_cluster(2, 8, 8, nvlink, fabric);
  const Cluster thirty_two_nics = uniform_cluster(2, 8, 32, nvlink, fabric);
  EXPECT_EQ(thirty_two_nics.nics_per_sending_gpu(), 4);
  for (const int flows : {1, 4, 8, 16}) {
    EXPECT_DOUBLE_EQ(p2p_seconds(thirty_two_nics, 0, 8, 1e9, flows), p2p_seconds(eight_nics, 0, 8, 1e9, flows)) << flows;
  }
  // One flow: four of the 32 NICs, 12.5 GB/s of the pair's 100.
  EXPECT_DOUBLE_EQ(p2p_seconds(thirty_two_nics, 0, 8, 1e9, 1), 5e-6 + 1e9 / 12.5e9);
  // Where hwloc finds only one NIC beside each GPU (a DGX's storage NICs sit farther, counted
  // among the node's NICs), a flow keeps that one.
  Cluster storage_nics = uniform_cluster(2, 8, 32, nvlink, fabric);
  storage_nics.rails.nics_per_gpu = 1;
  EXPECT_DOUBLE_EQ(p2p_seconds(storage_nics, 0, 8, 1e9, 1), 5e-6 + 1e9 / (100e9 / 32));
  // NICs that do not divide among the GPUs: DIVUP(12, 8) = 2 each, and eight senders share all 12.
  const Cluster twelve_nics = uniform_cluster(2, 8, 12, nvlink, fabric);
  EXPECT_DOUBLE_EQ(twelve_nics.sender_share_of_node_pair(1), 2.0 / 12);
  EXPECT_DOUBLE_EQ(twelve_nics.sender_share_of_node_pair(8), 1.0 / 8);
  storage_nics.gpu = *find_gpu("H100-SXM");
  ASSERT_EQ(validate(storage_nics), "");
  storage_nics.rails.nics_per_gpu = 33;
  EXPECT_NE(validate(storage_nics).find("nics_per_gpu must be in [0, nics_per_node = 32]"), std::string::npos);
}

// Issue 18: node-pair links are rail-aligned figures; GPU 0 of one node and GPU 1 of the other
// sit on different rails of a rail-optimized fabric (8 GPUs, 8 NICs: GPU i on rail i).
TEST(P2p, CrossRailFlowTakesPxnOverNvlinkThenTheAlignedRail) {
  const Cluster cluster = uniform_cluster(2, 8, 8, nvlink, fabric);
  // Aligned: one of eight rails of the pair's 100 GB/s.
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 8, 1e9, 1), 5e-6 + 1e9 / 12.5e9);
  // Cross-rail: NVLink to the sender's GPU 1 (rail 1), then rail 1; the NVLink time is added.
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 9, 1e9, 1), 5e-6 + 2e-6 + 1e9 * (1 / 12.5e9 + 1 / 200e9));
}

TEST(P2p, CrossRailFlowWithoutPxnCrossesTheSpineAtItsShare) {
  Cluster cluster = uniform_cluster(2, 8, 8, nvlink, fabric);
  cluster.rails.pxn = false;
  cluster.rails.spine_bandwidth_fraction = 0.5;  // a 2:1 oversubscribed spine
  cluster.rails.spine_extra_latency_seconds = 1 * microsecond;
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 9, 1e9, 1), 6e-6 + 1e9 / 6.25e9);
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 8, 1e9, 1), 5e-6 + 1e9 / 12.5e9);  // aligned: unchanged
  // GPUs that share a NIC (8 GPUs, 4 NICs: GPUs 0 and 1 on rail 0) are on one rail.
  cluster.nics_per_node = 4;
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 9, 1e9, 1), 5e-6 + 1e9 / 25e9);
  // The rails hwloc found win over the cabling default.
  cluster.rails.rail_of_local_gpu = {3, 2, 1, 0, 3, 2, 1, 0};
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 12, 1e9, 1), 5e-6 + 1e9 / 25e9);
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 9, 1e9, 1), 5e-6 + 1e-6 + 1e9 / 12.5e9);
  cluster.gpu = *find_gpu("H100-SXM");
  EXPECT_EQ(validate(cluster), "");
  cluster.rails.rail_of_local_gpu[0] = 4;
  EXPECT_NE(validate(cluster).find("rail 4 of 4"), std::string::npos);
}

TEST(RingAllreduce, HopsBetweenDifferentRailsCrossTheSpine) {
  Cluster cluster = uniform_cluster(2, 8, 8, nvlink, fabric);
  cluster.rails.spine_bandwidth_fraction = 0.5;
  const double aligned = ring_allreduce_seconds(cluster, {0, 8}, 1e9);
  const double crossed = ring_allreduce_seconds(cluster, {0, 9}, 1e9);
  // Two GPUs, one node each: 2·(2−1)/2 = 1 payload over one flow, 2 latency steps.
  EXPECT_DOUBLE_EQ(aligned, 1e9 / 12.5e9 + 2 * 5e-6);
  EXPECT_DOUBLE_EQ(crossed, 1e9 / 6.25e9 + 2 * 5e-6);
  // Rings of several GPUs per node pair GPUs of equal rails: {0,1} with {8,9} stays aligned even in
  // another order.
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, {0, 1, 9, 8}, 1e9), ring_allreduce_seconds(cluster, {0, 1, 8, 9}, 1e9));
  EXPECT_GT(ring_allreduce_seconds(cluster, {0, 1, 10, 11}, 1e9), ring_allreduce_seconds(cluster, {0, 1, 8, 9}, 1e9));
}

TEST(P2p, UsesTheDirectedLinkOfTheNodePair) {
  Cluster cluster = uniform_cluster(2, 1, 1, nvlink, fabric);
  cluster.inter_node.at(1, 0) = Link{10 * gigabyte, 9 * microsecond, true};
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 0, 1, 1e9, 1), 5e-6 + 1e9 / 100e9);
  EXPECT_DOUBLE_EQ(p2p_seconds(cluster, 1, 0, 1e9, 1), 9e-6 + 1e9 / 10e9);
}

TEST(RingAllreduce, OneNodeIsTheNcclRingFormulaAtTheSlowestRingLink) {
  Cluster cluster = uniform_cluster(1, 8, 8, nvlink, fabric);
  const std::vector<int> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, gpus, 1e9), 2.0 * 7 / 8 * 1e9 / 200e9 + 14 * 2e-6);
  // A slow link off the ring (0→2) changes nothing; one on it (2→3) sets the pace.
  cluster.intra_node[0].at(0, 2) = Link{20 * gigabyte, 2 * microsecond, true};
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, gpus, 1e9), 2.0 * 7 / 8 * 1e9 / 200e9 + 14 * 2e-6);
  cluster.intra_node[0].at(2, 3) = Link{50 * gigabyte, 4 * microsecond, true};
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, gpus, 1e9), 2.0 * 7 / 8 * 1e9 / 50e9 + 14 * 4e-6);
  // Ring order follows the group's order: 0,2,1,... uses the slow 0→2 link.
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, {0, 2, 1, 3}, 1e9), 2.0 * 3 / 4 * 1e9 / 20e9 + 6 * 2e-6);
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, {5}, 1e9), 0.0);
}

// On a board that wires every pair directly (4-GPU HGX A100: 4 NVLinks a pair) NCCL spreads a
// ring's channels over every link among its GPUs until they carry a GPU's whole NVLink bandwidth
// (nccl @5067397c src/graph/search.cc l.30-38, 81-121, 1198): a ring over g GPUs runs at g − 1
// times its slowest pair. NVSwitch pairs are already the whole bandwidth, and stay one ring.
TEST(RingAllreduce, FullMeshNodeRunsChannelsOverEveryLinkAmongTheRingsGpus) {
  const Link pair{80 * gigabyte, 3 * microsecond, false};  // 4 links × 25 GB/s × 0.8
  Cluster mesh = uniform_cluster(2, 4, 1, pair, fabric);
  mesh.intra_node_full_mesh = true;
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(mesh, {0, 1, 2, 3}, 1e9), 2.0 * 3 / 4 * 1e9 / (3 * 80e9) + 6 * 3e-6);
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(mesh, {0, 1, 2}, 1e9), 2.0 * 2 / 3 * 1e9 / (2 * 80e9) + 4 * 3e-6);
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(mesh, {0, 1}, 1e9), 2.0 * 1 / 2 * 1e9 / 80e9 + 2 * 3e-6);
  Cluster switched = mesh;
  switched.intra_node_full_mesh = false;
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(switched, {0, 1, 2, 3}, 1e9), 2.0 * 3 / 4 * 1e9 / 80e9 + 6 * 3e-6);
  // Every pair carries channels, not only the ring order's: a slow 0→2 sets the pace.
  mesh.intra_node[0].at(0, 2) = Link{40 * gigabyte, 3 * microsecond, false};
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(mesh, {0, 1, 2, 3}, 1e9), 2.0 * 3 / 4 * 1e9 / (3 * 40e9) + 6 * 3e-6);
  // Across nodes the ring's NVLink hops run on the mesh too: where NVLink paces the ring (four
  // 100 GB/s rails), the mesh's three links a GPU make its NVLink share three times cheaper.
  Cluster two = uniform_cluster(2, 4, 4, pair, Link{400 * gigabyte, 5 * microsecond, true});
  const double switched_both = ring_allreduce_seconds(two, {0, 1, 2, 3, 4, 5, 6, 7}, 1e9);
  two.intra_node_full_mesh = true;
  EXPECT_NEAR(switched_both - ring_allreduce_seconds(two, {0, 1, 2, 3, 4, 5, 6, 7}, 1e9),
              2.0 * 3 / 4 * 1e9 / 80e9 * 7 / 8 * (1 - 1.0 / 3), 1e-15);
}

// Bus bandwidth of a ring all-reduce over the first `nodes` nodes' GPUs, as nccl-tests reports it.
double bus_bandwidth(const Cluster& cluster, int nodes, double bytes) {
  std::vector<int> gpus(static_cast<size_t>(cluster.gpus_per_node * nodes));
  for (size_t g = 0; g < gpus.size(); ++g) gpus[g] = static_cast<int>(g);
  const double n = static_cast<double>(gpus.size());
  return 2 * (n - 1) / n * bytes / ring_allreduce_seconds(cluster, gpus, bytes);
}

// NCCL's ring across nodes is one flat ring through all n GPUs, pipelined: of each GPU's
// 2(n − 1)/n of the payload its sub-ring sends 1/subrings over a NIC and the rest over NVLink, at
// the same time, and the slower pays. The latencies are NCCL's intra- and inter-node steps.
TEST(RingAllreduce, AcrossNodesIsOneFlatRingPacedByNvlinkOrTheNics) {
  const double bytes = 1e9;
  const double latency = 6 * 2e-6 + 2 * 5e-6;
  // 4 rails of 25 GB/s: each GPU's NIC carries a quarter of its 2 · 7/8 of the payload.
  const Cluster thin = uniform_cluster(2, 4, 4, nvlink, fabric);
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(thin, {0, 1, 2, 3, 4, 5, 6, 7}, bytes), 2.0 * 7 / 8 * bytes / 4 / 25e9 + latency);
  // 4 rails of 100 GB/s: the NVLink share, 3/4 of it at 200 GB/s, paces the ring.
  const Cluster wide = uniform_cluster(2, 4, 4, nvlink, Link{400 * gigabyte, 5 * microsecond, true});
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(wide, {0, 1, 2, 3, 4, 5, 6, 7}, bytes),
                   2.0 * 7 / 8 * bytes * 3 / 4 / 200e9 + latency);
  // One GPU per node: the whole payload over one rail.
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(thin, {1, 5}, bytes), 2.0 * 1 / 2 * bytes / 25e9 + 2 * 5e-6);
}

// The flat ring's bus bandwidth across nodes is the lower of the node's ring rate · g/(g − 1) and
// the node's NICs together, whatever the node count, as NVIDIA's figures say
// (ground_truth_data/nccl_bandwidth_measurements.csv): 192 GB/s for DGX A100 rings of 2 and more
// nodes (NVIDIA/nccl #812; 8 HDR NICs at ~24 GB/s, nccl-tests #160; 235 GB/s inside the node) and
// 365.84 GB/s on 4 HGX H100 nodes (nccl-tests #309; 8 NDR NICs at 46-48 GB/s, #290; 367.61 GB/s
// inside an H100-class node with NVLS off, stas00/ml-engineering's 8x H200). Large payloads, where
// latency is negligible.
TEST(RingAllreduce, AcrossNodesReachesNvidiasPublishedRingBandwidth) {
  const double bytes = 8 * units::gibibyte;
  const Cluster dgx_a100 = uniform_cluster(16, 8, 8, Link{235 * gigabyte, 3 * microsecond, true},
                                           Link{8 * 24 * gigabyte, 6 * microsecond, true});
  for (const int nodes : {2, 4, 16}) EXPECT_NEAR(bus_bandwidth(dgx_a100, nodes, bytes) / (192 * gigabyte), 1.0, 0.02) << nodes;
  const Cluster hgx_h100 = uniform_cluster(4, 8, 8, Link{367.61 * gigabyte, 3 * microsecond, true},
                                           Link{8 * 47 * gigabyte, 6 * microsecond, true});
  EXPECT_NEAR(bus_bandwidth(hgx_h100, 4, bytes) / (365.84 * gigabyte), 1.0, 0.04);
}

TEST(RingAllreduce, MembersOfANodeAreGroupedWhereverTheyStandInRankOrder) {
  // NCCL's node ring visits nodes in order of first appearance and each node's GPUs together in
  // rank order, so scattered members cost what the same members grouped cost.
  Cluster cluster = uniform_cluster(3, 4, 4, nvlink, fabric);
  cluster.intra_node[1].at(2, 0) = Link{10 * gigabyte, 3 * microsecond, true};  // GPU 6 → GPU 4
  cluster.inter_node.at(2, 0) = Link{30 * gigabyte, 7 * microsecond, true};
  for (const double bytes : {1e6, 1e9}) {
    const double scattered = ring_allreduce_seconds(cluster, {6, 1, 4, 9, 7, 5, 0}, bytes);
    EXPECT_DOUBLE_EQ(scattered, ring_allreduce_seconds(cluster, {6, 4, 7, 5, 1, 0, 9}, bytes));
    // Node 1's GPUs in another order avoid the slow 6 → 4 link.
    EXPECT_GT(scattered, ring_allreduce_seconds(cluster, {4, 6, 5, 7, 1, 0, 9}, bytes));
  }
}

TEST(RingAllreduce, MembersOfANodeAreGroupedInRingsOverManyNodes) {
  // Beyond 32 nodes the ring checks for revisited nodes another way; the grouping must not change.
  const Cluster cluster = uniform_cluster(40, 2, 2, nvlink, fabric);
  std::vector<int> scattered, grouped;
  for (int node = 0; node < 40; ++node) scattered.push_back(2 * node);
  for (int node = 0; node < 40; ++node) scattered.push_back(2 * node + 1);
  for (int gpu = 0; gpu < 80; ++gpu) grouped.push_back(gpu);
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, scattered, 1e9), ring_allreduce_seconds(cluster, grouped, 1e9));
}

TEST(RingAllreduce, NodeRingRunsAtItsSlowestLinkInRankOrder) {
  Cluster cluster = uniform_cluster(4, 1, 1, nvlink, fabric);
  cluster.inter_node.at(0, 2) = Link{10 * gigabyte, 5 * microsecond, true};
  const double fast = 2.0 * 3 / 4 * 1e9 / 100e9 + 6 * 5e-6;
  const double slow = 2.0 * 3 / 4 * 1e9 / 10e9 + 6 * 5e-6;
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, {0, 1, 2, 3}, 1e9), fast);
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, {0, 2, 1, 3}, 1e9), slow);
  // The closing edge 3→0 of the ring counts too.
  cluster.inter_node.at(3, 0) = Link{20 * gigabyte, 5 * microsecond, true};
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, {0, 1, 2, 3}, 1e9), 2.0 * 3 / 4 * 1e9 / 20e9 + 6 * 5e-6);
}

std::map<std::string, std::vector<std::string>> read_csv_rows(const std::string& path, const std::string& key_column) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream header_stream(line);
  for (std::string cell; std::getline(header_stream, cell, ',');) header.push_back(cell);
  const auto key_index = std::find(header.begin(), header.end(), key_column) - header.begin();
  std::map<std::string, std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream cells_stream(line);
    for (std::string cell; std::getline(cells_stream, cell, ',');) cells.push_back(cell);
    rows[cells[static_cast<size_t>(key_index)] + (key_column == "payload" ? "" : "/" + cells[1])] = cells;
  }
  return rows;
}

// ground_truth_data/h200_allreduce_size_sweep.csv: nccl-tests all_reduce on 8x H200. The α–β
// ring with α fitted on the smallest payload alone and β on the largest alone must predict every
// payload in between: the model's shape, not a curve fit.
TEST(RingAllreduce, AlphaBetaRingReproducesTheH200SizeSweep) {
  const auto rows = read_csv_rows(std::string(PIPETTE_SHARED_DIR) + "/ground_truth_data/h200_allreduce_size_sweep.csv", "payload");
  ASSERT_EQ(rows.size(), 20u);
  const auto payload_bytes = [](const std::string& text) {
    const double scale = text.ends_with("KiB") ? units::kibibyte : text.ends_with("MiB") ? units::mebibyte : units::gibibyte;
    return std::stod(text.substr(0, text.size() - 3)) * scale;
  };
  const double largest_busbw = std::stod(rows.at("16GiB")[1]) * gigabyte;
  const double smallest_seconds = 2.0 * 7 / 8 * 32 * units::kibibyte / (std::stod(rows.at("32KiB")[1]) * gigabyte);
  const double alpha = smallest_seconds / 14;
  const Cluster cluster = uniform_cluster(1, 8, 8, Link{largest_busbw, alpha, true}, fabric);
  const std::vector<int> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<double> relative_errors;
  for (const auto& [payload, cells] : rows) {
    const double bytes = payload_bytes(payload);
    const double predicted_busbw = 2.0 * 7 / 8 * bytes / ring_allreduce_seconds(cluster, gpus, bytes);
    const double measured_busbw = std::stod(cells[1]) * gigabyte;
    relative_errors.push_back(std::abs(predicted_busbw / measured_busbw - 1));
    if (bytes >= 256 * units::mebibyte) {
      EXPECT_NEAR(predicted_busbw / measured_busbw, 1.0, 0.08) << payload;
    }
    EXPECT_NEAR(predicted_busbw / measured_busbw, 1.0, 0.40) << payload;  // NCCL protocol switches mid-range
  }
  std::sort(relative_errors.begin(), relative_errors.end());
  EXPECT_LT(relative_errors[relative_errors.size() / 2], 0.15);
}

// ground_truth_data/ultrascale_collective_bandwidth_vs_nodes.csv: 256 MB all-reduce bus bandwidth
// on AWS p5 (8x H100, 32x100 Gb EFA = 400 GB/s per node; NCCL drives each GPU's four EFA
// devices with several channels, so a node has 8 GPU-wide rails) falls 11x from 2 to 64 nodes. One
// nominal inter-node bandwidth cannot produce that; a ring over measured, uneven node pairs runs
// at its slowest pair, and more nodes mean a worse slowest pair and more latency steps.
TEST(RingAllreduce, BusBandwidthFallsWithNodeCountLikeUltrascaleMeasurements) {
  const auto rows = read_csv_rows(
      std::string(PIPETTE_SHARED_DIR) + "/ground_truth_data/ultrascale_collective_bandwidth_vs_nodes.csv", "collective");
  const double bytes = 256 * units::mebibyte;
  const Link h100_nvlink{480 * gigabyte, 3 * microsecond, true};
  const double efa_median_bytes_per_second = 400 * gigabyte;
  const double efa_step_latency_seconds = 20 * microsecond;
  const int max_nodes = 64;
  const auto predicted_busbw = [&](double spread_sigma, int nodes) {
    std::vector<double> draws;
    for (int draw = 0; draw < 31; ++draw) {
      Cluster cluster = uniform_cluster(max_nodes, 8, 8, h100_nvlink, Link{efa_median_bytes_per_second, efa_step_latency_seconds, true});
      std::mt19937_64 random(static_cast<std::uint64_t>(draw) * 7919 + 17);
      std::normal_distribution<double> normal(0.0, 1.0);
      for (int a = 0; a < max_nodes; ++a)
        for (int b = 0; b < max_nodes; ++b)
          cluster.inter_node.at(a, b).bandwidth_bytes_per_second = efa_median_bytes_per_second * std::exp(spread_sigma * normal(random));
      std::vector<int> gpus(static_cast<size_t>(8 * nodes));
      for (size_t g = 0; g < gpus.size(); ++g) gpus[g] = static_cast<int>(g);
      const double n = static_cast<double>(gpus.size());
      draws.push_back(2 * (n - 1) / n * bytes / ring_allreduce_seconds(cluster, gpus, bytes));
    }
    std::nth_element(draws.begin(), draws.begin() + 15, draws.end());
    return draws[15];
  };
  const double spread_sigma = 0.8;
  double previous = std::numeric_limits<double>::infinity();
  for (const int nodes : {2, 4, 8, 16, 32, 64}) {
    const double measured = std::stod(rows.at("AllReduce/" + std::to_string(nodes))[4]) * gigabyte;
    const double predicted = predicted_busbw(spread_sigma, nodes);
    EXPECT_LT(predicted, previous) << nodes << " nodes";
    previous = predicted;
    if (nodes >= 4) {
      EXPECT_NEAR(std::log(predicted / measured), 0.0, std::log(1.6)) << nodes << " nodes";
    }
  }
  // The same fabric without spread predicts 64 nodes far too fast: the bottleneck link matters.
  const double measured_64 = std::stod(rows.at("AllReduce/64")[4]) * gigabyte;
  EXPECT_GT(predicted_busbw(0.0, 64), 2.5 * measured_64);
}

// A cluster of priors (every node pair assumed, all equal) falls with node count as its network
// kind says, and only so. On EFA the contention curve carries the whole fall: the prior-only ring
// follows the ultrascale all-reduce medians within 1.6x from 4 to 64 nodes. On InfiniBand an assumed
// pair is the median pair and a ring over any number of them keeps its rate, as NVIDIA's DGX A100
// rings keep 192 GB/s "for 2+ nodes" (nccl_bandwidth_measurements.csv, NVIDIA/nccl #812): the same
// as on measured pairs. (A ring over k assumed InfiniBand pairs used to run at the expected slowest
// of k log-normal draws, σ = 0.8, EFA's spread: at 64 nodes 9% of the pair rate.)
TEST(RingAllreduce, PriorOnlyClustersFallAsTheirNetworkKindSays) {
  const auto rows = read_csv_rows(
      std::string(PIPETTE_SHARED_DIR) + "/ground_truth_data/ultrascale_collective_bandwidth_vs_nodes.csv", "collective");
  const double bytes = 256 * units::mebibyte;
  Cluster efa = uniform_cluster(64, 8, 8, Link{480 * gigabyte, 3 * microsecond, true},
                                Link{400 * gigabyte, 20 * microsecond, false});
  efa.collective_scaling = collective_scaling_of(NetworkKind::efa);
  Cluster infiniband = efa;
  infiniband.collective_scaling = collective_scaling_of(NetworkKind::infiniband);
  Cluster measured = infiniband;
  measured.inter_node = LinkMatrix(64, Link{400 * gigabyte, 20 * microsecond, true});
  const auto bus_bandwidth_over = [&](const Cluster& cluster, int nodes, double payload) {
    std::vector<int> gpus(static_cast<size_t>(8 * nodes));
    for (size_t g = 0; g < gpus.size(); ++g) gpus[g] = static_cast<int>(g);
    const double n = static_cast<double>(gpus.size());
    return 2 * (n - 1) / n * payload / ring_allreduce_seconds(cluster, gpus, payload);
  };
  double previous = std::numeric_limits<double>::infinity();
  for (const int nodes : {2, 4, 8, 16, 32, 64}) {
    const double predicted = bus_bandwidth_over(efa, nodes, bytes);
    EXPECT_LT(predicted, previous) << nodes << " nodes";
    previous = predicted;
    if (nodes >= 4) {
      const double median = std::stod(rows.at("AllReduce/" + std::to_string(nodes))[4]) * gigabyte;
      EXPECT_NEAR(std::log(predicted / median), 0.0, std::log(1.6)) << nodes << " nodes";
    }
    EXPECT_DOUBLE_EQ(bus_bandwidth_over(infiniband, nodes, bytes), bus_bandwidth_over(measured, nodes, bytes))
        << nodes << " nodes";
  }
  // On a payload whose latency steps hardly count (16 GiB), the InfiniBand ring over 64 nodes keeps
  // the 2-node rate.
  const double large = 16 * units::gibibyte;
  EXPECT_GT(bus_bandwidth_over(infiniband, 64, large), 0.95 * bus_bandwidth_over(infiniband, 2, large));
}

// tp=2, pp=2, dp=2 on 2 nodes × 4 GPUs in the default order: rank = GPU. Megatron order puts
// stage 0 (ranks 0–3) on node 0 and stage 1 (ranks 4–7) on node 1; TP groups {0,1},{2,3};
// DP groups of stage 0 {0,2} and {1,3}.
WorkProfile two_stage_work() {
  WorkProfile work;
  work.p2p_bytes_per_microbatch = 64e6;
  work.num_microbatches = 8;
  for (int s = 0; s < 2; ++s) {
    StageWork stage;
    stage.tp_bytes_per_microbatch = 2e9;
    stage.tp_collectives_per_microbatch = 10;
    stage.gradient_bytes_per_gpu = 4e9;
    work.stages.push_back(stage);
  }
  return work;
}

using testing::layout_of;

Placement identity_placement(int gpus) {
  Placement placement;
  for (int g = 0; g < gpus; ++g) placement.gpu_of_rank.push_back(g);
  return placement;
}

// Issue 14 item 3: on AWS EFA the fall of a collective's bandwidth with its node count is the
// fabric's (NetworkKind::efa, collective_scaling_of in core/src/cluster.cpp), fitted on the
// all-reduce medians at 2, 8 and 32 nodes of ultrascale_collective_bandwidth_vs_nodes.csv (2 is
// the pair, the base). Held out: 4, 16 and 64 nodes, and the all-gather and reduce-scatter rows.
std::map<std::string, std::vector<std::string>> ultrascale_bandwidth_rows() {
  return read_csv_rows(std::string(PIPETTE_SHARED_DIR) + "/ground_truth_data/ultrascale_collective_bandwidth_vs_nodes.csv",
                       "collective");
}

double measured_fall(const std::map<std::string, std::vector<std::string>>& rows, const std::string& collective, int nodes) {
  const auto median = [&](int n) { return std::stod(rows.at(collective + "/" + std::to_string(n))[4]); };
  return median(nodes) / median(2);
}

// The factor itself against the data. Tolerances: 4 nodes +45% at most (the real fall from 2 to 4
// nodes is steeper than a power law's: +41%), 16 and 64 nodes within 5%; never fitted, all-gather
// and reduce-scatter within 5% at 4, 8 and 32 nodes.
TEST(EfaContention, FactorReproducesTheAllReduceCurveOnHeldOutNodeCounts) {
  const auto rows = ultrascale_bandwidth_rows();
  const CollectiveScaling efa = collective_scaling_of(NetworkKind::efa);
  const auto error = [&](const std::string& collective, int nodes) {
    return efa.bandwidth_factor(nodes) / measured_fall(rows, collective, nodes) - 1;
  };
  EXPECT_GT(error("AllReduce", 4), 0.0);
  EXPECT_LT(error("AllReduce", 4), 0.45);
  EXPECT_NEAR(error("AllReduce", 16), 0.0, 0.05);
  EXPECT_NEAR(error("AllReduce", 64), 0.0, 0.05);
  for (const char* collective : {"AllGather", "ReduceScatter"})
    for (const int nodes : {4, 8, 32}) EXPECT_NEAR(error(collective, nodes), 0.0, 0.05) << collective << " " << nodes;
  EXPECT_EQ(efa.bandwidth_factor(2), 1.0);  // a pair is what a pair measurement saw
  EXPECT_EQ(collective_scaling_of(NetworkKind::infiniband).bandwidth_factor(64), 1.0);
}

// The whole ring on AWS p5 (8x H100, ~480 GB/s NVLink bus bandwidth; 32x100 Gb/s EFA = 400 GB/s
// per node, ~20 µs a step) over equal pairs, measured or assumed: its bus bandwidth relative to 2
// nodes follows the measured curve at the held-out 16 and 64 nodes within 8% (the NICs pace the
// flat ring at every count, so it falls by the factor, its latency steps aside), and InfiniBand with the
// same pairs does not fall by contention: its 64-node ring is slower than EFA's only by the factor.
TEST(EfaContention, WholeRingFollowsTheCurveOnHeldOutNodeCounts) {
  const auto rows = ultrascale_bandwidth_rows();
  const double bytes = 256 * units::mebibyte;
  for (const bool measured_pairs : {true, false}) {
    Cluster cluster = uniform_cluster(64, 8, 8, Link{480 * gigabyte, 3 * microsecond, true},
                                      Link{400 * gigabyte, 20 * microsecond, measured_pairs});
    cluster.collective_scaling = collective_scaling_of(NetworkKind::efa);
    const double base = bus_bandwidth(cluster, 2, bytes);
    for (const int nodes : {16, 64})
      EXPECT_NEAR(bus_bandwidth(cluster, nodes, bytes) / base / measured_fall(rows, "AllReduce", nodes), 1.0, 0.08)
          << nodes << " nodes, " << (measured_pairs ? "measured" : "assumed") << " pairs";
  }
  Cluster infiniband = uniform_cluster(64, 8, 8, Link{480 * gigabyte, 3 * microsecond, true},
                                       Link{400 * gigabyte, 20 * microsecond, true});
  Cluster efa = infiniband;
  efa.collective_scaling = collective_scaling_of(NetworkKind::efa);
  const double slower = bus_bandwidth(infiniband, 64, bytes) / bus_bandwidth(efa, 64, bytes);
  EXPECT_GT(slower, 2.5);
  EXPECT_LT(slower, 1 / collective_scaling_of(NetworkKind::efa).bandwidth_factor(64));
}

// dp = 64 over 8 nodes × 8 GPUs (tp = pp = 1): each GPU reduces 4 GB in `collectives` collectives,
// and its flat ring moves 2 · 63/64 of them: 7/8 over NVLink, 1/8 (its sub-ring's node exit) over
// its own rail, a pair's 1/8, in NCCL's 14 intra-node and 14 inter-node steps.
struct Dp64Reduction {
  static constexpr double gradient_bytes = 4e9;
  static constexpr double ring_bytes = 2.0 * 63 / 64 * gradient_bytes;
  ParallelConfig config;
  WorkProfile work;
  explicit Dp64Reduction(int collectives = 1) {
    config.dp = 64;
    work.num_microbatches = 1;
    StageWork stage;
    stage.gradient_bytes_per_gpu = gradient_bytes;
    stage.gradient_reduction_collectives = collectives;
    work.stages.push_back(stage);
  }
  // The bytes' time over NVLink at `intra` and pairs at `pair_bytes_per_second`, the slower side.
  static double bandwidth_seconds(const Link& intra, double pair_bytes_per_second) {
    return std::max(ring_bytes * 7 / 8 / intra.bandwidth_bytes_per_second, ring_bytes / 8 / (pair_bytes_per_second / 8));
  }
};

// The InfiniBand kind prices DP as a flat ring over its pairs, assumed or measured alike, with no
// contention. Hand-computed: dp = 64 over 8 nodes × 8 GPUs, 8 rails, tp = pp = 1.
TEST(EfaContention, InfinibandPriorDpTimeIsAFlatRingOverItsPairs) {
  const Link intra{480 * gigabyte, 3 * microsecond, true};
  const auto [config, work] = Dp64Reduction();
  const double latency_seconds = 14 * 3e-6 + 14 * 10e-6;
  const auto flat_ring_seconds = [&](double pair_bytes_per_second) {
    return Dp64Reduction::bandwidth_seconds(intra, pair_bytes_per_second) + latency_seconds;
  };
  for (const bool measured : {false, true}) {
    Cluster cluster = uniform_cluster(8, 8, 8, intra, Link{400 * gigabyte, 10 * microsecond, measured});
    cluster.collective_scaling = collective_scaling_of(NetworkKind::infiniband);
    const CommunicationTimes times = communication_times(cluster, config, work, identity_placement(64));
    EXPECT_NEAR(times.dp_seconds[0] / flat_ring_seconds(400 * gigabyte), 1.0, 1e-9) << (measured ? "measured" : "prior");
    // EFA's contention on the same ring: slower, by (2/8)^0.682 on the rails.
    cluster.collective_scaling = collective_scaling_of(NetworkKind::efa);
    EXPECT_NEAR(communication_times(cluster, config, work, identity_placement(64)).dp_seconds[0] /
                    flat_ring_seconds(400 * gigabyte * std::pow(2.0 / 8, 0.682)), 1.0, 1e-9);
    // A measured curve (pipette-probe --collectives, issue 14) instead: the pairs times the curve's
    // factor at 8 nodes (measured_collective_scaling).
    cluster.collective_scaling = measured_collective_scaling({{4, 0.6}, {8, 0.35}});
    EXPECT_NEAR(communication_times(cluster, config, work, identity_placement(64)).dp_seconds[0] /
                    flat_ring_seconds(400 * gigabyte * 0.35), 1.0, 1e-9);
  }
}

// A stage's reduction cut into buckets (StackProfile::gradient_buckets) pays the ring's latency once
// per bucket; the bytes cost what they cost in one collective. The measured ring of
// InfinibandPriorDpTimeIsAFlatRingOverItsPairs in 87 buckets, as nanotron's DDP cuts a 1.1B model's
// gradients.
TEST(GradientBuckets, EveryBucketPaysTheRingsLatency) {
  const Link intra{480 * gigabyte, 3 * microsecond, true};
  const auto [config, work] = Dp64Reduction(87);
  const double latency_seconds = 14 * 3e-6 + 14 * 10e-6;
  const Cluster cluster = uniform_cluster(8, 8, 8, intra, Link{400 * gigabyte, 10 * microsecond, true});
  EXPECT_NEAR(communication_times(cluster, config, work, identity_placement(64)).dp_seconds[0] /
                  (Dp64Reduction::bandwidth_seconds(intra, 400 * gigabyte) + 87 * latency_seconds), 1.0, 1e-9);
}

// Issue 14: a curve measured by pipette-probe --collectives replaces the prior's power law. At
// measured counts the factor is the measurement; between them it is the power law through the two
// neighbours; beyond the largest it continues with the exponent least-squares fitted to all points.
TEST(MeasuredCollectiveScaling, InterpolatesInLogSpaceAndExtrapolatesWithTheFit) {
  // An exact power law is reproduced everywhere, and its exponent recovered.
  std::vector<MeasuredCollectiveFactor> power_law;
  for (const int nodes : {4, 8, 32}) power_law.push_back({nodes, std::pow(2.0 / nodes, 0.5)});
  const CollectiveScaling exact = measured_collective_scaling(power_law);
  EXPECT_NEAR(exact.contention_exponent, 0.5, 1e-12);
  for (const int nodes : {3, 6, 12, 32, 100}) EXPECT_NEAR(exact.bandwidth_factor(nodes), std::pow(2.0 / nodes, 0.5), 1e-12) << nodes;

  // The EFA medians of ultrascale_collective_bandwidth_vs_nodes.csv (all-reduce, 256 MB), given
  // out of order: the curve, not a single power law.
  const CollectiveScaling efa = measured_collective_scaling(
      {{64, 32.94 / 361.75}, {4, 160.14 / 361.75}, {8, 99.56 / 361.75}, {16, 84.74 / 361.75}, {32, 64.93 / 361.75}});
  EXPECT_EQ(efa.bandwidth_factor(2), 1.0);
  EXPECT_EQ(efa.bandwidth_factor(1), 1.0);
  EXPECT_DOUBLE_EQ(efa.bandwidth_factor(4), 160.14 / 361.75);
  EXPECT_DOUBLE_EQ(efa.bandwidth_factor(16), 84.74 / 361.75);
  const double six = efa.bandwidth_factor(6);  // between 4 and 8, log-log
  EXPECT_NEAR(six, 160.14 / 361.75 * std::pow(99.56 / 160.14, std::log(6.0 / 4) / std::log(2.0)), 1e-12);
  EXPECT_NEAR(efa.bandwidth_factor(3), std::pow(160.14 / 361.75, std::log(1.5) / std::log(2.0)), 1e-12);
  // Beyond 64: (64/n)^exponent from the 64-node point, the exponent fitted to all five points.
  double numerator = 0, denominator = 0;
  for (const auto& [nodes, gb] : std::vector<std::pair<int, double>>{{4, 160.14}, {8, 99.56}, {16, 84.74}, {32, 64.93}, {64, 32.94}}) {
    numerator += std::log(gb / 361.75) * std::log(2.0 / nodes);
    denominator += std::log(2.0 / nodes) * std::log(2.0 / nodes);
  }
  EXPECT_NEAR(efa.contention_exponent, numerator / denominator, 1e-12);
  EXPECT_NEAR(efa.bandwidth_factor(128), 32.94 / 361.75 * std::pow(0.5, numerator / denominator), 1e-12);

  // More bandwidth over n nodes than over 2 is clamped to the pair's; a rising curve fits no fall.
  const CollectiveScaling rising = measured_collective_scaling({{4, 1.3}, {8, 1.1}});
  EXPECT_EQ(rising.bandwidth_factor(4), 1.0);
  EXPECT_EQ(rising.contention_exponent, 0.0);
  EXPECT_EQ(rising.bandwidth_factor(64), 1.0);
}

// Held out: why beyond the largest measured count the curve continues with the exponent fitted to
// all points rather than its last interval's slope. A probe that reached 16 (or 32) nodes of the
// ultrascale EFA curve predicts the rest: over the all-reduce and all-gather medians, measured up
// to 8, 16 and 32 nodes, the fit's mean absolute error on the larger counts is 41% against the last
// interval's 51% (AllReduce at 64 from 2..16: fit -15%, last interval +86%).
TEST(MeasuredCollectiveScaling, FittedExtrapolationBeatsTheLastIntervalOnHeldOutCounts) {
  const auto rows = ultrascale_bandwidth_rows();
  double fit_error = 0, last_interval_error = 0;
  int predictions = 0;
  for (const std::string collective : {"AllReduce", "AllGather"}) {
    for (const int largest : {8, 16, 32}) {
      std::vector<MeasuredCollectiveFactor> known;
      for (int nodes = 4; nodes <= largest; nodes *= 2) known.push_back({nodes, measured_fall(rows, collective, nodes)});
      const CollectiveScaling scaling = measured_collective_scaling(known);
      const double slope = std::log(known[known.size() - 2].bandwidth_factor / known.back().bandwidth_factor) / std::log(2.0);
      for (int nodes = 2 * largest; nodes <= 64; nodes *= 2) {
        const double truth = measured_fall(rows, collective, nodes);
        fit_error += std::abs(scaling.bandwidth_factor(nodes) / truth - 1);
        last_interval_error += std::abs(known.back().bandwidth_factor * std::pow(static_cast<double>(largest) / nodes, slope) / truth - 1);
        ++predictions;
      }
      if (collective == "AllReduce" && largest == 16) {
        EXPECT_NEAR(scaling.bandwidth_factor(64) / measured_fall(rows, collective, 64) - 1, -0.15, 0.01);
      }
    }
  }
  EXPECT_EQ(predictions, 12);
  EXPECT_NEAR(fit_error / predictions, 0.41, 0.01);
  EXPECT_NEAR(last_interval_error / predictions, 0.51, 0.01);
}

TEST(MeasuredCollectiveScaling, ValidateRefusesABrokenTable) {
  Cluster cluster = uniform_cluster(2, 8, 8, nvlink, fabric);
  cluster.gpu = *find_gpu("H100-SXM");
  cluster.collective_scaling = measured_collective_scaling({{4, 0.5}, {8, 0.3}});
  EXPECT_EQ(validate(cluster), "");
  cluster.collective_scaling.measured[1].nodes = 4;
  EXPECT_NE(validate(cluster).find("ascending"), std::string::npos);
  cluster.collective_scaling.measured = {{2, 0.5}};
  EXPECT_NE(validate(cluster).find("above 2"), std::string::npos);
  cluster.collective_scaling.measured = {{4, 0.0}};
  EXPECT_NE(validate(cluster).find("(0, 1]"), std::string::npos);
}

TEST(CommunicationTimes, HandComputedTwoStageTwoReplicaLayout) {
  Cluster cluster = uniform_cluster(2, 4, 2, nvlink, fabric);
  cluster.intra_node[0].at(3, 1) = Link{40 * gigabyte, 2 * microsecond, true};  // on DP ring {1,3} of stage 0
  ParallelConfig config;
  config.tp = 2;
  config.pp = 2;
  config.dp = 2;
  const CommunicationTimes times = communication_times(cluster, config, two_stage_work(), identity_placement(8));
  ASSERT_EQ(times.p2p_seconds.size(), 1u);
  ASSERT_EQ(times.p2p_seconds[0].size(), 2u);
  // Both replicas' tp=2 GPUs cross node 0→1 at once: 4 flows on 2 rails, 100/4 GB/s each.
  for (int d = 0; d < 2; ++d) EXPECT_DOUBLE_EQ(times.p2p_seconds[0][d], 5e-6 + 64e6 / 25e9);
  // TP: the wire bytes over the pair link plus 2(t−1) = 2 latency steps per collective.
  for (int s = 0; s < 2; ++s)
    for (int d = 0; d < 2; ++d) EXPECT_DOUBLE_EQ(times.tp_seconds[s][d], 2e9 / 200e9 + 10 * 2 * 2e-6);
  // DP of 2 GPUs inside one node: 2·1/2 of the bytes; stage 0's ring {1,3} uses the slow 3→1.
  EXPECT_DOUBLE_EQ(times.dp_seconds[0], 4e9 / 40e9 + 2 * 2e-6);
  EXPECT_DOUBLE_EQ(times.dp_seconds[1], 4e9 / 200e9 + 2 * 2e-6);
}

// Issue 14: pipeline hops meet the fabric's contention too. Every replica and stage exchanges at
// the same steps of the schedule, so on EFA a hop of a 16-node job attains (2/16)^0.682 of its
// pair's rate, as a ring step over 16 nodes does; on InfiniBand (no fall) and inside a node
// nothing changes.
TEST(CommunicationTimes, PipelineHopsMeetTheFabricsContentionOverTheJobsNodes) {
  Cluster cluster = uniform_cluster(16, 8, 8, nvlink, fabric);
  WorkProfile work = two_stage_work();
  // tp8 pp2 dp8: stage 0 on nodes 0-7, stage 1 on nodes 8-15; replica d's eight GPUs send from
  // node d to node 8 + d at once, 12.5 GB/s each on a quiet fabric.
  const double quiet = 5e-6 + 64e6 / 12.5e9;
  EXPECT_DOUBLE_EQ(communication_times(cluster, layout_of(8, 2, 8), work, identity_placement(128)).p2p_seconds[0][3], quiet);
  cluster.collective_scaling = collective_scaling_of(NetworkKind::efa);
  const CommunicationTimes efa = communication_times(cluster, layout_of(8, 2, 8), work, identity_placement(128));
  for (int d = 0; d < 8; ++d) EXPECT_DOUBLE_EQ(efa.p2p_seconds[0][d], 5e-6 + 64e6 / (12.5e9 * std::pow(2.0 / 16, 0.682))) << d;
  // tp1 pp2 dp64 with both stages of a replica on one node (rank d + 64s on GPU 2d + s): NVLink.
  Placement side_by_side;
  side_by_side.gpu_of_rank.resize(128);
  for (int d = 0; d < 64; ++d)
    for (int stage = 0; stage < 2; ++stage) side_by_side.gpu_of_rank[static_cast<size_t>(d + 64 * stage)] = 2 * d + stage;
  const CommunicationTimes inside = communication_times(cluster, layout_of(1, 2, 64), work, side_by_side);
  EXPECT_DOUBLE_EQ(inside.p2p_seconds[0][0], 2e-6 + 64e6 / 200e9);
}

// NCCL's NVLink SHARP all-reduce (src/graph/tuning.cc @5067397c l.307-318) inside a node: the
// all-reduce share of the TP bytes and a one-node DP all-reduce run Cluster::nvls_all_reduce_speedup
// times faster than the ring; all-gathers, reduce-scatters (SP, a distributed optimizer) and stacks
// that turn NVLS off keep the ring.
TEST(CommunicationTimes, NvlinkSharpSpeedsUpOnlyAllReducesInsideANode) {
  Cluster cluster = uniform_cluster(2, 4, 2, nvlink, fabric);
  cluster.nvls_all_reduce_speedup = 1.6;
  const auto times_of = [&](double all_reduce_share, bool nvls, bool dp_all_reduce) {
    WorkProfile work = two_stage_work();
    for (StageWork& stage : work.stages) {
      stage.tp_all_reduce_share = all_reduce_share;
      stage.nvls_all_reduce = nvls;
      stage.dp_reduction_is_all_reduce = dp_all_reduce;
    }
    return communication_times(cluster, layout_of(2, 2, 2), work, identity_placement(8));
  };
  const double latency = 10 * 2 * 2e-6;
  EXPECT_DOUBLE_EQ(times_of(1, true, true).tp_seconds[0][0], 2e9 / 200e9 / 1.6 + latency);
  EXPECT_DOUBLE_EQ(times_of(0.25, true, true).tp_seconds[0][0], 2e9 / 200e9 * (0.75 + 0.25 / 1.6) + latency);
  EXPECT_DOUBLE_EQ(times_of(0, true, true).tp_seconds[0][0], 2e9 / 200e9 + latency);
  EXPECT_DOUBLE_EQ(times_of(1, false, true).tp_seconds[0][0], 2e9 / 200e9 + latency);
  // Stage 1's DP pairs {4,6} and {5,7} stay on node 1.
  EXPECT_DOUBLE_EQ(times_of(1, true, true).dp_seconds[1], (4e9 / 200e9 + 2 * 2e-6) / 1.6);
  EXPECT_DOUBLE_EQ(times_of(1, true, false).dp_seconds[1], 4e9 / 200e9 + 2 * 2e-6);
  EXPECT_DOUBLE_EQ(times_of(1, false, true).dp_seconds[1], 4e9 / 200e9 + 2 * 2e-6);
  // A TP group across nodes runs its all-reduce as rings; so does a DP group across nodes.
  const ParallelConfig across = layout_of(8, 1, 1);
  WorkProfile one_stage = two_stage_work();
  one_stage.stages.resize(1);
  one_stage.stages[0].nvls_all_reduce = true;
  const double with = communication_times(cluster, across, one_stage, identity_placement(8)).tp_seconds[0][0];
  one_stage.stages[0].nvls_all_reduce = false;
  EXPECT_DOUBLE_EQ(with, communication_times(cluster, across, one_stage, identity_placement(8)).tp_seconds[0][0]);
}

// Which collectives profile_work counts as all-reduces: all of a layer's without SP, none with it;
// Megatron-Bridge's performance runs turn NVLS off (stack_profile.cpp).
TEST(ProfileWork, CountsTheAllReduceShareOfTheTensorParallelBytes) {
  const ModelSpec model = testing::llama_like(4, 1024, 8, 8, 4096, 32000);
  TrainingSpec training;
  training.global_batch_sequences = 8;
  training.sequence_length = 1024;
  ParallelConfig config = layout_of(4, 1, 2);
  const GpuSpec gpu = *find_gpu("H100-SXM");
  EXPECT_DOUBLE_EQ(profile_work(model, training, gpu, config).stages[0].tp_all_reduce_share, 1.0);
  config.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(profile_work(model, training, gpu, config).stages[0].tp_all_reduce_share, 0.0);
  EXPECT_TRUE(profile_work(model, training, gpu, config).stages[0].nvls_all_reduce);
  EXPECT_TRUE(profile_work(model, training, gpu, config).stages[0].dp_reduction_is_all_reduce);
  config.distributed_optimizer = true;
  EXPECT_FALSE(profile_work(model, training, gpu, config).stages[0].dp_reduction_is_all_reduce);
  training.target.framework = Framework::nanotron;
  apply_stack_profile(training);
  EXPECT_TRUE(profile_work(model, training, gpu, config).stages[0].dp_reduction_is_all_reduce);  // ZeRO-1 all-reduces
  training.target.framework = Framework::nemo;
  apply_stack_profile(training);
  EXPECT_FALSE(profile_work(model, training, gpu, config).stages[0].nvls_all_reduce);
}

// A boundary exchange run in series (StackProfile::pipeline_exchange) pays every message. nanotron:
// the activation and its gradient one after the other, with four metadata messages and the
// sequence mask's three (p2p.py @2411b022 l.207-288, 345-353; state.py run_communication): the
// hand-computed layout's message twice and seven latencies.
// DeepSpeed's TrainSchedule (megatron-deepspeed, deepspeed) runs the same two messages with blocking
// calls and sends its metadata once (schedule.py @edaa7221 l.213-223, p2p.py l.48, 69).
TEST(CommunicationTimes, SerialExchangesPayEveryMessage) {
  const Cluster cluster = uniform_cluster(2, 4, 2, nvlink, fabric);
  const auto boundary_seconds = [&](Framework framework) {
    WorkProfile work = two_stage_work();
    work.boundary_exchange = stack_profile(framework).pipeline_exchange;
    const CommunicationTimes times = communication_times(cluster, layout_of(2, 2, 2), work, identity_placement(8));
    EXPECT_EQ(times.p2p_seconds[0][0], times.p2p_seconds[0][1]);
    return times.p2p_seconds[0][0];
  };
  const double message = 5e-6 + 64e6 / 25e9;
  EXPECT_DOUBLE_EQ(boundary_seconds(Framework::megatron_core), message);
  EXPECT_DOUBLE_EQ(boundary_seconds(Framework::torchtitan), message);
  EXPECT_DOUBLE_EQ(boundary_seconds(Framework::nanotron), 2 * message + 7 * 5e-6);
  EXPECT_DOUBLE_EQ(boundary_seconds(Framework::megatron_deepspeed), 2 * message);
  EXPECT_DOUBLE_EQ(boundary_seconds(Framework::deepspeed), 2 * message);
  for (const Framework framework : {Framework::megatron_core, Framework::nemo, Framework::torchtitan})
    EXPECT_FALSE(stack_profile(framework).pipeline_exchange.blocks_both_ranks) << to_string(framework);
  for (const Framework framework : {Framework::nanotron, Framework::megatron_deepspeed, Framework::deepspeed})
    EXPECT_TRUE(stack_profile(framework).pipeline_exchange.blocks_both_ranks) << to_string(framework);
}

TEST(CommunicationTimes, ConcurrentDpRingsOfAStageShareTheRails) {
  // tp=4, dp=2 on 2 nodes × 4 GPUs: replica 0 on node 0, replica 1 on node 1. Four DP rings of
  // one GPU per node cross the same node pair at once, on two rails: 25 GB/s each.
  const Cluster cluster = uniform_cluster(2, 4, 2, nvlink, fabric);
  WorkProfile work = two_stage_work();
  work.stages.resize(1);
  const CommunicationTimes times = communication_times(cluster, layout_of(4, 1, 2), work, identity_placement(8));
  EXPECT_TRUE(times.p2p_seconds.empty());
  EXPECT_DOUBLE_EQ(times.dp_seconds[0], 4e9 / 25e9 + 2 * 5e-6);
  // Alone, one such ring would get a whole rail of 50 GB/s.
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(cluster, {0, 4}, 4e9), 4e9 / 50e9 + 2 * 5e-6);
}

// A DP ring across 16 nodes, with every GPU of a node in it (tp = 1) or one per node (tp = 8):
// 32 NICs of a quarter of the rate price as 8 NICs of the whole rate.
TEST(CommunicationTimes, DpRingsPriceANodesNicsByTheirBandwidthNotTheirCount) {
  const Cluster eight_nics = uniform_cluster(16, 8, 8, nvlink, fabric);
  const Cluster thirty_two_nics = uniform_cluster(16, 8, 32, nvlink, fabric);
  WorkProfile work = two_stage_work();
  work.stages.resize(1);
  for (const int tp : {1, 8}) {
    const ParallelConfig layout = layout_of(tp, 1, 128 / tp);
    const CommunicationTimes eight = communication_times(eight_nics, layout, work, identity_placement(128));
    const CommunicationTimes thirty_two = communication_times(thirty_two_nics, layout, work, identity_placement(128));
    EXPECT_DOUBLE_EQ(thirty_two.dp_seconds[0], eight.dp_seconds[0]) << "tp " << tp;
  }
}

TEST(CommunicationTimes, TiedEmbeddingGradientsAreSummedBetweenTheFirstAndTheHeadStage) {
  // two_stage_work's layout: stage 0 on node 0, stage 1 on node 1. Each of the four (tp, dp) ranks
  // of stage 0 all-reduces its shard with its counterpart on node 1, all at once: four flows on
  // two rails, 25 GB/s each, a two-member ring (bytes once, two latencies).
  const Cluster cluster = uniform_cluster(2, 4, 2, nvlink, fabric);
  WorkProfile work = two_stage_work();
  EXPECT_EQ(communication_times(cluster, layout_of(2, 2, 2), work, identity_placement(8)).tied_embedding_seconds, 0.0);
  work.tied_embedding_head_stage = 1;
  work.tied_embedding_gradient_bytes = 1e9;
  EXPECT_DOUBLE_EQ(communication_times(cluster, layout_of(2, 2, 2), work, identity_placement(8)).tied_embedding_seconds,
                   1e9 / 25e9 + 2 * 5e-6);
  // The two stages on one node (tp=1, dp=1 on 2 GPUs of node 0): over the GPU pair's NVLink.
  EXPECT_DOUBLE_EQ(communication_times(cluster, layout_of(1, 2, 1), work, identity_placement(2)).tied_embedding_seconds,
                   1e9 / 200e9 + 2 * 2e-6);
}

TEST(CommunicationTimes, FollowsThePlacementsNodeOrder) {
  // pp=4, tp=dp=1 on 4 nodes × 1 GPU; the pair 1↔2 is slow. The default order's boundary 1
  // crosses it; the order 1,0,3,2 never puts nodes 1 and 2 next to each other.
  Cluster cluster = uniform_cluster(4, 1, 1, nvlink, fabric);
  cluster.inter_node.at(1, 2) = Link{10 * gigabyte, 5 * microsecond, true};
  cluster.inter_node.at(2, 1) = Link{10 * gigabyte, 5 * microsecond, true};
  ParallelConfig config;
  config.pp = 4;
  WorkProfile work = two_stage_work();
  work.stages.resize(4, work.stages[0]);
  const double fast = 5e-6 + 64e6 / 100e9;
  const double slow = 5e-6 + 64e6 / 10e9;
  const CommunicationTimes in_order = communication_times(cluster, config, work, identity_placement(4));
  EXPECT_DOUBLE_EQ(in_order.p2p_seconds[0][0], fast);
  EXPECT_DOUBLE_EQ(in_order.p2p_seconds[1][0], slow);
  EXPECT_DOUBLE_EQ(in_order.p2p_seconds[2][0], fast);
  Placement reordered_placement;
  reordered_placement.gpu_of_rank = {1, 0, 3, 2};
  const CommunicationTimes reordered = communication_times(cluster, config, work, reordered_placement);
  for (const auto& boundary : reordered.p2p_seconds) EXPECT_DOUBLE_EQ(boundary[0], fast);
  for (double seconds : reordered.dp_seconds) EXPECT_EQ(seconds, 0.0);
  for (const auto& stage : reordered.tp_seconds) EXPECT_EQ(stage[0], 0.0);
}

}  // namespace
}  // namespace pipette
