#include "pipette/topology/hwloc_inspect.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

namespace pipette {
namespace {

using D = PcieDistance;

// What each file holds, checked against `lstopo-no-graphics --input FILE --whole-io`.
struct Expected {
  std::string fingerprint;
  int nvswitches;
  std::vector<int> gpu_numa;              // per GPU in PCI bus order
  std::vector<std::string> nic_names;     // in PCI bus order
  std::vector<int> nic_numa;
  std::vector<std::vector<D>> gpu_nic;    // [gpu][nic]
};

const std::vector<D> kNoNics;

// JUWELS Booster / JURECA-DC: each GPU shares a PCIe switch (PIX) with the NIC on its NUMA node.
const std::vector<std::vector<D>> kOneSwitchPerGpuNicPair = {
    {D::pix, D::sys, D::sys, D::sys}, {D::sys, D::pix, D::sys, D::sys},
    {D::sys, D::sys, D::pix, D::sys}, {D::sys, D::sys, D::sys, D::pix}};

const std::map<std::string, Expected>& expectations() {
  static const std::map<std::string, Expected> table = {
      {"hwloc-nvidia-dgx2-v100-nvswitch.xml",
       {"16xV100-SXM2-32GB/nvswitch/0xnic", 12, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {}, {},
        std::vector<std::vector<D>>(16, kNoNics)}},
      {"hwloc-power8-4gpu-nvlink.xml",
       {"4xP100-SXM2-16GB/nvlink/0xnic", 0, {0, 0, 1, 1}, {}, {}, std::vector<std::vector<D>>(4, kNoNics)}},
      {"mpibind-lassen-power9-4xV100-nvml-4xEDR.xml",
       {"4xV100-SXM2-16GB/pcie/4xnic", 0, {0, 0, 8, 8}, {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}, {0, 0, 8, 8},
        {{D::node, D::node, D::sys, D::sys}, {D::node, D::node, D::sys, D::sys},
         {D::sys, D::sys, D::node, D::node}, {D::sys, D::sys, D::node, D::node}}}},
      {"mpibind-aws-g4dn-metal-8xT4.xml",
       {"8xT4/pcie/1xnic", 0, {0, 0, 0, 0, 1, 1, 1, 1}, {"rdmap197s0"}, {1},
        {{D::sys}, {D::sys}, {D::sys}, {D::sys}, {D::node}, {D::node}, {D::node}, {D::node}}}},
      {"mpibind-tioga-4xMI250X-xgmi-slingshot.xml", {"0xnone/pcie/0xnic", 0, {}, {}, {}, {}}},
      {"psmgmt-juwels-booster-4xA100-4xHDR-hwloc22.xml",
       {"4xA100-40GB/pcie/4xnic", 0, {3, 1, 7, 5}, {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}, {3, 1, 7, 5},
        kOneSwitchPerGpuNicPair}},
      {"psmgmt-juwels-booster-4xA100-4xHDR-hwloc1.xml",
       {"4xA100-40GB/pcie/4xnic", 0, {3, 1, 7, 5}, {"mlx5_1", "mlx5_0", "mlx5_3", "mlx5_2"}, {3, 1, 7, 5},
        kOneSwitchPerGpuNicPair}},
      {"psmgmt-jureca-dc-gpu-4xA100-4xHDR-hwloc22.xml",
       {"4xA100-40GB/pcie/4xnic", 0, {3, 1, 7, 5}, {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}, {3, 1, 7, 5},
        kOneSwitchPerGpuNicPair}},
  };
  return table;
}

std::string data_file(const std::string& name) { return PIPETTE_SOURCE_DIR "/tests/data/hwloc/" + name; }

TEST(HwlocInspect, EveryFileMatchesWhatLstopoShows) {
  for (const auto& [file, expected] : expectations()) {
    SCOPED_TRACE(file);
    auto node = inspect_topology_xml(data_file(file));
    ASSERT_TRUE(node.ok()) << node.error().message;
    EXPECT_EQ(hardware_fingerprint(*node), expected.fingerprint);
    EXPECT_EQ(node->nvswitches, expected.nvswitches);
    ASSERT_EQ(node->gpus.size(), expected.gpu_numa.size());
    for (std::size_t g = 0; g < node->gpus.size(); ++g) EXPECT_EQ(node->gpus[g].numa_node, expected.gpu_numa[g]) << g;
    ASSERT_EQ(node->nics.size(), expected.nic_names.size());
    for (std::size_t n = 0; n < node->nics.size(); ++n) {
      EXPECT_EQ(node->nics[n].name, expected.nic_names[n]);
      EXPECT_EQ(node->nics[n].numa_node, expected.nic_numa[n]);
    }
    ASSERT_EQ(node->gpu_nic_distance.size(), expected.gpu_nic.size());
    for (std::size_t g = 0; g < expected.gpu_nic.size(); ++g)
      for (std::size_t n = 0; n < expected.gpu_nic[g].size(); ++n)
        EXPECT_EQ(to_string(node->gpu_nic_distance[g][n]), to_string(expected.gpu_nic[g][n])) << "gpu " << g << " nic " << n;
  }
}

TEST(HwlocInspect, EverySharedTopologyHasExpectationsAndAnIdenticalCopy) {
  const std::filesystem::path shared = PIPETTE_SHARED_DIR "/topologies/hwloc";
  if (!std::filesystem::is_directory(shared)) GTEST_SKIP() << shared << " is absent; the copies in tests/data are tested";
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(shared)) {
    const std::string name = entry.path().filename().string();
    names.insert(name);
    EXPECT_TRUE(expectations().count(name)) << name << " has no expectations in this test";
    EXPECT_EQ(std::filesystem::file_size(entry.path()), std::filesystem::file_size(data_file(name))) << name;
  }
  EXPECT_EQ(names.size(), expectations().size());
}

TEST(HwlocInspect, NvswitchMatrixGivesEveryGpuPairItsSwitchBandwidth) {
  auto node = inspect_topology_xml(data_file("hwloc-nvidia-dgx2-v100-nvswitch.xml"));
  ASSERT_TRUE(node.ok());
  ASSERT_EQ(node->nvlink_bandwidth_bytes_per_second.size(), 256u);
  for (int from = 0; from < 16; ++from)
    for (int to = 0; to < 16; ++to)
      EXPECT_EQ(node->nvlink_bandwidth_bytes_per_second[from * 16 + to], from == to ? 0 : 150e9) << from << "," << to;
  EXPECT_EQ(node->gpus[0].pci_device_id, 0x1db8);
  EXPECT_EQ(node->gpus[0].pci_bus_id, "0000:34:00.0");
}

TEST(HwlocInspect, DirectNvlinkMatrixKeepsOnlyLinkedPairs) {
  auto node = inspect_topology_xml(data_file("hwloc-power8-4gpu-nvlink.xml"));
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->interconnect, GpuInterconnect::nvlink);
  const std::vector<double> expected = {0, 40e9, 0, 0, 40e9, 0, 0, 0, 0, 0, 0, 40e9, 0, 0, 40e9, 0};
  EXPECT_EQ(node->nvlink_bandwidth_bytes_per_second, expected);
}

TEST(HwlocInspect, WithoutNvmlThereIsNoMatrix) {
  auto node = inspect_topology_xml(data_file("psmgmt-juwels-booster-4xA100-4xHDR-hwloc22.xml"));
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(node->nvlink_bandwidth_bytes_per_second.empty());
  EXPECT_EQ(node->gpus[0].model, "A100-40GB");
}

// Issue 18: each GPU's rail is its nearest NIC. JUWELS Booster and JURECA-DC pair every A100
// with one HDR NIC under its PCIe switch and see the others across the SMP interconnect; Lassen's
// V100s see both NICs of their socket at one distance, two GPUs per socket, and share them out.
TEST(HwlocInspect, EachGpuUsesItsNearestNic) {
  for (const char* file : {"psmgmt-juwels-booster-4xA100-4xHDR-hwloc22.xml", "psmgmt-jureca-dc-gpu-4xA100-4xHDR-hwloc22.xml",
                           "mpibind-lassen-power9-4xV100-nvml-4xEDR.xml"}) {
    auto node = inspect_topology_xml(data_file(file));
    ASSERT_TRUE(node.ok()) << node.error().message;
    const std::vector<int> rails = nearest_nic_of_gpus(*node);
    ASSERT_EQ(rails.size(), 4u) << file;
    for (size_t gpu = 0; gpu < rails.size(); ++gpu) {
      const auto& row = node->gpu_nic_distance[gpu];
      EXPECT_EQ(row[static_cast<size_t>(rails[gpu])], *std::min_element(row.begin(), row.end())) << file << " GPU " << gpu;
    }
    EXPECT_EQ(std::set<int>(rails.begin(), rails.end()).size(), 4u) << file << ": one NIC per GPU";
  }
  auto juwels = inspect_topology_xml(data_file("psmgmt-juwels-booster-4xA100-4xHDR-hwloc22.xml"));
  ASSERT_TRUE(juwels.ok());
  EXPECT_EQ(juwels->gpu_nic_distance[0][static_cast<size_t>(nearest_nic_of_gpus(*juwels)[0])], PcieDistance::pix);
  auto dgx2 = inspect_topology_xml(data_file("hwloc-nvidia-dgx2-v100-nvswitch.xml"));
  ASSERT_TRUE(dgx2.ok());
  EXPECT_TRUE(nearest_nic_of_gpus(*dgx2).empty());  // no NIC in the file
}

// NCCL's count of the NICs a GPU spreads its channels over (ncclTopoGetLocalNetType, src/graph/
// topo.cc @5067397c l.2039-2075): the NICs nearest the GPU over the GPUs nearest them, rounded up.
// Every real file here gives one: JUWELS pairs each A100 with its NIC, Lassen's two V100s of a
// socket share that socket's two NICs, the g4dn's eight T4s share one.
TEST(HwlocInspect, NicsPerGpuIsNcclsCount) {
  for (const char* file : {"psmgmt-juwels-booster-4xA100-4xHDR-hwloc22.xml", "mpibind-lassen-power9-4xV100-nvml-4xEDR.xml",
                           "mpibind-aws-g4dn-metal-8xT4.xml"}) {
    auto node = inspect_topology_xml(data_file(file));
    ASSERT_TRUE(node.ok()) << node.error().message;
    EXPECT_EQ(nics_per_gpu(*node), 1) << file;
  }
  auto dgx2 = inspect_topology_xml(data_file("hwloc-nvidia-dgx2-v100-nvswitch.xml"));
  ASSERT_TRUE(dgx2.ok());
  EXPECT_EQ(nics_per_gpu(*dgx2), 0);  // no NIC in the file
  // An AWS p5 as its PCIe tree places them (no XML of one is published): four EFA NICs under each
  // H100's PCIe switch, the other 28 across the host.
  NodeInspection p5;
  p5.gpus.resize(8);
  p5.nics.resize(32);
  for (int gpu = 0; gpu < 8; ++gpu) {
    std::vector<PcieDistance> row(32, PcieDistance::sys);
    for (int nic = 4 * gpu; nic < 4 * gpu + 4; ++nic) row[static_cast<size_t>(nic)] = PcieDistance::pix;
    p5.gpu_nic_distance.push_back(row);
  }
  EXPECT_EQ(nics_per_gpu(p5), 4);
  // Two GPUs under one switch with one NIC (an AWS p4d: 8 A100, 4 EFA NICs): they share it.
  NodeInspection p4d;
  p4d.gpus.resize(8);
  p4d.nics.resize(4);
  for (int gpu = 0; gpu < 8; ++gpu) {
    std::vector<PcieDistance> row(4, PcieDistance::sys);
    row[static_cast<size_t>(gpu / 2)] = PcieDistance::pix;
    p4d.gpu_nic_distance.push_back(row);
  }
  EXPECT_EQ(nics_per_gpu(p4d), 1);
}

TEST(HwlocInspect, ThisMachineInspectsWithoutError) {
  // The build machine has no GPU: zero GPUs is an answer, not an error.
  auto node = inspect_local_node();
  ASSERT_TRUE(node.ok()) << node.error().message;
  EXPECT_EQ(node->gpu_nic_distance.size(), node->gpus.size());
}

TEST(HwlocInspect, MissingOrInvalidXmlIsAnError) {
  auto missing = inspect_topology_xml("/nonexistent/node.xml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/node.xml"), std::string::npos);
  auto not_xml = inspect_topology_xml(PIPETTE_SOURCE_DIR "/tests/data/README.md");
  ASSERT_FALSE(not_xml.ok());
  EXPECT_NE(not_xml.error().message.find("README.md"), std::string::npos);
}

TEST(HwlocInspect, PciDeviceTable) {
  EXPECT_EQ(gpu_model_from_pci_device_id(0x20b2), "A100-80GB");
  EXPECT_EQ(gpu_model_from_pci_device_id(0x2330), "H100-SXM");
  EXPECT_EQ(gpu_model_from_pci_device_id(0x2335), "H200");
  EXPECT_EQ(gpu_model_from_pci_device_id(0x26b9), "L40S");
  EXPECT_EQ(gpu_model_from_pci_device_id(0x2901), "B200");
  EXPECT_EQ(gpu_model_from_pci_device_id(0x1db1), "V100-SXM2-16GB");
  EXPECT_EQ(gpu_model_from_pci_device_id(0xffff), "");
}

}  // namespace
}  // namespace pipette
