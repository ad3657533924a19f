#include "json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace pipette::cli {

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void JsonWriter::newline() {
  if (!pretty_) return;
  out_ += '\n';
  out_.append(2 * (first_in_scope_.size() - 1), ' ');
}

void JsonWriter::prefix(std::string_view key) {
  if (!first_in_scope_.back()) out_ += ',';
  if (first_in_scope_.size() > 1) newline();
  first_in_scope_.back() = false;
  if (!key.empty()) out_ += json_quote(key) + (pretty_ ? ": " : ":");
}

JsonWriter& JsonWriter::begin_object(std::string_view key) {
  prefix(key);
  out_ += '{';
  first_in_scope_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  const bool empty = first_in_scope_.back();
  first_in_scope_.pop_back();
  if (!empty) newline();
  out_ += '}';
  if (first_in_scope_.size() == 1 && pretty_) out_ += '\n';
  return *this;
}

JsonWriter& JsonWriter::begin_array(std::string_view key) {
  prefix(key);
  out_ += '[';
  first_in_scope_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  const bool empty = first_in_scope_.back();
  first_in_scope_.pop_back();
  if (!empty) newline();
  out_ += ']';
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view key, std::string_view text) {
  prefix(key);
  out_ += json_quote(text);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view key, double number) {
  prefix(key);
  if (!std::isfinite(number)) {
    out_ += "null";
    return *this;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", number);
  out_ += buffer;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view key, long long number) {
  prefix(key);
  out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view key, bool flag) {
  prefix(key);
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null(std::string_view key) {
  prefix(key);
  out_ += "null";
  return *this;
}

}  // namespace pipette::cli
