#pragma once
#include "pipette/core/cluster.hpp"
#include "pipette/core/model.hpp"
#include "pipette/core/pipeline_blocks.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

// Memory the runtime takes beyond tensors. Site-tunable (the site file's `memory:` section); the
// defaults are typical of PyTorch 2.x + CUDA 12 on Hopper and what the search uses unless told:
//  - CUDA context with cuBLAS/cuDNN workspaces and loaded kernels: ~0.5 GiB per process;
//  - NCCL: NCCL_BUFFSIZE (4 MiB) per channel and peer for the protocols in use, ~64 MiB to a few
//    hundred MiB per communicator (NVLS takes more); we take 256 MiB;
//  - the caching allocator reserves more than it hands out (segment rounding and fragmentation):
//    "peak reserved", not "peak allocated", decides an OOM; ~10% on long runs, plus (added by
//    estimate_memory, not tunable) one largest transient request that no free fragment holds.
struct RuntimeOverheads {
  double cuda_context_bytes = 0.5 * 1024 * 1024 * 1024;
  double nccl_buffer_bytes_per_communicator = 256.0 * 1024 * 1024;
  double allocator_fragmentation_fraction = 0.10;  // reserved/allocated − 1 at peak
  // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (NeMo / Megatron-Bridge recipes ask for it,
  // src/megatron/bridge/recipes/utils/environment_utils.py @067f987d; a site declares it in its
  // file's memory.expandable_segments): a request that no free block holds grows a segment
  // instead of reserving a new one, so no largest-request reserve.
  bool expandable_segments = false;
  // Measured / modelled activation bytes, 1 unless a site calibration (pipette calibrate) says
  // otherwise: kernels and frameworks keep tensors the layer formula does not count.
  double activation_memory_factor = 1.0;
};

// Korthikanti et al. 2022, activation bytes of one transformer layer for one micro-batch,
// with s = sequence, b = micro-batch, h = hidden, a = heads, t = tensor parallel size.
// Unfused attention; 16-bit activations.
double korthikanti_layer_activation_bytes(int s, int b, int h, int a, int t, bool sequence_parallel,
                                          RecomputeMode recompute);

// Activation bytes of one transformer layer for one micro-batch on one GPU, generalising the
// formula above to the model's architecture: grouped-query attention (K and V are kv_hidden wide),
// SwiGLU (three ffn-wide tensors instead of two), flash attention (no s×s score, softmax or dropout
// tensors: the 5as/h term goes), models without dropout (no masks, no dropout output), the
// training precision (fp32 activations take 4 bytes; fp8 recipes keep the four GEMM inputs as
// 1-byte casts, as Transformer Engine does) and the recompute mode (full recompute keeps only the
// layer input). Beyond Korthikanti's count, what Megatron-core with Transformer Engine keeps: the
// rotated copies of Q and K next to the fused QKV buffer (rotary models), and flash attention's
// fp32 log-sum-exp per head and query.
double layer_activation_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config);

// Transient bytes of the one layer whose backward is running, on top of what the in-flight
// micro-batches keep: the gradients in flight through its MLP (with sequence parallelism the
// full-sequence gradient and the re-gathered norm output), and what recomputation rebuilds for that
// layer (full: everything a layer without recompute keeps; selective: the attention core).
double layer_working_set_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config);

// K and V of one micro-batch on one rank (its s/cp tokens, its heads), bytes: what the
// context-parallel ring passes per step.
double kv_chunk_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config);

// Context parallelism's ring buffers of the one layer whose attention runs (0 when cp = 1): the
// larger of the forward's (every received K/V chunk and every step's output, plus the fp32
// output) and the backward's (two [K/V, dK/dV] buffers and dQ). layer_working_set_bytes includes it.
double cp_ring_buffer_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config);

// Micro-batch passes (of one model chunk) whose activations pipeline rank `stage` of `pp` holds at
// its peak. 1F1B: min(pp − stage, m). Interleaved 1F1B with v chunks per rank (Megatron's schedule):
// rank i runs 2(pp − i − 1) + (v − 1)·N warm-up chunk forwards, then alternates one forward and one
// backward, so it holds min(2(pp − i − 1) + (v − 1)·N + 1, m·v) chunk activations, each of L/(pp·v)
// layers; N = interleaved_group_size(pp, m), which is pp when pp divides m and more otherwise. For rank 0 that is L·(1 + (pp − 1)/(pp·v)) layers' worth against 1F1B's L (Narayanan et al.
// SC21's figure): interleaving costs activation memory as well as saving bubble. All forward, all
// backward (nanotron's afab): every rank holds all m, whatever pp.
int in_flight_microbatch_chunks(int stage, int pp, int num_microbatches, int virtual_stages,
                                PipelineSchedule schedule = PipelineSchedule::one_forward_one_backward);

// Bytes per parameter for weights, gradients and optimizer state (Adam), per MODELING_NOTES.md
// (Megatron-LM's distributed-optimizer documentation): 16-bit params with fp32 grads 2 + 4 + 12,
// 16-bit params and grads 2 + 2 + 16 (the fp32 main grads live in the optimizer), fp32 4 + 4 + 8.
// Of the 16, the fp32 main grads (4) exist only at the optimizer step in Megatron-core (the stack's
// MainGradientCopy, stack_profile.hpp): `step_main_gradients`, not `optimizer`. A distributed
// optimizer (ZeRO-1) shards the optimizer terms over the DP ranks; the gradient buffer stays whole
// on every rank.
struct BytesPerParameter {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;            // through forward and backward; already divided by dp when sharded
  double step_main_gradients = 0;  // allocated by the optimizer step; already divided by dp when sharded
  // At the optimizer step, where all four coexist.
  double total() const { return weights + gradients + optimizer + step_main_gradients; }
};
BytesPerParameter bytes_per_parameter(const TrainingSpec& training, bool distributed_optimizer, int dp);
// Under FSDP (ParallelConfig::fully_sharded) over `shards` ranks: every persistent byte is sharded.
BytesPerParameter fully_sharded_bytes_per_parameter(int shards);

// What FSDP holds unsharded at the activation peak beyond the shards: gathered parameters (the
// weights column) and one unit's unsharded gradient with its reduce-scatter input (gradients).
struct FsdpWorkingSet {
  double parameter_bytes = 0;
  double gradient_bytes = 0;
};
FsdpWorkingSet fsdp_working_set(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config);

// One GPU's rows of the word embedding (or of an output matrix as large): vocab/t of them.
double word_embedding_shard_parameters(const ModelSpec& model, const ParallelConfig& config);

// Parameters one GPU of pipeline rank `stage` holds: its layers' TP shards plus replicated norms and
// row-parallel biases; the word embedding (vocab/t rows) and learned positions on rank 0; the output
// layer on the last rank (a copy of the tied embedding when pp > 1) and the final norm.
double parameters_on_stage(const ModelSpec& model, const ParallelConfig& config, int stage);
// The same for a rank that holds `blocks` (pipeline_blocks.hpp) beyond its layers.
double parameters_on_stage(const ModelSpec& model, const ParallelConfig& config, int stage,
                           const PipelineRankBlocks& blocks);
// Elements of the largest single parameter tensor one GPU of a rank holding `blocks` keeps: the word
// embedding's or the output layer's vocabulary shard, else the largest dense-layer weight shard.
double largest_parameter_elements(const ModelSpec& model, const ParallelConfig& config, const PipelineRankBlocks& blocks);
// Of those, the routed experts' parameters: num_experts/ep experts per MoE layer of the stage,
// each split over etp (fc2's bias whole). Zero for dense models.
double expert_parameters_on_stage(const ModelSpec& model, const ParallelConfig& config, int stage);

// layer_activation_bytes of an MoE layer: its attention half and shared expert as a dense layer
// keeps them, plus the routed tokens (top-k copies per token received over the ep group and
// gathered over etp, times TrainingSpec::expert_load_imbalance_factor: the expert fc1's input, its
// output and, unless TrainingSpec::recompute_moe_activation, the activation's output; fp8 GEMM
// inputs at a byte) and the fp32 router logits and probabilities.
double moe_layer_activation_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config);

// Per pipeline stage (rank-level; size pp): model state, activations of the in-flight
// micro-batches (1F1B: stage i of p holds min(p − i, m); interleaved holds more), embedding on the
// first stage, output layer + logits + loss on the last, and runtime overheads.
std::vector<StageMemory> estimate_memory(const ModelSpec& model, const TrainingSpec& training,
                                         const ParallelConfig& config, const RuntimeOverheads& overheads);

// What PyTorch's caching allocator holds of estimate_memory's stage `stage` at its peak (what
// torch.cuda.max_memory_reserved and Megatron's "max reserved" report): everything but the CUDA
// context and NCCL's buffers, which are allocated outside it.
double caching_allocator_bytes(const StageMemory& memory, const ParallelConfig& config, int stage,
                               const RuntimeOverheads& overheads);

}  // namespace pipette
