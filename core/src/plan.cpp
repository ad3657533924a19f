#include "pipette/core/plan.hpp"

#include <algorithm>
#include <cstdio>

#include "pipette/core/simulator.hpp"

namespace pipette {

namespace {

// FNV-1a, 64 bit: tiny, stable across platforms and compilers, good enough to tell plans apart.
class Fnv1a64 {
 public:
  void add(const std::string& text) {
    for (const char c : text) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ULL;
    }
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

int recomputed_layers_of_stage(const ParallelConfig& config, int stage_layers) {
  if (config.recompute != RecomputeMode::full) return 0;
  if (config.recomputed_layers_per_chunk <= 0) return stage_layers;
  const int chunks = effective_virtual_stages(config);
  return chunks * std::min(stage_layers / chunks, config.recomputed_layers_per_chunk);
}

std::string plan_hash(const Plan& plan) {
  // Canonical text of the decisions only: every node derives the same string from the same plan,
  // whatever its floating-point predictions are.
  const ParallelConfig& c = plan.config;
  Fnv1a64 hash;
  hash.add("v1;tp=" + std::to_string(c.tp) + ";pp=" + std::to_string(c.pp) + ";dp=" + std::to_string(c.dp) +
           ";mbs=" + std::to_string(c.micro_batch) + ";vpp=" + std::to_string(c.virtual_stages) +
           ";recompute=" + to_string(c.recompute) + ";sp=" + (c.sequence_parallel ? "1" : "0") +
           ";distopt=" + (c.distributed_optimizer ? "1" : "0") + ";nmb=" + std::to_string(plan.num_microbatches) +
           ";layers=");
  // Expert layouts hash apart; dense plans keep the hash they had.
  if (c.ep != 1 || c.etp != 1) hash.add(";ep=" + std::to_string(c.ep) + ";etp=" + std::to_string(c.etp));
  if (c.cp != 1) hash.add(";cp=" + std::to_string(c.cp));
  if (c.fully_sharded) hash.add(";fsdp=1");
  // Block recompute hashes apart; full recompute of every layer keeps its hash.
  if (c.recompute == RecomputeMode::full && c.recomputed_layers_per_chunk > 0)
    hash.add(";recompute_layers=" + std::to_string(c.recomputed_layers_per_chunk));
  for (const int layers : c.layers_per_stage) hash.add(std::to_string(layers) + ",");
  hash.add(";gpus=");
  for (const int gpu : plan.placement.gpu_of_rank) hash.add(std::to_string(gpu) + ",");
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash.value()));
  return text;
}

}  // namespace pipette

namespace pipette {

std::string format_layer_split(const std::vector<int>& layers_per_stage) {
  std::string text;
  for (const int layers : layers_per_stage) {
    if (!text.empty()) text += ',';
    text += std::to_string(layers);
  }
  return text;
}

std::vector<int> balanced_layers_per_stage(int num_layers, int pp) {
  if (pp < 1) return {};
  if (pp == 1) return {num_layers};
  if (pp > num_layers) {
    std::vector<int> layers(static_cast<size_t>(pp), 0);
    const int head_alone = pp >= num_layers + 2 ? 1 : 0;
    for (int layer = 0; layer < num_layers; ++layer) layers[static_cast<size_t>(pp - 1 - head_alone - layer)] = 1;
    return layers;
  }
  // The form [a, b x (p-2), c] that Megatron's first/last-stage counts and torchtitan's
  // first/last "less layers" express: the middle stages get ceil(L/p) layers (fewer only where the
  // ends would otherwise be left without one), the ends share the rest, the last (with the LM
  // head) the fewer.
  int middle = (num_layers + pp - 1) / pp;
  while (middle > 1 && num_layers - middle * (pp - 2) < 2) --middle;
  const int ends = num_layers - middle * (pp - 2);
  std::vector<int> layers(static_cast<size_t>(pp), middle);
  layers.back() = ends / 2;
  layers.front() = ends - ends / 2;
  return layers;
}

}  // namespace pipette
