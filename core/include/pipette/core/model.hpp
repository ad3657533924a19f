#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
  int learned_position_embeddings = 0;  // rows of a learned position table; 0 for rotary (or ALiBi)
  // ALiBi (Press et al. 2021, arXiv 2108.12409; BLOOM): no position embedding, a per-head linear
  // bias added to the attention scores. Megatron-DeepSpeed's unfused attention passes the bias as
  // baddbmm's input with beta 1 (bigscience-workshop/Megatron-DeepSpeed @8387ae17
  // megatron/model/transformer.py l.283-291, 319-323), which costs score-sized passes (performance.cpp).
  bool alibi = false;
  // A LayerNorm on the word embedding's output, on the first pipeline stage only (BLOOM's
  // --embed-layernorm: megatron/mpu/layers.py l.192-195 @8387ae17): 2h parameters.
  bool embedding_norm = false;
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

  // Multi-latent attention (DeepSeek-V2/V3; Megatron-core's MLASelfAttention,
  // transformer/multi_latent_attention.py @d98e8a64 l.471-630). kv_lora_rank > 0 turns it on: the
  // hidden state is projected down to a kv_lora_rank latent plus one shared qk_pos_emb_head_dim
  // RoPE key (linear_kv_down_proj), normed, and projected up to every head's qk_head_dim key and
  // v_head_dim value (linear_kv_up_proj); Q likewise through a q_lora_rank latent (0: one h → Q
  // projection, linear_q_proj). A head's Q and K are qk_head_dim + qk_pos_emb_head_dim wide, its V
  // and output v_head_dim. qk_layernorm: the norms of the two latents (q_layernorm, kv_layernorm,
  // l.619-630; Megatron builds them only with --qk-layernorm, gpt_layer_specs.py l.246-255).
  // kv_lora_rank == 0: standard attention, and the other four must be 0.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_head_dim = 0;          // the "nope" part of a Q/K head
  int qk_pos_emb_head_dim = 0;  // the rotary part of a Q/K head
  int v_head_dim = 0;

  int head_dim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads; }
  int kv_hidden_size() const { return head_dim() * num_kv_heads; }
  int query_hidden_size() const { return head_dim() * num_attention_heads; }  // == hidden_size unless kv_channels says otherwise
  bool is_moe() const { return num_experts > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  bool rotary() const { return learned_position_embeddings == 0 && !alibi; }
  // Widths over all heads of the tensors attention keeps and moves: Q, K and V as the core
  // attention takes them, and its output (the output projection's input).
  int query_width() const { return is_mla() ? num_attention_heads * (qk_head_dim + qk_pos_emb_head_dim) : query_hidden_size(); }
  int key_width() const { return is_mla() ? query_width() : kv_hidden_size(); }
  int value_width() const { return is_mla() ? num_attention_heads * v_head_dim : kv_hidden_size(); }
  int attention_output_width() const { return is_mla() ? value_width() : query_hidden_size(); }
  // One head's width of Q and K, and of V, as attention kernels take them.
  int query_key_head_width() const { return is_mla() ? qk_head_dim + qk_pos_emb_head_dim : head_dim(); }
  int value_head_width() const { return is_mla() ? v_head_dim : head_dim(); }
  int moe_layers() const { return is_moe() ? num_layers - first_dense_layers : 0; }
};

// One linear of a dense block: its widths before tensor parallelism splits them, and whether TP
// splits its input (row parallel: wo, w2) rather than its output.
struct BlockLinear {
  double out_features = 0;
  double in_features = 0;
  bool row_parallel = false;
};
// A dense block's linears (standard attention) in the order an eager block runs them: wq, wk, wv,
// wo, w1, then w3 for a gated MLP, and w2.
std::vector<BlockLinear> block_linears_in_forward_order(const ModelSpec& model);

// Parameter counts, exact for the architecture described (no padding of the vocabulary).
std::int64_t parameters_per_layer(const ModelSpec& model);
std::int64_t embedding_parameters(const ModelSpec& model);     // word + position embedding (+ its norm)
std::int64_t embedding_norm_parameters(const ModelSpec& model);  // 2h with embedding_norm, else 0
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

// Weight-matrix elements of one layer's attention (biases and norms excluded) by how Megatron-core
// places them over the TP group: `split` column- or row-parallel, `replicated` whole on every rank
// (MLA's down projections, TELinear parallel_mode "duplicated": multi_latent_attention.py @d98e8a64
// l.525-602, gpt_layer_specs.py l.302-305).
struct AttentionWeightElements {
  std::int64_t split = 0;
  std::int64_t replicated = 0;
  std::int64_t total() const { return split + replicated; }
};
AttentionWeightElements attention_weight_elements(const ModelSpec& model);

// The Megatron-core spelling (--moe-router-load-balancing-type).
const char* to_string(RouterLoadBalancing balancing);

// Returns an empty string when the model is well-formed, else one line naming the field.
std::string validate(const ModelSpec& model);

}  // namespace pipette
