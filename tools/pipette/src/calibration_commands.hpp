#pragma once
#include <string>

#include "arguments.hpp"
#include "pipette/core/calibration.hpp"
#include "reports.hpp"

namespace pipette::cli {

// `pipette calibrate`: run records in, a fit per framework and GPU reported, the site's
// calibration file updated.
int calibrate_command(const Arguments& arguments);

// The fit's report: factors with their uncertainty or why they were held, residuals per record
// (built-in, calibrated, leave-one-out), medians and the fits/OOM score.
std::string fit_report(const CalibrationFit& fit);

// `pipette explain`'s section: the chosen plan's predictions under the built-in constants and
// under the site calibration side by side, and whether the job lies outside the calibrated range.
std::string calibration_report(const PlanningOutcome& outcome);

}  // namespace pipette::cli
