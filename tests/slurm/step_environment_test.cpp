#include "step_environment.hpp"

#include <gtest/gtest.h>

#include <map>

namespace pipette::spank {
namespace {

Plan interleaved_plan() {
  Plan plan;
  plan.config.tp = 8;
  plan.config.pp = 4;
  plan.config.dp = 2;
  plan.config.micro_batch = 1;
  plan.config.virtual_stages = 2;
  plan.config.recompute = RecomputeMode::selective;
  plan.config.sequence_parallel = true;
  plan.config.distributed_optimizer = true;
  plan.config.layers_per_stage = {16, 16, 16, 16};
  plan.num_microbatches = 256;
  plan.time.iteration_seconds = 12.34567;
  plan.peak_memory_bytes = 70.25 * 1024 * 1024 * 1024;
  return plan;
}

TEST(MegatronArguments, EvenInterleavedPlanWithEveryFeature) {
  EXPECT_EQ(megatron_arguments(interleaved_plan()),
            "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --micro-batch-size 1 "
            "--global-batch-size 512 --num-layers-per-virtual-pipeline-stage 8 --recompute-granularity selective "
            "--sequence-parallel --use-distributed-optimizer");
}

TEST(MegatronArguments, UnevenFirstAndLastStages) {
  Plan plan;
  plan.config.tp = 4;
  plan.config.pp = 4;
  plan.config.micro_batch = 2;
  plan.config.recompute = RecomputeMode::full;
  plan.config.layers_per_stage = {18, 22, 22, 18};
  plan.num_microbatches = 8;
  EXPECT_EQ(megatron_arguments(plan),
            "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 --micro-batch-size 2 "
            "--global-batch-size 16 --decoder-first-pipeline-num-layers 18 --decoder-last-pipeline-num-layers 18 "
            "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
}

TEST(MegatronArguments, OnlyTheFirstStageDiffers) {
  Plan plan;
  plan.config.pp = 3;
  plan.config.layers_per_stage = {6, 9, 9};
  plan.num_microbatches = 1;
  EXPECT_EQ(megatron_arguments(plan),
            "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 3 --micro-batch-size 1 "
            "--global-batch-size 1 --decoder-first-pipeline-num-layers 6");
}

TEST(StepEnvironment, EveryVariableWithUnitsInTheName) {
  const Plan plan = interleaved_plan();
  RankTable table;
  table.rank_order = {1, 0, 2, 3};
  table.node_of_node_rank = {1, 0};
  const StepLayout layout{{"gpu-a", "gpu-b"}, 2, 2};
  const EnvironmentList list = step_environment(plan, table, layout, "0123456789abcdef");
  const std::map<std::string, std::string> env(list.begin(), list.end());
  EXPECT_EQ(env.at("PIPETTE_TP"), "8");
  EXPECT_EQ(env.at("PIPETTE_PP"), "4");
  EXPECT_EQ(env.at("PIPETTE_DP"), "2");
  EXPECT_EQ(env.at("PIPETTE_VPP"), "2");
  EXPECT_EQ(env.at("PIPETTE_MICRO_BATCH"), "1");
  EXPECT_EQ(env.at("PIPETTE_GLOBAL_BATCH"), "512");
  EXPECT_EQ(env.at("PIPETTE_NUM_MICROBATCHES"), "256");
  EXPECT_EQ(env.at("PIPETTE_RECOMPUTE"), "selective");
  EXPECT_EQ(env.at("PIPETTE_SEQUENCE_PARALLEL"), "1");
  EXPECT_EQ(env.at("PIPETTE_DISTRIBUTED_OPTIMIZER"), "1");
  EXPECT_EQ(env.at("PIPETTE_RANK_ORDER"), "1,0,2,3");
  EXPECT_EQ(env.at("PIPETTE_NODE_ORDER"), "gpu-b,gpu-a");
  EXPECT_EQ(env.at("PIPETTE_PREDICTED_ITER_MS"), "12345.7");
  EXPECT_EQ(env.at("PIPETTE_PREDICTED_MEM_GIB"), "70.2");
  EXPECT_EQ(env.at("PIPETTE_PLAN_HASH"), "0123456789abcdef");
  EXPECT_EQ(env.at("PIPETTE_MEGATRON_ARGS"), megatron_arguments(plan));
  EXPECT_EQ(env.at("PIPETTE_STATUS"), "ok");
  // plan_variable_names lists exactly what a failed step must clear: all but PIPETTE_STATUS.
  std::size_t names = 0;
  for (const char* const* name = plan_variable_names(); *name; ++name, ++names) EXPECT_EQ(env.count(*name), 1u) << *name;
  EXPECT_EQ(names + 1, env.size());
}

}  // namespace
}  // namespace pipette::spank
