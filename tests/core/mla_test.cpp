// Issue 17: multi-latent attention (DeepSeek-V3's MLA) in parameters, TP split, activation
// memory, FLOPs and the framework refusals.
#include <gtest/gtest.h>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/launch.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/performance.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

// A small dense MLA model with DeepSeek-V3's proportions.
ModelSpec small_mla() {
  ModelSpec model = testing::llama_like(4, 1024, 8, 8, 2816, 32000);
  model.name = "mla";
  model.q_lora_rank = 192;
  model.kv_lora_rank = 64;
  model.qk_head_dim = 128;
  model.qk_pos_emb_head_dim = 64;
  model.v_head_dim = 128;
  model.qk_layernorm = true;
  return model;
}

TrainingSpec training_of(int sequence) {
  TrainingSpec training;
  training.global_batch_sequences = 64;
  training.sequence_length = sequence;
  return training;
}

ParallelConfig layout(int tp, bool sequence_parallel) {
  ParallelConfig config;
  config.tp = tp;
  config.dp = 8 / tp;
  config.sequence_parallel = sequence_parallel;
  config.layers_per_stage = {4};
  return config;
}

TEST(MultiLatentAttention, CountsItsFiveMatricesAndLatentNorms) {
  const ModelSpec model = small_mla();
  ASSERT_EQ(validate(model), "");
  const AttentionWeightElements elements = attention_weight_elements(model);
  // Q up 192 → 8·192, KV up 64 → 8·(128 + 128), output 8·128 → 1024; down 1024 → 192 + 64 + 64.
  EXPECT_EQ(elements.split, 192 * 8 * 192 + 64 * 8 * 256 + 8 * 128 * 1024);
  EXPECT_EQ(elements.replicated, 1024 * (192 + 64 + 64));
  EXPECT_EQ(parameters_per_layer(model), elements.total() + 192 + 64 + 3LL * 1024 * 2816 + 2 * 1024);
  ModelSpec no_q_latent = model;
  no_q_latent.q_lora_rank = 0;  // linear_q_proj: h → Q, column-parallel
  EXPECT_EQ(attention_weight_elements(no_q_latent).split, 1024 * 8 * 192 + 64 * 8 * 256 + 8 * 128 * 1024);
  EXPECT_EQ(attention_weight_elements(no_q_latent).replicated, 1024 * (64 + 64));
}

// Megatron-core keeps the down projections whole on every TP rank (TELinear "duplicated"): going
// from tp 1 to 2 halves only the up projections, the output projection, the MLP and the tables.
TEST(MultiLatentAttention, TensorParallelismSplitsOnlyTheUpAndOutputProjections) {
  const ModelSpec model = small_mla();
  const double tp1 = parameters_on_stage(model, layout(1, false), 0);
  const double tp2 = parameters_on_stage(model, layout(2, true), 0);
  const double split_per_layer = attention_weight_elements(model).split + 3.0 * 1024 * 2816;
  EXPECT_DOUBLE_EQ(tp1 - tp2, 4 * split_per_layer / 2 + 32000.0 * 1024);
}

// What MLA keeps per token: the latents (replicated, sequence-split by SP) and Q, K, V and the
// output (split over TP).
TEST(MultiLatentAttention, KeepsTheLatentsAndTheUpProjectedHeads) {
  const ModelSpec model = small_mla();
  const TrainingSpec training = training_of(4096);
  const double tokens = 4096;
  ModelSpec wider_q_latent = model;
  wider_q_latent.q_lora_rank += 64;  // the Q latent and its norm's output, 2 bytes each
  EXPECT_DOUBLE_EQ(layer_activation_bytes(wider_q_latent, training, layout(1, false)) -
                       layer_activation_bytes(model, training, layout(1, false)),
                   tokens * 2 * 64 * 2);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(wider_q_latent, training, layout(2, true)) -
                       layer_activation_bytes(model, training, layout(2, true)),
                   tokens * 2 * 64 * 2 / 2);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(wider_q_latent, training, layout(2, false)) -
                       layer_activation_bytes(model, training, layout(2, false)),
                   tokens * 2 * 64 * 2);
  ModelSpec wider_v = model;
  wider_v.v_head_dim += 32;  // V and the attention output, every head, split over TP
  EXPECT_DOUBLE_EQ(layer_activation_bytes(wider_v, training, layout(2, true)) -
                       layer_activation_bytes(model, training, layout(2, true)),
                   tokens * 2 * 8 * 32 * 2 / 2);
}

// Model FLOPs: forward + 2× backward of every matrix (down projections included), QKᵀ over the
// nope + rope width and attention·V over v_head_dim, half of each when causal.
TEST(MultiLatentAttention, ModelFlopsCountQkAndVWidthsApart) {
  const ModelSpec model = small_mla();
  const TrainingSpec training = training_of(4096);
  const double s = 4096, a = 8;
  const double weights = static_cast<double>(attention_weight_elements(model).total()) + 3.0 * 1024 * 2816;
  const double attention = 0.5 * 2 * s * a * ((128 + 64) + 128);
  const double per_token = 4 * (2 * weights + attention) + 2.0 * 1024 * 32000;
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(model, training, AttentionFlops::causal), 3 * per_token * s * 64);
}

// With SP, the attention's all-gather and its column-parallel backward carry the latents: a
// wider Q latent adds (½ + 1) × its share of the h-wide message per layer, and nothing to the count.
TEST(MultiLatentAttention, TensorParallelCollectivesCarryTheLatents) {
  const ModelSpec model = small_mla();
  const TrainingSpec training = training_of(4096);
  const GpuSpec gpu = *find_gpu("H100-SXM");
  ModelSpec wider_q_latent = model;
  wider_q_latent.q_lora_rank += 64;
  const StageWork narrow = profile_work(model, training, gpu, layout(2, true)).stages.front();
  const StageWork wide = profile_work(wider_q_latent, training, gpu, layout(2, true)).stages.front();
  const double message_bytes = 4096.0 * 1024 * 2;  // b·s·h in bf16
  EXPECT_NEAR(wide.tp_bytes_per_microbatch - narrow.tp_bytes_per_microbatch,
              4 * 1.5 * (64.0 / 1024) * message_bytes * 2 * (2 - 1) / 2, 1e-3);
  EXPECT_EQ(wide.tp_collectives_per_microbatch, narrow.tp_collectives_per_microbatch);
  // Standard attention's QKV collectives stay h wide.
  EXPECT_LT(narrow.tp_bytes_per_microbatch, (4 * 7 + 2) * message_bytes * 2 * (2 - 1) / 2);
}

TEST(MultiLatentAttention, TorchtitanRefusesSequenceSplitDownProjections) {
  const ModelSpec model = small_mla();
  const FrameworkTarget titan{Framework::torchtitan, false};
  ParallelConfig config = layout(2, true);
  config.distributed_optimizer = false;
  EXPECT_EQ(launch_problem(titan, model, config, 1),
            "torchtitan runs multi-latent attention's down projections on the whole sequence on every tp rank, not "
            "sequence-split as priced (plan with sp=off or tp=1)");
  EXPECT_EQ(launch_problem(titan, model, layout(2, false), 1).find("multi-latent"), std::string::npos);
  EXPECT_EQ(launch_problem(FrameworkTarget{Framework::nanotron, false}, model, layout(1, false), 1),
            "its multi-latent attention is not priced for nanotron");
}

}  // namespace
}  // namespace pipette
