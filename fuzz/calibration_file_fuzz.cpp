// The calibration file the plugin reads at every job start (site file calibration.file).
// Beyond not crashing and one-line errors: whatever the reader accepts, the writer writes back in
// a form the reader accepts again with the same entries and values (update_calibration_file
// relies on it to merge).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipette/topology/calibration_file.hpp"
#include "property.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto file = pipette::parse_calibration_file(text, "fuzz.yaml");
  if (!file) {
    pipette::fuzz::require_one_line(file.error().message, text);
    return 0;
  }
  const std::string written = pipette::format_calibration_file(*file);
  const auto reread = pipette::parse_calibration_file(written, "rewritten.yaml");
  pipette::fuzz::require(reread.ok(), "format_calibration_file output parses again",
                         reread ? std::string_view() : std::string_view(reread.error().message));
  pipette::fuzz::require(reread->entries.size() == file->entries.size(), "a rewritten file keeps every entry", written);
  pipette::fuzz::require(pipette::format_calibration_file(*reread) == written, "writing is a fixed point", written);
  return 0;
}
