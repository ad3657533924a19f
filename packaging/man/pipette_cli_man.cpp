// Writes pipette(1) from the CLI's command table, the data its --help is printed from.
#include <string>

#include "command_table.hpp"
#include "pipette/topology/version.hpp"
#include "troff.hpp"

namespace {

using pipette::man::escape;
using pipette::man::literal;

std::string synopsis() {
  std::string out;
  for (const pipette::cli::CommandSpec& command : pipette::cli::commands()) {
    out += ".br\n\\fBpipette " + literal(command.name) + "\\fR [\\fIoptions\\fR]";
    if (!command.operands.empty()) out += " \\fI" + literal(command.operands) + "\\fR";
    out += "\n";
  }
  return out;
}

std::string commands_section() {
  std::string out;
  for (const pipette::cli::CommandSpec& command : pipette::cli::commands()) {
    out += ".SS \"pipette " + literal(command.name) + (command.operands.empty() ? "" : ' ' + literal(command.operands)) +
           "\"\n" + escape(command.description.empty() ? command.summary : command.description) + "\n";
    for (const pipette::cli::OptionSpec* option : command.options) {
      out += ".TP\n\\fB" + literal(std::string("--") + std::string(option->name)) + "\\fR";
      if (!option->value_name.empty()) out += " \\fI" + literal(option->value_name) + "\\fR";
      out += '\n' + escape(option->help);
      if (!option->default_value.empty()) out += " (default: " + escape(option->default_value) + ")";
      out += "\n";
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  return pipette::man::generate(argc, argv,
                                {{"VERSION", pipette::version()}, {"SYNOPSIS", synopsis()}, {"COMMANDS", commands_section()}});
}
