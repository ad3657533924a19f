// The developer-visible check of issue 16: calibrate on alternate DGX-H100 pre-training rows of
// ../shared/ground_truth_data/nvidia_nemo_megatron_bridge_perf_summary.csv (NVIDIA-NeMo /
// Megatron-Bridge docs/performance-summary.md), predict the other rows. The figures are in
// bench/RESULTS.md, "Calibration" (build/bench/calibrate/calibrate_check prints them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <unistd.h>

#include "pipette/topology/site_config.hpp"

#include "../../bench/calibrate/published_runs.hpp"

namespace pipette {
namespace {

// The median over `records` that measured `measured` of |predicted / measured - 1|.
double median_error(const std::vector<RunRecord>& records, const Calibration& calibration,
                    std::optional<double> RunRecord::*measured = &RunRecord::iteration_seconds,
                    double RecordPrediction::*predicted = &RecordPrediction::iteration_seconds) {
  std::vector<double> errors;
  for (const RunRecord& record : records) {
    if (!(record.*measured)) continue;
    errors.push_back(std::abs(predict_record(record, CalibrationBase{}, calibration).*predicted / *(record.*measured) - 1));
  }
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

// The stack the constants were not fitted on: BigScience's A100 Megatron-DeepSpeed prototypes,
// built-in about a fifth too fast; a calibration on half of them predicts the other half.
TEST(CalibrationOnPublishedRuns, HalfTheBigsciencePrototypesPredictTheOtherHalfBetter) {
  auto site = load_site_config(PIPETTE_SOURCE_DIR "/bench/calibrate/data/jean-zay-a100-site.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  const std::string work_dir = ::testing::TempDir() + "pipette-bigscience-prototypes-" + std::to_string(::getpid());
  const PublishedSplit split = bigscience_prototype_split(
      PIPETTE_SOURCE_DIR "/bench/fidelity/data/bigscience_a100_megatron_deepspeed_prototypes.csv",
      PIPETTE_SOURCE_DIR "/etc/models/bloom-176b.yaml", *site, work_dir);
  std::filesystem::remove_all(work_dir);
  EXPECT_TRUE(split.skipped.empty()) << split.skipped.front();
  ASSERT_GE(split.fit.size(), 16u);
  ASSERT_GE(split.held_out.size(), 16u);
  EXPECT_EQ(split.fit.front().framework, "megatron-deepspeed");
  EXPECT_FALSE(split.fit.front().training.gradients_in_fp32);  // fp16 under DeepSpeed
  auto fit = fit_calibration(split.fit, CalibrationBase{});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  const double before = median_error(split.held_out, Calibration{});
  const double after = median_error(split.held_out, fit->calibration);
  EXPECT_GT(before, 0.15);
  EXPECT_LT(after, 0.5 * before) << "built-in " << before << ", calibrated " << after;
  EXPECT_LT(after, 0.12);
  // Their nvidia-smi memory, the whole GPU: within a few percent before and after.
  ASSERT_GE(std::count_if(split.held_out.begin(), split.held_out.end(),
                          [](const RunRecord& record) { return record.peak_device_bytes.has_value(); }),
            15);
  const auto memory_error = [&](const Calibration& calibration) {
    return median_error(split.held_out, calibration, &RunRecord::peak_device_bytes, &RecordPrediction::peak_device_bytes);
  };
  EXPECT_LT(memory_error(Calibration{}), 0.06);
  EXPECT_LE(memory_error(fit->calibration), memory_error(Calibration{}));
}

}  // namespace
}  // namespace pipette
