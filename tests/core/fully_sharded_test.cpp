// Fully sharded data parallelism (ParallelConfig::fully_sharded) as torchtitan runs it: FSDP2 with
// one fully_shard unit per block plus the embedding and [norm, output]
// (torchtitan distributed/fsdp.py @b5bcd76c l.168-368), fp32 shards, 16-bit gathers, fp32
// reduce-scatters after every micro-batch.
#include <gtest/gtest.h>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/launch.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/simulator.hpp"
#include "pipette/core/stack_profile.hpp"
#include "pipette/core/units.hpp"
#include "test_clusters.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

// Llama 3 8B's shape: 32 layers, hidden 4096, 32 heads over 8 KV heads, SwiGLU 14336, vocabulary
// 128256, untied.
ModelSpec llama3_8b_like() { return testing::llama_like(32, 4096, 32, 8, 14336, 128256); }

TrainingSpec torchtitan_training(std::int64_t global_batch) {
  TrainingSpec training;
  training.global_batch_sequences = global_batch;
  training.sequence_length = 8192;
  training.target.framework = Framework::torchtitan;
  apply_stack_profile(training);
  return training;
}

ParallelConfig data_parallel(int dp, bool fully_sharded) {
  ParallelConfig config;
  config.dp = dp;
  config.recompute = RecomputeMode::full;
  config.fully_sharded = fully_sharded;
  config.layers_per_stage = {32};
  return config;
}

using testing::without_placement;

// What each GPU keeps: a 1/dp shard of the fp32 parameters, the fp32 gradients and AdamW's two
// moments (4 + 4 + 8 bytes), no master copy; beside them, at the backward's start, the [norm,
// output] unit still gathered in 16 bits with the last block prefetched, and the output unit's
// 16-bit gradient with its fp32 reduce-scatter input.
TEST(FullySharded, KeepsOneShardOfEachPersistentByteAndTheGatheredUnits) {
  const ModelSpec model = llama3_8b_like();
  const TrainingSpec training = torchtitan_training(64);
  const StageMemory replicated = estimate_memory(model, training, data_parallel(8, false), RuntimeOverheads{}).front();
  const StageMemory sharded = estimate_memory(model, training, data_parallel(8, true), RuntimeOverheads{}).front();
  // Replicated, torchtitan's profile prices 2 bytes of 16-bit weights a parameter.
  const double parameters = replicated.weights_bytes / 2;
  const double h = 4096, kv = 1024, f = 14336, vocab = 128256;
  const double block = h * (h + 2 * kv) + h * h + 3 * h * f;
  const double output_unit = vocab * h + h;
  EXPECT_DOUBLE_EQ(sharded.weights_bytes, 4 * parameters / 8 + 2 * (output_unit + block));
  EXPECT_DOUBLE_EQ(sharded.gradients_bytes, 4 * parameters / 8 + (2 + 4) * output_unit);
  EXPECT_DOUBLE_EQ(sharded.optimizer_state_bytes, 8 * parameters / 8);
  EXPECT_DOUBLE_EQ(sharded.step_gradients_bytes, 0);
  EXPECT_DOUBLE_EQ(sharded.activations_bytes, replicated.activations_bytes);
  // Twice the ranks, half of every shard; the gathered units stay whole.
  const StageMemory wider = estimate_memory(model, training, data_parallel(16, true), RuntimeOverheads{}).front();
  EXPECT_DOUBLE_EQ(sharded.optimizer_state_bytes - wider.optimizer_state_bytes, 8 * parameters / 16);
  EXPECT_DOUBLE_EQ(sharded.weights_bytes - wider.weights_bytes, 4 * parameters / 16);
  // Under 2 of the 18 bytes a parameter replication keeps, and fitting where replication does not.
  EXPECT_LT(sharded.model_state_bytes(), replicated.model_state_bytes() / 4);
}

// Every micro-batch gathers each unit's 16-bit parameters (again in the backward, all but the [norm,
// output] unit) and reduce-scatters its fp32 gradients: as shares of an all-reduce of the fp32
// gradients, a quarter per gather and a half per reduce-scatter. The embedding's gather opens the
// forward and its reduce-scatter closes the backward with no compute beside them.
TEST(FullySharded, GathersAndReduceScattersEveryMicroBatchBesideTheCompute) {
  const ModelSpec model = llama3_8b_like();
  const TrainingSpec training = torchtitan_training(64);
  const GpuSpec gpu = *find_gpu("H100-SXM");
  const WorkProfile work = profile_work(model, training, gpu, data_parallel(8, true));
  const StageWork& stage = work.stages.front();
  const double parameters = estimate_memory(model, training, data_parallel(8, false), RuntimeOverheads{}).front().weights_bytes / 2;
  const double embedding = 128256.0 * 4096 / parameters;
  EXPECT_DOUBLE_EQ(stage.fsdp_forward_share, (1 - embedding) * 0.25);
  EXPECT_DOUBLE_EQ(stage.fsdp_backward_share, (1 - embedding) * (0.25 + 0.5));
  EXPECT_DOUBLE_EQ(stage.fsdp_unhidden_share, embedding * (0.25 + 0.5));
  // A pass waits for what its collectives take beyond its compute, and its compute runs slower for
  // as long as they run beside it (overlapped_compute_slowdown, 18.9%).
  const double slowdown = stage.overlapped_compute_slowdown;
  ASSERT_GT(slowdown, 0);
  EXPECT_DOUBLE_EQ(exposed_fsdp_seconds(stage, 1e-3),
                   stage.fsdp_unhidden_share * 1e-3 + slowdown * stage.fsdp_forward_share * 1e-3 +
                       slowdown * stage.fsdp_backward_share * 1e-3);
  const double slow = 100 * (stage.forward_compute_seconds + stage.backward_compute_seconds);
  EXPECT_DOUBLE_EQ(exposed_fsdp_seconds(stage, slow),
                   stage.fsdp_unhidden_share * slow + (stage.fsdp_forward_share * slow - stage.forward_compute_seconds) +
                       slowdown * stage.forward_compute_seconds +
                       (stage.fsdp_backward_share * slow - stage.backward_compute_seconds) +
                       slowdown * stage.backward_compute_seconds);
  // The optimizer steps its shard only; replicated there are no FSDP collectives at all.
  const WorkProfile replicated = profile_work(model, training, gpu, data_parallel(8, false));
  EXPECT_DOUBLE_EQ(stage.optimizer_seconds, replicated.stages.front().optimizer_seconds / 8);
  EXPECT_EQ(replicated.stages.front().fsdp_forward_share + replicated.stages.front().fsdp_backward_share +
                replicated.stages.front().fsdp_unhidden_share,
            0);
}

// No gradient reduction after the last backward: each micro-batch's exposed FSDP time, once per
// micro-batch, then the step. The simulated schedule and the closed form agree.
TEST(FullySharded, IterationIsMicroBatchesPlusTheirExposedCollectivesPlusTheStep) {
  const ModelSpec model = llama3_8b_like();
  const TrainingSpec training = torchtitan_training(64);
  const Cluster cluster = testing::h100_nodes(1);
  const Result<Plan> plan = evaluate_plan(model, training, cluster, data_parallel(8, true), without_placement());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const ModelSpec launched = model_for_sequence(model, training.sequence_length);
  const WorkProfile work = profile_work(launched, training, cluster.gpu, plan->config);
  const CommunicationTimes communication = communication_times(cluster, plan->config, work, plan->placement);
  const StageWork& stage = work.stages.front();
  ASSERT_EQ(work.num_microbatches, 8);
  const double exposed = exposed_fsdp_seconds(stage, communication.dp_seconds.front());
  EXPECT_GT(exposed, 0);
  const TimeBreakdown time = critical_path(plan->config, work, communication, training);
  EXPECT_NEAR(time.dp_communication_seconds, work.num_microbatches * exposed, 1e-12);
  EXPECT_NEAR(time.iteration_seconds,
              work.num_microbatches * (stage.forward_compute_seconds + stage.backward_compute_seconds + exposed) +
                  stage.optimizer_seconds,
              1e-9);
  EXPECT_DOUBLE_EQ(simulate_schedule(plan->config, work, communication, training).iteration_seconds,
                   iteration_seconds(plan->config, work, communication, training));
}

// torchtitan's default data parallelism is FSDP over every data rank (data_parallel_shard_degree -1,
// config/configs.py @b5bcd76c l.133-144): the search takes it where Pipette prices it, exports
// dp_shard = dp, and replicates where the user fixes fsdp=off or the plan pipelines.
TEST(FullySharded, TorchtitanPlansShardTheirDataParallelismUnlessFixedOff) {
  const ModelSpec model = llama3_8b_like();
  TrainingSpec training = torchtitan_training(64);
  const Cluster cluster = testing::h100_nodes(1);
  const Result<SearchResult> result = search_plans(model, training, cluster, without_placement());
  ASSERT_TRUE(result.ok()) << result.error().message;
  const Plan& plan = result->plans.front();
  EXPECT_TRUE(plan.config.fully_sharded);
  EXPECT_EQ(plan.config.pp, 1);
  const LaunchDescription launch = describe_launch(model, training, plan);
  EXPECT_TRUE(launch.fully_sharded);
  EXPECT_NE(torchtitan_arguments(launch).find("--parallelism.data_parallel_replicate_degree 1 "
                                               "--parallelism.data_parallel_shard_degree " +
                                               std::to_string(plan.config.dp)),
            std::string::npos)
      << torchtitan_arguments(launch);
  bool exported = false;
  for (const auto& [name, value] : plan_variables(model, training, plan, cluster.node_names, plan_hash(plan)))
    exported |= name == "PIPETTE_FULLY_SHARDED" && value == "1";
  EXPECT_TRUE(exported);
  for (const Plan& other : result->plans) EXPECT_EQ(other.config.fully_sharded, other.config.pp == 1 && other.config.dp_cp() > 1);

  training.fixed.fully_sharded = false;
  const Result<SearchResult> replicated = search_plans(model, training, cluster, without_placement());
  ASSERT_TRUE(replicated.ok()) << replicated.error().message;
  for (const Plan& other : replicated->plans) EXPECT_FALSE(other.config.fully_sharded);
  // 18 bytes a parameter replicated against 16/dp sharded: FSDP leaves room for a larger micro-batch
  // or less recompute, and wins here.
  EXPECT_LT(plan.time.iteration_seconds, replicated->plans.front().time.iteration_seconds);

  // Another framework never gets it unless fixed, and then refuses it in one line.
  EXPECT_FALSE(default_fully_sharded(Framework::megatron_core, model, 1, 8));
  EXPECT_FALSE(default_fully_sharded(Framework::torchtitan, model, 2, 8));
  EXPECT_FALSE(default_fully_sharded(Framework::torchtitan, model, 1, 1));
  TrainingSpec megatron = training;
  megatron.target.framework = Framework::megatron_core;
  megatron.fixed.fully_sharded = true;
  const Result<SearchResult> refused = search_plans(model, megatron, cluster, without_placement());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("as torchtitan's FSDP2 only"), std::string::npos) << refused.error().message;
}

// torchtitan's selective checkpointing is per operator (stack_profile.hpp, SelectiveRecompute;
// distributed/activation_checkpoint.py @b5bcd76c l.243-274): a block keeps its input, the attention
// kernel's output with its fp32 log-sum-exp, and the outputs of its first, third, fifth and seventh
// linear (wq, wv, w1, w2); the rest is rebuilt in its backward.
TEST(TorchtitanSelective, KeepsTheBlockInputTheAttentionOutputAndEveryOtherLinearsOutput) {
  const ModelSpec model = llama3_8b_like();
  const TrainingSpec training = torchtitan_training(16);
  ParallelConfig config = data_parallel(8, true);
  config.micro_batch = 2;
  config.recompute = RecomputeMode::selective;
  const double tokens = 2 * 8192.0, h = 4096, kv = 1024, f = 14336, heads = 32;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, training, config),
                   tokens * (2 * (h + h + kv + h + f + h) + 4 * heads));
  // Tensor parallel with sequence parallelism: column-parallel outputs and the attention output are
  // split, the block input is the rank's sequence shard, w2's output is its h-wide partial sum before
  // the reduce-scatter, whose output (and wo's) is saved as well.
  config.tp = 2;
  config.dp = 4;
  config.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, training, config),
                   tokens * (2 * (h / 2 + h / 2 + kv / 2 + h / 2 + f / 2 + h + 2 * h / 2) + 4 * heads / 2));
  // Megatron's selective recompute drops only the attention scores, which flash attention never
  // keeps: it saves nothing there, and torchtitan's keeps far less than no recompute.
  ParallelConfig kept = config;
  kept.recompute = RecomputeMode::none;
  EXPECT_LT(layer_activation_bytes(model, training, config), 0.5 * layer_activation_bytes(model, training, kept));
  TrainingSpec megatron = training;
  megatron.target.framework = Framework::megatron_core;
  apply_stack_profile(megatron);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, megatron, config), layer_activation_bytes(model, megatron, kept));
}

// Its backward re-runs the block's forward but for the saved operators: more than nothing, less than
// full recompute by at least the attention core and four of the seven GEMMs; with TP and SP it
// re-issues the two all-gathers it does not save (half an all-reduce of the block's activation
// each), not the reduce-scatters it does.
TEST(TorchtitanSelective, RecomputesTheOtherLinearsElementwiseWorkAndUnsavedGathers) {
  const ModelSpec model = llama3_8b_like();
  const TrainingSpec training = torchtitan_training(16);
  const GpuSpec& gpu = *find_gpu("H100-SXM");
  const auto stage_of = [&](int tp, RecomputeMode recompute) {
    ParallelConfig config = data_parallel(8 / tp, true);
    config.tp = tp;
    config.sequence_parallel = tp > 1;
    config.micro_batch = 2;
    config.recompute = recompute;
    return profile_work(model, training, gpu, config).stages.front();
  };
  const StageWork selective = stage_of(1, RecomputeMode::selective), full = stage_of(1, RecomputeMode::full);
  EXPECT_GT(selective.recompute_seconds, 0.0);
  EXPECT_LT(selective.recompute_seconds, 0.5 * full.recompute_seconds);
  EXPECT_DOUBLE_EQ(selective.backward_compute_seconds - selective.recompute_seconds,
                   stage_of(1, RecomputeMode::none).backward_compute_seconds);

  const StageWork none_tp = stage_of(2, RecomputeMode::none), selective_tp = stage_of(2, RecomputeMode::selective);
  EXPECT_EQ(selective_tp.tp_collectives_per_microbatch - none_tp.tp_collectives_per_microbatch, 2 * 32);
  const double activation_message = 2 * 8192.0 * 4096 * 2;
  const double all_reduce_bytes = activation_message * 2.0 * (2 - 1) / 2;
  EXPECT_NEAR(selective_tp.tp_bytes_per_microbatch - none_tp.tp_bytes_per_microbatch, 32 * all_reduce_bytes, 1.0);
}

// The search weighs it: on a GPU with 96 GB (the torchtitan team's Grand Teton H100), Llama 3 8B at
// two sequences of 8192 tokens per GPU does not fit without recompute; per-operator checkpointing
// fits and costs less than full recompute, as torchtitan's own 8-GPU run chose (its Table 1).
TEST(TorchtitanSelective, TheSearchPicksItWhereNothingLessFits) {
  const ModelSpec model = llama3_8b_like();
  TrainingSpec training = torchtitan_training(16);
  training.fixed.tp = 1, training.fixed.pp = 1, training.fixed.dp = 8, training.fixed.micro_batch = 2;
  training.fixed.fully_sharded = true;
  Cluster cluster = testing::h100_nodes(1);
  cluster.gpu.memory_bytes = 95.6 * units::gibibyte;
  const Result<SearchResult> result = search_plans(model, training, cluster, without_placement());
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->plans.front().config.recompute, RecomputeMode::selective);
  EXPECT_NE(torchtitan_arguments(describe_launch(model, training, result->plans.front())).find(" activation-checkpoint:selective"),
            std::string::npos);
  // Experts or multi-latent attention: not priced, refused with what to plan instead.
  ModelSpec latent = model;
  latent.q_lora_rank = 512, latent.kv_lora_rank = 256, latent.qk_head_dim = 128, latent.qk_pos_emb_head_dim = 64;
  latent.v_head_dim = 128;
  ParallelConfig config = result->plans.front().config;
  EXPECT_EQ(launch_problem(training.target, latent, config, 1),
            "torchtitan's per-operator selective checkpointing is priced for dense blocks without multi-latent "
            "attention; plan recompute=none or full");
}

}  // namespace
}  // namespace pipette
