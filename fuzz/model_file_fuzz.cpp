// A user's model file (--pipette-model=FILE): parse_model_file is what load_model_file runs on the
// file's contents.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipette/core/model.hpp"
#include "pipette/topology/model_file.hpp"
#include "property.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto model = pipette::parse_model_file(text, "fuzz.yaml");
  if (!model) {
    pipette::fuzz::require_one_line(model.error().message, text);
    return 0;
  }
  pipette::fuzz::require(pipette::validate(*model).empty(), "an accepted model passes validate()");
  return 0;
}
