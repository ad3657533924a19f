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

}  // namespace

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
