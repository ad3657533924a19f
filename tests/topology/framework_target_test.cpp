// The framework a job is planned for: the site's `framework:` and `megatron_pipeline_layout:`
// keys, overridden per job by JobRequest::framework (--pipette-framework, --framework).
#include <gtest/gtest.h>

#include "pipette/topology/job_planner.hpp"
#include "pipette/topology/site_config.hpp"

namespace pipette {
namespace {

TEST(FrameworkTarget, SiteKeysAndTheirDefaults) {
  const auto defaults = parse_site_config("", "empty.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->framework.framework, Framework::megatron_core);
  EXPECT_FALSE(defaults->framework.pipeline_layout);
  const auto site = parse_site_config("framework: torchtitan\nmegatron_pipeline_layout: true\n", "site.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  EXPECT_EQ(site->framework.framework, Framework::torchtitan);
  EXPECT_TRUE(site->framework.pipeline_layout);
  for (const char* name : {"megatron-deepspeed", "nanotron", "deepspeed"}) {
    const auto stack = parse_site_config(std::string("framework: ") + name + "\n", "site.yaml");
    ASSERT_TRUE(stack.ok()) << stack.error().message;
    EXPECT_STREQ(to_string(stack->framework.framework), name);
  }
  const auto wrong = parse_site_config("framework: colossalai\n", "site.yaml");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("site.yaml:1: key 'framework'"), std::string::npos) << wrong.error().message;
}

JobRequest request_for(const std::string& framework) {
  JobRequest request;
  request.model = "gpt3-5b";
  request.global_batch = 64;
  request.sequence_length = 8192;
  request.node_names = {"n1", "n2"};
  request.gpus_per_node = 8;
  request.gpu = "H100-SXM";
  request.inspection = NodeInspection{};
  request.model_dirs = {PIPETTE_SOURCE_DIR "/etc/models"};
  request.framework = framework;
  return request;
}

TEST(FrameworkTarget, TheRequestWinsOverTheSiteAndUnknownNamesAreErrors) {
  SiteConfig site;
  site.framework.framework = Framework::nemo;
  const auto from_site = prepare_job(request_for(""), site);
  ASSERT_TRUE(from_site.ok()) << from_site.error().message;
  EXPECT_EQ(from_site->training.target.framework, Framework::nemo);
  const auto asked = prepare_job(request_for("torchtitan"), site);
  ASSERT_TRUE(asked.ok()) << asked.error().message;
  EXPECT_EQ(asked->training.target.framework, Framework::torchtitan);
  const auto unknown = prepare_job(request_for("colossalai"), site);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message,
            "unknown framework 'colossalai'; use megatron-core, nemo, torchtitan, megatron-deepspeed, nanotron or deepspeed");
}

// The stack decides the kernel and the overlaps the plan is priced with (stack_profile.cpp cites
// each): Megatron-DeepSpeed's unfused attention, synchronous TP backward and reduction after the
// backward; nanotron's flash attention, synchronous TP backward and overlapped DP reduction.
TEST(FrameworkTarget, TheStackSetsItsKernelAndOverlaps) {
  const auto reference = prepare_job(request_for("megatron-core"), SiteConfig{});
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  EXPECT_EQ(reference->training.attention, AttentionKernel::flash);
  EXPECT_TRUE(reference->training.overlap_tensor_parallel_backward);
  EXPECT_TRUE(reference->training.overlap_gradient_reduce);
  const auto deepspeed = prepare_job(request_for("megatron-deepspeed"), SiteConfig{});
  ASSERT_TRUE(deepspeed.ok()) << deepspeed.error().message;
  EXPECT_EQ(deepspeed->training.attention, AttentionKernel::unfused);
  EXPECT_FALSE(deepspeed->training.overlap_tensor_parallel_backward);
  EXPECT_FALSE(deepspeed->training.overlap_gradient_reduce);
  const auto nanotron = prepare_job(request_for("nanotron"), SiteConfig{});
  ASSERT_TRUE(nanotron.ok()) << nanotron.error().message;
  EXPECT_EQ(nanotron->training.attention, AttentionKernel::flash);
  EXPECT_FALSE(nanotron->training.overlap_tensor_parallel_backward);
  EXPECT_TRUE(nanotron->training.overlap_gradient_reduce);
}

TEST(FrameworkTarget, ALearnedPositionTableGrowsToTheSequenceAndSaysSo) {
  const auto job = prepare_job(request_for(""), SiteConfig{});
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->model.learned_position_embeddings, 8192);  // gpt3-5b has 2048
  bool noted = false;
  for (const std::string& note : job->notes) noted |= note.find("--max-position-embeddings 8192") != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace pipette
