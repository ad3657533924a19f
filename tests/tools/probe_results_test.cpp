// From gathered per-rank timings to link-cache entries, and into an existing cache file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "pipette/probe/probe_results.hpp"

namespace pipette::probe {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct TrueLink {
  double latency_seconds;
  double bandwidth_bytes_per_second;
  double seconds(double bytes) const { return latency_seconds + bytes / bandwidth_bytes_per_second; }
};

// A step of `nodes` × `gpus` tasks (block distribution) with the timings each rank would record if
// every node pair and GPU pair behaved exactly as `inter` and `intra` say. The first GPU of each
// pair is the slowest rail; the others finish 10–30% sooner, as uneven rails do.
struct SyntheticRun {
  ProbeLayout layout;
  MeasurementPlan plan;
  std::vector<double> slot_seconds;
};

SyntheticRun synthetic_run(int nodes, int gpus, const std::map<std::pair<int, int>, TrueLink>& inter,
                           const TrueLink& intra, bool measure_intra, int cross_rail_rounds = 0,
                           const TrueLink& one_rail = {}, const TrueLink& across_rails = {}) {
  std::vector<TaskIdentity> tasks;
  for (int rank = 0; rank < nodes * gpus; ++rank) {
    tasks.push_back({rank, rank / gpus, rank % gpus, "gpu" + std::to_string(101 + rank / gpus), "8xH100"});
  }
  SyntheticRun run{*make_layout(tasks), {}, {}};
  run.plan = make_measurement_plan(run.layout, {1 * kMiB, 16 * kMiB, 256 * kMiB}, measure_intra, cross_rail_rounds);
  const int slots = run.plan.num_slots();
  run.slot_seconds.assign(static_cast<size_t>(nodes * gpus * slots), std::nan(""));
  auto record = [&](int rank, int slot, double seconds) {
    const int local = run.layout.local_of_rank[static_cast<size_t>(rank)];
    run.slot_seconds[static_cast<size_t>(rank * slots + slot)] = seconds * (local == 0 ? 1.0 : 0.7 + 0.1 * (local % 3));
  };
  for (int round = 0; round < static_cast<int>(run.plan.inter_rounds.size()); ++round) {
    for (const Pairing& pair : run.plan.inter_rounds[static_cast<size_t>(round)]) {
      const TrueLink& link = inter.at({pair.first, pair.second});
      for (int size = 0; size < run.plan.num_sizes(); ++size) {
        const double seconds = link.seconds(run.plan.message_bytes[static_cast<size_t>(size)] * gpus);
        for (int local = 0; local < gpus; ++local) {
          record(run.layout.rank_at(pair.first, local), run.plan.inter_slot(round, size), seconds);
          record(run.layout.rank_at(pair.second, local), run.plan.inter_slot(round, size), seconds);
        }
      }
    }
  }
  for (int round = 0; round < static_cast<int>(run.plan.intra_rounds.size()); ++round) {
    for (const Pairing& pair : run.plan.intra_rounds[static_cast<size_t>(round)]) {
      for (int node = 0; node < nodes; ++node) {
        for (int size = 0; size < run.plan.num_sizes(); ++size) {
          const double seconds = intra.seconds(run.plan.message_bytes[static_cast<size_t>(size)]);
          const int slot = run.plan.intra_slot(round, size);
          run.slot_seconds[static_cast<size_t>(run.layout.rank_at(node, pair.first) * slots + slot)] = seconds;
          run.slot_seconds[static_cast<size_t>(run.layout.rank_at(node, pair.second) * slots + slot)] = seconds * 0.95;
        }
      }
    }
  }
  for (int round = 0; round < static_cast<int>(run.plan.cross_rail_rounds.size()); ++round) {
    for (const Pairing& pair : run.plan.cross_rail_rounds[static_cast<size_t>(round)]) {
      for (const bool crossed : {false, true}) {
        for (int size = 0; size < run.plan.num_sizes(); ++size) {
          const double seconds = (crossed ? across_rails : one_rail).seconds(run.plan.message_bytes[static_cast<size_t>(size)]);
          const int slot = run.plan.cross_rail_slot(round, crossed, size);
          for (const auto& [node, partner] : {std::pair{pair.first, pair.second}, std::pair{pair.second, pair.first}})
            run.slot_seconds[static_cast<size_t>(run.layout.rank_at(node, cross_rail_local(run.layout, node, partner, crossed)) * slots +
                                                 slot)] = seconds;
        }
      }
    }
  }
  return run;
}

std::map<std::pair<int, int>, TrueLink> uneven_fabric(int nodes) {
  std::map<std::pair<int, int>, TrueLink> links;
  for (int a = 0; a < nodes; ++a) {
    for (int b = a + 1; b < nodes; ++b) links[{a, b}] = {(5 + a + b) * 1e-6, (150 + 10 * a - 7 * b) * 1e9};
  }
  links[{0, 2}].bandwidth_bytes_per_second = 20e9;  // one degraded pair
  return links;
}

TEST(AssembleLinkCache, RecoversEveryNodePairsAggregateLink) {
  const auto fabric = uneven_fabric(5);
  const TrueLink nvlink{3e-6, 360e9};
  const SyntheticRun run = synthetic_run(5, 4, fabric, nvlink, true);
  const ProbeOutcome outcome = assemble_link_cache(run.layout, run.plan, run.slot_seconds, 1764608400, "2.21.5");
  EXPECT_TRUE(outcome.warnings.empty());
  ASSERT_EQ(outcome.cache.pairs.size(), 10u);
  for (const PairMeasurement& pair : outcome.cache.pairs) {
    const int a = std::stoi(pair.node_a.substr(3)) - 101;
    const int b = std::stoi(pair.node_b.substr(3)) - 101;
    ASSERT_LT(a, b);
    const TrueLink& truth = fabric.at({a, b});
    EXPECT_NEAR(pair.bandwidth_bytes_per_second / truth.bandwidth_bytes_per_second, 1.0, 1e-9) << pair.node_a << " " << pair.node_b;
    EXPECT_NEAR(pair.latency_seconds, truth.latency_seconds, 1e-12);
    EXPECT_EQ(pair.measured_at_unix_seconds, 1764608400);
    EXPECT_EQ(pair.nccl_version, "2.21.5");
    ASSERT_EQ(pair.points.size(), 3u);
    EXPECT_EQ(pair.points[0].message_bytes, 4 * kMiB);  // 4 rails × 1 MiB
  }
  ASSERT_EQ(outcome.cache.nodes.size(), 5u);
  for (const NodeMeasurement& node : outcome.cache.nodes) {
    EXPECT_EQ(node.fingerprint, "8xH100");
    ASSERT_EQ(node.gpus, 4);
    for (int from = 0; from < 4; ++from) {
      for (int to = 0; to < 4; ++to) {
        const double bandwidth = node.bandwidth_bytes_per_second[static_cast<size_t>(from * 4 + to)];
        if (from == to) {
          EXPECT_EQ(bandwidth, 0.0);
        } else {
          EXPECT_NEAR(bandwidth / 360e9, 1.0, 1e-9);
          EXPECT_NEAR(node.latency_seconds[static_cast<size_t>(from * 4 + to)], 3e-6, 1e-12);
        }
      }
    }
  }
}

TEST(AssembleLinkCache, CrossRailSampleLandsOnItsNodePairsEntries) {
  const TrueLink one_rail{8e-6, 46e9}, across{9e-6, 23e9};
  const SyntheticRun run = synthetic_run(4, 8, uneven_fabric(4), {3e-6, 360e9}, false, 1, one_rail, across);
  const ProbeOutcome outcome = assemble_link_cache(run.layout, run.plan, run.slot_seconds, 100, "2.21.5");
  EXPECT_TRUE(outcome.warnings.empty());
  ASSERT_EQ(outcome.cache.pairs.size(), 6u);
  int sampled = 0;
  for (const PairMeasurement& pair : outcome.cache.pairs) {
    if (!pair.has_cross_rail()) continue;
    ++sampled;
    EXPECT_NEAR(pair.rail_bandwidth_bytes_per_second / 46e9, 1.0, 1e-9);
    EXPECT_NEAR(pair.rail_latency_seconds, 8e-6, 1e-12);
    EXPECT_NEAR(pair.cross_rail_bandwidth_bytes_per_second / 23e9, 1.0, 1e-9);
    EXPECT_NEAR(pair.cross_rail_latency_seconds, 9e-6, 1e-12);
  }
  EXPECT_EQ(sampled, 2);  // one round of 4 nodes: 2 node pairs
  // The written cache keeps them (format version 2).
  EXPECT_NE(format_link_cache(outcome.cache).find("pipette_link_cache: 2"), std::string::npos);
}

TEST(AssembleLinkCache, WithoutIntraRoundsNoNodeEntryCanHideAMeasuredMatrix) {
  const SyntheticRun run = synthetic_run(2, 2, uneven_fabric(2), {3e-6, 360e9}, false);
  const ProbeOutcome outcome = assemble_link_cache(run.layout, run.plan, run.slot_seconds, 100, "2.28.9");
  EXPECT_TRUE(outcome.cache.nodes.empty());
  EXPECT_EQ(outcome.cache.pairs.size(), 1u);
  EXPECT_TRUE(outcome.warnings.empty());
}

TEST(AssembleLinkCache, ANodeWithAFailedGpuPairIsLeftOutWithAWarning) {
  SyntheticRun run = synthetic_run(2, 3, uneven_fabric(2), {3e-6, 360e9}, true);
  const int slots = run.plan.num_slots();
  for (int size = 0; size < run.plan.num_sizes(); ++size) {
    // gpu102's GPUs 0 and 2 saw every size take the same time: no bandwidth can be fitted.
    for (int round = 0; round < static_cast<int>(run.plan.intra_rounds.size()); ++round) {
      if (partner_in(run.plan.intra_rounds[static_cast<size_t>(round)], 0) != 2) continue;
      for (int local : {0, 2}) {
        run.slot_seconds[static_cast<size_t>(run.layout.rank_at(1, local) * slots + run.plan.intra_slot(round, size))] = 1e-3;
      }
    }
  }
  const ProbeOutcome outcome = assemble_link_cache(run.layout, run.plan, run.slot_seconds, 100, "2.28.9");
  ASSERT_EQ(outcome.cache.nodes.size(), 1u);
  EXPECT_EQ(outcome.cache.nodes[0].name, "gpu101");
  ASSERT_EQ(outcome.warnings.size(), 1u);
  EXPECT_NE(outcome.warnings[0].find("node gpu102 not recorded: GPUs 0-2"), std::string::npos);
}

TEST(AssembleLinkCache, APairWithMissingTimingsIsReportedNotInvented) {
  SyntheticRun run = synthetic_run(3, 2, uneven_fabric(3), {3e-6, 360e9}, true);
  // Rank 2 (gpu102, GPU 0) lost every inter-node timing of its first round but one size.
  const int peer_round = 0;
  const int slots = run.plan.num_slots();
  for (int size = 1; size < run.plan.num_sizes(); ++size) {
    for (int rank = 0; rank < 6; ++rank) {
      if (inter_node_peer(run.layout, run.plan, peer_round, rank) >= 0 && rank / 2 == 1) {
        run.slot_seconds[static_cast<size_t>(rank * slots + run.plan.inter_slot(peer_round, size))] = std::nan("");
      }
    }
  }
  const ProbeOutcome outcome = assemble_link_cache(run.layout, run.plan, run.slot_seconds, 100, "2.28.9");
  EXPECT_EQ(outcome.cache.pairs.size(), 2u);
  ASSERT_EQ(outcome.warnings.size(), 1u);
  EXPECT_NE(outcome.warnings[0].find("gpu102"), std::string::npos);
  EXPECT_NE(outcome.warnings[0].find("two or more distinct message sizes"), std::string::npos);
}

class CacheFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("pipette-probe-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(CacheFile, MergeKeepsNewerEntriesAndDropsNone) {
  const std::string path = (dir_ / "links.yaml").string();
  // What the cache held before this run: one pair the run re-measures with an older time, one it
  // re-measures but that is newer (a later run's result, written while this one ran), one pair and
  // one node the run never touches.
  LinkCache before;
  before.pairs.push_back({"gpu101", "gpu102", 50, "2.18.1", 11e9, 30e-6, {}});
  before.pairs.push_back({"gpu101", "gpu103", 500, "2.28.9", 99e9, 1e-6, {}});
  before.pairs.push_back({"gpu101", "gpu999", 50, "2.18.1", 40e9, 9e-6, {}});
  before.nodes.push_back({"gpu999", 50, "2.18.1", "8xA100", 0, {}, {}});
  ASSERT_TRUE(update_link_cache(path, before));

  const SyntheticRun run = synthetic_run(3, 2, uneven_fabric(3), {3e-6, 360e9}, true);
  const ProbeOutcome outcome = assemble_link_cache(run.layout, run.plan, run.slot_seconds, 100, "2.28.9");
  ASSERT_TRUE(update_link_cache(path, outcome.cache));

  Result<LinkCache> after = read_link_cache(path);
  ASSERT_TRUE(after) << after.error().message;
  std::map<std::string, PairMeasurement> pairs;
  for (const PairMeasurement& pair : after->pairs) pairs[pair.node_a + " " + pair.node_b] = pair;
  ASSERT_EQ(pairs.size(), 4u);  // 3 measured + 1 untouched
  EXPECT_EQ(pairs["gpu101 gpu102"].measured_at_unix_seconds, 100);  // older entry replaced
  EXPECT_NEAR(pairs["gpu101 gpu102"].bandwidth_bytes_per_second / uneven_fabric(3).at({0, 1}).bandwidth_bytes_per_second, 1.0, 1e-6);
  EXPECT_EQ(pairs["gpu101 gpu103"].measured_at_unix_seconds, 500);  // newer entry kept
  EXPECT_EQ(pairs["gpu101 gpu103"].bandwidth_bytes_per_second, 99e9);
  EXPECT_EQ(pairs["gpu102 gpu103"].measured_at_unix_seconds, 100);
  EXPECT_EQ(pairs["gpu101 gpu999"].measured_at_unix_seconds, 50);  // untouched, kept
  ASSERT_EQ(after->nodes.size(), 4u);
  EXPECT_EQ(after->nodes.back().name, "gpu999");
  EXPECT_EQ(after->nodes.front().gpus, 2);
}

}  // namespace
}  // namespace pipette::probe
