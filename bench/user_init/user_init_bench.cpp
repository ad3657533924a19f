// What slurm_spank_user_init costs on one node as a job grows: plan_step() is the code path
// user_init runs after it has read Slurm's environment (model file, link cache, node inspection,
// search, placement, rank table, every PIPETTE_* and per-task string). Node lists are synthetic
// (node0001…); the link cache, when used, holds a fresh measurement of every node pair and has
// the binary index pipette-probe writes beside it. The node inspection is hwloc's of the machine
// the benchmark runs on, as in user_init.
//
//   build/bench/user_init/user_init_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "pipette/topology/link_cache.hpp"
#include "pipette/topology/site_config.hpp"
#include "step_plan.hpp"

namespace {

using namespace pipette;
using namespace pipette::spank;

std::vector<std::string> node_names(int count) {
  std::vector<std::string> names;
  for (int i = 1; i <= count; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "node%04d", i);
    names.emplace_back(name);
  }
  return names;
}

// A full, fresh cache of `count` nodes: two bandwidth classes (same or different group of 16, as
// behind one leaf switch) so that placement has something to find.
std::string write_cache(int count) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("pipette-user-init-bench-" + std::to_string(count) + ".yaml")).string();
  LinkCache cache;
  const std::vector<std::string> names = node_names(count);
  const std::int64_t now = std::time(nullptr);
  for (int a = 0; a < count; ++a) {
    for (int b = a + 1; b < count; ++b) {
      PairMeasurement pair;
      pair.node_a = names[static_cast<std::size_t>(a)];
      pair.node_b = names[static_cast<std::size_t>(b)];
      pair.measured_at_unix_seconds = now;
      pair.nccl_version = "2.21.5";
      pair.bandwidth_bytes_per_second = (a / 16 == b / 16 ? 48e9 : 22e9) - 1e7 * ((a * 7 + b * 13) % 50);
      pair.latency_seconds = a / 16 == b / 16 ? 8e-6 : 14e-6;
      cache.pairs.push_back(pair);
    }
  }
  // As pipette-probe writes it: the YAML and its binary index.
  std::filesystem::remove(path);
  if (Result<LinkCache> written = update_link_cache(path, cache); !written) {
    std::fprintf(stderr, "%s\n", written.error().message.c_str());
  }
  return path;
}

void user_init(benchmark::State& state, bool with_cache) {
  const int nodes = static_cast<int>(state.range(0));
  SiteConfig site;
  site.gpu = "H100-SXM";
  site.link_cache = with_cache ? write_cache(nodes) : "";
  StepRequest request;
  request.settings.mode = Mode::auto_remap;
  request.settings.model = "llama3-70b";
  request.settings.global_batch = 1024;
  request.settings.sequence_length = 4096;
  request.layout = {node_names(nodes), 8, 8};
  request.node_index = nodes / 2;
  request.job_id = 4242;
  std::string predicted_iter_ms;
  for (auto _ : state) {
    StepPlanResult result = plan_step(request, site);
    if (!result.error.empty()) {
      state.SkipWithError(result.error.c_str());
      break;
    }
    for (const auto& [name, value] : result.plan.step_environment)
      if (name == "PIPETTE_PREDICTED_ITER_MS") predicted_iter_ms = value;
    benchmark::DoNotOptimize(result);
  }
  // What the planning bought: the chosen plan's predicted iteration, as the job sees it.
  if (!predicted_iter_ms.empty()) state.counters["predicted_iter_ms"] = std::stod(predicted_iter_ms);
  if (with_cache) {
    for (const char* suffix : {"", ".index", ".lock"}) std::filesystem::remove(site.link_cache + suffix);
  }
}

void BM_UserInitPriors(benchmark::State& state) { user_init(state, false); }
void BM_UserInitFullCache(benchmark::State& state) { user_init(state, true); }

BENCHMARK(BM_UserInitPriors)->Arg(4)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_UserInitFullCache)->Arg(4)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
