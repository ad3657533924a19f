#include "rank_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace pipette::spank {
namespace {

std::map<std::string, std::string> as_map(const EnvironmentList& list) {
  return std::map<std::string, std::string>(list.begin(), list.end());
}

// 2 nodes × 4 GPUs, the placement swaps the two nodes and reverses the GPUs inside each.
Plan swapped_plan() {
  Plan plan;
  plan.config.tp = 2;
  plan.config.pp = 2;
  plan.config.dp = 2;
  plan.placement.gpu_of_rank = {7, 6, 5, 4, 3, 2, 1, 0};
  plan.node_order = {1, 0};
  return plan;
}

StepLayout layout(int tasks_per_node) { return {{"gpu-a", "gpu-b"}, 4, tasks_per_node}; }

TEST(MakeRankTable, RankOrderListsTheTaskOfEachRank) {
  const RankTableResult result = make_rank_table(swapped_plan(), layout(4), 17, 0);
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(result.table.launch, Launch::per_gpu);
  EXPECT_EQ(result.table.rank_order, (std::vector<int>{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(join(result.table.rank_order), "7,6,5,4,3,2,1,0");
  EXPECT_EQ(result.table.master_node, 1);
  EXPECT_EQ(result.table.node_rank_of_node, (std::vector<int>{1, 0}));
}

TEST(TaskEnvironment, EveryTaskGetsTheRankOfItsGpuAndRanksFormABijection) {
  const Plan plan = swapped_plan();
  const RankTableResult result = make_rank_table(plan, layout(4), 17, 3);
  ASSERT_EQ(result.error, "");
  std::set<int> ranks;
  std::set<std::string> ports;
  for (int node = 0; node < 2; ++node) {
    for (int local = 0; local < 4; ++local) {
      auto env = as_map(task_environment(result.table, layout(4), node, local));
      const int rank = std::stoi(env.at("RANK"));
      const int procid = node * 4 + local;
      EXPECT_EQ(result.table.rank_order[static_cast<std::size_t>(rank)], procid);
      EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(local));
      EXPECT_EQ(env.at("WORLD_SIZE"), "8");
      EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "4");
      EXPECT_EQ(env.at("NODE_RANK"), node == 1 ? "0" : "1");
      EXPECT_EQ(env.at("MASTER_ADDR"), "gpu-b");
      ports.insert(env.at("MASTER_PORT"));
      ranks.insert(rank);
    }
  }
  EXPECT_EQ(ranks.size(), 8u);
  EXPECT_EQ(*ranks.begin(), 0);
  EXPECT_EQ(*ranks.rbegin(), 7);
  EXPECT_EQ(ports.size(), 1u);
}

TEST(TaskEnvironment, OneLauncherPerNodeGetsNodeRankAndTorchrunDefaults) {
  const RankTableResult result = make_rank_table(swapped_plan(), layout(1), 17, 0);
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(result.table.launch, Launch::per_node);
  auto first = as_map(task_environment(result.table, layout(1), 1, 0));
  EXPECT_EQ(first.at("NODE_RANK"), "0");
  EXPECT_EQ(first.at("RANK"), "0");
  EXPECT_EQ(first.at("WORLD_SIZE"), "2");
  EXPECT_EQ(first.at("PET_NPROC_PER_NODE"), "4");
  EXPECT_EQ(first.at("PET_NNODES"), "2");
  EXPECT_EQ(first.at("PET_MASTER_ADDR"), "gpu-b");
  auto second = as_map(task_environment(result.table, layout(1), 0, 0));
  EXPECT_EQ(second.at("PET_NODE_RANK"), "1");
}

TEST(MakeRankTable, MasterPortDiffersBetweenStepsOfAJob) {
  const Plan plan = swapped_plan();
  EXPECT_NE(make_rank_table(plan, layout(4), 17, 0).table.master_port,
            make_rank_table(plan, layout(4), 17, 1).table.master_port);
}

TEST(MakeRankTable, RejectsTaskCountsThatAreNeitherPerGpuNorPerNode) {
  EXPECT_EQ(make_rank_table(swapped_plan(), layout(2), 1, 0).error,
            "2 tasks per node: run one task per GPU (--ntasks-per-node=4) or one launcher per node "
            "(--ntasks-per-node=1)");
}

TEST(MakeRankTable, RejectsPlacementsThatAreNotPermutations) {
  Plan plan = swapped_plan();
  plan.placement.gpu_of_rank[3] = 7;
  EXPECT_NE(make_rank_table(plan, layout(4), 1, 0).error, "");
  plan = swapped_plan();
  plan.placement.gpu_of_rank.pop_back();
  EXPECT_NE(make_rank_table(plan, layout(4), 1, 0).error, "");
  plan = swapped_plan();
  plan.node_order = {0, 0};
  EXPECT_NE(make_rank_table(plan, layout(4), 1, 0).error, "");
}

TEST(MakeRankTable, BatchStepDescribesPerGpuSteps) {
  const RankTableResult result = make_rank_table(swapped_plan(), layout(0), 1, 0);
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(result.table.launch, Launch::per_gpu);
}

}  // namespace
}  // namespace pipette::spank
