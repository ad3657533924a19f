// Placement on uneven fabrics: how much faster than Slurm's node order and than the released
// Pipette objective, and how long the search takes to converge on one core.
//
// Workload: Llama-2 70B, bf16, sequence 4096, global batch 1024 sequences, micro-batch 1,
// tp=8 × pp=8 × dp=nodes/8 on H100-SXM nodes (8 GPUs, 8 rails). Fabric: synthetic_cluster with
// log-normal per-pair bandwidth (σ = 0.25 around 8×46 GB/s), racks of 8 nodes scattered over the
// job's node order with cross-rack pairs at half bandwidth, and nodes/16 (at least 2) degraded
// pairs at 15%. Every figure is the performance model's iteration time (critical_path).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/placement.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "pipette/topology/model_file.hpp"

namespace pipette {
namespace {

struct Scenario {
  Cluster cluster;
  ParallelConfig config;
  WorkProfile work;
  TrainingSpec training;
};

Scenario scenario(int nodes, std::uint64_t seed) {
  SyntheticFabric fabric;
  fabric.nodes = nodes;
  fabric.spread_sigma = 0.25;
  fabric.rack_size = 8;
  fabric.cross_rack_factor = 0.5;
  fabric.degraded_pairs = std::max(2, nodes / 16);
  Scenario s;
  s.cluster = synthetic_cluster(fabric, seed);
  s.cluster.gpu = *find_gpu("H100-SXM");
  const Result<ModelSpec> model = load_model("llama2-70b", {std::string(PIPETTE_SOURCE_DIR) + "/etc/models"});
  if (!model.ok()) {
    std::fprintf(stderr, "placement_bench: %s\n", model.error().message.c_str());
    std::exit(1);
  }
  s.training.global_batch_sequences = 1024;
  s.training.sequence_length = 4096;
  s.config.tp = 8;
  s.config.pp = 8;
  s.config.dp = nodes / 8;
  s.config.micro_batch = 1;
  s.config.layers_per_stage.assign(8, model->num_layers / 8);
  s.work = profile_work(*model, s.training, s.cluster.gpu, s.config);
  return s;
}

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// One search per iteration; the counters describe the last one (the search is deterministic).
void BM_OptimizePlacement(benchmark::State& state) {
  const Scenario s = scenario(static_cast<int>(state.range(0)), 2026);
  PlacementEffort effort;
  PlacementResult ours;
  double search_cpu_seconds = 0;
  for (auto _ : state) {
    const double start = cpu_seconds();
    ours = optimize_placement(s.cluster, s.config, s.work, s.training, effort);
    search_cpu_seconds = cpu_seconds() - start;
    benchmark::DoNotOptimize(ours);
  }
  // Pipette's objective gets the same number of moves ours used.
  PlacementEffort same_moves = effort;
  same_moves.max_moves = ours.moves_evaluated;
  const PlacementResult paper = optimize_placement_pipette_paper(s.cluster, s.config, s.work, s.training, same_moves);
  state.counters["default_s"] = ours.default_iteration_seconds;
  state.counters["ours_s"] = ours.iteration_seconds;
  state.counters["paper_s"] = paper.iteration_seconds;
  state.counters["vs_default_pct"] = 100 * (ours.default_iteration_seconds / ours.iteration_seconds - 1);
  state.counters["vs_paper_pct"] = 100 * (paper.iteration_seconds / ours.iteration_seconds - 1);
  state.counters["moves"] = static_cast<double>(ours.moves_evaluated);
  state.counters["moves_to_best"] = static_cast<double>(ours.moves_to_best);
  state.counters["cpu_ms"] = 1e3 * search_cpu_seconds;
  state.counters["exact"] = ours.exact;
}
BENCHMARK(BM_OptimizePlacement)->Arg(16)->Arg(64)->Arg(128)->Arg(256)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace pipette
