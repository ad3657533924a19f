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
  const auto wrong = parse_site_config("framework: deepspeed\n", "site.yaml");
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
  const auto unknown = prepare_job(request_for("deepspeed"), site);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message, "unknown framework 'deepspeed'; use megatron-core, nemo or torchtitan");
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
