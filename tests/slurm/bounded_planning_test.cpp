#include "bounded_planning.hpp"
#include "synthetic_step.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace pipette::spank {
namespace {

StepRequest request_for(const std::string& model, std::int64_t global_batch, int nodes = 4) {
  StepRequest request = testing::synthetic_step(nodes, 8, 1);
  request.settings.model = model;
  request.settings.global_batch = global_batch;
  return request;
}

using testing::h100_site;

// A model at the model file's layer limit that plans for over a minute on 16 nodes with a global
// batch of 65536 (every interleaving of every pipeline depth; 1.6 GB after 10 s), the kind of
// input the budget exists for.
std::string deep_model_file() {
  const std::string path = (std::filesystem::temp_directory_path() / "pipette-bounded-planning-deep.yaml").string();
  std::ofstream(path) << "num_layers: 1024\nhidden_size: 4096\nnum_attention_heads: 32\nvocab_size: 32000\n";
  return path;
}

TEST(BoundedPlanning, TheChildPlansExactlyWhatPlanStepPlans) {
  const StepRequest request = request_for("llama2-7b", 256);
  const StepPlanResult direct = plan_step(request, h100_site());
  const StepPlanResult bounded = plan_step_within_budget(request, h100_site());
  ASSERT_EQ(direct.error, "");
  EXPECT_EQ(bounded.error, "");
  EXPECT_EQ(bounded.plan.step_environment, direct.plan.step_environment);
  EXPECT_EQ(bounded.plan.task_environment, direct.plan.task_environment);
  EXPECT_EQ(bounded.plan.summary, direct.plan.summary);
  EXPECT_EQ(bounded.plan.notes, direct.plan.notes);
  EXPECT_EQ(bounded.plan.layout_record, direct.plan.layout_record);
  EXPECT_EQ(bounded.plan.framework, direct.plan.framework);
  EXPECT_EQ(bounded.plan.engine, direct.plan.engine);
}

TEST(BoundedPlanning, ErrorsComeBackUnchanged) {
  const StepRequest request = request_for("no-such-model", 256);
  EXPECT_EQ(plan_step_within_budget(request, h100_site()).error, plan_step(request, h100_site()).error);
}

TEST(BoundedPlanning, PlanningPastTheTimeLimitIsAnErrorAndReturnsAtTheLimit) {
  SiteConfig site = h100_site();
  site.planning.time_limit_seconds = 0.5;
  const auto start = std::chrono::steady_clock::now();
  const StepPlanResult result = plan_step_within_budget(request_for(deep_model_file(), 65536, 16), site);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.error,
            "planning took longer than 0.5 s (the site's planning.time_limit_seconds); a smaller model, batch or node "
            "count plans faster");
  EXPECT_TRUE(result.plan.step_environment.empty());
  EXPECT_LT(elapsed, 3.0);
}

TEST(BoundedPlanning, PlanningPastTheMemoryLimitIsAnError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's allocator aborts the process instead of failing an allocation past RLIMIT_AS";
#endif
  SiteConfig site = h100_site();
  site.planning.memory_limit_bytes = 1 << 20;
  const StepPlanResult result = plan_step_within_budget(request_for(deep_model_file(), 65536, 16), site);
  EXPECT_EQ(result.error, "planning needed more than 1 MiB of memory (the site's planning.memory_limit_mib)");
  EXPECT_TRUE(result.plan.step_environment.empty());
}

TEST(BoundedPlanning, EncodingRoundTripsAndRejectsDamagedBytes) {
  StepPlanResult result;
  result.plan.summary = "tp=1";
  result.plan.step_environment = {{"PIPETTE_TP", "1"}, {"PIPETTE_STATUS", "ok"}};
  result.plan.task_environment = {{{"RANK", "0"}}, {{"RANK", "1"}, {"LOCAL_RANK", ""}}};
  result.plan.notes = {"no link cache at /var/lib/pipette/links.yaml: every link is a prior", ""};
  result.plan.framework = "nanotron";
  result.plan.engine = "pp-schedule=afab,dp-overlap=off";
  const std::string bytes = encode(result);
  StepPlanResult decoded;
  ASSERT_TRUE(decode(bytes, decoded));
  EXPECT_EQ(decoded.plan.step_environment, result.plan.step_environment);
  EXPECT_EQ(decoded.plan.task_environment, result.plan.task_environment);
  EXPECT_EQ(decoded.plan.summary, "tp=1");
  EXPECT_EQ(decoded.plan.notes, result.plan.notes);
  EXPECT_EQ(decoded.plan.framework, "nanotron");
  EXPECT_EQ(decoded.plan.engine, "pp-schedule=afab,dp-overlap=off");
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    StepPlanResult truncated;
    EXPECT_FALSE(decode(std::string_view(bytes).substr(0, size), truncated)) << size;
  }
  StepPlanResult longer;
  EXPECT_FALSE(decode(bytes + "x", longer));
}

}  // namespace
}  // namespace pipette::spank
