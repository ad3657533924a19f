#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "command_table.hpp"
#include "pipette/core/result.hpp"

namespace pipette::cli {

// A command line checked against its CommandSpec: every option is known, values are present,
// nothing repeats.
class Arguments {
 public:
  static Result<Arguments> parse(const CommandSpec& command, const std::vector<std::string>& words);

  bool flag(std::string_view name) const { return values_.count(std::string(name)) > 0; }
  std::optional<std::string> value(std::string_view name) const;
  // A positive integer option; an Error naming the option when it is not one.
  Result<std::optional<int>> positive_integer(std::string_view name) const;
  const std::vector<std::string>& operands() const { return operands_; }

 private:
  std::string command_name_;
  std::map<std::string, std::string> values_;  // flags map to ""
  std::vector<std::string> operands_;
};

}  // namespace pipette::cli
