#include "pipette/core/performance.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/pipeline_blocks.hpp"
#include "pipette/core/stack_profile.hpp"
#include "pipette/core/simulator.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

ModelSpec gpt(int layers, int hidden, int heads) {
  ModelSpec model = testing::gpt_like(layers, hidden, heads, 51200);
  model.name = "gpt";
  model.learned_position_embeddings = 2048;
  return model;
}

TrainingSpec training_of(std::int64_t global_batch, int sequence, AttentionKernel kernel = AttentionKernel::flash) {
  TrainingSpec training;
  training.global_batch_sequences = global_batch;
  training.sequence_length = sequence;
  training.attention = kernel;
  return training;
}

ParallelConfig config_of(int tp, int pp, int dp, int micro_batch = 1) {
  ParallelConfig config;
  config.tp = tp;
  config.pp = pp;
  config.dp = dp;
  config.micro_batch = micro_batch;
  return config;
}

TEST(Flops, UnfusedGptLayerIs24bsh2Plus4bs2h) {
  const double b = 2, s = 2048, h = 4096;
  const ModelSpec model = gpt(32, 4096, 32);
  // Narayanan et al. SC21: 24bsh² (QKV 6, projection 2, MLP 16) + 4bs²h (QKᵀ and attention·V).
  EXPECT_DOUBLE_EQ(layer_forward_flops(model, training_of(8, 2048, AttentionKernel::unfused), config_of(1, 1, 1, 2)),
                   24 * b * s * h * h + 4 * b * s * s * h);
  // Causal flash attention does half the s² work; TP splits everything.
  EXPECT_DOUBLE_EQ(layer_forward_flops(model, training_of(8, 2048), config_of(4, 1, 1, 2)),
                   (24 * b * s * h * h + 2 * b * s * s * h) / 4);
}

TEST(Flops, GqaAndSwigluChangeTheMatrices) {
  ModelSpec model = gpt(32, 4096, 32);
  model.num_kv_heads = 8;  // kv hidden 1024
  model.ffn_kind = FfnKind::swiglu;
  model.ffn_hidden_size = 14336;
  const double s = 4096, h = 4096;
  const double matrices = h * (h + 2 * 1024) + h * h + 3 * h * 14336;
  EXPECT_DOUBLE_EQ(layer_forward_flops(model, training_of(8, 4096, AttentionKernel::unfused), config_of(1, 1, 1)),
                   2 * s * matrices + 4 * s * s * h);
}

TEST(Flops, ModelFlopsMatchNarayananFormula) {
  // 72·B·s·L·h²·(1 + s/(6h) + V/(12hL)) for GPT (SC21 Section 5.1), no recompute.
  const ModelSpec model = gpt(96, 12288, 96);
  const double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;
  const double expected = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(model_flops_per_iteration(model, training_of(1536, 2048), AttentionFlops::full_square), expected,
              1e-9 * expected);
}

TEST(Flops, CausalCountKeepsHalfTheAttentionCore) {
  // Megatron-LM's count (training.py @d98e8a64 l.1163-1169): the causal mask leaves half of QKᵀ and
  // attention·V; 3 passes × L layers × 2·s·h per token less than the full square.
  const ModelSpec model = gpt(96, 12288, 96);
  const double B = 1536, s = 2048, L = 96, h = 12288;
  EXPECT_NEAR(model_flops_per_iteration(model, training_of(1536, 2048), AttentionFlops::full_square) -
                  model_flops_per_iteration(model, training_of(1536, 2048)),
              3 * B * s * L * 2 * s * h, 1e-6 * 3 * B * s * L * 2 * s * h);
}

const GpuSpec& h100() { return *find_gpu("H100-SXM"); }
const GpuSpec& a100() { return *find_gpu("A100-80GB"); }

TEST(ProfileWork, TpCollectivesPerMicrobatch) {
  const ModelSpec model = gpt(24, 4096, 32);
  ParallelConfig config = config_of(4, 2, 1, 2);
  const WorkProfile work = profile_work(model, training_of(64, 2048), h100(), config);
  const double message = 2.0 * 2048 * 2 * 4096;  // b·s·h 16-bit values
  ASSERT_EQ(work.stages.size(), 2u);
  // 12 layers × 4 all-reduces, plus the embedding output (first) and the head's input gradient
  // (last); on the wire each all-reduce of P bytes over t GPUs moves 2(t − 1)/t · P per GPU.
  const double wire = 2.0 * 3 / 4;
  EXPECT_DOUBLE_EQ(work.stages[0].tp_bytes_per_microbatch, 49 * message * wire);
  EXPECT_EQ(work.stages[0].tp_collectives_per_microbatch, 49);
  EXPECT_EQ(work.stages[1].tp_collectives_per_microbatch, 49);
  EXPECT_DOUBLE_EQ(work.p2p_bytes_per_microbatch, message);

  // RS + AG pairs: the same ring traffic and steps, plus Transformer Engine's re-gather of the two
  // norm outputs it saved as shards (an all-gather each, half an all-reduce); p2p split over TP.
  config.sequence_parallel = true;
  const WorkProfile sp = profile_work(model, training_of(64, 2048), h100(), config);
  EXPECT_DOUBLE_EQ(sp.stages[0].tp_bytes_per_microbatch, 61 * message * wire);
  EXPECT_EQ(sp.stages[0].tp_collectives_per_microbatch, 61);
  EXPECT_DOUBLE_EQ(sp.p2p_bytes_per_microbatch, message / 4);

  config.recompute = RecomputeMode::full;  // the recomputed forward all-reduces again
  EXPECT_EQ(profile_work(model, training_of(64, 2048), h100(), config).stages[1].tp_collectives_per_microbatch,
            12 * 7 + 1);
  EXPECT_EQ(profile_work(model, training_of(64, 2048), h100(), config_of(1, 2, 1)).stages[0].tp_bytes_per_microbatch, 0);

  // Userbuffers overlap hides all but one of the tp chunks of every collective.
  TrainingSpec overlapped = training_of(64, 2048);
  overlapped.overlap_tensor_parallel_communication = true;
  config.recompute = RecomputeMode::none;
  EXPECT_DOUBLE_EQ(profile_work(model, overlapped, h100(), config).stages[0].tp_bytes_per_microbatch,
                   61 * message * wire / 4);
}

TEST(ProfileWork, BackwardTpCollectivesHideUnderTheGemmsTheyRunBeside) {
  // Megatron-core with Transformer Engine, no --tp-comm-overlap: the input-gradient all-reduce of QKV
  // and fc1 runs asynchronously beside their wgrad GEMM (TE layernorm_linear.py @d0067d0d
  // l.889-910); only the forward all-reduces stay on the critical path.
  const ModelSpec model = gpt(24, 4096, 32);
  const WorkProfile work = profile_work(model, training_of(64, 2048), h100(), config_of(4, 2, 1, 2));
  const StageWork& stage = work.stages[1];
  EXPECT_DOUBLE_EQ(stage.tp_forward_share, 24.0 / 49);
  EXPECT_DOUBLE_EQ(stage.tp_hideable_share, 24.0 / 49);
  ASSERT_GT(stage.tp_overlap_window_seconds, 0);
  // A fast link: all of the hideable share disappears behind the GEMMs, which it slows by 18.9% of
  // its time (Lee et al. 2025; ComputeEfficiency::overlapped_compute_slowdown).
  const double slowdown = stage.overlapped_compute_slowdown;
  EXPECT_DOUBLE_EQ(slowdown, 0.189);
  const double fast = 0.5 * stage.tp_overlap_window_seconds;
  EXPECT_DOUBLE_EQ(exposed_tp_seconds(stage, fast).forward, fast * 24 / 49);
  EXPECT_NEAR(exposed_tp_seconds(stage, fast).backward, fast * 1 / 49 + slowdown * fast * 24 / 49, 1e-15);
  EXPECT_DOUBLE_EQ(exposed_tp_seconds(stage, fast).hidden, fast * 24 / 49);
  // A slow link (TP across nodes): the GEMMs hide only their own duration.
  const double slow = 100 * stage.tp_overlap_window_seconds;
  EXPECT_NEAR(exposed_tp_seconds(stage, slow).total(),
              slow - stage.tp_overlap_window_seconds + slowdown * stage.tp_overlap_window_seconds, 1e-12 * slow);
  // Userbuffers overlap (SP): the chunks already hide, nothing more is taken off.
  TrainingSpec overlapped = training_of(64, 2048);
  overlapped.overlap_tensor_parallel_communication = true;
  ParallelConfig sp = config_of(4, 2, 1, 2);
  sp.sequence_parallel = true;
  EXPECT_EQ(profile_work(model, overlapped, h100(), sp).stages[1].tp_hideable_share, 0);
}

TEST(ProfileWork, MicrobatchesGradientsAndOptimizer) {
  const ModelSpec model = gpt(24, 4096, 32);
  ParallelConfig config = config_of(2, 2, 4, 2);
  const TrainingSpec training = training_of(64, 2048);
  const WorkProfile plain = profile_work(model, training, h100(), config);
  EXPECT_EQ(plain.num_microbatches, 8);
  EXPECT_DOUBLE_EQ(plain.stages[1].gradient_bytes_per_gpu, 4 * parameters_on_stage(model, config, 1));
  config.distributed_optimizer = true;
  const WorkProfile sharded = profile_work(model, training, h100(), config);
  EXPECT_NEAR(sharded.stages[1].optimizer_seconds, plain.stages[1].optimizer_seconds / 4, 1e-15);
}

// A tied word embedding split over pipeline ranks: each of the first stage's ranks sums its V/tp·h
// gradient shard, in the gradient's precision, with the rank holding the output layer (Megatron-core
// finalize_model_grads.py _allreduce_word_embedding_grads; nanotron tied_parameters.py
// sync_tied_weights_gradients @a27e8fe8 l.119, over its own partition's lm_head rank).
TEST(ProfileWork, ATiedEmbeddingOverPipelineRanksIsSummedBetweenItsStages) {
  ModelSpec model = gpt(24, 4096, 32);
  TrainingSpec training = training_of(64, 2048);
  const WorkProfile tied = profile_work(model, training, h100(), config_of(2, 2, 4, 2));
  EXPECT_EQ(tied.tied_embedding_head_stage, 1);
  EXPECT_DOUBLE_EQ(tied.tied_embedding_gradient_bytes, 51200.0 / 2 * 4096 * 4);
  training.gradients_in_fp32 = false;
  EXPECT_DOUBLE_EQ(profile_work(model, training, h100(), config_of(2, 2, 4, 2)).tied_embedding_gradient_bytes,
                   51200.0 / 2 * 4096 * 2);
  // One pipeline rank holds both: nothing to sum.
  EXPECT_EQ(profile_work(model, training, h100(), config_of(2, 1, 8, 2)).tied_embedding_head_stage, -1);
  model.tied_embeddings = false;
  const WorkProfile untied = profile_work(model, training, h100(), config_of(2, 2, 4, 2));
  EXPECT_EQ(untied.tied_embedding_head_stage, -1);
  EXPECT_EQ(untied.tied_embedding_gradient_bytes, 0.0);
  // nanotron places the lm_head by compute cost, not necessarily on the last rank.
  model.tied_embeddings = true;
  training.target.framework = Framework::nanotron;
  apply_stack_profile(training);
  const ParallelConfig nanotron_config = config_of(1, 4, 1, 1);
  const PipelineBlocks blocks = pipeline_blocks(model, Framework::nanotron, nanotron_config);
  const auto head = std::find_if(blocks.ranks.begin(), blocks.ranks.end(), [](const PipelineRankBlocks& rank) { return rank.head; });
  EXPECT_EQ(profile_work(model, training, h100(), nanotron_config).tied_embedding_head_stage, head - blocks.ranks.begin());
}

TEST(ProfileWork, RecomputeAddsToBackwardOnly) {
  const ModelSpec model = gpt(24, 4096, 32);
  ParallelConfig config = config_of(2, 1, 1, 1);
  const TrainingSpec training = training_of(8, 4096);
  const StageWork none = profile_work(model, training, h100(), config).stages[0];
  config.recompute = RecomputeMode::selective;
  const StageWork selective = profile_work(model, training, h100(), config).stages[0];
  config.recompute = RecomputeMode::full;
  const StageWork full = profile_work(model, training, h100(), config).stages[0];
  EXPECT_EQ(none.recompute_seconds, 0);
  EXPECT_DOUBLE_EQ(selective.forward_compute_seconds, none.forward_compute_seconds);
  EXPECT_GT(selective.recompute_seconds, 0);
  EXPECT_LT(selective.recompute_seconds, 0.2 * none.forward_compute_seconds);
  EXPECT_DOUBLE_EQ(selective.backward_compute_seconds, none.backward_compute_seconds + selective.recompute_seconds);
  // Full recompute reruns every layer's forward (not the LM head).
  EXPECT_GT(full.recompute_seconds, 0.9 * none.forward_compute_seconds);
  EXPECT_DOUBLE_EQ(full.backward_compute_seconds, none.backward_compute_seconds + full.recompute_seconds);
}

// One layer's forward FLOP rate: the difference between a 2-layer and a 1-layer model's forward.
TEST(ProfileWork, BlockRecomputeRerunsOnlyTheFirstLayersOfEachChunk) {
  // 24 layers, tp 4 with SP, pp 2: 12 a stage. block:5 re-runs 5 layers' forward and their TP
  // collectives (2 more each) in the backward; block:0 and block:12 are full recompute.
  const ModelSpec model = gpt(24, 4096, 32);
  const TrainingSpec training = training_of(64, 2048);
  ParallelConfig config = config_of(4, 2, 1, 2);
  config.sequence_parallel = true;
  const StageWork none = profile_work(model, training, h100(), config).stages[1];
  config.recompute = RecomputeMode::full;
  const StageWork full = profile_work(model, training, h100(), config).stages[1];
  config.recomputed_layers_per_chunk = 12;
  const StageWork all_layers = profile_work(model, training, h100(), config).stages[1];
  config.recomputed_layers_per_chunk = 5;
  const StageWork block = profile_work(model, training, h100(), config).stages[1];
  EXPECT_DOUBLE_EQ(all_layers.recompute_seconds, full.recompute_seconds);
  EXPECT_DOUBLE_EQ(all_layers.tp_bytes_per_microbatch, full.tp_bytes_per_microbatch);
  EXPECT_EQ(all_layers.tp_collectives_per_microbatch, full.tp_collectives_per_microbatch);
  EXPECT_NEAR(block.recompute_seconds, full.recompute_seconds * 5 / 12, 1e-12 * full.recompute_seconds);
  EXPECT_DOUBLE_EQ(block.forward_compute_seconds, none.forward_compute_seconds);
  EXPECT_DOUBLE_EQ(block.backward_compute_seconds, none.backward_compute_seconds + block.recompute_seconds);
  // Last stage: 12 layers x 5 collectives with SP, plus the head's input gradient; + 2 per re-run layer.
  EXPECT_EQ(none.tp_collectives_per_microbatch, 12 * 5 + 1);
  EXPECT_EQ(block.tp_collectives_per_microbatch, 12 * 5 + 1 + 5 * 2);
  EXPECT_EQ(full.tp_collectives_per_microbatch, 12 * 5 + 1 + 12 * 2);
  EXPECT_GT(block.tp_bytes_per_microbatch, none.tp_bytes_per_microbatch);
  EXPECT_LT(block.tp_bytes_per_microbatch, full.tp_bytes_per_microbatch);
  // The forward's share of the TP time: one forward pass of 12 layers over the layers' passes.
  EXPECT_LT(block.tp_forward_share, none.tp_forward_share);
  EXPECT_GT(block.tp_forward_share, full.tp_forward_share);
}

TEST(ProfileWork, BlockRecomputeSimulatorAndClosedFormAgree) {
  const ModelSpec model = gpt(24, 4096, 32);
  const TrainingSpec training = training_of(64, 2048);
  ParallelConfig config = config_of(2, 4, 1, 1);
  config.sequence_parallel = true;
  config.virtual_stages = 2;
  config.recompute = RecomputeMode::full;
  config.recomputed_layers_per_chunk = 2;  // of 3 layers a chunk
  const WorkProfile work = profile_work(model, training, h100(), config);
  CommunicationTimes communication;
  communication.tp_seconds.assign(4, std::vector<double>(1, 0.0));
  communication.p2p_seconds.assign(3, std::vector<double>(1, 1e-4));
  communication.wraparound_p2p_seconds.assign(1, 1e-4);
  communication.dp_seconds.assign(4, 0.0);
  for (int stage = 0; stage < 4; ++stage)
    communication.tp_seconds[static_cast<size_t>(stage)][0] = 0.2 * work.stages[static_cast<size_t>(stage)].forward_compute_seconds;
  const double simulated = simulated_iteration_seconds(config, work, communication, training);
  const double closed_form = critical_path(config, work, communication, training).iteration_seconds;
  EXPECT_NEAR(closed_form / simulated, 1, 0.03);
  // Between the plan without recompute and the one that recomputes every layer.
  ParallelConfig full = config;
  full.recomputed_layers_per_chunk = 0;
  ParallelConfig none = config;
  none.recompute = RecomputeMode::none;
  const auto seconds = [&](const ParallelConfig& c) {
    return simulated_iteration_seconds(c, profile_work(model, training, h100(), c), communication, training);
  };
  EXPECT_LT(seconds(none), simulated);
  EXPECT_LT(simulated, seconds(full));
}

double achieved_flop_per_second(ModelSpec model, const TrainingSpec& training, const GpuSpec& gpu,
                                const ParallelConfig& config) {
  model.num_layers = 1;
  const double one = profile_work(model, training, gpu, config).stages[0].forward_compute_seconds;
  model.num_layers = 2;
  const double two = profile_work(model, training, gpu, config).stages[0].forward_compute_seconds;
  return layer_forward_flops(model, training, config) / (two - one);
}

TEST(Efficiency, DependsOnGemmShape) {
  // Wide layers on few TP ranks run closer to the roof than thin shards; longer micro-batches too.
  const ModelSpec model = gpt(1, 12288, 96);
  const TrainingSpec training = training_of(64, 2048);
  const double wide = achieved_flop_per_second(model, training, h100(), config_of(1, 1, 1, 4));
  const double thin = achieved_flop_per_second(gpt(1, 2048, 16), training, h100(), config_of(8, 1, 1, 4));
  const double short_batch = achieved_flop_per_second(gpt(1, 2048, 16), training_of(64, 256), h100(), config_of(8, 1, 1, 1));
  EXPECT_GT(wide, 1.3 * thin);
  EXPECT_GT(thin, 1.3 * short_batch);
  EXPECT_LT(wide, h100().peak_bf16_flop_per_second);
}

TEST(Efficiency, Fp8IsFasterButNotTwiceAsFast) {
  const ModelSpec model = gpt(8, 8192, 64);
  TrainingSpec training = training_of(64, 4096);
  const ParallelConfig config = config_of(4, 1, 1, 1);
  const double bf16 = profile_work(model, training, h100(), config).stages[0].forward_compute_seconds;
  training.precision = Precision::fp8;
  const double fp8 = profile_work(model, training, h100(), config).stages[0].forward_compute_seconds;
  EXPECT_LT(fp8, 0.85 * bf16);
  EXPECT_GT(fp8, 0.5 * bf16);
}

TEST(Efficiency, FasterGpuIsFaster) {
  const ModelSpec model = gpt(8, 8192, 64);
  const TrainingSpec training = training_of(64, 2048);
  const ParallelConfig config = config_of(8, 1, 1, 1);
  EXPECT_LT(profile_work(model, training, h100(), config).stages[0].forward_compute_seconds,
            0.5 * profile_work(model, training, a100(), config).stages[0].forward_compute_seconds);
}

// One layer's forward seconds with only its GEMMs costing anything: unlimited HBM bandwidth and
// flash-attention rate, no per-layer overhead. What is left is 2MNK / (16-bit fraction × peak).
double gemm_only_layer_seconds(const GpuSpec& gpu, ComputeEfficiency efficiency, Precision precision = Precision::bf16) {
  efficiency.memory_fraction = 1e12;
  efficiency.attention_fraction = 1e12;
  efficiency.layer_overhead_seconds = 0;
  ModelSpec model = gpt(1, 8192, 64);
  TrainingSpec training = training_of(8, 4096);
  training.precision = precision;
  const ParallelConfig config = config_of(1, 1, 1);
  const double one = profile_work(model, training, gpu, config, efficiency).stages[0].forward_compute_seconds;
  model.num_layers = 2;
  return profile_work(model, training, gpu, config, efficiency).stages[0].forward_compute_seconds - one;
}

TEST(Efficiency, H100SustainsASmallerShareOfItsBf16PeakThanA100) {
  // MAMF table (BF16, v2) of github.com/stas00/ml-engineering compute/accelerator/README.md: the best
  // tuned matmul reaches 271.2 of 312 TF on A100 SXM and 794.5 of 989 TF on H100 SXM (700 W).
  const double a100_share = 271.2 / 312, h100_share = 794.5 / 989;
  const ComputeEfficiency fitted = fitted_compute_efficiency();
  ComputeEfficiency unscaled = fitted;
  unscaled.fitted_gpu_attainable_16bit_matmul_fraction = 0;

  // The fraction is fitted on A100: A100 itself is unchanged.
  EXPECT_NEAR(gemm_only_layer_seconds(a100(), fitted) / gemm_only_layer_seconds(a100(), unscaled), 1, 1e-12);
  // H100's GEMMs are slower than the datasheet ratio to A100 says, by the ratio of the MAMF shares.
  const double h100_seconds = gemm_only_layer_seconds(h100(), fitted);
  EXPECT_NEAR(h100_seconds / gemm_only_layer_seconds(h100(), unscaled), a100_share / h100_share, 1e-9);
  EXPECT_NEAR(h100_seconds / gemm_only_layer_seconds(a100(), fitted), (312.0 / 989) * (a100_share / h100_share), 1e-9);
  // H200 is the H100 SXM die at the same clocks and power limit.
  EXPECT_NEAR(gemm_only_layer_seconds(*find_gpu("H200"), fitted) / h100_seconds, 1, 1e-12);

  // GPUs without a MAMF measurement keep the fitted fraction.
  for (const char* name : {"V100-SXM2-32GB", "H100-PCIe", "L40S", "B200"}) {
    const GpuSpec& gpu = *find_gpu(name);
    EXPECT_EQ(gpu.attainable_16bit_matmul_fraction, 0) << name;
    EXPECT_EQ(gemm_only_layer_seconds(gpu, fitted), gemm_only_layer_seconds(gpu, unscaled)) << name;
  }
  // fp8 GEMMs keep their own fraction, fitted on H100 data that already carry H100's clocks.
  EXPECT_EQ(gemm_only_layer_seconds(h100(), fitted, Precision::fp8),
            gemm_only_layer_seconds(h100(), unscaled, Precision::fp8));
}

TEST(Efficiency, EndStagesCarryEmbeddingAndHead) {
  ModelSpec model = gpt(32, 4096, 32);
  model.vocab_size = 128256;
  const WorkProfile work = profile_work(model, training_of(64, 4096), h100(), config_of(1, 4, 1));
  EXPECT_GT(work.stages[3].embedding_and_head_seconds, work.stages[0].embedding_and_head_seconds);
  EXPECT_EQ(work.stages[1].embedding_and_head_seconds, 0);
  EXPECT_GT(work.stages[3].forward_compute_seconds, work.stages[1].forward_compute_seconds);
}

// Hand-built work and links, as the network model would give them.
struct Pipeline {
  ParallelConfig config;
  WorkProfile work;
  CommunicationTimes communication;
};

Pipeline uniform_pipeline(int pp, int dp, int chunks, int microbatches, double forward, double backward, double link) {
  Pipeline pipeline;
  pipeline.config = config_of(1, pp, dp);
  pipeline.config.virtual_stages = chunks;
  pipeline.work.num_microbatches = microbatches;
  pipeline.work.virtual_stages = chunks;
  for (int stage = 0; stage < pp; ++stage) {
    StageWork stage_work;
    stage_work.forward_compute_seconds = forward;
    stage_work.backward_compute_seconds = backward;
    pipeline.work.stages.push_back(stage_work);
    pipeline.communication.tp_seconds.emplace_back(dp, 0.0);
    pipeline.communication.dp_seconds.push_back(0);
  }
  for (int stage = 0; stage + 1 < pp; ++stage) pipeline.communication.p2p_seconds.emplace_back(dp, link);
  if (chunks > 1) pipeline.communication.wraparound_p2p_seconds.assign(dp, link);
  return pipeline;
}

double closed_form(const Pipeline& pipeline, const TrainingSpec& training = TrainingSpec()) {
  return critical_path(pipeline.config, pipeline.work, pipeline.communication, training).iteration_seconds;
}

double simulated(const Pipeline& pipeline, const TrainingSpec& training = TrainingSpec()) {
  return simulate_schedule(pipeline.config, pipeline.work, pipeline.communication, training).iteration_seconds;
}

TEST(CriticalPath, OneFOneBTextbookBubble) {
  // Equal stages, free links: (m + p − 1)(F + B), whatever m is against p.
  for (const int m : {1, 3, 8, 13}) {
    const Pipeline pipeline = uniform_pipeline(8, 1, 1, m, 1.0, 2.0, 0.0);
    EXPECT_DOUBLE_EQ(closed_form(pipeline), (m + 8 - 1) * 3.0) << "m=" << m;
  }
}

TEST(CriticalPath, InterleavedBubbleShrinksByV) {
  // (m·v + p − 1)(f + b) with per-chunk f = F/v, b = B/v.
  const Pipeline pipeline = uniform_pipeline(4, 1, 2, 8, 1.0, 2.0, 0.0);
  EXPECT_DOUBLE_EQ(closed_form(pipeline), (8 * 2 + 3) * 1.5);
  const TimeBreakdown time = critical_path(pipeline.config, pipeline.work, pipeline.communication, TrainingSpec());
  EXPECT_DOUBLE_EQ(time.pipeline_bubble_seconds, 3 * 1.5);
  EXPECT_DOUBLE_EQ(time.compute_seconds, 8 * 3.0);
}

TEST(CriticalPath, InterleavedWithMicrobatchesNotAMultipleOfP) {
  // m = 10, p = 4: Megatron groups 5 micro-batches per chunk; no ⌊m/p⌋ in the answer.
  for (const int m : {4, 5, 6, 7, 9, 10, 11}) {
    const Pipeline pipeline = uniform_pipeline(4, 1, 3, m, 1.0, 2.0, 0.0);
    EXPECT_NEAR(closed_form(pipeline), simulated(pipeline), 1e-9) << "m=" << m;
  }
}

TEST(CriticalPath, SlowestStageDominates) {
  Pipeline pipeline = uniform_pipeline(4, 1, 1, 32, 1.0, 2.0, 0.0);
  const double balanced = closed_form(pipeline);
  pipeline.work.stages[2].forward_compute_seconds = 1.5;
  pipeline.work.stages[2].backward_compute_seconds = 3.0;
  const double skewed = closed_form(pipeline);
  EXPECT_NEAR(skewed - balanced, 31 * 1.5 + 1.5, 1e-9);  // every steady-state pair runs at the slow pace
}

TEST(CriticalPath, SlowestLinkDominates) {
  Pipeline pipeline = uniform_pipeline(4, 1, 1, 32, 1.0, 2.0, 0.01);
  const double fast = closed_form(pipeline);
  pipeline.communication.p2p_seconds[1][0] = 1.0;  // one degraded link
  const double slow = closed_form(pipeline);
  EXPECT_GT(slow - fast, 32 * (2 * 0.99) / 4 * 0.9);
  EXPECT_NEAR(slow, simulated(pipeline), 0.08 * slow);
}

TEST(CriticalPath, SlowestReplicaWins) {
  Pipeline pipeline = uniform_pipeline(4, 3, 1, 16, 1.0, 2.0, 0.01);
  const double even = closed_form(pipeline);
  pipeline.communication.tp_seconds[1][2] = 0.6;  // replica 2's stage 1 has a slow TP group
  const double uneven = closed_form(pipeline);
  EXPECT_GT(uneven, even + 16 * 0.5);
  const TimeBreakdown time = critical_path(pipeline.config, pipeline.work, pipeline.communication, TrainingSpec());
  EXPECT_NEAR(time.tp_communication_seconds, 16 * 0.6, 1e-9);
}

TEST(CriticalPath, DataParallelReductionOverlapsWithBackwardWhenAsked) {
  Pipeline pipeline = uniform_pipeline(2, 2, 1, 8, 1.0, 2.0, 0.0);
  const double pipeline_only = closed_form(pipeline);
  pipeline.communication.dp_seconds = {1.5, 1.5};
  TrainingSpec overlapped;
  overlapped.overlap_gradient_reduce = true;
  TrainingSpec exposed;
  exposed.overlap_gradient_reduce = false;
  // Without overlap the reduction follows the last backward; with overlap it hides in stage 0's
  // last backward (2 s) entirely, and stage 1's finished earlier.
  EXPECT_DOUBLE_EQ(closed_form(pipeline, exposed), pipeline_only + 1.5);
  EXPECT_DOUBLE_EQ(closed_form(pipeline, overlapped), pipeline_only);
  pipeline.communication.dp_seconds = {3.0, 0.5};
  EXPECT_DOUBLE_EQ(closed_form(pipeline, overlapped), pipeline_only + 1.0);
  EXPECT_DOUBLE_EQ(closed_form(pipeline, overlapped), simulated(pipeline, overlapped));
  EXPECT_DOUBLE_EQ(closed_form(pipeline, exposed), simulated(pipeline, exposed));
}

TEST(CriticalPath, OptimizerStepFollowsTheReductions) {
  Pipeline pipeline = uniform_pipeline(2, 1, 1, 4, 1.0, 2.0, 0.0);
  const double before = closed_form(pipeline);
  pipeline.work.stages[0].optimizer_seconds = 0.25;
  pipeline.work.stages[1].optimizer_seconds = 0.5;
  const TimeBreakdown time = critical_path(pipeline.config, pipeline.work, pipeline.communication, TrainingSpec());
  EXPECT_DOUBLE_EQ(time.iteration_seconds, before + 0.5);
  EXPECT_DOUBLE_EQ(time.optimizer_seconds, 0.5);
}

TEST(CriticalPath, EmbeddingAndHeadImbalanceIsAttributed) {
  Pipeline pipeline = uniform_pipeline(4, 1, 1, 16, 1.0, 2.0, 0.0);
  pipeline.work.stages[3].forward_compute_seconds += 0.3;
  pipeline.work.stages[3].backward_compute_seconds += 0.6;
  pipeline.work.stages[3].embedding_and_head_seconds = 0.9;
  const TimeBreakdown time = critical_path(pipeline.config, pipeline.work, pipeline.communication, TrainingSpec());
  EXPECT_NEAR(time.embedding_imbalance_seconds, 16 * 0.9, 1e-9);
}

TEST(CriticalPath, ClosedFormTracksTheSimulator) {
  // 300 random pipelines in the regime real plans live in: stages within ±15% of each other,
  // links up to 16% of a chunk's forward + backward time.
  std::mt19937 random(7);
  std::uniform_real_distribution<double> spread(0.85, 1.15);
  double sum = 0, worst = 0;
  const int trials = 300;
  for (int trial = 0; trial < trials; ++trial) {
    const int pp = 2 + static_cast<int>(random() % 7);
    const int dp = 1 + static_cast<int>(random() % 3);
    const int chunks = trial % 2 ? 1 : 2 + static_cast<int>(random() % 3);
    const int m = chunks == 1 && trial % 4 == 1 ? 1 + static_cast<int>(random() % pp) : pp + static_cast<int>(random() % (3 * pp));
    Pipeline pipeline = uniform_pipeline(pp, dp, chunks, m, 1.0, 2.0, 0.0);
    for (StageWork& stage : pipeline.work.stages) {
      stage.forward_compute_seconds = spread(random);
      stage.backward_compute_seconds = 2 * spread(random);
    }
    const double link = (trial % 5) * 0.12 / chunks;
    for (auto& row : pipeline.communication.p2p_seconds) for (double& seconds : row) seconds = link * spread(random);
    for (double& seconds : pipeline.communication.wraparound_p2p_seconds) seconds = link;
    const double error = std::abs(closed_form(pipeline) - simulated(pipeline)) / simulated(pipeline);
    sum += error;
    worst = std::max(worst, error);
  }
  EXPECT_LT(sum / trials, 0.02);
  EXPECT_LT(worst, 0.12);
}

TEST(DefaultPlacement, RankRunsOnGpuOfTheSameIndex) {
  const Placement placement = default_placement(config_of(2, 2, 3));
  ASSERT_EQ(placement.gpu_of_rank.size(), 12u);
  for (int rank = 0; rank < 12; ++rank) EXPECT_EQ(placement.gpu_of_rank[static_cast<size_t>(rank)], rank);
}

}  // namespace
}  // namespace pipette
