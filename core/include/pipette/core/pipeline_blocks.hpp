#pragma once
// What each pipeline rank holds beyond its decoder layers (the embedding, the final norm, the LM
// head, the loss) and what each boundary between two ranks carries. Megatron-core, NeMo, torchtitan
// and the DeepSpeed stacks take a layer split and keep the embedding on the first rank, the head and
// loss on the last. nanotron takes no split: build_model partitions the model's PipelineBlocks by
// compute cost itself (nanotron @2411b022 src/nanotron/models/base.py l.188-236), so the head can
// land before the last rank, the fp32 cast and the loss on the rank(s) after it, and ranks after the
// loss hold nothing.
#include <vector>

#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

struct PipelineRankBlocks {
  int first_layer = 0;
  int num_layers = 0;
  bool embedding = false;
  bool final_norm = false;
  bool head = false;       // the output GEMM (lm_head)
  bool fp32_cast = false;  // nanotron's cast_to_fp32 block; elsewhere part of the loss
  bool loss = false;       // the cross entropy
  // nanotron: past the loss, the rank holds no block, so it receives, computes and sends nothing.
  // (A layer split's stage without layers still passes the hidden states on.)
  bool idle = false;
};

// The tensor one rank sends the next in the forward (its gradient, of the same size and type, comes
// back in the backward): nanotron's p2p sends each tensor with its own dtype and shape
// (parallel/pipeline_parallel/p2p.py l.89), and the receiver's backward returns its gradient
// (functional.py l.103-109, RecvTensorFromPipelineBuffer.backward).
enum class BoundaryTensor {
  hidden_states,  // b·s·h activations (split over tp with sequence parallelism)
  logits,         // the head's b·s·V/tp output, 16-bit (nanotron: before cast_to_fp32)
  fp32_logits,    // cast_to_fp32's b·s·V/tp output, 4 bytes each
  nothing,        // after the loss: the ranks beyond hold nothing
};

struct PipelineBlocks {
  std::vector<PipelineRankBlocks> ranks;   // pp entries
  std::vector<BoundaryTensor> boundaries;  // pp − 1 entries: what rank r sends rank r + 1
};

// nanotron's own partition of a Llama model over pp ranks: build_model's rule (base.py l.221-233)
// over the blocks of LlamaForTraining in model order with get_block_compute_costs's costs
// (models/llama.py l.938-950).
PipelineBlocks nanotron_partition(const ModelSpec& model, int pp);

// Megatron-DeepSpeed's split of the decoder layers over pp stages: GPTModelPipe hands DeepSpeed's
// PipelineModule the method 'type:transformer' (megatron/model/gpt_model.py @4efb479d l.459-463),
// whose partition_balanced (deepspeed/runtime/utils.py @edaa7221 l.627-664) splits the layer specs
// so that the transformer-layer counts differ least: the first L mod pp stages take one layer more,
// the embedding stays on the first stage and the norm and head on the last (checked against
// partition_balanced for every L ≤ 120, pp ≤ min(L, 32)). With pp > L (BigScience ran BLOOM-176B's
// 70 layers on pp 72) the first L stages take one layer each; DeepSpeed then puts the head and the
// fp32 cast on the trailing empty stages, which is priced as the last stage holding them.
std::vector<int> megatron_deepspeed_layer_split(int num_layers, int pp);

// The layer split a framework makes itself, or empty where it takes the split it is given.
std::vector<int> own_layer_split(const ModelSpec& model, Framework framework, int pp);

// The split a plan without one runs under `framework`: its own, else the balanced split.
std::vector<int> default_layer_split(const ModelSpec& model, Framework framework, int pp);

// The blocks each rank of `config` holds under `framework`: nanotron's partition, or
// config.layers_per_stage with the embedding first and the head and loss last.
PipelineBlocks pipeline_blocks(const ModelSpec& model, Framework framework, const ParallelConfig& config);

std::vector<int> layers_of(const PipelineBlocks& blocks);

// Bytes of one micro-batch's boundary tensor per GPU (the gradient back is the same size).
double boundary_tensor_bytes(BoundaryTensor tensor, const ModelSpec& model, const TrainingSpec& training,
                             const ParallelConfig& config);

const char* to_string(BoundaryTensor tensor);

}  // namespace pipette
