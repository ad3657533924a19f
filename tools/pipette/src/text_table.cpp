#include "text_table.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "pipette/core/units.hpp"

namespace pipette::cli {

namespace {

// Display width: UTF-8 continuation bytes take no column.
size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

std::string TextTable::render(const std::string& indent) const {
  std::vector<size_t> widths;
  for (const auto& column : columns_) widths.push_back(display_width(column.header));
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out = indent;
    for (size_t i = 0; i < columns_.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      const std::string padding(widths[i] - display_width(cell), ' ');
      if (i > 0) out += "  ";
      const bool last = i + 1 == columns_.size();
      out += columns_[i].align == Align::right ? padding + cell : cell + (last ? "" : padding);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> headers;
  for (const auto& column : columns_) headers.push_back(column.header);
  std::string out = line(headers);
  for (const auto& row : rows_) out += line(row);
  return out;
}

std::string strprintf(const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  char buffer[512];
  std::vsnprintf(buffer, sizeof buffer, format, arguments);
  va_end(arguments);
  return buffer;
}

std::string human_seconds(double seconds) {
  if (seconds >= 1) return strprintf("%.3f s", seconds);
  if (seconds >= units::millisecond) return strprintf("%.1f ms", seconds / units::millisecond);
  return strprintf("%.1f µs", seconds / units::microsecond);
}

std::string human_gibibytes(double bytes) { return strprintf("%.1f GiB", bytes / units::gibibyte); }

}  // namespace pipette::cli
