#pragma once
// Every subcommand, option and help line of `pipette`, as data: the argument parser, `--help` and
// any later man-page or shell-completion generator read this one table.
#include <span>
#include <string>
#include <string_view>

namespace pipette::cli {

struct OptionSpec {
  std::string_view name;           // without the leading "--"
  std::string_view value_name;     // empty for a flag
  std::string_view help;
  std::string_view default_value;  // shown in help; empty when none
};

struct CommandSpec {
  std::string_view name;           // "plan", "links show", ...
  std::string_view operands;       // positional operands in the synopsis, e.g. "FILE"
  std::string_view summary;        // one line for `pipette --help`
  std::string_view description;    // paragraph for `pipette NAME --help`
  std::span<const OptionSpec* const> options;
};

std::span<const CommandSpec> commands();
const CommandSpec* find_command(std::string_view name);

// `pipette --help` and `pipette NAME --help`.
std::string program_help();
std::string command_help(const CommandSpec& command);

}  // namespace pipette::cli
