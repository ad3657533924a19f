#pragma once
// The test models' common shape: a Llama-family decoder (SwiGLU MLP, RMSNorm, rotary positions,
// no biases, no dropout, untied embeddings), sized by the caller.
#include <string>

#include "pipette/core/model.hpp"

namespace pipette::testing {

inline ModelSpec llama_like(int layers, int hidden, int heads, int kv_heads, int ffn, int vocab) {
  ModelSpec model;
  model.name = "llama-like-" + std::to_string(layers) + "x" + std::to_string(hidden);
  model.num_layers = layers;
  model.hidden_size = hidden;
  model.num_attention_heads = heads;
  model.num_kv_heads = kv_heads;
  model.ffn_hidden_size = ffn;
  model.vocab_size = vocab;
  model.ffn_kind = FfnKind::swiglu;
  model.norm_kind = NormKind::rmsnorm;
  model.linear_bias = false;
  model.dropout = false;
  return model;
}

}  // namespace pipette::testing
