#include "pipette/core/search.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/launch.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/placement.hpp"
#include "pipette/core/units.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

// DGX-H100-like nodes: NVLink ~360 GB/s per GPU pair direction, 8×400 Gb/s NICs per node.
Cluster uniform_cluster(int nodes, int gpus_per_node, const char* gpu = "H100-SXM") {
  Cluster cluster;
  for (int node = 0; node < nodes; ++node) cluster.node_names.push_back('n' + std::to_string(node));
  cluster.gpus_per_node = gpus_per_node;
  cluster.nics_per_node = gpus_per_node;
  cluster.gpu = *find_gpu(gpu);
  const Link nvlink{360 * units::gigabyte, 3 * units::microsecond, true};
  const Link fabric{gpus_per_node * 400 * units::gigabit, 8 * units::microsecond, true};
  cluster.intra_node.assign(static_cast<size_t>(nodes), LinkMatrix(gpus_per_node, nvlink));
  cluster.inter_node = LinkMatrix(nodes, fabric);
  return cluster;
}

ModelSpec llama_like(int layers, int hidden, int heads, int kv_heads, int ffn) {
  return testing::llama_like(layers, hidden, heads, kv_heads, ffn, 128256);
}

ModelSpec llama3_70b() { return llama_like(80, 8192, 64, 8, 28672); }

TrainingSpec training_of(std::int64_t batch, int sequence) {
  TrainingSpec training;
  training.global_batch_sequences = batch;
  training.sequence_length = sequence;
  return training;
}

using testing::layout_of;

SearchOptions quick_options() {
  SearchOptions options;
  options.optimize_placement = false;
  options.memory_safety_margin_bytes = 2 * units::gibibyte;
  return options;
}

TEST(Search, Llama70bOnEightNodesGivesSortedPlansThatFit) {
  const Cluster cluster = uniform_cluster(8, 8);
  const SearchOptions options = quick_options();
  const Result<SearchResult> result = search_plans(llama3_70b(), training_of(256, 4096), cluster, options);
  ASSERT_TRUE(result.ok()) << result.error().message;
  ASSERT_EQ(result->plans.size(), 5u);
  const double usable = cluster.gpu.memory_bytes - options.memory_safety_margin_bytes;
  for (size_t i = 0; i < result->plans.size(); ++i) {
    const Plan& plan = result->plans[i];
    EXPECT_LE(plan.peak_memory_bytes, usable);
    EXPECT_EQ(plan.config.world_size(), 64);
    EXPECT_EQ(8 % plan.config.tp, 0);
    EXPECT_EQ(std::accumulate(plan.config.layers_per_stage.begin(), plan.config.layers_per_stage.end(), 0), 80);
    EXPECT_EQ(plan.num_microbatches * plan.config.dp * plan.config.micro_batch, 256);
    EXPECT_NEAR(plan.tokens_per_second, 256.0 * 4096 / plan.time.iteration_seconds, 1e-6 * plan.tokens_per_second);
    EXPECT_GT(plan.model_flops_utilization, 0.2);
    EXPECT_LT(plan.model_flops_utilization, 0.8);
    EXPECT_EQ(plan.placement.gpu_of_rank.size(), 64u);
    if (i > 0) {
      EXPECT_GE(plan.time.iteration_seconds, result->plans[i - 1].time.iteration_seconds);
    }
  }
  // 70B does not fit without model parallelism: the tp=1 pp=1 family is rejected for memory.
  bool rejected_for_memory = false;
  for (const Rejection& rejection : result->rejections) {
    if (rejection.family == "tp=1 pp=1") {
      rejected_for_memory = rejection.reason.rfind("stage 0 needs ", 0) == 0 && rejection.reason.find(" GiB > ") != std::string::npos;
    }
  }
  EXPECT_TRUE(rejected_for_memory);
}

// Every configuration the search could choose, evaluated one by one.
std::vector<Plan> brute_force(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                              const SearchOptions& options) {
  std::vector<Plan> plans;
  const int gpus = cluster.num_gpus();
  for (int tp = 1; tp <= cluster.gpus_per_node; ++tp) {
    for (int pp = 1; pp <= gpus / tp; ++pp) {
      if (gpus % (tp * pp) != 0) continue;
      const int dp = gpus / (tp * pp);
      for (int mbs = 1; mbs <= training.global_batch_sequences; ++mbs) {
        for (int v = 1; v <= 4; ++v) {
          for (const RecomputeMode mode : {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full}) {
            for (const bool sp : {false, true}) {
              for (const bool distopt : {false, true}) {
                ParallelConfig config;
                config.tp = tp;
                config.pp = pp;
                config.dp = dp;
                config.micro_batch = mbs;
                config.virtual_stages = v;
                config.recompute = mode;
                config.sequence_parallel = sp;
                config.distributed_optimizer = distopt;
                const Result<Plan> plan = evaluate_plan(model, training, cluster, config, options);
                if (plan.ok()) plans.push_back(*plan);
              }
            }
          }
        }
      }
    }
  }
  return plans;
}

TEST(Search, BestPlanIsTheBestOfAllConfigurations) {
  // Small enough to enumerate: 2 nodes × 4 GPUs, a 3B-class model that needs some parallelism.
  const ModelSpec model = llama_like(24, 3072, 24, 8, 8192);
  const Cluster cluster = uniform_cluster(2, 4, "A100-40GB");
  const TrainingSpec training = training_of(32, 4096);
  const SearchOptions options = quick_options();
  const Result<SearchResult> result = search_plans(model, training, cluster, options);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const std::vector<Plan> all = brute_force(model, training, cluster, options);
  ASSERT_GT(all.size(), 10u);
  double best = all.front().time.iteration_seconds;
  for (const Plan& plan : all) best = std::min(best, plan.time.iteration_seconds);
  EXPECT_NEAR(result->plans.front().time.iteration_seconds, best, 1e-12 * best);
  // ... found without evaluating the time of most candidates.
  EXPECT_LT(result->candidates_evaluated, static_cast<int>(all.size()) / 4);
}

// scripts/slurm/write-links.sh's four nodes: pair 0-1 degraded to 3 GB/s, 0-2 and 1-3 fast, the
// rest 20-22 GB/s. Slurm's order puts llama2-7b's best layout (tp1 pp2 dp16) with DP rings over the
// degraded pair, twice as slow as once placed, and slower there than full-recompute layouts that
// placement gains less on; the search must still place it, as it does when it places everything.
TEST(Search, PlacesTheLayoutPlacementCanMakeFastestNotTheFastestInSlurmsOrder) {
  Cluster cluster = uniform_cluster(4, 8);
  const auto link = [&](int a, int b, double gb_per_s, double latency_us) {
    cluster.inter_node.at(a, b) = cluster.inter_node.at(b, a) =
        Link{gb_per_s * units::gigabyte, latency_us * units::microsecond, true};
  };
  link(0, 1, 3, 40);
  link(0, 2, 48, 8);
  link(0, 3, 20, 12);
  link(1, 2, 21, 12);
  link(1, 3, 47, 8);
  link(2, 3, 22, 12);
  ModelSpec model = llama_like(32, 4096, 32, 32, 11008);
  model.vocab_size = 32000;
  const TrainingSpec training = training_of(256, 4096);
  SearchOptions options;
  options.top_k = 3;
  const Result<SearchResult> searched = search_plans(model, training, cluster, options);
  ASSERT_TRUE(searched.ok()) << searched.error().message;
  options.top_k = 64;
  options.placement_candidates = 64;
  const Result<SearchResult> everything_placed = search_plans(model, training, cluster, options);
  ASSERT_TRUE(everything_placed.ok()) << everything_placed.error().message;
  const Plan& best = everything_placed->plans.front();
  EXPECT_LT(best.time.iteration_seconds, 0.8 * best.default_placement_iteration_seconds);  // placement pays here
  EXPECT_EQ(plan_hash(searched->plans.front()), plan_hash(best));
  EXPECT_DOUBLE_EQ(searched->plans.front().time.iteration_seconds, best.time.iteration_seconds);
}

TEST(Search, FixedKnobsAreKept) {
  TrainingSpec training = training_of(256, 4096);
  training.fixed.tp = 4;
  training.fixed.micro_batch = 2;
  training.fixed.recompute = RecomputeMode::full;
  const Result<SearchResult> result = search_plans(llama3_70b(), training, uniform_cluster(8, 8), quick_options());
  ASSERT_TRUE(result.ok()) << result.error().message;
  for (const Plan& plan : result->plans) {
    EXPECT_EQ(plan.config.tp, 4);
    EXPECT_EQ(plan.config.micro_batch, 2);
    EXPECT_EQ(plan.config.recompute, RecomputeMode::full);
  }
}

// A restarted job fixes its first start's split (spank/src/layout_record.hpp): kept exactly, or
// an error when it cannot describe this model on the fixed pp, never another split.
TEST(Search, AFixedSplitIsKeptOrRefused) {
  TrainingSpec training = training_of(256, 4096);
  training.fixed.pp = 4;
  training.fixed.layers_per_stage = {21, 20, 20, 19};
  const Result<SearchResult> result = search_plans(llama3_70b(), training, uniform_cluster(8, 8), quick_options());
  ASSERT_TRUE(result.ok()) << result.error().message;
  for (const Plan& plan : result->plans) EXPECT_EQ(plan.config.layers_per_stage, training.fixed.layers_per_stage);
  for (const std::vector<int>& bad : {std::vector<int>{21, 20, 20, 20}, std::vector<int>{40, 40}, std::vector<int>{81, 0, -1, 0}}) {
    training.fixed.layers_per_stage = bad;
    const Result<SearchResult> refused = search_plans(llama3_70b(), training, uniform_cluster(8, 8), quick_options());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("does not fit 80 layers on pp=4"), std::string::npos) << refused.error().message;
  }
  // Stages without layers are a split Megatron builds only from its layout flag.
  training.fixed.layers_per_stage = {80, 0, 0, 0};
  const Result<SearchResult> unbuildable = search_plans(llama3_70b(), training, uniform_cluster(8, 8), quick_options());
  ASSERT_FALSE(unbuildable.ok());
  EXPECT_NE(unbuildable.error().message.find("layer split 80,0,0,0 needs --pipeline-model-parallel-layout"), std::string::npos)
      << unbuildable.error().message;
}

TEST(Search, TensorParallelMustDivideHeads) {
  ModelSpec model = llama_like(24, 1536, 12, 12, 4096);
  const Result<SearchResult> result = search_plans(model, training_of(64, 2048), uniform_cluster(1, 8), quick_options());
  ASSERT_TRUE(result.ok()) << result.error().message;
  bool found = false;
  for (const Rejection& rejection : result->rejections) {
    if (rejection.family == "tp=8") found = rejection.reason == "does not divide 12 attention heads and 12 KV heads";
  }
  EXPECT_TRUE(found);
  for (const Plan& plan : result->plans) EXPECT_NE(plan.config.tp, 8);
}

// Megatron-style TP splits the MLP's hidden layer into equal shards and asserts it (Transformer
// Engine's linear.py @d0067d0d l.1623-1625, Megatron-DeepSpeed's divide(), nanotron's nn.py
// @2411b022 l.63, 128): 5500 splits over 4 ranks, not 8. torchtitan's DTensors shard unevenly.
TEST(Search, MegatronStyleTensorParallelMustDivideTheMlp) {
  const ModelSpec model = llama_like(24, 2048, 16, 8, 5500);
  const Result<SearchResult> result = search_plans(model, training_of(64, 2048), uniform_cluster(1, 8), quick_options());
  ASSERT_TRUE(result.ok()) << result.error().message;
  bool found = false;
  for (const Rejection& rejection : result->rejections)
    found |= rejection.family == "tp=8" && rejection.reason == "tp=8 does not divide the MLP's 5500-wide hidden layer";
  EXPECT_TRUE(found);
  for (const Plan& plan : result->plans) EXPECT_LE(plan.config.tp, 4);
  TrainingSpec fixed = training_of(64, 2048);
  fixed.fixed.tp = 8;
  const Result<SearchResult> refused = search_plans(model, fixed, uniform_cluster(1, 8), quick_options());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("tp=8 does not divide the MLP's 5500-wide hidden layer"), std::string::npos)
      << refused.error().message;
  for (const Framework framework : {Framework::megatron_deepspeed, Framework::nanotron, Framework::nemo})
    EXPECT_EQ(mlp_split_problem(model, framework, 8), "tp=8 does not divide the MLP's 5500-wide hidden layer");
  EXPECT_EQ(mlp_split_problem(model, Framework::torchtitan, 8), "");
  EXPECT_EQ(mlp_split_problem(model, Framework::megatron_core, 4), "");
}

TEST(Search, UnevenPipelineGivesTheEndsFewerLayers) {
  TrainingSpec training = training_of(64, 2048);
  training.fixed.pp = 4;
  training.fixed.tp = 1;
  const ModelSpec model = llama_like(30, 2048, 16, 8, 5632);
  const Result<SearchResult> result = search_plans(model, training, uniform_cluster(1, 8), quick_options());
  ASSERT_TRUE(result.ok()) << result.error().message;
  // A 128k vocabulary on a 2048-wide model: the LM head weighs several layers, so the search
  // moves layers off the last stage; the first stage holds at most an interior stage's share.
  const std::vector<int>& layers = result->plans.front().config.layers_per_stage;
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(std::accumulate(layers.begin(), layers.end(), 0), 30);
  EXPECT_LT(layers[3], layers[1]);
  EXPECT_LE(layers[0], layers[1]);
  EXPECT_EQ(layers[1], layers[2]);
  // With the head ignored, 30 layers on 4 stages give the ends the fewer layers.
  EXPECT_EQ(balanced_layers_per_stage(30, 4), (std::vector<int>{7, 8, 8, 7}));
}

// Issue 14: more pipeline stages than layers ran for real; such a split is priced when asked for.
// Megatron builds it from --pipeline-model-parallel-layout, whose stages may hold no decoder layer
// (pipeline_parallel_layer_layout.py @d98e8a64 parse_str_to_list l.311-320 keeps an empty stage,
// validate_layer_layout l.86-110 counts E, L and t over the whole layout, never per stage), but not
// from --decoder-first/last-pipeline-num-layers, which must be larger than 0
// (transformer_config.py l.2304, 2323).
TEST(EvaluatePlan, MoreStagesThanLayersArePricedWhereTheLayoutExpressesThem) {
  const ModelSpec model = llama_like(4, 2048, 16, 8, 5632);
  TrainingSpec training = training_of(64, 4096);
  training.target.pipeline_layout = true;
  const Cluster cluster = uniform_cluster(1, 8);
  const Result<Plan> plan = evaluate_plan(model, training, cluster, layout_of(1, 8, 1), quick_options());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->config.layers_per_stage, (std::vector<int>{0, 0, 0, 1, 1, 1, 1, 0}));
  EXPECT_TRUE(std::isfinite(plan->time.iteration_seconds));
  EXPECT_GT(plan->time.iteration_seconds, 0);
  const auto [variable, arguments] = framework_arguments(Framework::megatron_core, describe_launch(model, training, *plan));
  EXPECT_NE(arguments.find("--pipeline-model-parallel-layout E|||t|t|t|t|L"), std::string::npos) << arguments;
  EXPECT_EQ(arguments.find("--decoder-first-pipeline-num-layers"), std::string::npos) << arguments;

  // Six stages already give the embedding and the head a stage each; the two more stages without
  // anything only relay, and lengthen the pipeline's fill and drain.
  const Result<Plan> six = evaluate_plan(model, training, uniform_cluster(1, 6), layout_of(1, 6, 1), quick_options());
  ASSERT_TRUE(six.ok()) << six.error().message;
  EXPECT_EQ(six->config.layers_per_stage, (std::vector<int>{0, 1, 1, 1, 1, 0}));
  EXPECT_GT(plan->time.iteration_seconds, six->time.iteration_seconds);

  training.target.pipeline_layout = false;
  const Result<Plan> refused = evaluate_plan(model, training, cluster, layout_of(1, 8, 1), quick_options());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("needs --pipeline-model-parallel-layout"), std::string::npos)
      << refused.error().message;
  training.target.framework = Framework::torchtitan;
  const Result<Plan> titan = evaluate_plan(model, training, cluster, layout_of(1, 8, 1), quick_options());
  ASSERT_FALSE(titan.ok());
  EXPECT_NE(titan.error().message.find("has a stage without layers"), std::string::npos) << titan.error().message;
}

TEST(Search, MoreStagesThanLayersOnlyWhenPpIsFixed) {
  const ModelSpec model = llama_like(4, 2048, 16, 8, 5632);
  TrainingSpec training = training_of(64, 4096);
  training.target.pipeline_layout = true;
  const Result<SearchResult> free = search_plans(model, training, uniform_cluster(1, 8), quick_options());
  ASSERT_TRUE(free.ok()) << free.error().message;
  for (const Plan& plan : free->plans) EXPECT_LE(plan.config.pp, 4);
  training.fixed.pp = 8;
  const Result<SearchResult> fixed = search_plans(model, training, uniform_cluster(1, 8), quick_options());
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  ASSERT_FALSE(fixed->plans.empty());
  EXPECT_EQ(fixed->plans.front().config.pp, 8);
  EXPECT_EQ(fixed->plans.front().config.layers_per_stage, (std::vector<int>{0, 0, 0, 1, 1, 1, 1, 0}));
}

// Megatron-LM drops --sequence-parallel at tp 1 (arguments.py @d98e8a64 l.1430-1439) and nanotron's
// REDUCE_SCATTER mode gathers nothing over one rank: a layout fixed with sp on at tp 1 runs, so it
// is priced as running without, not refused.
TEST(Search, SequenceParallelAtTpOneIsPricedAsOff) {
  const ModelSpec model = llama_like(8, 2048, 16, 8, 5632);
  TrainingSpec training = training_of(64, 4096);
  const Cluster cluster = uniform_cluster(1, 8);
  ParallelConfig config = layout_of(1, 1, 8);
  config.micro_batch = 2;
  const Result<Plan> without = evaluate_plan(model, training, cluster, config, quick_options());
  ASSERT_TRUE(without.ok()) << without.error().message;
  config.sequence_parallel = true;
  training.fixed.tp = 1;
  training.fixed.sequence_parallel = true;
  EXPECT_EQ(validate(training), "");
  const Result<Plan> with = evaluate_plan(model, training, cluster, config, quick_options());
  ASSERT_TRUE(with.ok()) << with.error().message;
  EXPECT_FALSE(with->config.sequence_parallel);
  EXPECT_EQ(with->time.iteration_seconds, without->time.iteration_seconds);
  EXPECT_EQ(with->peak_memory_bytes, without->peak_memory_bytes);
}

TEST(Search, NothingFitsNamesMoreNodes) {
  const Result<SearchResult> result =
      search_plans(llama_like(126, 16384, 128, 8, 53248), training_of(64, 8192), uniform_cluster(2, 8), quick_options());
  ASSERT_FALSE(result.ok());
  const std::string& message = result.error().message;
  EXPECT_EQ(message.rfind("no parallel plan fits H100-SXM memory", 0), 0u) << message;
  EXPECT_NE(message.find("the leanest, "), std::string::npos) << message;
  EXPECT_NE(message.find("use at least "), std::string::npos) << message;
}

TEST(Search, NothingFitsNamesTheFixedKnobToRelease) {
  TrainingSpec training = training_of(256, 4096);
  training.fixed.micro_batch = 64;
  training.fixed.recompute = RecomputeMode::none;
  const Result<SearchResult> result = search_plans(llama3_70b(), training, uniform_cluster(8, 8), quick_options());
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("; stop fixing mbs ("), std::string::npos) << result.error().message;
}

// Fixed knobs that no layout of the job's GPUs and batch can satisfy price nothing, so the error
// says that, not that nothing fits memory, and still names the knob to release.
TEST(Search, FixedKnobsWithoutAnyLayoutSayNotMemory) {
  TrainingSpec gpu_count = training_of(256, 4096);
  gpu_count.fixed.tp = 4;
  gpu_count.fixed.pp = 8;
  gpu_count.fixed.dp = 4;  // 128 GPUs' worth on 64
  TrainingSpec batch = training_of(256, 4096);
  batch.fixed.tp = 4;
  batch.fixed.pp = 8;
  batch.fixed.dp = 2;
  batch.fixed.micro_batch = 3;  // 3 does not divide 128 sequences per replica
  for (const TrainingSpec& training : {gpu_count, batch}) {
    const Result<SearchResult> result = search_plans(llama3_70b(), training, uniform_cluster(8, 8), quick_options());
    ASSERT_FALSE(result.ok());
    const std::string& message = result.error().message;
    EXPECT_EQ(message.rfind("the fixed knobs leave no layout for 64 GPUs and a global batch of 256 sequences", 0), 0u)
        << message;
    EXPECT_EQ(message.find("memory"), std::string::npos) << message;
    EXPECT_NE(message.find("; stop fixing "), std::string::npos) << message;
  }
}

TEST(Search, InputErrorsNameTheField) {
  TrainingSpec training = training_of(0, 4096);
  EXPECT_NE(search_plans(llama3_70b(), training, uniform_cluster(8, 8), quick_options()).error().message.find(
                "global_batch_sequences"),
            std::string::npos);
  TrainingSpec fp8 = training_of(256, 4096);
  fp8.precision = Precision::fp8;
  EXPECT_EQ(search_plans(llama3_70b(), fp8, uniform_cluster(8, 8, "A100-80GB"), quick_options()).error().message,
            "GPU A100-80GB has no fp8 tensor cores; choose another precision");
}

TEST(EvaluatePlan, MfuStaysUnderOneAtLongSequences) {
  // Issue 14: at 128k tokens the full s² attention was counted in MFU but priced at half (causal
  // flash attention), and MFU passed 100%. Count and price both the unmasked half.
  ModelSpec llama3_8b = llama_like(32, 4096, 32, 8, 14336);
  const Cluster cluster = uniform_cluster(4, 8);
  TrainingSpec training = training_of(8, 131072);
  ParallelConfig config = layout_of(8, 1, 4);
  config.sequence_parallel = true;
  config.recompute = RecomputeMode::full;
  config.distributed_optimizer = true;
  const Result<Plan> plan = evaluate_plan(llama3_8b, training, cluster, config, quick_options());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_GT(plan->model_flops_utilization, 0.2);
  EXPECT_LT(plan->model_flops_utilization, 0.75);  // flash attention's ceiling on H100
}

TEST(EvaluatePlan, TensorParallelismAcrossNodesIsPricedOverTheNetwork) {
  // Issue 14: tp 16 and 32 ran (and were the measured best for an 80B model on 8 and 64 nodes); a
  // fixed tp spanning whole nodes is evaluated, its collectives priced over the node pair's rails.
  const ModelSpec model = llama_like(48, 8192, 64, 64, 28672);
  const Cluster cluster = uniform_cluster(4, 8);
  const TrainingSpec training = training_of(64, 4096);
  ParallelConfig across = layout_of(16, 2, 1);
  across.sequence_parallel = true;
  const Result<Plan> wide = evaluate_plan(model, training, cluster, across, quick_options());
  ASSERT_TRUE(wide.ok()) << wide.error().message;
  ParallelConfig inside = across;
  inside.tp = 8;
  inside.pp = 4;
  const Result<Plan> narrow = evaluate_plan(model, training, cluster, inside, quick_options());
  ASSERT_TRUE(narrow.ok()) << narrow.error().message;
  // NCCL's ring over two nodes is flat and pipelined: each GPU sends 1/8 of its ring traffic
  // through its own NIC and 7/8 over NVLink at the same time. With 8 NDR rails (50 GB/s a GPU)
  // beside 360 GB/s of NVLink its bus bandwidth is min(360 · 8/7, 8 · 50) = 400 GB/s, no worse
  // per byte than the ring inside a node (NVIDIA/nccl-tests #309 measured 470 GB/s on two HGX
  // H100 nodes beside 480 on one, ground_truth_data/nccl_bandwidth_measurements.csv). The wide
  // layout's stages hold twice the layers, so twice the TP bytes, and pay the inter-node latency.
  EXPECT_GT(wide->time.tp_communication_seconds, 1.9 * narrow->time.tp_communication_seconds);
  EXPECT_LT(wide->time.tp_communication_seconds, 2.2 * narrow->time.tp_communication_seconds);
  // Two 400 Gb/s rails a node (100 GB/s a node pair) instead: the NICs pace the ring, at a
  // quarter of NVLink's rate.
  Cluster two_rails = cluster;
  two_rails.nics_per_node = 2;
  two_rails.inter_node = LinkMatrix(4, Link{2 * 400 * units::gigabit, 8 * units::microsecond, true});
  const Result<Plan> thin = evaluate_plan(model, training, two_rails, across, quick_options());
  ASSERT_TRUE(thin.ok()) << thin.error().message;
  EXPECT_GT(thin->time.tp_communication_seconds, 3 * wide->time.tp_communication_seconds);
  ParallelConfig odd = across;
  odd.tp = 12;
  odd.pp = 1;
  EXPECT_FALSE(evaluate_plan(model, training, uniform_cluster(3, 8), odd, quick_options()).ok());
}

TEST(EvaluatePlan, RejectsImpossibleConfigurations) {
  const Cluster cluster = uniform_cluster(8, 8);
  const TrainingSpec training = training_of(256, 4096);
  ParallelConfig config;
  config.tp = 8;
  config.pp = 4;
  config.dp = 4;
  EXPECT_EQ(evaluate_plan(llama3_70b(), training, cluster, config, quick_options()).error().message,
            "tp=8 pp=4 dp=4 mbs=1 recompute=none: uses 128 GPUs, the job has 64");
  config.dp = 2;
  config.virtual_stages = 3;
  EXPECT_EQ(evaluate_plan(llama3_70b(), training, cluster, config, quick_options()).error().message,
            "tp=8 pp=4 dp=2 mbs=1 vpp=3 recompute=none: every stage's layers must split into vpp equal chunks");
  config.virtual_stages = 1;
  config.tp = 1;
  config.dp = 16;
  const Result<Plan> too_big = evaluate_plan(llama3_70b(), training, cluster, config, quick_options());
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error().message.find(": stage 0 needs "), std::string::npos) << too_big.error().message;
}

TEST(EvaluatePlan, MatchesTheSearchAndHashesStably) {
  const Cluster cluster = uniform_cluster(8, 8);
  const TrainingSpec training = training_of(256, 4096);
  const Result<SearchResult> result = search_plans(llama3_70b(), training, cluster, quick_options());
  ASSERT_TRUE(result.ok());
  const Plan& best = result->plans.front();
  const Result<Plan> again = evaluate_plan(llama3_70b(), training, cluster, best.config, quick_options());
  ASSERT_TRUE(again.ok());
  EXPECT_DOUBLE_EQ(again->time.iteration_seconds, best.time.iteration_seconds);
  EXPECT_EQ(plan_hash(*again), plan_hash(best));
}

TEST(Search, PlacementIsOptimisedAndTheCandidatesReRanked) {
  // Four nodes whose links are uneven: node 1 reaches the others slowly, except node 3.
  Cluster cluster = uniform_cluster(4, 8);
  for (int other : {0, 2}) {
    cluster.inter_node.at(1, other).bandwidth_bytes_per_second = 5 * units::gigabyte;
    cluster.inter_node.at(other, 1).bandwidth_bytes_per_second = 5 * units::gigabyte;
  }
  TrainingSpec training = training_of(64, 4096);
  training.fixed.tp = 8;  // one stage or replica per node: placement decides which links carry what
  SearchOptions options = quick_options();
  options.optimize_placement = true;
  options.placement.max_moves = 20000;
  const Result<SearchResult> result = search_plans(llama_like(32, 4096, 32, 8, 14336), training, cluster, options);
  ASSERT_TRUE(result.ok()) << result.error().message;
  bool improved = false;
  for (size_t i = 0; i < result->plans.size(); ++i) {
    const Plan& plan = result->plans[i];
    EXPECT_LE(plan.time.iteration_seconds, plan.default_placement_iteration_seconds * (1 + 1e-12));
    improved = improved || plan.time.iteration_seconds < 0.99 * plan.default_placement_iteration_seconds;
    std::vector<int> gpus = plan.placement.gpu_of_rank;
    std::sort(gpus.begin(), gpus.end());
    for (int gpu = 0; gpu < 32; ++gpu) EXPECT_EQ(gpus[static_cast<size_t>(gpu)], gpu);
    EXPECT_EQ(plan.node_order.size(), 4u);
    if (i > 0) {
      EXPECT_GE(plan.time.iteration_seconds, result->plans[i - 1].time.iteration_seconds);
    }
  }
  EXPECT_TRUE(improved);
}

TEST(Search, RunnerUpsKeepSlurmsOrderWhenPlacementRecoversLittleOfItsBound) {
  // Two leaf switches of 8 nodes: fast inside a group, slow across, and a small spread within each
  // class. Slurm's order already keeps groups together, so placement gains a fraction of a percent
  // and stays far from the every-link-at-its-best bound; runner-ups whose bound alone would still
  // beat the winner are not worth a placement search each.
  Cluster cluster = uniform_cluster(16, 8);
  for (int a = 0; a < 16; ++a) {
    for (int b = 0; b < 16; ++b) {
      if (a == b) continue;
      const double class_bandwidth = (a / 8 == b / 8 ? 48 : 22) * units::gigabyte;
      cluster.inter_node.at(a, b).bandwidth_bytes_per_second = class_bandwidth - 1e7 * ((a * 7 + b * 13) % 50);
    }
  }
  const TrainingSpec training = training_of(512, 4096);
  SearchOptions options = quick_options();
  options.optimize_placement = true;
  const Result<SearchResult> result = search_plans(llama3_70b(), training, cluster, options);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const Cluster best_links = with_best_links(cluster);
  double best_placed = std::numeric_limits<double>::infinity();
  for (const Plan& plan : result->plans) {
    if (plan.placement.gpu_of_rank != default_placement(plan.config).gpu_of_rank) {
      best_placed = std::min(best_placed, plan.time.iteration_seconds);
    }
  }
  ASSERT_LT(best_placed, std::numeric_limits<double>::infinity()) << "the winner was placed";
  int kept_in_slurms_order = 0;
  for (const Plan& plan : result->plans) {
    if (plan.placement.gpu_of_rank != default_placement(plan.config).gpu_of_rank) continue;
    const WorkProfile work = profile_work(llama3_70b(), training, cluster.gpu, plan.config);
    const double bound = iteration_seconds(
        plan.config, work, communication_times(best_links, plan.config, work, default_placement(plan.config)), training);
    if (bound < best_placed) ++kept_in_slurms_order;
  }
  EXPECT_GE(kept_in_slurms_order, 1);
}

}  // namespace
}  // namespace pipette
