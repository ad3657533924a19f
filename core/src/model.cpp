#include "pipette/core/model.hpp"

namespace pipette {

namespace {

std::int64_t norm_parameters(const ModelSpec& model) {
  const std::int64_t h = model.hidden_size;
  return model.norm_kind == NormKind::layernorm ? 2 * h : h;
}

}  // namespace

namespace {

// QKV, output projection (Q and the attention output are query_hidden_size wide), the per-head
// Q and K norms (Qwen3) and the per-head softmax offsets (GPT-OSS). Multi-latent attention: its
// five matrices, none with a bias but the output projection (multi_latent_attention.py @d98e8a64
// l.221-227, 510-617), and the norms of the two latents.
std::int64_t attention_parameters(const ModelSpec& model) {
  if (model.is_mla()) {
    const std::int64_t latent_norms =
        model.qk_layernorm ? (model.norm_kind == NormKind::layernorm ? 2 : 1) *
                                 static_cast<std::int64_t>(model.q_lora_rank + model.kv_lora_rank)
                           : 0;
    return attention_weight_elements(model).total() + (model.linear_bias ? model.hidden_size : 0) + latent_norms +
           (model.attention_sink ? model.num_attention_heads : 0);
  }
  const std::int64_t h = model.hidden_size;
  const std::int64_t q = model.query_hidden_size();
  const std::int64_t kv = model.kv_hidden_size();
  const bool bias = model.linear_bias;
  const std::int64_t qkv = h * (q + 2 * kv) + (bias ? q + 2 * kv : 0);
  const std::int64_t attention_output = q * h + (bias ? h : 0);
  const std::int64_t qk_norm = model.qk_layernorm ? 2 * static_cast<std::int64_t>(model.head_dim()) : 0;
  return qkv + attention_output + qk_norm + (model.attention_sink ? model.num_attention_heads : 0);
}

std::int64_t mlp_parameters(const ModelSpec& model, std::int64_t width) {
  const std::int64_t h = model.hidden_size;
  const bool bias = model.linear_bias;
  return model.ffn_kind == FfnKind::swiglu ? 3 * h * width + (bias ? 2 * width + h : 0)
                                           : 2 * h * width + (bias ? width + h : 0);
}

std::int64_t router_parameters(const ModelSpec& model) {
  return static_cast<std::int64_t>(model.hidden_size) * model.num_experts + (model.linear_bias ? model.num_experts : 0);
}

bool is_moe_layer(const ModelSpec& model, int layer) { return model.is_moe() && layer >= model.first_dense_layers; }

}  // namespace

AttentionWeightElements attention_weight_elements(const ModelSpec& model) {
  const std::int64_t h = model.hidden_size;
  const std::int64_t q = model.query_width();
  AttentionWeightElements elements;
  if (!model.is_mla()) {
    elements.split = h * (q + 2 * static_cast<std::int64_t>(model.kv_hidden_size())) + q * h;
    return elements;
  }
  // Column-parallel: linear_q_up_proj (q_lora_rank → Q) or linear_q_proj (h → Q), and
  // linear_kv_up_proj (kv_lora_rank → every head's K nope part and V); row-parallel linear_proj.
  // Replicated: linear_q_down_proj (h → q_lora_rank) and linear_kv_down_proj (h → kv_lora_rank
  // plus the shared RoPE key).
  const std::int64_t q_lora = model.q_lora_rank;
  const std::int64_t kv_up_width = static_cast<std::int64_t>(model.num_attention_heads) * (model.qk_head_dim + model.v_head_dim);
  elements.split = (q_lora > 0 ? q_lora : h) * q + static_cast<std::int64_t>(model.kv_lora_rank) * kv_up_width +
                   static_cast<std::int64_t>(model.attention_output_width()) * h;
  elements.replicated = h * (q_lora + model.kv_lora_rank + model.qk_pos_emb_head_dim);
  return elements;
}

std::int64_t parameters_per_layer(const ModelSpec& model) {
  return attention_parameters(model) + mlp_parameters(model, model.ffn_hidden_size) + 2 * norm_parameters(model);
}

std::int64_t expert_parameters_per_expert(const ModelSpec& model) {
  return model.is_moe() ? mlp_parameters(model, model.moe_ffn_hidden_size) : 0;
}

std::int64_t expert_parameters(const ModelSpec& model) {
  return static_cast<std::int64_t>(model.moe_layers()) * model.num_experts * expert_parameters_per_expert(model);
}

std::int64_t parameters_of_layer(const ModelSpec& model, int layer) {
  if (!is_moe_layer(model, layer)) return parameters_per_layer(model);
  const std::int64_t shared =
      model.shared_expert_ffn_hidden_size > 0 ? mlp_parameters(model, model.shared_expert_ffn_hidden_size) : 0;
  return attention_parameters(model) + 2 * norm_parameters(model) + router_parameters(model) + shared +
         static_cast<std::int64_t>(model.num_experts) * expert_parameters_per_expert(model);
}

std::int64_t embedding_norm_parameters(const ModelSpec& model) {
  return model.embedding_norm ? 2 * static_cast<std::int64_t>(model.hidden_size) : 0;  // LayerNorm weight and bias
}

std::int64_t embedding_parameters(const ModelSpec& model) {
  const std::int64_t h = model.hidden_size;
  return static_cast<std::int64_t>(model.vocab_size) * h +
         static_cast<std::int64_t>(model.learned_position_embeddings) * h + embedding_norm_parameters(model);
}

std::int64_t output_layer_parameters(const ModelSpec& model) {
  return model.tied_embeddings ? 0 : static_cast<std::int64_t>(model.vocab_size) * model.hidden_size;
}

std::int64_t total_parameters(const ModelSpec& model) {
  const std::int64_t dense_layers = model.num_layers - model.moe_layers();
  const std::int64_t layers = parameters_per_layer(model) * dense_layers +
                              (model.is_moe() ? parameters_of_layer(model, model.num_layers - 1) * model.moe_layers() : 0);
  return layers + embedding_parameters(model) + output_layer_parameters(model) + norm_parameters(model);
}

std::int64_t active_parameters(const ModelSpec& model) {
  const std::int64_t idle_experts = static_cast<std::int64_t>(model.num_experts - model.router_topk);
  return total_parameters(model) - model.moe_layers() * idle_experts * expert_parameters_per_expert(model);
}

const char* to_string(RouterLoadBalancing balancing) {
  switch (balancing) {
    case RouterLoadBalancing::aux_loss: return "aux_loss";
    case RouterLoadBalancing::seq_aux_loss: return "seq_aux_loss";
    case RouterLoadBalancing::global_aux_loss: return "global_aux_loss";
    case RouterLoadBalancing::sinkhorn: return "sinkhorn";
    case RouterLoadBalancing::none: return "none";
  }
  return "aux_loss";
}

namespace {

std::string validate_mla(const ModelSpec& model) {
  if (!model.is_mla()) {
    if (model.kv_lora_rank < 0) return "kv_lora_rank must be 0 (standard attention) or positive";
    if (model.q_lora_rank != 0 || model.qk_head_dim != 0 || model.qk_pos_emb_head_dim != 0 || model.v_head_dim != 0) {
      return "q_lora_rank, qk_head_dim, qk_pos_emb_head_dim and v_head_dim are multi-latent attention's: they need kv_lora_rank > 0";
    }
    return {};
  }
  if (model.q_lora_rank < 0) return "q_lora_rank must be 0 (no Q down-projection) or positive";
  if (model.qk_head_dim < 1) return "qk_head_dim must be a positive integer with kv_lora_rank";
  if (model.qk_pos_emb_head_dim < 1) return "qk_pos_emb_head_dim must be a positive integer with kv_lora_rank";
  if (model.v_head_dim < 1) return "v_head_dim must be a positive integer with kv_lora_rank";
  // MLA's head widths are its own, every head has its K and V, and its RoPE is applied inside
  // (multi_latent_attention.py @d98e8a64 l.163-205).
  if (model.kv_channels != 0) return "kv_channels does not apply with multi-latent attention (qk_head_dim, v_head_dim set the head widths)";
  if (model.num_kv_heads != model.num_attention_heads) {
    return "num_kv_heads must equal num_attention_heads with multi-latent attention (every head has its own K and V)";
  }
  if (model.learned_position_embeddings != 0) {
    return "learned_position_embeddings must be 0 with multi-latent attention (it applies RoPE to qk_pos_emb_head_dim)";
  }
  return {};
}

}  // namespace

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
  if (model.num_attention_heads % model.num_kv_heads != 0) {
    return "num_attention_heads " + std::to_string(model.num_attention_heads) +
           " is not divisible by num_kv_heads " + std::to_string(model.num_kv_heads);
  }
  if (model.learned_position_embeddings < 0) return "learned_position_embeddings must be 0 (rotary) or positive";
  if (model.alibi && model.learned_position_embeddings != 0) {
    return "learned_position_embeddings must be 0 with alibi (ALiBi replaces the position embedding)";
  }
  if (model.alibi && model.is_mla()) return "alibi does not apply with multi-latent attention (it applies RoPE)";
  if (model.kv_channels < 0) return "kv_channels must be 0 (hidden_size / num_attention_heads) or positive";
  if (const std::string problem = validate_mla(model); !problem.empty()) return problem;
  if (model.kv_channels == 0 && !model.is_mla() && model.hidden_size % model.num_attention_heads != 0) {
    return "hidden_size " + std::to_string(model.hidden_size) + " is not divisible by num_attention_heads " +
           std::to_string(model.num_attention_heads);
  }
  if (!model.is_moe()) {
    if (model.router_topk != 0 || model.moe_ffn_hidden_size != 0 || model.shared_expert_ffn_hidden_size != 0 ||
        model.first_dense_layers != 0) {
      return "router_topk, moe_ffn_hidden_size, shared_expert_ffn_hidden_size and first_dense_layers need num_experts > 0";
    }
    return {};
  }
  if (model.router_topk < 1 || model.router_topk > model.num_experts) {
    return "router_topk must be from 1 to num_experts (" + std::to_string(model.num_experts) + ")";
  }
  if (model.moe_ffn_hidden_size < 1) return "moe_ffn_hidden_size must be a positive integer for an MoE model";
  if (model.first_dense_layers < 0 || model.first_dense_layers >= model.num_layers) {
    return "first_dense_layers must be from 0 to num_layers - 1 (" + std::to_string(model.num_layers - 1) + ")";
  }
  if (model.shared_expert_ffn_hidden_size < 0) return "shared_expert_ffn_hidden_size must be 0 (none) or positive";
  return {};
}

std::vector<BlockLinear> block_linears_in_forward_order(const ModelSpec& model) {
  const double h = model.hidden_size, f = model.ffn_hidden_size;
  std::vector<BlockLinear> linears = {{static_cast<double>(model.query_width()), h, false},
                                      {static_cast<double>(model.key_width()), h, false},
                                      {static_cast<double>(model.value_width()), h, false},
                                      {h, static_cast<double>(model.attention_output_width()), true},
                                      {f, h, false}};
  if (model.ffn_kind == FfnKind::swiglu) linears.push_back({f, h, false});
  linears.push_back({h, f, true});
  return linears;
}

}  // namespace pipette
