#pragma once
// The test models' common shapes, sized by the caller, and the plain layouts tests put them on.
#include <string>

#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"

namespace pipette::testing {

// A GPT-family decoder: GeLU MLP 4h wide, LayerNorm, biases, dropout, tied embeddings, and no learned
// positions unless the caller adds them.
inline ModelSpec gpt_like(int layers, int hidden, int heads, int vocab) {
  ModelSpec model;
  model.name = "gpt-like-" + std::to_string(layers) + "x" + std::to_string(hidden);
  model.num_layers = layers;
  model.hidden_size = hidden;
  model.num_attention_heads = heads;
  model.num_kv_heads = heads;
  model.ffn_hidden_size = 4 * hidden;
  model.vocab_size = vocab;
  model.tied_embeddings = true;
  return model;
}

// A Llama-family decoder: SwiGLU MLP, RMSNorm, rotary positions, no biases, no dropout, untied
// embeddings.
inline ModelSpec llama_like(int layers, int hidden, int heads, int kv_heads, int ffn, int vocab) {
  ModelSpec model = gpt_like(layers, hidden, heads, vocab);
  model.name = "llama-like-" + std::to_string(layers) + "x" + std::to_string(hidden);
  model.num_kv_heads = kv_heads;
  model.ffn_hidden_size = ffn;
  model.tied_embeddings = false;
  model.ffn_kind = FfnKind::swiglu;
  model.norm_kind = NormKind::rmsnorm;
  model.linear_bias = false;
  model.dropout = false;
  return model;
}

// tp × pp × dp, everything else at its default.
inline ParallelConfig layout_of(int tp, int pp, int dp) {
  ParallelConfig config;
  config.tp = tp;
  config.pp = pp;
  config.dp = dp;
  return config;
}

}  // namespace pipette::testing
