#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/calibration.hpp"
#include "pipette/core/result.hpp"

namespace pipette {

// The calibration file (site file `calibration.file`), written by `pipette calibrate`:
//
//   pipette_calibration: 1
//   entries:
//     - {framework: megatron-core, gpu: H100-SXM, fitted_at: 2026-12-02T13:00:00Z, records: 12,
//        min_parameters: 8.03e9, max_parameters: 7.06e10, min_nodes: 1, max_nodes: 8,
//        gemm_fp8_efficiency_factor: 1.07, gemm_fp8_efficiency_factor_uncertainty: 0.02, ...}
//
// One entry per line and per (framework, GPU). Strict: an unknown key, a value outside its
// parameter's physical bounds or a duplicate entry is "FILE:LINE: what is wrong".
inline constexpr int kCalibrationFormatVersion = 1;

struct CalibrationEntry {
  CalibrationRange range;                    // framework, GPU and the jobs it has seen
  std::int64_t fitted_at_unix_seconds = 0;
  Calibration calibration;
  std::map<std::string, double> uncertainty; // by parameter name, fitted parameters only
};

struct CalibrationFile {
  std::vector<CalibrationEntry> entries;    // sorted by (framework, GPU)
};

Result<CalibrationFile> parse_calibration_file(std::string_view text, const std::string& source_name);
Result<CalibrationFile> read_calibration_file(const std::string& path);
std::string format_calibration_file(const CalibrationFile& file);

// The entry for a framework and GPU (GPU case-insensitive), nullptr when there is none.
const CalibrationEntry* find_calibration(const CalibrationFile& file, std::string_view framework, std::string_view gpu);

// Reads the file at `path` if it exists (a damaged one is never overwritten: the error says so),
// replaces the entry of `incoming`'s framework and GPU when `incoming` is newer, and writes the
// result atomically under an flock on `path` + ".lock". Returns the file as written.
Result<CalibrationFile> update_calibration_file(const std::string& path, const CalibrationEntry& incoming);

CalibrationEntry calibration_entry_of(const CalibrationFit& fit, std::int64_t fitted_at_unix_seconds);

}  // namespace pipette
