// `pipette calibrate` against published runs: fit on alternate DGX-H100 pre-training rows of
// ../shared/ground_truth_data/nvidia_nemo_megatron_bridge_perf_summary.csv, predict the other
// rows with the built-in constants and with the calibration, and print the errors as the
// markdown bench/RESULTS.md's "Calibration" section holds. Exits 1 if the fit is refused.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "pipette/topology/site_config.hpp"
#include "published_runs.hpp"

namespace {

double error_of(const pipette::RunRecord& record, const pipette::Calibration& calibration) {
  return pipette::predict_record(record, pipette::CalibrationBase{}, calibration).iteration_seconds / *record.iteration_seconds - 1;
}

}  // namespace

int main() {
  using namespace pipette;
  auto site = load_site_config(PIPETTE_SOURCE_DIR "/etc/example-cluster/site.yaml");
  if (!site) return std::fprintf(stderr, "%s\n", site.error().message.c_str()), 1;
  const PublishedSplit split =
      nemo_dgx_h100_split(PIPETTE_GROUND_TRUTH_DIR "/nvidia_nemo_megatron_bridge_perf_summary.csv", *site);
  auto fit = fit_calibration(split.fit, CalibrationBase{});
  if (!fit) return std::fprintf(stderr, "%s\n", fit.error().message.c_str()), 1;

  std::printf("Fitted on %zu rows, held out %zu, skipped %zu (reasons at the end).\n\n", split.fit.size(),
              split.held_out.size(), split.skipped.size());
  std::printf("| factor | value | ± 1σ | |\n|---|---:|---:|---|\n");
  for (const FittedParameter& parameter : fit->parameters)
    std::printf("| %s | %.4g | %s | %s |\n", parameter.name.c_str(), parameter.value,
                parameter.fitted ? std::to_string(parameter.uncertainty).c_str() : "",
                parameter.fitted ? "fitted" : ("held: " + parameter.held_because).c_str());
  std::printf("\n| held-out row | layout | measured | built-in | calibrated |\n|---|---|---:|---:|---:|\n");
  std::vector<double> before, after;
  for (const RunRecord& record : split.held_out) {
    const double raw = error_of(record, Calibration{});
    const double calibrated = error_of(record, fit->calibration);
    before.push_back(std::abs(raw));
    after.push_back(std::abs(calibrated));
    const ParallelConfig& c = record.config;
    std::printf("| %s | tp%d pp%d dp%d vp%d mbs%d | %.3f s | %+.1f%% | %+.1f%% |\n", record.name.c_str(), c.tp, c.pp, c.dp,
                c.virtual_stages, c.micro_batch, *record.iteration_seconds, 100 * raw, 100 * calibrated);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  std::printf("\nHeld-out median |error| of iteration time: built-in %.1f%%, calibrated %.1f%%.\n", 100 * median(before),
              100 * median(after));
  std::printf("On the fitted rows: built-in %.1f%%, calibrated %.1f%%, leave-one-out %.1f%%.\n",
              100 * median_absolute_error(fit->residuals, CalibrationTarget::iteration_time, &RecordResidual::raw_error),
              100 * median_absolute_error(fit->residuals, CalibrationTarget::iteration_time, &RecordResidual::fitted_error),
              100 * median_absolute_error(fit->residuals, CalibrationTarget::iteration_time, &RecordResidual::leave_one_out_error));
  std::map<std::string, int> reasons;  // "row N (MODEL): reason" -> reason
  for (const std::string& skipped : split.skipped) ++reasons[skipped.substr(skipped.find("): ") + 3)];
  for (const auto& [reason, count] : reasons) std::printf("\nSkipped %d row(s): %s.", count, reason.c_str());
  std::printf("\n");
  return 0;
}
