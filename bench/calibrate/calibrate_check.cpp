// `pipette calibrate` against published runs: fit on alternate rows of a published table, predict
// the other rows with the built-in constants and with the calibration, and print the errors as the
// markdown bench/RESULTS.md's "Calibration" section holds. Two tables: NVIDIA's NeMo DGX-H100 runs
// (../shared/ground_truth_data/nvidia_nemo_megatron_bridge_perf_summary.csv; the stack the
// constants were fitted on) and BigScience's A100 Megatron-DeepSpeed prototypes (a stack they were
// not). Exits 1 if a fit is refused.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>

#include "pipette/topology/site_config.hpp"
#include "published_runs.hpp"

namespace {

using namespace pipette;

double error_of(const RunRecord& record, const Calibration& calibration) {
  return predict_record(record, CalibrationBase{}, calibration).iteration_seconds / *record.iteration_seconds - 1;
}

double device_memory_error_of(const RunRecord& record, const Calibration& calibration) {
  return predict_record(record, CalibrationBase{}, calibration).peak_device_bytes / *record.peak_device_bytes - 1;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values.size() % 2 ? values[values.size() / 2]
                                                  : 0.5 * (values[values.size() / 2 - 1] + values[values.size() / 2]);
}

bool report(const char* title, const PublishedSplit& split) {
  std::printf("### %s\n\n", title);
  auto fit = fit_calibration(split.fit, CalibrationBase{});
  if (!fit) return std::fprintf(stderr, "%s\n", fit.error().message.c_str()), false;

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
  std::printf("\nHeld-out median |error| of iteration time: built-in %.1f%%, calibrated %.1f%%.\n", 100 * median(before),
              100 * median(after));
  std::vector<double> memory_before, memory_after;
  for (const RunRecord& record : split.held_out) {
    if (!record.peak_device_bytes) continue;
    memory_before.push_back(std::abs(device_memory_error_of(record, Calibration{})));
    memory_after.push_back(std::abs(device_memory_error_of(record, fit->calibration)));
  }
  if (!memory_before.empty())
    std::printf("Held-out median |error| of the GPU's peak memory (%zu rows): built-in %.1f%%, calibrated %.1f%%.\n",
                memory_before.size(), 100 * median(memory_before), 100 * median(memory_after));
  std::printf("On the fitted rows: built-in %.1f%%, calibrated %.1f%%, leave-one-out %.1f%%.\n",
              100 * median_absolute_error(fit->residuals, CalibrationTarget::iteration_time, &RecordResidual::raw_error),
              100 * median_absolute_error(fit->residuals, CalibrationTarget::iteration_time, &RecordResidual::fitted_error),
              100 * median_absolute_error(fit->residuals, CalibrationTarget::iteration_time, &RecordResidual::leave_one_out_error));
  std::map<std::string, int> reasons;  // "row N (MODEL): reason" -> reason
  for (const std::string& skipped : split.skipped) ++reasons[skipped.substr(skipped.find("): ") + 3)];
  for (const auto& [reason, count] : reasons) std::printf("\nSkipped %d row(s): %s.", count, reason.c_str());
  std::printf("\n");
  return true;
}

}  // namespace

int main() {
  auto example = load_site_config(PIPETTE_SOURCE_DIR "/etc/example-cluster/site.yaml");
  if (!example) return std::fprintf(stderr, "%s\n", example.error().message.c_str()), 1;
  auto jean_zay = load_site_config(PIPETTE_SOURCE_DIR "/bench/calibrate/data/jean-zay-a100-site.yaml");
  if (!jean_zay) return std::fprintf(stderr, "%s\n", jean_zay.error().message.c_str()), 1;
  const std::string work_dir =
      (std::filesystem::temp_directory_path() / ("pipette-calibrate-check-" + std::to_string(::getpid()))).string();
  const PublishedSplit nemo =
      nemo_dgx_h100_split(PIPETTE_GROUND_TRUTH_DIR "/nvidia_nemo_megatron_bridge_perf_summary.csv", *example);
  const PublishedSplit prototypes = bigscience_prototype_split(
      PIPETTE_SOURCE_DIR "/bench/fidelity/data/bigscience_a100_megatron_deepspeed_prototypes.csv",
      PIPETTE_SOURCE_DIR "/etc/models/bloom-176b.yaml", *jean_zay, work_dir);
  std::filesystem::remove_all(work_dir);
  const bool ok = report("NeMo DGX-H100 (the stack the constants were fitted on), the bundled example's priors", nemo);
  std::printf("\n");
  return ok && report("BigScience's BLOOM prototypes on Jean Zay (A100, Megatron-DeepSpeed fp16: another stack), "
                      "bench/calibrate/data/jean-zay-a100-site.yaml",
                      prototypes)
             ? 0
             : 1;
}
