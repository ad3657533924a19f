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

// Dense tensor-core peak for a training precision. fp8 falls back to 0 on GPUs without fp8
// tensor cores; callers treat 0 as "this GPU cannot run that precision".
double peak_flop_per_second(const GpuSpec& gpu, Precision precision);

}  // namespace pipette
