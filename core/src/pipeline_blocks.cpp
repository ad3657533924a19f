#include "pipette/core/pipeline_blocks.hpp"

#include <cstdint>

namespace pipette {

namespace {

enum class Block { embedding, layer, final_norm, head, fp32_cast, loss };

void hold(PipelineRankBlocks& rank, Block block) {
  switch (block) {
    case Block::embedding: rank.embedding = true; break;
    case Block::layer: ++rank.num_layers; break;
    case Block::final_norm: rank.final_norm = true; break;
    case Block::head: rank.head = true; break;
    case Block::fp32_cast: rank.fp32_cast = true; break;
    case Block::loss: rank.loss = true; break;
  }
}

// The output of a rank's last block, which is what the next rank receives from it.
BoundaryTensor output_of(const PipelineRankBlocks& rank) {
  if (rank.loss || rank.idle) return BoundaryTensor::nothing;
  if (rank.fp32_cast) return BoundaryTensor::fp32_logits;
  if (rank.head) return BoundaryTensor::logits;
  return BoundaryTensor::hidden_states;
}

void fill_boundaries(PipelineBlocks& blocks) {
  blocks.boundaries.clear();
  for (size_t rank = 0; rank + 1 < blocks.ranks.size(); ++rank) {
    blocks.boundaries.push_back(blocks.ranks[rank + 1].idle ? BoundaryTensor::nothing : output_of(blocks.ranks[rank]));
  }
}

}  // namespace

PipelineBlocks nanotron_partition(const ModelSpec& model, int pp) {
  PipelineBlocks blocks;
  if (pp < 1) return blocks;
  blocks.ranks.resize(static_cast<size_t>(pp));
  // LlamaForTraining's PipelineBlocks in named_modules order (models/llama.py): LlamaModel's
  // token_position_embeddings (l.836), the decoder layers (l.855-870), final_layer_norm (l.873),
  // lm_head (l.881), cast_to_fp32 (l.899), then LlamaForTraining's loss (l.1044), registered after
  // self.model (l.1035).
  std::vector<Block> order{Block::embedding};
  order.insert(order.end(), static_cast<size_t>(model.num_layers), Block::layer);
  order.insert(order.end(), {Block::final_norm, Block::head, Block::fp32_cast, Block::loss});
  // get_block_compute_costs (llama.py l.938-950): a decoder layer 4·heads·d_qkv·h + 3·d_ff·h with
  // d_qkv = h // heads (whatever the KV heads), the lm_head V·h, every other block 0.
  const std::int64_t h = model.hidden_size;
  const std::int64_t d_qkv = h / model.num_attention_heads;
  const std::int64_t layer_cost = 4 * model.num_attention_heads * d_qkv * h + 3 * static_cast<std::int64_t>(model.ffn_hidden_size) * h;
  const std::int64_t head_cost = static_cast<std::int64_t>(model.vocab_size) * h;
  const auto cost_of = [&](Block block) {
    return block == Block::layer ? layer_cost : block == Block::head ? head_cost : std::int64_t{0};
  };
  std::int64_t total = 0;
  for (const Block block : order) total += cost_of(block);
  // base.py l.221-233: thresholds total·(r+1)/pp in float64 (numpy's int64 total times a Python
  // float), each block placed on the current rank, and the rank advanced by one after a block whose
  // cumulative cost exceeds the current rank's threshold.
  int rank = 0;
  std::int64_t cumulative = 0;
  int layer = 0;
  for (const Block block : order) {
    cumulative += cost_of(block);
    PipelineRankBlocks& holder = blocks.ranks[static_cast<size_t>(rank)];
    if (block == Block::layer && holder.num_layers == 0) holder.first_layer = layer;
    if (block == Block::layer) ++layer;
    hold(holder, block);
    const double threshold = static_cast<double>(total) * (static_cast<double>(rank + 1) / pp);
    if (static_cast<double>(cumulative) > threshold && rank + 1 < pp) ++rank;
  }
  // Each block goes on the current rank, which advances one at a time: the ranks up to the loss's
  // hold at least one block each, those after it none. Ranks without a layer start where the layers
  // before them end, as in the layer-split layout.
  bool past_loss = false;
  for (size_t r = 0; r < blocks.ranks.size(); ++r) {
    PipelineRankBlocks& here = blocks.ranks[r];
    here.idle = past_loss;
    past_loss = past_loss || here.loss;
    if (r > 0 && here.num_layers == 0) here.first_layer = blocks.ranks[r - 1].first_layer + blocks.ranks[r - 1].num_layers;
  }
  fill_boundaries(blocks);
  return blocks;
}

std::vector<int> megatron_deepspeed_layer_split(int num_layers, int pp) {
  std::vector<int> layers;
  for (int stage = 0; stage < pp; ++stage) layers.push_back(num_layers / pp + (stage < num_layers % pp ? 1 : 0));
  return layers;  // pp > L: a layer on each of the first L stages, none after
}

std::vector<int> own_layer_split(const ModelSpec& model, Framework framework, int pp) {
  switch (framework) {
    case Framework::nanotron: return layers_of(nanotron_partition(model, pp));
    case Framework::megatron_deepspeed: return megatron_deepspeed_layer_split(model.num_layers, pp);
    default: return {};
  }
}

std::vector<int> default_layer_split(const ModelSpec& model, Framework framework, int pp) {
  std::vector<int> own = own_layer_split(model, framework, pp);
  return own.empty() ? balanced_layers_per_stage(model.num_layers, pp) : own;
}

PipelineBlocks pipeline_blocks(const ModelSpec& model, Framework framework, const ParallelConfig& config) {
  if (framework == Framework::nanotron) return nanotron_partition(model, config.pp);
  const std::vector<int> layers =
      config.layers_per_stage.empty() ? default_layer_split(model, framework, config.pp) : config.layers_per_stage;
  PipelineBlocks blocks;
  int first_layer = 0;
  for (const int stage_layers : layers) {
    PipelineRankBlocks& rank = blocks.ranks.emplace_back();
    rank.first_layer = first_layer;
    rank.num_layers = stage_layers;
    first_layer += stage_layers;
  }
  if (blocks.ranks.empty()) return blocks;
  blocks.ranks.front().embedding = true;
  PipelineRankBlocks& last = blocks.ranks.back();
  last.final_norm = last.head = last.fp32_cast = last.loss = true;
  // Every stage of a layer split runs (a stage without layers passes the hidden states on).
  blocks.boundaries.assign(blocks.ranks.size() - 1, BoundaryTensor::hidden_states);
  return blocks;
}

std::vector<int> layers_of(const PipelineBlocks& blocks) {
  std::vector<int> layers;
  for (const PipelineRankBlocks& rank : blocks.ranks) layers.push_back(rank.num_layers);
  return layers;
}

double boundary_tensor_bytes(BoundaryTensor tensor, const ModelSpec& model, const TrainingSpec& training,
                             const ParallelConfig& config) {
  const double tokens = static_cast<double>(training.sequence_length) * config.micro_batch;
  const double value_bytes = training.precision == Precision::fp32 ? 4.0 : 2.0;
  const double vocab_shard = static_cast<double>(model.vocab_size) / config.tp;
  switch (tensor) {
    // With sequence parallelism (nanotron: tp_mode REDUCE_SCATTER) a rank holds s/tp of the tokens.
    case BoundaryTensor::hidden_states:
      return tokens * model.hidden_size * value_bytes / (config.sequence_parallel ? config.tp : 1);
    // The column-parallel lm_head gathers the sequence and writes its V/tp shard of every token.
    case BoundaryTensor::logits: return tokens * vocab_shard * value_bytes;
    case BoundaryTensor::fp32_logits: return tokens * vocab_shard * 4.0;
    case BoundaryTensor::nothing: return 0.0;
  }
  return 0.0;
}

const char* to_string(BoundaryTensor tensor) {
  switch (tensor) {
    case BoundaryTensor::hidden_states: return "hidden states";
    case BoundaryTensor::logits: return "16-bit logits";
    case BoundaryTensor::fp32_logits: return "fp32 logits";
    case BoundaryTensor::nothing: return "nothing";
  }
  return "?";
}

}  // namespace pipette
