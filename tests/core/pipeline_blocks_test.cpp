#include "pipette/core/pipeline_blocks.hpp"

#include <gtest/gtest.h>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/stack_profile.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

// A Llama-style model (SwiGLU, RMSNorm, no biases or dropout) of the given shape.
using testing::llama_like;

// The llama3.2-1b shape: 16 layers, h 2048, 32 heads, ffn 8192, vocab 128256. Per
// get_block_compute_costs (nanotron @2411b022 models/llama.py l.938-950) a layer costs
// 4·32·64·2048 + 3·8192·2048 = 2^26 and the lm_head 128256·2048 = 3.91 layers.
ModelSpec llama_1b() { return llama_like(16, 2048, 32, 8, 8192, 128256); }

// A layer costs 4·8·8·64 + 3·64·64 = 7·4096 = c and the head 448·64 = c: the total is 3c.
ModelSpec tiny() { return llama_like(2, 64, 8, 8, 64, 448); }

// base.py l.221-233: a block goes on the current rank; the rank advances after a block whose
// cumulative cost exceeds total·(r+1)/pp.
TEST(NanotronPartition, OneBillionOnFourRanksIsUneven) {
  // Thresholds 4.98, 9.96, 14.94 layers: layer 5 (cumulative 5) crosses the first, 10 the second,
  // 15 the third; layer 16, the norm, the head (cumulative 19.9 = total), cast and loss stay on 3.
  const PipelineBlocks blocks = nanotron_partition(llama_1b(), 4);
  EXPECT_EQ(layers_of(blocks), (std::vector<int>{5, 5, 5, 1}));
  EXPECT_TRUE(blocks.ranks[0].embedding);
  EXPECT_TRUE(blocks.ranks[3].head && blocks.ranks[3].fp32_cast && blocks.ranks[3].loss && blocks.ranks[3].final_norm);
  EXPECT_EQ(blocks.ranks[3].first_layer, 15);
  EXPECT_EQ(blocks.boundaries, std::vector<BoundaryTensor>(3, BoundaryTensor::hidden_states));
}

TEST(NanotronPartition, OneBillionOnEightRanksPutsTheHeadBeforeTheLastRank) {
  // Thresholds 2.49·(r+1) layers: layers 3, 5, 8, 10, 13, 15 cross ranks 0-5; rank 6 takes layer
  // 16, the norm and the head, whose cumulative 19.9 layers crosses 17.4; cast_to_fp32 and the loss
  // (cumulative = total, not above rank 7's threshold) sit on rank 7, which receives the 16-bit
  // logits.
  const PipelineBlocks blocks = nanotron_partition(llama_1b(), 8);
  EXPECT_EQ(layers_of(blocks), (std::vector<int>{3, 2, 3, 2, 3, 2, 1, 0}));
  EXPECT_TRUE(blocks.ranks[6].final_norm && blocks.ranks[6].head);
  EXPECT_FALSE(blocks.ranks[6].fp32_cast);
  EXPECT_TRUE(blocks.ranks[7].fp32_cast && blocks.ranks[7].loss);
  EXPECT_FALSE(blocks.ranks[7].head);
  std::vector<BoundaryTensor> expected(7, BoundaryTensor::hidden_states);
  expected[6] = BoundaryTensor::logits;
  EXPECT_EQ(blocks.boundaries, expected);
}

TEST(NanotronPartition, MoreRanksThanBlocksLeavesTheLastRanksIdle) {
  // Thresholds 0.375c·(r+1): every block from the first layer on crosses its rank's threshold, so
  // each takes a rank of its own; the loss (3c > 2.25c) advances to rank 6, and ranks 6 and 7 hold
  // nothing.
  const PipelineBlocks blocks = nanotron_partition(tiny(), 8);
  EXPECT_EQ(layers_of(blocks), (std::vector<int>{1, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(blocks.ranks[0].embedding);
  EXPECT_TRUE(blocks.ranks[2].final_norm && !blocks.ranks[2].head);
  EXPECT_TRUE(blocks.ranks[3].head);
  EXPECT_TRUE(blocks.ranks[4].fp32_cast);
  EXPECT_TRUE(blocks.ranks[5].loss);
  EXPECT_TRUE(blocks.ranks[6].idle && blocks.ranks[7].idle);
  EXPECT_FALSE(blocks.ranks[5].idle);
  EXPECT_EQ(blocks.boundaries,
            (std::vector<BoundaryTensor>{BoundaryTensor::hidden_states, BoundaryTensor::hidden_states,
                                         BoundaryTensor::hidden_states, BoundaryTensor::logits,
                                         BoundaryTensor::fp32_logits, BoundaryTensor::nothing, BoundaryTensor::nothing}));
}

TEST(NanotronPartition, ThresholdIsStrict) {
  // Thresholds 0.75c, 1.5c, 2.25c, 3c: the head's cumulative 3c crosses 2.25c on rank 2; the cast at
  // exactly 3c does not exceed rank 3's threshold, so cast and loss share rank 3.
  const PipelineBlocks blocks = nanotron_partition(tiny(), 4);
  EXPECT_EQ(layers_of(blocks), (std::vector<int>{1, 1, 0, 0}));
  EXPECT_TRUE(blocks.ranks[2].final_norm && blocks.ranks[2].head);
  EXPECT_TRUE(blocks.ranks[3].fp32_cast && blocks.ranks[3].loss);
  EXPECT_EQ(blocks.boundaries.back(), BoundaryTensor::logits);
}

TEST(PipelineBlocks, LayerSplitStacksKeepTheEndsOnTheEndRanks) {
  ParallelConfig config;
  config.pp = 3;
  config.layers_per_stage = {6, 5, 5};
  const PipelineBlocks blocks = pipeline_blocks(llama_1b(), Framework::megatron_core, config);
  EXPECT_EQ(layers_of(blocks), config.layers_per_stage);
  EXPECT_TRUE(blocks.ranks[0].embedding && !blocks.ranks[0].head);
  EXPECT_TRUE(blocks.ranks[2].head && blocks.ranks[2].loss);
  EXPECT_EQ(blocks.ranks[2].first_layer, 11);
  for (const PipelineRankBlocks& rank : blocks.ranks) EXPECT_FALSE(rank.idle);
  // nanotron ignores the split it is given: thresholds 6.64 and 13.28 layers' cost put layers 1-7,
  // 8-14 and 15-16 with the head (3.91 layers) on the three ranks.
  EXPECT_EQ(layers_of(pipeline_blocks(llama_1b(), Framework::nanotron, config)), (std::vector<int>{7, 7, 2}));
}

TEST(PipelineBlocks, LogitsCrossingCostVocabOverHiddenTimesAHiddenStateMessage) {
  ModelSpec model = llama_1b();
  TrainingSpec training;
  training.sequence_length = 4096;
  training.precision = Precision::bf16;
  ParallelConfig config;
  config.tp = 2;
  config.micro_batch = 1;
  config.sequence_parallel = true;
  const double hidden = boundary_tensor_bytes(BoundaryTensor::hidden_states, model, training, config);
  EXPECT_DOUBLE_EQ(hidden, 4096.0 * 2048 * 2 / 2);
  EXPECT_DOUBLE_EQ(boundary_tensor_bytes(BoundaryTensor::logits, model, training, config), 4096.0 * 64128 * 2);
  // fp32 logits with sequence parallelism: (4 bytes / 2 bytes) · V/h = 125× the hidden-state
  // message per rank (both are split over tp: the logits by vocabulary, the hidden states by sequence).
  EXPECT_DOUBLE_EQ(boundary_tensor_bytes(BoundaryTensor::fp32_logits, model, training, config) / hidden,
                   2.0 * 128256 / 2048);
  EXPECT_EQ(boundary_tensor_bytes(BoundaryTensor::nothing, model, training, config), 0.0);
}

TrainingSpec training_on(Framework framework) {
  TrainingSpec training;
  training.global_batch_sequences = 64;
  training.sequence_length = 4096;
  training.target.framework = framework;
  apply_stack_profile(training);
  return training;
}

ParallelConfig eight_stages(const ModelSpec& model, Framework framework) {
  ParallelConfig config;
  config.tp = 2;
  config.pp = 8;
  config.dp = 1;
  config.micro_batch = 1;
  config.sequence_parallel = true;
  config.layers_per_stage = layers_of(pipeline_blocks(model, framework, config));
  return config;
}

// The 1B on pp=8 (partition above): rank 6 runs layer 16 and the lm_head's GEMM and sends the
// 16-bit logits; rank 7 runs only the cast and the cross entropy.
TEST(NanotronPartition, TheHeadsWorkAndMessageSitWhereThePartitionPutsThem) {
  const ModelSpec model = llama_1b();
  const TrainingSpec training = training_on(Framework::nanotron);
  const ParallelConfig config = eight_stages(model, Framework::nanotron);
  const WorkProfile work = profile_work(model, training, *find_gpu("H100-SXM"), config);
  ASSERT_EQ(work.boundary_bytes_per_microbatch.size(), 7u);
  for (int s = 0; s < 6; ++s) EXPECT_DOUBLE_EQ(boundary_bytes(work, s), work.p2p_bytes_per_microbatch);
  EXPECT_DOUBLE_EQ(boundary_bytes(work, 6), 4096.0 * (128256 / 2) * 2);
  const StageWork& head = work.stages[6];
  const StageWork& loss = work.stages[7];
  EXPECT_EQ(head.num_layers, 1);
  EXPECT_EQ(loss.num_layers, 0);
  // Rank 6 runs the GEMM (2·s·V/tp·h per pass, three passes); rank 7 the cast and the cross
  // entropy's passes over the fp32 logits, 38 bytes per logit forward and 14 backward
  // (stack_profile.cpp, nanotron's parallel/tensor_parallel/functional.py @2411b022 l.40-105).
  EXPECT_GT(head.embedding_and_head_seconds, 0);
  const double bandwidth = fitted_compute_efficiency().memory_fraction * find_gpu("H100-SXM")->hbm_bytes_per_second;
  EXPECT_NEAR(loss.embedding_and_head_seconds, (38 + 14) * 4096.0 * (128256 / 2) / bandwidth, 1e-12);
  EXPECT_DOUBLE_EQ(loss.forward_compute_seconds + loss.backward_compute_seconds,
                   loss.embedding_and_head_seconds + 2 * fitted_compute_efficiency().chunk_pass_overhead_seconds);
  // The output matrix (untied) and the final norm are parameters of rank 6, none of rank 7.
  const PipelineBlocks blocks = pipeline_blocks(model, Framework::nanotron, config);
  PipelineRankBlocks layer_only = blocks.ranks[6];
  layer_only.head = layer_only.final_norm = false;
  EXPECT_DOUBLE_EQ(parameters_on_stage(model, config, 6, blocks.ranks[6]),
                   parameters_on_stage(model, config, 6, layer_only) + 128256.0 * 2048 / 2 + 2048);
  EXPECT_EQ(parameters_on_stage(model, config, 7, blocks.ranks[7]), 0.0);
}

// communication_times prices each boundary by what crosses it (the same boundary_bytes the
// placement search uses): the 1B's logits boundary on pp=8 costs more than its hidden-state
// boundaries; the tiny model's boundaries to its idle ranks cost nothing.
TEST(NanotronPartition, EachBoundaryIsPricedByWhatCrossesIt) {
  Cluster cluster = synthetic_cluster(uniform_fabric(8), 1);
  cluster.gpu = *find_gpu("H100-SXM");
  const TrainingSpec training = training_on(Framework::nanotron);
  const ModelSpec model = llama_1b();
  ParallelConfig config = eight_stages(model, Framework::nanotron);
  config.tp = 8;
  const WorkProfile work = profile_work(model, training, cluster.gpu, config);
  const CommunicationTimes times = communication_times(cluster, config, work, default_placement(config));
  EXPECT_GT(times.p2p_seconds[6][0], 10 * times.p2p_seconds[5][0]);
  EXPECT_DOUBLE_EQ(times.p2p_seconds[4][0], times.p2p_seconds[5][0]);

  const ModelSpec small = tiny();
  ParallelConfig idle = eight_stages(small, Framework::nanotron);
  idle.tp = 8;
  const WorkProfile idle_work = profile_work(small, training, cluster.gpu, idle);
  const CommunicationTimes idle_times = communication_times(cluster, idle, idle_work, default_placement(idle));
  EXPECT_GT(idle_times.p2p_seconds[4][0], 0.0);
  EXPECT_EQ(idle_times.p2p_seconds[5][0], 0.0);
  EXPECT_EQ(idle_times.p2p_seconds[6][0], 0.0);
  EXPECT_EQ(idle_work.stages[6].forward_compute_seconds + idle_work.stages[6].backward_compute_seconds, 0.0);
}

// Megatron-core on the same shape keeps one message size for every boundary: nothing changes.
TEST(NanotronPartition, LayerSplitStacksKeepOneMessageSize) {
  const ModelSpec model = llama_1b();
  const ParallelConfig config = eight_stages(model, Framework::megatron_core);
  const WorkProfile work = profile_work(model, training_on(Framework::megatron_core), *find_gpu("H100-SXM"), config);
  EXPECT_TRUE(work.boundary_bytes_per_microbatch.empty());
  EXPECT_DOUBLE_EQ(boundary_bytes(work, 6), work.p2p_bytes_per_microbatch);
}

// Memory: the head's rank keeps the norm output it saved and its 16-bit logits; the loss's rank the
// fp32 logits and the loss's buffers; an idle rank holds no weights at all.
TEST(NanotronPartition, TheLogitsMemorySitsOnTheHeadsAndTheLosssRanks) {
  const ModelSpec model = llama_1b();
  const TrainingSpec training = training_on(Framework::nanotron);
  const ParallelConfig config = eight_stages(model, Framework::nanotron);
  const std::vector<StageMemory> memory = estimate_memory(model, training, config, RuntimeOverheads{});
  const double tokens = 4096;
  const double vocab_shard = 128256.0 / 2;
  EXPECT_DOUBLE_EQ(memory[6].logits_and_loss_bytes, 2 * tokens * 2048 * 2 / 2 + tokens * vocab_shard * 2);
  EXPECT_DOUBLE_EQ(memory[7].logits_and_loss_bytes,
                   tokens * vocab_shard * (4.0 + 2 + stack_profile(Framework::nanotron).extra_logits_bytes_per_element));
  EXPECT_EQ(memory[5].logits_and_loss_bytes, 0.0);
  EXPECT_EQ(memory[7].weights_bytes, 0.0);

  ModelSpec small = tiny();
  ParallelConfig idle = eight_stages(small, Framework::nanotron);
  idle.tp = 1;
  idle.sequence_parallel = false;
  const std::vector<StageMemory> idle_memory = estimate_memory(small, training, idle, RuntimeOverheads{});
  EXPECT_EQ(idle_memory[6].weights_bytes + idle_memory[6].activations_bytes + idle_memory[6].logits_and_loss_bytes, 0.0);
}

}  // namespace
}  // namespace pipette
