#include "pipette/core/plan.hpp"

#include <gtest/gtest.h>

#include <set>

#include "pipette/core/cluster.hpp"
#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/training.hpp"
#include "test_models.hpp"

namespace pipette {
namespace {

using testing::layout_of;

TEST(RankOrder, MegatronOrderTpFastestThenDpThenPp) {
  const ParallelConfig config = layout_of(2, 3, 4);
  // rank = tp_index + tp·(dp_index + dp·pp_index)
  const RankPosition position = position_of_rank(config, 0 + 2 * (3 + 4 * 1));
  EXPECT_EQ(position.tp_index, 0);
  EXPECT_EQ(position.dp_index(config), 3);
  EXPECT_EQ(position.pp_index, 1);
  EXPECT_EQ(position_of_rank(config, 1).tp_index, 1);
  EXPECT_EQ(position_of_rank(config, 2).dp_index(config), 1);
  EXPECT_EQ(position_of_rank(config, 8).pp_index, 1);
}

// Megatron's order 'tp-cp-ep-dp-pp' (parallel_state.py @d98e8a64 l.617): cp ranks lie between tp
// and dp, rank = tp_index + tp·(cp_index + cp·(dp_index + dp·pp_index)).
TEST(RankOrder, ContextParallelRanksLieBetweenTpAndDp) {
  ParallelConfig config = layout_of(2, 3, 4);
  config.cp = 2;
  EXPECT_EQ(config.world_size(), 48);
  EXPECT_EQ(config.dp_cp(), 8);
  const RankPosition position = position_of_rank(config, 1 + 2 * (1 + 2 * (3 + 4 * 2)));
  EXPECT_EQ(position.tp_index, 1);
  EXPECT_EQ(position.cp_index(config), 1);
  EXPECT_EQ(position.dp_index(config), 3);
  EXPECT_EQ(position.pp_index, 2);
  EXPECT_EQ(position_of_rank(config, 2).cp_index(config), 1);  // the next cp rank after a whole tp group
  EXPECT_EQ(position_of_rank(config, 4).dp_index(config), 1);  // the next replica after tp·cp ranks
  EXPECT_EQ(rank_of_position(config, {1, lane_of(config, 1, 3), 2}), 1 + 2 * (1 + 2 * (3 + 4 * 2)));
}

TEST(RankOrder, PositionAndRankAreInverse) {
  const ParallelConfig config = layout_of(4, 2, 3);
  std::set<int> seen;
  for (int rank = 0; rank < config.world_size(); ++rank) {
    EXPECT_EQ(rank_of_position(config, position_of_rank(config, rank)), rank);
    seen.insert(rank_of_position(config, position_of_rank(config, rank)));
  }
  EXPECT_EQ(static_cast<int>(seen.size()), config.world_size());
}

Plan plan_of(const ParallelConfig& config) {
  Plan plan;
  plan.config = config;
  plan.config.layers_per_stage = balanced_layers_per_stage(32, config.pp);
  plan.num_microbatches = 16;
  for (int rank = 0; rank < config.world_size(); ++rank) plan.placement.gpu_of_rank.push_back(rank);
  return plan;
}

TEST(PlanHash, StableSixteenHexDigitsIgnoringPredictions) {
  Plan plan = plan_of(layout_of(2, 2, 2));
  const std::string hash = plan_hash(plan);
  EXPECT_EQ(hash.size(), 16u);
  EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  plan.time.iteration_seconds = 12.5;
  plan.peak_memory_bytes = 1e9;
  plan.tokens_per_second = 3;
  EXPECT_EQ(plan_hash(plan), hash);
  // Pinned: the serialisation is a contract between nodes and releases (FNV-1a 64 of
  // "v1;tp=2;pp=2;dp=2;mbs=1;vpp=1;recompute=none;sp=0;distopt=0;nmb=16;layers=16,16,;gpus=0,…,7,").
  EXPECT_EQ(hash, plan_hash(plan_of(layout_of(2, 2, 2))));
}

TEST(PlanHash, EveryDecisionChangesTheHash) {
  const Plan base = plan_of(layout_of(2, 2, 2));
  std::set<std::string> hashes{plan_hash(base)};
  Plan changed = base;
  changed.config.micro_batch = 2;
  hashes.insert(plan_hash(changed));
  changed = base;
  changed.config.recompute = RecomputeMode::selective;
  hashes.insert(plan_hash(changed));
  changed = base;
  changed.config.sequence_parallel = true;
  hashes.insert(plan_hash(changed));
  changed = base;
  changed.config.distributed_optimizer = true;
  hashes.insert(plan_hash(changed));
  changed = base;
  changed.config.layers_per_stage = {15, 17};
  hashes.insert(plan_hash(changed));
  changed = base;
  std::swap(changed.placement.gpu_of_rank[0], changed.placement.gpu_of_rank[7]);
  hashes.insert(plan_hash(changed));
  changed = base;
  changed.num_microbatches = 8;
  hashes.insert(plan_hash(changed));
  // Block recompute hashes apart from full recompute of every layer, which keeps its hash.
  changed = base;
  changed.config.recompute = RecomputeMode::full;
  const std::string full = plan_hash(changed);
  hashes.insert(full);
  changed.config.recomputed_layers_per_chunk = 5;
  hashes.insert(plan_hash(changed));
  EXPECT_EQ(hashes.size(), 10u);
  changed.config.recomputed_layers_per_chunk = 0;
  EXPECT_EQ(plan_hash(changed), full);
}

TEST(GpuCatalog, FindsEveryKnownGpuIgnoringCase) {
  for (const char* name : {"V100-SXM2-16GB", "V100-SXM2-32GB", "A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200",
                           "L40S", "B200"}) {
    const GpuSpec* gpu = find_gpu(name);
    ASSERT_NE(gpu, nullptr) << name;
    EXPECT_GT(gpu->memory_bytes, 15e9);
    EXPECT_GT(gpu->hbm_bytes_per_second, 800e9);
    EXPECT_GT(gpu->peak_fp16_flop_per_second, 100e12);
  }
  EXPECT_EQ(find_gpu("h100-sxm"), find_gpu("H100-SXM"));
  EXPECT_EQ(find_gpu("H300"), nullptr);
}

TEST(GpuCatalog, DatasheetFigures) {
  EXPECT_DOUBLE_EQ(peak_flop_per_second(*find_gpu("A100-80GB"), Precision::bf16), 312e12);
  EXPECT_DOUBLE_EQ(peak_flop_per_second(*find_gpu("H100-SXM"), Precision::bf16), 989e12);
  EXPECT_DOUBLE_EQ(peak_flop_per_second(*find_gpu("H100-SXM"), Precision::fp8), 1979e12);
  EXPECT_DOUBLE_EQ(peak_flop_per_second(*find_gpu("A100-80GB"), Precision::fp8), 0);  // no fp8 tensor cores
  EXPECT_DOUBLE_EQ(peak_flop_per_second(*find_gpu("V100-SXM2-32GB"), Precision::bf16), 0);
  EXPECT_GT(find_gpu("H200")->memory_bytes, find_gpu("H100-SXM")->memory_bytes);
}

TEST(GpuCatalog, BoardFabricIsWhatTheVendorBuilds) {
  // 8-GPU SXM boards of A100/H100/H200/B200 are NVSwitch all-to-all at the GPU's full NVLink rate.
  for (const auto& [name, nvlink] : {std::pair{"A100-80GB", 300e9}, {"A100-40GB", 300e9}, {"H100-SXM", 450e9},
                                     {"H200", 450e9}, {"B200", 900e9}}) {
    const BoardFabric board = board_fabric(name, 8);
    EXPECT_EQ(board.fabric, IntraNodeFabric::nvswitch) << name;
    EXPECT_DOUBLE_EQ(board.pair_bytes_per_second, nvlink) << name;
  }
  // HGX A100 4-GPU: each pair wired directly with 4 of the 12 links.
  EXPECT_EQ(board_fabric("A100-40GB", 4).fabric, IntraNodeFabric::nvlink_direct);
  EXPECT_DOUBLE_EQ(board_fabric("A100-40GB", 4).pair_bytes_per_second, 100e9);
  // DGX-1 V100 SXM2 is a hybrid cube-mesh, not NVSwitched: its 6 links split over the peers.
  EXPECT_EQ(board_fabric("V100-SXM2-32GB", 8).fabric, IntraNodeFabric::nvlink_direct);
  EXPECT_DOUBLE_EQ(board_fabric("V100-SXM2-32GB", 8).pair_bytes_per_second, 150e9 / 7);
  // PCIe cards and GPUs the catalog does not know: PCIe.
  EXPECT_EQ(board_fabric("H100-PCIe", 8).fabric, IntraNodeFabric::pcie);
  EXPECT_DOUBLE_EQ(board_fabric("H100-PCIe", 8).pair_bytes_per_second, 64e9);
  EXPECT_EQ(board_fabric("L40S", 8).fabric, IntraNodeFabric::pcie);
  EXPECT_EQ(board_fabric("some-site-gpu", 8).fabric, IntraNodeFabric::pcie);
  EXPECT_EQ(board_fabric("h100-sxm", 8).fabric, IntraNodeFabric::nvswitch);
  // NVLink SHARP (nccl @5067397c src/graph/tuning.cc l.138-144, 307-318; transport/nvls.cc
  // l.155-157): 2 × nvlsEfficiency × (c − 1)/c. A100's NVSwitch cannot reduce in the switch.
  EXPECT_DOUBLE_EQ(board_fabric("H100-SXM", 8).nvls_all_reduce_speedup, 2 * 0.85 * 15 / 16);
  EXPECT_DOUBLE_EQ(board_fabric("H200", 8).nvls_all_reduce_speedup, 2 * 0.85 * 15 / 16);
  EXPECT_DOUBLE_EQ(board_fabric("B200", 8).nvls_all_reduce_speedup, 2 * 0.74 * 23 / 24);
  EXPECT_DOUBLE_EQ(board_fabric("A100-80GB", 8).nvls_all_reduce_speedup, 1.0);
  EXPECT_DOUBLE_EQ(board_fabric("H100-SXM", 4).nvls_all_reduce_speedup, 1.0);
}

TEST(TrainingValidation, NamesTheField) {
  TrainingSpec training;
  training.global_batch_sequences = 0;
  training.sequence_length = 4096;
  EXPECT_NE(validate(training).find("global_batch_sequences"), std::string::npos);
  training.global_batch_sequences = 8;
  EXPECT_EQ(validate(training), "");
  training.fixed.micro_batch = 16;
  EXPECT_EQ(validate(training), "fixed mbs=16 exceeds the global batch of 8 sequences");
  training.fixed.micro_batch.reset();
  training.fixed.tp = 0;
  EXPECT_EQ(validate(training), "fixed tp=0 must be at least 1");
  EXPECT_STREQ(to_string(RecomputeMode::selective), "selective");
  EXPECT_STREQ(to_string(Precision::fp8), "fp8");
  EXPECT_STREQ(to_string(AttentionKernel::flash), "flash");
}

TEST(ClusterValidation, RejectsMissingLinks) {
  Cluster cluster;
  cluster.node_names = {"n1", "n2"};
  cluster.gpus_per_node = 2;
  cluster.gpu = *find_gpu("H100-SXM");
  const Link fast{100e9, 1e-6, true};
  cluster.intra_node = {LinkMatrix(2, fast), LinkMatrix(2, fast)};
  cluster.inter_node = LinkMatrix(2, fast);
  EXPECT_EQ(validate(cluster), "");
  cluster.inter_node.at(1, 0).bandwidth_bytes_per_second = 0;
  EXPECT_EQ(validate(cluster),
            "inter-node matrix link 1->0 has no positive bandwidth; measure it or give a prior in the site file");
  cluster.inter_node.at(1, 0).bandwidth_bytes_per_second = 1;
  cluster.intra_node.pop_back();
  EXPECT_EQ(validate(cluster), "intra_node has 1 matrices for 2 nodes");
}

}  // namespace
}  // namespace pipette
