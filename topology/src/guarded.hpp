#pragma once
// Internal: the library's public functions return Result and never throw. Standard-library and
// yaml-cpp failures (out of memory, a length error on hostile input) become an Error naming
// what was being read.
#include <exception>
#include <new>
#include <string>

#include "pipette/core/result.hpp"

namespace pipette {

template <typename Body>
auto guarded(const char* what, const std::string& subject, Body&& body) noexcept -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Error{std::string(what) + subject + ": out of memory"};
  } catch (const std::exception& error) {
    return Error{std::string(what) + subject + ": " + error.what()};
  }
}

}  // namespace pipette
