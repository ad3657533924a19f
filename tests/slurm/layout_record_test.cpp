#include "layout_record.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "pipette/topology/job_planner.hpp"
#include "rank_table.hpp"
#include "step_plan.hpp"
#include "synthetic_step.hpp"

namespace pipette::spank {
namespace {

const RecordedLayout first_start{"tp=4,pp=2,dp=4,mbs=1,vpp=1,recompute=none,sp=on,distopt=on", {17, 15}, 32, "abc",
                                 "model=llama3-8b batch=256 seq=8192 framework=default"};

std::string temporary_path(const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() / ("pipette-layout-test-" + name)).string();
  std::filesystem::remove(path);
  return path;
}

TEST(LayoutRecord, FormatsAndParsesBack) {
  const Result<RecordedLayout> parsed = parse_layout_record(format_layout_record(first_start), "f");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->fix, first_start.fix);
  EXPECT_EQ(parsed->layers_per_stage, first_start.layers_per_stage);
  EXPECT_EQ(parsed->gpus, 32);
  EXPECT_EQ(parsed->plan_hash, "abc");
  EXPECT_EQ(parsed->request, first_start.request);
}

// A record written before requests were kept still restarts its job.
TEST(LayoutRecord, AVersion1RecordReadsWithoutARequest) {
  const Result<RecordedLayout> parsed =
      parse_layout_record("pipette_layout: 1\nfix: tp=2,pp=2\nsplit: 16,16\ngpus: 16\nplan: abc\n", "f");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->request, "");
  EXPECT_EQ(parsed->layers_per_stage, (std::vector<int>{16, 16}));
  EXPECT_FALSE(parse_layout_record("pipette_layout: 2\nfix: tp=2,pp=2\nsplit: 16,16\ngpus: 16\nplan: abc\n", "f").ok())
      << "version 2 needs its request";
}

// More stages than layers: the embedding's and the head's stages hold no layer, and a restart
// keeps that split.
TEST(LayoutRecord, AStageWithoutLayersIsKept) {
  const Result<RecordedLayout> parsed =
      parse_layout_record("pipette_layout: 1\nfix: tp=1,pp=4\nsplit: 0,1,1,0\ngpus: 4\nplan: abc\n", "f");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->layers_per_stage, (std::vector<int>{0, 1, 1, 0}));
}

// The request names what the plan was asked for and nothing the user's --pipette-fix may change.
TEST(LayoutRecord, TheRequestNamesModelBatchSequenceAndFramework) {
  Settings settings;
  EXPECT_EQ(describe_request(settings), "model=default batch=default seq=default framework=default");
  settings.model = "llama3-70b";
  settings.global_batch = 1024;
  settings.sequence_length = 8192;
  settings.framework = "nemo";
  settings.fix = "tp=8";
  EXPECT_EQ(describe_request(settings), "model=llama3-70b batch=1024 seq=8192 framework=nemo");
  Settings other = settings;
  other.fix = "pp=4";
  EXPECT_EQ(describe_request(other), describe_request(settings));
  other.model = "llama3-8b";
  EXPECT_NE(describe_request(other), describe_request(settings));
}

TEST(LayoutRecord, CorruptRecordsAreRefusedWithTheFixNamed) {
  const std::string good = format_layout_record(first_start);
  const std::vector<std::string> corrupt = {
       std::string(), good.substr(0, good.size() - 1), "pipette_layout: 3\n" + good.substr(good.find('\n') + 1),
        good + "extra: 1\n", good + "gpus: 8\n", "pipette_layout: 1\nfix: tp=x\nsplit: 1\ngpus: 8\nplan: a\n",
        "pipette_layout: 1\nfix: tp=4,pp=2\nsplit: 17\ngpus: 8\nplan: a\n",
        "pipette_layout: 1\nfix: tp=4,pp=2\nsplit: 17,-1\ngpus: 8\nplan: a\n",
        "pipette_layout: 1\nfix: tp=4,pp=2\nsplit: 0,0\ngpus: 8\nplan: a\n",
        "pipette_layout: 1\nfix: tp=4,pp=2\nsplit: 17,15\ngpus: -8\nplan: a\n"};
  for (const std::string& bad : corrupt) {
    const Result<RecordedLayout> parsed = parse_layout_record(bad, "/d/.pipette-layout-7");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().message.rfind("layout record /d/.pipette-layout-7 is corrupt (", 0), 0u) << parsed.error().message;
    EXPECT_NE(parsed.error().message.find("delete it to plan the job afresh"), std::string::npos);
  }
}

TEST(LayoutRecord, TheUsersFixWinsAndAnotherPpDropsTheSplit) {
  Result<RestartKnobs> knobs = restart_knobs(first_start, "");
  ASSERT_TRUE(knobs.ok());
  EXPECT_EQ(knobs->fix, first_start.fix);
  EXPECT_EQ(knobs->layers_per_stage, first_start.layers_per_stage);
  knobs = restart_knobs(first_start, "mbs=2,recompute=full");
  ASSERT_TRUE(knobs.ok());
  EXPECT_EQ(knobs->fix, "tp=4,pp=2,dp=4,mbs=2,vpp=1,recompute=full,sp=on,distopt=on");
  EXPECT_EQ(knobs->layers_per_stage, first_start.layers_per_stage);
  knobs = restart_knobs(first_start, "pp=4,dp=2");
  ASSERT_TRUE(knobs.ok());
  EXPECT_EQ(knobs->fix, "tp=4,pp=4,dp=2,mbs=1,vpp=1,recompute=none,sp=on,distopt=on");
  EXPECT_TRUE(knobs->layers_per_stage.empty());
}

// A block-recompute start restarts with its count; the user's own recompute replaces both.
TEST(LayoutRecord, BlockRecomputeRestartsAsRecordedUnlessTheUserFixesRecompute) {
  RecordedLayout block = first_start;
  block.fix = "tp=4,pp=2,dp=4,mbs=1,vpp=1,recompute=block:5,sp=on,distopt=on";
  Result<RestartKnobs> knobs = restart_knobs(block, "mbs=2");
  ASSERT_TRUE(knobs.ok()) << knobs.error().message;
  EXPECT_EQ(knobs->fix, "tp=4,pp=2,dp=4,mbs=2,vpp=1,recompute=block:5,sp=on,distopt=on");
  knobs = restart_knobs(block, "recompute=full");
  ASSERT_TRUE(knobs.ok());
  EXPECT_EQ(knobs->fix, "tp=4,pp=2,dp=4,mbs=1,vpp=1,recompute=full,sp=on,distopt=on");
  Plan plan;
  plan.config.tp = 4, plan.config.pp = 2, plan.config.dp = 4, plan.config.recompute = RecomputeMode::full;
  plan.config.recomputed_layers_per_chunk = 5;
  plan.config.layers_per_stage = {17, 15};
  EXPECT_NE(layout_of(ModelSpec{}, plan, "abc", first_start.request).fix.find("recompute=block:5"), std::string::npos);
}

// An FSDP start (torchtitan) restarts sharded; the user's fsdp=off replaces it; a replicated start
// records nothing, what its restart's search chooses anyway.
TEST(LayoutRecord, AnFsdpStartRestartsShardedUnlessTheUserFixesItOff) {
  Plan plan;
  plan.config.dp = 8, plan.config.fully_sharded = true, plan.config.layers_per_stage = {32};
  const RecordedLayout sharded = layout_of(ModelSpec{}, plan, "abc", first_start.request);
  EXPECT_NE(sharded.fix.find("fsdp=on"), std::string::npos) << sharded.fix;
  Result<RestartKnobs> knobs = restart_knobs(sharded, "");
  ASSERT_TRUE(knobs.ok()) << knobs.error().message;
  EXPECT_NE(knobs->fix.find("fsdp=on"), std::string::npos) << knobs->fix;
  knobs = restart_knobs(sharded, "fsdp=off");
  ASSERT_TRUE(knobs.ok()) << knobs.error().message;
  EXPECT_NE(knobs->fix.find("fsdp=off"), std::string::npos) << knobs->fix;
  plan.config.fully_sharded = false;
  EXPECT_EQ(layout_of(ModelSpec{}, plan, "abc", first_start.request).fix.find("fsdp"), std::string::npos);
}

// An MoE job's restart keeps its expert groups, unless the user fixes others; ep = etp = 1 too.
TEST(LayoutRecord, AnMoeRestartKeepsItsExpertGroups) {
  ModelSpec moe;
  moe.num_experts = 8;
  Plan plan;
  plan.config.tp = 2;
  plan.config.pp = 2;
  plan.config.dp = 4;
  plan.config.ep = 4;
  plan.config.etp = 1;
  plan.config.layers_per_stage = {24, 24};
  const RecordedLayout recorded = layout_of(moe, plan, "abc", first_start.request);
  Result<RestartKnobs> knobs = restart_knobs(recorded, "");
  ASSERT_TRUE(knobs.ok()) << knobs.error().message;
  const Result<FixedKnobs> kept = parse_fixed_knobs(knobs->fix);
  ASSERT_TRUE(kept.ok()) << kept.error().message;
  EXPECT_EQ(kept->ep, 4);
  EXPECT_EQ(kept->etp, 1);
  knobs = restart_knobs(recorded, "ep=2");
  ASSERT_TRUE(knobs.ok());
  EXPECT_EQ(parse_fixed_knobs(knobs->fix)->ep, 2);
  plan.config.ep = 1;
  const Result<FixedKnobs> unsplit = parse_fixed_knobs(layout_of(moe, plan, "abc", first_start.request).fix);
  EXPECT_EQ(unsplit->ep, 1) << "an MoE plan without expert parallelism keeps it so";
  EXPECT_EQ(unsplit->etp, 1);
  EXPECT_FALSE(parse_fixed_knobs(layout_of(ModelSpec{}, plan, "abc", first_start.request).fix)->ep)
      << "a dense plan fixes no ep";
}

// A long-context job's restart keeps its cp (its data loader and checkpoint are cut for it); a
// cp = 1 plan needs no cp knob: with tp, pp and dp fixed on as many GPUs, cp = 1 follows.
TEST(LayoutRecord, ALongContextRestartKeepsItsContextParallelSize) {
  Plan plan;
  plan.config = {.tp = 8, .pp = 4, .dp = 1, .cp = 8, .layers_per_stage = {20, 20, 20, 20}};
  const RecordedLayout recorded = layout_of(ModelSpec{}, plan, "abc", first_start.request);
  EXPECT_EQ(recorded.gpus, 256);  // tp x cp x pp x dp
  Result<RestartKnobs> knobs = restart_knobs(recorded, "");
  ASSERT_TRUE(knobs.ok()) << knobs.error().message;
  EXPECT_EQ(parse_fixed_knobs(knobs->fix)->cp, 8);
  knobs = restart_knobs(recorded, "cp=4");
  ASSERT_TRUE(knobs.ok());
  EXPECT_EQ(parse_fixed_knobs(knobs->fix)->cp, 4) << "the user's --pipette-fix wins";
  plan.config.cp = 1;
  plan.config.dp = 8;
  EXPECT_FALSE(parse_fixed_knobs(layout_of(ModelSpec{}, plan, "abc", first_start.request).fix)->cp);
}

// The restart of a job plans exactly the first start's layout, even where a fresh plan differs.
TEST(LayoutRecord, ARestartWithTheRecordPlansTheFirstStartsLayout) {
  const SiteConfig site = testing::h100_site();
  StepRequest first = testing::synthetic_step(4, 8, 0);
  first.settings.fix = "tp=2,pp=4,mbs=1";
  const StepPlanResult planned = plan_step(first, site);
  ASSERT_EQ(planned.error, "");
  const Result<RecordedLayout> recorded = parse_layout_record(planned.plan.layout_record, "r");
  ASSERT_TRUE(recorded.ok()) << recorded.error().message;

  StepRequest restart = testing::synthetic_step(4, 8, 0);
  const Result<RestartKnobs> knobs = restart_knobs(*recorded, restart.settings.fix);
  ASSERT_TRUE(knobs.ok());
  restart.settings.fix = knobs->fix;
  restart.fixed_layers_per_stage = knobs->layers_per_stage;
  const StepPlanResult again = plan_step(restart, site);
  ASSERT_EQ(again.error, "");
  EXPECT_EQ(again.plan.layout_record, planned.plan.layout_record);
  EXPECT_NE(plan_step(testing::synthetic_step(4, 8, 0), site).plan.layout_record, planned.plan.layout_record)
      << "a fresh plan differs, so the test shows the record at work";
}

TEST(LayoutRecord, WrittenForTheUserAloneAndReadBack) {
  const std::string path = temporary_path("write");
  EXPECT_FALSE(read_layout_record(path).found);
  EXPECT_EQ(read_layout_record(path).error, "");
  ASSERT_EQ(write_layout_record(path, first_start), "");
  struct stat status {};
  ASSERT_EQ(stat(path.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  const ReadLayout read = read_layout_record(path);
  ASSERT_TRUE(read.found) << read.error;
  EXPECT_EQ(read.layout.fix, first_start.fix);
  RecordedLayout other = first_start;
  other.plan_hash = "def";
  ASSERT_EQ(write_layout_record(path, other), "");
  EXPECT_EQ(read_layout_record(path).layout.plan_hash, "abc") << "the first record stays";
  ASSERT_EQ(write_layout_record(path, other, ExistingRecord::replace), "");
  EXPECT_EQ(read_layout_record(path).layout.plan_hash, "def") << "another job's record is replaced";
  ASSERT_EQ(stat(path.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  chmod(path.c_str(), 0666);
  EXPECT_NE(read_layout_record(path).error.find("writable by others than its owner"), std::string::npos);
  std::filesystem::remove(path);
  std::ofstream(path) << "garbage\n";
  EXPECT_NE(read_layout_record(path).error.find("is corrupt"), std::string::npos);
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  EXPECT_FALSE(read_layout_record(path).error.empty());
  std::filesystem::remove(path);
}

TEST(VisibleLocalRank, PerTaskBindingGivesZeroAndAWholeNodeTheLocalId) {
  EXPECT_EQ(visible_local_rank(3, "0,1,2,3,4,5,6,7", "3"), 0);   // --gpus-per-task=1, --gpu-bind=single:1
  EXPECT_EQ(visible_local_rank(3, "0,1,2,3,4,5,6,7", "0,1,2,3,4,5,6,7"), 3);
  EXPECT_EQ(visible_local_rank(1, "4,5,6,7", "6,7"), 1);          // two GPUs per task: the second
  EXPECT_EQ(visible_local_rank(3, "", ""), 3);                    // nothing known: SLURM_LOCALID
  EXPECT_EQ(visible_local_rank(5, "", "GPU-a"), 0);               // one device seen, whatever it is
  EXPECT_EQ(visible_local_rank(2, "0,1,2,3", "0,1,2,3"), 2);
}

}  // namespace
}  // namespace pipette::spank
