#include "pipette/core/stack_profile.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/launch.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/pipeline_blocks.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "test_clusters.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

// A Llama-style layer (RMSNorm, SwiGLU, RoPE, no biases or dropout), multi-head attention: 24
// layers, hidden 2048, ffn 8192, 32 heads (bench_cluster's base_config.py; its llama-1B narrows the
// ffn to 4096, which the tests do not need).
ModelSpec llama_1b(int kv_heads = 32) {
  ModelSpec model;
  model.name = "llama-1b";
  model.num_layers = 24;
  model.hidden_size = 2048;
  model.num_attention_heads = 32;
  model.num_kv_heads = kv_heads;
  model.ffn_hidden_size = 8192;
  model.vocab_size = 50257;
  model.tied_embeddings = true;
  model.ffn_kind = FfnKind::swiglu;
  model.norm_kind = NormKind::rmsnorm;
  model.linear_bias = false;
  model.dropout = false;
  model.learned_position_embeddings = 0;
  return model;
}

TrainingSpec training_for(Framework framework) {
  TrainingSpec training;
  training.global_batch_sequences = 16;
  training.sequence_length = 4096;
  training.target.framework = framework;
  apply_stack_profile(training);
  return training;
}

ParallelConfig config_of(int tp, int pp, int dp) {
  ParallelConfig config;
  config.tp = tp;
  config.pp = pp;
  config.dp = dp;
  config.micro_batch = 2;
  config.sequence_parallel = tp > 1;
  config.layers_per_stage = balanced_layers_per_stage(24, pp);
  return config;
}

// llama_1b's work on an H100 under the fitted constants.
WorkProfile llama_1b_work(const TrainingSpec& training, const ParallelConfig& config) {
  return profile_work(llama_1b(), training, *find_gpu("H100-SXM"), config, fitted_compute_efficiency());
}

constexpr double tokens = 4096.0 * 2;

using testing::h100_nodes;
using testing::without_placement;


// nanotron's o_proj saves a folded copy of the attention output (h/t wide) when a micro-batch
// holds more than one sequence (the test after the SwiGLU's below): in bytes per layer, at tp.
double attention_output_copy_bytes(int tp) { return tokens * 2048 / tp * 2; }

// Megatron-core and NeMo share the profile the constants were fitted on: the same TrainingSpec
// knobs as its defaults, the same memory and time.
TEST(StackProfile, TheReferenceFrameworksKeepTheFittedModel) {
  const TrainingSpec defaults;
  for (const Framework framework : {Framework::megatron_core, Framework::nemo}) {
    const TrainingSpec training = training_for(framework);
    EXPECT_EQ(training.attention, defaults.attention);
    EXPECT_EQ(training.overlap_tensor_parallel_backward, defaults.overlap_tensor_parallel_backward);
    EXPECT_EQ(training.overlap_gradient_reduce, defaults.overlap_gradient_reduce);
    EXPECT_EQ(training.sharded_optimizer, defaults.sharded_optimizer);
    EXPECT_TRUE(stack_profile(framework).evidence.empty());
    EXPECT_TRUE(stack_profile(framework).assumptions.empty());
    EXPECT_EQ(layer_activation_bytes(llama_1b(), training, config_of(2, 2, 2)),
              layer_activation_bytes(llama_1b(), training_for(Framework::megatron_core), config_of(2, 2, 2)));
  }
}

// Every other stack cites its code for what it does and says what it assumes.
TEST(StackProfile, EveryOtherStackCitesItsEvidence) {
  for (const Framework framework :
       {Framework::torchtitan, Framework::megatron_deepspeed, Framework::nanotron, Framework::deepspeed}) {
    const StackProfile& profile = stack_profile(framework);
    EXPECT_EQ(profile.framework, framework);
    EXPECT_NE(profile.code.find(" @"), std::string::npos) << profile.code;
    ASSERT_FALSE(profile.evidence.empty()) << to_string(framework);
    for (const std::string& line : profile.evidence) EXPECT_NE(line.find(" l."), std::string::npos) << line;
    EXPECT_FALSE(profile.assumptions.empty()) << to_string(framework);
  }
}

// nanotron's GLUActivation (models/llama.py @2411b022 l.198-205) computes act(gate) * up out of
// place: beyond fc1's output and the product it keeps the SiLU output, f/t wide. With multi-head
// attention its QKV copies (l.466-472, 680-683) keep as much as Megatron-core's rotated Q and K.
TEST(StackProfile, NanotronKeepsTheSiluOutputOfItsUnfusedSwiglu) {
  const ParallelConfig config = config_of(2, 1, 8);
  const double megatron = layer_activation_bytes(llama_1b(), training_for(Framework::megatron_core), config);
  // The SwiGLU alone: both re-gather their sequence-parallel inputs (the switch's own test is below).
  const double nanotron = layer_activation_bytes(llama_1b(), training_for(Framework::nanotron), config);
  EXPECT_DOUBLE_EQ(nanotron - megatron, tokens * 8192 / 2 * 2 + attention_output_copy_bytes(2));
}

// nanotron hands o_proj flash-attn's output transposed to [s, b, h] (models/llama.py @2411b022
// l.668-671); F.linear folds that 3-D view with a reshape, a copy once b > 1, and saves the copy
// (pytorch aten/src/ATen/native/LinearAlgebra.cpp should_fold: a weight that needs a gradient
// always folds), while flash-attn keeps its own output. One sequence per micro-batch: no copy.
// With tp_linear_async_communication (tp-overlap) the row-parallel Function saves the view itself
// (parallel/tensor_parallel/functional.py @a27e8fe8 l.375-380): no second copy.
TEST(StackProfile, NanotronKeepsTheAttentionOutputTwiceAboveOneSequence) {
  const auto nanotron_minus_megatron = [](int micro_batch, bool async_row_parallel) {
    ParallelConfig config = config_of(2, 1, 8);
    config.micro_batch = micro_batch;
    TrainingSpec nanotron = training_for(Framework::nanotron);
    nanotron.overlap_tensor_parallel_backward = async_row_parallel;
    return layer_activation_bytes(llama_1b(), nanotron, config) -
           layer_activation_bytes(llama_1b(), training_for(Framework::megatron_core), config);
  };
  const double swiglu_per_sequence = 4096.0 * 8192 / 2 * 2;
  EXPECT_DOUBLE_EQ(nanotron_minus_megatron(1, false), swiglu_per_sequence);
  EXPECT_DOUBLE_EQ(nanotron_minus_megatron(2, false), 2 * swiglu_per_sequence + attention_output_copy_bytes(2));
  EXPECT_DOUBLE_EQ(nanotron_minus_megatron(2, true), 2 * swiglu_per_sequence);
}

// With grouped-query attention nanotron copies Q, K and V separately and the originals die
// (models/llama.py l.448-465), where Megatron-core keeps rotated Q and K beside the QKV buffer.
TEST(StackProfile, NanotronGroupedQueryAttentionKeepsNoRotaryCopies) {
  const ParallelConfig config = config_of(1, 1, 8);
  const ModelSpec gqa = llama_1b(8);
  const double megatron = layer_activation_bytes(gqa, training_for(Framework::megatron_core), config);
  const double nanotron = layer_activation_bytes(gqa, training_for(Framework::nanotron), config);
  const double q = 2048, kv = 512;
  EXPECT_DOUBLE_EQ(nanotron - megatron, tokens * 8192 * 2 - tokens * (q + kv) * 2 + attention_output_copy_bytes(1));
}

// Compute seconds a stack's layers add to Megatron-core's, forward and backward.
struct ExtraSeconds {
  double forward = 0;
  double backward = 0;
};

// A stage's compute seconds (tp 1, 24 layers, 2 sequences of 4096 tokens on an H100) beyond
// Megatron-core's under `framework`'s profile.
ExtraSeconds extra_seconds_over_megatron(Framework framework) {
  const ParallelConfig config = config_of(1, 1, 8);
  const GpuSpec& gpu = *find_gpu("H100-SXM");
  const ComputeEfficiency efficiency = fitted_compute_efficiency();
  const StageWork megatron =
      profile_work(llama_1b(), training_for(Framework::megatron_core), gpu, config, efficiency).stages.front();
  const StageWork other = profile_work(llama_1b(), training_for(framework), gpu, config, efficiency).stages.front();
  return {other.forward_compute_seconds - megatron.forward_compute_seconds,
          other.backward_compute_seconds - megatron.backward_compute_seconds};
}

// What one layer of those stages adds when it moves `extra_bytes` more in its forward (twice that
// in the backward) and runs its attention at flash-attn 2's rate instead of cuDNN's: at head dim
// 64 their forwards run at 284 and 363 of cuDNN's 609 TFLOP/s forward at head dim 128, the fitted
// rate, and their backwards at 279 and 417, so the causal core (QK^T and attention·V over 32
// heads) takes 609/284 instead of 609/363 of its time at the fitted rate, and its backward (2.5
// times the forward's FLOPs) 609/279 instead of 609/417.
ExtraSeconds extra_per_layer(double extra_bytes) {
  const GpuSpec& gpu = *find_gpu("H100-SXM");
  const ComputeEfficiency efficiency = fitted_compute_efficiency();
  const double seconds = extra_bytes / (efficiency.memory_fraction * gpu.hbm_bytes_per_second);
  const double core_flops = 2 * (2 * 32 * 4096.0 * 4096) * (2 * 2048.0 / 32);
  const double fitted_forward = 0.5 * core_flops / (efficiency.attention_fraction * gpu.peak_bf16_flop_per_second);
  const double attention_forward = fitted_forward * (609.0 / 284 - 609.0 / 363);
  const double attention_backward = 2.5 * fitted_forward * (609.0 / 279 - 609.0 / 417);
  return {seconds + attention_forward, 2 * seconds + attention_backward};
}

// torchtitan's eager SwiGLU, w2(F.silu(w1(x)) * w3(x)) (models/common/feed_forward.py @b5bcd76c
// l.53-54), keeps the SiLU output beside w1's and w3's outputs and the product; its attention keeps
// what Megatron-core's does (out-of-place RoPE on views of the fused QKV output). One sequence per
// micro-batch and no TP: only the SwiGLU differs.
TEST(StackProfile, TorchtitanKeepsTheSiluOutputOfItsEagerSwiglu) {
  ParallelConfig config = config_of(1, 1, 8);
  config.micro_batch = 1;
  const double megatron = layer_activation_bytes(llama_1b(), training_for(Framework::megatron_core), config);
  const double torchtitan = layer_activation_bytes(llama_1b(), training_for(Framework::torchtitan), config);
  EXPECT_DOUBLE_EQ(torchtitan - megatron, 4096.0 * 8192 * 2);
}

// torchtitan runs eager by default (compile.enable off, config/configs.py l.295): its SwiGLU makes
// two elementwise passes (5 ffn-wide accesses, not 3) and ComplexRoPE three passes over Q and K in
// fp32 (models/common/rope.py l.260-264: 8 more 16-bit accesses of each element); its TP backward
// collectives wait for the GEMMs (async TP is off, l.298-299); and FlexAttention runs at flash-attn
// 2's rate. The forward grows by the extra bytes and the attention's slower rate; its loss is
// priced at 20 + 10 bytes per logit against Megatron-core's unfused 38 + 14 (the test
// TheLossKernelsMoveWhatEachStackRuns).
TEST(StackProfile, TorchtitanEagerLayersCostTheirExtraPassesAndSlowerAttention) {
  const double h = 2048, f = 8192;
  const ExtraSeconds extra = extra_seconds_over_megatron(Framework::torchtitan);
  const ExtraSeconds expected = extra_per_layer(tokens * 2 * (2 * f + 8 * (h + h)));
  const double bandwidth = fitted_compute_efficiency().memory_fraction * find_gpu("H100-SXM")->hbm_bytes_per_second;
  const double logits = tokens * 50257;
  EXPECT_NEAR(extra.forward, 24 * expected.forward - 18 * logits / bandwidth, 1e-9);
  EXPECT_NEAR(extra.backward, 24 * expected.backward - 4 * logits / bandwidth, 1e-9);
  EXPECT_FALSE(training_for(Framework::torchtitan).overlap_tensor_parallel_backward);
  EXPECT_TRUE(training_for(Framework::megatron_core).overlap_tensor_parallel_backward);
}

// torchtitan's RMSNorm before 2025 (torchtitan/models/norms.py @9dec370 l.96-101) and nn.RMSNorm on a
// PyTorch without aten::_fused_rms_norm run as eager ops over an fp32 copy (the engine's
// fused-norm=off): in bf16 the cast up 2 + 4, pow 4 + 4, mean 4, the multiply 4 + 4 and the cast
// back 4 + 2 bytes per element beyond the fused kernel, 32 in the forward of each of a layer's two
// norms (twice that in the backward; the per-operator checkpointing re-runs the forward), 20 in
// fp32 where the casts are no-ops. Without recompute each norm keeps its fp32 copy: 4 bytes more
// per element.
TEST(StackProfile, ACompositeRmsNormCostsItsPassesAndItsFp32Copy) {
  const GpuSpec& gpu = *find_gpu("H100-SXM");
  const ComputeEfficiency efficiency = fitted_compute_efficiency();
  const double bandwidth = efficiency.memory_fraction * gpu.hbm_bytes_per_second;
  ParallelConfig config = config_of(1, 1, 8);
  config.recompute = RecomputeMode::none;
  for (const Precision precision : {Precision::bf16, Precision::fp32}) {
    TrainingSpec fused = training_for(Framework::torchtitan);
    fused.precision = precision;
    TrainingSpec composite = fused;
    composite.fused_norm = false;
    const StageWork a = profile_work(llama_1b(), fused, gpu, config, efficiency).stages.front();
    const StageWork b = profile_work(llama_1b(), composite, gpu, config, efficiency).stages.front();
    const double extra_per_element = precision == Precision::bf16 ? 32 : 20;
    const double per_layer = tokens * 2048 * 2 * extra_per_element / bandwidth;
    EXPECT_NEAR(b.forward_compute_seconds - a.forward_compute_seconds, 24 * per_layer, 1e-9) << to_string(precision);
    EXPECT_NEAR(b.backward_compute_seconds - a.backward_compute_seconds, 24 * 2 * per_layer, 1e-9) << to_string(precision);
    EXPECT_DOUBLE_EQ(layer_activation_bytes(llama_1b(), composite, config) - layer_activation_bytes(llama_1b(), fused, config),
                     tokens * 2048 * 2 * 4)
        << to_string(precision);
  }
  // A LayerNorm model's norms are nn.LayerNorm's fused kernel whatever the switch says.
  ModelSpec layernorm = llama_1b();
  layernorm.norm_kind = NormKind::layernorm;
  TrainingSpec composite = training_for(Framework::torchtitan);
  composite.fused_norm = false;
  EXPECT_DOUBLE_EQ(profile_work(layernorm, composite, gpu, config, efficiency).stages.front().forward_compute_seconds,
                   profile_work(layernorm, training_for(Framework::torchtitan), gpu, config, efficiency).stages.front().forward_compute_seconds);
}

// At the loss nanotron holds an fp32 copy of the logits and its shifted copy (8 bytes per logit,
// models/llama.py l.934, tensor_parallel/functional.py l.43); Megatron-DeepSpeed also the 16-bit
// logits its caller keeps (10, gpt_model.py l.68, cross_entropy.py l.25); Megatron-core 6.
TEST(StackProfile, TheLossKeepsWhatEachStackCopies) {
  const ParallelConfig config = config_of(2, 2, 4);
  const auto logits = [&](Framework framework) {
    return estimate_memory(llama_1b(), training_for(framework), config, RuntimeOverheads{}).back().logits_and_loss_bytes;
  };
  const double logit_elements = tokens * 50257 / 2;
  EXPECT_DOUBLE_EQ(logits(Framework::nanotron) - logits(Framework::megatron_core), 2 * logit_elements);
  EXPECT_DOUBLE_EQ(logits(Framework::megatron_deepspeed) - logits(Framework::megatron_core), 4 * logit_elements);
}

// nanotron's afab engine (its default, config/parallelism_config.py @2411b022 l.43-44; the export
// asks for 1f1b unless the engine's pp-schedule says afab) runs every forward before the first
// backward: every rank holds all of its replica's micro-batches, and the loss rank each one's fp32
// softmax (parallel/tensor_parallel/functional.py l.85 saves exp_logits) and final-norm tensors.
TEST(StackProfile, NanotronAfabKeepsEveryMicroBatchAndEachSoftmax) {
  const ParallelConfig config = config_of(2, 2, 4);
  const auto stages = [&](PipelineSchedule schedule, std::int64_t global_batch) {
    TrainingSpec training = training_for(Framework::nanotron);
    training.global_batch_sequences = global_batch;  // 4 replicas of micro-batch 2: global_batch / 8 each
    training.pipeline_schedule = schedule;
    return estimate_memory(llama_1b(), training, config, RuntimeOverheads{});
  };
  constexpr PipelineSchedule one_f_one_b = PipelineSchedule::one_forward_one_backward;
  constexpr PipelineSchedule afab = PipelineSchedule::all_forward_all_backward;
  // 1F1B: the first rank holds pp = 2 micro-batches however many there are; afab holds them all,
  // so 8 micro-batches add as much again over 4 as 4 add over 1F1B's 2.
  EXPECT_DOUBLE_EQ(stages(one_f_one_b, 64)[0].activations_bytes, stages(one_f_one_b, 32)[0].activations_bytes);
  const double per_microbatch = (stages(afab, 32)[0].activations_bytes - stages(one_f_one_b, 32)[0].activations_bytes) / 2;
  EXPECT_GT(per_microbatch, 0);
  EXPECT_DOUBLE_EQ(stages(afab, 64)[0].activations_bytes - stages(afab, 32)[0].activations_bytes, 4 * per_microbatch);
  // The loss rank: 7 more micro-batches' softmax (4 bytes per logit of the vocabulary shard) and
  // final-norm input and output (sequence parallel: h/t each, 16-bit).
  const double kept = tokens * 50257 / 2 * 4 + 2 * tokens * 2048 * 2 / 2;
  EXPECT_DOUBLE_EQ(stages(afab, 64)[1].logits_and_loss_bytes - stages(one_f_one_b, 64)[1].logits_and_loss_bytes, 7 * kept);
}

// Megatron-DeepSpeed's default is the unfused softmax (megatron/model/transformer.py l.237-327):
// the s×s scores are kept, so its layers keep far more than flash attention's.
TEST(StackProfile, MegatronDeepSpeedKeepsTheAttentionScores) {
  const ParallelConfig config = config_of(2, 1, 8);
  const double megatron = layer_activation_bytes(llama_1b(), training_for(Framework::megatron_core), config);
  const double deepspeed = layer_activation_bytes(llama_1b(), training_for(Framework::megatron_deepspeed), config);
  const double scores = 32.0 / 2 * 4096.0 * 4096 * 2;  // heads per rank × s² × b, softmax output only (no dropout)
  EXPECT_GT(deepspeed - megatron, scores * 2);
}

// The unfused SwiGLU's second pass and nanotron's layout copies are HBM traffic: the forward of a
// layer takes longer by their bytes at the attained memory bandwidth, the backward twice that.
TEST(StackProfile, UnfusedElementwiseWorkCostsItsBytesAtMemoryBandwidth) {
  const double h = 2048, f = 8192;
  // SwiGLU: 5 ffn-wide accesses instead of 3; copies: one pass over q + 2kv, two over 2kv and
  // o_proj's fold of the attention output (h).
  const ExtraSeconds extra = extra_seconds_over_megatron(Framework::nanotron);
  const ExtraSeconds expected = extra_per_layer(tokens * 2 * (2 * f + 2 * (3 * h + 2 * 2 * h) + 2 * h));
  // Beside the layers, the add of the backward's 16-bit gradients into the fp32 buffer (the test
  // SeparateFp32GradientAddsCostTheirBytesEveryMicroBatch): 8 bytes per parameter. The loss's
  // kernels are Megatron-core's unfused ones (the test TheLossKernelsMoveWhatEachStackRuns).
  const ParallelConfig config = config_of(1, 1, 8);
  const GpuSpec& gpu = *find_gpu("H100-SXM");
  const double bandwidth = fitted_compute_efficiency().memory_fraction * gpu.hbm_bytes_per_second;
  EXPECT_NEAR(extra.forward, 24 * expected.forward, 1e-9);
  const double gradient_add = 8 * parameters_on_stage(llama_1b(), config, 0) / bandwidth;
  EXPECT_NEAR(extra.backward, 24 * expected.backward + gradient_add, 1e-9);
}

// Megatron-core (unless --cross-entropy-loss-fusion: megatron/core/model_parallel_config.py
// @d98e8a64 l.320), Megatron-DeepSpeed and nanotron run Megatron-LM's vocab-parallel cross entropy
// on an fp32 copy of the logits made by a cast kernel of its own (Megatron-core @d98e8a64
// tensor_parallel/cross_entropy.py l.25-114; Megatron-DeepSpeed @4efb479d megatron/model/
// gpt_model.py l.438-439, megatron/core/tensor_parallel/cross_entropy.py l.20-68, 124; nanotron
// @2411b022 models/llama.py l.901, parallel/tensor_parallel/functional.py l.40-105): the cast 2 + 4,
// max 4, the shift 4 + 4, exp 4 + 4, sum 4 and divide 4 + 4 bytes per logit forward, 38; the
// multiply by the loss's gradient 4 + 4 and the cast back 4 + 2 backward, 14. Fused
// (fusions/fused_cross_entropy.py l.12-82), the cast with the max 2 + 4, the shift with exp and sum
// 4 + 4, the divide 4 + 4: 22; backward the multiply with the cast back, 4 + 2. Megatron-Bridge fuses
// by default (models/gpt_provider.py @067f987d l.205). torchtitan is priced at 20 and 10. In fp32
// training nothing is cast: 32 and 8, fused 16 and 0.
TEST(StackProfile, TheLossKernelsMoveWhatEachStackRuns) {
  const ParallelConfig config = config_of(2, 2, 4);
  const GpuSpec& gpu = *find_gpu("A100-80GB");
  const ComputeEfficiency efficiency = fitted_compute_efficiency();
  const double bandwidth = efficiency.memory_fraction * gpu.hbm_bytes_per_second;
  const double logits = tokens * 50257 / 2;
  const auto last_stage = [&](Framework framework, Precision precision, std::optional<bool> fusion = std::nullopt) {
    TrainingSpec training = training_for(framework);
    training.precision = precision;
    training.gradients_in_fp32 = false;  // the same backward on every stack: only the loss differs
    if (fusion) training.cross_entropy_fusion = *fusion;
    const PipelineBlocks blocks = pipeline_blocks(llama_1b(), framework, config);
    ParallelConfig same_layers = config;
    same_layers.layers_per_stage = layers_of(blocks);
    return profile_work(llama_1b(), training, gpu, same_layers, efficiency).stages.back().embedding_and_head_seconds;
  };
  EXPECT_FALSE(training_for(Framework::megatron_core).cross_entropy_fusion);
  EXPECT_TRUE(training_for(Framework::nemo).cross_entropy_fusion);
  for (const Precision precision : {Precision::bf16, Precision::fp16, Precision::fp32}) {
    const double unfused = last_stage(Framework::megatron_core, precision);
    const double cast = precision == Precision::fp32 ? 0 : 6 + 6;
    for (const Framework framework : {Framework::megatron_deepspeed, Framework::nanotron}) {
      EXPECT_NEAR(last_stage(framework, precision), unfused, 1e-12) << to_string(framework) << " " << to_string(precision);
    }
    const double fused = last_stage(Framework::megatron_core, precision, true);
    EXPECT_NEAR(unfused - fused, (32 + 8 - 16 - 0) * logits / bandwidth, 1e-12) << to_string(precision);
    EXPECT_DOUBLE_EQ(last_stage(Framework::nemo, precision), fused);
    EXPECT_NEAR(last_stage(Framework::nemo, precision, false), unfused, 1e-12);
    EXPECT_NEAR(last_stage(Framework::torchtitan, precision) - unfused, (20 + 10 - 32 - 8 - cast) * logits / bandwidth, 1e-12)
        << to_string(precision);
    // A stack without a fused loss runs its own whatever the flag says (the engine refuses it).
    EXPECT_DOUBLE_EQ(last_stage(Framework::nanotron, precision, true), last_stage(Framework::nanotron, precision));
  }
}

// ALiBi in Megatron-DeepSpeed's unfused attention: the broadcast bias is copied into QK^T's output
// and read back by the baddbmm (two 16-bit passes over the scores, forward only), and no RoPE passes
// are made (8 extra accesses of q and k per layer, forward, and twice in the backward).
TEST(StackProfile, AlibiCostsTwoScorePassesAndNoRotary) {
  const ParallelConfig config = config_of(1, 1, 8);
  const GpuSpec& gpu = *find_gpu("H100-SXM");
  const ComputeEfficiency efficiency = fitted_compute_efficiency();
  const TrainingSpec training = training_for(Framework::megatron_deepspeed);
  ModelSpec alibi = llama_1b();
  alibi.alibi = true;
  const StageWork rotary_work = profile_work(llama_1b(), training, gpu, config, efficiency).stages.front();
  const StageWork alibi_work = profile_work(alibi, training, gpu, config, efficiency).stages.front();
  const double bandwidth = efficiency.memory_fraction * gpu.hbm_bytes_per_second;
  const double scores = 2 * 32 * 4096.0 * 4096;          // micro-batch 2 × 32 heads × s²
  const double rotary_bytes = tokens * 2 * 8 * (2 * 2048);  // 8 accesses of q and k, 16-bit
  EXPECT_NEAR(alibi_work.forward_compute_seconds - rotary_work.forward_compute_seconds,
              24 * (2 * 2 * scores - rotary_bytes) / bandwidth, 1e-9);
  EXPECT_NEAR(alibi_work.backward_compute_seconds - rotary_work.backward_compute_seconds,
              -24 * 2 * rotary_bytes / bandwidth, 1e-9);
}

// Stacks that add each micro-batch's 16-bit gradients into their fp32 buffer with a kernel of their
// own, after the backward, pay for that pass over every parameter of the rank per micro-batch, beyond
// the reference, whose wgrad GEMMs are priced writing the fp32 gradient themselves (4 bytes):
//  - DeepSpeed's BF16_Optimizer casts each gradient to fp32 and adds it (deepspeed/runtime/
//    bf16_optimizer.py @edaa7221 l.351-377, pipe/engine.py l.861-885): 18 bytes and the 2 the wgrad
//    wrote, 16 beyond;
//  - nanotron's FP32GradientAccumulator adds the 16-bit .grad into the buffer in one mixed-dtype add_
//    (optim/gradient_accumulator.py @2411b022 l.206-223): 2 + 4 read, 4 written, and the 2 the wgrad
//    wrote, 8 beyond.
// Every stage's backward takes that much longer, in fp16 as in bf16 for nanotron; without fp32
// accumulation, or on the reference stack, nothing changes.
TEST(StackProfile, SeparateFp32GradientAddsCostTheirBytesEveryMicroBatch) {
  const ParallelConfig config = config_of(2, 2, 4);
  const GpuSpec& gpu = *find_gpu("A100-80GB");
  const ComputeEfficiency efficiency = fitted_compute_efficiency();
  const double bandwidth = efficiency.memory_fraction * gpu.hbm_bytes_per_second;
  for (const Framework framework : {Framework::megatron_deepspeed, Framework::nanotron, Framework::megatron_core}) {
    const TrainingSpec fp32_accumulation = training_for(framework);
    TrainingSpec bf16_accumulation = fp32_accumulation;
    bf16_accumulation.gradients_in_fp32 = false;
    const WorkProfile with = profile_work(llama_1b(), fp32_accumulation, gpu, config, efficiency);
    const WorkProfile without = profile_work(llama_1b(), bf16_accumulation, gpu, config, efficiency);
    const PipelineBlocks blocks = pipeline_blocks(llama_1b(), framework, config);
    for (int stage = 0; stage < config.pp; ++stage) {
      const StageWork& a = with.stages[static_cast<size_t>(stage)];
      const StageWork& b = without.stages[static_cast<size_t>(stage)];
      const double parameters = parameters_on_stage(llama_1b(), config, stage, blocks.ranks[static_cast<size_t>(stage)]);
      const double bytes_beyond_the_reference = framework == Framework::megatron_deepspeed ? 16.0
                                                : framework == Framework::nanotron           ? 8.0
                                                                                             : 0.0;
      const double expected = bytes_beyond_the_reference * parameters / bandwidth;
      EXPECT_NEAR(a.backward_compute_seconds - b.backward_compute_seconds, expected, 1e-12) << to_string(framework);
      EXPECT_DOUBLE_EQ(a.forward_compute_seconds, b.forward_compute_seconds);
    }
  }
  // nanotron's accumulator runs in fp16 as in bf16 (DeepSpeed's fp16 keeps fp16 gradients: engine.cpp).
  TrainingSpec fp16 = training_for(Framework::nanotron);
  fp16.precision = Precision::fp16;
  TrainingSpec fp16_without = fp16;
  fp16_without.gradients_in_fp32 = false;
  const PipelineBlocks nanotron_blocks = pipeline_blocks(llama_1b(), Framework::nanotron, config);
  const double parameters = parameters_on_stage(llama_1b(), config, 0, nanotron_blocks.ranks[0]);
  EXPECT_NEAR(profile_work(llama_1b(), fp16, gpu, config, efficiency).stages[0].backward_compute_seconds -
                  profile_work(llama_1b(), fp16_without, gpu, config, efficiency).stages[0].backward_compute_seconds,
              8 * parameters / bandwidth, 1e-12);
}

// DeepSpeed's BF16_Optimizer keeps each backward's 16-bit .grads allocated through the next forward,
// clearing them only at the next backward's start or in the step's zero_grad (deepspeed/runtime/
// bf16_optimizer.py @edaa7221 l.348-349, 473-492; pipe/engine.py l.861-863), beside its fp32 buffer:
// 2 bytes per parameter more than Megatron-core's model state. fp16 does not run that optimizer.
TEST(StackProfile, Bf16OptimizerKeepsTheSixteenBitGradientsBesideItsBuffer) {
  for (const Framework framework : {Framework::megatron_deepspeed, Framework::deepspeed, Framework::megatron_core}) {
    TrainingSpec training = training_for(framework);
    const double kept = framework == Framework::megatron_core ? 0.0 : 2.0;
    EXPECT_DOUBLE_EQ(bytes_per_parameter(training, true, 8).gradients, 4 + kept) << to_string(framework);
    EXPECT_DOUBLE_EQ(bytes_per_parameter(training, false, 8).total(), 18 + kept) << to_string(framework);
    training.precision = Precision::fp16;
    EXPECT_DOUBLE_EQ(bytes_per_parameter(training, true, 8).gradients, 4) << to_string(framework);
  }
}

// nanotron wraps the model in PyTorch's DistributedDataParallel whenever dp > 1, except under ZeRO-1
// with fp32 accumulation (trainer.py @2411b022 l.1093-1095, 1156-1161), and DDP's Reducer keeps a
// flat buffer per bucket in the parameters' dtype for the whole job (reducer.cpp initialize_buckets):
// 2 more bytes per bf16 parameter. One replica, or the reference stack's own buffer, adds nothing.
TEST(StackProfile, NanotronDdpKeepsItsFlatGradientBuckets) {
  const TrainingSpec nanotron = training_for(Framework::nanotron);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(nanotron, false, 8).gradients, 4 + 2);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(nanotron, false, 1).gradients, 4);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(nanotron, true, 8).gradients, 4);
  TrainingSpec sixteen_bit = nanotron;
  sixteen_bit.gradients_in_fp32 = false;
  EXPECT_DOUBLE_EQ(bytes_per_parameter(sixteen_bit, true, 8).gradients, 2 + 2);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(training_for(Framework::megatron_core), false, 8).gradients, 4);
}

// The BF16_Optimizer's add casts each 16-bit gradient whole to fp32 first (hp_grad.add_(lp.grad.to(
// fp32)), bf16_optimizer.py @edaa7221 l.371). On a BLOOM-176B-shaped model at tp 1 the first
// stage's embedding gradient becomes a 14.4 GB fp32 transient after every backward: beside the
// other in-flight micro-batches, in place of the finished one and the layer working set, which under
// full recompute are far smaller. Every other stage holds at least as much as before; with 16-bit
// accumulation nothing is cast.
TEST(StackProfile, Bf16OptimizerCastsTheLargestGradientToFp32AfterEachBackward) {
  ModelSpec bloom = testing::gpt_like(64, 14336, 112, 250880);
  bloom.alibi = true;
  TrainingSpec fp32_accumulation = training_for(Framework::megatron_deepspeed);
  fp32_accumulation.sequence_length = 2048;
  fp32_accumulation.global_batch_sequences = 64;
  TrainingSpec bf16_accumulation = fp32_accumulation;
  bf16_accumulation.gradients_in_fp32 = false;
  ParallelConfig config = config_of(1, 8, 1);
  config.micro_batch = 1;
  config.sequence_parallel = false;
  config.recompute = RecomputeMode::full;
  config.layers_per_stage = balanced_layers_per_stage(64, 8);
  const std::vector<StageMemory> with = estimate_memory(bloom, fp32_accumulation, config, RuntimeOverheads{});
  const std::vector<StageMemory> without = estimate_memory(bloom, bf16_accumulation, config, RuntimeOverheads{});
  const int chunks = in_flight_microbatch_chunks(0, 8, 64, 1);
  const double working_set = layer_working_set_bytes(bloom, fp32_accumulation, config);
  const double one_chunk = (without[0].activations_bytes - working_set) / chunks;
  const double cast = 4.0 * 250880 * 14336;
  ASSERT_GT(cast, one_chunk + working_set);
  EXPECT_NEAR(with[0].activations_bytes, (chunks - 1) * one_chunk + cast, 1.0);
  EXPECT_NEAR(with[0].backward_end_bytes, cast, 1.0);
  for (size_t stage = 1; stage < with.size(); ++stage) {
    EXPECT_GE(with[stage].activations_bytes, without[stage].activations_bytes) << stage;
  }
}

// nanotron's FP32GradientAccumulator.backward runs the whole backward, and only then adds each
// parameter's 16-bit .grad into the fp32 buffer and drops it (optim/gradient_accumulator.py @2411b022
// l.206-226): at each backward's end every 16-bit gradient of the rank is allocated (2 bytes per
// parameter) beside the other in-flight micro-batches' activations, where the finished one's and the
// layer working set are gone. Under full recompute at a short sequence that is the peak of every
// rank, and the last rank, with one micro-batch in flight, holds exactly the gradients then. Without
// the fp32 buffer (no accumulator), or on the reference stack, nothing is added.
TEST(StackProfile, NanotronHoldsEveryBackwardsSixteenBitGradientsAtItsEnd) {
  ParallelConfig config = config_of(1, 4, 1);
  config.micro_batch = 1;
  config.recompute = RecomputeMode::full;
  for (const Framework framework : {Framework::nanotron, Framework::megatron_core}) {
    TrainingSpec accumulator = training_for(framework);
    accumulator.sequence_length = 1024;
    TrainingSpec sixteen_bit = accumulator;
    sixteen_bit.gradients_in_fp32 = false;
    const std::vector<StageMemory> with = estimate_memory(llama_1b(), accumulator, config, RuntimeOverheads{});
    const std::vector<StageMemory> without = estimate_memory(llama_1b(), sixteen_bit, config, RuntimeOverheads{});
    const PipelineBlocks blocks = pipeline_blocks(llama_1b(), framework, config);
    const double working_set = layer_working_set_bytes(llama_1b(), accumulator, config);
    for (int stage = 0; stage < config.pp; ++stage) {
      const auto at = static_cast<size_t>(stage);
      if (framework != Framework::nanotron) {
        EXPECT_DOUBLE_EQ(with[at].activations_bytes, without[at].activations_bytes) << stage;
        EXPECT_EQ(with[at].backward_end_bytes, 0) << stage;
        continue;
      }
      const int chunks = in_flight_microbatch_chunks(stage, config.pp, 16, 1);
      const double one_chunk = (without[at].activations_bytes - working_set) / chunks;
      const double gradients = 2 * parameters_on_stage(llama_1b(), config, stage, blocks.ranks[at]);
      ASSERT_GT(gradients, one_chunk + working_set) << stage;
      EXPECT_NEAR(with[at].activations_bytes, (chunks - 1) * one_chunk + gradients, 1.0) << stage;
      EXPECT_NEAR(with[at].backward_end_bytes, gradients, 1.0) << stage;
    }
  }
}

// DeepSpeed chooses its optimizer from the JSON (deepspeed/runtime/engine.py @edaa7221 l.1978-2021):
// bf16 with fp32 accumulation is the BF16_Optimizer the profile prices only under ZeRO stage 1
// (l.1994-1996); without ZeRO it raises NotImplementedError (l.2011-2021). So a DeepSpeed plan in
// bf16 keeps distopt on at any dp, even one replica, and a layout fixed without it is refused with
// the reason; fp16, and every other stack, are unaffected.
TEST(StackLaunch, DeepSpeedBf16RunsItsBf16OptimizerUnderZeroStageOne) {
  ParallelConfig unsharded = config_of(2, 2, 2);
  for (const Framework framework : {Framework::megatron_deepspeed, Framework::deepspeed}) {
    TrainingSpec training = training_for(framework);
    EXPECT_NE(optimizer_problem(training, unsharded).find("ZeRO stage 1"), std::string::npos) << to_string(framework);
    ParallelConfig sharded = unsharded;
    sharded.distributed_optimizer = true;
    EXPECT_EQ(optimizer_problem(training, sharded), "") << to_string(framework);
    training.precision = Precision::fp16;
    EXPECT_EQ(optimizer_problem(training, unsharded), "") << to_string(framework);
  }
  EXPECT_EQ(optimizer_problem(training_for(Framework::megatron_core), unsharded), "");

  // One replica on one node of 8 GPUs: the layouts the search used to leave unsharded.
  const Cluster cluster = h100_nodes(1);
  const SearchOptions options = without_placement();
  TrainingSpec training = training_for(Framework::megatron_deepspeed);
  training.global_batch_sequences = 32;
  training.fixed.dp = 1;
  const Result<SearchResult> one_replica = search_plans(llama_1b(), training, cluster, options);
  ASSERT_TRUE(one_replica.ok()) << one_replica.error().message;
  ASSERT_FALSE(one_replica->plans.empty());
  for (const Plan& plan : one_replica->plans) EXPECT_TRUE(plan.config.distributed_optimizer);

  training.fixed.distributed_optimizer = false;
  const Result<SearchResult> fixed_off = search_plans(llama_1b(), training, cluster, options);
  EXPECT_TRUE(!fixed_off.ok() || fixed_off->plans.empty());
  const Result<Plan> evaluated = evaluate_plan(llama_1b(), training, cluster, unsharded, options);
  ASSERT_FALSE(evaluated.ok());
  EXPECT_NE(evaluated.error().message.find("megatron-deepspeed cannot build it: DeepSpeed runs bf16"), std::string::npos)
      << evaluated.error().message;
}

// DeepSpeed's PipelineEngine with tp > 1 partitions what crosses a stage boundary over the TP group
// (deepspeed/runtime/pipe/engine.py @edaa7221 l.143-144, 731-766, 835-857, 1090-1101): each TP rank
// sends its 1/tp slice, and the tensor is all-gathered over TP (half an all-reduce) where it is used:
// the input before a stage's forward (not on the first stage), the stage's own output and the
// received gradient before its backward (not on the last). With tp = 1 nothing is partitioned.
TEST(StackProfile, DeepSpeedPipelinesSendTheirTensorSlicedOverTensorParallelRanks) {
  ParallelConfig config = config_of(2, 2, 4);
  config.sequence_parallel = false;  // as BLOOM-176B ran
  const GpuSpec& gpu = *find_gpu("A100-80GB");
  const auto work_of = [&](Framework framework, const ParallelConfig& c) {
    return profile_work(llama_1b(), training_for(framework), gpu, c);
  };
  const WorkProfile deepspeed = work_of(Framework::megatron_deepspeed, config);
  const WorkProfile megatron = work_of(Framework::megatron_core, config);
  const double message = tokens * 2048 * 2;  // b·s·h in 16 bits
  EXPECT_DOUBLE_EQ(megatron.p2p_bytes_per_microbatch, message);
  EXPECT_DOUBLE_EQ(deepspeed.p2p_bytes_per_microbatch, message / 2);
  const double gather_bytes = 0.5 * message * 2.0 * (2 - 1) / 2;  // per GPU, as an all-reduce's share
  const int gathers[] = {2, 1};
  const int forward_gathers[] = {0, 1};
  for (size_t stage = 0; stage < 2; ++stage) {
    const StageWork& d = deepspeed.stages[stage];
    const StageWork& m = megatron.stages[stage];
    EXPECT_NEAR(d.tp_bytes_per_microbatch - m.tp_bytes_per_microbatch, gathers[stage] * gather_bytes, 1e-3);
    EXPECT_EQ(d.tp_collectives_per_microbatch - m.tp_collectives_per_microbatch, gathers[stage]);
    EXPECT_NEAR(d.tp_forward_share * d.tp_bytes_per_microbatch - m.tp_forward_share * m.tp_bytes_per_microbatch,
                forward_gathers[stage] * gather_bytes, 1e-3);
  }
  ParallelConfig no_tp = config;
  no_tp.tp = 1;
  no_tp.dp = 8;
  EXPECT_DOUBLE_EQ(work_of(Framework::megatron_deepspeed, no_tp).p2p_bytes_per_microbatch, message);
  EXPECT_DOUBLE_EQ(work_of(Framework::megatron_deepspeed, no_tp).stages[0].tp_bytes_per_microbatch, 0.0);
}

// FlashAttention-3's H100 forward and backward figures (arXiv 2407.08608, "Attention forward speed"
// and "Attention backward speed") at 4k tokens, relative to cuDNN's forward with 128-wide heads,
// where the attention fraction was fitted: the fitted models' forwards stay as they were, their
// backwards run at cuDNN's 499 of 609.
TEST(StackProfile, FlashKernelsRunAtTheirMeasuredShareOfTheFittedRate) {
  const auto forward = [](FlashKernel kernel, double head_dim) { return flash_attention_speed_vs_reference(kernel, head_dim).forward; };
  const auto backward = [](FlashKernel kernel, double head_dim) { return flash_attention_speed_vs_reference(kernel, head_dim).backward; };
  EXPECT_EQ(forward(FlashKernel::cudnn_fused, 128), 1.0);
  EXPECT_DOUBLE_EQ(backward(FlashKernel::cudnn_fused, 128), 499.0 / 609);
  EXPECT_DOUBLE_EQ(forward(FlashKernel::cudnn_fused, 64), 363.0 / 609);
  EXPECT_DOUBLE_EQ(backward(FlashKernel::cudnn_fused, 64), 417.0 / 609);  // faster than its forward at 64
  EXPECT_DOUBLE_EQ(forward(FlashKernel::cudnn_fused, 192), (1 + 483.0 / 609) / 2);
  EXPECT_DOUBLE_EQ(backward(FlashKernel::cudnn_fused, 256), 483.0 / 609 * 499 / 609);  // 128's ratio, uncharted
  EXPECT_DOUBLE_EQ(forward(FlashKernel::flash_attn_2, 64), 284.0 / 609);
  EXPECT_DOUBLE_EQ(backward(FlashKernel::flash_attn_2, 64), 279.0 / 609);
  EXPECT_DOUBLE_EQ(forward(FlashKernel::flash_attn_2, 128), 368.0 / 609);
  EXPECT_DOUBLE_EQ(backward(FlashKernel::flash_attn_2, 128), 310.0 / 609);
  EXPECT_DOUBLE_EQ(forward(FlashKernel::flash_attn_2, 96), (284.0 + 368.0) / 2 / 609);
  EXPECT_DOUBLE_EQ(backward(FlashKernel::flash_attn_2, 96), (279.0 + 310.0) / 2 / 609);
  EXPECT_DOUBLE_EQ(forward(FlashKernel::flash_attn_2, 32), 284.0 / 609);
  EXPECT_DOUBLE_EQ(forward(FlashKernel::flash_attn_2, 512), 293.0 / 609);
  // nanotron calls flash-attn 2; torchtitan's FlexAttention is priced at its rate (the profile's assumption).
  EXPECT_EQ(stack_profile(Framework::nanotron).flash_kernel, FlashKernel::flash_attn_2);
  EXPECT_EQ(stack_profile(Framework::torchtitan).flash_kernel, FlashKernel::flash_attn_2);
  for (Framework framework : {Framework::megatron_core, Framework::nemo}) {
    EXPECT_EQ(stack_profile(framework).flash_kernel, FlashKernel::cudnn_fused);
  }
}

// nanotron's ZeRO-1 all-reduces the gradients after the backward and all-gathers the parameters
// after the step (trainer.py l.643-654, optim/zero.py l.118-119); DeepSpeed's stage 1 likewise
// (stage_1_and_2.py l.861-881, 2393-2400). On the 1B over 8 replicas at 100 GB/s the step grows by
// the gather, a quarter of the gradient all-reduce's time, beyond the now exposed all-reduce.
TEST(StackProfile, ZeroOneStacksGatherTheParametersAfterTheStep) {
  for (const Framework framework : {Framework::nanotron, Framework::deepspeed, Framework::megatron_deepspeed}) {
    EXPECT_EQ(training_for(framework).sharded_optimizer, ShardedOptimizerCollectives::all_reduce_and_gather_after_step)
        << to_string(framework);
  }
  EXPECT_EQ(training_for(Framework::megatron_core).sharded_optimizer,
            ShardedOptimizerCollectives::reduce_scatter_and_overlapped_gather);
  const GpuSpec& gpu = *find_gpu("H100-SXM");
  ParallelConfig config = config_of(1, 1, 8);
  config.distributed_optimizer = true;
  TrainingSpec training = training_for(Framework::nanotron);
  const WorkProfile work = profile_work(llama_1b(), training, gpu, config, fitted_compute_efficiency());
  CommunicationTimes communication;
  communication.tp_seconds = {std::vector<double>(8, 0.0)};
  communication.dp_seconds = {0.2};
  const TimeBreakdown sharded = critical_path(config, work, communication, training);
  config.distributed_optimizer = false;
  const WorkProfile ddp_work = llama_1b_work(training, config);
  const TimeBreakdown replicated = critical_path(config, ddp_work, communication, training);
  EXPECT_NEAR(sharded.dp_communication_seconds, 0.2 + 0.05, 1e-12);
  EXPECT_LT(replicated.dp_communication_seconds, 0.2);  // DDP's all-reduce under the backward
}

// nanotron's DDP reduces in PyTorch's buckets of ddp_bucket_cap_mb = 25 MB of 16-bit gradients
// (config/config.py @2411b022 l.313, trainer.py l.1156-1161), one all_reduce_coalesced each
// (optim/gradient_accumulator.py l.383): 25 MiB / 2 bytes = 13,107,200 parameters a bucket, and the
// last, with the tied word embedding (50257 x 2048 parameters), waits for the backward's end.
// Under ZeRO-1 there is no DDP: one all-reduce of the whole buffer after the backward.
TEST(GradientBuckets, NanotronReducesInDdpBucketsOfTwentyFiveMebibytes) {
  const TrainingSpec training = training_for(Framework::nanotron);
  ParallelConfig config = config_of(1, 1, 8);
  const double parameters = parameters_on_stage(llama_1b(), config, 0);
  const StageWork ddp = llama_1b_work(training, config).stages[0];
  const double bucket = 25.0 * 1024 * 1024 / 2;
  EXPECT_EQ(ddp.gradient_reduction_collectives, static_cast<int>(std::ceil(parameters / bucket)));
  EXPECT_GT(ddp.gradient_reduction_collectives, 80);
  EXPECT_DOUBLE_EQ(ddp.first_chunk_gradient_tail_share, 50257.0 * 2048 / parameters);
  config.distributed_optimizer = true;
  const StageWork zero_one = llama_1b_work(training, config).stages[0];
  EXPECT_EQ(zero_one.gradient_reduction_collectives, 1);
  EXPECT_DOUBLE_EQ(zero_one.first_chunk_gradient_tail_share, 1.0);
  // One replica reduces nothing.
  const StageWork alone = llama_1b_work(training, config_of(1, 1, 1)).stages[0];
  EXPECT_EQ(alone.gradient_reduction_collectives, 1);
  EXPECT_EQ(alone.first_chunk_gradient_tail_share, 0.0);
}

// Megatron-core's buckets are max(40M, 1M x dp·cp) parameters (training/training.py @d98e8a64
// l.2179-2194), on the first pipeline stage's first model chunk only: every other chunk, and every
// chunk of a later stage, is one bucket reduced when its backward ends (training.py l.2504-2515,
// core/distributed/distributed_data_parallel.py l.160-171). Without --overlap-grad-reduce every
// chunk is one bucket.
TEST(GradientBuckets, MegatronBucketsOnlyTheFirstStagesFirstChunk) {
  TrainingSpec training = training_for(Framework::megatron_core);
  training.global_batch_sequences = 64;
  ParallelConfig config = config_of(1, 2, 4);
  config.virtual_stages = 2;
  const WorkProfile work = llama_1b_work(training, config);
  const auto dense_parameters = [&](int stage) { return parameters_on_stage(llama_1b(), config, stage); };
  const double chunk = dense_parameters(0) / 2;
  EXPECT_EQ(work.stages[0].gradient_reduction_collectives, static_cast<int>(std::ceil(chunk / 40e6)) + 1);
  EXPECT_DOUBLE_EQ(work.stages[0].first_chunk_gradient_tail_share, 50257.0 * 2048 / chunk);
  EXPECT_DOUBLE_EQ(work.stages[0].later_chunk_gradient_tail_share, 1.0);
  EXPECT_EQ(work.stages[1].gradient_reduction_collectives, 2);
  EXPECT_DOUBLE_EQ(work.stages[1].first_chunk_gradient_tail_share, 1.0);
  EXPECT_DOUBLE_EQ(work.stages[1].later_chunk_gradient_tail_share, 1.0);
  // Over 64 replicas a bucket holds 1M x 64 parameters: fewer collectives.
  config.dp = 64;
  training.global_batch_sequences = 1024;
  const StageWork wide = llama_1b_work(training, config).stages[0];
  EXPECT_EQ(wide.gradient_reduction_collectives, static_cast<int>(std::ceil(chunk / 64e6)) + 1);
  training.overlap_gradient_reduce = false;
  const StageWork serial = llama_1b_work(training, config).stages[0];
  EXPECT_EQ(serial.gradient_reduction_collectives, 2);
  EXPECT_DOUBLE_EQ(serial.first_chunk_gradient_tail_share, 1.0);
}

// torchtitan replicates through FSDP2's units too (distributed/fsdp.py @b5bcd76c l.92: ReplicateModule
// is an FSDPModule), one per transformer block (l.240-266): with fsdp=off over 4 replicas a stage
// of 12 blocks is reduced block by block, and the unit holding the embedding goes last.
TEST(GradientBuckets, TorchtitanReducesBlockByBlock) {
  TrainingSpec training = training_for(Framework::torchtitan);
  training.global_batch_sequences = 64;
  const ParallelConfig config = config_of(1, 2, 4);
  const WorkProfile work = llama_1b_work(training, config);
  const double block = 4.0 * 2048 * 2048 + 3.0 * 2048 * 8192;
  const double first_stage = parameters_on_stage(llama_1b(), config, 0);
  EXPECT_EQ(work.stages[0].gradient_reduction_collectives, static_cast<int>(std::ceil(first_stage / block)));
  EXPECT_DOUBLE_EQ(work.stages[0].first_chunk_gradient_tail_share, 50257.0 * 2048 / first_stage);
  EXPECT_DOUBLE_EQ(work.stages[1].first_chunk_gradient_tail_share, block / parameters_on_stage(llama_1b(), config, 1));
}

// nanotron's tp_recompute_allgather (config/parallelism_config.py @2411b022 l.36). Off, with
// sequence parallelism, each layer keeps its two column-parallel inputs (QKV's and gate_up's, h
// wide) gathered over the TP group instead of the rank's shard, and the backward gathers nothing
// again; on (main's default since 9cc81bb6, as Transformer Engine does) the reverse.
TEST(StackProfile, NanotronTpRecomputeAllgatherTradesMemoryForTheBackwardRegather) {
  const ModelSpec model = llama_1b();
  const int tp = 4;
  const ParallelConfig config = config_of(tp, 1, 2);
  // The profile re-gathers, as nanotron does when the key is unset; the releases v0.1-v0.5 keep the
  // gathered inputs (functional.py l.352-358 @a27e8fe8), which the switch's off prices.
  TrainingSpec regather = training_for(Framework::nanotron);
  ASSERT_TRUE(regather.tensor_parallel_recompute_allgather);
  EXPECT_TRUE(training_for(Framework::megatron_core).tensor_parallel_recompute_allgather);
  TrainingSpec keep = regather;
  keep.tensor_parallel_recompute_allgather = false;
  // 2 inputs x 8192 tokens x 2048 wide x (1 - 1/4) x 2 bytes = 50,331,648 bytes more per layer.
  const double kept_bytes = 2 * tokens * 2048 * (1 - 1.0 / tp) * 2;
  EXPECT_DOUBLE_EQ(kept_bytes, 50331648.0);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, keep, config) - layer_activation_bytes(model, regather, config), kept_bytes);
  // Without sequence parallelism every rank holds the whole input either way.
  ParallelConfig replicated = config;
  replicated.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, keep, replicated), layer_activation_bytes(model, regather, replicated));

  // Time: the re-gather (half an all-reduce of the s·b·h activation per column-parallel GEMM, two
  // per layer) leaves the TP traffic of each of the 24 layers.
  const GpuSpec& gpu = *find_gpu("H100-SXM");
  const double regather_traffic = profile_work(model, regather, gpu, config).stages[0].tp_bytes_per_microbatch;
  const double keep_traffic = profile_work(model, keep, gpu, config).stages[0].tp_bytes_per_microbatch;
  const double activation_message = tokens * 2048 * 2;
  EXPECT_NEAR(regather_traffic - keep_traffic, 24 * 2 * 0.5 * activation_message * 2.0 * (tp - 1) / tp, 1.0);
  EXPECT_DOUBLE_EQ(profile_work(model, keep, gpu, replicated).stages[0].tp_bytes_per_microbatch,
                   profile_work(model, regather, gpu, replicated).stages[0].tp_bytes_per_microbatch);
}

// ALiBi runs only under BigScience's Megatron-DeepSpeed (and the job's own model under deepspeed):
// every other framework refuses it, whatever the layout.
TEST(StackLaunch, AlibiOnlyUnderMegatronDeepSpeedOrDeepSpeed) {
  ModelSpec model = llama_1b();
  model.alibi = true;
  const ParallelConfig config = config_of(1, 1, 8);
  for (const Framework framework : {Framework::megatron_core, Framework::nemo, Framework::torchtitan, Framework::nanotron}) {
    EXPECT_EQ(launch_problem({framework, false}, model, config, 1),
              std::string("its ALiBi attention biases (alibi: true) are not among ") + to_string(framework) +
                  "'s position embeddings (plan it for megatron-deepspeed or deepspeed)");
  }
  for (const Framework framework : {Framework::megatron_deepspeed, Framework::deepspeed}) {
    EXPECT_EQ(launch_problem({framework, false}, model, config, 1), "") << to_string(framework);
  }
  // The search says so once, not as the reason every layout was dropped ("no plan fits memory").
  const Result<SearchResult> searched = search_plans(model, training_for(Framework::megatron_core), h100_nodes(1), SearchOptions{});
  ASSERT_FALSE(searched.ok());
  EXPECT_EQ(searched.error().message,
            "megatron-core cannot train llama-1b: its ALiBi attention biases (alibi: true) are not among megatron-core's "
            "position embeddings (plan it for megatron-deepspeed or deepspeed)");
}

// Which heads each stack's attention kernel takes. Transformer Engine (Megatron-core, NeMo) picks
// flash-attn 2 or cuDNN's fused attention where the heads allow (widths multiples of 8, at most 256:
// transformer_engine/pytorch/attention/dot_product_attention/utils.py @d0067d0d l.926-950,
// common/fused_attn/fused_attn.cpp l.310-319) and its unfused attention elsewhere; nanotron calls
// flash-attn 2 itself, which pads a head to a multiple of 8 (flash_attn/flash_attn_interface.py
// @0251105a l.942) and refuses one wider than 256 (csrc/flash_attn/flash_api.cpp l.634).
TEST(StackLaunch, AttentionKernelsTakeOnlyTheHeadsTheirStackRuns) {
  const auto with_heads = [](int hidden, int heads) {
    ModelSpec model = llama_1b();
    model.hidden_size = hidden;
    model.num_attention_heads = heads;
    model.num_kv_heads = heads;
    return model;
  };
  const ParallelConfig config = config_of(1, 1, 8);
  const ModelSpec widest_fused = with_heads(2048, 8), too_wide = with_heads(2048, 4), unaligned = with_heads(2000, 20);
  for (const Framework framework : {Framework::megatron_core, Framework::nemo}) {
    EXPECT_EQ(unfused_attention_fallback(llama_1b(), framework), "");
    EXPECT_EQ(unfused_attention_fallback(widest_fused, framework), "");
    EXPECT_EQ(unfused_attention_fallback(too_wide, framework),
              "Transformer Engine has no flash-attn 2 or cuDNN fused attention kernel for heads 512 wide (both need "
              "multiples of 8, at most 256: transformer_engine/pytorch/attention/dot_product_attention/utils.py "
              "@d0067d0d l.926-950, common/fused_attn/fused_attn.cpp l.310-319), so it runs its unfused attention");
    EXPECT_NE(unfused_attention_fallback(unaligned, framework).find("heads 100 wide"), std::string::npos);
  }
  // Multi-latent attention's 192-wide Q and K beside 128-wide V: flash-attn 2 pads V to 192.
  ModelSpec latent = llama_1b();
  latent.q_lora_rank = 192;
  latent.kv_lora_rank = 64;
  latent.qk_head_dim = 128;
  latent.qk_pos_emb_head_dim = 64;
  latent.v_head_dim = 128;
  EXPECT_EQ(unfused_attention_fallback(latent, Framework::megatron_core), "");
  ModelSpec wide_latent = latent;
  wide_latent.qk_head_dim = 256;
  EXPECT_NE(unfused_attention_fallback(wide_latent, Framework::megatron_core).find("heads 320 (Q, K) and 128 (V) wide"),
            std::string::npos);
  // The other stacks choose their kernel themselves: Megatron-DeepSpeed's is unfused already,
  // torchtitan's SDPA falls back within PyTorch.
  for (const Framework framework : {Framework::megatron_deepspeed, Framework::deepspeed, Framework::torchtitan, Framework::nanotron})
    EXPECT_EQ(unfused_attention_fallback(too_wide, framework), "") << to_string(framework);

  const FrameworkTarget nanotron{Framework::nanotron, false};
  EXPECT_EQ(launch_problem(nanotron, widest_fused, config, 8), "");
  EXPECT_EQ(launch_problem(nanotron, unaligned, config, 8), "");
  EXPECT_EQ(launch_problem(nanotron, too_wide, config, 8),
            "its heads are 512 wide, and nanotron's flash-attn 2 (flash_attn_varlen_func, models/llama.py l.290) takes "
            "at most 256");
  for (const Framework framework : {Framework::megatron_core, Framework::megatron_deepspeed, Framework::torchtitan})
    EXPECT_EQ(launch_problem({framework, false}, too_wide, config, 1), "") << to_string(framework);
}

TEST(StackLaunch, EachStackRefusesWhatItCannotRun) {
  const ModelSpec model = llama_1b();
  ParallelConfig selective = config_of(1, 1, 8);
  selective.recompute = RecomputeMode::selective;
  ParallelConfig uneven = config_of(1, 2, 4);
  uneven.layers_per_stage = {11, 13};
  const FrameworkTarget nanotron{Framework::nanotron, false}, deepspeed{Framework::deepspeed, false},
      megatron_deepspeed{Framework::megatron_deepspeed, false};
  // nanotron runs only its own partition (models/base.py l.221-233): the lm_head (50257·2048, 1.53
  // layers' cost) pushes the middle of 25.5 layers' cost into layer 13, so [13, 11], which an even
  // split is not.
  ParallelConfig own = config_of(2, 2, 2);
  own.layers_per_stage = {13, 11};
  EXPECT_EQ(launch_problem(nanotron, model, own, 8), "");
  EXPECT_EQ(launch_problem(nanotron, model, config_of(2, 2, 2), 8),
            "nanotron partitions the model itself (models/base.py build_model): on pp=2 its layers per stage are "
            "[13,11], not [12,12]");
  // ZeRO-1 beside dp > 1 is built: nanotron's releases and its bench_cluster branch run it
  // (trainer.py l.701-703 @v0.5 leaves DDP out); only main since 7bc99232 does not, which the
  // search answers by leaving it off unless fixed (NanotronZeroOneOnlyWhenFixed).
  ParallelConfig zero_one = own;
  zero_one.distributed_optimizer = true;
  EXPECT_EQ(launch_problem(nanotron, model, zero_one, 8), "");
  own.virtual_stages = 2;
  EXPECT_EQ(launch_problem(nanotron, model, own, 8), "nanotron has no interleaved pipeline schedule (vpp must be 1)");
  EXPECT_EQ(launch_problem(nanotron, model, selective, 8),
            "nanotron recomputes whole layers (recompute_layer) or nothing, not selectively");
  EXPECT_EQ(launch_problem(megatron_deepspeed, model, selective, 8), "");
  EXPECT_EQ(launch_problem(megatron_deepspeed, model, uneven, 8),
            "megatron-deepspeed partitions the layers itself (DeepSpeed's 'type:transformer'): on pp=2 its layers "
            "per stage are [12,12], not [11,13]");
  EXPECT_NE(launch_problem(deepspeed, model, uneven, 8).find("is not even"), std::string::npos);
  EXPECT_EQ(launch_problem(deepspeed, model, config_of(2, 1, 4), 8),
            "DeepSpeed's engine has no tensor parallelism of its own (tp must be 1)");
  EXPECT_EQ(launch_problem(deepspeed, model, config_of(1, 2, 4), 8), "");
  // Block recompute (recompute=block:N) only Megatron-core's checkpointed_forward runs: each other
  // stack refuses it, naming what it can do instead.
  ParallelConfig block = config_of(1, 1, 8);
  block.recompute = RecomputeMode::full;
  block.recomputed_layers_per_chunk = 4;
  EXPECT_EQ(launch_problem(nanotron, model, block, 8),
            "nanotron's recompute_layer checkpoints every decoder layer or none (models/llama.py @2411b022 l.761-776), "
            "not the first N of a stage (recompute=block:4): plan with recompute=full");
  for (const FrameworkTarget& target : {deepspeed, megatron_deepspeed, FrameworkTarget{Framework::torchtitan, false}})
    EXPECT_NE(launch_problem(target, model, block, 8).find("plan with recompute=full"), std::string::npos);
  for (const Framework framework : {Framework::megatron_core, Framework::nemo})
    EXPECT_EQ(launch_problem({framework, false}, model, block, 8), "");
  block.recomputed_layers_per_chunk = 0;
  EXPECT_EQ(launch_problem(nanotron, model, block, 8), "");
  // The profiles price no ring attention: each stack refuses cp > 1 rather than run it unpriced.
  ParallelConfig context_parallel = config_of(1, 1, 4);
  context_parallel.cp = 2;
  for (const FrameworkTarget& target : {nanotron, deepspeed, megatron_deepspeed}) {
    EXPECT_EQ(launch_problem(target, model, context_parallel, 8),
              std::string("context parallelism is not priced for ") + to_string(target.framework) + " (cp must be 1)");
  }
}

// The Ultra-Scale Playbook's DP runs were nanotron ZeRO-1 beside dp 8 to 256 (bench_cluster's
// base_config.py zero_stage 1): fixed, such a layout is priced, not refused; free, the search
// leaves ZeRO-1 off, since nanotron's main since 7bc99232 cannot start it (trainer.py
// l.1093-1095, optim/gradient_accumulator.py l.354-355 @2411b022).
TEST(StackLaunch, NanotronZeroOneOnlyWhenFixed) {
  const Cluster cluster = h100_nodes(2);
  const SearchOptions options = without_placement();
  TrainingSpec training = training_for(Framework::nanotron);
  training.global_batch_sequences = 32;
  const Result<SearchResult> free = search_plans(llama_1b(), training, cluster, options);
  ASSERT_TRUE(free.ok()) << free.error().message;
  ASSERT_FALSE(free->plans.empty());
  for (const Plan& plan : free->plans) EXPECT_FALSE(plan.config.distributed_optimizer) << plan.config.dp;

  training.fixed.distributed_optimizer = true;
  const Result<SearchResult> fixed = search_plans(llama_1b(), training, cluster, options);
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  ASSERT_FALSE(fixed->plans.empty());
  EXPECT_GT(fixed->plans.front().config.dp, 1);
  EXPECT_TRUE(fixed->plans.front().config.distributed_optimizer);

  ParallelConfig ultrascale = config_of(1, 1, 16);
  ultrascale.distributed_optimizer = true;
  const Result<Plan> evaluated = evaluate_plan(llama_1b(), training, cluster, ultrascale, options);
  ASSERT_TRUE(evaluated.ok()) << evaluated.error().message;
  EXPECT_TRUE(evaluated->config.distributed_optimizer);
}

// BLOOM-176B trained 70 layers on pp 12 with Megatron-DeepSpeed (bigscience tr11-176B-ml); DeepSpeed's
// partition_balanced over GPTModelPipe's layer specs (deepspeed/runtime/utils.py @edaa7221
// l.627-664, run by hand on [cast, embedding, 70 layers, norm, head, cast]) gives the first ten
// stages 6 layers and the last two 5. Such a layout is priced with that split, not refused.
TEST(StackLaunch, MegatronDeepSpeedPricesDeepSpeedsOwnSplit) {
  EXPECT_EQ(megatron_deepspeed_layer_split(70, 12), (std::vector<int>{6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5, 5}));
  EXPECT_EQ(megatron_deepspeed_layer_split(30, 4), (std::vector<int>{8, 8, 7, 7}));
  EXPECT_EQ(megatron_deepspeed_layer_split(24, 5), (std::vector<int>{5, 5, 5, 5, 4}));
  ModelSpec model = llama_1b();
  model.num_layers = 30;
  TrainingSpec training = training_for(Framework::megatron_deepspeed);
  training.global_batch_sequences = 32;
  training.sequence_length = 1024;  // its unfused softmax keeps the s x s scores
  const Cluster cluster = h100_nodes(1);
  const SearchOptions options = without_placement();
  ParallelConfig config = config_of(1, 4, 2);
  config.layers_per_stage.clear();
  config.distributed_optimizer = true;  // bf16 under DeepSpeed (optimizer_problem)
  const Result<Plan> plan = evaluate_plan(model, training, cluster, config, options);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->config.layers_per_stage, (std::vector<int>{8, 8, 7, 7}));
  training.fixed.pp = 4;
  const Result<SearchResult> searched = search_plans(model, training, cluster, options);
  ASSERT_TRUE(searched.ok()) << searched.error().message;
  ASSERT_FALSE(searched->plans.empty());
  EXPECT_EQ(searched->plans.front().config.layers_per_stage, (std::vector<int>{8, 8, 7, 7}));
  // More stages than layers (BLOOM-176B ran 70 layers on pp 72): a layer on each of the first L.
  EXPECT_EQ(megatron_deepspeed_layer_split(3, 5), (std::vector<int>{1, 1, 1, 0, 0}));
  const FrameworkTarget target{Framework::megatron_deepspeed, false};
  config.pp = 32;
  config.layers_per_stage = megatron_deepspeed_layer_split(30, 32);
  EXPECT_EQ(launch_problem(target, model, config, 32), "");
}

TEST(StackLaunch, ExportsSayWhatWasPriced) {
  LaunchDescription launch;
  launch.tp = 2;
  launch.pp = 2;
  launch.dp = 4;
  launch.micro_batch = 2;
  launch.num_microbatches = 8;
  launch.global_batch = 64;
  launch.sequence_length = 4096;
  launch.max_position_embeddings = 4096;
  launch.sequence_parallel = true;
  launch.distributed_optimizer = true;
  launch.recompute = RecomputeMode::full;
  EXPECT_EQ(nanotron_overrides(launch),
            "parallelism.dp=4 parallelism.tp=2 parallelism.pp=2 parallelism.pp_engine=1f1b "
            "parallelism.tp_mode=REDUCE_SCATTER parallelism.tp_linear_async_communication=false "
            "parallelism.tp_recompute_allgather=true "
            "parallelism.recompute_layer=true tokens.micro_batch_size=2 tokens.batch_accumulation_per_replica=8 "
            "tokens.sequence_length=4096 optimizer.zero_stage=1 optimizer.accumulate_grad_in_fp32=true");
  // The engine's switches (engine.hpp) as nanotron's keys.
  LaunchDescription switched = launch;
  switched.tp_backward_overlap = true;
  switched.tp_recompute_allgather = false;
  switched.fp32_gradients = false;
  const std::string overrides = nanotron_overrides(switched);
  for (const char* key : {"parallelism.tp_linear_async_communication=true", "parallelism.tp_recompute_allgather=false",
                          "optimizer.accumulate_grad_in_fp32=false"})
    EXPECT_NE(overrides.find(key), std::string::npos) << key;
  EXPECT_EQ(megatron_deepspeed_arguments(launch),
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 64 "
            "--seq-length 4096 --max-position-embeddings 4096 --recompute-granularity full --recompute-method uniform "
            "--recompute-num-layers 1 --sequence-parallel --deepspeed --zero-stage 1");
  // The precision section and the accumulation dtype pick DeepSpeed's optimizer: bf16 with fp32
  // accumulation is the BF16_Optimizer that was priced (deepspeed/runtime/engine.py @edaa7221
  // l.1994-1996); fp16 the FP16_Optimizer; fp32 needs neither.
  EXPECT_EQ(deepspeed_config(launch),
            "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 8, "
            "\"zero_optimization\": {\"stage\": 1}, \"bf16\": {\"enabled\": true}, "
            "\"data_types\": {\"grad_accum_dtype\": \"fp32\"}}");
  LaunchDescription fp16 = launch;
  fp16.precision = Precision::fp16;
  EXPECT_EQ(deepspeed_config(fp16),
            "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 8, "
            "\"zero_optimization\": {\"stage\": 1}, \"fp16\": {\"enabled\": true}}");
  LaunchDescription fp32 = launch;
  fp32.precision = Precision::fp32;
  EXPECT_EQ(deepspeed_config(fp32).find("enabled"), std::string::npos);
  EXPECT_EQ(framework_arguments(Framework::nanotron, launch).first, "PIPETTE_NANOTRON_OVERRIDES");
  EXPECT_EQ(framework_arguments(Framework::megatron_deepspeed, launch).first, "PIPETTE_MEGATRON_DEEPSPEED_ARGS");
  EXPECT_EQ(framework_arguments(Framework::deepspeed, launch).first, "PIPETTE_DEEPSPEED_CONFIG");
}

}  // namespace
}  // namespace pipette
