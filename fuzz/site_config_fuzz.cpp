// The site file (/etc/slurm/pipette.yaml): parse_site_config is what load_site_config runs on the
// file's contents.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipette/topology/site_config.hpp"
#include "property.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto site = pipette::parse_site_config(text, "fuzz.yaml");
  if (!site) {
    pipette::fuzz::require_one_line(site.error().message, text);
    return 0;
  }
  // What the planner does next with a site file it accepted.
  pipette::find_site_gpu(*site, site->gpu);
  return 0;
}
