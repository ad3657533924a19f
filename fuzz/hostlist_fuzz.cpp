// Slurm hostlist expressions (SLURM_JOB_NODELIST, --nodes). Beyond not crashing: compressing what
// was expanded and expanding again gives the same hosts in the same order.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipette/topology/hostlist.hpp"
#include "property.hpp"

namespace {

// compress_hostlist promises the round trip for names a hostlist can carry.
bool plain_name(const std::string& name) {
  return !name.empty() && name.find_first_of(",[] \t\r\n") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto hosts = pipette::expand_hostlist(text);
  if (!hosts) {
    pipette::fuzz::require_single_line(hosts.error().message);
    return 0;
  }
  // Expansion up to kMaxExpandedHosts is the parser under test; the round trip on huge lists
  // would only halve the inputs tried per second.
  if (hosts->size() > 4096) return 0;
  for (const auto& name : *hosts)
    if (!plain_name(name)) return 0;
  const std::string compressed = pipette::compress_hostlist(*hosts);
  const auto again = pipette::expand_hostlist(compressed);
  pipette::fuzz::require(again.ok() && *again == *hosts, "expand(compress(hosts)) == hosts",
                         std::string(text) + " -> " + compressed);
  return 0;
}
