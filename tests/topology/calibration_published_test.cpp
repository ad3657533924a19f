// The developer-visible check of issue 16: calibrate on alternate DGX-H100 pre-training rows of
// ../shared/ground_truth_data/nvidia_nemo_megatron_bridge_perf_summary.csv (NVIDIA-NeMo /
// Megatron-Bridge docs/performance-summary.md), predict the other rows. The figures are in
// bench/RESULTS.md, "Calibration" (build/bench/calibrate/calibrate_check prints them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "pipette/topology/site_config.hpp"

#include "../../bench/calibrate/published_runs.hpp"

namespace pipette {
namespace {

double median_error(const std::vector<RunRecord>& records, const Calibration& calibration) {
  std::vector<double> errors;
  for (const RunRecord& record : records)
    errors.push_back(std::abs(predict_record(record, CalibrationBase{}, calibration).iteration_seconds / *record.iteration_seconds - 1));
  std::sort(errors.begin(), errors.end());
  return errors.size() % 2 ? errors[errors.size() / 2] : 0.5 * (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]);
}

TEST(CalibrationOnPublishedRuns, HalfTheNemoTablePredictsTheOtherHalfBetter) {
  // The bundled example cluster's priors: DGX H100 nodes, 8 NDR rails.
  auto site = load_site_config(PIPETTE_SOURCE_DIR "/etc/example-cluster/site.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  const std::string table = PIPETTE_SHARED_DIR "/ground_truth_data/nvidia_nemo_megatron_bridge_perf_summary.csv";
  const PublishedSplit split = nemo_dgx_h100_split(table, *site);
  ASSERT_GE(split.fit.size(), 6u) << "DGX-H100 pre-training rows read from " << table;
  ASSERT_GE(split.held_out.size(), 6u);
  auto fit = fit_calibration(split.fit, CalibrationBase{});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  const double before = median_error(split.held_out, Calibration{});
  const double after = median_error(split.held_out, fit->calibration);
  EXPECT_LT(after, 0.7 * before) << "built-in " << before << ", calibrated " << after;
  EXPECT_LT(after, 0.15);
}

}  // namespace
}  // namespace pipette
