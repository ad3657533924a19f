// Checking the step's shape and deriving every rank's peers from it.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "pipette/probe/measurement_plan.hpp"

namespace pipette::probe {
namespace {

// nodes × gpus tasks with Slurm's block distribution, or cyclic (rank r on node r % nodes).
std::vector<TaskIdentity> tasks_for(int nodes, int gpus, bool cyclic) {
  std::vector<TaskIdentity> tasks;
  for (int rank = 0; rank < nodes * gpus; ++rank) {
    const int node = cyclic ? rank % nodes : rank / gpus;
    const int local = cyclic ? rank / nodes : rank % gpus;
    // Only local rank 0 inspects the node; the others report no fingerprint.
    tasks.push_back({rank, node, local, 'n' + std::to_string(node), local == 0 ? "fp" + std::to_string(node) : ""});
  }
  return tasks;
}

TEST(ProbeLayout, MapsBlockAndCyclicDistributions) {
  for (bool cyclic : {false, true}) {
    Result<ProbeLayout> layout = make_layout(tasks_for(3, 4, cyclic));
    ASSERT_TRUE(layout) << layout.error().message;
    EXPECT_EQ(layout->num_nodes(), 3);
    EXPECT_EQ(layout->gpus_per_node, 4);
    EXPECT_EQ(layout->node_names, (std::vector<std::string>{"n0", "n1", "n2"}));
    EXPECT_EQ(layout->fingerprints, (std::vector<std::string>{"fp0", "fp1", "fp2"}));
    for (int rank = 0; rank < 12; ++rank) {
      EXPECT_EQ(layout->rank_at(layout->node_of_rank[static_cast<size_t>(rank)],
                                layout->local_of_rank[static_cast<size_t>(rank)]),
                rank);
    }
  }
}

TEST(ProbeLayout, RejectsStepsThatAreNotOneTaskPerGpuOnEqualNodes) {
  auto uneven = tasks_for(2, 4, false);
  uneven.pop_back();
  Result<ProbeLayout> layout = make_layout(uneven);
  ASSERT_FALSE(layout);
  EXPECT_NE(layout.error().message.find("--ntasks-per-node"), std::string::npos);

  auto renamed = tasks_for(2, 2, false);
  renamed[3].node_name = "other";
  EXPECT_FALSE(make_layout(renamed));

  auto same_name = tasks_for(2, 2, false);
  for (TaskIdentity& task : same_name) task.node_name = "n0";
  EXPECT_FALSE(make_layout(same_name));

  auto duplicate_local = tasks_for(2, 2, false);
  duplicate_local[1].local_rank = 0;
  EXPECT_FALSE(make_layout(duplicate_local));

  auto missing_node = tasks_for(3, 1, false);
  missing_node[1].node_index = 2;  // node 1 has no task
  missing_node[2].node_index = 3;
  EXPECT_FALSE(make_layout(missing_node));
}

// Issue 18: --cross-rail N samples the node pairs of the first N rounds with one flow each, on
// one rail (GPU 0 ↔ GPU 0) and across rails (GPU 0 ↔ GPU g/2); every other rank sits it out.
TEST(MeasurementPlan, CrossRailRoundsSampleOneFlowPerNodePairOnOneRailThenAcross) {
  Result<ProbeLayout> layout = make_layout(tasks_for(4, 8, true));
  ASSERT_TRUE(layout) << layout.error().message;
  const MeasurementPlan none = make_measurement_plan(*layout, {1 << 20}, true);
  EXPECT_TRUE(none.cross_rail_rounds.empty());
  const MeasurementPlan plan = make_measurement_plan(*layout, {1 << 20, 1 << 24}, true, 2);
  ASSERT_EQ(plan.cross_rail_rounds.size(), 2u);
  EXPECT_EQ(plan.num_slots(), (3 + 7 + 2 * 2) * 2);  // 3 inter rounds, 7 intra rounds, 2 × 2 sampled
  EXPECT_EQ(plan.cross_rail_slot(1, true, 1), plan.num_slots() - 1);
  EXPECT_EQ(plan.cross_rail_slot(0, false, 0), plan.intra_slot(6, 1) + 1);
  EXPECT_EQ(make_measurement_plan(*layout, {1 << 20}, true, 99).cross_rail_rounds.size(), 3u);  // at most every round
  for (int round = 0; round < 2; ++round) {
    for (const bool crossed : {false, true}) {
      int flows = 0;
      for (int rank = 0; rank < 32; ++rank) {
        const int peer = cross_rail_peer(*layout, plan, round, crossed, rank);
        if (peer < 0) continue;
        ++flows;
        EXPECT_EQ(cross_rail_peer(*layout, plan, round, crossed, peer), rank);
        const int node = layout->node_of_rank[static_cast<size_t>(rank)];
        const int peer_node = layout->node_of_rank[static_cast<size_t>(peer)];
        EXPECT_NE(node, peer_node);
        const int low_local = layout->local_of_rank[static_cast<size_t>(node < peer_node ? rank : peer)];
        const int high_local = layout->local_of_rank[static_cast<size_t>(node < peer_node ? peer : rank)];
        EXPECT_EQ(low_local, 0);
        EXPECT_EQ(high_local, crossed ? 4 : 0);
      }
      EXPECT_EQ(flows, 4) << "2 node pairs, both ends";
    }
  }
  Result<ProbeLayout> single = make_layout(tasks_for(4, 1, true));
  ASSERT_TRUE(single);
  EXPECT_TRUE(make_measurement_plan(*single, {1 << 20}, false, 2).cross_rail_rounds.empty());  // one GPU: one rail
}

TEST(MeasurementPlan, PeersPairGpuIOfOneNodeWithGpuIOfTheOther) {
  Result<ProbeLayout> layout = make_layout(tasks_for(5, 3, true));
  ASSERT_TRUE(layout) << layout.error().message;
  const MeasurementPlan plan = make_measurement_plan(*layout, {1 << 20, 1 << 10}, true);
  EXPECT_EQ(plan.message_bytes, (std::vector<double>{1024, 1 << 20}));
  ASSERT_EQ(plan.inter_rounds.size(), 5u);  // 5 nodes: odd, one bye each
  ASSERT_EQ(plan.intra_rounds.size(), 3u);
  std::set<std::pair<int, int>> node_pairs;
  for (int round = 0; round < static_cast<int>(plan.inter_rounds.size()); ++round) {
    for (int rank = 0; rank < 15; ++rank) {
      const int peer = inter_node_peer(*layout, plan, round, rank);
      if (peer < 0) continue;
      EXPECT_EQ(inter_node_peer(*layout, plan, round, peer), rank);
      EXPECT_EQ(layout->local_of_rank[static_cast<size_t>(peer)], layout->local_of_rank[static_cast<size_t>(rank)]);
      EXPECT_NE(layout->node_of_rank[static_cast<size_t>(peer)], layout->node_of_rank[static_cast<size_t>(rank)]);
      node_pairs.insert({layout->node_of_rank[static_cast<size_t>(rank)], layout->node_of_rank[static_cast<size_t>(peer)]});
    }
  }
  EXPECT_EQ(node_pairs.size(), 20u);  // 10 unordered pairs, seen from both sides
  for (int round = 0; round < static_cast<int>(plan.intra_rounds.size()); ++round) {
    for (int rank = 0; rank < 15; ++rank) {
      const int peer = intra_node_peer(*layout, plan, round, rank);
      if (peer < 0) continue;
      EXPECT_EQ(layout->node_of_rank[static_cast<size_t>(peer)], layout->node_of_rank[static_cast<size_t>(rank)]);
      EXPECT_EQ(intra_node_peer(*layout, plan, round, peer), rank);
    }
  }
  EXPECT_EQ(plan.num_slots(), (5 + 3) * 2);
  EXPECT_EQ(plan.intra_slot(0, 1), 5 * 2 + 1);
  EXPECT_TRUE(make_measurement_plan(*layout, {1, 2}, false).intra_rounds.empty());
}

}  // namespace
}  // namespace pipette::probe
