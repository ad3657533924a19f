#include "pipette/topology/cluster_assembly.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/topology/model_file.hpp"
#include "pipette/core/units.hpp"

namespace pipette {
namespace {

constexpr std::int64_t kNow = 1796144400;  // 2026-12-01T17:00:00Z
constexpr double kDay = 86400;

NodeInspection inspect(const char* file) {
  auto node = inspect_topology_xml(std::string(PIPETTE_SOURCE_DIR "/tests/data/hwloc/") + file);
  EXPECT_TRUE(node.ok()) << (node.ok() ? "" : node.error().message);
  return node.ok() ? *node : NodeInspection{};
}

SiteConfig site_with(const std::string& text) {
  auto site = parse_site_config(text, "site.yaml");
  EXPECT_TRUE(site.ok()) << (site.ok() ? "" : site.error().message);
  return site.ok() ? *site : SiteConfig{};
}

PairMeasurement pair(const char* a, const char* b, double gb_per_s, double latency_us, std::int64_t at) {
  PairMeasurement p;
  p.node_a = a;
  p.node_b = b;
  p.measured_at_unix_seconds = at;
  p.bandwidth_bytes_per_second = gb_per_s * units::gigabyte;
  p.latency_seconds = latency_us * units::microsecond;
  return p;
}

struct Fixture {
  NodeInspection juwels = inspect("psmgmt-juwels-booster-4xA100-4xHDR-hwloc22.xml");
  SiteConfig site = site_with("priors:\n  nic_gbit_per_s: 200\n  attained_fraction: 0.8\n  inter_node_latency_us: 10\n");
  AssemblyInput input;
  Fixture() {
    input.node_names = {"jwb01", "jwb02", "jwb03", "jwb04"};
    input.local = &juwels;
    input.reference_time_unix_seconds = kNow;
  }
};

TEST(ClusterAssembly, WithoutACacheEveryLinkIsAPriorAndSaysSo) {
  Fixture f;
  auto assembled = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(assembled.ok()) << assembled.error().message;
  const Cluster& cluster = assembled->cluster;
  EXPECT_EQ(cluster.gpus_per_node, 4);
  EXPECT_EQ(cluster.nics_per_node, 4);  // the 4 HDR NICs hwloc found
  EXPECT_EQ(cluster.gpu.name, "A100-40GB");
  // 4 rails × 200 Gb/s = 100 GB/s nominal, 80% attained.
  EXPECT_DOUBLE_EQ(cluster.inter_node.at(0, 3).bandwidth_bytes_per_second, 80e9);
  EXPECT_DOUBLE_EQ(cluster.inter_node.at(0, 3).latency_seconds, 10e-6);
  EXPECT_FALSE(cluster.inter_node.at(0, 3).measured);
  // A100 SXM4 without NVSwitch or an NVLink matrix: 12 NVLinks split over 3 peers, 80% attained.
  EXPECT_DOUBLE_EQ(cluster.intra_node[2].at(0, 1).bandwidth_bytes_per_second, 300e9 / 3 * 0.8);
  EXPECT_EQ(assembled->measured_node_pairs, 0);
  EXPECT_EQ(assembled->assumed_node_pairs, 6);
  ASSERT_GE(assembled->links_assumed.size(), 2u);
  EXPECT_NE(assembled->links_assumed[0].find("all 6 node pairs assumed: prior 80.0 GB/s (4 rail(s) x 25.0 GB/s nominal"),
            std::string::npos)
      << assembled->links_assumed[0];
  EXPECT_NE(assembled->links_assumed.back().find("SXM module"), std::string::npos) << assembled->links_assumed.back();
  // JUWELS Booster's 4 A100s have NVLinks between every two of them (4 a pair), no NVSwitch.
  EXPECT_TRUE(cluster.intra_node_full_mesh);
  EXPECT_NE(assembled->links_assumed.back().find("every pair has NVLinks of its own"), std::string::npos)
      << assembled->links_assumed.back();
}

// Which nodes wire every pair of GPUs directly (Cluster::intra_node_full_mesh): not NVSwitch nodes,
// not the POWER8 node whose NVLink matrix links GPUs in pairs (0-1, 2-3), not an 8-GPU V100 board
// (the DGX-1's hybrid cube-mesh); the 4-GPU SXM boards the catalog knows, on a login node too.
TEST(ClusterAssembly, FullMeshIsWhatHwlocOrTheBoardShows) {
  const auto full_mesh = [](const NodeInspection* local, const std::string& site_text, int gpus_per_node) {
    AssemblyInput input;
    input.node_names = {"n1"};
    input.local = local;
    input.gpus_per_node = gpus_per_node;
    auto assembled = assemble_cluster(input, site_with(site_text));
    EXPECT_TRUE(assembled.ok()) << assembled.error().message;
    return assembled.ok() && assembled->cluster.intra_node_full_mesh;
  };
  const NodeInspection dgx2 = inspect("hwloc-nvidia-dgx2-v100-nvswitch.xml");
  const NodeInspection power8 = inspect("hwloc-power8-4gpu-nvlink.xml");
  const NodeInspection none = inspect("mpibind-tioga-4xMI250X-xgmi-slingshot.xml");
  EXPECT_FALSE(full_mesh(&dgx2, "", 16));
  EXPECT_FALSE(full_mesh(&power8,
                         "gpus:\n  - name: P100-SXM2-16GB\n    memory_gib: 16\n    peak_fp32_tflops: 10.6\n"
                         "    peak_fp16_tflops: 21.2\n    peak_bf16_tflops: 0\n    hbm_gb_per_s: 732\n",
                         4));
  EXPECT_TRUE(full_mesh(&none, "gpu: A100-40GB\n", 4));
  EXPECT_TRUE(full_mesh(&none, "gpu: H100-SXM\n", 4));
  EXPECT_FALSE(full_mesh(&none, "gpu: H100-SXM\npriors:\n  board_gpus: 8\n", 4));
  EXPECT_FALSE(full_mesh(&none, "gpu: H100-SXM\n", 8));
  EXPECT_FALSE(full_mesh(&none, "gpu: V100-SXM2-32GB\n", 8));
  EXPECT_FALSE(full_mesh(&none, "gpu: H100-PCIe\n", 4));
}

TEST(ClusterAssembly, MeasuredPairsReplacePriorsAndTheRestAreListed) {
  Fixture f;
  LinkCache cache;
  cache.pairs = {pair("jwb01", "jwb02", 45.5, 4.5, kNow - 3600), pair("jwb02", "jwb04", 20, 6, kNow - 3600),
                 pair("jwb01", "elsewhere", 1, 1, kNow)};
  NodeMeasurement node;
  node.name = "jwb03";
  node.measured_at_unix_seconds = kNow;
  node.gpus = 4;
  node.bandwidth_bytes_per_second.assign(16, 90e9);
  node.latency_seconds.assign(16, 2e-6);
  cache.nodes = {node};
  const LinkTable table = link_table_of(cache);
  f.input.cache = &table;
  auto assembled = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(assembled.ok()) << assembled.error().message;
  const Cluster& cluster = assembled->cluster;
  EXPECT_DOUBLE_EQ(cluster.inter_node.at(1, 0).bandwidth_bytes_per_second, 45.5e9);
  EXPECT_DOUBLE_EQ(cluster.inter_node.at(0, 1).latency_seconds, 4.5e-6);
  EXPECT_TRUE(cluster.inter_node.at(0, 1).measured);
  EXPECT_TRUE(cluster.inter_node.at(3, 1).measured);
  EXPECT_FALSE(cluster.inter_node.at(0, 2).measured);
  EXPECT_EQ(assembled->measured_node_pairs, 2);
  EXPECT_EQ(assembled->assumed_node_pairs, 4);
  EXPECT_EQ(assembled->measured_nodes, 1);
  EXPECT_DOUBLE_EQ(cluster.intra_node[2].at(0, 1).bandwidth_bytes_per_second, 90e9);
  EXPECT_TRUE(cluster.intra_node[2].at(0, 1).measured);
  EXPECT_FALSE(cluster.intra_node[0].at(0, 1).measured);
  std::string all;
  for (const auto& line : assembled->links_assumed) all += line + "\n";
  EXPECT_NE(all.find("jwb01-jwb03: not in the link cache, 80.0 GB/s assumed"), std::string::npos) << all;
  EXPECT_EQ(all.find("jwb01-jwb02"), std::string::npos) << all;
  EXPECT_NE(all.find("3 of 4 nodes: GPU-to-GPU links inside the node assumed"), std::string::npos) << all;
}

// Issue 18: which rail each GPU uses comes from hwloc; what a flow between rails costs from the
// site's fabric prior until the probe's cross-rail sample of the job's pairs replaces it.
TEST(ClusterAssembly, RailsComeFromHwlocAndTheCrossRailSampleReplacesTheFabricPrior) {
  Fixture f;
  auto prior = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(prior.ok()) << prior.error().message;
  EXPECT_EQ(prior->cluster.rails.rail_of_local_gpu, nearest_nic_of_gpus(f.juwels));
  EXPECT_DOUBLE_EQ(prior->cluster.rails.spine_bandwidth_fraction, 0.75);  // switch_level_factors[1] by default
  EXPECT_FALSE(prior->cluster.rails.measured);

  LinkCache cache;
  cache.pairs = {pair("jwb01", "jwb02", 90, 5, kNow), pair("jwb02", "jwb03", 90, 5, kNow), pair("jwb03", "jwb04", 90, 5, kNow)};
  const double crossed[] = {20, 22, 30};  // GB/s against 24 GB/s on one rail
  for (size_t i = 0; i < 3; ++i) {
    cache.pairs[i].rail_bandwidth_bytes_per_second = 24e9;
    cache.pairs[i].rail_latency_seconds = 5e-6;
    cache.pairs[i].cross_rail_bandwidth_bytes_per_second = crossed[i] * 1e9;
    cache.pairs[i].cross_rail_latency_seconds = 6e-6;
  }
  const LinkTable table = link_table_of(cache);
  f.input.cache = &table;
  auto measured = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(measured.ok()) << measured.error().message;
  const RailFabric& rails = measured->cluster.rails;
  EXPECT_DOUBLE_EQ(rails.spine_bandwidth_fraction, 22.0 / 24.0);  // the median; 30/24 would exceed aligned
  EXPECT_NEAR(rails.spine_extra_latency_seconds, 1e-6, 1e-15);
  EXPECT_TRUE(rails.measured);

  SiteConfig rail_only = site_with("priors:\n  fabric: rail-only\n");
  f.input.cache = nullptr;
  auto assembled = assemble_cluster(f.input, rail_only);
  ASSERT_TRUE(assembled.ok()) << assembled.error().message;
  EXPECT_EQ(assembled->cluster.rails.spine_bandwidth_fraction, 0.0);
  EXPECT_TRUE(assembled->cluster.rails.pxn);
}

// How many NICs each GPU drives: NCCL's count from hwloc's PCIe tree where the job's NICs are the
// ones hwloc saw (JUWELS: one beside each A100; an AWS p5: four beside each H100), else the site's
// rails over the GPUs (a login node planning for 32 EFA NICs of 100 Gb/s). `explain` says it.
TEST(ClusterAssembly, EachGpuDrivesTheNicsNcclGivesIt) {
  Fixture f;
  auto juwels = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(juwels.ok()) << juwels.error().message;
  EXPECT_EQ(juwels->cluster.rails.nics_per_gpu, 1);
  EXPECT_EQ(juwels->cluster.nics_per_sending_gpu(), 1);

  NodeInspection p5;
  p5.gpus.assign(8, InspectedGpu{"", 0, "H100-SXM", 0});
  p5.nics.resize(32);
  for (int gpu = 0; gpu < 8; ++gpu) {
    std::vector<PcieDistance> row(32, PcieDistance::sys);
    for (int nic = 4 * gpu; nic < 4 * gpu + 4; ++nic) row[static_cast<size_t>(nic)] = PcieDistance::pix;
    p5.gpu_nic_distance.push_back(row);
  }
  f.input.local = &p5;
  auto hwloc = assemble_cluster(f.input, site_with("priors:\n  network: efa\n"));
  ASSERT_TRUE(hwloc.ok()) << hwloc.error().message;
  EXPECT_EQ(hwloc->cluster.nics_per_node, 32);
  EXPECT_EQ(hwloc->cluster.rails.nics_per_gpu, 4);
  EXPECT_EQ(hwloc->cluster.rail_of(1), 4);  // its nearest NIC: the first of its four
  EXPECT_NE(std::find(hwloc->notes.begin(), hwloc->notes.end(),
                      "each GPU sends on 4 NICs (the NICs nearest it, hwloc), as NCCL spreads a GPU's channels"),
            hwloc->notes.end());

  const NodeInspection login;
  f.input.local = &login;
  f.input.gpus_per_node = 8;
  auto priors = assemble_cluster(f.input, site_with("gpu: H100-SXM\npriors:\n  nic_gbit_per_s: 100\n  rails: 32\n"));
  ASSERT_TRUE(priors.ok()) << priors.error().message;
  EXPECT_EQ(priors->cluster.rails.nics_per_gpu, 0);
  // Without priors.rails a login node knows of no NIC: one, and the note says how to give the count.
  auto one_nic = assemble_cluster(f.input, site_with("gpu: H100-SXM\n"));
  ASSERT_TRUE(one_nic.ok()) << one_nic.error().message;
  EXPECT_EQ(one_nic->cluster.nics_per_node, 1);
  EXPECT_NE(std::find(one_nic->notes.begin(), one_nic->notes.end(),
                      "1 rail(s) per node from the default (no NIC found, priors.rails unset): every GPU's flows share "
                      "one NIC; set priors.rails to the NICs a node has (a DGX H100 has 8, an AWS p5 32)"),
            one_nic->notes.end());
  EXPECT_EQ(priors->cluster.nics_per_sending_gpu(), 4);
  EXPECT_NE(std::find(priors->notes.begin(), priors->notes.end(),
                      "each GPU sends on 4 NICs (32 NICs over 8 GPUs), as NCCL spreads a GPU's channels"),
            priors->notes.end());
}

// priors.network reaches the cluster as its collective scaling; the default is InfiniBand's.
TEST(ClusterAssembly, NetworkKindGivesTheCollectiveScaling) {
  Fixture f;
  auto plain = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->cluster.collective_scaling.contention_exponent, 0.0);
  auto efa = assemble_cluster(f.input, site_with("priors:\n  network: efa\n"));
  ASSERT_TRUE(efa.ok()) << efa.error().message;
  EXPECT_EQ(efa->cluster.collective_scaling.contention_exponent,
            collective_scaling_of(NetworkKind::efa).contention_exponent);
  EXPECT_GT(efa->cluster.collective_scaling.contention_exponent, 0.0);
}

// Issue 14: where the link cache holds pipette-probe --collectives' curve, the collective scaling
// comes from it: the all-reduce bus bandwidth over n nodes relative to 2 nodes. The test cache
// (tests/data/link-cache/falling-collectives.yaml) falls as EFA's published curve does, so a DP
// reduction over the 8 nodes takes longer than on the same measured pairs without the curve; without
// the curve the scaling is InfiniBand's prior, bit for bit.
TEST(ClusterAssembly, MeasuredCollectiveCurveReplacesThePrior) {
  Fixture f;
  f.input.node_names = {"jwb01", "jwb02", "jwb03", "jwb04", "jwb05", "jwb06", "jwb07", "jwb08"};
  auto cache = read_link_cache(PIPETTE_SOURCE_DIR "/tests/data/link-cache/falling-collectives.yaml");
  ASSERT_TRUE(cache.ok()) << cache.error().message;
  const LinkTable with_curve = link_table_of(*cache);
  LinkCache pairs_only = *cache;
  pairs_only.collectives.clear();
  const LinkTable without_curve = link_table_of(pairs_only);

  f.input.cache = &without_curve;
  auto prior = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(prior.ok()) << prior.error().message;
  const CollectiveScaling infiniband = collective_scaling_of(NetworkKind::infiniband);
  EXPECT_EQ(prior->cluster.collective_scaling.contention_exponent, infiniband.contention_exponent);
  EXPECT_TRUE(prior->cluster.collective_scaling.measured.empty());
  EXPECT_EQ(prior->measured_node_pairs, 28);

  f.input.cache = &with_curve;
  auto measured = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(measured.ok()) << measured.error().message;
  const CollectiveScaling& scaling = measured->cluster.collective_scaling;
  ASSERT_EQ(scaling.measured.size(), 2u);
  EXPECT_DOUBLE_EQ(scaling.bandwidth_factor(4), 160.14 / 361.75);
  EXPECT_DOUBLE_EQ(scaling.bandwidth_factor(8), 99.56 / 361.75);
  EXPECT_GT(scaling.contention_exponent, 0.5);  // the fit continues the fall beyond 8 nodes
  bool noted = false;
  for (const std::string& note : measured->notes) noted |= note.find("collective scaling: measured by pipette-probe --collectives") == 0;
  EXPECT_TRUE(noted);

  // A DP-heavy plan: dp = 32 over the 8 nodes x 4 GPUs, 4 GB of gradients per GPU.
  ParallelConfig config;
  config.dp = 32;
  WorkProfile work;
  work.num_microbatches = 1;
  StageWork stage;
  stage.gradient_bytes_per_gpu = 4e9;
  work.stages.push_back(stage);
  Placement placement;
  for (int gpu = 0; gpu < 32; ++gpu) placement.gpu_of_rank.push_back(gpu);
  const double dp_prior = communication_times(prior->cluster, config, work, placement).dp_seconds[0];
  const double dp_measured = communication_times(measured->cluster, config, work, placement).dp_seconds[0];
  EXPECT_GT(dp_measured, 2 * dp_prior) << dp_prior << " s without the curve, " << dp_measured << " s with it";
}

// The curve counts only with its 2-node point (the pair its factors are relative to), and its
// points age like links: past links.max_age_hours the prior is back, and a note says why.
TEST(ClusterAssembly, UnusableCollectiveCurveFallsBackToThePriorWithANote) {
  Fixture f;
  const auto point = [](int nodes, double gb_per_s, std::int64_t at) {
    CollectiveMeasurement entry;
    entry.nodes = nodes;
    entry.measured_at_unix_seconds = at;
    entry.message_bytes = 268435456;
    entry.all_reduce_bus_bytes_per_second = entry.all_gather_bus_bytes_per_second = gb_per_s * units::gigabyte;
    return entry;
  };
  const auto scaling_and_note = [&](const std::vector<CollectiveMeasurement>& curve, const std::string& expected) {
    LinkCache cache;
    cache.collectives = curve;
    const LinkTable table = link_table_of(cache);
    f.input.cache = &table;
    auto assembled = assemble_cluster(f.input, f.site);
    EXPECT_TRUE(assembled.ok());
    bool noted = false;
    for (const std::string& note : assembled->notes) noted |= note.find(expected) != std::string::npos;
    EXPECT_TRUE(noted) << expected;
    return assembled->cluster.collective_scaling;
  };
  EXPECT_TRUE(scaling_and_note({point(4, 100, kNow), point(8, 50, kNow)}, "needs the 2-node point").measured.empty());
  EXPECT_TRUE(scaling_and_note({point(2, 100, kNow)}, "at least one larger count").measured.empty());
  f.site.staleness = {1 * kDay, 2 * kDay, 30 * kDay};
  EXPECT_TRUE(scaling_and_note({point(2, 100, kNow - 40 * kDay), point(8, 50, kNow)}, "past links.max_age_hours").measured.empty());
  // Stale but not expired: blended toward the prior (factor 1 on InfiniBand) with its weight.
  const CollectiveScaling blended = scaling_and_note({point(2, 100, kNow - 3 * kDay), point(8, 50, kNow)}, "stale, blended");
  ASSERT_EQ(blended.measured.size(), 1u);
  EXPECT_NEAR(blended.bandwidth_factor(8), std::pow(0.5, staleness_weight(f.site.staleness, 3 * kDay)), 1e-12);
}

TEST(ClusterAssembly, StaleMeasurementsBlendTowardThePrior) {
  Fixture f;
  f.site.staleness = {1 * kDay, 2 * kDay, 30 * kDay};
  LinkCache cache;
  cache.pairs = {pair("jwb01", "jwb02", 40, 10, kNow - static_cast<std::int64_t>(5 * kDay)),   // two half-lives
                 pair("jwb03", "jwb04", 40, 10, kNow - static_cast<std::int64_t>(40 * kDay))}; // past max age
  const LinkTable table = link_table_of(cache);
  f.input.cache = &table;
  auto assembled = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(assembled.ok()) << assembled.error().message;
  const Link& blended = assembled->cluster.inter_node.at(0, 1);
  EXPECT_NEAR(blended.bandwidth_bytes_per_second, std::pow(40e9, 0.25) * std::pow(80e9, 0.75), 1e3);
  EXPECT_TRUE(blended.measured);
  const Link& ignored = assembled->cluster.inter_node.at(2, 3);
  EXPECT_DOUBLE_EQ(ignored.bandwidth_bytes_per_second, 80e9);
  EXPECT_FALSE(ignored.measured);
  EXPECT_EQ(assembled->measured_node_pairs, 1);
  std::string all;
  for (const auto& line : assembled->links_assumed) all += line + "\n";
  EXPECT_NE(all.find("jwb01-jwb02: measured 5.0 days ago, weight 0.250, blended toward the prior"), std::string::npos) << all;
  EXPECT_NE(all.find("jwb03-jwb04: measured 40.0 days ago, weight 0.000, ignored"), std::string::npos) << all;
}

TEST(ClusterAssembly, SwitchTreeScalesPriorsPerLevel) {
  Fixture f;
  auto tree = parse_topology_conf("SwitchName=leaf1 Nodes=jwb[01-02]\nSwitchName=leaf2 Nodes=jwb03\n"
                                  "SwitchName=spine Switches=leaf[1-2]\n",
                                  "topology.conf");
  ASSERT_TRUE(tree.ok());
  f.site.priors.switch_level_factors = {1.0, 0.5};
  f.input.switches = &*tree;
  auto assembled = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(assembled.ok()) << assembled.error().message;
  EXPECT_DOUBLE_EQ(assembled->cluster.inter_node.at(0, 1).bandwidth_bytes_per_second, 80e9);  // same leaf
  EXPECT_DOUBLE_EQ(assembled->cluster.inter_node.at(0, 2).bandwidth_bytes_per_second, 40e9);  // via the spine
  EXPECT_DOUBLE_EQ(assembled->cluster.inter_node.at(0, 3).bandwidth_bytes_per_second, 40e9);  // jwb04 not in the tree
}

TEST(ClusterAssembly, NvswitchNodesUseTheNvlinkMatrix) {
  const NodeInspection dgx2 = inspect("hwloc-nvidia-dgx2-v100-nvswitch.xml");
  SiteConfig site;
  AssemblyInput input;
  input.node_names = {"dgx1", "dgx2"};
  input.local = &dgx2;
  input.reference_time_unix_seconds = kNow;
  auto assembled = assemble_cluster(input, site);
  ASSERT_TRUE(assembled.ok()) << assembled.error().message;
  EXPECT_EQ(assembled->cluster.gpus_per_node, 16);
  EXPECT_EQ(assembled->cluster.nics_per_node, 1);  // no NIC in the file, no priors.rails
  EXPECT_EQ(assembled->cluster.gpu.name, "V100-SXM2-32GB");
  EXPECT_DOUBLE_EQ(assembled->cluster.intra_node[1].at(3, 12).bandwidth_bytes_per_second, 150e9 * 0.8);
  // What hwloc counted is the board; a site's board_gpus, for uninspected nodes, neither changes
  // nor refuses it.
  SiteConfig misdescribed;
  misdescribed.priors.board_gpus = 8;
  auto inspected = assemble_cluster(input, misdescribed);
  ASSERT_TRUE(inspected.ok()) << inspected.error().message;
  EXPECT_DOUBLE_EQ(inspected->cluster.intra_node[1].at(3, 12).bandwidth_bytes_per_second, 150e9 * 0.8);
}

// Two nodes of 8 H100 SXM as the CLI on a login node assembles them: no NVIDIA GPU inspected.
Result<AssembledCluster> login_node_h100_pair() {
  const NodeInspection none = inspect("mpibind-tioga-4xMI250X-xgmi-slingshot.xml");
  AssemblyInput input;
  input.node_names = {"n1", "n2"};
  input.local = &none;
  input.gpus_per_node = 8;
  return assemble_cluster(input, site_with("gpu: H100-SXM\npriors:\n  rails: 8\n  nic_gbit_per_s: 400\n"));
}

TEST(ClusterAssembly, GpuModelAndCountComeFromTheRequestOrTheSiteWithoutLocalGpus) {
  auto assembled = login_node_h100_pair();
  ASSERT_TRUE(assembled.ok()) << assembled.error().message;
  EXPECT_EQ(assembled->cluster.gpu.name, "H100-SXM");
  EXPECT_EQ(assembled->cluster.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(assembled->cluster.inter_node.at(0, 1).bandwidth_bytes_per_second, 8 * 50e9 * 0.8);
  // Nothing inspected (a login node): an 8-GPU H100 SXM board is NVSwitch all-to-all, every pair at
  // the GPU's 18 NVLinks × 25 GB/s, 80% attained (~360 GB/s, as nccl-tests measure on DGX H100).
  EXPECT_DOUBLE_EQ(assembled->cluster.intra_node[0].at(0, 1).bandwidth_bytes_per_second, 450e9 * 0.8);
  EXPECT_NE(assembled->links_assumed.back().find("NVSwitch all-to-all (GPU catalog)"), std::string::npos)
      << assembled->links_assumed.back();
}

// A job on part of a node, as the CLI on a login node assembles it: the board's size, not the
// job's GPU count, decides how its GPUs are wired (priors.board_gpus).
Result<AssembledCluster> login_node_partial(const std::string& gpu, int job_gpus_per_node, int board_gpus) {
  const NodeInspection none = inspect("mpibind-tioga-4xMI250X-xgmi-slingshot.xml");
  AssemblyInput input;
  input.node_names = {"n1"};
  input.local = &none;
  input.gpus_per_node = job_gpus_per_node;
  return assemble_cluster(input, site_with("gpu: " + gpu + "\npriors:\n  board_gpus: " + std::to_string(board_gpus) + "\n"));
}

TEST(ClusterAssembly, PartOfAnEightGpuNvswitchBoardIsPricedOnTheNvswitch) {
  // 4 GPUs of an 8-GPU HGX H100: every pair through the NVSwitches at the full 18 × 25 GB/s. NCCL's
  // ring on 2 to 8 GPUs of one 8× H100 SXM node measures 365-370 GB/s of bus bandwidth whatever the
  // count (NVIDIA/nccl issue #1455, NCCL_ALGO=RING): 450 × 0.8 = 360.
  auto eight = login_node_partial("H100-SXM", 4, 8);
  ASSERT_TRUE(eight.ok()) << eight.error().message;
  EXPECT_DOUBLE_EQ(eight->cluster.intra_node[0].at(0, 3).bandwidth_bytes_per_second, 450e9 * 0.8);
  EXPECT_NE(eight->links_assumed.back().find("boards of 8 GPUs are NVSwitch all-to-all"), std::string::npos)
      << eight->links_assumed.back();
  // Unset, the board is the job's 4 GPUs: the 4-GPU HGX H100, each pair on a third of the links.
  auto four = login_node_partial("H100-SXM", 4, 0);
  ASSERT_TRUE(four.ok()) << four.error().message;
  EXPECT_DOUBLE_EQ(four->cluster.intra_node[0].at(0, 3).bandwidth_bytes_per_second, 450e9 / 3 * 0.8);
  // 2 GPUs of a 4-GPU HGX A100 (JUWELS Booster, Perlmutter) still share 4 of their 12 links, not all 12.
  auto pair_of_four = login_node_partial("A100-40GB", 2, 4);
  ASSERT_TRUE(pair_of_four.ok()) << pair_of_four.error().message;
  EXPECT_DOUBLE_EQ(pair_of_four->cluster.intra_node[0].at(0, 1).bandwidth_bytes_per_second, 300e9 / 3 * 0.8);
  EXPECT_NE(pair_of_four->links_assumed.back().find("over the 3 other GPUs of its board"), std::string::npos)
      << pair_of_four->links_assumed.back();
  // A board smaller than the job is a site-file mistake.
  auto smaller = login_node_partial("H100-SXM", 8, 4);
  ASSERT_FALSE(smaller.ok());
  EXPECT_EQ(smaller.error().message,
            "site.yaml: priors.board_gpus is 4 but the job has 8 GPUs per node; set it to the GPUs one node's board holds "
            "(0: as many as the job uses)");
}

TEST(ClusterAssembly, LoginNodePricesNvswitchTensorParallelismByItsMessages) {
  // Issue 14: `pipette plan --model llama3-8b --nodes 'n[1-2]' --global-batch 128 --seq 4096 --fix
  // tp=2,pp=2,dp=4,mbs=1,vpp=1,recompute=none,sp=off,distopt=on` priced 1.29 s of TP communication
  // with the SXM links split over 7 peers. The message-size estimate: each micro-batch of a stage
  // all-reduces the 4096 × 4096 × 2 B = 33.6 MB activation 4 times per layer (2 forward, 2 backward)
  // over its 16 layers, plus once for the embedding (stage 0); a ring of 2 puts 2(t−1)/t = 1× that
  // on the wire; 128 / 4 = 32 micro-batches; at 360 GB/s: 32 × 65 × 33.6 MB / 360 GB/s = 0.194 s.
  auto assembled = login_node_h100_pair();
  ASSERT_TRUE(assembled.ok()) << assembled.error().message;
  auto model = load_model("llama3-8b", {PIPETTE_SOURCE_DIR "/etc/models"});
  ASSERT_TRUE(model.ok()) << model.error().message;
  TrainingSpec training;
  training.global_batch_sequences = 128;
  training.sequence_length = 4096;
  ParallelConfig config;
  config.tp = 2;
  config.pp = 2;
  config.dp = 4;
  config.distributed_optimizer = true;
  const WorkProfile work = profile_work(*model, training, assembled->cluster.gpu, config);
  const CommunicationTimes times = communication_times(assembled->cluster, config, work, default_placement(config));
  const double estimate = 32 * 65 * (4096.0 * 4096 * 2) / 360e9;
  EXPECT_NEAR(estimate, 0.194, 0.001);
  EXPECT_NEAR(work.num_microbatches * times.tp_seconds[0][0], estimate, 0.2 * estimate);
}

// NVLink SHARP runs all-reduces inside an H100 node faster than a ring, and a measured pair is
// what a ring attains; a prior stays one figure for every collective (issue 14's NVSwitch example
// above), so the speedup applies only where every node's GPU pairs were measured.
TEST(ClusterAssembly, NvlinkSharpSpeedsUpAllReducesOverMeasuredPairsOnly) {
  auto login = login_node_h100_pair();
  ASSERT_TRUE(login.ok()) << login.error().message;
  EXPECT_DOUBLE_EQ(login->cluster.nvls_all_reduce_speedup, 1.0);

  const NodeInspection none = inspect("mpibind-tioga-4xMI250X-xgmi-slingshot.xml");
  const auto assembled_with = [&](const std::vector<std::string>& measured, const std::string& gpu) {
    LinkCache cache;
    for (const std::string& name : measured) {
      NodeMeasurement node;
      node.name = name;
      node.measured_at_unix_seconds = kNow;
      node.gpus = 8;
      node.bandwidth_bytes_per_second.assign(64, 250e9);
      node.latency_seconds.assign(64, 3e-6);
      cache.nodes.push_back(node);
    }
    const LinkTable table = link_table_of(cache);
    AssemblyInput input;
    input.node_names = {"n1", "n2"};
    input.local = &none;
    input.gpus_per_node = 8;
    input.cache = &table;
    input.reference_time_unix_seconds = kNow;
    return assemble_cluster(input, site_with("gpu: " + gpu + "\npriors:\n  rails: 8\n"));
  };
  auto both = assembled_with({"n1", "n2"}, "H100-SXM");
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_DOUBLE_EQ(both->cluster.nvls_all_reduce_speedup, 2 * 0.85 * 15 / 16);
  std::string notes;
  for (const auto& note : both->notes) notes += note + "\n";
  EXPECT_NE(notes.find("all-reduces inside a node: NVLink SHARP at 1.59x the ring its measured GPU pairs give"),
            std::string::npos)
      << notes;
  auto one = assembled_with({"n1"}, "H100-SXM");
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_DOUBLE_EQ(one->cluster.nvls_all_reduce_speedup, 1.0);
  auto a100 = assembled_with({"n1", "n2"}, "A100-80GB");
  ASSERT_TRUE(a100.ok()) << a100.error().message;
  EXPECT_DOUBLE_EQ(a100->cluster.nvls_all_reduce_speedup, 1.0);
}

TEST(ClusterAssembly, ErrorsSayWhatToFix) {
  Fixture f;
  const NodeInspection none = inspect("mpibind-tioga-4xMI250X-xgmi-slingshot.xml");
  struct Case {
    std::function<void(AssemblyInput&, SiteConfig&)> change;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {[](AssemblyInput& in, SiteConfig&) { in.node_names.clear(); }, "the node list is empty"},
      {[](AssemblyInput& in, SiteConfig&) { in.node_names = {"a", "b", "a"}; }, "node a appears twice"},
      {[](AssemblyInput& in, SiteConfig&) { in.gpus_per_node = 8; }, "asks for 8 GPUs per node but this node has 4"},
      {[](AssemblyInput& in, SiteConfig&) { in.gpu = "Z100"; }, "GPU model 'Z100' (from the requested GPU) is not in the catalog; use one of V100-SXM2-16GB, "
       "V100-SXM2-32GB, A100-40GB, A100-80GB, H100-SXM, H100-PCIe, H200, L40S, B200, or describe it under `gpus:`"},
      {[&](AssemblyInput& in, SiteConfig&) { in.local = &none; }, "no GPU model: this node shows no NVIDIA GPU and the site file sets no `gpu:`"},
      {[&](AssemblyInput& in, SiteConfig& site) { in.local = &none; site.gpu = "A100-80GB"; }, "GPUs per node unknown"},
  };
  for (const auto& c : cases) {
    AssemblyInput input = f.input;
    SiteConfig site = f.site;
    c.change(input, site);
    auto assembled = assemble_cluster(input, site);
    ASSERT_FALSE(assembled.ok()) << c.expected;
    EXPECT_NE(assembled.error().message.find(c.expected), std::string::npos) << assembled.error().message;
  }
}

TEST(ClusterAssembly, SameInputsGiveBitIdenticalClusters) {
  Fixture f;
  LinkCache cache;
  cache.pairs = {pair("jwb01", "jwb02", 40, 10, kNow - static_cast<std::int64_t>(20 * kDay))};
  const LinkTable table = link_table_of(cache);
  f.input.cache = &table;
  auto first = assemble_cluster(f.input, f.site);
  auto second = assemble_cluster(f.input, f.site);
  ASSERT_TRUE(first.ok() && second.ok());
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      EXPECT_EQ(std::memcmp(&first->cluster.inter_node.at(a, b), &second->cluster.inter_node.at(a, b), sizeof(double) * 2), 0);
}

}  // namespace
}  // namespace pipette
