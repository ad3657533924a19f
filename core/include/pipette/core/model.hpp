#pragma once
#include <cstdint>
#include <string>

namespace pipette {

enum class FfnKind {
  gelu,    // two matrices: h -> ffn -> h
  swiglu,  // three matrices: gate and up h -> ffn, down ffn -> h
};

enum class NormKind { layernorm, rmsnorm };

// Megatron-core's --moe-router-load-balancing-type (transformer_config.py
// moe_router_load_balancing_type @d98e8a64 l.743-757). It changes the loss, not the layout: the
// planner records it for the exports and prices routing imbalance through
// TrainingSpec::expert_load_imbalance_factor, whatever balances the load.
enum class RouterLoadBalancing { aux_loss, seq_aux_loss, global_aux_loss, sinkhorn, none };

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
  // Width of one attention head when it is not hidden_size / heads (Megatron --kv-channels,
  // arguments.py @d98e8a64 l.1331-1333; Qwen3 and GPT-OSS have 128 and 64 with wider Q than h).
  // 0: hidden_size / num_attention_heads.
  int kv_channels = 0;
  bool qk_layernorm = false;        // a norm of head_dim over each Q and K head (Qwen3, --qk-layernorm)
  bool attention_sink = false;      // one learned softmax offset per head (GPT-OSS, --softmax-type learnable)

  // Mixture of experts (Megatron-core's MoELayer, megatron/core/transformer/moe/moe_layer.py): every
  // layer from first_dense_layers on replaces its MLP with a router (h x num_experts, with a bias
  // when linear_bias: router.py @d98e8a64 l.67-72), num_experts routed expert MLPs of
  // moe_ffn_hidden_size (same ffn_kind and biases as the dense MLP) of which each token uses
  // router_topk, and optionally a shared expert MLP of shared_expert_ffn_hidden_size that every token
  // uses. num_experts == 0: a dense model, and the other MoE fields must be 0.
  int num_experts = 0;
  int router_topk = 0;
  int moe_ffn_hidden_size = 0;
  int shared_expert_ffn_hidden_size = 0;  // --moe-shared-expert-intermediate-size; 0: none
  int first_dense_layers = 0;             // leading dense layers (--moe-layer-freq "([0]*k+[1]*(L-k))")
  RouterLoadBalancing router_load_balancing = RouterLoadBalancing::aux_loss;

  int head_dim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads; }
  int kv_hidden_size() const { return head_dim() * num_kv_heads; }
  int query_hidden_size() const { return head_dim() * num_attention_heads; }  // == hidden_size unless kv_channels says otherwise
  bool is_moe() const { return num_experts > 0; }
  int moe_layers() const { return is_moe() ? num_layers - first_dense_layers : 0; }
};

// Parameter counts, exact for the architecture described (no padding of the vocabulary).
std::int64_t parameters_per_layer(const ModelSpec& model);
std::int64_t embedding_parameters(const ModelSpec& model);     // word + position embedding
std::int64_t output_layer_parameters(const ModelSpec& model);  // 0 when tied; final norm excluded
std::int64_t total_parameters(const ModelSpec& model);

// Mixture of experts. A dense model has no expert parameters and its active count is its total.
std::int64_t expert_parameters_per_expert(const ModelSpec& model);  // one routed expert's MLP, biases included
std::int64_t expert_parameters(const ModelSpec& model);  // all routed experts of all MoE layers
// Parameters one token's forward uses: everything but the routed experts it is not sent to
// (router_topk of num_experts per MoE layer). Embedding tables included; model cards that quote
// "active" without the input embedding (GPT-OSS) subtract embedding_parameters().
std::int64_t active_parameters(const ModelSpec& model);
// Parameters of layer `layer` (0-based): dense layers as parameters_per_layer, MoE layers with
// router, routed and shared experts in place of the dense MLP.
std::int64_t parameters_of_layer(const ModelSpec& model, int layer);

// The Megatron-core spelling (--moe-router-load-balancing-type).
const char* to_string(RouterLoadBalancing balancing);

// Returns an empty string when the model is well-formed, else one line naming the field.
std::string validate(const ModelSpec& model);

}  // namespace pipette
