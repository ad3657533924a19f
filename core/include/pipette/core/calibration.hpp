#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/model.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/result.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

// What a site's own finished runs teach the model (`pipette calibrate`). Each factor is one
// physical mechanism; an absent factor keeps the built-in value. The search sees a calibration
// through three inputs only: the kernel efficiencies (profile_work), the runtime overheads
// (estimate_memory) and the cluster's link bandwidths (communication_times).
struct Calibration {
  // Per kernel class: × its share of its roof (ComputeEfficiency's fractions).
  std::optional<double> gemm_16bit_efficiency_factor;
  std::optional<double> gemm_fp8_efficiency_factor;
  std::optional<double> attention_efficiency_factor;
  std::optional<double> memory_bound_efficiency_factor;   // elementwise kernels, norms, optimizer
  std::optional<double> layer_overhead_seconds;           // launch gaps per layer forward (2× backward)
  std::optional<double> pipeline_hop_overhead_seconds;    // per chunk pass: posting and waiting for p2p
  std::optional<double> collective_efficiency;            // × every link's bandwidth
  std::optional<double> collective_loss_per_node_doubling;  // inter-node bandwidth × (1 − loss)^log2(nodes)
  std::optional<double> activation_memory_factor;         // × activation bytes
  std::optional<double> allocator_reserve_fraction;       // caching allocator: reserved/allocated − 1

  bool empty() const;
};

enum class CalibrationTarget { iteration_time, memory };

// The factors with their meaning and physical bounds, in the order a fit tries to determine them
// (the one that explains most first). A kernel class's factor is bounded above by what brings its
// share of the roof to 1 from the built-in fraction (fitted_compute_efficiency()).
struct CalibrationParameter {
  const char* name;      // the calibration file's key
  const char* meaning;
  std::optional<double> Calibration::*member;
  double lower;
  double upper;
  CalibrationTarget target;
};
std::span<const CalibrationParameter> calibration_parameters();

// The built-in constants a calibration corrects.
struct CalibrationBase {
  ComputeEfficiency efficiency = fitted_compute_efficiency();
  RuntimeOverheads overheads;
};

ComputeEfficiency calibrated(const ComputeEfficiency& base, const Calibration& calibration);
RuntimeOverheads calibrated(const RuntimeOverheads& base, const Calibration& calibration);
Cluster calibrated(const Cluster& cluster, const Calibration& calibration);
// The value the model uses for a parameter: the calibration's, else the built-in one.
double effective_value(const CalibrationParameter& parameter, const CalibrationBase& base, const Calibration& calibration);

// One finished run, resolved against the site: what ran and what it measured. Times and memory are
// the framework's own figures (memory: torch's max reserved / max allocated of the busiest rank).
struct RunRecord {
  std::string name;                 // "FILE:LINE" or "FILE row N": every message names it
  std::string framework;            // megatron-core, nemo, torchtitan, …
  ModelSpec model;
  TrainingSpec training;
  ParallelConfig config;
  Cluster cluster;                  // as the job planner assembles it, uncalibrated
  std::optional<double> iteration_seconds;     // median steady-state iteration
  std::optional<double> peak_reserved_bytes;
  std::optional<double> peak_allocated_bytes;
  // The whole GPU's use as nvidia-smi or DCGM shows it (the CUDA context, NCCL's buffers and what
  // the caching allocator holds): what a site without the framework's own figures has.
  std::optional<double> peak_device_bytes;
  bool out_of_memory = false;
};

struct RecordPrediction {
  double iteration_seconds = 0;
  double peak_reserved_bytes = 0;   // busiest stage, caching allocator's view (no context, no NCCL)
  double peak_allocated_bytes = 0;
  double peak_device_bytes = 0;     // everything, what decides an OOM
};
RecordPrediction predict_record(const RunRecord& record, const CalibrationBase& base, const Calibration& calibration);

struct FittedParameter {
  std::string name;
  double value = 0;                 // the fitted value, or the built-in one when held
  double uncertainty = 0;           // one standard error; 0 when held
  bool fitted = false;
  std::string held_because;         // why the records cannot determine it
};

struct RecordResidual {
  std::string record;
  CalibrationTarget target = CalibrationTarget::iteration_time;
  std::string quantity;             // "iteration time", "max reserved" or "max allocated"
  double measured = 0;              // seconds or bytes
  double raw_error = 0;             // prediction / measured − 1, built-in constants
  double fitted_error = 0;          // with the calibration
  double leave_one_out_error = 0;   // calibrated on every other record
};

// The jobs the calibration has seen: a plan outside these is extrapolated.
struct CalibrationRange {
  std::string framework;
  std::string gpu;
  double min_parameters = 0;
  double max_parameters = 0;
  int min_nodes = 0;
  int max_nodes = 0;
  int records = 0;
};
// Empty when the job lies inside the range, else one line saying how it lies outside.
std::string outside_range(const CalibrationRange& range, const std::string& framework, const ModelSpec& model,
                          const Cluster& cluster);

struct CalibrationFit {
  Calibration calibration;
  std::vector<FittedParameter> parameters;   // every parameter, fitted or held
  std::vector<RecordResidual> residuals;
  CalibrationRange range;
  int oom_checked = 0;              // records whose fits/OOM outcome is known
  int oom_right_raw = 0;            // of those, predicted right with the built-in constants
  int oom_right_fitted = 0;
  std::vector<std::string> warnings;  // records used only in part, each naming its record
};

// Median of |error| over the residuals of one target (0 when none); `pick` selects the error.
double median_absolute_error(const std::vector<RecordResidual>& residuals, CalibrationTarget target,
                             double RecordResidual::*pick);

// Bounded least squares on log(predicted / measured), Levenberg–Marquardt in bound-normalised
// coordinates, pure and deterministic. A parameter is fitted only when the records determine it:
// it must move the predictions, must not be a combination of the parameters already kept, its
// target needs two observations per fitted parameter, and after the fit its standard error must
// span at most a quarter of its bounds (else it is held and the rest refitted). Records of one job
// that contradict each other (one ran out of memory, one did not) are an error. Records must
// share one framework and one GPU. Fails (naming the reason) when no parameter can be determined.
Result<CalibrationFit> fit_calibration(const std::vector<RunRecord>& records, const CalibrationBase& base);

}  // namespace pipette
