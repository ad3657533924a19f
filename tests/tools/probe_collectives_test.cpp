// pipette-probe --collectives (issue 14): its options, the node subsets it measures, the bus
// bandwidth arithmetic and the curve entries it writes. The NCCL calls themselves need GPUs on two
// or more nodes (tests/gpu/run.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "pipette/probe/collective_curve.hpp"
#include "pipette/probe/probe_options.hpp"

namespace pipette::probe {
namespace {

ProbeLayout layout_of(int nodes, int gpus) {
  std::vector<TaskIdentity> tasks;
  for (int rank = 0; rank < nodes * gpus; ++rank)
    tasks.push_back({rank, rank / gpus, rank % gpus, "gpu" + std::to_string(101 + rank / gpus), ""});
  Result<ProbeLayout> layout = make_layout(tasks);
  EXPECT_TRUE(layout) << layout.error().message;
  return *layout;
}

std::string error_of(const std::vector<std::string>& args) {
  Result<ProbeOptions> options = parse_probe_options(args, "");
  return options ? std::string("accepted") : options.error().message;
}

TEST(CollectiveOptions, OffByDefaultOnWithItsSize) {
  Result<ProbeOptions> plain = parse_probe_options({"--out", "c.yaml", "--rendezvous", "/r"}, "");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_FALSE(plain->measure_collectives);
  Result<ProbeOptions> on = parse_probe_options({"--out", "c.yaml", "--rendezvous", "/r", "--collectives"}, "");
  ASSERT_TRUE(on) << on.error().message;
  EXPECT_TRUE(on->measure_collectives);
  EXPECT_EQ(on->collective_bytes, 256.0 * 1024 * 1024);  // the size of the ultrascale playbook's curve
  Result<ProbeOptions> sized =
      parse_probe_options({"--out", "c.yaml", "--rendezvous", "/r", "--collective-size=1G", "--collectives"}, "");
  ASSERT_TRUE(sized) << sized.error().message;
  EXPECT_EQ(sized->collective_bytes, 1024.0 * 1024 * 1024);
}

TEST(CollectiveOptions, ErrorsAreOneLineNamingTheOption) {
  const std::vector<std::string> base = {"--out", "c", "--rendezvous", "/r"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return error_of(args);
  };
  EXPECT_NE(with({"--collective-size", "64M"}).find("--collective-size is the size of --collectives"), std::string::npos);
  EXPECT_NE(with({"--collectives", "--collective-size", "64Q"}).find("--collective-size: '64Q': unknown unit"),
            std::string::npos);
  EXPECT_NE(with({"--collectives", "--collective-size", "16G"}).find("--collective-size: '16G' is larger than the 8 GiB"),
            std::string::npos);
  EXPECT_NE(with({"--collectives", "--collective-size"}).find("--collective-size needs a value"), std::string::npos);
  EXPECT_NE(with({"--collectives=yes"}).find("--collectives takes no value"), std::string::npos);
  EXPECT_NE(with({"--collective"}).find("unknown option '--collective'"), std::string::npos);
  for (const std::string& message : {with({"--collective-size", "64M"}), with({"--collectives=yes"})})
    EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST(CollectivePlan, FirstPowersOfTwoNodesThenAll) {
  const auto counts = [](int nodes) { return make_collective_plan(layout_of(nodes, 2), 256.0 * 1024 * 1024)->node_counts; };
  EXPECT_EQ(counts(2), (std::vector<int>{2}));
  EXPECT_EQ(counts(3), (std::vector<int>{2, 3}));
  EXPECT_EQ(counts(8), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(counts(12), (std::vector<int>{2, 4, 8, 12}));
  EXPECT_EQ(counts(64), (std::vector<int>{2, 4, 8, 16, 32, 64}));

  Result<CollectivePlan> one_node = make_collective_plan(layout_of(1, 8), 1e6);
  ASSERT_FALSE(one_node);
  EXPECT_NE(one_node.error().message.find("--collectives needs at least 2 nodes"), std::string::npos);
  EXPECT_FALSE(make_collective_plan(layout_of(2, 8), 2));

  // Subset k is the first node_counts[k] nodes of the allocation, every GPU of them.
  const ProbeLayout layout = layout_of(5, 4);
  const CollectivePlan plan = *make_collective_plan(layout, 1000);
  EXPECT_EQ(plan.node_counts, (std::vector<int>{2, 4, 5}));
  EXPECT_TRUE(in_collective_subset(layout, plan, 0, 7));    // node 1
  EXPECT_FALSE(in_collective_subset(layout, plan, 0, 8));   // node 2
  EXPECT_TRUE(in_collective_subset(layout, plan, 1, 15));   // node 3
  EXPECT_FALSE(in_collective_subset(layout, plan, 1, 16));  // node 4
  EXPECT_TRUE(in_collective_subset(layout, plan, 2, 19));
  EXPECT_EQ(plan.ranks_in(1), 16);
  EXPECT_EQ(plan.bytes_per_rank(1, Collective::all_reduce), 1000);
  EXPECT_EQ(make_collective_plan(layout, 1003)->bytes_per_rank(0, Collective::all_reduce), 1000);  // whole floats
  EXPECT_EQ(plan.bytes_per_rank(1, Collective::all_gather), 62);  // 1000 / 16, rounded down
  EXPECT_EQ(plan.slot(2, Collective::all_gather), 5);
  EXPECT_EQ(plan.num_slots(), 6);
}

// nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw · 2(n−1)/n, all-gather algbw · (n−1)/n.
TEST(CollectiveBusBandwidth, AsNcclTestsDefinesIt) {
  // 16 ranks, 256 MiB in 2 ms.
  const double size = 256.0 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(bus_bandwidth_bytes_per_second(Collective::all_reduce, size, 2e-3, 16), size / 2e-3 * 2 * 15 / 16);
  EXPECT_DOUBLE_EQ(bus_bandwidth_bytes_per_second(Collective::all_gather, size, 2e-3, 16), size / 2e-3 * 15 / 16);
  // Two ranks: an all-reduce's bus bandwidth equals its algorithm bandwidth, an all-gather's half.
  EXPECT_DOUBLE_EQ(bus_bandwidth_bytes_per_second(Collective::all_reduce, size, 1e-3, 2), size / 1e-3);
  EXPECT_DOUBLE_EQ(bus_bandwidth_bytes_per_second(Collective::all_gather, size, 1e-3, 2), size / 1e-3 / 2);
}

TEST(CollectiveCurve, SlowestRankOfEachSubsetMakesTheEntry) {
  const ProbeLayout layout = layout_of(4, 2);
  const CollectivePlan plan = *make_collective_plan(layout, 64.0 * 1024 * 1024);  // subsets of 2 and 4 nodes
  std::vector<double> slot_seconds(static_cast<size_t>(8 * plan.num_slots()), std::nan(""));
  auto set = [&](int rank, int subset, Collective collective, double seconds) {
    slot_seconds[static_cast<size_t>(rank * plan.num_slots() + plan.slot(subset, collective))] = seconds;
  };
  for (int rank = 0; rank < 8; ++rank) {
    const double slower = rank == 3 ? 1.25 : 1.0;  // one slow rank decides
    if (rank < 4) {
      set(rank, 0, Collective::all_reduce, 1e-3 * slower);
      set(rank, 0, Collective::all_gather, 0.6e-3 * slower);
    }
    set(rank, 1, Collective::all_reduce, 2e-3 * slower);
    set(rank, 1, Collective::all_gather, 1.5e-3 * slower);
  }
  std::vector<std::string> warnings;
  const std::vector<CollectiveMeasurement> curve =
      assemble_collective_curve(layout, plan, slot_seconds, 1796144400, "2.21.5", warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(curve.size(), 2u);
  EXPECT_EQ(curve[0].nodes, 2);
  EXPECT_EQ(curve[1].nodes, 4);
  EXPECT_EQ(curve[1].message_bytes, 64.0 * 1024 * 1024);
  EXPECT_EQ(curve[1].measured_at_unix_seconds, 1796144400);
  EXPECT_EQ(curve[1].nccl_version, "2.21.5");
  EXPECT_DOUBLE_EQ(curve[0].all_reduce_bus_bytes_per_second,
                   bus_bandwidth_bytes_per_second(Collective::all_reduce, 64.0 * 1024 * 1024, 1.25e-3, 4));
  // The all-gather's size is its whole output: each of the 8 ranks' 8 MiB share.
  EXPECT_DOUBLE_EQ(curve[1].all_gather_bus_bytes_per_second,
                   bus_bandwidth_bytes_per_second(Collective::all_gather, 64.0 * 1024 * 1024, 1.5e-3 * 1.25, 8));

  set(5, 1, Collective::all_gather, std::nan(""));  // a rank of the 4-node subset left no timing
  const auto partial = assemble_collective_curve(layout, plan, slot_seconds, 0, "", warnings);
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_EQ(partial[0].nodes, 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("collectives over 4 nodes not recorded"), std::string::npos);
}

TEST(CollectiveCurve, MedianOfTimedIterations) {
  EXPECT_EQ(median_seconds({3, 1, 2}), 2);
  EXPECT_EQ(median_seconds({4, 1, 3, 2}), 3);  // the upper middle one, as the pair timings always took
}

}  // namespace
}  // namespace pipette::probe
