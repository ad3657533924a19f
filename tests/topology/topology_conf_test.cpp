#include "pipette/topology/topology_conf.hpp"

#include <gtest/gtest.h>

namespace pipette {
namespace {

// The example from Slurm's topology.conf(5), plus a spine.
constexpr const char* kTree =
    "# leaf switches\n"
    "SwitchName=s0 Nodes=dev[0-5]\n"
    "SwitchName=s1 Nodes=dev[6-11] LinkSpeed=100\n"
    "SwitchName=s2 Nodes=dev[12-17]\n"
    "SwitchName=s3 Switches=s[0-2]\n"
    "switchname=s4 nodes=dev[18-19]\n"
    "SwitchName=spine Switches=s[3-4]\n";

TEST(TopologyConf, LevelsAndCommonSwitches) {
  auto tree = parse_topology_conf(kTree, "topology.conf");
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  EXPECT_EQ(tree->switch_names.size(), 6u);
  EXPECT_EQ(common_switch_level(*tree, "dev0", "dev5"), 0);
  EXPECT_EQ(common_switch_level(*tree, "dev0", "dev6"), 1);
  EXPECT_EQ(common_switch_level(*tree, "dev0", "dev18"), 2);
  EXPECT_EQ(common_switch_level(*tree, "dev18", "dev19"), 0);
  EXPECT_EQ(common_switch_level(*tree, "dev0", "elsewhere"), -1);
}

TEST(TopologyConf, DisconnectedTreesHaveNoCommonSwitch) {
  auto tree = parse_topology_conf("SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[3-4]\n", "t.conf");
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(common_switch_level(*tree, "n1", "n3"), -1);
}

TEST(TopologyConf, ErrorsNameTheLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", "t.conf:2: switch a is defined twice"},
      {"SwitchName=a Nodes=n1\nSwitchName=b Nodes=n1\n", "t.conf:2: node n1 is under two switches"},
      {"SwitchName=top Switches=missing\n", "t.conf:1: switch missing is not defined"},
      {"SwitchName=a Nodes=n[3-1]\n", "t.conf:1: hostlist"},
      {"SwitchName=a Bandwidth=5\n", "t.conf:1: unknown key \"Bandwidth\""},
      {"Nodes=n1\n", "t.conf:1: a line with Nodes= or Switches= needs SwitchName="},
      {"SwitchName=a Switches=b\nSwitchName=b Switches=a\n", "in a cycle"},
      {"SwitchName a\n", "expected Key=Value"},
  };
  for (const auto& [text, expected] : cases) {
    auto tree = parse_topology_conf(text, "t.conf");
    ASSERT_FALSE(tree.ok()) << text;
    EXPECT_NE(tree.error().message.find(expected), std::string::npos) << tree.error().message;
  }
}

}  // namespace
}  // namespace pipette
