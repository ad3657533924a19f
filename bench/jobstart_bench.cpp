// The whole decision the plugin makes at job start, against the job's size: search_plans with
// placement at its default (production) effort, for llama2-70b on 4 … 1024 nodes × 8 H100 of an
// uneven fabric (SyntheticFabric's defaults: log-normal pair spread, oversubscribed racks of 4
// scattered over the node order, two degraded pairs). The cluster is built outside the timed loop:
// at job start it comes from the link cache (assembly_bench times that part).
//
//   build/bench/jobstart_bench --benchmark_counters_tabular=true
//
// BigO fits the growth in GPUs; the counters say how much of the work the search did, and the
// label is the chosen plan's plan_hash (a pure speed-up must leave it unchanged at every size).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "pipette/topology/model_file.hpp"

namespace pipette {
namespace {

constexpr int kGpusPerNode = 8;

const ModelSpec& load(const char* name) {
  static std::map<std::string, ModelSpec> loaded_models;
  if (const auto found = loaded_models.find(name); found != loaded_models.end()) return found->second;
  return loaded_models[name] = [name] {
    const Result<ModelSpec> loaded = load_model(name, default_model_dirs());
    if (!loaded.ok()) {
      std::fprintf(stderr, "jobstart_bench: %s\n", loaded.error().message.c_str());
      std::exit(1);
    }
    return loaded.value();
  }();
}

const ModelSpec& model() { return load("llama2-70b"); }

// `nics_per_node`: NDR NICs per node, the fabric's 8 unless given.
void job_start_plan(benchmark::State& state, const ModelSpec& model, int nics_per_node = SyntheticFabric{}.nics_per_node);

void BM_JobStartPlan(benchmark::State& state) { job_start_plan(state, model()); }

// Issue 17: an MoE preset, whose search adds the expert layouts (ep x etp) to every dense family
// and whose placement prices every expert group's all-to-all.
void BM_JobStartPlanMoe(benchmark::State& state) { job_start_plan(state, load("qwen3-235b-a22b")); }

// The same with fewer NICs than GPUs per node (the second argument: 4, 2 or 1), where every
// expert group sending out of a node shares its rails (communication.cpp ep_all_to_all_seconds).
void BM_JobStartPlanMoeFewerNics(benchmark::State& state) {
  job_start_plan(state, load("qwen3-235b-a22b"), static_cast<int>(state.range(1)));
}

void job_start_plan(benchmark::State& state, const ModelSpec& model, int nics_per_node) {
  const int gpus = static_cast<int>(state.range(0));
  SyntheticFabric fabric;
  fabric.nodes = gpus / kGpusPerNode;
  fabric.gpus_per_node = kGpusPerNode;
  // The same NICs, fewer of them: a node pair's bandwidth over all its rails scales with them.
  fabric.inter_node_median_bytes_per_second *= static_cast<double>(nics_per_node) / fabric.nics_per_node;
  fabric.nics_per_node = nics_per_node;
  Cluster cluster = synthetic_cluster(fabric, 20261201);
  cluster.gpu = *find_gpu("H100-SXM");
  TrainingSpec training;
  training.global_batch_sequences = 1024;
  training.sequence_length = 4096;
  const SearchOptions options;  // what the plugin runs with unless the site file says otherwise

  int candidates = 0;
  double predicted_seconds = 0;
  double moves = 0;        // the chosen plan's placement search (the plan's JSON has the same)
  double move_budget = 0;
  std::string hash;        // plan_hash of the chosen plan: an optimisation must leave it unchanged
  for (auto _ : state) {
    const Result<SearchResult> result = search_plans(model, training, cluster, options);
    if (!result.ok() || result.value().plans.empty()) {
      state.SkipWithError(result.ok() ? "no plan" : result.error().message.c_str());
      return;
    }
    candidates = result.value().candidates_evaluated;
    const PlacementSearchSummary& search = result.value().plans.front().placement_search;
    moves = static_cast<double>(search.moves_evaluated);
    move_budget = static_cast<double>(search.move_budget);
    // Read into a counter below, so the search is not optimised away (DoNotOptimize on a double
    // mangles it with this libbenchmark: its "+m,r" constraint may pick an integer register).
    predicted_seconds = result.value().plans.front().time.iteration_seconds;
    hash = plan_hash(result.value().plans.front());
  }
  state.SetLabel(hash);
  state.SetComplexityN(gpus);
  state.counters["nodes"] = fabric.nodes;
  state.counters["nics"] = fabric.nics_per_node;
  state.counters["candidates"] = candidates;
  state.counters["iteration_s"] = predicted_seconds;
  state.counters["moves"] = moves;
  state.counters["move_budget"] = move_budget;
}

BENCHMARK(BM_JobStartPlanMoe)->Arg(1024)->Arg(8192)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_JobStartPlanMoeFewerNics)
    ->Args({1024, 4})
    ->Args({1024, 2})
    ->Args({1024, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Every power of two from 32 to 8192 GPUs, and 3072 and 6144 between the largest (issue 18: the
// cost must grow smoothly, not only at powers of two).
BENCHMARK(BM_JobStartPlan)
    ->RangeMultiplier(2)
    ->Range(32, 8192)
    ->Arg(3072)
    ->Arg(6144)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Complexity();

}  // namespace
}  // namespace pipette
