// Issue 17: context parallelism (cp) in the layout, memory, time, search and exports.
#include <gtest/gtest.h>

#include <string>

#include "../../core/src/communication_internal.hpp"
#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/launch.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/placement.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "pipette/core/units.hpp"

namespace pipette {
namespace {

// etc/models/llama3-70b.yaml.
ModelSpec llama3_70b_model() {
  return {.name = "llama3-70b", .num_layers = 80, .hidden_size = 8192, .num_attention_heads = 64, .num_kv_heads = 8,
          .ffn_hidden_size = 28672, .ffn_kind = FfnKind::swiglu, .norm_kind = NormKind::rmsnorm, .vocab_size = 128256,
          .linear_bias = false, .dropout = false};
}

// 8-GPU H100 nodes: NVLink inside, `inter_node_gigabytes_per_second` per node pair (all rails).
Cluster h100_nodes(int nodes, double inter_node_gigabytes_per_second) {
  SyntheticFabric fabric = uniform_fabric(nodes);
  fabric.inter_node_median_bytes_per_second = inter_node_gigabytes_per_second * units::gigabyte;
  Cluster cluster = synthetic_cluster(fabric, 1);
  cluster.gpu = *find_gpu("H100-SXM");
  return cluster;
}

TrainingSpec long_context(std::int64_t batch, int sequence) {
  return {.global_batch_sequences = batch, .sequence_length = sequence, .fixed = {}, .target = {}};
}

ParallelConfig cp_layout(int tp, int cp, int pp, int dp) {
  ParallelConfig config;
  config.tp = tp, config.cp = cp, config.pp = pp, config.dp = dp;
  config.sequence_parallel = tp > 1;
  config.distributed_optimizer = true;
  config.layers_per_stage = balanced_layers_per_stage(80, pp);
  return config;
}

TEST(ContextParallelMemory, EachRankKeepsItsShareOfTheTokens) {
  const ModelSpec model = llama3_70b_model();
  const TrainingSpec full = long_context(64, 131072);
  const TrainingSpec half = long_context(64, 65536);
  // Megatron's get_batch_on_this_cp_rank: a cp = 2 rank holds s/2 tokens, so its layers keep what
  // a layer of an s/2 sequence keeps.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(model, full, cp_layout(8, 2, 4, 1)),
                   layer_activation_bytes(model, half, cp_layout(8, 1, 4, 2)));
  // The logits of the last stage too.
  const RuntimeOverheads overheads;
  const auto with_cp = estimate_memory(model, full, cp_layout(8, 2, 4, 1), overheads);
  const auto without = estimate_memory(model, full, cp_layout(8, 1, 4, 2), overheads);
  EXPECT_DOUBLE_EQ(with_cp.back().logits_and_loss_bytes, 0.5 * without.back().logits_and_loss_bytes);
  EXPECT_LT(with_cp.front().activations_bytes, 0.6 * without.front().activations_bytes);
}

TEST(ContextParallelMemory, RingBuffersOnlyWithContextParallelism) {
  const ModelSpec model = llama3_70b_model();
  const TrainingSpec training = long_context(64, 131072);
  EXPECT_EQ(cp_ring_buffer_bytes(model, training, cp_layout(8, 1, 4, 8)), 0.0);
  const ParallelConfig config = cp_layout(8, 4, 4, 2);
  // The forward keeps every received K/V chunk and step output (TE's p2p_comm_buffers and
  // out_per_step): cp · (K/V + output) of s/cp tokens, plus the fp32 output.
  const double tokens = 131072.0 / 4;
  const double kv_chunk = tokens * 2 * 1024 / 8 * 2;
  const double output = tokens * 8192.0 / 8 * 2;
  EXPECT_DOUBLE_EQ(cp_ring_buffer_bytes(model, training, config), 4 * (kv_chunk + output) + 2 * output);
  ParallelConfig without_ring = config;
  without_ring.cp = 1;
  const TrainingSpec local = long_context(64, 131072 / 4);
  EXPECT_DOUBLE_EQ(layer_working_set_bytes(model, training, config),
                   layer_working_set_bytes(model, local, without_ring) + cp_ring_buffer_bytes(model, training, config));
}

TEST(ContextParallelMemory, DistributedOptimizerShardsOverDpTimesCp) {
  // Megatron builds the distributed optimizer on the data-parallel group with context parallelism.
  const ModelSpec model = llama3_70b_model();
  const TrainingSpec training = long_context(64, 131072);
  const RuntimeOverheads overheads;
  EXPECT_DOUBLE_EQ(estimate_memory(model, training, cp_layout(8, 4, 4, 2), overheads)[1].optimizer_state_bytes,
                   estimate_memory(model, training, cp_layout(8, 1, 4, 8), overheads)[1].optimizer_state_bytes);
}

// The ring's exposed time on the cluster's links, as communication_times prices it for the
// default placement (rank r on GPU r).
CommunicationTimes times_on(const Cluster& cluster, const ModelSpec& model, const TrainingSpec& training,
                            const ParallelConfig& config, WorkProfile& work) {
  work = profile_work(model, training, cluster.gpu, config);
  return communication_times(cluster, config, work, default_placement(config));
}

TEST(ContextParallelTime, RingPassesHideUnderAttentionOnFastLinks) {
  const ModelSpec model = llama3_70b_model();
  const TrainingSpec training = long_context(64, 131072);
  // tp = 4 and cp = 2 inside a node: each K/V pass (4 MiB per micro-batch and layer) takes
  // ~12 µs of NVLink against milliseconds of attention per step.
  const ParallelConfig config = cp_layout(4, 2, 4, 2);
  WorkProfile work;
  const CommunicationTimes times = times_on(h100_nodes(8, 400), model, training, config, work);
  ASSERT_EQ(times.cp_seconds.size(), 4u);
  ASSERT_EQ(times.cp_seconds[0].size(), 2u);  // per DP replica
  EXPECT_EQ(times.cp_seconds[0][0], 0.0);
  EXPECT_GT(work.stages[0].cp_forward_step_seconds, 1e-3);
  // The tables are per lane: dp · cp pipelines.
  EXPECT_EQ(times.tp_seconds[0].size(), 4u);
}

TEST(ContextParallelTime, PassesLongerThanAStepAreExposedByTheExcess) {
  const ModelSpec model = llama3_70b_model();
  const TrainingSpec training = long_context(64, 32768);
  // tp = 8 fills a node, so the cp = 4 ring crosses node pairs; at 0.5 GB/s per pair a pass far
  // outlasts its attention step.
  const ParallelConfig config = cp_layout(8, 4, 1, 2);
  const Cluster cluster = h100_nodes(8, 0.5);
  WorkProfile work;
  const CommunicationTimes times = times_on(cluster, model, training, config, work);
  const StageWork& stage = work.stages[0];
  // Every hop of the 8 tp rings leaves node k for node k + 1: 8 flows share that node pair.
  const double kv = p2p_seconds(cluster, 0, 8, stage.cp_kv_chunk_bytes, 8);
  const double kv_and_grad = p2p_seconds(cluster, 0, 8, 2 * stage.cp_kv_chunk_bytes, 8);
  ASSERT_GT(kv, stage.cp_backward_step_seconds);
  // Forward: cp − 1 K/V passes; backward: K/V, cp − 2 K/V + dK/dV, dK/dV (TE's
  // AttnFuncWithCPAndKVP2P); each costs what it takes beyond one attention step.
  const double expected = stage.cp_forward_rings * 3 * (kv - stage.cp_forward_step_seconds) +
                          stage.cp_backward_rings * (2 * (kv - stage.cp_backward_step_seconds) +
                                                     2 * (kv_and_grad - stage.cp_backward_step_seconds));
  EXPECT_NEAR(times.cp_seconds[0][0], expected, 1e-9 * expected);
  // And the iteration carries it on its critical path.
  const TimeBreakdown time = critical_path(config, work, times, training);
  EXPECT_NEAR(time.cp_communication_seconds, work.num_microbatches * expected, 1e-6 * time.cp_communication_seconds);
}

TEST(ContextParallelTime, GradientsReduceOverDpTimesCp) {
  // tp = 4, cp = 2, dp = 1 on one node: each tp index reduces over ranks {t, t + 4}, the group that
  // tp = 4, dp = 2 reduces over, with the same gradients per rank.
  const ModelSpec model = llama3_70b_model();
  const TrainingSpec training = long_context(8, 8192);
  const Cluster cluster = h100_nodes(10, 400);
  WorkProfile work_cp;
  WorkProfile work_dp;
  const CommunicationTimes with_cp = times_on(cluster, model, training, cp_layout(4, 2, 10, 1), work_cp);
  const CommunicationTimes with_dp = times_on(cluster, model, training, cp_layout(4, 1, 10, 2), work_dp);
  ASSERT_GT(with_dp.dp_seconds[0], 0.0);
  EXPECT_DOUBLE_EQ(with_cp.dp_seconds[0], with_dp.dp_seconds[0]);
}

TEST(ContextParallelPlacement, RingsMoveOffADegradedNodePair) {
  // tp = 8 fills a node, so each stage's cp = 2 ring joins two nodes; in Slurm's order stage 0's
  // ring crosses node0-node1, which is degraded to 1 GB/s, where its passes outlast the attention.
  // The placement search pairs the nodes otherwise.
  const ModelSpec model = llama3_70b_model();
  const TrainingSpec training = long_context(16, 32768);
  Cluster cluster = h100_nodes(4, 400);
  for (const auto& [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) cluster.inter_node.at(a, b).bandwidth_bytes_per_second = 1 * units::gigabyte;
  const ParallelConfig config = cp_layout(8, 2, 2, 1);
  const WorkProfile work = profile_work(model, training, cluster.gpu, config);
  const CommunicationTimes slurm_order = communication_times(cluster, config, work, default_placement(config));
  ASSERT_GT(slurm_order.cp_seconds[0][0], 0.0);
  const PlacementResult placed = optimize_placement(cluster, config, work, training, PlacementEffort{});
  const CommunicationTimes searched = communication_times(cluster, config, work, placed.placement);
  for (const auto& stage : searched.cp_seconds) EXPECT_EQ(stage[0], 0.0);
  // What the search's incremental tables (cp ring entries included) ended at is the full evaluation.
  EXPECT_DOUBLE_EQ(placed.iteration_seconds, critical_path(config, work, searched, training).iteration_seconds);
  EXPECT_LT(critical_path(config, work, searched, training).iteration_seconds,
            critical_path(config, work, slurm_order, training).iteration_seconds);
}

TEST(ContextParallelSearch, LongContextLlama70bPlansContextParallelism) {
  // The done-when case: llama3-70b, 32 nodes, 256 sequences of 131072 tokens.
  const ModelSpec model = llama3_70b_model();
  TrainingSpec training = long_context(256, 131072);
  const Cluster cluster = h100_nodes(32, 400);
  SearchOptions options;
  options.optimize_placement = false;
  options.top_k = 1;
  const Result<SearchResult> chosen = search_plans(model, training, cluster, options);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  const Plan& plan = chosen->plans.front();
  EXPECT_GT(plan.config.cp, 1);
  EXPECT_NE(plan.config.recompute, RecomputeMode::full);
  EXPECT_EQ(131072 % (2 * plan.config.cp), 0);
  // Without context parallelism the best plan has to recompute everything and is slower.
  training.fixed.cp = 1;
  const Result<SearchResult> without = search_plans(model, training, cluster, options);
  ASSERT_TRUE(without.ok()) << without.error().message;
  EXPECT_EQ(without->plans.front().config.recompute, RecomputeMode::full);
  EXPECT_GT(without->plans.front().time.iteration_seconds, 1.1 * plan.time.iteration_seconds);
}

TEST(ContextParallelSearch, ShortSequencesKeepTheirDensePlans) {
  // At 4096 tokens no cp > 1 keeps 4096 tokens on a rank: the search is the dense one.
  const ModelSpec model = llama3_70b_model();
  SearchOptions options;
  options.optimize_placement = false;
  const Result<SearchResult> result = search_plans(model, long_context(512, 4096), h100_nodes(8, 400), options);
  ASSERT_TRUE(result.ok());
  for (const Plan& plan : result->plans) EXPECT_EQ(plan.config.cp, 1);
}

TEST(ContextParallelSearch, FixedCpMustCutTheSequenceIntoTwoCpChunks) {
  TrainingSpec training = long_context(64, 8192);
  training.fixed.cp = 3;
  EXPECT_NE(validate(training).find("2*cp=6"), std::string::npos) << validate(training);
  training.fixed.cp = 4;
  EXPECT_EQ(validate(training), "");
  training.attention = AttentionKernel::unfused;
  EXPECT_NE(validate(training).find("flash attention"), std::string::npos);
}

TEST(ContextParallelExports, EveryFrameworkGetsItsSize) {
  const ModelSpec model = llama3_70b_model();
  TrainingSpec training = long_context(256, 131072);
  Plan plan;
  plan.config = cp_layout(8, 8, 4, 1);
  plan.config.virtual_stages = 5;
  plan.num_microbatches = 256;
  plan.placement = default_placement(plan.config);
  const LaunchDescription launch = describe_launch(model, training, plan);
  EXPECT_EQ(launch.cp, 8);
  EXPECT_NE(megatron_arguments(launch).find(" --context-parallel-size 8"), std::string::npos);
  EXPECT_NE(nemo_overrides(launch).find("model.context_parallel_size=8"), std::string::npos);
  const EnvironmentVariables variables = plan_variables(model, training, plan, std::vector<std::string>(32, "n"), "h");
  bool exported = false;
  for (const auto& [name, value] : variables) exported |= name == "PIPETTE_CP" && value == "8";
  EXPECT_TRUE(exported);
  // The global batch counts replicas only: cp ranks share each sequence.
  EXPECT_EQ(launch.global_batch, 256);
  // torchtitan shards parameters with FSDP whenever cp > 1: not a plan the search prices.
  training.target.framework = Framework::torchtitan;
  EXPECT_NE(launch_problem(training.target, model, plan.config, 256).find("FSDP"), std::string::npos);
  plan.config.cp = 1;
  EXPECT_NE(torchtitan_arguments(describe_launch(model, training, plan)).find("--parallelism.context_parallel_degree 1"),
            std::string::npos);
}

}  // namespace
}  // namespace pipette
