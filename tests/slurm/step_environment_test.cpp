#include "step_environment.hpp"

#include <gtest/gtest.h>

#include <map>

#include "options.hpp"
#include "pipette/core/launch.hpp"

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
  plan.placement.gpu_of_rank = {1, 0, 2, 3};
  plan.node_order = {1, 0};
  return plan;
}

ModelSpec sixty_four_layers() {
  ModelSpec model;
  model.name = "test";
  model.num_layers = 64;
  return model;
}

TrainingSpec training_for(Framework framework) {
  TrainingSpec training;
  training.global_batch_sequences = 512;
  training.sequence_length = 4096;
  training.target.framework = framework;
  return training;
}

TEST(StepEnvironment, EveryVariableWithUnitsInTheName) {
  const Plan plan = interleaved_plan();
  const StepLayout layout{{"gpu-a", "gpu-b"}, 2, 2};
  const TrainingSpec training = training_for(Framework::megatron_core);
  const EnvironmentList list = step_environment(sixty_four_layers(), training, plan, layout, "0123456789abcdef");
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
  EXPECT_EQ(env.at("PIPETTE_MEGATRON_ARGS"), megatron_arguments(describe_launch(sixty_four_layers(), training, plan)));
  EXPECT_EQ(env.at("CUDA_DEVICE_MAX_CONNECTIONS"), "1");  // tp > 1 under Megatron
  EXPECT_EQ(env.at("PIPETTE_STATUS"), "ok");
  EXPECT_EQ(env.count("PIPETTE_NEMO_OVERRIDES"), 0u);
  EXPECT_EQ(env.count("PIPETTE_TORCHTITAN_ARGS"), 0u);
  // plan_variable_names covers every PIPETTE_* variable a plan sets but PIPETTE_STATUS.
  std::map<std::string, int> names;
  for (const char* const* name = plan_variable_names(); *name; ++name) names[*name] = 1;
  for (const auto& [name, value] : env) {
    if (name.starts_with("PIPETTE_") && name != "PIPETTE_STATUS") {
      EXPECT_EQ(names.count(name), 1u) << name;
    }
  }
}

TEST(StepEnvironment, OnlyTheTargetFrameworksString) {
  const StepLayout layout{{"gpu-a", "gpu-b"}, 2, 2};
  for (const auto& [framework, variable] : {std::pair{Framework::nemo, "PIPETTE_NEMO_OVERRIDES"},
                                            std::pair{Framework::torchtitan, "PIPETTE_TORCHTITAN_ARGS"}}) {
    const EnvironmentList list =
        step_environment(sixty_four_layers(), training_for(framework), interleaved_plan(), layout, "0123456789abcdef");
    const std::map<std::string, std::string> env(list.begin(), list.end());
    EXPECT_EQ(env.count(variable), 1u) << variable;
    EXPECT_EQ(env.count("PIPETTE_MEGATRON_ARGS"), 0u) << variable;
    // torchtitan's FSDP wants more than one connection; Megatron-core (NeMo) asserts one with tp > 1.
    EXPECT_EQ(env.count("CUDA_DEVICE_MAX_CONNECTIONS"), framework == Framework::nemo ? 1u : 0u) << variable;
  }
}

TEST(FrameworkOption, TakesEveryFrameworkAndReachesTheSettings) {
  EXPECT_EQ(parse_option_value(OptionId::framework, "nemo", "--pipette-framework").canonical, "nemo");
  for (const char* name : {"megatron-deepspeed", "nanotron", "deepspeed"})
    EXPECT_EQ(parse_option_value(OptionId::framework, name, "--pipette-framework").canonical, name);
  EXPECT_EQ(parse_option_value(OptionId::framework, "megatron-core", "PIPETTE_FRAMEWORK").canonical, "megatron-core");
  const Parsed wrong = parse_option_value(OptionId::framework, "colossalai", "--pipette-framework");
  EXPECT_EQ(wrong.error, "--pipette-framework: invalid value 'colossalai' (expected megatron-core, nemo, torchtitan, "
                         "megatron-deepspeed, nanotron or deepspeed)");
  OptionValues command_line;
  command_line[OptionId::framework] = "torchtitan";
  EXPECT_EQ(merge(command_line, {}, {}).framework, "torchtitan");
  EXPECT_EQ(merge({}, {}, {}).framework, "");  // the site's framework applies
}

}  // namespace
}  // namespace pipette::spank
