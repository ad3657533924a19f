#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pipette/core/performance.hpp"
#include "pipette/core/placement.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "pipette/core/units.hpp"
#include "test_models.hpp"
// White-box: the incremental evaluator must agree with the full evaluation after any moves.
#include "../../core/src/placement_evaluator.hpp"

namespace pipette {
namespace {

using units::gigabyte;
using units::microsecond;

// A communication-heavy stage profile (a 70B-class model split tp × pp) so that placement moves
// the iteration time by several percent; all stages alike.
WorkProfile heavy_work(const ParallelConfig& config, int microbatches = 16) {
  WorkProfile work;
  work.num_microbatches = microbatches;
  work.p2p_bytes_per_microbatch = 64 * units::mebibyte;
  for (int s = 0; s < config.pp; ++s) {
    StageWork stage;
    stage.num_layers = 80 / config.pp;
    stage.forward_compute_seconds = 0.080 / (config.pp * config.tp);
    stage.backward_compute_seconds = 2 * stage.forward_compute_seconds;
    stage.tp_bytes_per_microbatch = config.tp > 1 ? 4.0 * stage.num_layers * 2 * (config.tp - 1) / config.tp * 32e6 : 0;
    stage.tp_collectives_per_microbatch = 4 * stage.num_layers;
    stage.gradient_bytes_per_gpu = 4.0 * 70e9 / (config.tp * config.pp);
    stage.optimizer_seconds = 0.01;
    work.stages.push_back(stage);
  }
  return work;
}

using testing::layout_of;

double model_seconds(const Cluster& cluster, const ParallelConfig& config, const WorkProfile& work,
                     const Placement& placement) {
  return critical_path(config, work, communication_times(cluster, config, work, placement), TrainingSpec{}).iteration_seconds;
}

void expect_bijection(const Cluster& cluster, const ParallelConfig& config, const Placement& placement) {
  ASSERT_EQ(static_cast<int>(placement.gpu_of_rank.size()), config.world_size());
  std::set<int> used;
  for (const int gpu : placement.gpu_of_rank) {
    EXPECT_GE(gpu, 0);
    EXPECT_LT(gpu, cluster.num_gpus());
    used.insert(gpu);
  }
  EXPECT_EQ(static_cast<int>(used.size()), config.world_size());
}

Cluster line_cluster(int nodes) { return synthetic_cluster(uniform_fabric(nodes), 1); }

TEST(Placement, AvoidsADegradedPairOnTheDefaultPipeline) {
  // pp=4 over 4 nodes: the default order's boundary 1 → 2 is the degraded pair.
  Cluster cluster = line_cluster(4);
  cluster.inter_node.at(1, 2).bandwidth_bytes_per_second /= 20;
  cluster.inter_node.at(2, 1).bandwidth_bytes_per_second /= 20;
  const ParallelConfig config = layout_of(8, 4, 1);
  const WorkProfile work = heavy_work(config);
  const PlacementResult result = optimize_placement(cluster, config, work, TrainingSpec{}, PlacementEffort{});
  expect_bijection(cluster, config, result.placement);
  EXPECT_TRUE(result.exact);
  EXPECT_DOUBLE_EQ(result.default_iteration_seconds, model_seconds(cluster, config, work, default_placement(config)));
  EXPECT_DOUBLE_EQ(result.iteration_seconds, model_seconds(cluster, config, work, result.placement));
  EXPECT_LT(result.iteration_seconds, result.default_iteration_seconds * 0.99);
  const std::vector<int> order = node_order_of(cluster, result.placement);
  ASSERT_EQ(order.size(), 4u);
  for (size_t k = 0; k + 1 < order.size(); ++k)
    EXPECT_FALSE((order[k] == 1 && order[k + 1] == 2) || (order[k] == 2 && order[k + 1] == 1)) << "stage boundary " << k;
}

TEST(Placement, UniformClusterKeepsTheDefaultOrder) {
  const Cluster cluster = line_cluster(6);
  const ParallelConfig config = layout_of(8, 3, 2);
  const PlacementResult result = optimize_placement(cluster, config, heavy_work(config), TrainingSpec{}, PlacementEffort{});
  EXPECT_EQ(result.placement.gpu_of_rank, default_placement(config).gpu_of_rank);
  EXPECT_DOUBLE_EQ(result.iteration_seconds, result.default_iteration_seconds);
}

// 32 nodes in Slurm's order, leaf switches of 8 in that order, cross-switch pairs at a quarter:
// tp=8 × pp=4 × dp=8 gives each stage 8 slots. Stage-major (Slurm's order) keeps DP rings inside a
// switch; pipeline-major (nodes 4j … 4j + 3 run pipeline block j) keeps stage hops inside one.
struct SwitchedJob {
  Cluster cluster;
  ParallelConfig config = layout_of(8, 4, 8);
  WorkProfile work;

  explicit SwitchedJob(bool hops_dominate) {
    SyntheticFabric fabric = uniform_fabric(32);
    fabric.rack_size = 8;
    fabric.cross_rack_factor = 0.25;
    fabric.scatter_racks = false;
    cluster = synthetic_cluster(fabric, 1);
    work = heavy_work(config);
    for (StageWork& stage : work.stages) stage.gradient_bytes_per_gpu *= hops_dominate ? 0.001 : 10;
    if (hops_dominate) work.p2p_bytes_per_microbatch *= 50;
  }
  Placement pipeline_major() const {
    Placement placement;
    const int slots_per_stage = config.tp * config.dp / cluster.gpus_per_node;
    for (int rank = 0; rank < config.world_size(); ++rank) {
      const int slot = rank / cluster.gpus_per_node;
      const int node = (slot % slots_per_stage) * config.pp + slot / slots_per_stage;
      placement.gpu_of_rank.push_back(node * cluster.gpus_per_node + rank % cluster.gpus_per_node);
    }
    return placement;
  }
};

TEST(Placement, StartsFromThePipelineMajorLayoutWhereStageHopsDominate) {
  const SwitchedJob job(true);
  PlacementEffort layouts_only;
  layouts_only.max_moves = 0;
  const PlacementResult result = optimize_placement(job.cluster, job.config, job.work, TrainingSpec{}, layouts_only);
  // Every stage hop stays inside a switch (blocks of one or two pipelines do that; of the layouts
  // that tie, the one with the larger blocks is kept, as it keeps more DP ring steps local).
  const auto switch_of_rank = [&](int rank) { return result.placement.gpu_of_rank[static_cast<size_t>(rank)] / 8 / 8; };
  const int ranks_per_stage = job.config.tp * job.config.dp;
  for (int rank = 0; rank + ranks_per_stage < job.config.world_size(); ++rank)
    EXPECT_EQ(switch_of_rank(rank), switch_of_rank(rank + ranks_per_stage)) << "rank " << rank;
  EXPECT_LE(result.iteration_seconds, model_seconds(job.cluster, job.config, job.work, job.pipeline_major()));
  EXPECT_LT(result.iteration_seconds, result.default_iteration_seconds * 0.95);
  // Annealing from there keeps or improves it.
  const PlacementResult searched = optimize_placement(job.cluster, job.config, job.work, TrainingSpec{}, PlacementEffort{});
  EXPECT_LE(searched.iteration_seconds, result.iteration_seconds);
}

TEST(Placement, KeepsSlurmsStageMajorOrderWhereDataParallelRingsDominate) {
  const SwitchedJob job(false);
  PlacementEffort layouts_only;
  layouts_only.max_moves = 0;
  const PlacementResult result = optimize_placement(job.cluster, job.config, job.work, TrainingSpec{}, layouts_only);
  EXPECT_EQ(result.placement.gpu_of_rank, default_placement(job.config).gpu_of_rank);
  EXPECT_LT(result.default_iteration_seconds, model_seconds(job.cluster, job.config, job.work, job.pipeline_major()));
}

TEST(Placement, IdleNodesAreTheOnesTheJobDoesNotNeed) {
  // 3 nodes of ranks on a 4-node allocation: the slow node 0 should be left idle.
  Cluster cluster = line_cluster(4);
  for (int other = 1; other < 4; ++other) {
    cluster.inter_node.at(0, other).bandwidth_bytes_per_second /= 10;
    cluster.inter_node.at(other, 0).bandwidth_bytes_per_second /= 10;
  }
  const ParallelConfig config = layout_of(8, 3, 1);
  const PlacementResult result = optimize_placement(cluster, config, heavy_work(config), TrainingSpec{}, PlacementEffort{});
  expect_bijection(cluster, config, result.placement);
  const std::vector<int> order = node_order_of(cluster, result.placement);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(std::count(order.begin(), order.end(), 0), 0);
  EXPECT_TRUE(result.exact);
}

TEST(Placement, RegroupsTpGroupsOntoFastGpuPairsInsideANode) {
  // Inside each node only GPUs of the same parity share fast links (a split NVLink domain
  // numbered across sockets); the default tp=4 groups {0,1,2,3} and {4,5,6,7} ride the slow ones.
  // One NIC per node, so that no GPU order puts the stage boundary between the nodes on other
  // rails (RailAlignment tests below cover that).
  Cluster cluster = line_cluster(2);
  cluster.nics_per_node = 1;
  const Link slow{40 * gigabyte, 5 * microsecond, true};
  for (LinkMatrix& links : cluster.intra_node)
    for (int a = 0; a < 8; ++a)
      for (int b = 0; b < 8; ++b)
        if (a != b && (a % 2) != (b % 2)) links.at(a, b) = slow;
  const ParallelConfig config = layout_of(4, 4, 1);
  const WorkProfile work = heavy_work(config);
  const PlacementResult result = optimize_placement(cluster, config, work, TrainingSpec{}, PlacementEffort{});
  expect_bijection(cluster, config, result.placement);
  const CommunicationTimes times = communication_times(cluster, config, work, result.placement);
  const CommunicationTimes default_times = communication_times(cluster, config, work, default_placement(config));
  for (int s = 0; s < 4; ++s) EXPECT_LT(times.tp_seconds[s][0], 0.5 * default_times.tp_seconds[s][0]) << "stage " << s;
  EXPECT_LT(result.iteration_seconds, 0.9 * result.default_iteration_seconds);
  EXPECT_FALSE(result.exact);  // the proof covers node orders only
}

TEST(Placement, NodeOrderOfFollowsBlocksOfRanks) {
  const Cluster cluster = line_cluster(3);
  Placement placement;
  for (const int node : {2, 0, 1})
    for (int g = 0; g < 8; ++g) placement.gpu_of_rank.push_back(node * 8 + (7 - g));
  EXPECT_EQ(node_order_of(cluster, placement), (std::vector<int>{2, 0, 1}));
  const std::vector<int> reversed = {7, 6, 5, 4, 3, 2, 1, 0};
  EXPECT_EQ(local_gpu_order_of(cluster, placement), (std::vector<std::vector<int>>{reversed, reversed, reversed}));
  std::swap(placement.gpu_of_rank[0], placement.gpu_of_rank[8]);  // block 0 now spans two nodes
  EXPECT_TRUE(node_order_of(cluster, placement).empty());
  EXPECT_TRUE(local_gpu_order_of(cluster, placement).empty());
}

TEST(Placement, PipettePaperObjectiveIsSlowestPipelineTransfersPlusStageZeroRing) {
  CommunicationTimes times;
  times.p2p_seconds = {{1.0, 2.0}, {4.0, 1.0}};  // replica 0 sums 5, replica 1 sums 3
  times.tp_seconds = {{9.0, 9.0}, {9.0, 9.0}, {9.0, 9.0}};
  times.dp_seconds = {0.5, 7.0, 7.0};
  EXPECT_DOUBLE_EQ(pipette_paper_objective(times), 5.5);
}

TEST(Placement, InconsistentInputsGiveAnEmptyPlacement) {
  const Cluster cluster = line_cluster(2);
  const ParallelConfig config = layout_of(8, 4, 1);  // 32 ranks on 16 GPUs
  EXPECT_TRUE(optimize_placement(cluster, config, heavy_work(config), TrainingSpec{}, PlacementEffort{}).placement.gpu_of_rank.empty());
}

// The evaluator recomputes only the entries a move touches, and its objective only the replicas
// those belong to: after any sequence of moves and undos, both must equal a full evaluation of the
// same placement bit for bit.
void expect_incremental_matches_full(const ParallelConfig& config, int nodes, int microbatches, bool tied_embedding = false) {
  SyntheticFabric fabric;
  fabric.nodes = nodes;
  Cluster cluster = synthetic_cluster(fabric, 5);
  cluster.intra_node[3].at(1, 2).bandwidth_bytes_per_second /= 4;
  WorkProfile work = heavy_work(config, microbatches);
  if (tied_embedding) {  // a 256k vocabulary of width 8192, fp32 gradients, summed between the end stages
    work.tied_embedding_head_stage = config.pp - 1;
    work.tied_embedding_gradient_bytes = 256000.0 / config.tp * 8192 * 4;
  }
  const TrainingSpec training;
  const auto objective = [&](const CommunicationTimes& times) { return critical_path(config, work, times, training).iteration_seconds; };
  detail::IncrementalIterationSeconds incremental(config, work, training);
  detail::PlacementEvaluator evaluator(cluster, config, work, incremental);
  std::mt19937_64 random(3);
  for (int move = 0; move < 300; ++move) {
    const double value = move % 11 == 5 ? evaluator.swap_local_blocks(static_cast<int>(random() % nodes), 0, 4, 4)
                         : move % 7 == 1 ? evaluator.swap_local_gpus_everywhere(static_cast<int>(random() % 4),
                                                                                4 + static_cast<int>(random() % 4))
                         : move % 3 == 0 ? evaluator.swap_local_gpus(static_cast<int>(random() % nodes), static_cast<int>(random() % 4),
                                                                     4 + static_cast<int>(random() % 4))
                                       : evaluator.swap_slots(static_cast<int>(random() % nodes),
                                                              static_cast<int>((random() % (nodes - 1) + 1 + move) % nodes));
    if (move % 5 == 4) evaluator.undo();
    const CommunicationTimes full = communication_times(cluster, config, work, evaluator.placement());
    ASSERT_EQ(full.p2p_seconds, evaluator.communication().p2p_seconds) << "move " << move;
    ASSERT_EQ(full.tp_seconds, evaluator.communication().tp_seconds) << "move " << move;
    ASSERT_EQ(full.dp_seconds, evaluator.communication().dp_seconds) << "move " << move;
    ASSERT_EQ(full.wraparound_p2p_seconds, evaluator.communication().wraparound_p2p_seconds) << "move " << move;
    ASSERT_EQ(full.tied_embedding_seconds, evaluator.communication().tied_embedding_seconds) << "move " << move;
    ASSERT_EQ(evaluator.value(), objective(full)) << "move " << move;
    if (move % 5 != 4) {
      ASSERT_EQ(value, evaluator.value());
    }
  }
}

TEST(PlacementEvaluator, IncrementalStateMatchesFullEvaluationAfterRandomMoves) {
  expect_incremental_matches_full(layout_of(2, 3, 8), 6, 16);
}

TEST(PlacementEvaluator, IncrementalStateMatchesFullEvaluationInterleavedWithDistributedOptimizer) {
  // Many replicas per node (tp 1), the interleaved wrap-around, and the parameter all-gather that
  // makes the slowest replica's whole pipeline matter, not only its total.
  ParallelConfig config = layout_of(1, 4, 24);
  config.virtual_stages = 2;
  config.distributed_optimizer = true;
  expect_incremental_matches_full(config, 12, 8);
}

TEST(PlacementEvaluator, IncrementalStateMatchesFullEvaluationWithATiedEmbedding) {
  // The embedding's gradient sum joins the first and the last stage's ranks: a move of either
  // stage's nodes reprices it.
  expect_incremental_matches_full(layout_of(2, 3, 8), 6, 16, true);
}

// One random uneven test case of 4–8 nodes × 8 GPUs.
struct RandomCase {
  Cluster cluster;
  ParallelConfig config;
  WorkProfile work;
};

RandomCase random_case(std::uint64_t index) {
  std::mt19937_64 random(index * 0x9E3779B97F4A7C15ULL + 1);
  SyntheticFabric fabric;
  fabric.nodes = 4 + static_cast<int>(random() % 5);
  fabric.spread_sigma = 0.3;
  fabric.rack_size = 2 + static_cast<int>(random() % 3);
  fabric.cross_rack_factor = 0.5;
  fabric.degraded_pairs = 1 + static_cast<int>(random() % 3);
  fabric.degraded_factor = 0.2;
  RandomCase test_case{synthetic_cluster(fabric, random()), {}, {}};
  std::vector<ParallelConfig> layouts;
  const int gpus = fabric.nodes * 8;
  for (const int tp : {2, 4, 8})
    for (int pp = 2; pp <= 8; ++pp)
      // Stages that fill whole nodes: elsewhere a stage boundary inside a node makes the GPU
      // orders inside nodes part of the optimum (rails), which the proof over node orders leaves out.
      if (gpus % (tp * pp) == 0 && (gpus / pp) % 8 == 0) layouts.push_back(layout_of(tp, pp, gpus / (tp * pp)));
  test_case.config = layouts[random() % layouts.size()];
  test_case.work = heavy_work(test_case.config, 4 + static_cast<int>(random() % 13));
  return test_case;
}

// The acceptance test: on 200 random uneven clusters of 4–8 nodes, annealing alone lands
// within 1% of the exact optimum in at least 99% of cases. The optimum is proven by branch and
// bound; on the smaller cases it is checked against plain enumeration of every node order.
TEST(PlacementQuality, AnnealingWithinOnePercentOfExactOptimumOn200UnevenClusters) {
  PlacementEffort annealing_only;
  annealing_only.exact_up_to_nodes = 0;
  annealing_only.max_moves = 20000;
  PlacementEffort exact;
  exact.max_moves = 2'000'000;
  int within_one_percent = 0;
  int default_off_by_more_than_one_percent = 0;
  double worst_gap = 0;
  for (std::uint64_t index = 0; index < 200; ++index) {
    const RandomCase c = random_case(index);
    const PlacementResult optimum = optimize_placement(c.cluster, c.config, c.work, TrainingSpec{}, exact);
    ASSERT_TRUE(optimum.exact) << "case " << index;
    const PlacementResult annealed = optimize_placement(c.cluster, c.config, c.work, TrainingSpec{}, annealing_only);
    EXPECT_FALSE(annealed.exact);
    expect_bijection(c.cluster, c.config, annealed.placement);
    EXPECT_GE(annealed.iteration_seconds, optimum.iteration_seconds) << "case " << index << ": the exact solver missed";
    const double gap = annealed.iteration_seconds / optimum.iteration_seconds - 1;
    worst_gap = std::max(worst_gap, gap);
    within_one_percent += gap <= 0.01;
    default_off_by_more_than_one_percent += optimum.default_iteration_seconds > 1.01 * optimum.iteration_seconds;
    if (c.cluster.num_nodes() <= 6 && index % 4 == 0) {
      std::vector<int> order(static_cast<size_t>(c.cluster.num_nodes()));
      for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
      double best = std::numeric_limits<double>::infinity();
      do {
        Placement placement;
        for (int rank = 0; rank < c.config.world_size(); ++rank)
          placement.gpu_of_rank.push_back(order[static_cast<size_t>(rank / 8)] * 8 + rank % 8);
        best = std::min(best, model_seconds(c.cluster, c.config, c.work, placement));
      } while (std::next_permutation(order.begin(), order.end()));
      EXPECT_DOUBLE_EQ(optimum.iteration_seconds, best) << "case " << index;
    }
  }
  std::printf("annealing within 1%% of optimum: %d/200, worst gap %.3f%%; default order >1%% off: %d/200\n",
              within_one_percent, 100 * worst_gap, default_off_by_more_than_one_percent);
  EXPECT_GE(within_one_percent, 198);
  // The cases must be hard enough that placement matters, or the check above means nothing.
  EXPECT_GE(default_off_by_more_than_one_percent, 100);
}

std::string placement_text(const Placement& placement) {
  std::ostringstream text;
  for (const int gpu : placement.gpu_of_rank) text << gpu << ',';
  return text.str();
}

RandomCase determinism_case() {
  SyntheticFabric fabric;
  fabric.nodes = 16;
  fabric.spread_sigma = 0.3;
  Cluster cluster = synthetic_cluster(fabric, 77);
  cluster.intra_node[5].at(0, 1).bandwidth_bytes_per_second /= 3;  // enables local GPU moves
  const ParallelConfig config = layout_of(4, 4, 8);
  return {cluster, config, heavy_work(config)};
}

PlacementResult determinism_result() {
  const RandomCase c = determinism_case();
  PlacementEffort effort;
  effort.max_moves = 4000;
  return optimize_placement(c.cluster, c.config, c.work, TrainingSpec{}, effort);
}

// Run by the test below in a child process: prints the placement it computes.
TEST(PlacementDeterminism, ChildProcessPrintsItsPlacement) {
  if (std::getenv("PIPETTE_PLACEMENT_CHILD") == nullptr) GTEST_SKIP() << "runs as the child of SameAcrossRunsThreadsAndProcesses";
  std::printf("placement=%s\n", placement_text(determinism_result().placement).c_str());
}

TEST(PlacementDeterminism, SameAcrossRunsThreadsAndProcesses) {
  const PlacementResult reference = determinism_result();
  expect_bijection(determinism_case().cluster, determinism_case().config, reference.placement);
  EXPECT_LT(reference.iteration_seconds, reference.default_iteration_seconds);
  const std::string expected = placement_text(reference.placement);
  EXPECT_EQ(placement_text(determinism_result().placement), expected);

  std::vector<std::string> from_threads(4);
  std::vector<std::thread> threads;
  for (auto& text : from_threads) threads.emplace_back([&text] { text = placement_text(determinism_result().placement); });
  for (auto& thread : threads) thread.join();
  for (const auto& text : from_threads) EXPECT_EQ(text, expected);

  const std::string command = "PIPETTE_PLACEMENT_CHILD=1 '" + std::filesystem::read_symlink("/proc/self/exe").string() +
                              "' --gtest_filter=PlacementDeterminism.ChildProcessPrintsItsPlacement 2>&1";
  const std::unique_ptr<FILE, int (*)(FILE*)> child(popen(command.c_str(), "r"), pclose);
  ASSERT_NE(child, nullptr);
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, child.get()) != nullptr) output += buffer;
  EXPECT_NE(output.find("placement=" + expected + "\n"), std::string::npos) << output;
}

}  // namespace
}  // namespace pipette
