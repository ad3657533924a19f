#include "pipette/core/memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "pipette/core/simulator.hpp"

namespace pipette {
namespace {

// Korthikanti et al. 2022 (arXiv 2205.05198), Table 2: activation bytes per transformer layer.
// GPT-3 175B shapes from ground_truth_data/korthikanti2022_tables.csv: s 2048, h 12288, a 96, t 8.
constexpr int s = 2048, b = 1, h = 12288, a = 96, t = 8;
const double sbh = static_cast<double>(s) * b * h;
const double score_term = 5.0 * a * s / h;

TEST(KorthikantiTable2, NoParallelism) {
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, 1, false, RecomputeMode::none),
                   sbh * (34 + score_term));
}

TEST(KorthikantiTable2, TensorParallelBaseline) {
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, t, false, RecomputeMode::none),
                   sbh * (10 + 24.0 / t + score_term / t));
}

TEST(KorthikantiTable2, TensorPlusSequenceParallel) {
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, t, true, RecomputeMode::none),
                   sbh / t * (34 + score_term));
}

TEST(KorthikantiTable2, TensorParallelWithSelectiveRecompute) {
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, t, false, RecomputeMode::selective),
                   sbh * (10 + 24.0 / t));
}

TEST(KorthikantiTable2, TensorSequenceAndSelectiveRecompute) {
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, t, true, RecomputeMode::selective), 34 * sbh / t);
}

TEST(KorthikantiTable2, FullRecomputeKeepsTheLayerInput) {
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, t, false, RecomputeMode::full), 2 * sbh);
  // With sequence parallelism the stored input is the sequence-split hidden state.
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, b, h, a, t, true, RecomputeMode::full), 2 * sbh / t);
}

TEST(KorthikantiTable2, ScalesLinearlyWithMicroBatch) {
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(s, 4, h, a, t, true, RecomputeMode::none),
                   4 * korthikanti_layer_activation_bytes(s, 1, h, a, t, true, RecomputeMode::none));
}

ModelSpec gpt3_175b() {
  ModelSpec model;
  model.name = "gpt3-175b";
  model.num_layers = 96;
  model.hidden_size = h;
  model.num_attention_heads = a;
  model.num_kv_heads = a;
  model.ffn_hidden_size = 4 * h;
  model.vocab_size = 51200;
  model.learned_position_embeddings = 2048;
  return model;
}

TrainingSpec training_of(int global_batch, AttentionKernel kernel) {
  TrainingSpec training;
  training.global_batch_sequences = global_batch;
  training.sequence_length = s;
  training.attention = kernel;
  return training;
}

ParallelConfig config_of(int tp, int pp, int dp, bool sp, RecomputeMode recompute) {
  ParallelConfig config;
  config.tp = tp;
  config.pp = pp;
  config.dp = dp;
  config.sequence_parallel = sp;
  config.recompute = recompute;
  return config;
}

TEST(LayerActivation, UnfusedGptMatchesKorthikanti) {
  const ModelSpec model = gpt3_175b();
  for (const bool sp : {false, true}) {
    for (const RecomputeMode mode : {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full}) {
      EXPECT_DOUBLE_EQ(layer_activation_bytes(model, training_of(64, AttentionKernel::unfused), config_of(t, 8, 1, sp, mode)),
                       korthikanti_layer_activation_bytes(s, b, h, a, t, sp, mode));
    }
  }
}

// Flash attention's log-sum-exp: one fp32 per head and query, kept for its backward (Transformer
// Engine's fused attention saves it as `aux_ctx_tensors`).
const double lse_bytes = 4.0 * a * s * b;

TEST(LayerActivation, FlashAttentionDropsTheScoreTermAndKeepsTheSoftmaxStatistics) {
  const ModelSpec model = gpt3_175b();
  const ParallelConfig config = config_of(t, 8, 1, true, RecomputeMode::none);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, training_of(64, AttentionKernel::flash), config),
                   34 * sbh / t + lse_bytes / t);
}

TEST(LayerActivation, RotaryModelsKeepRotatedQueryAndKeyBesideTheQkvBuffer) {
  // Megatron-core attention.py @d98e8a64 l.1898-1914 splits the QKV output into views and
  // l.1508-1535 rotates Q and K out of place: V keeps the QKV buffer alive beside the copies.
  ModelSpec learned = gpt3_175b();
  ModelSpec rotary = learned;
  rotary.learned_position_embeddings = 0;
  const ParallelConfig config = config_of(t, 8, 1, true, RecomputeMode::none);
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(rotary, training, config) - layer_activation_bytes(learned, training, config),
                   2.0 * s * b * (h + h) / t);
}

TEST(LayerActivation, GroupedQueryAttentionShrinksKeyAndValue) {
  ModelSpec mha = gpt3_175b();
  ModelSpec gqa = mha;
  gqa.num_kv_heads = 8;  // kv_hidden = 8 × 128 = 1024
  const ParallelConfig config = config_of(t, 8, 1, true, RecomputeMode::none);
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  // K and V are kept in 16 bits: 2 tensors × 2 bytes × s·b·(h − kv_hidden) / t less.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(mha, training, config) - layer_activation_bytes(gqa, training, config),
                   4.0 * s * b * (h - 1024) / t);
}

TEST(LayerActivation, SwigluKeepsThreeFfnWideTensors) {
  ModelSpec model = gpt3_175b();
  model.ffn_kind = FfnKind::swiglu;
  model.ffn_hidden_size = 8192;
  const ParallelConfig config = config_of(1, 1, 1, false, RecomputeMode::selective);
  // 10 sbh replicated + Q, K, V, attention output (8 sbh) + gate, up, product (3 × 2 × s·b·f).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, training_of(64, AttentionKernel::flash), config),
                   18 * sbh + 6.0 * s * b * 8192 + lse_bytes);
}

TEST(LayerActivation, Fp32ActivationsDoubleTheValuesButNotTheMasks) {
  const ModelSpec model = gpt3_175b();
  TrainingSpec training = training_of(64, AttentionKernel::flash);
  training.precision = Precision::fp32;
  const ParallelConfig config = config_of(1, 1, 1, false, RecomputeMode::none);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, training, config), 2 * 32 * sbh + 2 * sbh + lse_bytes);
}

TEST(LayerActivation, NoDropoutKeepsNoMasksAndNoDropoutOutput) {
  ModelSpec model = gpt3_175b();
  model.dropout = false;
  const ParallelConfig config = config_of(t, 8, 1, false, RecomputeMode::none);
  // 34 − 2 (hidden masks) sbh, and of the 5as/h score term only the softmax output (2as/h).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, training_of(64, AttentionKernel::unfused), config),
                   sbh * (8 + 24.0 / t + 2.0 * a * s / h / t));
}

TEST(LayerActivation, Fp8KeepsGemmInputsAsOneByteCasts) {
  const ModelSpec model = gpt3_175b();
  TrainingSpec training = training_of(64, AttentionKernel::flash);
  const ParallelConfig config = config_of(t, 8, 1, true, RecomputeMode::none);
  const double bf16 = layer_activation_bytes(model, training, config);
  training.precision = Precision::fp8;
  // QKV and MLP inputs (h each) and the attention output (h) and GeLU output (4h) lose a byte.
  EXPECT_DOUBLE_EQ(bf16 - layer_activation_bytes(model, training, config), 7 * sbh / t);
}

TEST(InFlightMicrobatches, OneFOneBStageHoldsPipelineDepthMinusIndex) {
  for (int stage = 0; stage < 8; ++stage) EXPECT_EQ(in_flight_microbatch_chunks(stage, 8, 64, 1), 8 - stage);
  EXPECT_EQ(in_flight_microbatch_chunks(0, 8, 3, 1), 3);  // fewer micro-batches than stages
}

TEST(InFlightMicrobatches, InterleavedHoldsMegatronWarmupPlusOne) {
  // Megatron-LM's interleaved schedule: rank i warms up with 2(p−i−1) + (v−1)p chunk forwards.
  EXPECT_EQ(in_flight_microbatch_chunks(0, 4, 16, 2), 2 * 3 + 4 + 1);
  EXPECT_EQ(in_flight_microbatch_chunks(3, 4, 16, 2), 0 + 4 + 1);
  EXPECT_EQ(in_flight_microbatch_chunks(0, 4, 2, 2), 4);  // capped by m·v
}

TEST(InFlightMicrobatches, MatchTheScheduleOpByOp) {
  // Count, in each rank's program as the simulator runs it, the most chunk passes whose forward has
  // run and whose backward has not: that is what the rank must keep.
  for (int pp = 1; pp <= 8; ++pp) {
    for (int chunks = 1; chunks <= 4; ++chunks) {
      for (int m = 1; m <= 3 * pp + 2; ++m) {
        if (chunks > 1 && (pp == 1 || m < pp)) continue;  // Megatron rejects these
        for (int stage = 0; stage < pp; ++stage) {
          int held = 0, most = 0;
          for (const ScheduledOp& op : pipeline_rank_program(pp, stage, m, chunks)) {
            held += op.backward ? -1 : 1;
            most = std::max(most, held);
          }
          EXPECT_EQ(in_flight_microbatch_chunks(stage, pp, m, chunks), most)
              << "pp=" << pp << " v=" << chunks << " m=" << m << " stage=" << stage;
        }
      }
    }
  }
}

TEST(InFlightMicrobatches, AllForwardAllBackwardHoldsEveryMicrobatchOnEveryRank) {
  // nanotron's afab engine (parallel/pipeline_parallel/engine.py @2411b022 l.198-230): every
  // forward before the first backward, whatever the rank and the pipeline depth, pp = 1 included.
  constexpr PipelineSchedule afab = PipelineSchedule::all_forward_all_backward;
  for (int pp = 1; pp <= 6; ++pp) {
    for (int m = 1; m <= 3 * pp + 2; ++m) {
      for (int stage = 0; stage < pp; ++stage) {
        int held = 0, most = 0;
        for (const ScheduledOp& op : pipeline_rank_program(pp, stage, m, 1, afab)) {
          held += op.backward ? -1 : 1;
          most = std::max(most, held);
        }
        EXPECT_EQ(most, m);
        EXPECT_EQ(in_flight_microbatch_chunks(stage, pp, m, 1, afab), most) << "pp=" << pp << " m=" << m;
      }
    }
  }
}

TEST(InFlightMicrobatches, InterleavedWithMicrobatchesNotAMultipleOfPHoldsMore) {
  // p = 4, m = 6: Megatron-core's group is N = 6, so warm-up is 2·3 + (2 − 1)·6 = 12 chunk forwards.
  EXPECT_EQ(interleaved_group_size(4, 6), 6);
  EXPECT_EQ(in_flight_microbatch_chunks(0, 4, 6, 2), 12);  // all m·v chunk passes
  EXPECT_EQ(in_flight_microbatch_chunks(3, 4, 6, 2), 7);
}

TEST(InFlightMicrobatches, InterleavedFirstStageHoldsOnePlusPMinusOneOverPvOfTheModel) {
  // Narayanan et al. SC21: the interleaved schedule's first rank holds activations of
  // L·(1 + (p − 1)/(p·v)) layers, against L for 1F1B.
  const int p = 8, v = 3, layers = 96;
  const double layers_held = in_flight_microbatch_chunks(0, p, 64, v) * (layers / (p * v));
  EXPECT_DOUBLE_EQ(layers_held, layers * (1.0 + (p - 1.0) / (p * v)));
  EXPECT_EQ(in_flight_microbatch_chunks(0, p, 64, 1) * (layers / p), layers);
}

TEST(BytesPerParameter, MegatronDistributedOptimizerTable) {
  TrainingSpec training;
  const int d = 8;
  training.precision = Precision::bf16;
  training.gradients_in_fp32 = true;
  EXPECT_DOUBLE_EQ(bytes_per_parameter(training, false, d).total(), 18);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(training, true, d).total(), 6 + 12.0 / d);
  training.precision = Precision::fp16;
  training.gradients_in_fp32 = false;
  EXPECT_DOUBLE_EQ(bytes_per_parameter(training, false, d).total(), 20);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(training, true, d).total(), 4 + 16.0 / d);
  training.precision = Precision::fp32;
  EXPECT_DOUBLE_EQ(bytes_per_parameter(training, false, d).total(), 16);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(training, true, d).total(), 8 + 8.0 / d);
}

TEST(StageParameters, SumOverStagesAndTpRanksIsTheModel) {
  ModelSpec model = gpt3_175b();
  model.tied_embeddings = false;
  ParallelConfig config = config_of(1, 4, 1, false, RecomputeMode::none);
  double sum = 0;
  for (int stage = 0; stage < 4; ++stage) sum += parameters_on_stage(model, config, stage);
  EXPECT_DOUBLE_EQ(sum, static_cast<double>(total_parameters(model)));
}

TEST(StageParameters, TiedEmbeddingIsCopiedToTheLastStageOnlyWhenPipelined) {
  const ModelSpec model = gpt3_175b();  // untied in this fixture; tie it
  ModelSpec tied = model;
  tied.tied_embeddings = true;
  const double word_embedding = 51200.0 * h;
  const ParallelConfig single = config_of(1, 1, 1, false, RecomputeMode::none);
  EXPECT_DOUBLE_EQ(parameters_on_stage(tied, single, 0), static_cast<double>(total_parameters(tied)));
  const ParallelConfig pipelined = config_of(1, 2, 1, false, RecomputeMode::none);
  EXPECT_DOUBLE_EQ(parameters_on_stage(tied, pipelined, 0) + parameters_on_stage(tied, pipelined, 1),
                   static_cast<double>(total_parameters(tied)) + word_embedding);
}

TEST(StageParameters, TensorParallelSplitsAllButNormsAndRowParallelBiases) {
  const ModelSpec model = gpt3_175b();
  ParallelConfig one = config_of(1, 96, 1, false, RecomputeMode::none);
  ParallelConfig eight = config_of(8, 96, 1, false, RecomputeMode::none);
  // An interior stage holds exactly one layer: 12h² + 7h split (weights, QKV and fc1 biases),
  // 4h (two layernorms) + 2h (two row-parallel biases) replicated.
  EXPECT_DOUBLE_EQ(parameters_on_stage(model, one, 5), 12.0 * h * h + 13.0 * h);
  EXPECT_DOUBLE_EQ(parameters_on_stage(model, eight, 5), (12.0 * h * h + 7.0 * h) / 8 + 6.0 * h);
}

TEST(EstimateMemory, ModelStateOfOneStageIsBytesPerParameterTimesParameters) {
  const ModelSpec model = gpt3_175b();
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  ParallelConfig config = config_of(8, 8, 4, true, RecomputeMode::selective);
  config.distributed_optimizer = true;
  const RuntimeOverheads none{0, 0, 0};
  const auto memory = estimate_memory(model, training, config, none);
  ASSERT_EQ(memory.size(), 8u);
  const double parameters = parameters_on_stage(model, config, 3);
  EXPECT_DOUBLE_EQ(memory[3].weights_bytes, 2 * parameters);
  EXPECT_DOUBLE_EQ(memory[3].gradients_bytes, 4 * parameters);
  EXPECT_DOUBLE_EQ(memory[3].optimizer_state_bytes, 12 * parameters / 4);
}

// With 16-bit gradients (no --accumulate-allreduce-grads-in-fp32: the DDP buffer is bf16,
// param_and_grad_buffer.py @d98e8a64 l.924), Megatron-core's optimizer step casts them to fp32,
// `shard_main_param.grad = shard_model_grad.float()` (optimizer/distrib_optimizer.py l.2792; the
// unsharded Float16OptimizerWithFloat16Params: optimizer.py l.1097), and train_step's zero_grad
// (training/training.py l.3044; distrib_optimizer.py l.2568-2597, set_to_none) frees them before
// the next forward. So 4 of the 16 optimizer bytes per parameter count at the step's peak, not
// beside the activations: the plan needs the larger of the two peaks.
TEST(EstimateMemory, FpThirtyTwoMainGradientsCountAtTheStepPeakOnly) {
  const ModelSpec model = gpt3_175b();
  TrainingSpec training = training_of(64, AttentionKernel::flash);
  training.gradients_in_fp32 = false;
  const RuntimeOverheads none{0, 0, 0};
  const int stage = 3;  // an interior stage: 12 layers, no embedding, no logits

  // Sharded over dp 8 with five micro-batches in flight: the activations dominate.
  ParallelConfig sharded = config_of(8, 8, 8, true, RecomputeMode::selective);
  sharded.distributed_optimizer = true;
  const StageMemory busy = estimate_memory(model, training, sharded, none)[stage];
  const double p = parameters_on_stage(model, sharded, stage);
  EXPECT_DOUBLE_EQ(busy.optimizer_state_bytes, 12 * p / 8);
  EXPECT_DOUBLE_EQ(busy.step_gradients_bytes, 4 * p / 8);
  EXPECT_FALSE(busy.step_peak_binds());
  EXPECT_DOUBLE_EQ(busy.total_bytes(), 2 * p + 2 * p + 12 * p / 8 + busy.activations_bytes + busy.runtime_overhead_bytes);

  // Unsharded, with full recompute: the step's 4 bytes per parameter outweigh the activations.
  const ParallelConfig whole = config_of(8, 8, 1, true, RecomputeMode::full);
  const StageMemory step = estimate_memory(model, training, whole, none)[stage];
  ASSERT_DOUBLE_EQ(parameters_on_stage(model, whole, stage), p);
  EXPECT_DOUBLE_EQ(step.optimizer_state_bytes, 12 * p);
  EXPECT_DOUBLE_EQ(step.activation_peak_bytes(), 16 * p + step.activations_bytes + step.runtime_overhead_bytes);
  EXPECT_LT(step.activations_bytes + step.runtime_overhead_bytes, 4 * p);
  EXPECT_TRUE(step.step_peak_binds());
  EXPECT_DOUBLE_EQ(step.total_bytes(), 20 * p);
  EXPECT_DOUBLE_EQ(step.allocated_bytes(), 20 * p);

  // fp32 gradients: `.float()` of the fp32 buffer is the buffer, the step allocates nothing.
  training.gradients_in_fp32 = true;
  EXPECT_DOUBLE_EQ(estimate_memory(model, training, whole, none)[stage].step_gradients_bytes, 0);

  // A stack whose optimizer code was not read keeps the copy beside the activations.
  training.gradients_in_fp32 = false;
  training.target.framework = Framework::megatron_deepspeed;
  const StageMemory kept = estimate_memory(model, training, whole, none)[stage];
  EXPECT_DOUBLE_EQ(kept.optimizer_state_bytes, 16 * p);
  EXPECT_DOUBLE_EQ(kept.step_gradients_bytes, 0);
  EXPECT_FALSE(kept.step_peak_binds());
}

TEST(EstimateMemory, OneFOneBActivationsFallFromFirstToLastStage) {
  const ModelSpec model = gpt3_175b();
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  const ParallelConfig config = config_of(8, 8, 1, true, RecomputeMode::selective);
  const auto memory = estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0});
  const double per_layer = 34 * sbh / t + lse_bytes / t;
  // Plus the working set of the layer whose backward runs: with SP the layer-output gradient, fc1's
  // full-sequence dgrad and the re-gathered norm output (3h) beside the fc1 output gradient (f/t).
  const double working_set = 2 * sbh * (3 + 4.0 / t);
  EXPECT_DOUBLE_EQ(layer_working_set_bytes(model, training, config), working_set);
  for (int stage = 0; stage < 8; ++stage) {
    EXPECT_DOUBLE_EQ(memory[static_cast<size_t>(stage)].activations_bytes, (8 - stage) * 12 * per_layer + working_set);
  }
  EXPECT_GT(memory[0].total_bytes(), memory[4].total_bytes());
}

// BLOOM's embedding LayerNorm saves its input and per-token fp32 mean and inverse variance for every
// in-flight micro-batch of the first stage (1F1B: 8 of them on stage 0 of 8), and adds its 2h
// parameters there; no other stage changes.
TEST(EstimateMemory, EmbeddingNormKeepsItsInputOnTheFirstStage) {
  const ModelSpec model = gpt3_175b();
  ModelSpec normed = model;
  normed.embedding_norm = true;
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  const ParallelConfig config = config_of(8, 8, 1, true, RecomputeMode::selective);
  const auto plain = estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0});
  const auto with_norm = estimate_memory(normed, training, config, RuntimeOverheads{0, 0, 0});
  EXPECT_DOUBLE_EQ(with_norm[0].activations_bytes - plain[0].activations_bytes, 8 * (2 * sbh + 8.0 * s * b));
  EXPECT_DOUBLE_EQ(parameters_on_stage(normed, config, 0) - parameters_on_stage(model, config, 0), 2.0 * h);
  for (size_t stage = 1; stage < 8; ++stage) EXPECT_EQ(with_norm[stage].total_bytes(), plain[stage].total_bytes());
}

TEST(EstimateMemory, LogitsAndLossOnlyOnTheLastStage) {
  const ModelSpec model = gpt3_175b();
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  const ParallelConfig config = config_of(8, 4, 1, true, RecomputeMode::selective);
  const auto memory = estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0});
  for (int stage = 0; stage < 3; ++stage) EXPECT_EQ(memory[static_cast<size_t>(stage)].logits_and_loss_bytes, 0);
  // Final-norm input and output (sequence parallel) + fp32 and 16-bit logits of the vocabulary shard.
  EXPECT_DOUBLE_EQ(memory[3].logits_and_loss_bytes, 4 * sbh / t + s * b * (51200.0 / t) * 6);
}

TEST(EstimateMemory, RuntimeOverheadsCountContextCommunicatorsAndFragmentation) {
  const ModelSpec model = gpt3_175b();
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  const ParallelConfig config = config_of(8, 4, 2, true, RecomputeMode::selective);
  const RuntimeOverheads overheads{1000, 10, 0.1};
  const auto with = estimate_memory(model, training, config, overheads);
  const auto without = estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0});
  // Stage 0: TP, DP, PP and the embedding group; stage 1: TP, DP and PP. Both reserve one largest
  // transient request beside the fragmentation: a full-sequence h-wide gradient (fc1's output is
  // 4h/t = h/2 wide); the last stage's is its fp32 logits.
  const double largest_layer_request = 2 * sbh;
  ASSERT_EQ(without[0].runtime_overhead_bytes, largest_layer_request);
  EXPECT_DOUBLE_EQ(with[0].runtime_overhead_bytes,
                   1000 + 4 * 10 + 0.1 * (without[0].total_bytes() - largest_layer_request) + largest_layer_request);
  EXPECT_DOUBLE_EQ(with[1].runtime_overhead_bytes,
                   1000 + 3 * 10 + 0.1 * (without[1].total_bytes() - largest_layer_request) + largest_layer_request);
  EXPECT_DOUBLE_EQ(without[3].runtime_overhead_bytes, s * b * (51200.0 / t) * 4);
}

TEST(EstimateMemory, UnevenSplitUsesTheGivenLayers) {
  const ModelSpec model = gpt3_175b();
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  ParallelConfig config = config_of(8, 4, 1, true, RecomputeMode::full);
  config.layers_per_stage = {22, 26, 26, 22};
  const auto memory = estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0});
  EXPECT_DOUBLE_EQ(memory[1].activations_bytes, 3 * 26 * 2 * sbh / t + layer_working_set_bytes(model, training, config));
}

TEST(LayerWorkingSet, FullRecomputeHoldsTheRecomputedLayer) {
  // Issue 14: llama3-8b at 128k tokens (tp 4, sequence parallel) misses 4.6 GB under full recompute,
  // the activations of the one layer being recomputed: everything a layer without recompute keeps
  // (Megatron's CheckpointFunction re-runs its forward inside the backward, tensor_parallel/random.py
  // @d98e8a64 l.591-635) beyond the stored layer input.
  ModelSpec llama;
  llama.num_layers = 32;
  llama.hidden_size = 4096;
  llama.num_attention_heads = 32;
  llama.num_kv_heads = 8;
  llama.ffn_hidden_size = 14336;
  llama.ffn_kind = FfnKind::swiglu;
  llama.norm_kind = NormKind::rmsnorm;
  llama.vocab_size = 128256;
  llama.linear_bias = false;
  llama.dropout = false;
  TrainingSpec training = training_of(8, AttentionKernel::flash);
  training.sequence_length = 131072;
  const ParallelConfig full = config_of(4, 1, 2, true, RecomputeMode::full);
  const ParallelConfig none = config_of(4, 1, 2, true, RecomputeMode::none);
  const double recomputed = layer_working_set_bytes(llama, training, full) - layer_working_set_bytes(llama, training, none);
  EXPECT_NEAR(recomputed / 1e9, 4.6, 0.05);
  EXPECT_DOUBLE_EQ(recomputed, layer_activation_bytes(llama, training, none) - layer_activation_bytes(llama, training, full));
}

// Block recompute (Megatron's --recompute-method block, recompute.py @d98e8a64 l.164-177): the first
// N layers of each chunk keep only their input, the others everything a layer without recompute keeps.
double stage_activations(const ParallelConfig& config, int stage) {
  return estimate_memory(gpt3_175b(), training_of(64, AttentionKernel::flash), config, RuntimeOverheads{0, 0, 0})
      [static_cast<size_t>(stage)].activations_bytes;
}

TEST(BlockRecompute, NoCountAndEveryLayerAreFullRecompute) {
  ParallelConfig full = config_of(8, 8, 1, true, RecomputeMode::full);  // 12 layers a stage
  ParallelConfig all_layers = full;
  all_layers.recomputed_layers_per_chunk = 12;
  ParallelConfig beyond = full;
  beyond.recomputed_layers_per_chunk = 40;  // more than the chunk holds: all of them, as Megatron's loop
  for (int stage : {0, 3, 7}) {
    EXPECT_DOUBLE_EQ(stage_activations(all_layers, stage), stage_activations(full, stage));
    EXPECT_DOUBLE_EQ(stage_activations(beyond, stage), stage_activations(full, stage));
  }
}

TEST(BlockRecompute, FirstNLayersKeepTheirInputTheRestEverything) {
  const ModelSpec model = gpt3_175b();
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  ParallelConfig block = config_of(8, 8, 1, true, RecomputeMode::full);
  block.recomputed_layers_per_chunk = 5;
  const ParallelConfig none = config_of(8, 8, 1, true, RecomputeMode::none);
  const double input = 2 * sbh / t;  // what a recomputed layer keeps (SP: its shard of the input)
  const double kept = layer_activation_bytes(model, training, none);
  // The recomputed layer's forward re-runs inside its backward: the full-recompute working set.
  const double working_set = layer_working_set_bytes(model, training, config_of(8, 8, 1, true, RecomputeMode::full));
  for (int stage = 0; stage < 8; ++stage) {
    const double expected = (8 - stage) * (5 * input + 7 * kept) + working_set;
    EXPECT_NEAR(stage_activations(block, stage), expected, 1e-9 * expected) << "stage " << stage;
    EXPECT_LT(stage_activations(block, stage), stage_activations(none, stage));
    EXPECT_GT(stage_activations(block, stage), stage_activations(config_of(8, 8, 1, true, RecomputeMode::full), stage));
  }
}

TEST(BlockRecompute, CountsPerInterleavedChunk) {
  // pp 4 x vpp 2: 24 layers a rank in two chunks of 12; block:5 recomputes 5 of each chunk.
  const ModelSpec model = gpt3_175b();
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  ParallelConfig block = config_of(8, 4, 1, true, RecomputeMode::full);
  block.virtual_stages = 2;
  block.recomputed_layers_per_chunk = 5;
  EXPECT_EQ(recomputed_layers_of_stage(block, 24), 10);
  ParallelConfig none = block;
  none.recompute = RecomputeMode::none;
  const int chunks = in_flight_microbatch_chunks(1, 4, 64, 2);
  const double expected = chunks * (5 * 2 * sbh / t + 7 * layer_activation_bytes(model, training, none)) +
                          layer_working_set_bytes(model, training, block);
  EXPECT_NEAR(stage_activations(block, 1), expected, 1e-9 * expected);
  block.recomputed_layers_per_chunk = 12;
  ParallelConfig full = block;
  full.recomputed_layers_per_chunk = 0;
  EXPECT_DOUBLE_EQ(stage_activations(block, 1), stage_activations(full, 1));
}

TEST(EstimateMemory, Fp8CachesEachGemmWeightAndItsTranspose) {
  // Transformer Engine keeps the fp8 casts of every GEMM weight between micro-batches
  // (module/linear.py @d0067d0d l.1958-2071): a row-wise and a column-wise byte per element.
  const ModelSpec model = gpt3_175b();
  TrainingSpec training = training_of(64, AttentionKernel::flash);
  const ParallelConfig config = config_of(8, 96, 1, true, RecomputeMode::selective);
  const double bf16 = estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0})[5].weights_bytes;
  training.precision = Precision::fp8;
  const double fp8 = estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0})[5].weights_bytes;
  EXPECT_DOUBLE_EQ(fp8 - bf16, 2 * (12.0 * h * h + 7.0 * h) / 8);
  // With --fp8-param-gather the weights are those fp8 tensors, a byte and its transpose per element
  // in place of the 16-bit weight, and there is no separate cache: as many bytes as bf16 holds.
  training.fp8_parameters = true;
  EXPECT_DOUBLE_EQ(estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0})[5].weights_bytes, bf16);
  // Without fp8 training the switch means nothing.
  training.precision = Precision::bf16;
  EXPECT_DOUBLE_EQ(estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0})[5].weights_bytes, bf16);
}

// The caching allocator's reserve for the largest transient request (a new segment of its size,
// c10/cuda/CUDACachingAllocator.cpp) goes with expandable segments, which grow a segment instead.
// On the last stage that request is the loss's fp32 logits (s·b·V/t · 4 bytes); on the others the
// largest h- or ffn-wide gradient of a layer's backward (s·b·max(h, 4h/t) · 2 bytes).
TEST(EstimateMemory, ExpandableSegmentsDropTheLargestRequestReserve) {
  const ModelSpec model = gpt3_175b();
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  const ParallelConfig config = config_of(t, 8, 1, true, RecomputeMode::selective);
  RuntimeOverheads overheads{0, 0, 0};
  const auto reserved = estimate_memory(model, training, config, overheads);
  overheads.expandable_segments = true;
  const auto expandable = estimate_memory(model, training, config, overheads);
  EXPECT_DOUBLE_EQ(reserved[7].runtime_overhead_bytes - expandable[7].runtime_overhead_bytes,
                   static_cast<double>(s) * b * model.vocab_size / t * 4);
  EXPECT_DOUBLE_EQ(reserved[3].runtime_overhead_bytes - expandable[3].runtime_overhead_bytes,
                   static_cast<double>(s) * b * h * 2);
  EXPECT_DOUBLE_EQ(expandable[3].activations_bytes, reserved[3].activations_bytes);
}

TEST(BalancedLayers, EndsGetFewerLayers) {
  EXPECT_EQ(balanced_layers_per_stage(96, 8), std::vector<int>(8, 12));
  EXPECT_EQ(balanced_layers_per_stage(30, 4), (std::vector<int>{7, 8, 8, 7}));
  EXPECT_EQ(balanced_layers_per_stage(31, 4), (std::vector<int>{8, 8, 8, 7}));
  // megatron-530b: equal middle stages, so --decoder-first/last-pipeline-num-layers express it.
  EXPECT_EQ(balanced_layers_per_stage(105, 8), (std::vector<int>{11, 14, 14, 14, 14, 14, 14, 10}));
  const auto split = balanced_layers_per_stage(105, 35 - 1);
  EXPECT_EQ(std::accumulate(split.begin(), split.end(), 0), 105);
  EXPECT_TRUE(std::all_of(split.begin() + 1, split.end() - 1, [&](int layers) { return layers == split[1]; }));
}

TEST(BalancedLayers, MoreStagesThanLayersLeaveTheEmbeddingAndTheHeadAlone) {
  EXPECT_EQ(balanced_layers_per_stage(4, 4), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(balanced_layers_per_stage(4, 5), (std::vector<int>{0, 1, 1, 1, 1}));
  EXPECT_EQ(balanced_layers_per_stage(4, 6), (std::vector<int>{0, 1, 1, 1, 1, 0}));
  // The stages left over sit right after the first, where 1F1B keeps the most micro-batches.
  EXPECT_EQ(balanced_layers_per_stage(4, 8), (std::vector<int>{0, 0, 0, 1, 1, 1, 1, 0}));
}

TEST(StageMemory, AStageWithoutLayersHoldsNoLayerState) {
  ModelSpec model = gpt3_175b();
  model.num_layers = 4;
  const TrainingSpec training = training_of(64, AttentionKernel::flash);
  ParallelConfig config = config_of(1, 6, 1, false, RecomputeMode::none);
  config.layers_per_stage = balanced_layers_per_stage(model.num_layers, config.pp);
  const std::vector<StageMemory> stages = estimate_memory(model, training, config, RuntimeOverheads{0, 0, 0});
  ASSERT_EQ(stages.size(), 6u);
  EXPECT_GT(stages[0].weights_bytes, 0);      // the embedding
  EXPECT_DOUBLE_EQ(stages[0].activations_bytes, 0);
  EXPECT_GT(stages[5].logits_and_loss_bytes, 0);  // the head and the loss
  EXPECT_DOUBLE_EQ(stages[5].activations_bytes, 0);
  EXPECT_GT(stages[1].activations_bytes, 0);
}

}  // namespace
}  // namespace pipette
