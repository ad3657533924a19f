// Job-start cost of the topology layer: expanding the node list, inspecting the node with hwloc,
// reading the link cache and assembling the core's cluster for a 1024-node job (523,776 node
// pairs). The cache is synthetic but full-sized: every pair measured at two message sizes, every
// node with its 8×8 matrix.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "pipette/topology/cluster_assembly.hpp"
#include "pipette/topology/hostlist.hpp"
#include "pipette/topology/hwloc_inspect.hpp"
#include "pipette/topology/link_cache.hpp"

namespace pipette {
namespace {

constexpr std::int64_t kMeasuredAt = 1796144400;  // 2026-12-01T17:00:00Z

std::vector<std::string> node_names(int nodes) {
  return *expand_hostlist("gpu[0001-" + std::to_string(nodes) + "]");
}

// Every pair (pair_stride = 1) or a deterministic subset of them.
LinkCache synthetic_cache(const std::vector<std::string>& names, int pair_stride) {
  LinkCache cache;
  const int nodes = static_cast<int>(names.size());
  for (int n = 0; n < nodes; ++n) {
    NodeMeasurement node;
    node.name = names[n];
    node.measured_at_unix_seconds = kMeasuredAt;
    node.nccl_version = "2.21.5";
    node.fingerprint = "8xH100-SXM/nvswitch/8xnic";
    node.gpus = 8;
    for (int k = 0; k < 64; ++k) {
      node.bandwidth_bytes_per_second.push_back(k % 9 == 0 ? 0 : 360e9 + 1e8 * ((n + k) % 17));
      node.latency_seconds.push_back(k % 9 == 0 ? 0 : 3e-6);
    }
    cache.nodes.push_back(std::move(node));
  }
  for (int a = 0; a < nodes; ++a)
    for (int b = a + 1; b < nodes; ++b) {
      if ((a * 31 + b) % pair_stride != 0) continue;
      PairMeasurement pair;
      pair.node_a = names[a];
      pair.node_b = names[b];
      pair.measured_at_unix_seconds = kMeasuredAt - 3600 * ((a + b) % 400);
      pair.nccl_version = "2.21.5";
      pair.bandwidth_bytes_per_second = 360e9 - 1e9 * ((a * 7 + b * 13) % 40);
      pair.latency_seconds = 12.5e-6;
      pair.points = {{1048576, 12.5e-6 + 1048576 / pair.bandwidth_bytes_per_second},
                     {268435456, 12.5e-6 + 268435456 / pair.bandwidth_bytes_per_second}};
      cache.pairs.push_back(std::move(pair));
    }
  return cache;
}

struct Setup {
  std::string path;
  std::vector<std::string> names;
  NodeInspection local;
  SiteConfig site;
  std::size_t file_bytes = 0;
  std::size_t pairs = 0;
};

// Writes the cache as pipette-probe would (update_link_cache: the YAML and its binary index).
Setup make_setup(int nodes, int pair_stride, bool with_index) {
  Setup setup;
  setup.names = node_names(nodes);
  setup.path = (std::filesystem::temp_directory_path() /
                ("pipette-assembly-bench-" + std::to_string(getpid()) + "-" + std::to_string(nodes) + "-" +
                 std::to_string(pair_stride) + ".yaml"))
                   .string();
  std::filesystem::remove(setup.path);
  const LinkCache cache = synthetic_cache(setup.names, pair_stride);
  setup.pairs = cache.pairs.size();
  if (auto written = update_link_cache(setup.path, cache); !written) {
    std::fprintf(stderr, "%s\n", written.error().message.c_str());
    std::abort();
  }
  if (!with_index) std::filesystem::remove(setup.path + ".index");
  setup.file_bytes = std::filesystem::file_size(setup.path);
  setup.local.gpus.assign(8, InspectedGpu{"", 0x2330, "H100-SXM", 0});
  setup.local.nics.assign(8, InspectedNic{});
  setup.local.interconnect = GpuInterconnect::nvswitch;
  setup.site.priors.nic_bandwidth_bytes_per_second = 400e9 / 8;
  return setup;
}

void remove_files(const Setup& setup) {
  for (const char* suffix : {"", ".index", ".lock"}) std::filesystem::remove(setup.path + suffix);
}

AssemblyInput input_for(const Setup& setup, const LinkTable& table) {
  AssemblyInput input;
  input.node_names = setup.names;
  input.local = &setup.local;
  input.cache = &table;
  input.reference_time_unix_seconds = kMeasuredAt + 86400;
  return input;
}

// Read + assemble: what the plugin pays at job start (read_link_table uses the index when fresh).
void read_and_assemble(benchmark::State& state, bool with_index) {
  const Setup setup = make_setup(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), with_index);
  bool from_index = false;
  LinkTable unused;
  AssemblyInput input = input_for(setup, unused);
  for (auto _ : state) {
    auto table = read_link_table(setup.path);
    if (!table) {
      state.SkipWithError(table.error().message.c_str());
      break;
    }
    from_index = table->from_index;
    input.cache = &*table;
    auto assembled = assemble_cluster(input, setup.site);
    if (!assembled) state.SkipWithError(assembled.error().message.c_str());
    benchmark::DoNotOptimize(assembled);
  }
  state.counters["yaml_MB"] = static_cast<double>(setup.file_bytes) / 1e6;
  state.counters["cached_pairs"] = static_cast<double>(setup.pairs);
  state.counters["from_index"] = from_index;
  remove_files(setup);
}
void BM_ReadCacheAndAssemble(benchmark::State& state) { read_and_assemble(state, true); }
// The same when the index is missing or stale (hand-edited YAML): the YAML is parsed.
void BM_ReadYamlAndAssemble(benchmark::State& state) { read_and_assemble(state, false); }

// Assembly alone, from a table already in memory.
void BM_AssembleOnly(benchmark::State& state) {
  const Setup setup = make_setup(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), true);
  const auto table = read_link_table(setup.path);
  const AssemblyInput input = input_for(setup, *table);
  for (auto _ : state) {
    auto assembled = assemble_cluster(input, setup.site);
    benchmark::DoNotOptimize(assembled);
  }
  remove_files(setup);
}

// SLURM_JOB_NODELIST of a 100,000-node job: 100 racks of 1000 nodes, expanded and compressed.
void BM_ExpandHostlist(benchmark::State& state) {
  const std::string expression = "r[0-99]n[0001-1000]";
  for (auto _ : state) {
    auto hosts = expand_hostlist(expression);
    benchmark::DoNotOptimize(hosts);
  }
}
void BM_CompressHostlist(benchmark::State& state) {
  const auto hosts = *expand_hostlist("r[0-99]n[0001-1000]");
  for (auto _ : state) {
    auto compressed = compress_hostlist(hosts);
    benchmark::DoNotOptimize(compressed);
  }
}
BENCHMARK(BM_ExpandHostlist)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompressHostlist)->Unit(benchmark::kMillisecond);

// hwloc inspection, which the plugin runs on every node at job start: this machine, and a 4-GPU
// JURECA-DC node (256 PUs, 8 NUMA nodes) from its XML export.
void BM_InspectThisMachine(benchmark::State& state) {
  for (auto _ : state) {
    auto node = inspect_local_node();
    benchmark::DoNotOptimize(node);
  }
}
void BM_InspectXml(benchmark::State& state) {
  const std::string file = PIPETTE_SOURCE_DIR "/tests/data/hwloc/psmgmt-jureca-dc-gpu-4xA100-4xHDR-hwloc22.xml";
  for (auto _ : state) {
    auto node = inspect_topology_xml(file);
    if (!node) state.SkipWithError(node.error().message.c_str());
    benchmark::DoNotOptimize(node);
  }
}
BENCHMARK(BM_InspectThisMachine)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_InspectXml)->Unit(benchmark::kMillisecond);

// Arguments: nodes, pair stride (1 = every pair measured; 64 = one pair in 64, a partial cache).
BENCHMARK(BM_ReadCacheAndAssemble)->Args({64, 1})->Args({1024, 1})->Args({1024, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadYamlAndAssemble)->Args({64, 1})->Args({1024, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AssembleOnly)->Args({1024, 1})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipette
