#pragma once
// A property a fuzz target checks beyond "does not crash": a violation aborts, so libFuzzer saves
// the input as a crash like any sanitizer report.
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace pipette::fuzz {

inline void require(bool holds, std::string_view property, std::string_view detail = {}) {
  if (holds) return;
  std::fprintf(stderr, "fuzz property violated: %.*s\n%.*s\n", static_cast<int>(property.size()), property.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// Every error the loaders return is one line for slurm_error and the job's stderr. Messages quote
// the offending input, and YAML turns escapes (\n) and some control bytes into line breaks, so
// only input of printable characters without backslashes promises a message without line breaks.
inline void require_one_line(std::string_view message, std::string_view input) {
  require(!message.empty(), "an error has a message");
  for (const char c : input) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == '\\') return;
  }
  require(message.find_first_of("\r\n") == std::string_view::npos, "an error is one line", message);
}

// For values users type (options, PIPETTE_* variables, --pipette-fix, node lists): the message is
// one line whatever the input holds, because they quote it through quoted_input().
inline void require_single_line(std::string_view message) {
  require(!message.empty(), "an error has a message");
  require(message.find_first_of("\r\n") == std::string_view::npos, "an error quoting user input is one line", message);
}

}  // namespace pipette::fuzz
