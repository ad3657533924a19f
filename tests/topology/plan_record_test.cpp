#include "pipette/topology/plan_record.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace pipette {
namespace {

class PlanRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = std::filesystem::temp_directory_path() /
            ("pipette-plan-record-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(home_);
  }
  void TearDown() override { std::filesystem::remove_all(home_); }
  std::filesystem::path home_;
};

TEST_F(PlanRecordTest, WritesPrivatelyAndReadsBack) {
  auto path = write_plan_record(home_.string(), "pipette12", 42,
                                {{"model", "llama3-8b"}, {"nodes", "2"}, {"node_list", "gpu01,gpu02"}, {"gpus_per_node", "8"}, {"global_batch", "128"},
                                 {"sequence_length", "4096"}, {"tp", "2"}, {"pp", "2"}, {"dp", "2"}, {"cp", "2"}, {"vpp", "1"},
                                 {"mbs", "1"}, {"recompute", "selective"}, {"sp", "1"}, {"distopt", "1"}, {"fsdp", "0"}});
  ASSERT_TRUE(path.ok()) << path.error().message;
  EXPECT_EQ(*path, home_.string() + "/pipette/jobs/pipette12-42.plan");
  struct stat status {};
  ASSERT_EQ(::stat(path->c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(std::filesystem::path(*path).parent_path().c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0700u);
  auto run = read_plan_record(*path);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->model, "llama3-8b");
  EXPECT_EQ(run->nodes, 2);
  EXPECT_EQ(run->dp, 2);
  EXPECT_EQ(run->cp, 2);  // a long-context plan's record keeps its cp, so calibrate prices the run that ran
  EXPECT_EQ(run->node_names, (std::vector<std::string>{"gpu01", "gpu02"}));
  EXPECT_EQ(run->recompute, RecomputeMode::selective);
  EXPECT_EQ(run->sequence_parallel, true);
  EXPECT_EQ(run->fully_sharded, false);  // what the step ran, so calibrate prices that run
}

// A version-1 record (before ep, etp, the split, the framework and the engine were kept) still
// reads; a version-2 one gives them back.
TEST(PlanRecord, KeepsWhatTheJobWasPricedFor) {
  const auto old_record = parse_plan_record("pipette_plan_record=1\nmodel=llama3-8b\ntp=2\n", "p");
  ASSERT_TRUE(old_record.ok()) << old_record.error().message;
  EXPECT_TRUE(old_record->layers_per_stage.empty());
  EXPECT_EQ(old_record->framework, "");
  const auto current = parse_plan_record(
      "pipette_plan_record=2\nep=8\netp=1\nlayers_per_stage=0,12,12,0\nframework=nanotron\nengine=pp-schedule=afab\n", "p");
  ASSERT_TRUE(current.ok()) << current.error().message;
  EXPECT_EQ(current->ep, 8);
  EXPECT_EQ(current->etp, 1);
  EXPECT_EQ(current->layers_per_stage, (std::vector<int>{0, 12, 12, 0}));
  EXPECT_EQ(current->framework, "nanotron");
  EXPECT_EQ(current->engine, "pp-schedule=afab");
}

TEST_F(PlanRecordTest, RefusesADirectoryOthersMayWrite) {
  ASSERT_TRUE(write_plan_record(home_.string(), "c", 7, {{"model", "llama3-8b"}}).ok());
  const auto directory = std::filesystem::path(plan_record_path(home_.string(), "c", 7)).parent_path();
  ::chmod(directory.c_str(), 0777);
  const auto run = read_plan_record(plan_record_path(home_.string(), "c", 7));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("is writable by other users"), std::string::npos) << run.error().message;
  EXPECT_FALSE(write_plan_record(home_.string(), "c", 8, {{"model", "x"}}).ok());
  EXPECT_FALSE(write_plan_record(home_.string(), "../x", 9, {{"model", "x"}}).ok());
}

TEST(PlanRecord, StateHomeFollowsXdg) {
  EXPECT_EQ(state_home("/x/state", "/home/a"), "/x/state");
  EXPECT_EQ(state_home("relative", "/home/a"), "/home/a/.local/state");
  EXPECT_EQ(state_home(nullptr, nullptr), "");
}

TEST(PlanRecord, StrictParser) {
  EXPECT_EQ(parse_plan_record("pipette_plan_record=1\ntp=zero\n", "p").error().message,
            "p:2: tp must be a positive integer (got 'zero')");
  EXPECT_EQ(parse_plan_record("pipette_plan_record=1\ncolour=red\n", "p").error().message, "p:2: unknown key colour");
  EXPECT_EQ(parse_plan_record("tp=2\n", "p").error().message, "p: not a Pipette plan record (no pipette_plan_record line)");
  EXPECT_EQ(parse_plan_record("pipette_plan_record=3\n", "p").error().message, "p:1: plan record format 3; this Pipette reads 1 to 2");
  EXPECT_EQ(parse_plan_record("pipette_plan_record=2\nlayers_per_stage=8,x\n", "p").error().message,
            "p:2: layers_per_stage must be comma-separated layer counts (got '8,x')");
  // PIPETTE_RECOMPUTE of a block-recompute plan, as --pipette-fix spells it.
  const auto block = parse_plan_record("pipette_plan_record=1\nrecompute=block:5\n", "p");
  ASSERT_TRUE(block.ok()) << block.error().message;
  EXPECT_EQ(block->recompute, RecomputeMode::full);
  EXPECT_EQ(block->recomputed_layers_per_chunk, 5);
  EXPECT_NE(parse_plan_record("pipette_plan_record=1\nrecompute=block:0\n", "p").error().message.find("p:2: recompute=block:N needs N"),
            std::string::npos);
}

}  // namespace
}  // namespace pipette
