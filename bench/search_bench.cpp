// Google Benchmark of the full configuration search (placement excluded): Llama-3 70B
// (etc/models/llama3-70b.yaml), global batch 2048 sequences of 4096 tokens, bf16, on N nodes of
// 8 H100 with DGX-H100 links (NVLink 367 GB/s all-reduce bus bandwidth, 8 × 47 GB/s NDR per node).
// Aim: ≤ 50 ms at 128 nodes on one core. Figures: bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/search.hpp"
#include "pipette/topology/model_file.hpp"

namespace {

using namespace pipette;

Cluster dgx_h100_cluster(int nodes) {
  Cluster cluster;
  for (int node = 0; node < nodes; ++node) cluster.node_names.push_back("gpu" + std::to_string(node));
  cluster.gpus_per_node = 8;
  cluster.nics_per_node = 8;
  cluster.gpu = *find_gpu("H100-SXM");
  cluster.intra_node.assign(static_cast<size_t>(nodes), LinkMatrix(8, Link{367e9, 3e-6, true}));
  cluster.inter_node = LinkMatrix(nodes, Link{8 * 47e9, 6e-6, true});
  return cluster;
}

void full_search(benchmark::State& state) {
  const Result<ModelSpec> model = load_model("llama3-70b", {std::string(PIPETTE_SOURCE_DIR) + "/etc/models"});
  if (!model.ok()) {
    state.SkipWithError(model.error().message.c_str());
    return;
  }
  TrainingSpec training;
  training.global_batch_sequences = 2048;
  training.sequence_length = 4096;
  const Cluster cluster = dgx_h100_cluster(static_cast<int>(state.range(0)));
  SearchOptions options;
  options.optimize_placement = false;
  options.memory_safety_margin_bytes = 2.0 * 1024 * 1024 * 1024;
  int evaluated = 0, fitting = 0;
  for (auto _ : state) {
    const Result<SearchResult> result = search_plans(*model, training, cluster, options);
    if (!result.ok()) {
      state.SkipWithError(result.error().message.c_str());
      return;
    }
    evaluated = result->candidates_evaluated;
    fitting = static_cast<int>(result->plans.size());
    benchmark::DoNotOptimize(result->plans.front().time.iteration_seconds);
  }
  state.counters["time_evaluated"] = evaluated;
  state.counters["plans"] = fitting;
}

}  // namespace

BENCHMARK(full_search)->Arg(16)->Arg(128)->Arg(1024)->Unit(benchmark::kMillisecond);
