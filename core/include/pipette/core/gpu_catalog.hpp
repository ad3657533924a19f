#pragma once
#include <string_view>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

// GPUs the configurator knows by name, with vendor datasheet figures (dense, no sparsity).
const std::vector<GpuSpec>& gpu_catalog();

// Case-insensitive lookup by catalog name ("H100-SXM", "a100-80gb", ...); nullptr when unknown.
const GpuSpec* find_gpu(std::string_view name);

// How the GPUs of one node reach each other, as the vendor builds the board for this GPU model.
enum class IntraNodeFabric {
  pcie,           // PCIe cards (and bridges at most between pairs): every pair over PCIe
  nvlink_direct,  // SXM modules wired to each other: a GPU's NVLink links split over its peers
  nvswitch,       // SXM modules behind NVSwitches: every pair at the GPU's full NVLink rate
};
struct BoardFabric {
  IntraNodeFabric fabric = IntraNodeFabric::pcie;
  double pair_bytes_per_second = 0;  // nominal, one direction, between any two GPUs of the node
  double pcie_bytes_per_second = 0;  // the GPU's PCIe x16 rate (what pairs without NVLink get)
  double gpu_nvlink_bytes_per_second = 0;  // one GPU's aggregate NVLink rate; 0 without NVLink
  // Every pair of the board's GPUs has NVLinks of its own, no switch between them (Cluster::
  // intra_node_full_mesh says what that does to a ring): the 4-GPU SXM boards, not the DGX-1's 8.
  bool every_pair_wired = false;
  // How much faster NCCL's NVLink SHARP algorithm (NVLS) runs an all-reduce among GPUs of one node
  // than a ring over the same links (Cluster::nvls_all_reduce_speedup); 1 where the board's
  // NVSwitches cannot reduce in the switch.
  double nvls_all_reduce_speedup = 1;
};
// The fabric of a node with `gpus_per_node` GPUs of catalog model `gpu_name`:
//  - 8-GPU SXM boards of A100, H100, H200 and B200 (HGX/DGX) are NVSwitch all-to-all: any pair at
//    the GPU's full NVLink rate (A100 12 × 25 GB/s, H100/H200 18 × 25, B200 18 × 50);
//  - 4-GPU SXM boards (HGX A100 4-GPU, Redstone) wire each pair directly with a third of the links
//    (every_pair_wired), V100/P100 SXM2 (DGX-1 hybrid cube-mesh) split theirs over 4 of their 7
//    peers, priced as evenly split: nvlink_direct;
//  - PCIe cards (H100 PCIe, L40S, unknown GPUs) talk over PCIe.
BoardFabric board_fabric(std::string_view gpu_name, int gpus_per_node);

// Dense tensor-core peak for a training precision. fp8 falls back to 0 on GPUs without fp8
// tensor cores; callers treat 0 as "this GPU cannot run that precision".
double peak_flop_per_second(const GpuSpec& gpu, Precision precision);

}  // namespace pipette
