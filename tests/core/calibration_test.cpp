#include "pipette/core/calibration.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

ModelSpec llama_like(int layers, int hidden, int heads) {
  return testing::llama_like(layers, hidden, heads, 8, hidden * 7 / 2, 128256);
}

// DGX-like nodes: 8 H100 on NVSwitch, 8 NDR rails, every node pair alike.
Cluster dgx(int nodes) {
  Cluster cluster = synthetic_cluster(uniform_fabric(nodes), 1);
  cluster.gpu = *find_gpu("H100-SXM");
  return cluster;
}

RunRecord record(const std::string& name, const ModelSpec& model, int nodes, int tp, int pp, int micro_batch,
                 RecomputeMode recompute) {
  RunRecord r;
  r.name = name;
  r.framework = "megatron";
  r.model = model;
  r.cluster = dgx(nodes);
  r.training.global_batch_sequences = 256;
  r.training.sequence_length = 4096;
  r.config.tp = tp;
  r.config.pp = pp;
  r.config.dp = nodes * 8 / (tp * pp);
  r.config.micro_batch = micro_batch;
  r.config.recompute = recompute;
  r.config.sequence_parallel = tp > 1;
  r.config.distributed_optimizer = true;
  r.config.layers_per_stage = balanced_layers_per_stage(model.num_layers, pp);
  return r;
}

// Twelve varied jobs, "measured" as the model predicts them under `truth`.
std::vector<RunRecord> measured_under(const Calibration& truth) {
  const ModelSpec small = llama_like(32, 4096, 32), large = llama_like(80, 8192, 64);
  std::vector<RunRecord> records = {
      record("a", small, 1, 1, 1, 1, RecomputeMode::selective), record("b", small, 1, 2, 1, 2, RecomputeMode::none),
      record("c", small, 2, 2, 2, 1, RecomputeMode::selective), record("d", small, 2, 4, 1, 1, RecomputeMode::full),
      record("e", small, 4, 1, 2, 2, RecomputeMode::selective), record("f", small, 4, 2, 4, 1, RecomputeMode::none),
      record("g", large, 4, 8, 2, 1, RecomputeMode::selective), record("h", large, 8, 8, 4, 1, RecomputeMode::selective),
      record("i", large, 8, 4, 4, 1, RecomputeMode::full),      record("j", large, 8, 8, 2, 2, RecomputeMode::full),
      record("k", large, 4, 4, 4, 1, RecomputeMode::full),      record("l", small, 8, 2, 2, 1, RecomputeMode::none)};
  for (RunRecord& r : records) {
    const RecordPrediction truth_prediction = predict_record(r, CalibrationBase{}, truth);
    r.iteration_seconds = truth_prediction.iteration_seconds;
    r.peak_reserved_bytes = truth_prediction.peak_reserved_bytes;
    r.peak_allocated_bytes = truth_prediction.peak_allocated_bytes;
  }
  return records;
}

const FittedParameter& parameter(const CalibrationFit& fit, const std::string& name) {
  for (const FittedParameter& p : fit.parameters)
    if (p.name == name) return p;
  throw std::runtime_error("no parameter " + name);
}

TEST(CalibrationFit, RecoversTheFactorsThatMadeTheMeasurements) {
  Calibration truth;
  truth.gemm_16bit_efficiency_factor = 0.85;
  truth.activation_memory_factor = 1.2;
  truth.allocator_reserve_fraction = 0.15;
  const auto fit = fit_calibration(measured_under(truth), CalibrationBase{});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_NEAR(parameter(*fit, "gemm_16bit_efficiency_factor").value, 0.85, 0.02);
  EXPECT_NEAR(parameter(*fit, "activation_memory_factor").value, 1.2, 0.02);
  EXPECT_NEAR(parameter(*fit, "allocator_reserve_fraction").value, 0.15, 0.01);
  EXPECT_TRUE(parameter(*fit, "allocator_reserve_fraction").fitted);
  EXPECT_LT(median_absolute_error(fit->residuals, CalibrationTarget::iteration_time, &RecordResidual::fitted_error), 0.01);
  EXPECT_LT(median_absolute_error(fit->residuals, CalibrationTarget::memory, &RecordResidual::leave_one_out_error), 0.01);
  // The built-in constants were off by the truth's factors: the raw errors show it.
  EXPECT_GT(median_absolute_error(fit->residuals, CalibrationTarget::iteration_time, &RecordResidual::raw_error), 0.05);
  EXPECT_EQ(fit->range.min_nodes, 1);
  EXPECT_EQ(fit->range.max_nodes, 8);
  EXPECT_EQ(fit->range.records, 12);
}

// A site with only nvidia-smi's or DCGM's figures (the whole GPU: context, NCCL buffers and the
// allocator's reserve included) calibrates the activation memory from them.
TEST(CalibrationFit, LearnsTheActivationsFromTheWholeGpusMemory) {
  Calibration truth;
  truth.activation_memory_factor = 1.2;
  std::vector<RunRecord> records = measured_under(truth);
  for (RunRecord& r : records) {
    r.peak_reserved_bytes.reset();
    r.peak_allocated_bytes.reset();
    r.peak_device_bytes = predict_record(r, CalibrationBase{}, truth).peak_device_bytes;
  }
  const auto fit = fit_calibration(records, CalibrationBase{});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_TRUE(parameter(*fit, "activation_memory_factor").fitted);
  EXPECT_NEAR(parameter(*fit, "activation_memory_factor").value, 1.2, 0.02);
  EXPECT_GT(median_absolute_error(fit->residuals, CalibrationTarget::memory, &RecordResidual::raw_error), 0.05);
  EXPECT_LT(median_absolute_error(fit->residuals, CalibrationTarget::memory, &RecordResidual::leave_one_out_error), 0.01);
  EXPECT_EQ(fit->residuals.back().quantity, "device memory");
}

TEST(CalibrationFit, IsDeterministicBitForBit) {
  Calibration truth;
  truth.layer_overhead_seconds = 300e-6;
  const auto records = measured_under(truth);
  const auto first = fit_calibration(records, CalibrationBase{});
  const auto second = fit_calibration(records, CalibrationBase{});
  ASSERT_TRUE(first.ok() && second.ok());
  for (size_t i = 0; i < first->parameters.size(); ++i) {
    EXPECT_EQ(first->parameters[i].value, second->parameters[i].value);
    EXPECT_EQ(first->parameters[i].uncertainty, second->parameters[i].uncertainty);
  }
}

TEST(CalibrationFit, StaysInsideThePhysicalBounds) {
  // Three times slower than any kernel efficiency allows: the factors stop at their bounds.
  auto records = measured_under(Calibration{});
  for (RunRecord& r : records) *r.iteration_seconds *= 5;
  const auto fit = fit_calibration(records, CalibrationBase{});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  for (const CalibrationParameter& bounds : calibration_parameters()) {
    const FittedParameter& p = parameter(*fit, bounds.name);
    EXPECT_GE(p.value, bounds.lower) << p.name;
    EXPECT_LE(p.value, bounds.upper) << p.name;
  }
}

TEST(CalibrationFit, RefusesWhatOneRecordCannotDetermine) {
  // One iteration time: one observation, and a factor needs two.
  auto records = measured_under(Calibration{});
  records.resize(1);
  records.front().peak_reserved_bytes.reset();
  records.front().peak_allocated_bytes.reset();
  const auto fit = fit_calibration(records, CalibrationBase{});
  ASSERT_FALSE(fit.ok());
  EXPECT_NE(fit.error().message.find("determine no factor"), std::string::npos) << fit.error().message;
  EXPECT_NE(fit.error().message.find("two observations each"), std::string::npos) << fit.error().message;
}

TEST(CalibrationFit, HoldsWhatTheRecordsDoNotExercise) {
  // Single-node jobs have no inter-node collectives: the per-doubling loss cannot be fitted.
  auto records = measured_under(Calibration{});
  std::erase_if(records, [](const RunRecord& r) { return r.cluster.num_nodes() > 1; });
  records.push_back(records.front());
  records.back().name = "a2";
  const auto fit = fit_calibration(records, CalibrationBase{});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  const FittedParameter& loss = parameter(*fit, "collective_loss_per_node_doubling");
  EXPECT_FALSE(loss.fitted);
  EXPECT_FALSE(loss.held_because.empty());
}

TEST(CalibrationFit, ContradictingRecordsAreAnError) {
  auto records = measured_under(Calibration{});
  RunRecord twin = records.front();
  twin.name = "twin";
  twin.out_of_memory = true;
  twin.iteration_seconds.reset();
  records.push_back(twin);
  const auto fit = fit_calibration(records, CalibrationBase{});
  ASSERT_FALSE(fit.ok());
  EXPECT_NE(fit.error().message.find("a and twin describe the same job"), std::string::npos) << fit.error().message;
  // Another layer split of the same layout is another job (so are other expert groups or cp):
  // both records are kept.
  RunRecord resplit = records[2];  // c: tp 2, pp 2 on 2 nodes, 16 + 16 layers
  resplit.name = "c-resplit";
  resplit.config.layers_per_stage = {15, 17};
  resplit.out_of_memory = true;
  resplit.iteration_seconds.reset();
  records.back() = resplit;
  EXPECT_TRUE(fit_calibration(records, CalibrationBase{}).ok());
}

TEST(CalibrationFit, OutOfMemoryWithoutMemoryIsAWarningAndScored) {
  auto records = measured_under(Calibration{});
  RunRecord oom = record("too-big", llama_like(80, 8192, 64), 1, 1, 1, 4, RecomputeMode::none);
  oom.out_of_memory = true;
  records.push_back(oom);
  const auto fit = fit_calibration(records, CalibrationBase{});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  ASSERT_EQ(fit->warnings.size(), 1u);
  EXPECT_NE(fit->warnings.front().find("too-big: out of memory with no memory report"), std::string::npos);
  EXPECT_EQ(fit->oom_checked, 13);
  EXPECT_GT(predict_record(oom, CalibrationBase{}, fit->calibration).peak_device_bytes, oom.cluster.gpu.memory_bytes);
  // Record a (8B, tp 1, no pipeline) ran although the built-in memory model says it would not
  // fit; the others, and the OOM, are predicted right.
  EXPECT_EQ(fit->oom_right_fitted, 12);
}

TEST(CalibrationFit, OneFrameworkAndGpuPerFit) {
  auto records = measured_under(Calibration{});
  records.back().framework = "torchtitan";
  const auto fit = fit_calibration(records, CalibrationBase{});
  ASSERT_FALSE(fit.ok());
  EXPECT_NE(fit.error().message.find("calibrate each framework and GPU separately"), std::string::npos);
}

TEST(Calibration, ScalesLinksByEfficiencyAndNodeCount) {
  Calibration calibration;
  calibration.collective_efficiency = 0.9;
  calibration.collective_loss_per_node_doubling = 0.1;
  const Cluster scaled = calibrated(dgx(4), calibration);
  const Cluster plain = dgx(4);
  EXPECT_DOUBLE_EQ(scaled.intra_node[0].at(0, 1).bandwidth_bytes_per_second,
                   0.9 * plain.intra_node[0].at(0, 1).bandwidth_bytes_per_second);
  EXPECT_DOUBLE_EQ(scaled.inter_node.at(0, 1).bandwidth_bytes_per_second,  // two doublings
                   0.9 * 0.9 * 0.9 * plain.inter_node.at(0, 1).bandwidth_bytes_per_second);
  EXPECT_DOUBLE_EQ(calibrated(plain, Calibration{}).inter_node.at(0, 1).bandwidth_bytes_per_second,
                   plain.inter_node.at(0, 1).bandwidth_bytes_per_second);
}

TEST(Calibration, ActivationFactorScalesOnlyActivations) {
  RunRecord r = record("a", llama_like(32, 4096, 32), 1, 2, 1, 1, RecomputeMode::none);
  const auto plain = estimate_memory(r.model, r.training, r.config, RuntimeOverheads{});
  Calibration calibration;
  calibration.activation_memory_factor = 1.5;
  const auto scaled = estimate_memory(r.model, r.training, r.config, calibrated(RuntimeOverheads{}, calibration));
  EXPECT_DOUBLE_EQ(scaled[0].activations_bytes, 1.5 * plain[0].activations_bytes);
  EXPECT_DOUBLE_EQ(scaled[0].weights_bytes, plain[0].weights_bytes);
}

TEST(Calibration, SaysHowAJobLiesOutsideItsRange) {
  CalibrationRange range{"megatron", "H100-SXM", 7e9, 9e9, 1, 4, 6};
  const ModelSpec small = llama_like(32, 4096, 32);
  EXPECT_EQ(outside_range(range, "megatron", small, dgx(2)), "");
  const std::string outside = outside_range(range, "nemo", llama_like(80, 8192, 64), dgx(16));
  EXPECT_NE(outside.find("framework nemo"), std::string::npos) << outside;
  EXPECT_NE(outside.find("16 nodes (calibrated on 1-4)"), std::string::npos) << outside;
  EXPECT_NE(outside.find("B parameters (calibrated on 7B–9B)"), std::string::npos) << outside;
}

}  // namespace
}  // namespace pipette
