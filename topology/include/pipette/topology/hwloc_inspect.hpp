#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipette/core/result.hpp"

namespace pipette {

// What hwloc shows of one node, as Debian's hwloc 2.9 sees it (no CUDA/NVML plugin): NVIDIA GPUs
// are PCI devices (vendor 0x10de, class 0x0302 3D or 0x0300 VGA), NVSwitches PCI class 0x0680 of
// vendor 0x10de, NICs are OpenFabrics OS devices (InfiniBand or RoCE).

// nvidia-smi topo -m's classes, nearest first: same PCIe switch (PIX), several switches (PXB),
// same host bridge (PHB), same NUMA node (NODE), across the SMP interconnect (SYS).
enum class PcieDistance { pix, pxb, phb, node, sys };
const char* to_string(PcieDistance distance);

enum class GpuInterconnect { pcie, nvlink, nvswitch };
const char* to_string(GpuInterconnect interconnect);

struct InspectedGpu {
  std::string pci_bus_id;      // "0000:07:00.0"
  std::uint16_t pci_device_id = 0;
  std::string model;           // catalog name from the device id ("A100-40GB"); "" when unknown
  int numa_node = -1;          // OS index of the nearest NUMA node; -1 unknown
};

struct InspectedNic {
  std::string name;            // OpenFabrics device, "mlx5_0"
  std::string pci_bus_id;
  int numa_node = -1;
};

struct NodeInspection {
  std::vector<InspectedGpu> gpus;  // in PCI bus order, which is CUDA's default enumeration order
  std::vector<InspectedNic> nics;
  std::vector<std::vector<PcieDistance>> gpu_nic_distance;  // [gpu][nic]
  int nvswitches = 0;
  GpuInterconnect interconnect = GpuInterconnect::pcie;
  // gpus × gpus, row-major, from hwloc's NVLinkBandwidth distances; empty when absent.
  std::vector<double> nvlink_bandwidth_bytes_per_second;
};

// The rail (index into node.nics) each GPU's inter-node traffic uses: its nearest NIC by PCIe
// distance, as NCCL picks a GPU's NIC. Where several NICs are equally near (two NICs and two GPUs
// under one PCIe switch), the one that serves the fewest GPUs so far, then the lowest index, so
// GPUs spread over NICs as NCCL's channels do. Empty when the node has no NIC or no GPU.
std::vector<int> nearest_nic_of_gpus(const NodeInspection& node);

// The NICs one GPU spreads its channels over, as NCCL counts them (src/graph/topo.cc @5067397c
// l.2039-2075 ncclTopoGetLocalNetType, NCCL_NETDEVS_POLICY AUTO): the NICs nearest the GPU over
// the GPUs nearest the first of them, rounded up; the fewest of any GPU. 1 on a DGX (one NIC beside
// each GPU, storage NICs farther), 4 where four NICs share a GPU's PCIe switch (an AWS p5). 0 when
// the node has no NIC or no GPU.
int nics_per_gpu(const NodeInspection& node);

// The machine this runs on. Zero GPUs is a valid answer (a login node), not an error.
Result<NodeInspection> inspect_local_node();
// An `lstopo --of xml` export.
Result<NodeInspection> inspect_topology_xml(const std::string& path);

// Catalog name for an NVIDIA PCI device id, "" when unknown.
std::string gpu_model_from_pci_device_id(std::uint16_t device_id);

// A short stable description of the hardware that matters for links, stored in the link cache:
// "4xA100-40GB/nvlink/4xnic".
std::string hardware_fingerprint(const NodeInspection& node);

}  // namespace pipette
