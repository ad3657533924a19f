#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace pipette {

// One-line, user-facing error: names the file or field and says what would fix it.
struct Error {
  std::string message;
};

// User input quoted inside an Error message: at most 200 bytes (then "…") and control characters
// shown as '?', so that one hostile value can neither make a megabyte line in slurmd's log nor
// forge a line of its own there.
inline std::string quoted_input(std::string_view text) {
  constexpr std::size_t kMaxBytes = 200;
  std::string out(text.substr(0, kMaxBytes));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (text.size() > kMaxBytes) out += "…";
  return out;
}

// A value or an Error (C++20 has no std::expected). Errors never throw across the core's API.
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}
  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<T>(state_); }
  T& value() & { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const Error& error() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

}  // namespace pipette
