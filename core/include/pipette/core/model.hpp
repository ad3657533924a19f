#pragma once
#include <cstdint>
#include <string>

namespace pipette {

enum class FfnKind {
  gelu,    // two matrices: h -> ffn -> h
  swiglu,  // three matrices: gate and up h -> ffn, down ffn -> h
};

enum class NormKind { layernorm, rmsnorm };

// A decoder-only transformer. Loaders (YAML presets, user files) live outside core.
struct ModelSpec {
  std::string name;
  int num_layers = 0;
  int hidden_size = 0;
  int num_attention_heads = 0;
  int num_kv_heads = 0;             // == num_attention_heads for MHA, 1 for MQA, else GQA
  int ffn_hidden_size = 0;
  FfnKind ffn_kind = FfnKind::gelu;
  NormKind norm_kind = NormKind::layernorm;
  int vocab_size = 0;
  bool tied_embeddings = false;     // output layer shares the input embedding matrix
  bool linear_bias = true;          // GPT-style biases on every linear layer
  int learned_position_embeddings = 0;  // rows of a learned position table; 0 for rotary
  bool dropout = true;              // GPT/Megatron-style hidden and attention dropout (keeps masks); Llama has none

  int head_dim() const { return hidden_size / num_attention_heads; }
  int kv_hidden_size() const { return head_dim() * num_kv_heads; }
};

// Parameter counts, exact for the architecture described (no padding of the vocabulary).
std::int64_t parameters_per_layer(const ModelSpec& model);
std::int64_t embedding_parameters(const ModelSpec& model);     // word + position embedding
std::int64_t output_layer_parameters(const ModelSpec& model);  // 0 when tied; final norm excluded
std::int64_t total_parameters(const ModelSpec& model);

// Returns an empty string when the model is well-formed, else one line naming the field.
std::string validate(const ModelSpec& model);

}  // namespace pipette
