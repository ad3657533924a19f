#include "pipette/core/model.hpp"

namespace pipette {

namespace {

std::int64_t norm_parameters(const ModelSpec& model) {
  const std::int64_t h = model.hidden_size;
  return model.norm_kind == NormKind::layernorm ? 2 * h : h;
}

}  // namespace

std::int64_t parameters_per_layer(const ModelSpec& model) {
  const std::int64_t h = model.hidden_size;
  const std::int64_t kv = model.kv_hidden_size();
  const std::int64_t ffn = model.ffn_hidden_size;
  const bool bias = model.linear_bias;

  const std::int64_t qkv = h * (h + 2 * kv) + (bias ? h + 2 * kv : 0);
  const std::int64_t attention_output = h * h + (bias ? h : 0);
  const std::int64_t mlp = model.ffn_kind == FfnKind::swiglu
                               ? 3 * h * ffn + (bias ? 2 * ffn + h : 0)
                               : 2 * h * ffn + (bias ? ffn + h : 0);
  return qkv + attention_output + mlp + 2 * norm_parameters(model);
}

std::int64_t embedding_parameters(const ModelSpec& model) {
  const std::int64_t h = model.hidden_size;
  return static_cast<std::int64_t>(model.vocab_size) * h +
         static_cast<std::int64_t>(model.learned_position_embeddings) * h;
}

std::int64_t output_layer_parameters(const ModelSpec& model) {
  return model.tied_embeddings ? 0 : static_cast<std::int64_t>(model.vocab_size) * model.hidden_size;
}

std::int64_t total_parameters(const ModelSpec& model) {
  return parameters_per_layer(model) * model.num_layers + embedding_parameters(model) +
         output_layer_parameters(model) + norm_parameters(model);
}

std::string validate(const ModelSpec& model) {
  const auto positive = [](int value, const char* field) -> std::string {
    return value > 0 ? std::string() : std::string(field) + " must be a positive integer";
  };
  for (const auto& message :
       {positive(model.num_layers, "num_layers"), positive(model.hidden_size, "hidden_size"),
        positive(model.num_attention_heads, "num_attention_heads"), positive(model.num_kv_heads, "num_kv_heads"),
        positive(model.ffn_hidden_size, "ffn_hidden_size"), positive(model.vocab_size, "vocab_size")}) {
    if (!message.empty()) return message;
  }
  if (model.hidden_size % model.num_attention_heads != 0) {
    return "hidden_size " + std::to_string(model.hidden_size) + " is not divisible by num_attention_heads " +
           std::to_string(model.num_attention_heads);
  }
  if (model.num_attention_heads % model.num_kv_heads != 0) {
    return "num_attention_heads " + std::to_string(model.num_attention_heads) +
           " is not divisible by num_kv_heads " + std::to_string(model.num_kv_heads);
  }
  if (model.learned_position_embeddings < 0) return "learned_position_embeddings must be 0 (rotary) or positive";
  return {};
}

}  // namespace pipette
