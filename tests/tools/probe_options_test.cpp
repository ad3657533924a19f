// pipette-probe's command line and the Slurm task variables it reads.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "pipette/probe/probe_options.hpp"

namespace pipette::probe {
namespace {

TEST(ProbeOptions, DefaultsNeedOnlyOutAndARendezvous) {
  Result<ProbeOptions> options = parse_probe_options({"--out", "/shared/links.yaml", "--rendezvous", "/shared/tmp"}, "");
  ASSERT_TRUE(options) << options.error().message;
  EXPECT_EQ(options->cache_path, "/shared/links.yaml");
  EXPECT_EQ(options->rendezvous_dir, "/shared/tmp");
  EXPECT_GE(options->message_bytes.size(), 2u);
  EXPECT_TRUE(options->measure_intra_node);
  Result<ProbeOptions> with_comm_id = parse_probe_options({"--out=c.yaml"}, "10.0.0.1:29500");
  ASSERT_TRUE(with_comm_id) << with_comm_id.error().message;
  EXPECT_TRUE(with_comm_id->rendezvous_dir.empty());
}

TEST(ProbeOptions, ParsesEveryOption) {
  Result<ProbeOptions> options = parse_probe_options(
      {"--out", "c.yaml", "--rendezvous=/r", "--sizes", "128M,4K,1MiB,4K", "--warmup", "2", "--iters=7",
       "--no-intra", "--timeout", "60", "--cross-rail", "3"},
      "");
  ASSERT_TRUE(options) << options.error().message;
  EXPECT_EQ(options->message_bytes, (std::vector<double>{4096.0, 1048576.0, 134217728.0}));  // sorted, unique
  EXPECT_EQ(options->warmup_iterations, 2);
  EXPECT_EQ(options->timed_iterations, 7);
  EXPECT_FALSE(options->measure_intra_node);
  EXPECT_EQ(options->timeout_seconds, 60.0);
  EXPECT_EQ(options->cross_rail_rounds, 3);
}

TEST(ProbeOptions, ErrorsNameTheOption) {
  auto message = [](std::vector<std::string> args) {
    Result<ProbeOptions> options = parse_probe_options(args, "");
    return options ? std::string("accepted") : options.error().message;
  };
  EXPECT_NE(message({"--rendezvous", "/r"}).find("--out"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--rendezvous", "/r", "--cross-rail", "-1"}).find("--cross-rail"), std::string::npos);
  EXPECT_NE(message({"--out", "c"}).find("--rendezvous"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--rendezvous", "/r", "--sizes", "1M"}).find("two distinct"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--rendezvous", "/r", "--sizes", "1M,1M"}).find("two distinct"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--rendezvous", "/r", "--sizes", "1M,2T"}).find("unknown unit"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--rendezvous", "/r", "--sizes", "1M,16G"}).find("8 GiB"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--rendezvous", "/r", "--iters", "2"}).find("--iters"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--rendezvous", "/r", "--warmup", "x"}).find("--warmup"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--rendezvous"}).find("needs a value"), std::string::npos);
  EXPECT_NE(message({"--out", "c", "--bogus"}).find("unknown option '--bogus'"), std::string::npos);
}

TEST(ProbeOptions, HelpWinsOverEverythingElse) {
  Result<ProbeOptions> options = parse_probe_options({"--bogus", "--help"}, "");
  EXPECT_FALSE(options);  // options are read left to right: the bad one is reported first
  options = parse_probe_options({"--help", "--bogus"}, "");
  ASSERT_TRUE(options);
  EXPECT_TRUE(options->show_help);
  EXPECT_NE(probe_usage().find("--rendezvous"), std::string::npos);
}

TEST(ByteSize, BinaryUnits) {
  EXPECT_EQ(*parse_byte_size("4096"), 4096.0);
  EXPECT_EQ(*parse_byte_size("8B"), 8.0);
  EXPECT_EQ(*parse_byte_size("64k"), 65536.0);
  EXPECT_EQ(*parse_byte_size("2GiB"), 2147483648.0);
  EXPECT_FALSE(parse_byte_size(""));
  EXPECT_FALSE(parse_byte_size("M"));
  EXPECT_FALSE(parse_byte_size("0"));
  EXPECT_FALSE(parse_byte_size("-4K"));
  EXPECT_FALSE(parse_byte_size("1.5M"));
}

class FakeEnvironment {
 public:
  explicit FakeEnvironment(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  EnvironmentLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto found = values_.find(name);
      return found == values_.end() ? nullptr : found->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> values_;
};

TEST(TaskPlacement, ReadsTheSrunVariables) {
  FakeEnvironment environment({{"SLURM_PROCID", "13"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "5"},
                               {"SLURM_NODEID", "1"}, {"SLURMD_NODENAME", "gpu002"}, {"SLURM_JOB_ID", "4711"},
                               {"SLURM_STEP_ID", "0"}});
  Result<TaskPlacement> placement = task_placement_from_environment(environment.lookup(), "gpu002.cluster.example");
  ASSERT_TRUE(placement) << placement.error().message;
  EXPECT_EQ(placement->rank, 13);
  EXPECT_EQ(placement->world_size, 16);
  EXPECT_EQ(placement->local_rank, 5);
  EXPECT_EQ(placement->node_index, 1);
  EXPECT_EQ(placement->node_name, "gpu002");  // Slurm's name, not the FQDN
  EXPECT_EQ(placement->step_id, "4711.0");
}

TEST(TaskPlacement, OutsideSlurmIsOneTaskNamedByHost) {
  FakeEnvironment environment({});
  Result<TaskPlacement> placement = task_placement_from_environment(environment.lookup(), "workstation");
  ASSERT_TRUE(placement) << placement.error().message;
  EXPECT_EQ(placement->world_size, 1);
  EXPECT_EQ(placement->node_name, "workstation");
  EXPECT_EQ(placement->step_id, "local");
}

TEST(TaskPlacement, RejectsInconsistentVariables) {
  FakeEnvironment partial({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  Result<TaskPlacement> placement = task_placement_from_environment(partial.lookup(), "h");
  ASSERT_FALSE(placement);
  EXPECT_NE(placement.error().message.find("SLURM_LOCALID"), std::string::npos);
  FakeEnvironment out_of_range({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}});
  EXPECT_FALSE(task_placement_from_environment(out_of_range.lookup(), "h"));
  FakeEnvironment garbage({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}});
  EXPECT_FALSE(task_placement_from_environment(garbage.lookup(), "h"));
}

}  // namespace
}  // namespace pipette::probe
