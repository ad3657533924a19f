#pragma once
#include <string>
#include <vector>

namespace pipette::cli {

// A plain-text table whose columns line up: text columns left-aligned, numeric ones right-aligned.
class TextTable {
 public:
  enum class Align { left, right };
  struct Column {
    std::string header;
    Align align = Align::right;
  };

  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string render(const std::string& indent = "") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// printf into a std::string.
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "1.23 s", "456.7 ms", "89.0 µs": seconds in the unit a person reads fastest.
std::string human_seconds(double seconds);
// "76.3 GiB"
std::string human_gibibytes(double bytes);

}  // namespace pipette::cli
