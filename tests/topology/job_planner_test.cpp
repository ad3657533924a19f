#include "pipette/topology/job_planner.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "pipette/topology/hostlist.hpp"

namespace pipette {
namespace {

constexpr std::int64_t kNow = 1796144400;  // 2026-12-01T17:00:00Z

class PrepareJob : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pipette-planner-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    request_.model = "llama2-7b";
    request_.global_batch = 256;
    request_.sequence_length = 4096;
    request_.node_names = *expand_hostlist("jwb[01-04]");
    request_.topology_xml = PIPETTE_SOURCE_DIR "/tests/data/hwloc/psmgmt-juwels-booster-4xA100-4xHDR-hwloc22.xml";
    request_.reference_time_unix_seconds = kNow;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  SiteConfig site(const std::string& text) {
    std::ofstream(dir_ / "site.yaml") << text;
    auto loaded = load_site_config((dir_ / "site.yaml").string());
    EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error().message);
    return loaded.ok() ? *loaded : SiteConfig{};
  }
  void write(const char* name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  std::filesystem::path dir_;
  JobRequest request_;
};

TEST_F(PrepareJob, MissingCacheMeansPriorsAndANote) {
  auto job = prepare_job(request_, site("links:\n  cache: links.yaml\n"));
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->model.num_layers, 32);
  EXPECT_EQ(job->training.global_batch_sequences, 256);
  EXPECT_EQ(job->cluster.num_gpus(), 16);
  EXPECT_EQ(job->assumed_node_pairs, 6);
  bool noted = false;
  for (const auto& note : job->notes) noted |= note.find("no link cache at " + (dir_ / "links.yaml").string()) == 0;
  EXPECT_TRUE(noted);
}

TEST_F(PrepareJob, MeasuredLinksComeFromTheSitesCache) {
  write("links.yaml",
        "pipette_link_cache: 1\npairs:\n"
        "  jwb01 jwb02: {measured_at: 2026-12-01T16:00:00Z, bandwidth_gb_per_s: 70, latency_us: 5}\n");
  auto job = prepare_job(request_, site("links:\n  cache: links.yaml\n"));
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->measured_node_pairs, 1);
  EXPECT_DOUBLE_EQ(job->cluster.inter_node.at(0, 1).bandwidth_bytes_per_second, 70e9);
  EXPECT_TRUE(job->cluster.inter_node.at(0, 1).measured);
}

TEST_F(PrepareJob, SiteDefaultsFillWhatTheRequestLeavesOut) {
  request_.model.clear();
  request_.global_batch = 0;
  request_.sequence_length = 0;
  auto job = prepare_job(request_, site("defaults:\n  model: llama2-13b\n  global_batch: 64\n  sequence_length: 2048\n"
                                        "  fixed: tp=4,recompute=selective\n  precision: fp16\nsearch:\n  top_k: 3\n"));
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->model.num_layers, 40);
  EXPECT_EQ(job->training.global_batch_sequences, 64);
  EXPECT_EQ(job->training.sequence_length, 2048);
  EXPECT_EQ(job->training.fixed.tp, 4);
  EXPECT_EQ(job->training.precision, Precision::fp16);
  EXPECT_EQ(job->options.top_k, 3);
  request_.fixed = "pp=2";
  request_.top_k = 7;
  auto overridden = prepare_job(request_, site("defaults:\n  model: llama2-13b\n  global_batch: 64\n  sequence_length: 2048\n"
                                               "  fixed: tp=4\n"));
  ASSERT_TRUE(overridden.ok()) << overridden.error().message;
  EXPECT_FALSE(overridden->training.fixed.tp);
  EXPECT_EQ(overridden->training.fixed.pp, 2);
  EXPECT_EQ(overridden->options.top_k, 7);
}

TEST_F(PrepareJob, BadInputsAreOneLineErrors) {
  struct Case {
    std::function<void(JobRequest&)> change;
    std::string site;
    std::string expected;
  };
  write("corrupt.yaml", "pipette_link_cache: 1\npairs:\n  a b: {bandwidth_gb_per_s: nan}\n");
  const std::vector<Case> cases = {
      {[](JobRequest& r) { r.model.clear(); }, "", "no model: pass one"},
      {[](JobRequest& r) { r.model = "gpt-7"; }, "", "gpt-7"},
      {[](JobRequest& r) { r.global_batch = 0; }, "", "no global batch"},
      {[](JobRequest& r) { r.fixed = "tp=three"; }, "", "--pipette-fix: \"tp=three\""},
      {[](JobRequest& r) { r.node_names.clear(); }, "", "the node list is empty"},
      {[](JobRequest& r) { r.topology_xml = "/nonexistent.xml"; }, "", "/nonexistent.xml"},
      {[](JobRequest&) {}, "links:\n  cache: corrupt.yaml\n", "corrupt.yaml:3: pair a b:"},
      {[](JobRequest&) {}, "links:\n  cache: absent.yaml\n  require_measurements: true\n", "does not exist and the site requires measurements"},
      {[](JobRequest&) {}, "links:\n  require_measurements: true\n", "links.cache names no cache"},
      {[](JobRequest&) {}, "priors:\n  topology_conf: missing.conf\n", "missing.conf: cannot read Slurm's topology.conf"},
  };
  for (const auto& c : cases) {
    JobRequest request = request_;
    c.change(request);
    auto job = prepare_job(request, site(c.site));
    ASSERT_FALSE(job.ok()) << c.expected;
    EXPECT_NE(job.error().message.find(c.expected), std::string::npos) << job.error().message;
    EXPECT_EQ(job.error().message.find('\n'), std::string::npos) << job.error().message;
  }
}

TEST_F(PrepareJob, GivenInspectionAndGpuCountNeedNoHardware) {
  request_.topology_xml.clear();
  request_.inspection = NodeInspection{};
  request_.gpus_per_node = 8;
  request_.gpu = "H100-SXM";
  auto job = prepare_job(request_, site("priors:\n  rails: 8\n  nic_gbit_per_s: 400\n"));
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->cluster.num_gpus(), 32);
  EXPECT_EQ(job->cluster.gpu.name, "H100-SXM");
}

// BigScience's 176B prototype with 16 heads of 896 (chronicles-prequel.md @9e64edec l.724), narrowed:
// no fused kernel Transformer Engine has takes such heads, so Megatron-core runs its unfused attention
// (stack_profile_test.cpp, AttentionKernelsTakeOnlyTheHeadsTheirStackRuns) and the job is priced so.
TEST_F(PrepareJob, HeadsNoFusedKernelTakesArePricedAsTheUnfusedAttentionThatRuns) {
  write("wide-heads.yaml",
        "name: wide-heads\nnum_layers: 8\nhidden_size: 14336\nnum_attention_heads: 16\nffn_hidden_size: 57344\n"
        "vocab_size: 250880\n");
  request_.model = (dir_ / "wide-heads.yaml").string();
  request_.global_batch = 64;
  request_.sequence_length = 2048;
  auto job = prepare_job(request_, site(""));
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->training.attention, AttentionKernel::unfused);
  bool noted = false;
  for (const auto& note : job->notes) noted |= note.find("heads 896 wide") != std::string::npos;
  EXPECT_TRUE(noted);
  for (const EngineSetting& setting : job->engine) {
    if (setting.key == "attention") {
      EXPECT_EQ(setting.value, "unfused");
    }
  }

  // Asked for by name, the flash kernel cannot be had; nor ring attention, which needs a fused kernel
  // (Transformer Engine's utils.py l.1171).
  const std::vector<std::pair<std::function<void(JobRequest&)>, std::string>> refused = {
      {[](JobRequest& r) { r.engine = "attention=flash"; }, "engine attention=flash (job) cannot run wide-heads: "},
      {[](JobRequest& r) { r.fixed = "cp=2"; }, "fixed cp=2 needs flash attention"},
  };
  for (const auto& [change, expected] : refused) {
    JobRequest request = request_;
    change(request);
    auto refusal = prepare_job(request, site(""));
    ASSERT_FALSE(refusal.ok()) << expected;
    EXPECT_EQ(refusal.error().message.find(expected), 0u) << refusal.error().message;
    EXPECT_NE(refusal.error().message.find("heads 896 wide"), std::string::npos) << refusal.error().message;
    EXPECT_EQ(refusal.error().message.find('\n'), std::string::npos) << refusal.error().message;
  }
  // Where flash-attn 2 takes the heads (128 wide), nothing changes.
  request_.model = "llama2-7b";
  auto usual = prepare_job(request_, site(""));
  ASSERT_TRUE(usual.ok()) << usual.error().message;
  EXPECT_EQ(usual->training.attention, AttentionKernel::flash);
}

}  // namespace
}  // namespace pipette

namespace pipette {
namespace {

TEST_F(PrepareJob, PlanJobSearchesTheAssembledCluster) {
  write("links.yaml",
        "pipette_link_cache: 1\npairs:\n"
        "  jwb01 jwb02: {measured_at: 2026-12-01T16:00:00Z, bandwidth_gb_per_s: 70, latency_us: 5}\n");
  const SiteConfig configured = site("links:\n  cache: links.yaml\nsearch:\n  top_k: 3\n");
  auto plan = plan_job(request_, configured);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_FALSE(plan->search.plans.empty());
  EXPECT_LE(plan->search.plans.size(), 3u);
  const Plan& best = plan->search.plans.front();
  EXPECT_EQ(best.config.world_size(), 16);
  EXPECT_EQ(best.placement.gpu_of_rank.size(), 16u);
  EXPECT_LE(best.peak_memory_bytes, plan->cluster.gpu.memory_bytes);
  EXPECT_FALSE(best.links_assumed.empty());  // 5 of 6 node pairs are priors
  EXPECT_EQ(plan->measured_node_pairs, 1);
  // The same request plans the same way, to the hash.
  auto again = plan_job(request_, configured);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(plan_hash(again->search.plans.front()), plan_hash(best));
}

TEST_F(PrepareJob, PlanJobHonoursFixedKnobsAndReportsImpossibleJobs) {
  request_.fixed = "tp=4,pp=1,dp=4,mbs=1";
  auto fixed = plan_job(request_, site(""));
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  for (const Plan& plan : fixed->search.plans) {
    EXPECT_EQ(plan.config.tp, 4);
    EXPECT_EQ(plan.config.pp, 1);
    EXPECT_EQ(plan.config.micro_batch, 1);
  }
  request_.fixed.clear();
  request_.model = "llama3-405b";
  request_.node_names = {"jwb01"};
  auto impossible = plan_job(request_, site(""));
  ASSERT_FALSE(impossible.ok());
  EXPECT_EQ(impossible.error().message.find('\n'), std::string::npos) << impossible.error().message;
}

}  // namespace
}  // namespace pipette
