// Issue 18's acceptance check on every case of bench/compare's matrix: the plan Pipette ships for
// each model, cluster size and fabric keeps its inter-node data-parallel and pipeline neighbours on
// the same local GPU index (the same rail of a rail-optimized fabric) for at least 95% of pairs,
// unless permuting GPUs inside nodes predicted a gain (what `pipette explain` then shows). The
// clusters are the bench's own (comparison_cluster), the models its presets, the job its job.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

#include "pipette/core/placement.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "pipette/core/units.hpp"
#include "pipette/topology/model_file.hpp"

namespace pipette {
namespace {

// bench/compare/compare.cpp full_matrix(): presets and the node count each starts at.
struct MatrixModel {
  const char* preset;
  int min_nodes;
};
const MatrixModel kMatrixModels[] = {{"llama2-7b", 4}, {"llama2-13b", 4}, {"llama2-70b", 4}, {"gpt3-175b", 16}};

// bench/compare/compare.cpp training_of() and run_case(): 1024 × 4096 tokens, bf16, flash
// attention; a 2 GiB margin (etc/example-cluster's); the plugin's default placement effort.
TrainingSpec matrix_training() {
  TrainingSpec training;
  training.global_batch_sequences = 1024;
  training.sequence_length = 4096;
  training.precision = Precision::bf16;
  training.attention = AttentionKernel::flash;
  return training;
}

std::vector<std::string> preset_dirs() { return {std::string(PIPETTE_SOURCE_DIR) + "/etc/models"}; }

class ComparisonMatrixRails : public ::testing::TestWithParam<std::tuple<std::size_t, int>> {};

TEST_P(ComparisonMatrixRails, KeepsNeighboursOnOneRailUnlessAGainIsShown) {
  const auto [fabric_index, nodes] = GetParam();
  const Cluster cluster = comparison_cluster(fabric_index, nodes);
  SearchOptions options;
  options.top_k = 1;
  options.memory_safety_margin_bytes = 2 * units::gibibyte;
  options.optimize_placement = true;
  int planned = 0;
  for (const MatrixModel& entry : kMatrixModels) {
    if (nodes < entry.min_nodes) continue;
    const Result<ModelSpec> model = load_model(entry.preset, preset_dirs());
    ASSERT_TRUE(model.ok()) << model.error().message;
    const Result<SearchResult> result = search_plans(*model, matrix_training(), cluster, options);
    ASSERT_TRUE(result.ok()) << entry.preset << ": " << result.error().message;
    ASSERT_FALSE(result->plans.empty()) << entry.preset;
    const Plan& plan = result->plans.front();
    const RailAlignment alignment = rail_alignment(cluster, plan.config, plan.placement);
    EXPECT_TRUE(alignment.misaligned_share() <= kMaxMisalignedNeighbourShare ||
                plan.placement_search.gpu_orders_gained(plan.time.iteration_seconds))
        << comparison_fabrics()[fabric_index].name << ", " << nodes << " nodes, " << entry.preset << ": tp="
        << plan.config.tp << " pp=" << plan.config.pp << " dp=" << plan.config.dp << ", "
        << alignment.on_different_local_gpus << " of " << alignment.inter_node_neighbours
        << " neighbours on different local GPUs";
    ++planned;
  }
  EXPECT_GT(planned, 0);
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::size_t, int>>& info) {
  return std::string(comparison_fabrics()[std::get<0>(info.param)].name) + "_" + std::to_string(std::get<1>(info.param)) +
         "_nodes";
}

// bench/compare/compare.cpp full_matrix(): 4, 16, 64 and 256 nodes on each of the four fabrics.
INSTANTIATE_TEST_SUITE_P(EveryFabricAndSize, ComparisonMatrixRails,
                         ::testing::Combine(::testing::Range(std::size_t{0}, comparison_fabrics().size()),
                                            ::testing::Values(4, 16, 64, 256)),
                         case_name);

}  // namespace
}  // namespace pipette
