#include "pipette/core/performance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/pipeline_blocks.hpp"
#include "pipette/core/simulator.hpp"
#include "pipette/core/stack_profile.hpp"
#include "performance_internal.hpp"

namespace pipette {

ComputeEfficiency fitted_compute_efficiency() {
  // Fitted by `build/bench/fidelity/fidelity --fit` (coordinate descent on the squared log error of
  // predicted vs published iteration time or tokens/s) on every other configuration of three
  // published sources in ../shared/ground_truth_data/: megatron_sc21_table1.csv (A100, fp16),
  // korthikanti2022_tables.csv Table 5 (A100, bf16) and the dense DGX-H100 rows of
  // nvidia_nemo_megatron_bridge_perf_summary.csv (fp8); the other half is held out. Bounds are
  // physical ceilings (GEMMs ≤ the best tuned matmul of the GPU they are fitted on, flash
  // attention ≤ 75%, HBM ≤ 90%); the 16-bit fraction sits at A100's. The fitted and the
  // held-out errors are in bench/RESULTS.md. The 16-bit GEMM fraction comes from A100 data; on a
  // GPU whose attainable bf16 matmul share of peak is measured (gpu_catalog.cpp) it is scaled by
  // that share over A100's, elsewhere used as it is. The fp8 fraction comes from H100 data, so it
  // already carries H100's power-limited clock and is not scaled: MAMF's fp8 table has no other
  // catalog GPU to scale it to. Flash attention's fraction, fitted only on H100 fp8 rows (its 16-bit
  // kernels), likewise. The chunk-pass overhead is a prior (fitting it too overfits: the held-out
  // error grows), not a fitted value.
  ComputeEfficiency efficiency;
  efficiency.gemm_fraction_16bit = 0.8692;
  efficiency.fitted_gpu_attainable_16bit_matmul_fraction = find_gpu("A100-80GB")->attainable_16bit_matmul_fraction;
  efficiency.gemm_fraction_fp8 = 0.6025;
  efficiency.attention_fraction = 0.75;
  efficiency.memory_fraction = 0.7263;
  efficiency.layer_overhead_seconds = 112e-6;
  efficiency.chunk_pass_overhead_seconds = 100e-6;
  // Lee et al. 2025, "Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed
  // Deep Learning" (arXiv 2507.03114, abstract): GPT and Llama training steps on 4 A100, H100,
  // MI250 and MI210 GPUs, compute overlapped with communication ran 18.9% slower on average (up to
  // 40%) than the same compute alone. Taken as it is, not fitted; bench/RESULTS.md shows what it
  // moves.
  efficiency.overlapped_compute_slowdown = 0.189;
  return efficiency;
}

namespace {

// Bytes of one activation element as the kernels read and write it.
double activation_bytes_of(Precision precision) { return precision == Precision::fp32 ? 4.0 : 2.0; }

struct Roofs {
  double gemm_flop_per_second = 0;       // matrix math in the training precision
  double attention_flop_per_second = 0;  // flash attention (16-bit even in fp8 recipes)
  double unfused_attention_flop_per_second = 0;  // the batched 16-bit GEMMs of unfused attention
  double memory_bytes_per_second = 0;
  double gemm_input_bytes = 2;           // per operand element
};

// Tuned matmuls reach a smaller share of the datasheet peak on some GPUs than on the one the
// 16-bit fraction was fitted on (H100 SXM cannot hold its boost clock at 700 W under dense
// tensor-core load); Megatron's GEMMs lose the same share. Unmeasured GPUs keep the fitted fraction.
double gemm_fraction_16bit_on(const GpuSpec& gpu, const ComputeEfficiency& efficiency) {
  if (!(gpu.attainable_16bit_matmul_fraction > 0) || !(efficiency.fitted_gpu_attainable_16bit_matmul_fraction > 0))
    return efficiency.gemm_fraction_16bit;
  return efficiency.gemm_fraction_16bit * gpu.attainable_16bit_matmul_fraction /
         efficiency.fitted_gpu_attainable_16bit_matmul_fraction;
}

Roofs roofs_of(const GpuSpec& gpu, Precision precision, const ComputeEfficiency& efficiency) {
  Roofs roofs;
  // fp32 GEMMs run on CUDA cores, which MAMF's tensor-core figure says nothing about.
  const double gemm_fraction_16bit =
      precision == Precision::fp32 ? efficiency.gemm_fraction_16bit : gemm_fraction_16bit_on(gpu, efficiency);
  const double peak16 = std::max(gpu.peak_bf16_flop_per_second, gpu.peak_fp16_flop_per_second);
  if (precision == Precision::fp8 && gpu.peak_fp8_flop_per_second > 0) {
    roofs.gemm_flop_per_second = efficiency.gemm_fraction_fp8 * gpu.peak_fp8_flop_per_second;
    roofs.gemm_input_bytes = 1;
  } else {
    const double peak = precision == Precision::fp32 ? gpu.peak_fp32_flop_per_second
                                                     : std::max(peak_flop_per_second(gpu, precision), peak16);
    roofs.gemm_flop_per_second = gemm_fraction_16bit * peak;
    roofs.gemm_input_bytes = activation_bytes_of(precision);
  }
  const double attention_peak = precision == Precision::fp32 ? gpu.peak_fp32_flop_per_second : peak16;
  roofs.attention_flop_per_second = efficiency.attention_fraction * attention_peak;
  roofs.unfused_attention_flop_per_second = gemm_fraction_16bit * attention_peak;
  roofs.memory_bytes_per_second = efficiency.memory_fraction * gpu.hbm_bytes_per_second;
  return roofs;
}

// Bytes per element an RMSNorm's forward moves beyond a fused kernel's (read the input, write the
// output) when it runs as eager composite ops over an fp32 copy, torchtitan's RMSNorm before 2025
// (torchtitan/models/norms.py @9dec370 l.96-101: x.float(), pow, mean, rsqrt, x * rsqrt, type_as,
// * weight) as PyTorch's composite rms_norm runs nn.RMSNorm: the cast up (read v, write 4), pow
// (4 + 4), mean (4), the multiply (4 + 4) and the cast back (read 4, write v), v being the
// training precision's bytes (in fp32 the casts are no-ops); the weight's multiply (v + v) moves
// what the fused kernel moves in all.
double composite_rms_norm_extra_bytes(double value_bytes) {
  const double casts = value_bytes == 4.0 ? 0.0 : (value_bytes + 4) + (4 + value_bytes);
  return casts + (4 + 4) + 4 + (4 + 4);
}

// One GEMM C[M×N] = A[M×K]·B[K×N]: compute roof plus operand traffic (an additive roofline, so
// small shapes are memory bound and large ones approach the compute roof smoothly).
double gemm_seconds(double m, double n, double k, const Roofs& roofs, double output_bytes) {
  return 2 * m * n * k / roofs.gemm_flop_per_second +
         (roofs.gemm_input_bytes * (m * k + k * n) + output_bytes * m * n) / roofs.memory_bytes_per_second;
}

// Forward and backward (dgrad + wgrad) of a linear layer with `tokens` rows.
struct PassSeconds {
  double forward = 0;
  double backward = 0;
};

PassSeconds linear_seconds(double tokens, double out_features, double in_features, const Roofs& roofs,
                           double activation_bytes) {
  return {gemm_seconds(tokens, out_features, in_features, roofs, activation_bytes),
          gemm_seconds(tokens, in_features, out_features, roofs, activation_bytes) +
              gemm_seconds(in_features, out_features, tokens, roofs, 4.0 /* fp32 main grad */)};
}

// The projections into Q, K and V. Standard attention: one column-parallel QKV GEMM. Multi-latent
// attention (multi_latent_attention.py @d98e8a64 l.638-664, 862-875): the down projections,
// replicated on every TP rank and run on the rank's s/tp tokens with sequence parallelism (all s
// without), then the column-parallel up projections (or linear_q_proj without a Q latent) on all
// tokens.
struct QkvSeconds {
  PassSeconds column_parallel;
  PassSeconds replicated;
};

QkvSeconds qkv_projection_seconds(const ModelSpec& model, const ParallelConfig& config, double tokens,
                                  const Roofs& roofs, double value_bytes) {
  const double t = config.tp;
  const double h = model.hidden_size;
  QkvSeconds qkv;
  if (!model.is_mla()) {
    const double q = model.query_hidden_size();
    const double kv = model.kv_hidden_size();
    qkv.column_parallel = linear_seconds(tokens, (q + 2 * kv) / t, h, roofs, value_bytes);
    return qkv;
  }
  const double q_lora = model.q_lora_rank;
  const double down_tokens = config.sequence_parallel ? tokens / t : tokens;
  const double down_width = q_lora + model.kv_lora_rank + model.qk_pos_emb_head_dim;
  qkv.replicated = linear_seconds(down_tokens, down_width, h, roofs, value_bytes);
  const PassSeconds q_up = linear_seconds(tokens, model.query_width() / t, q_lora > 0 ? q_lora : h, roofs, value_bytes);
  const PassSeconds kv_up = linear_seconds(
      tokens, static_cast<double>(model.num_attention_heads) * (model.qk_head_dim + model.v_head_dim) / t,
      model.kv_lora_rank, roofs, value_bytes);
  qkv.column_parallel = {q_up.forward + kv_up.forward, q_up.backward + kv_up.backward};
  return qkv;
}

struct LayerCost {
  PassSeconds total;
  PassSeconds attention;  // the attention core, which ring attention splits into cp steps
  double recompute_seconds = 0;  // added to the backward pass
  // Backward (dgrad + wgrad) of the column-parallel GEMMs, QKV and fc1: what their asynchronous
  // TP collectives run beside.
  double column_parallel_backward_seconds = 0;
};

// `mlp_width`: the TP-split MLP's width (the dense MLP, or an MoE layer's shared expert; 0 for an
// MoE layer without one, whose routed experts moe_layer_cost prices).
LayerCost layer_cost(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config,
                     const Roofs& roofs, const ComputeEfficiency& efficiency, double mlp_width) {
  const double t = config.tp;
  const double s = training.sequence_length;
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const double h = model.hidden_size;
  const double q = model.query_width();
  const double k = model.key_width();
  const double v = model.value_width();
  const double o = model.attention_output_width();
  const double f = mlp_width;
  const double a = model.num_attention_heads;
  const double value_bytes = activation_bytes_of(training.precision);
  const bool swiglu = model.ffn_kind == FfnKind::swiglu;

  PassSeconds gemms;
  const QkvSeconds qkv = qkv_projection_seconds(model, config, tokens, roofs, value_bytes);
  const PassSeconds fc1 = f > 0 ? linear_seconds(tokens, (swiglu ? 2 : 1) * f / t, h, roofs, value_bytes) : PassSeconds{};
  const PassSeconds fc2 = f > 0 ? linear_seconds(tokens, h, f / t, roofs, value_bytes) : PassSeconds{};
  for (const PassSeconds& linear : {qkv.column_parallel, qkv.replicated, linear_seconds(tokens, h, o / t, roofs, value_bytes), fc1, fc2}) {
    gemms.forward += linear.forward;
    gemms.backward += linear.backward;
  }

  // Attention core of a/t heads: the rank's s/cp queries against all s keys (under context
  // parallelism the ring brings the other ranks' keys; load balancing gives every rank the same
  // share of the causal work, see cp_ring_work).
  PassSeconds attention;
  const double score_elements = config.micro_batch * (a / t) * (tokens / config.micro_batch) * s;
  const double core_flops = 2 * score_elements * ((q + o) / a);  // QK^T (q/a wide) and attention·V (o/a wide)
  const StackProfile& stack = stack_profile(training.target.framework);
  if (training.attention == AttentionKernel::flash) {
    // Causal flash attention skips the masked half; its backward recomputes the scores (2.5× the
    // forward's FLOPs) at the kernel's backward rate. The fitted rate is Transformer Engine's cuDNN
    // forward at 128-wide heads; other kernels, head widths and the backward scale it
    // (stack_profile.hpp).
    const FlashAttentionSpeed kernel_speed = flash_attention_speed_vs_reference(stack.flash_kernel, q / a);
    const double forward_flops = 0.5 * core_flops;
    attention.forward = forward_flops / (roofs.attention_flop_per_second * kernel_speed.forward);
    attention.backward = 2.5 * forward_flops / (roofs.attention_flop_per_second * kernel_speed.backward);
  } else {
    // Megatron's unfused path: full s×s batched GEMMs, then scale-mask-softmax and dropout passes
    // over the score tensor (write scores, softmax read/write, dropout read/write + mask, read by
    // the second GEMM: 13 bytes per score element forward, twice that backward).
    const double traffic = 13 * score_elements / roofs.memory_bytes_per_second;
    attention.forward = core_flops / roofs.unfused_attention_flop_per_second + traffic;
    attention.backward = 2 * attention.forward;
    // ALiBi: the bias (b·np × 1 × s, broadcast) is QK^T's baddbmm input with beta 1
    // (bigscience-workshop/Megatron-DeepSpeed @8387ae17 megatron/model/transformer.py l.283-291,
    // 319-323), so PyTorch first copies its expansion into the result (write the scores) and the
    // GEMM then reads it (beta != 0): two more 16-bit passes over the scores, forward only (the
    // bias is a buffer, no gradient).
    if (model.alibi) attention.forward += 2 * value_bytes * score_elements / roofs.memory_bytes_per_second;
  }
  if (config.cp > 1) {
    // Ring attention's per-step merges (Transformer Engine, dot_product_attention/context_parallel.py
    // @d0067d0d): the forward rescales each step's output into an fp32 accumulator by the
    // log-sum-exp correction (read the step's output, read and write fp32: l.1919-2025); the
    // backward accumulates each step's dQ and dK/dV into their buffers (read both, write one,
    // l.2650-2800). Memory-bound, cp times per layer.
    const double outputs = tokens * o / t;
    const double key_values = tokens * (k + v) / t;
    attention.forward += config.cp * outputs * (value_bytes + 8) / roofs.memory_bytes_per_second;
    attention.backward += config.cp * (outputs + key_values) * 3 * value_bytes / roofs.memory_bytes_per_second;
  }

  // Memory-bound elementwise work per token: two norms and two dropout + residual adds over the
  // hidden state (~20 bytes per element; computed once per TP rank, so split only with sequence
  // parallelism), the MLP activation (bias-GeLU reads and writes f, SwiGLU reads 2f writes f), and
  // in fp8 the casts of the GEMM inputs that are not fused into a norm (read 2, write 1 byte).
  // A stack that does not fuse them (stack_profile.hpp) moves more: an unfused SwiGLU's two passes,
  // layout copies of Q, K and V, an unfused RoPE.
  const double hidden_per_rank = config.sequence_parallel ? h / t : h;
  double elementwise_bytes =
      tokens * (20 * hidden_per_rank + value_bytes * (swiglu ? stack.swiglu_forward_ffn_accesses : 2) * f / t);
  if (training.precision == Precision::fp8) elementwise_bytes += tokens * 3 * (h / t + f / t);
  if (composite_rms_norms(model, training))
    elementwise_bytes += tokens * 2 * composite_rms_norm_extra_bytes(value_bytes) * hidden_per_rank;
  elementwise_bytes += tokens * value_bytes *
                       (2 * (stack.qkv_copy_passes * (q + (k + v)) + stack.kv_copy_passes * (k + v)) +
                        (model.rotary() ? stack.rotary_extra_accesses * (q + k) : 0)) / t;
  if (stack.attention_output_folded_copy && config.micro_batch > 1) elementwise_bytes += tokens * value_bytes * 2 * o / t;
  const double elementwise = elementwise_bytes / roofs.memory_bytes_per_second;

  LayerCost cost;
  cost.attention = attention;
  cost.total.forward = gemms.forward + attention.forward + elementwise + efficiency.layer_overhead_seconds;
  cost.total.backward = gemms.backward + attention.backward + 2 * elementwise + 2 * efficiency.layer_overhead_seconds;
  cost.column_parallel_backward_seconds = qkv.column_parallel.backward + fc1.backward;
  if (config.recompute == RecomputeMode::full) cost.recompute_seconds = cost.total.forward;
  if (config.recompute == RecomputeMode::selective) {
    if (stack.selective_recompute == SelectiveRecompute::every_other_linear) {
      // The block's forward again, but the attention kernel and the first, third, ... linear,
      // whose outputs were saved: the second, fourth, ... (wk, wo, w3 of a SwiGLU block; wk, wo of a
      // GELU one) and every elementwise pass.
      const std::vector<BlockLinear> linears = block_linears_in_forward_order(model);
      cost.recompute_seconds = elementwise + efficiency.layer_overhead_seconds;
      for (std::size_t index = 1; index < linears.size(); index += 2) {
        const BlockLinear& linear = linears[index];
        cost.recompute_seconds += linear_seconds(tokens, linear.row_parallel ? linear.out_features : linear.out_features / t,
                                                 linear.row_parallel ? linear.in_features / t : linear.in_features, roofs,
                                                 value_bytes).forward;
      }
    } else {
      cost.recompute_seconds = attention.forward;
    }
  }
  return cost;
}

// The routed half of an MoE layer on one rank for one micro-batch, beyond the attention and shared
// expert layer_cost prices:
//  - the router GEMM (h → num_experts over the rank's s·b/tp tokens, fp32 logits) and its top-k;
//  - the permutation before dispatch and the weighted un-permutation after combine (read and write
//    every routed copy, forward and backward);
//  - the experts as Megatron's grouped GEMM runs them (--moe-grouped-gemm, TEGroupedMLP /
//    GroupedMLP in experts.py): num_experts/ep GEMMs of the tokens routed to each expert. Each is
//    priced by the same additive roofline as a dense GEMM, so small per-expert token counts are
//    bound by reading the expert's weights: the grouped GEMM's efficiency loss at many experts and
//    few tokens is that weight traffic, not a fitted factor. The busiest rank receives
//    expert_load_imbalance_factor times the mean.
LayerCost moe_layer_cost(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config,
                         const Roofs& roofs) {
  LayerCost cost;
  if (!model.is_moe()) return cost;
  const double tokens_in =
      local_sequence_length(training, config) * config.micro_batch / (config.sequence_parallel ? config.tp : 1);
  const double h = model.hidden_size;
  const double value_bytes = activation_bytes_of(training.precision);
  const bool swiglu = model.ffn_kind == FfnKind::swiglu;
  const double copies = tokens_in * model.router_topk * config.etp * training.expert_load_imbalance_factor;
  const double local_experts = static_cast<double>(model.num_experts) / config.ep;
  const double per_expert_tokens = copies / local_experts;
  const double f_shard = static_cast<double>(model.moe_ffn_hidden_size) / config.etp;
  const PassSeconds fc1 = linear_seconds(per_expert_tokens, (swiglu ? 2 : 1) * f_shard, h, roofs, value_bytes);
  const PassSeconds fc2 = linear_seconds(per_expert_tokens, h, f_shard, roofs, value_bytes);
  // The router runs in fp32 on 16-bit inputs (--moe-router-dtype fp32 in the recipes): roofed by
  // reading its input and writing fp32 logits, a sliver of the layer either way.
  const double router_flops = 2 * tokens_in * h * model.num_experts;
  const double router_bytes = tokens_in * (h * value_bytes + model.num_experts * 4.0 * 3);
  const double router = router_flops / roofs.gemm_flop_per_second + router_bytes / roofs.memory_bytes_per_second;
  const double permutation = 2 * 2 * copies * h * value_bytes / roofs.memory_bytes_per_second;  // permute + unpermute
  const double activation = copies * f_shard * (swiglu ? 3 : 2) * value_bytes / roofs.memory_bytes_per_second;
  cost.total.forward = local_experts * (fc1.forward + fc2.forward) + router + permutation + activation;
  cost.total.backward = local_experts * (fc1.backward + fc2.backward) + 2 * (router + permutation + activation);
  if (config.recompute == RecomputeMode::full) {
    cost.recompute_seconds = cost.total.forward;
  } else if (training.recompute_moe_activation) {
    // --recompute-modules moe_act re-runs the activation before fc2's backward (experts.py
    // @d98e8a64 l.1020-1030): its forward pass once more.
    cost.recompute_seconds = activation;
  }
  return cost;
}

// The LM head (output GEMM in 16 bits, as Transformer Engine keeps it, and the vocab-parallel
// cross entropy: the bytes per logit the stack's loss kernels move, stack_profile.hpp) on the last
// stage; the embedding lookup and its fp32 gradient scatter on the first.
// `gemm` and `loss` are the two parts on their own, for nanotron's partition, which can put the
// loss on a later rank than the lm_head (pipeline_blocks.hpp); `both` is their sum as one rank runs it.
struct HeadSeconds {
  PassSeconds gemm;
  PassSeconds loss;
  PassSeconds both;
};

HeadSeconds head_cost(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config,
                      const GpuSpec& gpu, const ComputeEfficiency& efficiency) {
  const Precision head_precision = training.precision == Precision::fp8 ? Precision::bf16 : training.precision;
  const Roofs roofs = roofs_of(gpu, head_precision, efficiency);
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const double vocab_shard = static_cast<double>(model.vocab_size) / config.tp;
  HeadSeconds head;
  head.gemm = linear_seconds(tokens, vocab_shard, model.hidden_size, roofs, activation_bytes_of(head_precision));
  const StackProfile& stack = stack_profile(training.target.framework);
  const LossKernels& loss = training.cross_entropy_fusion && stack.fused_loss ? *stack.fused_loss : stack.loss;
  const double cast_bytes = loss.casts_logits_to_fp32 && head_precision != Precision::fp32 ? 2.0 + 4.0 : 0.0;
  const double logits = tokens * vocab_shard;
  head.loss = {(loss.forward_bytes_per_logit + cast_bytes) * logits / roofs.memory_bytes_per_second,
               (loss.backward_bytes_per_logit + cast_bytes) * logits / roofs.memory_bytes_per_second};
  head.both = head.gemm;
  head.both.forward += head.loss.forward;
  head.both.backward += head.loss.backward;
  return head;
}

PassSeconds embedding_cost(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config,
                           const Roofs& roofs) {
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const double elements = tokens * model.hidden_size;
  return {8 * elements / roofs.memory_bytes_per_second, 10 * elements / roofs.memory_bytes_per_second};
}

int num_microbatches_of(const TrainingSpec& training, const ParallelConfig& config) {
  return static_cast<int>(training.global_batch_sequences / (static_cast<std::int64_t>(config.dp) * config.micro_batch));
}

// Adam step traffic per parameter: read fp32 master, grad, m, v and write master, m, v and the
// 16-bit copy (30 bytes), plus zeroing the grad buffer and the gradient-norm read (8 bytes).
constexpr double optimizer_bytes_per_parameter = 38;

// Weight-matrix elements of one layer (each does one multiply-add per token): QKV, output
// projection and the two (GeLU) or three (SwiGLU) MLP matrices.
double weight_elements_per_layer(const ModelSpec& model) {
  const double h = model.hidden_size;
  const double f = model.ffn_hidden_size;
  return static_cast<double>(attention_weight_elements(model).total()) + (model.ffn_kind == FfnKind::swiglu ? 3 : 2) * h * f;
}

// An MoE layer's weight elements one token multiplies: attention, router, shared expert and its
// router_topk routed experts.
double active_weight_elements_per_moe_layer(const ModelSpec& model) {
  const double h = model.hidden_size;
  const double mlp_matrices = model.ffn_kind == FfnKind::swiglu ? 3 : 2;
  ModelSpec attention_only = model;
  attention_only.ffn_hidden_size = 0;
  return weight_elements_per_layer(attention_only) + h * model.num_experts +
         mlp_matrices * h * (model.shared_expert_ffn_hidden_size + static_cast<double>(model.router_topk) * model.moe_ffn_hidden_size);
}

// The s×s attention core's FLOPs per query and key are 2·(QKᵀ width + attention·V width) over
// the heads: 4 × this mean width (query_hidden_size unless MLA's Q/K and V heads differ).
double attention_core_width(const ModelSpec& model) {
  return model.is_mla() ? (static_cast<double>(model.query_width()) + model.attention_output_width()) / 2
                        : model.query_hidden_size();
}

// Mean over the model's layers (dense and MoE).
double mean_active_weight_elements_per_layer(const ModelSpec& model) {
  if (!model.is_moe()) return weight_elements_per_layer(model);
  const double moe_share = static_cast<double>(model.moe_layers()) / model.num_layers;
  return (1 - moe_share) * weight_elements_per_layer(model) + moe_share * active_weight_elements_per_moe_layer(model);
}

// The collectives a stage's gradient reduction is issued in and the share of each model chunk's
// reduction that waits for its backward to end (StageWork), as the stack's buckets
// (StackProfile::gradient_buckets) cut the stage's dense and expert parameters. `first_parameters`:
// the stage's first parameters, which the backward reaches last (the word embedding's shard on the
// first stage): their bucket is at least that large. `block_parameters`: one transformer block's
// on the rank, for stacks that bucket per block.
void set_gradient_buckets(StageWork& work, const TrainingSpec& training, const ParallelConfig& config, int stage,
                          double dense_parameters, double expert_parameters, double first_parameters,
                          double block_parameters) {
  if (config.dp_cp() <= 1 || config.fully_sharded) return;
  const GradientBuckets& buckets = stack_profile(training.target.framework).gradient_buckets;
  const int chunks = effective_virtual_stages(config);
  const bool overlapped = gradient_reduction_overlapped(config, training);
  const double bucket = buckets.per_block ? block_parameters
                                          : std::max(buckets.parameters, buckets.parameters_per_dp_rank * config.dp_cp());
  const auto bucketed = [&](int chunk) {
    return overlapped && bucket > 0 && (!buckets.first_stage_first_chunk_only || (stage == 0 && chunk == 0));
  };
  const auto collectives_of = [&](double parameters) {
    int collectives = 0;
    for (int chunk = 0; chunk < chunks; ++chunk)
      collectives += bucketed(chunk) ? std::max(1, static_cast<int>(std::ceil(parameters / chunks / bucket))) : 1;
    return collectives;
  };
  work.gradient_reduction_collectives = collectives_of(dense_parameters);
  work.expert_gradient_reduction_collectives = collectives_of(expert_parameters);
  const double chunk_parameters = dense_parameters / chunks;
  const auto tail_share = [&](int chunk, double last_bucket_parameters) {
    if (!bucketed(chunk) || !(chunk_parameters > 0)) return 1.0;
    return std::min(1.0, last_bucket_parameters / chunk_parameters);
  };
  work.first_chunk_gradient_tail_share = tail_share(0, std::max(bucket, first_parameters));
  work.later_chunk_gradient_tail_share = tail_share(1, bucket);
}

}  // namespace

double layer_forward_flops(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config) {
  const double tokens = local_sequence_length(training, config) * config.micro_batch;
  const double causal_share = training.attention == AttentionKernel::flash ? 0.5 : 1.0;
  const double attention = 4 * tokens * training.sequence_length * attention_core_width(model) * causal_share;
  return (2 * tokens * mean_active_weight_elements_per_layer(model) + attention) / config.tp;
}

WorkProfile profile_work(const ModelSpec& model, const TrainingSpec& training, const GpuSpec& gpu,
                         const ParallelConfig& config) {
  return profile_work(model, training, gpu, config, fitted_compute_efficiency());
}

WorkProfile profile_work(const ModelSpec& model, const TrainingSpec& training, const GpuSpec& gpu,
                         const ParallelConfig& config, const ComputeEfficiency& efficiency) {
  const PipelineBlocks blocks = pipeline_blocks(model, training.target.framework, config);
  const StackProfile& stack = stack_profile(training.target.framework);
  const Roofs roofs = roofs_of(gpu, training.precision, efficiency);
  const LayerCost layer = layer_cost(model, training, config, roofs, efficiency, model.ffn_hidden_size);
  // An MoE layer: attention and shared expert as a dense layer of the shared width, then the
  // routed experts.
  LayerCost moe_layer;
  if (model.is_moe()) {
    moe_layer = layer_cost(model, training, config, roofs, efficiency, model.shared_expert_ffn_hidden_size);
    const LayerCost routed = moe_layer_cost(model, training, config, roofs);
    moe_layer.total.forward += routed.total.forward;
    moe_layer.total.backward += routed.total.backward;
    moe_layer.recompute_seconds += routed.recompute_seconds;
  }
  const HeadSeconds head = head_cost(model, training, config, gpu, efficiency);
  // Which selective recompute runs (stack_profile.hpp): Megatron's re-runs the attention core (and
  // its ring under context parallelism), torchtitan's the operators it did not save.
  const bool selective = config.recompute == RecomputeMode::selective;
  const bool recomputes_attention_core = selective && stack.selective_recompute == SelectiveRecompute::attention_core;
  const bool recomputes_per_operator = selective && stack.selective_recompute == SelectiveRecompute::every_other_linear;
  const PassSeconds embedding = embedding_cost(model, training, config, roofs);
  const double value_bytes = activation_bytes_of(training.precision);
  const double activation_message = local_sequence_length(training, config) * config.micro_batch *
                                    model.hidden_size * value_bytes;
  // TP collectives of one layer, in all-reduce equivalents of the b·s·h activation (an all-gather or
  // a reduce-scatter alone is half of one), as Megatron-core with Transformer Engine issues them by
  // default (no --tp-comm-overlap):
  //  - forward: after the attention and the MLP (all-reduce, or with SP reduce-scatter), and with SP
  //    an all-gather before QKV and fc1: 2, exposed; a recomputed forward repeats them;
  //  - backward of the column-parallel QKV and fc1: their input-gradient all-reduce (SP:
  //    reduce-scatter) starts asynchronously and runs beside the wgrad GEMM, and with SP the
  //    re-gather of the norm output they saved as a shard runs beside the dgrad GEMM
  //    (TE layernorm_linear.py @d0067d0d l.780-800 and 889-910, async_op=True): hideable, 2 without
  //    SP, 1 + 1 with it;
  //  - backward of the row-parallel projection and fc2 with SP: the all-gather of their output
  //    gradient, synchronous before their dgrad (TE module/base.py grad_output_preprocess l.1702-1709):
  //    1, exposed.
  const bool sp = config.sequence_parallel;
  // Multi-latent attention's column-parallel collectives carry its latents, not h: the up
  // projections gather their q_lora- and kv_lora-wide inputs with SP and reduce those inputs'
  // gradients, and the shared RoPE key is gathered with SP (multi_latent_attention.py @d98e8a64
  // l.638-664, 753-763; the down projections, replicated, issue none). Of the counts above, the
  // all-gather before QKV (half an all-reduce) and QKV's hideable backward (one) shrink to
  // latent/h of the h-wide message; the count of collectives, for latency, stays.
  const double qkv_width =
      model.is_mla() ? static_cast<double>(model.q_lora_rank + model.kv_lora_rank + model.qk_pos_emb_head_dim) / model.hidden_size
                     : 1.0;
  // A layer that full recompute re-runs (recomputed_layers_of_stage) issues its forward's two
  // collectives again, in the backward.
  const int layer_all_reduces = 2 + 2 + (sp ? 1 : 0);
  const int recomputed_layer_all_reduces = layer_all_reduces + 2;
  const double issued_forward_per_layer = sp ? 1.5 + 0.5 * qkv_width : 2;
  // With SP, half of each column-parallel backward's equivalent is the re-gather of its saved input
  // shard; a stack that saved the gathered input (tensor_parallel_recompute_allgather off, nanotron
  // parallel/tensor_parallel/functional.py @2411b022 l.509-518) issues only the reduce-scatter.
  const double regathered_share = sp && !training.tensor_parallel_recompute_allgather ? 0.5 : 1.0;
  const double hideable_per_layer = regathered_share * (1 + qkv_width);
  const double exposed_backward_per_layer = sp ? 1 : 0;
  const double layer_all_reduce_equivalents = issued_forward_per_layer + hideable_per_layer + exposed_backward_per_layer;
  const double recomputed_layer_all_reduce_equivalents =
      2 * issued_forward_per_layer + hideable_per_layer + exposed_backward_per_layer;
  const double gradient_bytes = training.precision == Precision::fp32 || training.gradients_in_fp32 ? 4.0 : 2.0;
  const double optimizer_shard = config.distributed_optimizer || config.fully_sharded ? 1.0 / config.dp_cp() : 1.0;

  WorkProfile work;
  work.num_microbatches = num_microbatches_of(training, config);
  work.virtual_stages = config.virtual_stages;
  work.pipeline_schedule = training.pipeline_schedule;
  work.boundary_exchange = stack.pipeline_exchange;
  // A stack that partitions its pipeline messages (stack_profile.hpp) sends each TP rank's 1/tp
  // slice and all-gathers the tensor over TP where it is used: the input before the forward (every
  // stage but the first), the stage's own output and the received gradient before the backward
  // (every stage but the last); an all-gather is half an all-reduce equivalent of what it gathers.
  const bool partitioned_messages = stack.partitioned_pipeline_messages && config.tp > 1;
  const double stage_message = activation_message / (config.sequence_parallel ? config.tp : 1);
  const double gather_equivalents = partitioned_messages ? 0.5 * stage_message / activation_message : 0.0;
  work.p2p_bytes_per_microbatch = stage_message / (partitioned_messages ? config.tp : 1);
  if (std::any_of(blocks.boundaries.begin(), blocks.boundaries.end(),
                  [](BoundaryTensor tensor) { return tensor != BoundaryTensor::hidden_states; })) {
    for (const BoundaryTensor tensor : blocks.boundaries)
      work.boundary_bytes_per_microbatch.push_back(boundary_tensor_bytes(tensor, model, training, config));
  }
  if (model.tied_embeddings) {
    const auto head = std::find_if(blocks.ranks.begin(), blocks.ranks.end(), [](const PipelineRankBlocks& held) { return held.head; });
    const auto head_stage = static_cast<int>(head - blocks.ranks.begin());
    if (head != blocks.ranks.end() && head_stage > 0) {
      work.tied_embedding_head_stage = head_stage;
      work.tied_embedding_gradient_bytes = static_cast<double>(model.vocab_size) / config.tp * model.hidden_size * gradient_bytes;
    }
  }
  for (int stage = 0; stage < config.pp; ++stage) {
    const PipelineRankBlocks& held = blocks.ranks[static_cast<size_t>(stage)];
    const int first_layer = held.first_layer;
    const int stage_layers = held.num_layers;
    StageWork& work_of_stage = work.stages.emplace_back();
    work_of_stage.overlapped_compute_slowdown = efficiency.overlapped_compute_slowdown;
    work_of_stage.first_layer = first_layer;
    work_of_stage.num_layers = stage_layers;
    const int moe_layers =
        model.is_moe() ? std::max(0, first_layer + stage_layers - std::max(first_layer, model.first_dense_layers)) : 0;
    const int dense_layers = stage_layers - moe_layers;
    // An idle rank (nanotron, past the loss) runs no pass at all.
    const double chunk_passes = config.pp > 1 && !held.idle ? config.virtual_stages : 0;
    work_of_stage.forward_compute_seconds = dense_layers * layer.total.forward + moe_layers * moe_layer.total.forward +
                                            chunk_passes * efficiency.chunk_pass_overhead_seconds;
    // Full recompute re-runs recomputed_layers_of_stage of them (block recompute: the first N of
    // each chunk, at the stage's mean MoE share); selective recompute, every layer's attention core.
    const int recomputed_layers = recomputed_layers_of_stage(config, stage_layers);
    const int recomputing_layers = config.recompute == RecomputeMode::full ? recomputed_layers : stage_layers;
    const double recomputing_moe_layers =
        stage_layers > 0 ? static_cast<double>(recomputing_layers) * moe_layers / stage_layers : 0.0;
    work_of_stage.recompute_seconds = (recomputing_layers - recomputing_moe_layers) * layer.recompute_seconds +
                                      recomputing_moe_layers * moe_layer.recompute_seconds;
    work_of_stage.backward_compute_seconds = dense_layers * layer.total.backward + moe_layers * moe_layer.total.backward +
                                             work_of_stage.recompute_seconds +
                                             chunk_passes * efficiency.chunk_pass_overhead_seconds;
    if (moe_layers > 0) {
      // The alltoall dispatcher's four all-to-alls per MoE layer and micro-batch (dispatch and
      // combine forward, their gradients backward: token_dispatcher.py @d98e8a64 l.705, 864) each
      // send this rank's s·b/tp tokens' top-k copies, h wide, spread over the ep group; with etp > 1
      // the received tokens are all-gathered over the etp group before the experts and
      // reduce-scattered after (four more, half an all-reduce each).
      const double tokens_in = local_sequence_length(training, config) * config.micro_batch /
                               (config.sequence_parallel ? config.tp : 1);
      const double routed_bytes =
          tokens_in * model.router_topk * model.hidden_size * value_bytes * training.expert_load_imbalance_factor;
      work_of_stage.moe_layers = moe_layers;
      work_of_stage.ep_all_to_alls_per_microbatch = 4 * moe_layers;
      work_of_stage.ep_bytes_per_peer = routed_bytes / config.ep;
      work_of_stage.etp_gather_bytes = config.etp > 1 ? routed_bytes : 0.0;
    }
    if (config.cp > 1) {
      // Dense and MoE layers run the same attention.
      work_of_stage.cp_forward_rings = stage_layers + (recomputes_attention_core ? stage_layers : recomputed_layers);
      work_of_stage.cp_backward_rings = stage_layers;
      work_of_stage.cp_kv_chunk_bytes = kv_chunk_bytes(model, training, config);
      work_of_stage.cp_forward_step_seconds = layer.attention.forward / config.cp;
      work_of_stage.cp_backward_step_seconds = layer.attention.backward / config.cp;
      // Forward: cp − 1 chunks per ring; backward: 2(cp − 1) chunks' worth (K/V and dK/dV).
      work_of_stage.cp_forward_share = static_cast<double>(stage_layers) /
                                       (work_of_stage.cp_forward_rings + 2.0 * work_of_stage.cp_backward_rings);
    }
    int all_reduces = (stage_layers - recomputed_layers) * layer_all_reduces + recomputed_layers * recomputed_layer_all_reduces;
    // Embedding and head collectives are h wide: as many equivalents as collectives.
    double all_reduce_equivalents = (stage_layers - recomputed_layers) * layer_all_reduce_equivalents +
                                    recomputed_layers * recomputed_layer_all_reduce_equivalents;
    // Per-operator checkpointing re-runs, in every layer's backward, the two collectives whose
    // outputs it does not save: with SP the all-gathers before wq and w1 (half an all-reduce each),
    // without it the all-reduces after wo and w2.
    if (config.tp > 1 && recomputes_per_operator) {
      all_reduces += 2 * stage_layers;
      all_reduce_equivalents += (sp ? 1.0 : 2.0) * stage_layers;
    }
    const int forward_gathers = partitioned_messages && stage > 0 ? 1 : 0;
    const int backward_gathers = partitioned_messages && stage + 1 < config.pp ? 2 : 0;
    all_reduces += forward_gathers + backward_gathers;
    all_reduce_equivalents += (forward_gathers + backward_gathers) * gather_equivalents;
    if (held.embedding) {
      work_of_stage.forward_compute_seconds += embedding.forward;
      work_of_stage.backward_compute_seconds += embedding.backward;
      work_of_stage.embedding_and_head_seconds += embedding.forward + embedding.backward;
      all_reduces += 1;  // the vocab-parallel embedding's output
      all_reduce_equivalents += 1;
    }
    // The output GEMM where the lm_head is, the cross entropy's passes over the logits where the
    // loss is (nanotron's cast_to_fp32 between them is priced with the loss).
    const PassSeconds* head_part = held.head && held.loss ? &head.both : held.head ? &head.gemm : held.loss ? &head.loss : nullptr;
    if (head_part != nullptr) {
      work_of_stage.forward_compute_seconds += head_part->forward;
      work_of_stage.backward_compute_seconds += head_part->backward;
      work_of_stage.embedding_and_head_seconds += head_part->forward + head_part->backward;
    }
    if (held.head) {  // the LM head's input gradient
      all_reduces += 1;
      all_reduce_equivalents += 1;
    }
    if (config.tp > 1) {
      // Plus the embedding output on the first stage (forward) and the LM head's input gradient on
      // the last (backward).
      // With userbuffers overlap (--tp-comm-overlap) each collective is cut into tp chunks pipelined
      // under the GEMM it feeds; only the first (or last) chunk stays exposed.
      const bool overlapped = training.overlap_tensor_parallel_communication && config.sequence_parallel;
      const double exposed_share = overlapped ? 1.0 / config.tp : 1.0;
      work_of_stage.tp_bytes_per_microbatch =
          exposed_share * all_reduce_equivalents * activation_message * 2.0 * (config.tp - 1) / config.tp;
      work_of_stage.tp_collectives_per_microbatch = all_reduces;
      // With SP every collective of the layers, the embedding and the head is an all-gather or a
      // reduce-scatter; without it all are all-reduces but the partitioned messages' gathers.
      work_of_stage.tp_all_reduce_share =
          sp || all_reduce_equivalents <= 0
              ? 0.0
              : 1 - (forward_gathers + backward_gathers) * gather_equivalents / all_reduce_equivalents;
      const double forward =
          stage_layers * issued_forward_per_layer + (held.embedding ? 1 : 0) + forward_gathers * gather_equivalents;
      // A middle stage without layers (pp > layers) issues no collective at all.
      work_of_stage.tp_forward_share = all_reduces > 0 ? forward / all_reduce_equivalents : 0.0;
      if (!overlapped && training.overlap_tensor_parallel_backward && all_reduces > 0) {
        work_of_stage.tp_hideable_share = stage_layers * hideable_per_layer / all_reduce_equivalents;
        work_of_stage.tp_overlap_window_seconds = dense_layers * layer.column_parallel_backward_seconds +
                                                  moe_layers * moe_layer.column_parallel_backward_seconds;
      }
    }
    const double parameters = parameters_on_stage(model, config, stage, held);
    // A stack that adds each micro-batch's 16-bit gradients into the fp32 buffer after the
    // backward (DeepSpeed's BF16_Optimizer, nanotron's FP32GradientAccumulator: stack_profile.cpp)
    // makes that pass over every parameter of the rank once per micro-batch.
    if (sixteen_bit_gradients_accumulated_in_fp32(training)) {
      work_of_stage.backward_compute_seconds +=
          parameters * stack.fp32_gradient_accumulation_bytes_per_parameter / roofs.memory_bytes_per_second;
    }
    // Expert gradients are reduced over the expert-dp group, the rest over dp; the distributed
    // optimizer shards each over its own group.
    const double expert_parameters = expert_parameters_on_stage(model, config, stage);
    work_of_stage.gradient_bytes_per_gpu = (parameters - expert_parameters) * gradient_bytes;
    work_of_stage.expert_gradient_bytes_per_gpu = expert_parameters * gradient_bytes;
    set_gradient_buckets(work_of_stage, training, config, stage, parameters - expert_parameters, expert_parameters,
                         held.embedding ? word_embedding_shard_parameters(model, config) : 0.0,
                         weight_elements_per_layer(model) / config.tp);
    work_of_stage.nvls_all_reduce = training.nccl_nvls;
    // A sharded optimizer reduce-scatters (Megatron's) unless the stack all-reduces the whole
    // buffer (nanotron's and DeepSpeed's ZeRO-1); FSDP reduce-scatters.
    work_of_stage.dp_reduction_is_all_reduce =
        !config.fully_sharded &&
        (!config.distributed_optimizer ||
         training.sharded_optimizer == ShardedOptimizerCollectives::all_reduce_and_gather_after_step);
    if (config.fully_sharded && config.dp_cp() > 1 && parameters > 0) {
      // torchtitan's units (distributed/fsdp.py @b5bcd76c l.240-266): the embedding, each block, and
      // [norm, output], which is not resharded after the forward and so not gathered again for its
      // backward (with tied weights one unit [embedding, norm, output], kept gathered likewise).
      // Each micro-batch is an accumulation step that reduce-scatters (trainer.py train_step never
      // turns gradient sync off). A gather moves the 16-bit parameters, half an all-reduce's steps
      // (parameter_all_gather_share); the reduce-scatter the fp32 gradients, the other half. The
      // first gather (the embedding's) and the last reduce-scatter (the embedding's gradient) have
      // no compute beside them. The backward gathers the blocks again, and an untied embedding,
      // which is as large as the [norm, output] unit it does not gather again.
      const double embedding_share = word_embedding_shard_parameters(model, config) / parameters;
      const double gather = parameter_all_gather_share(training);
      const double reduce_scatter = 0.5 * 4.0 / gradient_bytes;
      work_of_stage.fsdp_unhidden_share = embedding_share * (gather + reduce_scatter);
      work_of_stage.fsdp_forward_share = (1 - embedding_share) * gather;
      work_of_stage.fsdp_backward_share = (1 - embedding_share) * (gather + reduce_scatter);
    }
    const double expert_optimizer_shard = config.distributed_optimizer ? 1.0 / config.expert_dp() : 1.0;
    work_of_stage.optimizer_seconds = ((parameters - expert_parameters) * optimizer_shard +
                                       expert_parameters * expert_optimizer_shard) *
                                      optimizer_bytes_per_parameter / roofs.memory_bytes_per_second;
  }
  return work;
}

double boundary_bytes(const WorkProfile& work, int from_stage) {
  return work.boundary_bytes_per_microbatch.empty() ? work.p2p_bytes_per_microbatch
                                                    : work.boundary_bytes_per_microbatch[static_cast<size_t>(from_stage)];
}

TpPassSeconds exposed_tp_seconds(const StageWork& stage, double tp_seconds) {
  const double hidden = std::min(stage.tp_hideable_share * tp_seconds, stage.tp_overlap_window_seconds);
  return {stage.tp_forward_share * tp_seconds,
          (1 - stage.tp_forward_share) * tp_seconds - hidden + stage.overlapped_compute_slowdown * hidden, hidden};
}

double model_flops_per_iteration(const ModelSpec& model, const TrainingSpec& training, AttentionFlops attention) {
  // Narayanan et al. SC21's count, generalised to GQA and SwiGLU: forward + 2× backward of every
  // matrix, the s×s attention (QKᵀ and attention·V, 4·s·h per token; half of it when causal), and
  // the LM head; no recompute.
  const double s = training.sequence_length;
  const double h = model.hidden_size;
  const double attention_share = attention == AttentionFlops::causal ? 0.5 : 1.0;
  const double per_token_forward =
      model.num_layers * (2 * mean_active_weight_elements_per_layer(model) + attention_share * 4 * s * attention_core_width(model)) +
      2 * h * model.vocab_size;
  return 3 * per_token_forward * s * static_cast<double>(training.global_batch_sequences);
}

double exposed_fsdp_seconds(const StageWork& stage, double dp_seconds) {
  const auto beside = [&](double collective_seconds, double compute_seconds) {
    return std::max(0.0, collective_seconds - compute_seconds) +
           stage.overlapped_compute_slowdown * std::min(collective_seconds, compute_seconds);
  };
  return stage.fsdp_unhidden_share * dp_seconds + beside(stage.fsdp_forward_share * dp_seconds, stage.forward_compute_seconds) +
         beside(stage.fsdp_backward_share * dp_seconds, stage.backward_compute_seconds);
}

double cp_ring_seconds_of(const ParallelConfig& config, const CommunicationTimes& communication, int stage, int lane) {
  return communication.cp_seconds.empty()
             ? 0.0
             : communication.cp_seconds[static_cast<size_t>(stage)][static_cast<size_t>(lane / config.cp)];
}

Placement default_placement(const ParallelConfig& config) {
  Placement placement;
  placement.gpu_of_rank.resize(static_cast<size_t>(config.world_size()));
  std::iota(placement.gpu_of_rank.begin(), placement.gpu_of_rank.end(), 0);
  return placement;
}

namespace {

using detail::PipelineTimes;
using detail::ReplicaPipeline;

// Closed form of the (interleaved) 1F1B schedule, or of all forward, all backward (below), that
// simulate_schedule runs op by op, per-chunk forward f_i and backward b_i of rank i, link c_i
// between rank i and i + 1, c_w the wrap-around:
//  - steady state: every rank alternates one forward and one backward at a pace P no faster than
//    its own f_i + b_i and than the schedule's dependency loops. 1F1B: rank i holds p − i
//    micro-batches, whose forward must reach rank p − 1 and whose gradient must come back,
//    P ≥ (Σ_{j≥i}(f_j + b_j) + 2Σ_{j≥i}c_j)/(p − i); and inside the pipeline a gradient climbing from
//    rank k to rank i meets the next forward going back down k − i + 1 pairs later,
//    P ≥ (Σ_{j=i..k}(f_j + b_j) + 2Σ_{j=i..k−1}c_j)/(k − i + 1), so a slow link in the middle sets the
//    pace too. Interleaved: the chunk pass at virtual stage q = c·p + i leaves 2(v − 1 − c)N + 2(p − i − 1)
//    pairs (N = interleaved_group_size) for its round trip to the last virtual stage; a link carries
//    one message per pair (with p = 2 the wrap-around shares the neighbours' link).
//  - 1F1B fill and drain: Σ_i (f_i + b_i) − P of rank work plus every link twice; for equal stages
//    and free links the textbook (m + p − 1)(f + b).
//  - Interleaved, per rank i: the first micro-batch reaches it after Σ_{j<i}(f_j + c_j), it runs m·v
//    pairs at its pace, the last gradient leaves it Σ_{j<i}(b_j + c_j) before the end, and in each of
//    the v − 1 chunk changes of warm-up (forwards) and cool-down (backwards) it waits for the round
//    through all p ranks and links that its N passes of one chunk do not cover:
//    max(0, Σ_j f_j + Σc + c_w − N·f_i) and max(0, Σ_j b_j + Σc + c_w − N·b_i). The slowest rank
//    sets the time. For equal stages this is (m·v + p − 1)(f + b) + 2(p·v − 1)c, every hop of the
//    virtual pipeline crossed twice, as the simulation shows; the closed form matches the simulation
//    within 3% while every hop takes at most a chunk's forward (tests/core/simulator_test.cpp).
// No ⌊m/p⌋ shortcut: m enters linearly and through N, whatever its remainder.
PipelineTimes pipeline_times(const ReplicaPipeline& pipe, int microbatches, int chunks) {
  const int p = static_cast<int>(pipe.forward.size());
  PipelineTimes times;
  double cycle = 0;
  double work_sum = 0;
  for (int i = 0; i < p; ++i) {
    cycle = std::max(cycle, pipe.forward[i] + pipe.backward[i]);
    work_sum += pipe.forward[i] + pipe.backward[i];
  }
  const double link_sum = std::accumulate(pipe.link.begin(), pipe.link.end(), 0.0);
  const double chunk_passes = static_cast<double>(microbatches) * chunks;
  if (pipe.all_forward_all_backward) {
    // Every forward, then every backward in the same order: two flow shops of m equal jobs, the
    // ranks and the links their machines (a link carries one message at a time), each taking its
    // work and links once plus m − 1 times its slowest machine. The backwards start on the last
    // rank after its last forward; every other rank has finished its forwards by the time the
    // first gradient reaches it.
    double slowest_forward = 0, slowest_backward = 0, forward_sum = 0, backward_sum = 0;
    for (int i = 0; i < p; ++i) {
      slowest_forward = std::max(slowest_forward, pipe.forward[i]);
      slowest_backward = std::max(slowest_backward, pipe.backward[i]);
      forward_sum += pipe.forward[i];
      backward_sum += pipe.backward[i];
    }
    for (const double link : pipe.link) {
      slowest_forward = std::max(slowest_forward, link);
      slowest_backward = std::max(slowest_backward, link);
    }
    times.cycle_seconds = slowest_forward + slowest_backward;
    times.total_seconds = forward_sum + backward_sum + 2 * link_sum + (microbatches - 1) * times.cycle_seconds;
  } else if (chunks == 1) {
    double loop = 0;
    for (int i = p - 1; i >= 0; --i) {
      loop += pipe.forward[i] + pipe.backward[i] + (i < p - 1 ? 2 * pipe.link[i] : 0.0);
      cycle = std::max(cycle, loop / (p - i));
    }
    for (int i = 0; i < p; ++i) {
      double chain = pipe.forward[i] + pipe.backward[i];
      for (int k = i + 1; k < p; ++k) {
        chain += pipe.forward[k] + pipe.backward[k] + 2 * pipe.link[k - 1];
        cycle = std::max(cycle, chain / (k - i + 1));
      }
    }
    times.cycle_seconds = cycle;
    times.total_seconds = work_sum - cycle + 2 * link_sum + chunk_passes * cycle;
  } else {
    const int group = interleaved_group_size(p, microbatches);
    const int virtual_stages = p * chunks;
    double loop_pace = 0;  // what the round trips and the links impose on every rank
    double path = 0;
    // Virtual stage q = chunk·p + rank, walked down from v·p − 2, chunk by chunk: only a chunk's
    // first step (rank p − 1) takes the wrap-around, so the inner loop has no branch and no
    // integer division (the placement search evaluates this loop for every replica a move touches, p·v
    // steps each; a move that changes a stage's slowest expert group touches every replica).
    const double* forward = pipe.forward.data();
    const double* backward = pipe.backward.data();
    const double* link = pipe.link.data();
    int rank = (virtual_stages - 2) % p;
    for (int chunk = (virtual_stages - 2) / p; chunk >= 0; --chunk, rank = p - 1) {
      const int chunk_distance = 2 * (chunks - 1 - chunk) * group;
      if (rank == p - 1) {  // the hop from the last rank back to the first
        path += forward[0] + backward[0] + 2 * pipe.wraparound;
        loop_pace = std::max(loop_pace, path / chunk_distance);
        --rank;
      }
      for (; rank >= 0; --rank) {
        path += forward[rank + 1] + backward[rank + 1] + 2 * link[rank];
        loop_pace = std::max(loop_pace, path / (chunk_distance + 2 * (p - rank - 1)));
      }
    }
    const double wrap_share = static_cast<double>(chunks - 1) / chunks;
    for (int i = 0; i + 1 < p; ++i) {
      loop_pace = std::max(loop_pace, pipe.link[i] + (p == 2 ? wrap_share * pipe.wraparound : 0.0));
    }
    loop_pace = std::max(loop_pace, wrap_share * pipe.wraparound);
    times.cycle_seconds = std::max(cycle, loop_pace);

    double forward_sum = 0, backward_sum = 0;
    for (int i = 0; i < p; ++i) forward_sum += pipe.forward[i], backward_sum += pipe.backward[i];
    const double round_links = link_sum + pipe.wraparound;
    double arrival = 0, drain = 0;
    for (int i = 0; i < p; ++i) {
      if (i > 0) {
        arrival += pipe.forward[i - 1] + pipe.link[i - 1];
        drain += pipe.backward[i - 1] + pipe.link[i - 1];
      }
      const double forward_round_wait = std::max(0.0, forward_sum + round_links - group * pipe.forward[i]);
      const double backward_round_wait = std::max(0.0, backward_sum + round_links - group * pipe.backward[i]);
      const double pace = std::max(loop_pace, pipe.forward[i] + pipe.backward[i]);
      times.total_seconds =
          std::max(times.total_seconds, arrival + chunk_passes * pace +
                                            (chunks - 1) * (forward_round_wait + backward_round_wait) + drain);
    }
  }
  return times;
}

}  // namespace

namespace detail {

void fill_replica_pipeline(const ParallelConfig& config, const WorkProfile& work, const CommunicationTimes& communication,
                           int replica, bool with_links, bool with_embedding_and_head, ReplicaPipeline& pipe) {
  const int chunks = effective_virtual_stages(config);
  pipe.forward.clear();
  pipe.backward.clear();
  pipe.link.clear();
  pipe.wraparound = 0;
  pipe.all_forward_all_backward = work.pipeline_schedule == PipelineSchedule::all_forward_all_backward;
  for (int stage = 0; stage < config.pp; ++stage) {
    const StageWork& stage_work = work.stages[static_cast<size_t>(stage)];
    const double tp = communication.tp_seconds.empty() ? 0.0
                                                       : communication.tp_seconds[static_cast<size_t>(stage)][static_cast<size_t>(replica)];
    // Embedding and head time split as the forward/backward totals do.
    const double total = stage_work.forward_compute_seconds + stage_work.backward_compute_seconds;
    const double removed = with_embedding_and_head || total <= 0 ? 0.0 : stage_work.embedding_and_head_seconds / total;
    const TpPassSeconds exposed = exposed_tp_seconds(stage_work, tp);
    // The MoE all-to-alls: half in the forward (dispatch, combine), half in the backward.
    const double ep = communication.ep_seconds.empty() ? 0.0 : communication.ep_seconds[static_cast<size_t>(stage)];
    const double cp = cp_ring_seconds_of(config, communication, stage, replica);
    pipe.forward.push_back((stage_work.forward_compute_seconds * (1 - removed) + exposed.forward + 0.5 * ep +
                            stage_work.cp_forward_share * cp) / chunks);
    pipe.backward.push_back((stage_work.backward_compute_seconds * (1 - removed) + exposed.backward + 0.5 * ep +
                             (1 - stage_work.cp_forward_share) * cp) / chunks);
    if (stage + 1 < config.pp) {
      pipe.link.push_back(with_links ? communication.p2p_seconds[static_cast<size_t>(stage)][static_cast<size_t>(replica)] : 0.0);
    }
  }
  if (work.boundary_exchange.blocks_both_ranks) {
    // Both ranks of a boundary sit in its exchange: the receiver at its forward's start, the
    // sender at its backward's (StackProfile::pipeline_exchange). No interleaving here.
    for (size_t s = 0; s < pipe.link.size(); ++s) {
      pipe.backward[s] += pipe.link[s];
      pipe.forward[s + 1] += pipe.link[s];
      pipe.link[s] = 0;
    }
  }
  if (chunks > 1 && with_links) {
    // Without a measured hop from the last rank back to the first, assume the slowest boundary.
    pipe.wraparound = communication.wraparound_p2p_seconds.empty()
                          ? *std::max_element(pipe.link.begin(), pipe.link.end())
                          : communication.wraparound_p2p_seconds[static_cast<size_t>(replica)];
  }
}

}  // namespace detail

namespace {

using detail::fill_replica_pipeline;

// The slowest replica's pipeline (all replicas wait for it at the DP reduction).
struct SlowestReplica {
  int replica = 0;
  PipelineTimes times;
};

// `slowest_pipe`, when given, receives the slowest replica's pipeline.
SlowestReplica slowest_replica(const ParallelConfig& config, const WorkProfile& work,
                               const CommunicationTimes& communication, bool with_links, bool with_embedding_and_head,
                               ReplicaPipeline* slowest_pipe = nullptr) {
  SlowestReplica slowest;
  ReplicaPipeline pipe;
  // Replicas on equally linked GPUs have equal pipelines (most of them, in Slurm's order on a
  // uniform fabric): the previous replica's times are reused for an equal pipeline, which costs a
  // comparison instead of pipeline_times' O(pp²).
  ReplicaPipeline previous_pipe;
  PipelineTimes previous_times;
  for (int replica = 0; replica < config.dp_cp(); ++replica) {
    fill_replica_pipeline(config, work, communication, replica, with_links, with_embedding_and_head, pipe);
    const bool same_as_previous = replica > 0 && pipe.forward == previous_pipe.forward &&
                                  pipe.backward == previous_pipe.backward && pipe.link == previous_pipe.link &&
                                  pipe.wraparound == previous_pipe.wraparound;
    const PipelineTimes times =
        same_as_previous ? previous_times : pipeline_times(pipe, work.num_microbatches, effective_virtual_stages(config));
    previous_pipe = pipe;
    previous_times = times;
    if (replica == 0 || times.total_seconds > slowest.times.total_seconds) {
      slowest = {replica, times};
      if (slowest_pipe != nullptr) std::swap(*slowest_pipe, pipe);
    }
  }
  return slowest;
}

// The end of the iteration: the slowest replica's pipeline, then the DP reductions and the optimizer.
struct IterationEnd {
  SlowestReplica slowest;
  double reductions_done = 0;
  // Of reductions_done, how much the tied word embedding's gradient all-reduce adds.
  double tied_embedding = 0;
  double optimizer = 0;
  // From the reductions' end to the iteration's: the slowest stage's optimizer step and the
  // parameter all-gather that follows it (parameter_gather_after_step_share); optimizer without one.
  double step = 0;
};

// How late the parameter all-gather (see parameter_gather_share) makes the pipeline: micro-batch 0's
// forward of chunk c on rank i cannot end before (c + 1)/v of rank i's gather, and would without it
// end after the fill reaching rank i, c rounds of the virtual pipeline (or c groups of N forwards on
// rank i), and its own forward. A late first forward delays every later rank's by as much, so the
// pipeline is as late as the latest of them.
// gather_seconds(i): rank i's parameter all-gather.
template <typename GatherSeconds>
double parameter_gather_delay(const ReplicaPipeline& pipe, GatherSeconds gather_seconds, int microbatches, int chunks) {
  const int p = static_cast<int>(pipe.forward.size());
  const int group = chunks > 1 ? interleaved_group_size(p, microbatches) : 1;
  const double round = std::accumulate(pipe.forward.begin(), pipe.forward.end(), 0.0) +
                       std::accumulate(pipe.link.begin(), pipe.link.end(), 0.0) + pipe.wraparound;
  double delay = 0;
  double arrival = 0;
  for (int i = 0; i < p; ++i) {
    if (i > 0) arrival += pipe.forward[i - 1] + pipe.link[i - 1];
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const double nominal_end = arrival + std::max(chunk * round, chunk * group * pipe.forward[i]) + pipe.forward[i];
      delay = std::max(delay, (chunk + 1) * gather_seconds(i) / chunks - nominal_end);
    }
  }
  return delay;
}

// The end of the iteration once the slowest replica and its pipeline are known.
IterationEnd iteration_end_after(const ParallelConfig& config, const WorkProfile& work,
                                 const CommunicationTimes& communication, const TrainingSpec& training,
                                 SlowestReplica slowest, const ReplicaPipeline& slowest_pipe) {
  const int chunks = effective_virtual_stages(config);
  const int m = work.num_microbatches;
  const double gather_share = parameter_gather_share(config, training);
  const auto gather_seconds = [&](int stage) {
    return communication.dp_seconds.empty() ? 0.0 : gather_share * communication.dp_seconds[static_cast<size_t>(stage)];
  };
  const double gather_delay = gather_share > 0 ? parameter_gather_delay(slowest_pipe, gather_seconds, m, chunks) : 0.0;
  const double pipeline = slowest.times.total_seconds + gather_delay;

  // Gradient reduction of each stage, as the simulator schedules it: without overlap after the
  // stage's last backward; with overlap each chunk's share streams from the start of that chunk's
  // last backward (chunk c's last backward comes c groups of backward passes before the end).
  // Stage s's last backward ends when the last gradient has still to cross ranks s−1 .. 0.
  double reductions_done = pipeline;
  double embedding_stages_done = 0;  // the later of the first stage's and the output layer's
  double drain = 0;
  const int group = chunks > 1 ? std::max(config.pp, interleaved_group_size(config.pp, m)) : 1;
  for (int stage = 0; stage < config.pp; ++stage) {
    const double reduction =
        communication.dp_seconds.empty() ? 0.0 : gradient_reduction_share(config, training) * communication.dp_seconds[static_cast<size_t>(stage)];
    // FSDP (pp = 1): what each micro-batch's gathers and reduce-scatters leave exposed, as the
    // simulator adds it after the stage's last backward.
    const double fsdp = communication.dp_seconds.empty()
                            ? 0.0
                            : m * exposed_fsdp_seconds(work.stages[static_cast<size_t>(stage)],
                                                       communication.dp_seconds[static_cast<size_t>(stage)]);
    const double end = slowest.times.total_seconds - drain + gather_delay + fsdp;
    drain += slowest_pipe.backward[static_cast<size_t>(stage)] +
             (stage + 1 < config.pp ? slowest_pipe.link[static_cast<size_t>(stage)] : 0.0);
    double done = end;
    if (reduction > 0 && !gradient_reduction_overlapped(config, training)) {
      done = end + reduction;
    } else if (reduction > 0) {
      // The stream starts with the last backward operation, as the simulator runs it: its compute
      // with the exposed TP, expert and context-parallel communication and a blocking boundary
      // exchange (fill_replica_pipeline).
      const double backward = slowest_pipe.backward[static_cast<size_t>(stage)];
      double stream_free = 0;
      for (int chunk = chunks - 1; chunk >= 0; --chunk) {
        const double chunk_end = end - chunk * std::min(group, m) * slowest.times.cycle_seconds;
        const double start = std::max(chunk_end - backward, stream_free);
        stream_free =
            overlapped_reduction_end(start, reduction / chunks, chunk_end, work.stages[static_cast<size_t>(stage)], chunk, chunks);
      }
      done = stream_free;
    }
    reductions_done = std::max(reductions_done, done);
    if (stage == 0 || stage == work.tied_embedding_head_stage) embedding_stages_done = std::max(embedding_stages_done, done);
  }
  // The tied embedding's gradients are summed once both of its stages have reduced theirs over DP.
  const double with_tied_embedding = std::max(reductions_done, embedding_stages_done + communication.tied_embedding_seconds);
  const double tied_embedding = with_tied_embedding - reductions_done;
  reductions_done = with_tied_embedding;
  double optimizer = 0;
  double step = 0;
  const double gather_after_step_share = parameter_gather_after_step_share(config, training);
  for (size_t stage = 0; stage < work.stages.size(); ++stage) {
    const double stage_optimizer = work.stages[stage].optimizer_seconds;
    const double gather = communication.dp_seconds.empty() ? 0.0 : gather_after_step_share * communication.dp_seconds[stage];
    optimizer = std::max(optimizer, stage_optimizer);
    step = std::max(step, stage_optimizer + gather);
  }

  return {slowest, reductions_done, tied_embedding, optimizer, step};
}

IterationEnd iteration_end(const ParallelConfig& config, const WorkProfile& work,
                           const CommunicationTimes& communication, const TrainingSpec& training) {
  ReplicaPipeline slowest_pipe;
  const SlowestReplica slowest = slowest_replica(config, work, communication, true, true, &slowest_pipe);
  return iteration_end_after(config, work, communication, training, slowest, slowest_pipe);
}

}  // namespace

namespace detail {

IncrementalIterationSeconds::IncrementalIterationSeconds(const ParallelConfig& config, const WorkProfile& work,
                                                         const TrainingSpec& training)
    : config_(config), work_(work), training_(training), replica_times_(static_cast<size_t>(std::max(0, config.dp_cp()))) {
  // Interleaved MoE layouts: a move that changes a stage's slowest expert group changes every
  // replica's pipeline, and with pp = 2 and 256 replicas recomputing them all took most of the
  // job-start time. pipeline_times' interleaved closed form only adds, multiplies by non-negative
  // constants, divides by positive ones and takes maxima of the links (max(0, Σ + links − N·f)
  // included), and each of those rounds monotonically: with equal forward and backward times, a
  // replica whose every link is no slower is no faster, bit for bit. The slowest replica is then
  // found among the undominated ones (slowest_by_dominance), with nothing kept between moves.
  by_dominance_ = effective_virtual_stages(config) > 1 && config.dp_cp() > 1 &&
                  std::any_of(work.stages.begin(), work.stages.end(),
                              [](const StageWork& stage) { return stage.ep_all_to_alls_per_microbatch > 0; });
  if (by_dominance_) {
    link_sum_.resize(replica_times_.size());
    dominator_.resize(replica_times_.size());
  }
}

PipelineTimes IncrementalIterationSeconds::replica_times(const CommunicationTimes& communication, int replica) {
  // A replica's time depends on the configuration and its own entries only. Replicas whose GPUs
  // share nodes stage by stage (tp < GPUs per node) usually have equal entries, and moves touch
  // them in a row: compare with the latest replica computed before computing anything.
  const auto d = static_cast<size_t>(replica);
  entries_.clear();
  for (const auto& stage : communication.tp_seconds) entries_.push_back(stage[d]);
  for (const double ep : communication.ep_seconds) entries_.push_back(ep);
  for (const auto& stage : communication.cp_seconds) entries_.push_back(stage[d / static_cast<size_t>(config_.cp)]);
  for (const auto& boundary : communication.p2p_seconds) entries_.push_back(boundary[d]);
  if (!communication.wraparound_p2p_seconds.empty()) entries_.push_back(communication.wraparound_p2p_seconds[d]);
  if (has_previous_ && entries_ == previous_entries_) return previous_times_;
  std::swap(entries_, previous_entries_);
  has_previous_ = true;
  previous_times_ = computed_times(communication, replica);
  return previous_times_;
}

bool IncrementalIterationSeconds::same_stage_entries(const CommunicationTimes& communication, int a, int b) const {
  const auto da = static_cast<size_t>(a), db = static_cast<size_t>(b);
  const auto cp = static_cast<size_t>(config_.cp);
  for (const auto& stage : communication.tp_seconds)
    if (stage[da] != stage[db]) return false;
  for (const auto& stage : communication.cp_seconds)
    if (stage[da / cp] != stage[db / cp]) return false;
  return true;
}

bool IncrementalIterationSeconds::same_own_entries(const CommunicationTimes& communication, int a, int b) const {
  const auto da = static_cast<size_t>(a), db = static_cast<size_t>(b);
  if (!same_stage_entries(communication, a, b)) return false;
  for (const auto& boundary : communication.p2p_seconds)
    if (boundary[da] != boundary[db]) return false;
  return communication.wraparound_p2p_seconds.empty() ||
         communication.wraparound_p2p_seconds[da] == communication.wraparound_p2p_seconds[db];
}

bool IncrementalIterationSeconds::links_at_most(const CommunicationTimes& communication, int a, int b) const {
  const auto da = static_cast<size_t>(a), db = static_cast<size_t>(b);
  for (const auto& boundary : communication.p2p_seconds)
    if (boundary[da] > boundary[db]) return false;
  return communication.wraparound_p2p_seconds.empty() ||
         communication.wraparound_p2p_seconds[da] <= communication.wraparound_p2p_seconds[db];
}

PipelineTimes IncrementalIterationSeconds::computed_times(const CommunicationTimes& communication, int replica) {
  fill_replica_pipeline(config_, work_, communication, replica, true, true, scratch_);
  return pipeline_times(scratch_, work_.num_microbatches, effective_virtual_stages(config_));
}

double IncrementalIterationSeconds::block_bound_seconds(const CommunicationTimes& communication, size_t begin, size_t end) {
  const int first = heads_[begin];
  for (size_t k = begin + 1; k < end; ++k)
    if (!same_stage_entries(communication, heads_[k], first)) return std::numeric_limits<double>::infinity();
  fill_replica_pipeline(config_, work_, communication, first, true, true, scratch_);
  for (size_t k = begin + 1; k < end; ++k) {
    const auto d = static_cast<size_t>(heads_[k]);
    for (size_t s = 0; s < scratch_.link.size(); ++s) scratch_.link[s] = std::max(scratch_.link[s], communication.p2p_seconds[s][d]);
    if (!communication.wraparound_p2p_seconds.empty())
      scratch_.wraparound = std::max(scratch_.wraparound, communication.wraparound_p2p_seconds[d]);
  }
  // Without a measured wrap-around, fill_replica_pipeline assumes the slowest link.
  if (communication.wraparound_p2p_seconds.empty() && !scratch_.link.empty())
    scratch_.wraparound = *std::max_element(scratch_.link.begin(), scratch_.link.end());
  return pipeline_times(scratch_, work_.num_microbatches, effective_virtual_stages(config_)).total_seconds;
}

std::pair<int, PipelineTimes> IncrementalIterationSeconds::slowest_by_dominance(const CommunicationTimes& communication) {
  // Only the first replica of a run of equal own entries can be the first of the slowest.
  heads_.clear();
  for (int replica = 0; replica < config_.dp_cp(); ++replica)
    if (replica == 0 || !same_own_entries(communication, replica, replica - 1)) heads_.push_back(replica);
  // A head whose links are at most another's of equal stage entries is no slower than it. Heads
  // are taken by decreasing link sum (a dominating head's floating-point sum is no smaller: it
  // rounds monotonically), so a head is checked against the undominated heads found so far.
  for (const int head : heads_) {
    double sum = 0;
    for (const auto& boundary : communication.p2p_seconds) sum += boundary[static_cast<size_t>(head)];
    if (!communication.wraparound_p2p_seconds.empty()) sum += communication.wraparound_p2p_seconds[static_cast<size_t>(head)];
    link_sum_[static_cast<size_t>(head)] = sum;
    dominator_[static_cast<size_t>(head)] = -1;
  }
  order_ = heads_;
  std::sort(order_.begin(), order_.end(), [&](int a, int b) {
    const double sum_a = link_sum_[static_cast<size_t>(a)], sum_b = link_sum_[static_cast<size_t>(b)];
    return sum_a > sum_b || (sum_a == sum_b && a < b);
  });
  front_.clear();
  double slowest_total = 0;
  for (const int head : order_) {
    for (const int other : front_) {
      if (same_stage_entries(communication, head, other) && links_at_most(communication, head, other)) {
        dominator_[static_cast<size_t>(head)] = other;
        break;
      }
    }
    if (dominator_[static_cast<size_t>(head)] >= 0) continue;
    front_.push_back(head);
    replica_times_[static_cast<size_t>(head)] = computed_times(communication, head);
    slowest_total = std::max(slowest_total, replica_times_[static_cast<size_t>(head)].total_seconds);
  }
  // The first head as slow as the slowest: undominated heads are known; a dominated one can only
  // tie where its dominator does. Most of them are dominated by the slowest, so they are taken
  // in blocks: a pipeline with every link at the block's slowest is no faster than any of its
  // heads, and where even it is faster than the slowest, no head of the block ties.
  constexpr size_t kBlock = 8;
  for (size_t begin = 0; begin < heads_.size(); begin += kBlock) {
    const size_t end = std::min(begin + kBlock, heads_.size());
    if (end - begin > 1 && block_bound_seconds(communication, begin, end) < slowest_total) continue;
    for (size_t k = begin; k < end; ++k) {
      const int head = heads_[k];
      const int dominator = dominator_[static_cast<size_t>(head)];
      if (dominator < 0) {
        if (replica_times_[static_cast<size_t>(head)].total_seconds == slowest_total)
          return {head, replica_times_[static_cast<size_t>(head)]};
        continue;
      }
      if (replica_times_[static_cast<size_t>(dominator)].total_seconds < slowest_total) continue;
      const PipelineTimes times = computed_times(communication, head);
      if (times.total_seconds == slowest_total) return {head, times};
    }
  }
  return {0, replica_times_[0]};  // not reached: the slowest undominated head is a head
}

void IncrementalIterationSeconds::all_replica_times(const CommunicationTimes& communication) {
  // Every replica reads the same ep_seconds, so a replica whose own entries equal the previous
  // replica's has its times: compared in place, without replica_times' copy of the entries (a
  // move that changes a stage's slowest expert group comes here, for up to 256 replicas).
  for (int replica = 0; replica < config_.dp_cp(); ++replica) {
    const auto d = static_cast<size_t>(replica);
    if (replica > 0 && same_own_entries(communication, replica, replica - 1)) {
      replica_times_[d] = replica_times_[d - 1];
      continue;
    }
    replica_times_[d] = computed_times(communication, replica);
  }
}

double IncrementalIterationSeconds::of(const CommunicationTimes& communication) {
  saved_.clear();
  ep_seconds_ = communication.ep_seconds;
  ep_changed_ = false;
  if (!by_dominance_) all_replica_times(communication);
  return finish(communication);
}

double IncrementalIterationSeconds::after_change(const CommunicationTimes& communication,
                                                 const std::vector<int>& changed_replicas) {
  saved_.clear();
  if (by_dominance_) return finish(communication);  // keeps nothing between moves
  if (communication.ep_seconds != ep_seconds_) {
    // The stages' all-to-all times enter every replica: recompute them all (undo restores them).
    saved_all_times_ = replica_times_;
    saved_ep_seconds_ = ep_seconds_;
    ep_seconds_ = communication.ep_seconds;
    ep_changed_ = true;
    all_replica_times(communication);
    return finish(communication);
  }
  ep_changed_ = false;
  for (const int replica : changed_replicas) {
    PipelineTimes& times = replica_times_[static_cast<size_t>(replica)];
    saved_.emplace_back(replica, times);
    times = replica_times(communication, replica);
  }
  return finish(communication);
}

void IncrementalIterationSeconds::undo_change() {
  if (ep_changed_) {
    ep_seconds_ = saved_ep_seconds_;
    std::swap(replica_times_, saved_all_times_);
    ep_changed_ = false;
  }
  for (const auto& [replica, times] : saved_) replica_times_[static_cast<size_t>(replica)] = times;
  saved_.clear();
}

double IncrementalIterationSeconds::finish(const CommunicationTimes& communication) {
  if (config_.dp_cp() < 1) return iteration_seconds(config_, work_, communication, training_);
  if (by_dominance_) {
    const auto [replica, times] = slowest_by_dominance(communication);
    return finish_after(communication, replica, times);
  }
  // The first of the slowest, as slowest_replica picks it.
  const auto slowest = std::max_element(replica_times_.begin(), replica_times_.end(),
                                        [](const PipelineTimes& a, const PipelineTimes& b) { return a.total_seconds < b.total_seconds; });
  return finish_after(communication, static_cast<int>(slowest - replica_times_.begin()), *slowest);
}

double IncrementalIterationSeconds::finish_after(const CommunicationTimes& communication, int replica,
                                                 const PipelineTimes& times) {
  fill_replica_pipeline(config_, work_, communication, replica, true, true, scratch_);
  const IterationEnd end = iteration_end_after(config_, work_, communication, training_, {replica, times}, scratch_);
  return end.reductions_done + end.step;
}

}  // namespace detail

double iteration_seconds(const ParallelConfig& config, const WorkProfile& work,
                         const CommunicationTimes& communication, const TrainingSpec& training) {
  const IterationEnd end = iteration_end(config, work, communication, training);
  return end.reductions_done + end.step;
}

TimeBreakdown critical_path(const ParallelConfig& config, const WorkProfile& work,
                            const CommunicationTimes& communication, const TrainingSpec& training) {
  const int m = work.num_microbatches;
  const IterationEnd end = iteration_end(config, work, communication, training);
  const SlowestReplica& slowest = end.slowest;
  const double pipeline = slowest.times.total_seconds;
  const double reductions_done = end.reductions_done;
  const double optimizer = end.optimizer;

  TimeBreakdown time;
  time.iteration_seconds = reductions_done + end.step;
  time.optimizer_seconds = optimizer;
  time.tied_embedding_seconds = end.tied_embedding;
  time.dp_communication_seconds = reductions_done - end.tied_embedding - pipeline + (end.step - optimizer);

  // Attribution: the busiest stage of the slowest replica does m·v chunk pairs of compute and TP;
  // links cost what removing them saves; the rest of the pipeline time is bubble.
  const SlowestReplica without_links = slowest_replica(config, work, communication, false, true);
  time.pp_communication_seconds = pipeline - without_links.times.total_seconds;
  int busiest = 0;
  double busiest_seconds = -1;
  double busiest_tp_seconds = 0;
  for (int stage = 0; stage < config.pp; ++stage) {
    const StageWork& stage_work = work.stages[static_cast<size_t>(stage)];
    const double tp = communication.tp_seconds.empty()
                          ? 0.0
                          : communication.tp_seconds[static_cast<size_t>(stage)][static_cast<size_t>(slowest.replica)];
    const double ep = communication.ep_seconds.empty() ? 0.0 : communication.ep_seconds[static_cast<size_t>(stage)];
    const double cp = cp_ring_seconds_of(config, communication, stage, slowest.replica);
    const double seconds = stage_work.forward_compute_seconds + stage_work.backward_compute_seconds +
                           exposed_tp_seconds(stage_work, tp).total() + ep + cp;
    if (seconds > busiest_seconds) busiest = stage, busiest_seconds = seconds, busiest_tp_seconds = tp;
  }
  const double busiest_ep_seconds =
      communication.ep_seconds.empty() ? 0.0 : communication.ep_seconds[static_cast<size_t>(busiest)];
  const double busiest_cp_seconds = cp_ring_seconds_of(config, communication, busiest, slowest.replica);
  time.ep_communication_seconds = m * busiest_ep_seconds;
  time.cp_communication_seconds = m * busiest_cp_seconds;
  const StageWork& busiest_work = work.stages[static_cast<size_t>(busiest)];
  time.compute_seconds = m * (busiest_work.forward_compute_seconds + busiest_work.backward_compute_seconds);
  time.recompute_seconds = m * busiest_work.recompute_seconds;
  // The exposed share itself, not busiest − compute: the difference rounds to −0 where nothing is
  // exposed (explain printed "-0.0 µs" for stages without layers).
  const TpPassSeconds busiest_tp = exposed_tp_seconds(busiest_work, busiest_tp_seconds);
  time.tp_communication_seconds = m * busiest_tp.total();
  time.tp_hidden_seconds = m * busiest_tp.hidden;
  time.pipeline_bubble_seconds =
      std::max(0.0, without_links.times.total_seconds - time.compute_seconds - time.tp_communication_seconds -
                        time.ep_communication_seconds - time.cp_communication_seconds);
  time.embedding_imbalance_seconds =
      pipeline - slowest_replica(config, work, communication, true, false).times.total_seconds;
  return time;
}

}  // namespace pipette
