// --pipette-fix / PIPETTE_FIX / the site file's defaults.fixed, and --engine / --pipette-engine in
// the same grammar. Beyond not crashing: an accepted value formats back to text that parses to the
// same knobs (the same switches).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipette/topology/job_planner.hpp"
#include "property.hpp"

namespace {

// A plan record keeps the engine's switches as format_engine_overrides writes them.
void check_engine(std::string_view text) {
  const auto engine = pipette::parse_engine_overrides(text);
  if (!engine) {
    pipette::fuzz::require_single_line(engine.error().message);
    return;
  }
  const std::string formatted = pipette::format_engine_overrides(*engine);
  const auto again = pipette::parse_engine_overrides(formatted);
  pipette::fuzz::require(again.ok() && *again == *engine, "parse(format(engine)) == engine",
                         std::string(text) + " -> " + formatted);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_engine(text);
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
