#include "step_plan.hpp"
#include "synthetic_step.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

namespace pipette::spank {
namespace {

std::map<std::string, std::string> as_map(const EnvironmentList& list) {
  return std::map<std::string, std::string>(list.begin(), list.end());
}

StepRequest request_for(int nodes, int tasks_per_node, int node_index) {
  return testing::synthetic_step(nodes, tasks_per_node, node_index);
}

using testing::h100_site;

// What every node computes on its own must agree: same variables, and together the nodes' tasks
// play every rank exactly once.
TEST(PlanStep, EveryNodePlansTheSameStepAndRanksFormABijection) {
  const int nodes = 4;
  std::set<int> ranks;
  EnvironmentList first_step;
  for (int node = 0; node < nodes; ++node) {
    const StepPlanResult result = plan_step(request_for(nodes, 8, node), h100_site());
    ASSERT_EQ(result.error, "");
    if (node == 0) first_step = result.plan.step_environment;
    EXPECT_EQ(result.plan.step_environment, first_step);
    ASSERT_EQ(result.plan.task_environment.size(), 8u);
    const auto step = as_map(result.plan.step_environment);
    for (int local = 0; local < 8; ++local) {
      const auto task = as_map(result.plan.task_environment[static_cast<std::size_t>(local)]);
      const int rank = std::stoi(task.at("RANK"));
      ranks.insert(rank);
      EXPECT_EQ(task.at("LOCAL_RANK"), std::to_string(local));
      EXPECT_EQ(task.at("WORLD_SIZE"), "32");
      // PIPETTE_RANK_ORDER[RANK] is this task's SLURM_PROCID (block distribution).
      std::vector<int> order;
      std::stringstream stream(step.at("PIPETTE_RANK_ORDER"));
      for (std::string item; std::getline(stream, item, ',');) order.push_back(std::stoi(item));
      EXPECT_EQ(order.at(static_cast<std::size_t>(rank)), node * 8 + local);
    }
  }
  EXPECT_EQ(ranks.size(), 32u);
}

TEST(PlanStep, BatchStepHasNoTaskVariables) {
  const StepPlanResult result = plan_step(request_for(4, 0, 0), h100_site());
  ASSERT_EQ(result.error, "");
  EXPECT_TRUE(result.plan.task_environment.empty());
  EXPECT_EQ(as_map(result.plan.step_environment).at("PIPETTE_STATUS"), "ok");
  EXPECT_NE(result.plan.summary.find("tp="), std::string::npos);
}

TEST(PlanStep, PlannerErrorsComeBackAsOneLine) {
  StepRequest request = request_for(4, 8, 0);
  request.settings.model = "no-such-model";
  const StepPlanResult result = plan_step(request, h100_site());
  EXPECT_NE(result.error.find("no-such-model"), std::string::npos) << result.error;
  EXPECT_EQ(result.error.find('\n'), std::string::npos);
}

// The plugin's engine options reach the planner: the export follows them, and a switch the
// framework cannot run leaves the step unplanned with the reason.
TEST(PlanStep, EngineOptionsReachThePlanAndItsExport) {
  StepRequest request = request_for(4, 8, 0);
  request.settings.engine = "dp-overlap=off";
  StepPlanResult result = plan_step(request, h100_site());
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(as_map(result.plan.step_environment).at("PIPETTE_MEGATRON_ARGS").find("--overlap-grad-reduce"), std::string::npos);
  // What the plan was priced for, kept for pipette calibrate: the job's switch, not the stack's defaults.
  EXPECT_EQ(result.plan.framework, "megatron-core");
  EXPECT_EQ(result.plan.engine, "dp-overlap=off");
  request.settings.engine.clear();
  result = plan_step(request, h100_site());
  ASSERT_EQ(result.error, "");
  EXPECT_NE(as_map(result.plan.step_environment).at("PIPETTE_MEGATRON_ARGS").find("--overlap-grad-reduce"), std::string::npos);
  request.settings.engine = "tp-recompute-allgather=off";
  result = plan_step(request, h100_site());
  EXPECT_NE(result.error.find("cannot run on megatron-core"), std::string::npos) << result.error;
  request.settings.engine.clear();
  request.settings.framework = "nanotron";
  request.settings.precision = "fp8";
  result = plan_step(request, h100_site());
  EXPECT_NE(result.error.find("engine precision=fp8 (job) cannot run on nanotron"), std::string::npos) << result.error;
}

TEST(PlanStep, TaskLayoutThatFitsNeitherLaunchStyleIsAnError) {
  const StepPlanResult result = plan_step(request_for(4, 2, 0), h100_site());
  EXPECT_EQ(result.error,
            "2 tasks per node: run one task per GPU (--ntasks-per-node=8) or one launcher per node "
            "(--ntasks-per-node=1)");
}

TEST(SiteDefaults, ModeAndFailurePolicyFromTheSiteFile) {
  SiteConfig site;
  EXPECT_EQ(site_defaults(site).mode, "off");
  EXPECT_EQ(site_defaults(site).strict, false);
  site.default_mode = PipetteMode::automatic;
  site.failure_policy = FailurePolicy::fail_job;
  EXPECT_EQ(site_defaults(site).mode, "auto");
  EXPECT_EQ(site_defaults(site).strict, true);
}

}  // namespace
}  // namespace pipette::spank
