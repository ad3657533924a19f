// The plugin's option layer (spank/src/options.hpp, plugin_config.hpp), all that runs on what a
// user types after --pipette* or puts in PIPETTE_*, and on plugstack.conf's arguments. The input is
// split at NUL bytes into values. Beyond not crashing: a value is accepted or refused with a
// message; its canonical form is accepted again as itself (option callbacks may run twice and
// srun forwards canonical values to steps); recording one value twice is no conflict; merging
// accepted values never throws.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "plugin_config.hpp"
#include "property.hpp"

namespace spank = pipette::spank;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> pieces;
  for (std::size_t start = 0;;) {
    const std::size_t end = input.find('\0', start);
    pieces.emplace_back(input.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }

  spank::OptionValues command_line;
  spank::OptionRecorder recorder;
  for (const spank::OptionInfo& option : spank::option_table()) {
    const std::string& value = pieces[static_cast<std::size_t>(option.id) % pieces.size()];
    const spank::Parsed parsed = spank::parse_option_value(option.id, value, option.env_var);
    if (!parsed.error.empty()) {
      pipette::fuzz::require_single_line(parsed.error);
      pipette::fuzz::require(!recorder.record(option.id, value, option.env_var).empty(), "the recorder refuses what the parser refuses");
      continue;
    }
    const spank::Parsed again = spank::parse_option_value(option.id, parsed.canonical, option.name);
    pipette::fuzz::require(again.error.empty() && again.canonical == parsed.canonical, "a canonical value parses to itself",
                           value + " -> " + parsed.canonical);
    pipette::fuzz::require(recorder.record(option.id, value, option.name).empty(), "recording a valid value works", value);
    pipette::fuzz::require(recorder.record(option.id, value, option.name).empty(), "recording it twice is no conflict", value);
    command_line[option.id] = parsed.canonical;
  }

  std::string environment_error;
  const spank::OptionValues environment = spank::read_environment(
      [&](const char* name) -> std::optional<std::string> {
        return pieces[std::string_view(name).size() % pieces.size()];
      },
      environment_error);
  spank::find_conflict(command_line, environment);
  spank::merge(command_line, environment, spank::SiteDefaults{});

  std::vector<const char*> argv;
  for (const std::string& piece : pieces) argv.push_back(piece.c_str());
  const spank::ParsedPluginConfig config = spank::parse_plugin_args(static_cast<int>(argv.size()), argv.data());
  if (!config.error.empty()) pipette::fuzz::require_one_line(config.error, input);
  return 0;
}
