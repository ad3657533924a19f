#include "step_environment.hpp"

#include <cstdio>
#include <numeric>

#include "pipette/core/units.hpp"

namespace pipette::spank {

namespace {

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::int64_t global_batch_of(const Plan& plan) {
  return static_cast<std::int64_t>(plan.config.micro_batch) * plan.config.dp * plan.num_microbatches;
}

constexpr const char* plan_variables[] = {
    "PIPETTE_TP", "PIPETTE_PP", "PIPETTE_DP", "PIPETTE_VPP", "PIPETTE_MICRO_BATCH", "PIPETTE_GLOBAL_BATCH",
    "PIPETTE_NUM_MICROBATCHES", "PIPETTE_RECOMPUTE", "PIPETTE_SEQUENCE_PARALLEL", "PIPETTE_DISTRIBUTED_OPTIMIZER",
    "PIPETTE_RANK_ORDER", "PIPETTE_NODE_ORDER", "PIPETTE_PREDICTED_ITER_MS", "PIPETTE_PREDICTED_MEM_GIB",
    "PIPETTE_PLAN_HASH", "PIPETTE_MEGATRON_ARGS", nullptr};

}  // namespace

const char* const* plan_variable_names() { return plan_variables; }

std::string megatron_arguments(const Plan& plan) {
  const ParallelConfig& config = plan.config;
  std::string args = "--tensor-model-parallel-size " + std::to_string(config.tp) +
                     " --pipeline-model-parallel-size " + std::to_string(config.pp) + " --micro-batch-size " +
                     std::to_string(config.micro_batch) + " --global-batch-size " +
                     std::to_string(global_batch_of(plan));
  const std::vector<int>& layers = config.layers_per_stage;
  const int total_layers = std::accumulate(layers.begin(), layers.end(), 0);
  if (config.virtual_stages > 1 && config.pp > 0) {
    args += " --num-layers-per-virtual-pipeline-stage " +
            std::to_string(total_layers / (config.pp * config.virtual_stages));
  }
  // Megatron-core expresses an uneven split as a first and a last stage that differ from the
  // evenly split middle.
  if (layers.size() >= 2) {
    const bool first_differs = layers.size() > 2 ? layers.front() != layers[1] : layers.front() != layers.back();
    const bool last_differs = layers.size() > 2 ? layers.back() != layers[layers.size() - 2] : first_differs;
    if (first_differs) args += " --decoder-first-pipeline-num-layers " + std::to_string(layers.front());
    if (last_differs) args += " --decoder-last-pipeline-num-layers " + std::to_string(layers.back());
  }
  switch (config.recompute) {
    case RecomputeMode::none: break;
    case RecomputeMode::selective: args += " --recompute-granularity selective"; break;
    case RecomputeMode::full:
      args += " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
      break;
  }
  if (config.sequence_parallel) args += " --sequence-parallel";
  if (config.distributed_optimizer) args += " --use-distributed-optimizer";
  return args;
}

EnvironmentList step_environment(const Plan& plan, const RankTable& table, const StepLayout& layout,
                                 const std::string& plan_hash) {
  const ParallelConfig& config = plan.config;
  std::string node_order;
  for (int node : table.node_of_node_rank) {
    if (!node_order.empty()) node_order += ',';
    node_order += layout.node_names[static_cast<std::size_t>(node)];
  }
  return {
      {"PIPETTE_TP", std::to_string(config.tp)},
      {"PIPETTE_PP", std::to_string(config.pp)},
      {"PIPETTE_DP", std::to_string(config.dp)},
      {"PIPETTE_VPP", std::to_string(config.virtual_stages)},
      {"PIPETTE_MICRO_BATCH", std::to_string(config.micro_batch)},
      {"PIPETTE_GLOBAL_BATCH", std::to_string(global_batch_of(plan))},
      {"PIPETTE_NUM_MICROBATCHES", std::to_string(plan.num_microbatches)},
      {"PIPETTE_RECOMPUTE", to_string(config.recompute)},
      {"PIPETTE_SEQUENCE_PARALLEL", config.sequence_parallel ? "1" : "0"},
      {"PIPETTE_DISTRIBUTED_OPTIMIZER", config.distributed_optimizer ? "1" : "0"},
      {"PIPETTE_RANK_ORDER", join(table.rank_order)},
      {"PIPETTE_NODE_ORDER", node_order},
      {"PIPETTE_PREDICTED_ITER_MS", fixed(plan.time.iteration_seconds / units::millisecond, 1)},
      {"PIPETTE_PREDICTED_MEM_GIB", fixed(plan.peak_memory_bytes / units::gibibyte, 1)},
      {"PIPETTE_PLAN_HASH", plan_hash},
      {"PIPETTE_MEGATRON_ARGS", megatron_arguments(plan)},
      {"PIPETTE_STATUS", "ok"},
  };
}

}  // namespace pipette::spank
