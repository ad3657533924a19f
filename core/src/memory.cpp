#include "pipette/core/memory.hpp"

#include <algorithm>

#include "pipette/core/simulator.hpp"
#include "pipette/core/stack_profile.hpp"

namespace pipette {

namespace {

// Per-layer activation elements of one micro-batch, split the way tensor and sequence parallelism
// split them (Korthikanti et al. 2022, Section 4.1, generalised to GQA and SwiGLU):
//  - replicated across the TP group unless sequence parallel: the inputs of the two norms, of the
//    QKV projection and of the first MLP projection (values), and the two hidden dropout masks;
//  - split across TP: Q, K, V, the attention output (input of the output projection) and the MLP's
//    ffn-wide tensors (GeLU: its input and output; SwiGLU: gate, up and their product);
//  - the s×s attention scores (softmax output and dropout output, values) and the attention dropout
//    mask, split across TP: unfused attention without selective recompute only.
struct LayerActivationElements {
  double replicated_values = 0;
  double replicated_masks = 0;
  double split_values = 0;
  double split_masks = 0;
  double layer_input_values = 0;  // what full recompute keeps
  // Of the values, the saved inputs of the four GEMMs (QKV and MLP inputs replicated; attention
  // output and the MLP's ffn-wide product split): fp8 recipes keep these as fp8 casts.
  double replicated_gemm_inputs = 0;
  double split_gemm_inputs = 0;
  // fp32 bytes (whatever the training precision), split across TP: flash attention's per-head
  // log-sum-exp of every query, which its backward needs (TE's fused attention saves it as `aux`).
  double split_fp32_bytes = 0;
  // Replicated like the values: a composite RMSNorm's fp32 copy of its input, which pow and the
  // multiply save (TrainingSpec::fused_norm off; its normalised 16-bit output, saved by the weight's
  // multiply, takes the place of the fused kernel's saved input).
  double replicated_fp32_bytes = 0;
};

struct LayerShape {
  double s = 0, b = 0, h = 0, kv = 0, f = 0, a = 0;
  FfnKind ffn = FfnKind::gelu;
  bool dropout = true;
  bool rotary = false;
  double q = 0;  // width of Q and of the attention output; 0: h
  // The stack's habits (stack_profile.hpp): what its SwiGLU and RoPE keep.
  int swiglu_saved_ffn_tensors = 3;
  RotaryCopies rotary_copies = RotaryCopies::rotated_query_and_key;
  bool attention_output_folded_copy = false;
  // Multi-latent attention (kv_lora > 0): the latent widths and the widths of Q, K, V and the
  // attention output; q, kv and rotary then play no part.
  double q_lora = 0, kv_lora = 0, rope = 0;
  double mla_q = 0, mla_k = 0, mla_v = 0, mla_output = 0;
  bool composite_norms = false;  // RMSNorms as eager composite ops (TrainingSpec::fused_norm off)
};

// What MLASelfAttention (multi_latent_attention.py @d98e8a64) keeps for its backward, beyond the
// layer's norm inputs and the down projections' input that the dense count already has (both down
// projections save the same input-norm output):
//  - replicated (sequence-split with SP: the down projections are TELinear "duplicated" and run on
//    the rank's s/tp tokens, l.638-664): the Q latent, which the up projection's fused norm saves as
//    its input, and that norm's output, its GEMM input (TELayerNormColumnParallelLinear,
//    gpt_layer_specs.py l.246-255); the KV latent's norm input is a view of kv_combined
//    (torch.split, l.750-760), which keeps the RoPE key's columns alive with it, and its norm output;
//  - split over TP: Q and K as the core attention saves them (torch.cat of the nope part and the
//    rotated part, then .contiguous(): l.966-979, new tensors, so the up projections' outputs die)
//    and V (a contiguous copy of the KV up projection's split, l.939, 979), and the attention
//    output, the output projection's input.
void add_mla_elements(const LayerShape& shape, double tokens, LayerActivationElements& e) {
  e.replicated_values += tokens * (2 * shape.q_lora + 2 * shape.kv_lora + shape.rope);
  e.replicated_gemm_inputs += tokens * (shape.q_lora + shape.kv_lora);
  e.split_values += tokens * (shape.mla_q + shape.mla_k + shape.mla_v + shape.mla_output);
  e.split_gemm_inputs += tokens * shape.mla_output;
}

LayerActivationElements layer_activation_elements(const LayerShape& shape, bool keep_attention_scores,
                                                  bool flash_attention) {
  const double tokens = shape.s * shape.b;
  const double h = shape.h;
  LayerActivationElements e;
  e.replicated_values = tokens * h * 4;  // two norm inputs, QKV input, MLP input
  e.replicated_masks = shape.dropout ? tokens * h * 2 : 0;  // dropout after attention and after the MLP
  if (shape.composite_norms) e.replicated_fp32_bytes = 2 * 4 * tokens * h;
  const double q = shape.q > 0 ? shape.q : h;
  const bool mla = shape.kv_lora > 0;
  const double ffn_values = tokens * shape.f * (shape.ffn == FfnKind::swiglu ? shape.swiglu_saved_ffn_tensors : 2);
  e.split_values = mla ? ffn_values : tokens * (2 * q + 2 * shape.kv) + ffn_values;
  if (mla) {
    add_mla_elements(shape, tokens, e);
  } else if (shape.rotary && shape.rotary_copies == RotaryCopies::packed_key_value_copy) {
    // nanotron (models/llama.py @2411b022 l.448-472, 680-683): multi-head attention permutes the
    // QKV output into one contiguous [3, b, s, heads, d] copy whose Q flash attention saves (its K
    // and V stay alive with it) and copies K and V again for the rotary kernel; grouped-query
    // attention copies Q, K and V separately and the originals die.
    if (shape.kv >= q) e.split_values += tokens * 2 * shape.kv;
  } else if (shape.rotary) {
    // Megatron-core splits the fused QKV output into views (attention.py get_query_key_value_tensors,
    // torch.split / TE SplitAlongDim, @d98e8a64 l.1898-1914) and applies RoPE out of place to Q and K
    // (l.1508-1535, rope_utils.py apply_rotary_pos_emb): attention saves the rotated copies while V,
    // a view, keeps the whole QKV buffer alive. Rotary models keep Q and K twice.
    e.split_values += tokens * (q + shape.kv);
  }
  // nanotron's o_proj input (models/llama.py @a27e8fe8 l.712-715, @2411b022 l.668-671) is flash
  // attention's output transposed to [s, b, h]; F.linear on it reaches matmul, whose should_fold
  // folds a 3-D input by reshape when the weight needs a gradient (pytorch aten/src/ATen/native/
  // LinearAlgebra.cpp, should_fold and _matmul_impl): a copy when b > 1, saved by mm beside the
  // output flash attention saves. Only on the synchronous path: with tp_linear_async_communication
  // the row-parallel Function saves the view itself (parallel/tensor_parallel/functional.py
  // @a27e8fe8 l.375-380), and the fold is a transient.
  if (!mla && shape.attention_output_folded_copy && shape.b > 1) e.split_values += tokens * q;
  if (flash_attention) e.split_fp32_bytes = 4 * shape.a * tokens;
  if (keep_attention_scores) {
    const double scores = shape.a * shape.s * shape.s * shape.b;
    e.split_values += (shape.dropout ? 2 : 1) * scores;  // softmax output (and dropout output)
    e.split_masks += shape.dropout ? scores : 0;         // attention dropout mask
  }
  e.layer_input_values = tokens * h;
  e.replicated_gemm_inputs += tokens * h * 2;
  e.split_gemm_inputs += tokens * ((mla ? 0 : q) + shape.f);
  return e;
}

// keep_gathered_gemm_inputs: with sequence parallelism, the column-parallel GEMMs save their
// all-gathered input whole instead of the rank's shard (nanotron with tp_recompute_allgather off:
// differentiable_all_gather then F.linear saves the gathered tensor, parallel/tensor_parallel/
// functional.py @a27e8fe8 l.352-358; @2411b022 l.496-499 saves it only when the switch is off).
double activation_bytes(const LayerActivationElements& e, double value_bytes, double gemm_input_bytes, int t,
                        bool sequence_parallel, RecomputeMode recompute, bool keep_gathered_gemm_inputs) {
  const double tp = t;
  if (recompute == RecomputeMode::full) {
    return e.layer_input_values * value_bytes / (sequence_parallel ? tp : 1.0);
  }
  const double saved_on_gemm_inputs = value_bytes - gemm_input_bytes;
  const double replicated = e.replicated_values * value_bytes + e.replicated_masks + e.replicated_fp32_bytes -
                            e.replicated_gemm_inputs * saved_on_gemm_inputs;
  const double split =
      e.split_values * value_bytes + e.split_masks + e.split_fp32_bytes - e.split_gemm_inputs * saved_on_gemm_inputs;
  const double gathered = sequence_parallel && keep_gathered_gemm_inputs
                              ? e.replicated_gemm_inputs * gemm_input_bytes * (1 - 1 / tp)
                              : 0.0;
  return (sequence_parallel ? replicated / tp : replicated) + split / tp + gathered;
}

double activation_value_bytes(Precision precision) { return precision == Precision::fp32 ? 4.0 : 2.0; }

int num_microbatches_of(const TrainingSpec& training, const ParallelConfig& config) {
  return static_cast<int>(training.global_batch_sequences / (static_cast<std::int64_t>(config.dp) * config.micro_batch));
}

double layers_of_stage(const ModelSpec& model, const ParallelConfig& config, int stage) {
  return config.layers_per_stage.empty()
             ? static_cast<double>(balanced_layers_per_stage(model.num_layers, config.pp)[static_cast<size_t>(stage)])
             : config.layers_per_stage[static_cast<size_t>(stage)];
}

// TP-split parameters of one layer: QKV (weights and biases), output projection weight, the MLP's
// column-parallel weights and biases and its row-parallel weight. The rest (norms, the row-parallel
// biases) is replicated on every TP rank.
double split_mlp_parameters(const ModelSpec& model, double f) {
  const double h = model.hidden_size;
  const bool bias = model.linear_bias;
  return model.ffn_kind == FfnKind::swiglu ? 3 * h * f + (bias ? 2 * f : 0) : 2 * h * f + (bias ? f : 0);
}

double split_attention_parameters(const ModelSpec& model) {
  if (model.is_mla()) return static_cast<double>(attention_weight_elements(model).split);
  const double h = model.hidden_size;
  const double q = model.query_hidden_size();
  const double kv = model.kv_hidden_size();
  const double qkv = h * (q + 2 * kv) + (model.linear_bias ? q + 2 * kv : 0);
  return qkv + q * h;
}

double split_parameters_per_layer(const ModelSpec& model) {
  return split_attention_parameters(model) + split_mlp_parameters(model, model.ffn_hidden_size);
}

// MoE layers on pipeline rank `stage` (the model's layers first_dense_layers … L − 1).
double moe_layers_of_stage(const ModelSpec& model, const ParallelConfig& config, int stage) {
  if (!model.is_moe()) return 0;
  int first = 0;
  for (int s = 0; s < stage; ++s) first += static_cast<int>(layers_of_stage(model, config, s));
  const int last = first + static_cast<int>(layers_of_stage(model, config, stage));
  return std::max(0, last - std::max(first, model.first_dense_layers));
}

// Bytes one rank holds for its backward of one MoE layer's routed tokens, beyond what the dense
// formula counts for its attention half and shared expert. The alltoall dispatcher
// (token_dispatcher.py MoEAlltoAllTokenDispatcher @d98e8a64 l.375-890) sends each of the rank's
// tokens (s·b/tp of them with the sequence parallelism MoE needs under TP) to router_topk experts;
// an expert rank receives, over its ep group and after the all-gather over its etp group,
// etp · topk · s·b/tp copies on average, times the assumed load imbalance. What TEGroupedMLP.forward
// (transformer/moe/experts.py @d98e8a64) keeps per copy:
//  - fc1's input, the tokens sorted by local expert (l.932; Transformer Engine's GroupedLinear saves
//    its fp8 cast under fp8, like the dense GEMM inputs);
//  - fc1's output (ffn_wide · moe_ffn/etp), which the fused weighted activation saves
//    (weighted_bias_swiglu_impl, l.966);
//  - the activation's output, fc2's saved input (l.1028; fp8 under fp8), unless `moe_act` is in
//    --recompute-modules: CheckpointWithoutOutput then frees it after fc2 and re-runs the
//    activation in the backward (l.269-276, 1020-1030).
// The router's probabilities are applied inside that activation, so fc2's output and the combine
// keep nothing, and the received buffer dies once sorted: the fused permutations
// (--moe-permute-fusion, moe_utils.py permute l.344-410) keep only index maps. Router logits and
// probabilities (fp32, num_experts per token) come on top.
double routed_activation_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  if (!model.is_moe() || config.recompute == RecomputeMode::full) return 0;
  const double tokens_in = local_sequence_length(training, config) * config.micro_batch /
                           (config.sequence_parallel ? config.tp : 1);
  const double copies = tokens_in * model.router_topk * config.etp * training.expert_load_imbalance_factor;
  const double h = model.hidden_size;
  const double f_shard = static_cast<double>(model.moe_ffn_hidden_size) / config.etp;
  const double fc1_outputs = model.ffn_kind == FfnKind::swiglu ? 2 : 1;
  const double value_bytes = activation_value_bytes(training.precision);
  const double gemm_input_bytes = training.precision == Precision::fp8 ? 1.0 : value_bytes;
  const double activation_output_bytes = training.recompute_moe_activation ? 0.0 : f_shard * gemm_input_bytes;
  return copies * (h * gemm_input_bytes + fc1_outputs * f_shard * value_bytes + activation_output_bytes) +
         tokens_in * model.num_experts * 8.0;
}

int communicators_of_stage(const ParallelConfig& config, int stage) {
  const bool end_stage = stage == 0 || stage == config.pp - 1;
  // MoE layouts add the ep, etp and expert-dp communicators.
  // Context parallelism adds the cp ring's communicator, and the gradients reduce over dp·cp.
  return (config.tp > 1) + (config.dp_cp() > 1) + (config.cp > 1) + (config.pp > 1) + (config.pp > 1 && end_stage) + (config.ep > 1) +
         (config.etp > 1) + (config.ep * config.etp > 1 && config.expert_dp() > 1);
}

}  // namespace

double korthikanti_layer_activation_bytes(int s, int b, int h, int a, int t, bool sequence_parallel,
                                          RecomputeMode recompute) {
  const LayerShape shape{static_cast<double>(s), static_cast<double>(b), static_cast<double>(h),
                         static_cast<double>(h), 4.0 * h, static_cast<double>(a), FfnKind::gelu, true};
  return activation_bytes(layer_activation_elements(shape, recompute == RecomputeMode::none, false), 2.0, 2.0, t,
                          sequence_parallel, recompute, false);
}

namespace {

LayerShape layer_shape_of(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  const StackProfile& stack = stack_profile(training.target.framework);
  return {local_sequence_length(training, config), static_cast<double>(config.micro_batch),
          static_cast<double>(model.hidden_size),        static_cast<double>(model.kv_hidden_size()),
          static_cast<double>(model.ffn_hidden_size),    static_cast<double>(model.num_attention_heads),
          model.ffn_kind,                                model.dropout,
          model.rotary(),                                static_cast<double>(model.query_hidden_size()),
          stack.swiglu_saved_ffn_tensors,                stack.rotary,
          stack.attention_output_folded_copy && !training.overlap_tensor_parallel_backward,
          static_cast<double>(model.q_lora_rank),        static_cast<double>(model.kv_lora_rank),
          static_cast<double>(model.qk_pos_emb_head_dim), static_cast<double>(model.query_width()),
          static_cast<double>(model.key_width()),        static_cast<double>(model.value_width()),
          static_cast<double>(model.attention_output_width()),
          composite_rms_norms(model, training)};
}

// What a block keeps under torchtitan's per-operator checkpointing
// (SelectiveRecompute::every_other_linear): its input (the rank's shard with sequence parallelism),
// the attention kernel's output and fp32 log-sum-exp, the outputs of the first, third, ... linear
// in the order the block runs them (block_linears_in_forward_order), and with sequence parallelism
// the outputs of the reduce-scatters after wo and w2. A row-parallel linear's output is the partial
// sum before its reduction: h wide over the whole local sequence on every TP rank.
double every_other_linear_layer_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const double t = config.tp;
  const double h = model.hidden_size;
  const std::vector<BlockLinear> linears = block_linears_in_forward_order(model);
  double saved_widths = 0;
  for (std::size_t linear = 0; linear < linears.size(); linear += 2)
    saved_widths += linears[linear].row_parallel ? linears[linear].out_features : linears[linear].out_features / t;
  const bool sequence_parallel = config.sequence_parallel && config.tp > 1;
  saved_widths += (sequence_parallel ? h / t : h) + model.attention_output_width() / t;
  if (sequence_parallel) saved_widths += 2 * h / t;
  const double log_sum_exp_bytes = training.attention == AttentionKernel::flash ? 4.0 * model.num_attention_heads / t : 0.0;
  return tokens * (saved_widths * activation_value_bytes(training.precision) + log_sum_exp_bytes);
}

// What one layer keeps for its backward when nothing is recomputed (the recompute mode only picks
// which of it survives until the backward).
double saved_layer_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config,
                         RecomputeMode recompute) {
  if (recompute == RecomputeMode::selective &&
      stack_profile(training.target.framework).selective_recompute == SelectiveRecompute::every_other_linear) {
    return every_other_linear_layer_bytes(model, training, config);
  }
  const bool keep_scores = training.attention == AttentionKernel::unfused && recompute == RecomputeMode::none;
  const double value_bytes = activation_value_bytes(training.precision);
  const double gemm_input_bytes = training.precision == Precision::fp8 ? 1.0 : value_bytes;
  return activation_bytes(
      layer_activation_elements(layer_shape_of(model, training, config), keep_scores,
                                training.attention == AttentionKernel::flash),
      value_bytes, gemm_input_bytes, config.tp, config.sequence_parallel, recompute,
      !training.tensor_parallel_recompute_allgather);
}

}  // namespace

double layer_activation_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  return saved_layer_bytes(model, training, config, config.recompute);
}

double moe_layer_activation_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  // The attention half and the shared expert (a TP-split MLP of its width, none without one) as a
  // dense layer keeps them, plus the routed tokens.
  ModelSpec attention_and_shared = model;
  attention_and_shared.ffn_hidden_size = model.shared_expert_ffn_hidden_size;
  return saved_layer_bytes(attention_and_shared, training, config, config.recompute) +
         routed_activation_bytes(model, training, config);
}

double layer_working_set_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const double h = model.hidden_size;
  const double f_shard = static_cast<double>(model.ffn_hidden_size) / config.tp;
  const double ffn_wide = model.ffn_kind == FfnKind::swiglu ? 2 : 1;  // fc1 outputs per f
  const double value_bytes = activation_value_bytes(training.precision);
  // Gradients in flight while the MLP's backward runs (the attention half's are smaller). The
  // incoming gradient of the layer output (h, all-gathered to the full sequence with SP) stays until
  // the residual adds it; the activation's backward turns the fc2-input gradient (f/t) into the fc1
  // output gradient (ffn_wide·f/t); fc1's dgrad then writes a full-sequence h-wide gradient (before
  // its reduce-scatter) while, with sequence parallelism, Transformer Engine re-gathers the norm
  // output it saved as a shard for the wgrad GEMM (layernorm_linear.py @d0067d0d l.760-800); a
  // stack that kept the gathered input (tensor_parallel_recompute_allgather off) gathers nothing.
  const double activation_backward = h + (1 + ffn_wide) * f_shard;
  const bool regathers = config.sequence_parallel && training.tensor_parallel_recompute_allgather;
  const double fc1_backward = (regathers ? 3 : 2) * h + ffn_wide * f_shard;
  double working = tokens * std::max(activation_backward, fc1_backward) * value_bytes;
  // Recomputation rebuilds, one layer at a time, what was dropped: under full recompute the layer
  // being recomputed holds everything a layer without recompute keeps until its backward is done
  // (Megatron's CheckpointFunction re-runs the layer's forward inside its backward, tensor_parallel/
  // random.py @d98e8a64 l.591-635); selective recompute rebuilds the attention core (the score tensors of unfused
  // attention).
  if (config.recompute != RecomputeMode::none) {
    working += saved_layer_bytes(model, training, config, RecomputeMode::none) -
               saved_layer_bytes(model, training, config, config.recompute);
  }
  return working + cp_ring_buffer_bytes(model, training, config);
}

double kv_chunk_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  // K and V of the rank's tokens and heads (MLA: the up-projected per-head K and V, not the latent:
  // the core attention and its ring see those).
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const double key_values = model.is_mla() ? static_cast<double>(model.key_width()) + model.value_width()
                                           : 2.0 * model.kv_hidden_size();
  return tokens * key_values / config.tp * activation_value_bytes(training.precision);
}

double cp_ring_buffer_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  if (config.cp <= 1) return 0;
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const double value_bytes = activation_value_bytes(training.precision);
  const double kv_chunk = kv_chunk_bytes(model, training, config);
  const double output_chunk = tokens * static_cast<double>(model.attention_output_width()) / config.tp * value_bytes;
  // Transformer Engine's AttnFuncWithCPAndKVP2P (dot_product_attention/context_parallel.py
  // @d0067d0d): the forward keeps every K/V chunk it receives in p2p_comm_buffers and every step's
  // output for the final softmax correction until the layer's attention ends (l.1685-1717), plus
  // the output accumulated in fp32 (l.1980); the backward passes [K/V, dK/dV] pairs through two
  // such buffers (l.2396-2399) beside a dQ buffer.
  const double forward = config.cp * (kv_chunk + output_chunk) + output_chunk * 4.0 / value_bytes;
  const double backward = 2 * 2 * kv_chunk + output_chunk;
  return std::max(forward, backward);
}

int in_flight_microbatch_chunks(int stage, int pp, int num_microbatches, int virtual_stages, PipelineSchedule schedule) {
  if (schedule == PipelineSchedule::all_forward_all_backward) return num_microbatches;
  if (virtual_stages <= 1 || pp <= 1) return std::min(pp - stage, num_microbatches);
  // Megatron-core walks groups of N micro-batches through the chunks; N = pp when pp divides m.
  const int group = std::max(pp, interleaved_group_size(pp, num_microbatches));
  const int warmup = 2 * (pp - stage - 1) + (virtual_stages - 1) * group;
  return std::min(warmup + 1, num_microbatches * virtual_stages);
}

BytesPerParameter bytes_per_parameter(const TrainingSpec& training, bool distributed_optimizer, int dp) {
  const StackProfile& stack = stack_profile(training.target.framework);
  BytesPerParameter bytes;
  if (training.precision == Precision::fp32) {
    bytes = {4, 4, 8};  // fp32 grads; Adam m and v
  } else if (training.gradients_in_fp32) {
    // fp32 main grads; fp32 master weights, Adam m and v. The optimizer takes the fp32 buffer as it
    // is: `.float()` of an fp32 tensor is the tensor (distrib_optimizer.py @d98e8a64 l.2792,
    // optimizer.py Float16OptimizerWithFloat16Params l.1097).
    bytes = {2, 4, 12};
  } else {
    // The 16-bit grad buffer (param_and_grad_buffer.py @d98e8a64 l.924: grad dtype = param dtype
    // without grad_reduce_in_fp32); fp32 master weights, m and v; and the fp32 main grads the step
    // casts from the buffer, `shard_main_param.grad = shard_model_grad.float()` (distrib_optimizer.py
    // l.2792; unsharded, optimizer.py l.1097), which the next zero_grad (set_to_none: distrib_optimizer.py
    // l.2568-2597, optimizer.py l.1048-1061, called at the start of train_step, training/training.py
    // l.3044, before the forward) frees.
    bytes = {2, 2, 12, 4};
    if (stack.main_gradient_copy == MainGradientCopy::whole_iteration) {
      bytes.optimizer += bytes.step_main_gradients;
      bytes.step_main_gradients = 0;
    }
  }
  // DeepSpeed's BF16_Optimizer (stack_profile.hpp): the 16-bit .grads of one backward are still
  // allocated through the next forward, which brings the activations to their peak. The pipeline
  // engine clears them only at the next backward's start (deepspeed/runtime/pipe/engine.py @edaa7221
  // l.861-863; the last stage through backward_prologue, bf16_optimizer.py l.348-349), by zeroing
  // (clear_lp_grads l.473-489) or, in the 2022-03 commit BLOOM ran and in 2024-04 to 2025-11, by
  // dropping them (@77b649d1 l.330-333, pipe/engine.py l.748-750); the step's
  // zero_grad(set_to_none=True) frees them after the step (bf16_optimizer.py l.491-492, engine.py
  // l.3359-3363), so they are there at the step's peak too.
  if (training.precision == Precision::bf16 &&
      stack.sixteen_bit_gradients == SixteenBitGradients::kept_through_the_next_forward) {
    bytes.gradients += 2;
  }
  // PyTorch DDP's flat bucket buffers (stack_profile.hpp), in the parameters' dtype.
  const bool builds_ddp = dp > 1 && !(training.gradients_in_fp32 && distributed_optimizer);
  if (stack.ddp_gradient_buckets && builds_ddp) bytes.gradients += bytes.weights;
  if (distributed_optimizer) {
    bytes.optimizer /= dp;
    bytes.step_main_gradients /= dp;
  }
  return bytes;
}

double word_embedding_shard_parameters(const ModelSpec& model, const ParallelConfig& config) {
  return static_cast<double>(model.vocab_size) * model.hidden_size / config.tp;
}

BytesPerParameter fully_sharded_bytes_per_parameter(int shards) {
  // FSDP2 keeps each parameter's shard in its own dtype, fp32 (torchtitan builds the model in fp32
  // and casts only the gathered copy to mixed_precision_param), the sharded gradient in
  // mixed_precision_reduce, fp32 (config/configs.py @b5bcd76c l.94-102), and AdamW's two moments of
  // the fp32 shard: no master copy beside the parameters.
  return {4.0 / shards, 4.0 / shards, 8.0 / shards, 0.0};
}

FsdpWorkingSet fsdp_working_set(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  // At the activation peak, the backward's start: the [norm, output] unit, which torchtitan does not
  // reshard after the forward (distributed/fsdp.py @b5bcd76c l.258-266; with tied weights the
  // embedding unit, l.240-250), still gathered; the last block, prefetched for its backward
  // (FSDP2 prefetches one module ahead in the backward); and the output unit's gradient, unsharded
  // in the parameters' gathered dtype and copied into an fp32 reduce-scatter input
  // (mixed_precision_reduce). A block's backward later holds two gathered blocks and one block's
  // gradient, less whenever the output unit is the larger.
  const double gathered_bytes = training.precision == Precision::fp32 ? 4.0 : 2.0;
  const double output_unit = word_embedding_shard_parameters(model, config) + model.hidden_size;
  const double block = split_parameters_per_layer(model) / config.tp;
  FsdpWorkingSet set;
  set.parameter_bytes = gathered_bytes * std::max(output_unit + block, 2 * block);
  set.gradient_bytes = (gathered_bytes + 4.0) * std::max(output_unit, block);
  return set;
}

double largest_parameter_elements(const ModelSpec& model, const ParallelConfig& config, const PipelineRankBlocks& held) {
  double largest = 0;
  if (held.num_layers > 0) {
    // One GPU's shard of each layer weight: QKV (q + 2kv rows), the MLP's first weight (gate and up
    // in one for SwiGLU, as Megatron's dense_h_to_4h; never smaller than the second), the output
    // projection.
    const double h = model.hidden_size;
    const double qkv = model.is_mla() ? 0.0 : h * (model.query_hidden_size() + 2.0 * model.kv_hidden_size());
    const double fc1 = h * model.ffn_hidden_size * (model.ffn_kind == FfnKind::swiglu ? 2 : 1);
    largest = std::max({qkv, fc1, h * model.attention_output_width()}) / config.tp;
  }
  if (held.embedding || held.head) largest = std::max(largest, word_embedding_shard_parameters(model, config));
  return largest;
}

double expert_parameters_on_stage(const ModelSpec& model, const ParallelConfig& config, int stage) {
  if (!model.is_moe()) return 0;
  // A rank holds num_experts/ep experts, each split over etp (fc1 column-, fc2 row-parallel: all
  // but fc2's bias, which every etp rank keeps).
  const double per_expert = static_cast<double>(expert_parameters_per_expert(model));
  const double row_bias = model.linear_bias ? model.hidden_size : 0;
  const double experts_per_rank = static_cast<double>(model.num_experts) / config.ep;
  return moe_layers_of_stage(model, config, stage) * experts_per_rank * ((per_expert - row_bias) / config.etp + row_bias);
}

double parameters_on_stage(const ModelSpec& model, const ParallelConfig& config, int stage) {
  PipelineRankBlocks ends;
  ends.num_layers = static_cast<int>(layers_of_stage(model, config, stage));
  ends.embedding = stage == 0;
  ends.final_norm = ends.head = ends.fp32_cast = ends.loss = stage == config.pp - 1;
  return parameters_on_stage(model, config, stage, ends);
}

double parameters_on_stage(const ModelSpec& model, const ParallelConfig& config, int stage,
                           const PipelineRankBlocks& blocks) {
  const double h = model.hidden_size;
  const double split = split_parameters_per_layer(model);
  const double replicated = static_cast<double>(parameters_per_layer(model)) - split;
  const double moe_layers = moe_layers_of_stage(model, config, stage);
  double parameters = (blocks.num_layers - moe_layers) * (split / config.tp + replicated);
  if (moe_layers > 0) {
    // The non-expert part of an MoE layer: attention and the shared expert split over tp; norms,
    // the router (replicated on every rank: router.py @d98e8a64 l.60-72) and row biases whole.
    const double moe_layer = static_cast<double>(parameters_of_layer(model, model.num_layers - 1)) -
                             model.num_experts * static_cast<double>(expert_parameters_per_expert(model));
    const double moe_split = split_attention_parameters(model) +
                             (model.shared_expert_ffn_hidden_size > 0
                                  ? split_mlp_parameters(model, model.shared_expert_ffn_hidden_size)
                                  : 0.0);
    parameters += moe_layers * (moe_split / config.tp + (moe_layer - moe_split)) +
                  expert_parameters_on_stage(model, config, stage);
  }
  const double word_embedding_shard = word_embedding_shard_parameters(model, config);
  if (blocks.embedding) {
    parameters += word_embedding_shard + static_cast<double>(model.learned_position_embeddings) * h +
                  static_cast<double>(embedding_norm_parameters(model));
  }
  // A tied output matrix is the embedding's own on the rank that holds both, a copy elsewhere.
  if (blocks.head && (!model.tied_embeddings || !blocks.embedding)) parameters += word_embedding_shard;
  if (blocks.final_norm) parameters += model.norm_kind == NormKind::layernorm ? 2 * h : h;
  return parameters;
}

std::vector<StageMemory> estimate_memory(const ModelSpec& model, const TrainingSpec& training,
                                         const ParallelConfig& config, const RuntimeOverheads& overheads) {
  const PipelineBlocks blocks = pipeline_blocks(model, training.target.framework, config);
  const std::vector<int> layers = layers_of(blocks);
  const int microbatches = std::max(1, num_microbatches_of(training, config));
  // The distributed optimizer shards over the dp·cp group (Megatron builds it on the data-parallel
  // group with context parallelism, distributed_data_parallel.py @d98e8a64 l.289).
  const BytesPerParameter per_parameter = config.fully_sharded ? fully_sharded_bytes_per_parameter(config.dp_cp())
                                                               : bytes_per_parameter(training, config.distributed_optimizer, config.dp_cp());
  const double per_layer_activation = layer_activation_bytes(model, training, config);
  const double per_moe_layer_activation = model.is_moe() ? moe_layer_activation_bytes(model, training, config) : 0.0;
  // Block recompute (ParallelConfig::recomputed_layers_per_chunk): the chunk's layers past the
  // first N run as without recompute (recompute.py @d98e8a64 l.164-177, chunk_runner without
  // checkpoint) and keep everything.
  double per_kept_layer_activation = per_layer_activation;
  double per_kept_moe_layer_activation = per_moe_layer_activation;
  if (config.recompute == RecomputeMode::full && config.recomputed_layers_per_chunk > 0) {
    ParallelConfig without_recompute = config;
    without_recompute.recompute = RecomputeMode::none;
    per_kept_layer_activation = layer_activation_bytes(model, training, without_recompute);
    per_kept_moe_layer_activation = model.is_moe() ? moe_layer_activation_bytes(model, training, without_recompute) : 0.0;
  }
  const double working_set = layer_working_set_bytes(model, training, config);
  const double value_bytes = activation_value_bytes(training.precision);
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const StackProfile& stack = stack_profile(training.target.framework);
  // The largest single tensor a layer's backward allocates: a full-sequence h-wide gradient or the
  // fc1 output gradient.
  const double largest_layer_request =
      tokens * value_bytes *
      std::max(static_cast<double>(model.hidden_size),
               (model.ffn_kind == FfnKind::swiglu ? 2.0 : 1.0) * model.ffn_hidden_size / config.tp);

  std::vector<StageMemory> stages(static_cast<size_t>(config.pp));
  for (int stage = 0; stage < config.pp; ++stage) {
    StageMemory& memory = stages[static_cast<size_t>(stage)];
    const PipelineRankBlocks& held = blocks.ranks[static_cast<size_t>(stage)];
    const double parameters = parameters_on_stage(model, config, stage, held);
    memory.weights_bytes = parameters * per_parameter.weights;
    if (training.precision == Precision::fp8 && !training.fp8_parameters) {
      // Transformer Engine casts each GEMM weight to fp8 once per iteration and caches the cast,
      // row-wise and its transpose for the backward (module/linear.py @d0067d0d l.1958-2071,
      // `_fp8_workspaces`; Megatron passes is_first_microbatch, extensions/transformer_engine.py
      // @d98e8a64 l.1338): one byte each per weight element of the layers.
      const double moe_layers = moe_layers_of_stage(model, config, stage);
      const double moe_gemm_weights =
          moe_layers * (split_attention_parameters(model) +
                        (model.shared_expert_ffn_hidden_size > 0
                             ? split_mlp_parameters(model, model.shared_expert_ffn_hidden_size)
                             : 0.0)) / config.tp +
          expert_parameters_on_stage(model, config, stage);
      memory.weights_bytes += 2 * ((layers_of_stage(model, config, stage) - moe_layers) *
                                       split_parameters_per_layer(model) / config.tp +
                                   moe_gemm_weights);
    }
    memory.gradients_bytes = parameters * per_parameter.gradients;
    if (config.fully_sharded) {
      const FsdpWorkingSet gathered = fsdp_working_set(model, training, config);
      memory.weights_bytes += gathered.parameter_bytes;
      memory.gradients_bytes += gathered.gradient_bytes;
    }
    memory.optimizer_state_bytes = parameters * per_parameter.optimizer;
    memory.step_gradients_bytes = parameters * per_parameter.step_main_gradients;
    const double expert_parameters = expert_parameters_on_stage(model, config, stage);
    if (expert_parameters > 0 && config.distributed_optimizer) {
      // The distributed optimizer shards expert parameters over the expert-dp group, not dp
      // (distributed/param_and_grad_buffer and the expert-dp groups of parallel_state.py
      // @d98e8a64 l.1448-1484): their optimizer state and the step's fp32 gradient copy are divided
      // by expert_dp instead.
      const BytesPerParameter expert = bytes_per_parameter(training, true, config.expert_dp());
      memory.optimizer_state_bytes += expert_parameters * (expert.optimizer - per_parameter.optimizer);
      memory.step_gradients_bytes += expert_parameters * (expert.step_main_gradients - per_parameter.step_main_gradients);
    }

    const int chunks =
        in_flight_microbatch_chunks(stage, config.pp, microbatches, config.virtual_stages, training.pipeline_schedule);
    const double layers_per_chunk = static_cast<double>(layers[static_cast<size_t>(stage)]) / config.virtual_stages;
    const int stage_layers = layers[static_cast<size_t>(stage)];
    const double moe_share = stage_layers > 0 ? moe_layers_of_stage(model, config, stage) / stage_layers : 0.0;
    // Recomputed and kept layers are priced at the stage's mean MoE share (the first dense layers
    // of a DeepSeek-style model are not singled out as the ones a chunk recomputes first).
    const double recomputed_share =
        stage_layers > 0 && config.recompute == RecomputeMode::full
            ? static_cast<double>(recomputed_layers_of_stage(config, stage_layers)) / stage_layers
            : 1.0;
    const auto at_moe_share = [moe_share](double dense, double moe) { return (1 - moe_share) * dense + moe_share * moe; };
    const double mean_layer_activation =
        recomputed_share * at_moe_share(per_layer_activation, per_moe_layer_activation) +
        (1 - recomputed_share) * at_moe_share(per_kept_layer_activation, per_kept_moe_layer_activation);
    // A stage without layers (pp > layers) runs no layer backward: no layer working set.
    // Every stage with layers recomputes at least one of them (min(N, chunk layers) >= 1), so its
    // working set holds the recompute transient whenever the plan recomputes.
    const double stage_working_set = stage_layers > 0 ? working_set : 0.0;
    const double one_chunk_activation = layers_per_chunk * mean_layer_activation;
    memory.activations_bytes = overheads.activation_memory_factor * (chunks * one_chunk_activation + stage_working_set);
    // At each backward's end the finished micro-batch's activations and the layer working set are
    // gone, the other in-flight micro-batches' are not; a stack whose optimizer adds autograd's
    // 16-bit gradients into its fp32 buffer then holds more than the working set beside them. (The
    // last rank's logits, which activation_peak_bytes adds, are gone too: there it errs high by them.)
    const double after_backward = overheads.activation_memory_factor * (chunks - 1) * one_chunk_activation;
    double backward_end_bytes = 0;
    if (stack.sixteen_bit_gradients == SixteenBitGradients::kept_through_the_next_forward &&
        training.precision == Precision::bf16 && training.gradients_in_fp32) {
      // BF16_Optimizer's add, hp_grad.add_(lp.grad.to(fp32)) (bf16_optimizer.py @edaa7221 l.371;
      // @77b649d1 l.284), casts one parameter's gradient whole (the .grads themselves are in the
      // model state, bytes_per_parameter).
      backward_end_bytes = 4 * largest_parameter_elements(model, config, held);
    }
    if (stack.sixteen_bit_gradients == SixteenBitGradients::dropped_after_each_backward &&
        sixteen_bit_gradients_accumulated_in_fp32(training)) {
      // FP32GradientAccumulator.backward runs loss.backward() whole and only then adds each 16-bit
      // .grad into the fp32 buffer and sets it to None (nanotron optim/gradient_accumulator.py
      // @2411b022 l.206-226; the same at @a27e8fe8): every parameter's 16-bit gradient at once. The
      // mixed-dtype add_ casts element by element, with no fp32 copy. Under DDP the Reducer copies
      // each .grad into its bucket and leaves it allocated all the same (gradient_as_bucket_view off).
      backward_end_bytes = 2 * parameters;
    }
    if (after_backward + backward_end_bytes > memory.activations_bytes) {
      memory.activations_bytes = after_backward + backward_end_bytes;
      memory.backward_end_bytes = backward_end_bytes;
    }
    if (held.embedding && model.embedding_norm) {
      // The embedding's LayerNorm runs outside the (checkpointed) layers, on the rank holding the
      // embedding (bigscience-workshop/Megatron-DeepSpeed @8387ae17 megatron/mpu/layers.py l.195,
      // 248-249), and apex's fused LayerNorm saves its whole input and the fp32 mean and inverse
      // variance of every token (megatron/model/fused_layer_norm.py l.40-49), for each in-flight
      // micro-batch of the first model chunk (with interleaving, a virtual_stages-th of the chunks).
      memory.activations_bytes += overheads.activation_memory_factor * chunks / config.virtual_stages * tokens *
                                  (model.hidden_size * value_bytes + 2 * 4.0);
    }

    if (held.head || held.loss) {
      // One micro-batch at a time reaches the loss (its backward follows at once): the final norm's
      // input and output (the output layer's saved input), the fp32 logits that Megatron's
      // vocab-parallel cross entropy turns in place into the softmax it keeps for backward (4 bytes,
      // tensor_parallel/cross_entropy.py @d98e8a64 l.25, 61-77, 181), and beside them the 16-bit
      // logits out of the output GEMM in the forward, the 16-bit cast of the fp32 logit gradient in
      // the backward (2 bytes).
      const double vocab_shard = static_cast<double>(model.vocab_size) / config.tp;
      // Stacks whose loss copies the logits out of place keep more at that peak (stack_profile.hpp).
      // nanotron's partition can hold the head (the norm terms) and the loss (the logit terms) on
      // different ranks; a rank with the head alone keeps its 16-bit logits until they are sent.
      const double final_norm_bytes =
          held.head ? 2 * tokens * model.hidden_size * value_bytes / (config.sequence_parallel ? config.tp : 1) : 0.0;
      memory.logits_and_loss_bytes =
          final_norm_bytes +
          tokens * vocab_shard * (held.loss ? 4.0 + value_bytes + stack.extra_logits_bytes_per_element : value_bytes);
      if (training.pipeline_schedule == PipelineSchedule::all_forward_all_backward) {
        // All forward, all backward: every other micro-batch's backward is still to come, so the
        // final norm's saved tensors and the loss's fp32 softmax stay for each of them (a rank
        // that holds the lm_head alone sends its logits after each forward and keeps none).
        memory.logits_and_loss_bytes +=
            (microbatches - 1) * (final_norm_bytes + (held.loss ? 4.0 * tokens * vocab_shard : 0.0));
      }
    }
    const double allocated = memory.weights_bytes + memory.gradients_bytes + memory.optimizer_state_bytes +
                             memory.activations_bytes + memory.logits_and_loss_bytes;
    // PyTorch's caching allocator serves a request no cached free block can hold with a new
    // segment of its own size (rounded to 2 MiB: c10/cuda/CUDACachingAllocator.cpp, kRoundLarge),
    // however much free space lies in smaller fragments; at the peak up to one largest transient
    // request of such space sits reserved beside what is allocated.
    const double largest_request = overheads.expandable_segments ? 0.0
                                   : held.head || held.loss
                                       ? std::max(largest_layer_request, tokens * model.vocab_size / config.tp *
                                                                             (held.loss ? 4.0 : value_bytes))
                                       : largest_layer_request;
    const double outside_allocator =
        overheads.cuda_context_bytes + overheads.nccl_buffer_bytes_per_communicator * communicators_of_stage(config, stage);
    memory.runtime_overhead_bytes = outside_allocator + overheads.allocator_fragmentation_fraction * allocated + largest_request;
    // The optimizer step runs after the last backward has freed the activations and logits, and
    // its own allocations (the per-parameter fp32 gradient copies) are served from the blocks they
    // left cached: the same fragmentation share, no largest request of its own.
    memory.step_runtime_overhead_bytes =
        outside_allocator +
        overheads.allocator_fragmentation_fraction * (memory.model_state_bytes() + memory.step_gradients_bytes);
  }
  return stages;
}

double caching_allocator_bytes(const StageMemory& memory, const ParallelConfig& config, int stage,
                               const RuntimeOverheads& overheads) {
  return memory.total_bytes() - overheads.cuda_context_bytes -
         overheads.nccl_buffer_bytes_per_communicator * communicators_of_stage(config, stage);
}

}  // namespace pipette
