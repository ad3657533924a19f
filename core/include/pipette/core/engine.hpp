#pragma once
// The engine's switches a user may set: how the training stack runs the job (precision, attention
// kernel, fp8 weights, gradient precision, DP and TP overlaps, nanotron's TP re-gather and pipeline
// engine, the fused cross entropy and norms, NCCL's NVLink SHARP). Each comes from the stack's profile unless the site file (`defaults.engine`) or the job
// (`--engine`, `--pipette-engine`, `--precision`) says otherwise, job over site over stack.
#include <optional>
#include <string>
#include <vector>

#include "pipette/core/training.hpp"

namespace pipette {

// Every field optional: an empty one leaves what the lower source decided.
struct EngineOverrides {
  std::optional<Precision> precision;
  std::optional<AttentionKernel> attention;
  std::optional<bool> fp32_gradients;              // TrainingSpec::gradients_in_fp32
  std::optional<bool> dp_overlap;                  // TrainingSpec::overlap_gradient_reduce
  std::optional<bool> tp_overlap;                  // TrainingSpec::overlap_tensor_parallel_backward
  std::optional<bool> tp_comm_overlap;             // TrainingSpec::overlap_tensor_parallel_communication
  std::optional<bool> tp_recompute_allgather;      // TrainingSpec::tensor_parallel_recompute_allgather
  std::optional<bool> fp8_parameters;              // TrainingSpec::fp8_parameters
  std::optional<bool> cross_entropy_fusion;        // TrainingSpec::cross_entropy_fusion
  std::optional<bool> fused_norm;                  // TrainingSpec::fused_norm
  std::optional<bool> nvls;                        // TrainingSpec::nccl_nvls
  std::optional<PipelineSchedule> pipeline_schedule;  // TrainingSpec::pipeline_schedule

  bool operator==(const EngineOverrides&) const = default;
};

enum class EngineSource { stack, site, job };
const char* to_string(EngineSource source);  // "stack default", "site", "job"

// One switch as the job runs it: its key (the --engine spelling), its value's spelling and where
// it came from.
struct EngineSetting {
  std::string key;
  std::string value;
  EngineSource source = EngineSource::stack;
};

// The --engine keys in the order they are reported.
const std::vector<std::string>& engine_keys();

// Sets training's switches from `site`, then `job`, over what apply_stack_profile (and the
// TrainingSpec defaults) left, and returns every switch with its source, in engine_keys() order;
// or the first switch the training's framework cannot run as set, as a one-line error naming the
// key, the value, the framework and why (with the code that says so).
struct ResolvedEngine {
  std::vector<EngineSetting> settings;
  std::string problem;  // empty: every switch can run
};
ResolvedEngine apply_engine_overrides(TrainingSpec& training, const EngineOverrides& site, const EngineOverrides& job);

}  // namespace pipette
