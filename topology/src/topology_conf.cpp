#include "pipette/topology/topology_conf.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "pipette/topology/hostlist.hpp"

#include "guarded.hpp"

namespace pipette {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

struct SwitchLine {
  std::string name;
  std::vector<std::string> nodes;
  std::vector<std::string> children;
  int line = 0;
};

}  // namespace

Result<SwitchTree> parse_topology_conf(std::string_view text, const std::string& source_name) {
  return guarded("", source_name, [&]() -> Result<SwitchTree> {
    std::vector<SwitchLine> lines;
    std::size_t names_in_file = 0;  // bounded like one hostlist: the file is one description of the fabric
    int line_number = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
      const auto newline = text.find('\n', pos);
      std::string_view line = text.substr(pos, newline == std::string_view::npos ? std::string_view::npos : newline - pos);
      pos = newline == std::string_view::npos ? text.size() : newline + 1;
      ++line_number;
      line = line.substr(0, line.find('#'));
      auto where = [&](const std::string& what) { return Error{source_name + ":" + std::to_string(line_number) + ": " + what}; };
      SwitchLine entry;
      entry.line = line_number;
      std::istringstream tokens{std::string(line)};
      std::string token;
      while (tokens >> token) {
        const auto equals = token.find('=');
        if (equals == std::string::npos || equals == 0)
          return where("expected Key=Value, got \"" + token + "\"");
        const std::string key = lower(token.substr(0, equals));
        const std::string value = token.substr(equals + 1);
        if (key == "switchname") {
          entry.name = value;
        } else if (key == "nodes" || key == "switches") {
          auto names = expand_hostlist(value);
          if (!names) return where(names.error().message);
          names_in_file += names->size();
          if (names_in_file > kMaxExpandedHosts)
            return where("the file names more than " + std::to_string(kMaxExpandedHosts) +
                         " nodes and switches in all; this is not a cluster's topology.conf");
          (key == "nodes" ? entry.nodes : entry.children) = std::move(names).value();
        } else if (key != "linkspeed") {
          return where("unknown key \"" + token.substr(0, equals) +
                       "\"; Pipette reads the topology/tree format (SwitchName, Switches, Nodes, LinkSpeed)");
        }
      }
      if (entry.name.empty() && (entry.nodes.size() + entry.children.size()) > 0)
        return where("a line with Nodes= or Switches= needs SwitchName=");
      if (!entry.name.empty()) lines.push_back(std::move(entry));
    }

    SwitchTree tree;
    std::unordered_map<std::string, int> index;
    for (const auto& entry : lines) {
      if (!index.emplace(entry.name, static_cast<int>(tree.switch_names.size())).second)
        return Error{source_name + ":" + std::to_string(entry.line) + ": switch " + entry.name + " is defined twice"};
      tree.switch_names.push_back(entry.name);
    }
    tree.parent.assign(lines.size(), -1);
    for (std::size_t s = 0; s < lines.size(); ++s) {
      const auto where = source_name + ":" + std::to_string(lines[s].line) + ": ";
      for (const auto& node : lines[s].nodes)
        if (!tree.leaf_of_node.emplace(node, static_cast<int>(s)).second)
          return Error{where + "node " + node + " is under two switches; list it once"};
      for (const auto& child : lines[s].children) {
        const auto found = index.find(child);
        if (found == index.end()) return Error{where + "switch " + child + " is not defined (no SwitchName=" + child + ")"};
        if (tree.parent[found->second] >= 0)
          return Error{where + "switch " + child + " has two parents; a tree needs one"};
        tree.parent[found->second] = static_cast<int>(s);
      }
    }
    // Levels: a switch sits one above its highest child; leaves are 0. Cycles are errors.
    tree.level.assign(lines.size(), 0);
    for (std::size_t s = 0; s < lines.size(); ++s) {
      int level = 0;
      std::size_t steps = 0;
      for (int at = static_cast<int>(s); tree.parent[at] >= 0; at = tree.parent[at]) {
        ++level;
        tree.level[tree.parent[at]] = std::max(tree.level[tree.parent[at]], level);
        if (++steps > lines.size())
          return Error{source_name + ":" + std::to_string(lines[s].line) + ": switch " + lines[s].name + " is in a cycle of Switches="};
      }
    }
    return tree;
  });
}

Result<SwitchTree> load_topology_conf(const std::string& path) {
  std::ifstream file(path);
  if (!file) return Error{path + ": cannot read Slurm's topology.conf (" + std::strerror(errno) +
                          "); fix priors.topology_conf in the site file or set it to \"\""};
  std::ostringstream contents;
  contents << file.rdbuf();
  return parse_topology_conf(contents.str(), path);
}

int common_switch_level(const SwitchTree& tree, const std::string& a, const std::string& b) {
  const auto leaf_a = tree.leaf_of_node.find(a);
  const auto leaf_b = tree.leaf_of_node.find(b);
  if (leaf_a == tree.leaf_of_node.end() || leaf_b == tree.leaf_of_node.end()) return -1;
  for (int up_a = leaf_a->second; up_a >= 0; up_a = tree.parent[up_a])
    for (int up_b = leaf_b->second; up_b >= 0; up_b = tree.parent[up_b])
      if (up_a == up_b) return tree.level[up_a];
  return -1;
}

}  // namespace pipette
