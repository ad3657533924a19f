#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace pipette::cli {

// A streaming JSON writer: keys and commas are placed by nesting state, so output is always
// well-formed when begin/end calls pair up. Numbers print with 9 significant digits; NaN and
// infinities (never produced by a sane plan) print as null.
class JsonWriter {
 public:
  explicit JsonWriter(bool pretty = true) : pretty_(pretty) {}

  JsonWriter& begin_object(std::string_view key = {});
  JsonWriter& end_object();
  JsonWriter& begin_array(std::string_view key = {});
  JsonWriter& end_array();
  JsonWriter& value(std::string_view key, std::string_view text);
  JsonWriter& value(std::string_view key, const char* text) { return value(key, std::string_view(text)); }
  JsonWriter& value(std::string_view key, double number);
  JsonWriter& value(std::string_view key, int number) { return value(key, static_cast<long long>(number)); }
  JsonWriter& value(std::string_view key, long long number);
  JsonWriter& value(std::string_view key, bool flag);
  JsonWriter& null(std::string_view key);
  // Array elements.
  JsonWriter& element(std::string_view text) { return value({}, text); }
  JsonWriter& element(double number) { return value({}, number); }
  JsonWriter& element(int number) { return value({}, number); }

  const std::string& str() const { return out_; }

 private:
  void prefix(std::string_view key);
  void newline();

  bool pretty_;
  std::string out_;
  std::vector<bool> first_in_scope_{true};
};

std::string json_quote(std::string_view text);

}  // namespace pipette::cli
