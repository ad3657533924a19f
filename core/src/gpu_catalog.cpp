#include "pipette/core/gpu_catalog.hpp"

#include <algorithm>
#include <cctype>

#include "pipette/core/units.hpp"

namespace pipette {

namespace {

constexpr double tflops = units::teraflop;
constexpr double gb_per_second = units::gigabyte;

GpuSpec make(const char* name, double memory_bytes, double fp32_tflops, double fp16_tflops, double bf16_tflops,
             double fp8_tflops, double hbm_gb_per_second, double attainable_16bit_matmul_fraction = 0) {
  return GpuSpec{name,
                 memory_bytes,
                 fp32_tflops * tflops,
                 fp16_tflops * tflops,
                 bf16_tflops * tflops,
                 fp8_tflops * tflops,
                 hbm_gb_per_second * gb_per_second,
                 attainable_16bit_matmul_fraction};
}

// Maximum achievable bf16 matmul FLOPS (the best shape mamf-finder.py found, operands not left in
// L2 between iterations) over the datasheet's dense peak: the "Maximum Achievable Matmul FLOPS
// comparison table" (BF16, v2) of Stas Bekman's ml-engineering book, github.com/stas00/ml-engineering
// compute/accelerator/README.md @b9e29720: A100 SXM 271.2 of 312 TF, H100 SXM 794.5 of 989 TF (the
// book's older v1 table: 267.9 and 792.1, the same ratio within 1%). H100 SXM cannot hold its boost
// clock under dense tensor-core load at 700 W; the same die given 900 W (GH200) reaches 83.6%.
constexpr double a100_sxm_attainable_16bit = 271.2 / 312;
constexpr double h100_sxm_attainable_16bit = 794.5 / 989;

// Memory is what the driver exposes (nvidia-smi "Total"), which is what the allocator can reach;
// the datasheet's "80GB" is 80 GiB of HBM of which the driver keeps a little. Peaks are the
// datasheets' dense tensor-core figures (the sparsity figures are 2x); fp32 is the non-tensor
// (CUDA core) rate since Megatron-style training does not run fp32 GEMMs on TF32 by default.
std::vector<GpuSpec> build_catalog() {
  const double mib = units::mebibyte;
  return {
      // NVIDIA Tesla V100 datasheet (SXM2): 15.7 TF fp32, 125 TF fp16 tensor, 900 GB/s HBM2;
      // no bf16 or fp8 tensor cores.
      make("V100-SXM2-16GB", 16160 * mib, 15.7, 125, 0, 0, 900),
      make("V100-SXM2-32GB", 32510 * mib, 15.7, 125, 0, 0, 900),
      // NVIDIA A100 Tensor Core GPU datasheet (SXM): 19.5 TF fp32, 312 TF fp16/bf16 dense;
      // 1,555 GB/s (40GB HBM2) and 2,039 GB/s (80GB HBM2e).
      // Both are the measured GA100 SXM at 400 W.
      make("A100-40GB", 40960 * mib, 19.5, 312, 312, 0, 1555, a100_sxm_attainable_16bit),
      make("A100-80GB", 81920 * mib, 19.5, 312, 312, 0, 2039, a100_sxm_attainable_16bit),
      // NVIDIA H100 Tensor Core GPU datasheet: SXM 67 TF fp32, 989 TF bf16, 1,979 TF fp8 dense,
      // 3.35 TB/s HBM3; PCIe 51 TF fp32, 756 TF bf16, 1,513 TF fp8, 2.0 TB/s HBM2e.
      // H100 PCIe (114 SMs, 350 W) has no MAMF measurement and keeps the fitted fraction.
      make("H100-SXM", 81559 * mib, 67, 989, 989, 1979, 3350, h100_sxm_attainable_16bit),
      make("H100-PCIe", 81559 * mib, 51, 756, 756, 1513, 2000),
      // NVIDIA H200 datasheet (SXM): H100 SXM compute, 141 GB HBM3e at 4.8 TB/s. Not measured by
      // MAMF itself: it is the H100 SXM die at the same clocks and the same 700 W limit, so it gets
      // H100 SXM's attainable fraction rather than A100's.
      make("H200", 143771 * mib, 67, 989, 989, 1979, 4800, h100_sxm_attainable_16bit),
      // NVIDIA L40S datasheet: 91.6 TF fp32, 362 TF fp16/bf16 and 733 TF fp8 dense,
      // 48 GB GDDR6 at 864 GB/s.
      make("L40S", 46068 * mib, 91.6, 362, 362, 733, 864),
      // NVIDIA HGX B200 datasheet (per GPU = platform / 8): 75 TF fp32, 2.25 PF fp16/bf16 and
      // 4.5 PF fp8 dense, 180 GB HBM3e at 8 TB/s.
      make("B200", 180e9, 75, 2250, 2250, 4500, 8000),
  };
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Per GPU model: its aggregate NVLink rate (links × per-link rate, one direction: NVLink2/3/4 25 GB/s
// per link, NVLink5 50), whether its 8-GPU board has NVSwitches, and its PCIe x16 rate. SXM modules
// are always NVLink-connected. NVIDIA datasheets: DGX-1 (V100 SXM2: 6 links, hybrid cube-mesh), HGX
// A100 (8-GPU: 6 NVSwitches; 4-GPU: direct, 4 links per pair), HGX H100/H200 (8-GPU: 4 NVSwitches,
// 18 links), HGX B200 (8-GPU, NVLink5 through 2 NVSwitch chips, 1.8 TB/s bidirectional per GPU).
//
// NVLink SHARP (NVLS): the third-generation NVSwitch (HGX H100/H200) and its successor (HGX B200)
// reduce in the switch, so an all-reduce sends and receives each byte once where a ring moves
// 2(g−1)/g of them; A100's second-generation NVSwitch cannot. NCCL's own cost model
// (github.com/NVIDIA/nccl @5067397c src/graph/tuning.cc l.138-144 nvlsEfficiency, l.307-318) prices
// an NVLS all-reduce at 2 × the GPU's NVLink rate × that efficiency × (c − 1)/c over its c
// channels, and a ring at the NVLink rate, and runs the faster; all-gathers and reduce-scatters
// get (g − 1)/g of the rate from NVLS, less than a ring's, so NVLS does not help them. Channels:
// 16 on Hopper, 24 on Blackwell inside one node (src/transport/nvls.cc l.155-157, 209-214).
struct IntraNodeHardware {
  std::string_view model_prefix;
  double nvlink_bytes_per_second;
  bool nvswitch_on_8_gpu_board;
  double pcie_bytes_per_second;
  double nvls_efficiency = 0;  // NCCL's nvlsEfficiency for the GPU's generation; 0 without NVLS
  int nvls_channels = 0;
};
constexpr double kPcieGen3 = 16 * gb_per_second, kPcieGen4 = 32 * gb_per_second, kPcieGen5 = 64 * gb_per_second;
constexpr IntraNodeHardware kIntraNodeHardware[] = {
    {"P100-SXM2", 4 * 20 * gb_per_second, false, kPcieGen3}, {"V100-SXM2", 6 * 25 * gb_per_second, false, kPcieGen3},
    {"A100-", 12 * 25 * gb_per_second, true, kPcieGen4},
    {"H100-SXM", 18 * 25 * gb_per_second, true, kPcieGen5, 0.85, 16},
    {"H200", 18 * 25 * gb_per_second, true, kPcieGen5, 0.85, 16},
    {"B200", 18 * 50 * gb_per_second, true, kPcieGen5, 0.74, 24},
    {"H100-PCIe", 0, false, kPcieGen5},                      {"L40S", 0, false, kPcieGen4},
};
constexpr IntraNodeHardware kUnknownHardware = {"", 0, false, kPcieGen4};

bool starts_with_ignoring_case(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && equal_ignoring_case(text.substr(0, prefix.size()), prefix);
}

}  // namespace

BoardFabric board_fabric(std::string_view gpu_name, int gpus_per_node) {
  const IntraNodeHardware* hardware = &kUnknownHardware;
  for (const auto& entry : kIntraNodeHardware)
    if (starts_with_ignoring_case(gpu_name, entry.model_prefix)) hardware = &entry;
  BoardFabric board;
  board.pcie_bytes_per_second = hardware->pcie_bytes_per_second;
  board.pair_bytes_per_second = hardware->pcie_bytes_per_second;
  board.gpu_nvlink_bytes_per_second = hardware->nvlink_bytes_per_second;
  if (!(hardware->nvlink_bytes_per_second > 0) || gpus_per_node < 2) return board;
  // More GPUs than a 4-GPU board holds: the 8-GPU board, NVSwitched where the model's is.
  if (hardware->nvswitch_on_8_gpu_board && gpus_per_node > 4) {
    board.fabric = IntraNodeFabric::nvswitch;
    board.pair_bytes_per_second = hardware->nvlink_bytes_per_second;
    if (hardware->nvls_channels > 1)
      board.nvls_all_reduce_speedup = std::max(1.0, 2 * hardware->nvls_efficiency * (hardware->nvls_channels - 1) /
                                                        hardware->nvls_channels);
  } else {
    board.fabric = IntraNodeFabric::nvlink_direct;
    board.pair_bytes_per_second = hardware->nvlink_bytes_per_second / (gpus_per_node - 1);
    board.every_pair_wired = gpus_per_node <= 4;
  }
  return board;
}

const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> catalog = build_catalog();
  return catalog;
}

const GpuSpec* find_gpu(std::string_view name) {
  for (const GpuSpec& gpu : gpu_catalog()) {
    if (equal_ignoring_case(gpu.name, name)) return &gpu;
  }
  return nullptr;
}

double peak_flop_per_second(const GpuSpec& gpu, Precision precision) {
  switch (precision) {
    case Precision::fp32: return gpu.peak_fp32_flop_per_second;
    case Precision::fp16: return gpu.peak_fp16_flop_per_second;
    case Precision::bf16: return gpu.peak_bf16_flop_per_second;
    case Precision::fp8: return gpu.peak_fp8_flop_per_second;
  }
  return 0;
}

}  // namespace pipette
