#include "arguments.hpp"

#include <algorithm>
#include <charconv>

namespace pipette::cli {

Result<Arguments> Arguments::parse(const CommandSpec& command, const std::vector<std::string>& words) {
  Arguments arguments;
  arguments.command_name_ = std::string(command.name);
  const std::string prefix = "pipette " + std::string(command.name) + ": ";
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.rfind("--", 0) != 0 || word == "--") {
      arguments.operands_.push_back(word);
      continue;
    }
    const size_t equals = word.find('=');
    const std::string name = word.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const auto spec = std::find_if(command.options.begin(), command.options.end(),
                                   [&](const OptionSpec* option) { return option->name == name; });
    if (spec == command.options.end()) {
      return Error{prefix + "unknown option --" + name + " (see pipette " + std::string(command.name) + " --help)"};
    }
    if (arguments.values_.count(name)) return Error{prefix + "--" + name + " given twice"};
    if ((*spec)->value_name.empty()) {
      if (equals != std::string::npos) return Error{prefix + "--" + name + " takes no value"};
      arguments.values_[name] = "";
    } else if (equals != std::string::npos) {
      arguments.values_[name] = word.substr(equals + 1);
    } else if (i + 1 < words.size()) {
      arguments.values_[name] = words[++i];
    } else {
      return Error{prefix + "--" + name + " needs a value " + std::string((*spec)->value_name)};
    }
  }
  if (!arguments.flag("help")) {
    const bool takes_operands = !command.operands.empty();
    const bool many = command.operands.find("...") != std::string_view::npos;
    if (!takes_operands && !arguments.operands_.empty()) {
      return Error{prefix + "unexpected argument '" + arguments.operands_.front() + "'"};
    }
    const bool optional = takes_operands && command.operands.front() == '[';  // "[FILE...]": none is fine
    if (takes_operands && !optional && arguments.operands_.empty()) {
      return Error{prefix + "missing " + std::string(command.operands)};
    }
    if (takes_operands && !many && arguments.operands_.size() > 1) {
      return Error{prefix + "expects one " + std::string(command.operands) + ", got " +
                   std::to_string(arguments.operands_.size())};
    }
  }
  return arguments;
}

std::optional<std::string> Arguments::value(std::string_view name) const {
  const auto found = values_.find(std::string(name));
  if (found == values_.end()) return std::nullopt;
  return found->second;
}

Result<std::optional<int>> Arguments::positive_integer(std::string_view name) const {
  const auto text = value(name);
  if (!text) return std::optional<int>();
  int parsed = 0;
  const char* end = text->data() + text->size();
  const auto [stop, error] = std::from_chars(text->data(), end, parsed);
  if (error != std::errc() || stop != end || parsed <= 0) {
    return Error{"pipette " + command_name_ + ": --" + std::string(name) + " must be a positive integer, got '" +
                 *text + "'"};
  }
  return std::optional<int>(parsed);
}

}  // namespace pipette::cli
