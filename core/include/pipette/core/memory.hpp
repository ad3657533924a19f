#pragma once
#include "pipette/core/cluster.hpp"
#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

// Memory the runtime takes beyond tensors. Site-tunable (the site file's `memory:` section).
struct RuntimeOverheads {
  double cuda_context_bytes = 0;
  double nccl_buffer_bytes_per_communicator = 0;
  double allocator_fragmentation_fraction = 0;  // reserved/allocated − 1 at peak
};

// Korthikanti et al. 2022, activation bytes of one transformer layer for one micro-batch,
// with s = sequence, b = micro-batch, h = hidden, a = heads, t = tensor parallel size.
// Unfused attention; 16-bit activations.
double korthikanti_layer_activation_bytes(int s, int b, int h, int a, int t, bool sequence_parallel,
                                          RecomputeMode recompute);

// Per pipeline stage (rank-level; size pp): model state, activations of the in-flight
// micro-batches (1F1B: stage i of p holds min(p − i, m); interleaved holds more), embedding on the
// first stage, output layer + logits + loss on the last, and runtime overheads.
std::vector<StageMemory> estimate_memory(const ModelSpec& model, const TrainingSpec& training,
                                         const ParallelConfig& config, const RuntimeOverheads& overheads);

}  // namespace pipette
