// --pipette-fix / PIPETTE_FIX / the site file's defaults.fixed. Beyond not crashing: an accepted
// value formats back to text that parses to the same knobs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipette/topology/job_planner.hpp"
#include "property.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto knobs = pipette::parse_fixed_knobs(text);
  if (!knobs) {
    pipette::fuzz::require_single_line(knobs.error().message);
    return 0;
  }
  const std::string formatted = pipette::format_fixed_knobs(*knobs);
  const auto again = pipette::parse_fixed_knobs(formatted);
  pipette::fuzz::require(again.ok() && pipette::format_fixed_knobs(*again) == formatted,
                         "parse(format(knobs)) == knobs", std::string(text) + " -> " + formatted);
  return 0;
}
