// Slurm's topology.conf, named by the site file's priors.topology_conf and read at every job start.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipette/topology/topology_conf.hpp"
#include "property.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto tree = pipette::parse_topology_conf(text, "topology.conf");
  if (!tree) {
    pipette::fuzz::require_one_line(tree.error().message, text);
    return 0;
  }
  for (const auto& [node, leaf] : tree->leaf_of_node) pipette::common_switch_level(*tree, node, node);
  return 0;
}
