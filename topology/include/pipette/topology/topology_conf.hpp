#pragma once
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pipette/core/result.hpp"

namespace pipette {

// Slurm's topology.conf switch tree (TopologyPlugin=topology/tree): lines
//   SwitchName=s0 Nodes=gpu[01-16] [LinkSpeed=...]
//   SwitchName=spine Switches=s[0-3]
// Leaf switches (with Nodes=) are level 0; a switch is one level above its highest child. Two
// nodes on one leaf meet at level 0; nodes under different leaves meet at their lowest common
// ancestor's level. Other keys (LinkSpeed) are accepted and ignored; unknown keys are errors.
struct SwitchTree {
  std::vector<std::string> switch_names;
  std::vector<int> parent;  // -1 for roots
  std::vector<int> level;
  std::unordered_map<std::string, int> leaf_of_node;
};

Result<SwitchTree> parse_topology_conf(std::string_view text, const std::string& source_name);
Result<SwitchTree> load_topology_conf(const std::string& path);

// Level of the lowest switch above both nodes; -1 when either node is not in the tree or the two
// have no common switch.
int common_switch_level(const SwitchTree& tree, const std::string& a, const std::string& b);

}  // namespace pipette
