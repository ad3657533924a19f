#include "pipette/topology/hostlist.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

namespace pipette {
namespace {

using Hosts = std::vector<std::string>;

Hosts expand_ok(std::string_view expression) {
  auto hosts = expand_hostlist(expression);
  EXPECT_TRUE(hosts.ok()) << (hosts.ok() ? "" : hosts.error().message);
  return hosts.ok() ? *hosts : Hosts{};
}

TEST(Hostlist, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(expand_ok("gpu[01-03,7]"), (Hosts{"gpu01", "gpu02", "gpu03", "gpu7"}));
  EXPECT_EQ(expand_ok("rack[1-2]-n[1-2]"), (Hosts{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(expand_ok("n[008-11]"), (Hosts{"n008", "n009", "n010", "n011"}));
  EXPECT_EQ(expand_ok("n[1-03]"), (Hosts{"n1", "n2", "n3"}));
  EXPECT_EQ(expand_ok("n[1-2][3-4]"), (Hosts{"n13", "n14", "n23", "n24"}));
  EXPECT_EQ(expand_ok("a,b c\td"), (Hosts{"a", "b", "c", "d"}));
  EXPECT_EQ(expand_ok(",n1,,n2,"), (Hosts{"n1", "n2"}));
  EXPECT_EQ(expand_ok("n[1-3],n2"), (Hosts{"n1", "n2", "n3", "n2"}));
  EXPECT_EQ(expand_ok("[1-2]"), (Hosts{"1", "2"}));
  EXPECT_EQ(expand_ok(""), Hosts{});
}

TEST(Hostlist, RejectsMalformedExpressionsWithTheReason) {
  for (const char* bad : {"n[3-1]", "n[a-b]", "n[]", "n[1,,2]", "n[1-2", "n1]", "n[1-2]]", "a[[1]]", "n[-1]",
                          "n[1-100000]", "n[0x1-2]", "a[0-65535]b[0-65535]"}) {
    auto hosts = expand_hostlist(bad);
    ASSERT_FALSE(hosts.ok()) << bad;
    EXPECT_NE(hosts.error().message.find(bad), std::string::npos) << hosts.error().message;
    EXPECT_EQ(hosts.error().message.find('\n'), std::string::npos);
  }
  EXPECT_NE(expand_hostlist("n[3-1]").error().message.find("backwards"), std::string::npos);
  EXPECT_NE(expand_hostlist("n[1-100000]").error().message.find("65536"), std::string::npos);
}

TEST(Hostlist, CompressesLikeSlurm) {
  EXPECT_EQ(compress_hostlist({"gpu01", "gpu02", "gpu03", "gpu7", "a1", "a2", "b"}), "gpu[01-03,7],a[1-2],b");
  EXPECT_EQ(compress_hostlist({"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}), "rack1-n[1-2],rack2-n[1-2]");
  EXPECT_EQ(compress_hostlist({"n3", "n1", "n2"}), "n[3,1-2]");
  EXPECT_EQ(compress_hostlist({"n1", "n1", "n2"}), "n[1,1-2]");
  EXPECT_EQ(compress_hostlist({"n9", "n10", "n11"}), "n[9-11]");
  EXPECT_EQ(compress_hostlist({"n007", "n8", "n9"}), "n[007,8-9]");
  EXPECT_EQ(compress_hostlist({"n01", "n2"}), "n[01,2]");
  EXPECT_EQ(compress_hostlist({"n0", "n00", "n000"}), "n[0,00,000]");
  EXPECT_EQ(compress_hostlist({"gpu1", "cpu1", "gpu2"}), "gpu1,cpu1,gpu2");
  EXPECT_EQ(compress_hostlist({"1", "2", "3"}), "[1-3]");
  EXPECT_EQ(compress_hostlist({"n5"}), "n5");
  EXPECT_EQ(compress_hostlist({}), "");
}

// Runs scontrol with a minimal private slurm.conf: `show hostnames` and `show hostlist` only
// parse, they never contact a controller, but scontrol refuses to start without a config source.
class ScontrolOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() / ("pipette-hostlist-oracle-" + std::to_string(getpid()));
    std::filesystem::create_directories(directory_);
    std::ofstream(directory_ / "slurm.conf") << "ClusterName=oracle\nSlurmctldHost=localhost\n"
                                                "NodeName=localhost CPUs=1 State=UNKNOWN\n"
                                                "PartitionName=p Nodes=localhost Default=YES\n";
    auto probe = run("hostnames", "n[1-2]");
    if (!probe || *probe != "n1\nn2\n")
      GTEST_SKIP() << "scontrol (slurm-client) is not usable here, so the Slurm oracle is skipped; "
                      "the literal expectations in CompressesLikeSlurm still run";
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::optional<std::string> run(const char* subcommand, const std::string& argument) const {
    const std::filesystem::path input = directory_ / "argument";
    std::ofstream(input) << argument;
    const std::string command = "SLURM_CONF='" + (directory_ / "slurm.conf").string() + "' scontrol show " +
                                subcommand + " \"$(cat '" + input.string() + "')\" 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return std::nullopt;
    std::string output;
    char buffer[4096];
    while (const size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    const int status = pclose(pipe);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    return output;
  }

  std::filesystem::path directory_;
};

std::string joined_lines(const Hosts& hosts) {
  std::string out;
  for (const auto& host : hosts) out += host + "\n";
  return out;
}

TEST_F(ScontrolOracle, ExpansionMatchesScontrolShowHostnames) {
  for (const char* expression :
       {"gpu[01-03,7]", "rack[1-2]-n[1-2]", "n[008-11]", "n[1-03]", "n[01-3]", "n[1-2][3-4]", "a[1,2]-b[3-4]",
        "n[1-2]-x[01-02],y", "n1 n2", "n,", "[1-2]", "n[1-3],n2", "node[0001-0100],login1"}) {
    auto expected = run("hostnames", expression);
    ASSERT_TRUE(expected) << expression;
    EXPECT_EQ(joined_lines(expand_ok(expression)), *expected) << expression;
  }
}

TEST_F(ScontrolOracle, CompressionMatchesScontrolShowHostlist) {
  std::vector<Hosts> cases = {
      {"gpu01", "gpu02", "gpu03", "gpu7", "a1", "a2", "b"}, {"n1", "n2", "n10", "n11", "n01"},
      {"n010", "n011", "n9"}, {"n09", "n10"}, {"n0", "n00", "n000"}, {"a1b", "a2b"}, {"x", "y", "x"},
      {"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}, {"1", "2", "3"}, {"n99999999999", "n100000000000"}};
  // Random lists mixing prefixes, padding, order and duplicates.
  std::mt19937 random(7);
  for (int trial = 0; trial < 40; ++trial) {
    Hosts hosts;
    const int count = 1 + static_cast<int>(random() % 12);
    for (int i = 0; i < count; ++i) {
      const char* prefixes[] = {"n", "gpu", "r1-n", "m"};
      std::string number = std::to_string(random() % 14);
      if (random() % 3 == 0) number.insert(0, random() % 2 + 1, '0');
      hosts.push_back(prefixes[random() % 4] + number);
    }
    cases.push_back(hosts);
  }
  for (const auto& hosts : cases) {
    std::string list;
    for (const auto& host : hosts) list += (list.empty() ? "" : ",") + host;
    auto expected = run("hostlist", list);
    ASSERT_TRUE(expected) << list;
    EXPECT_EQ(compress_hostlist(hosts) + "\n", *expected) << list;
    EXPECT_EQ(expand_ok(compress_hostlist(hosts)), hosts) << list;
  }
}

TEST(Hostlist, HundredThousandNodesRoundTrip) {
  Hosts hosts;
  for (int rack = 0; rack < 100; ++rack)
    for (int node = 1; node <= 1000; ++node) hosts.push_back('r' + std::to_string(rack) + 'n' + std::to_string(node));
  const std::string compressed = compress_hostlist(hosts);
  EXPECT_LT(compressed.size(), 1500u);
  auto expanded = expand_hostlist(compressed);
  ASSERT_TRUE(expanded.ok());
  EXPECT_EQ(*expanded, hosts);

  std::string flat;
  for (const auto& host : hosts) flat += host + ",";
  auto from_flat = expand_hostlist(flat);
  ASSERT_TRUE(from_flat.ok());
  EXPECT_EQ(from_flat->size(), 100000u);
  EXPECT_EQ(compress_hostlist(*from_flat), compressed);
}

}  // namespace
}  // namespace pipette
