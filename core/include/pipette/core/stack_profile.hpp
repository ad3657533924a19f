#pragma once
// How a training stack runs a transformer, as far as memory and time go: which kernels it fuses,
// what it keeps for the backward, what it overlaps. The constants of the time model were fitted on
// Megatron-core / Transformer Engine; a profile states, mechanism by mechanism, where another stack
// does more work or keeps more, read from that stack's own code (file and line in `evidence`), or
// says that nothing tells (`assumptions`). Megatron-core and NeMo share the reference profile, so
// their predictions do not depend on this file.
#include <optional>
#include <string>
#include <vector>

#include "pipette/core/model.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

// Which copies of Q, K and V the rotary embedding leaves alive for the attention's backward,
// beyond Q, K, V and the attention output themselves.
enum class RotaryCopies {
  // Out-of-place RoPE on views of the fused QKV buffer: rotated Q and K beside the whole buffer
  // (Megatron-core, Megatron-DeepSpeed's apply_rotary_pos_emb): q + kv more.
  rotated_query_and_key,
  // nanotron: in-place flash-attn RoPE on a contiguous copy; multi-head attention keeps the
  // permuted [3, b, s, heads, d] QKV copy (its K and V unused) beside a second K/V copy: 2·kv more;
  // grouped-query attention copies Q, K, V separately and frees the originals: nothing more.
  packed_key_value_copy,
};

enum class FlashKernel { cudnn_fused, flash_attn_2 };

// When the optimizer's fp32 copy of 16-bit gradients (TrainingSpec::gradients_in_fp32 off: 4 bytes
// per parameter of its shard) exists.
enum class MainGradientCopy {
  // Made by the optimizer step and freed by the next zero_grad, before the forward: it counts at
  // the step's peak, not beside the activations (Megatron-core, memory.cpp).
  optimizer_step,
  // Counted beside the optimizer state through forward and backward: the stacks whose optimizer
  // code for 16-bit gradients was not read keep that count.
  whole_iteration,
};

// Where a micro-batch's 16-bit gradients live when the optimizer accumulates gradients in an fp32
// buffer of its own (16-bit training, TrainingSpec::gradients_in_fp32).
enum class SixteenBitGradients {
  // The wgrad GEMMs accumulate into the fp32 buffer themselves (Megatron-core's main_grad): no
  // 16-bit gradient tensor is ever whole.
  accumulated_by_the_gemms,
  // Autograd writes every parameter's 16-bit .grad and the optimizer adds them in after the
  // backward, casting each whole to fp32 first, and the .grads stay allocated through the next
  // forward (DeepSpeed's BF16_Optimizer, bf16 only): 2 bytes per parameter beside the buffer all
  // along, and one largest parameter's fp32 cast after each backward.
  kept_through_the_next_forward,
  // Autograd writes every parameter's 16-bit .grad and the stack adds them in and drops them once
  // the whole backward has returned (nanotron's FP32GradientAccumulator.backward): 2 bytes per
  // parameter, all at once, at each backward's end.
  dropped_after_each_backward,
};

// What `recompute=selective` keeps of a layer and what its backward recomputes.
enum class SelectiveRecompute {
  // Megatron's --recompute-granularity selective: everything but the attention core, whose s×s
  // scores the backward rebuilds (nothing to drop under flash attention, which keeps none).
  attention_core,
  // torchtitan's per-operator checkpointing: each block saves its input, the attention kernel's
  // output and every other linear's output (the first, third, ...: wq, wv, w1 and w2 of a SwiGLU
  // block), and its backward re-runs the block's forward for the rest: the other linears, the norms,
  // RoPE, the activation, and, with tensor parallelism, the collectives it does not save.
  every_other_linear,
};

// The kernel's attention throughput at a head width (elements per head of Q and K), forward and
// backward, relative to the rate the attention fraction was fitted at: the reference stack's cuDNN
// fused attention forward with heads 128 wide. Narrower and wider heads run slower in both kernels;
// the backward (which recomputes the scores) runs at its own rate, below the forward's at 128.
struct FlashAttentionSpeed {
  double forward = 1;
  double backward = 1;
};
FlashAttentionSpeed flash_attention_speed_vs_reference(FlashKernel kernel, double head_dim);

// How one stage boundary's exchange runs per micro-batch: the activation going down and, for an
// earlier micro-batch, the gradient coming up. Megatron-core and torchtitan post both together
// (batched isend/irecv), and each rank waits only for the tensor it needs next: one message of the
// boundary's bytes, a link that delays its receiver. DeepSpeed's TrainSchedule and nanotron run
// them one after the other with blocking sends and receives, at the start of the receiver's
// forward and of the sender's backward, so both ranks wait for the whole exchange: it is part of
// their forward and backward, not a link the schedule overlaps. nanotron sends each tensor after
// two metadata messages that the receiver reads on the host (parallel/pipeline_parallel/p2p.py
// @2411b022 l.207-288 _send_meta and _recv_meta; l.345-353 send_tensors waits for each send;
// state.py run_communication: send the activation, receive it, send the gradient, receive it),
// and a decoder layer's boundary carries the sequence mask too (models/llama.py: hidden_states
// and sequence_mask), with its own metadata.
struct PipelineExchange {
  int data_messages = 1;            // messages of the boundary's bytes, one after the other
  int small_messages = 0;           // latency-bound messages beside them
  bool blocks_both_ranks = false;   // the exchange is in the ranks' forward and backward
};

// How a stack issues a pipeline rank's gradient reduction when it overlaps it with the backward
// (TrainingSpec::overlap_gradient_reduce): in buckets of parameters, each reduced by a collective of
// its own as soon as the backward has produced all of its gradients, so that every bucket pays a
// collective's latency and the last one, which holds the rank's first parameters (the word
// embedding on the first stage), waits for the backward to end. Neither a size nor per_block: not
// bucketed, one collective per model chunk, issued when the chunk's backward has ended.
struct GradientBuckets {
  double parameters = 0;
  double parameters_per_dp_rank = 0;  // the bucket grows with dp·cp: max(parameters, this · dp·cp)
  // Megatron-core buckets only the first pipeline stage's first model chunk; every other chunk is
  // one bucket.
  bool first_stage_first_chunk_only = false;
  // FSDP2's units (torchtitan, whose replication runs through them too): one bucket per
  // transformer block.
  bool per_block = false;
};

// What a stack's cross entropy moves through HBM: bytes per logit (vocabulary element of the TP
// shard and token) its kernels read and write in the forward and in the backward, and whether
// 16-bit logits reach it through a cast kernel of their own (an fp32 copy: read 2, write 4 in the
// forward, and the gradient cast back, read 4, write 2, in the backward), which the counts leave out.
struct LossKernels {
  double forward_bytes_per_logit = 0;
  double backward_bytes_per_logit = 0;
  bool casts_logits_to_fp32 = false;
};

struct StackProfile {
  Framework framework = Framework::megatron_core;
  // What the stack runs unless told otherwise; apply_stack_profile copies them into the
  // TrainingSpec (its existing knobs), so that the search and the exports price the same job.
  AttentionKernel attention = AttentionKernel::flash;
  // The kernel behind AttentionKernel::flash. The attention fraction was fitted on Transformer
  // Engine's cuDNN fused attention; Dao-AILab's flash-attn 2 runs slower on Hopper, by how much
  // depends on the head width, as does cuDNN's own rate (flash_attention_speed_vs_reference).
  FlashKernel flash_kernel = FlashKernel::cudnn_fused;
  bool overlap_tensor_parallel_backward = true;
  bool overlap_gradient_reduce = true;
  GradientBuckets gradient_buckets;
  ShardedOptimizerCollectives sharded_optimizer = ShardedOptimizerCollectives::reduce_scatter_and_overlapped_gather;
  // With sequence parallelism, whether a column-parallel GEMM saves the rank's shard of its input
  // and all-gathers it again in the backward (Megatron, Transformer Engine) or saves the gathered
  // input (TrainingSpec::tensor_parallel_recompute_allgather).
  bool tensor_parallel_recompute_allgather = true;
  // Whether the stack's fp8 recipes keep the GEMM weights as fp8 and all-gather them in fp8
  // (TrainingSpec::fp8_parameters); meaningless for other precisions.
  bool fp8_parameters = false;
  // Whether NCCL may run all-reduces inside a node with NVLink SHARP (NCCL_NVLS_ENABLE, NCCL's
  // default 2: wherever the node supports it; Cluster::nvls_all_reduce_speedup).
  bool nccl_nvls = true;
  // SwiGLU MLP, per token: ffn-wide (f/t) tensors kept for the backward (fused: fc1's 2f output and
  // the f-wide product, 3; an unfused silu(gate) * up also keeps the f-wide SiLU output, 4) and
  // ffn-wide elements read or written by the activation in the forward (fused: reads 2f, writes f,
  // 3; unfused: SiLU reads f writes f, the product reads 2f writes f, 5).
  int swiglu_saved_ffn_tensors = 3;
  int swiglu_forward_ffn_accesses = 3;
  RotaryCopies rotary = RotaryCopies::rotated_query_and_key;
  // Layout copies in the attention block's forward beyond the reference's fused path, each a read
  // and a write of every element: of the whole QKV output (q + 2kv wide per token and TP rank) and
  // of K and V (2kv). The backward copies the gradients back, priced as the other elementwise work.
  int qkv_copy_passes = 0;
  int kv_copy_passes = 0;
  // Elements of Q and K (q + kv wide) that an unfused RoPE reads and writes in the forward beyond a
  // fused kernel's one read and one write (rotary models only).
  int rotary_extra_accesses = 0;
  // Whether the output projection's input is a transposed view ([b, s] to [s, b]) of the attention
  // kernel's output, which PyTorch's matmul folds into a contiguous copy each way, and, unless the
  // TP backward is overlapped (nanotron's async row-parallel Function saves the view), saves for
  // the weight gradient while the attention kernel keeps its own output: the attention output is
  // then kept twice. Only when a micro-batch holds more than one sequence (with one, the view is
  // already contiguous).
  bool attention_output_folded_copy = false;
  // Bytes per logit (vocabulary element of the TP shard and token) at the loss's peak beyond the
  // reference's fp32 logits, turned into the softmax in place, beside the 16-bit logits (4 + 2).
  double extra_logits_bytes_per_element = 0;
  // The cross entropy's kernels as the stack runs them by default, and its fused cross entropy
  // (the ce-fusion switch, TrainingSpec::cross_entropy_fusion) where it has one, with whether that
  // is its default. Every profile sets its own, counted in the stack's code (stack_profile.cpp);
  // torchtitan's is an assumption.
  LossKernels loss;
  std::optional<LossKernels> fused_loss;
  bool cross_entropy_fusion = false;
  // Bytes moved per parameter of the pipeline rank after every micro-batch's backward by an
  // optimizer that keeps each micro-batch's 16-bit gradients apart from its fp32 accumulator and
  // adds them in with separate kernels, beyond what the reference prices (its wgrad GEMMs
  // accumulate into the fp32 buffer themselves). Only for 16-bit training with fp32 gradient accumulation
  // (DeepSpeed's BF16_Optimizer runs in bf16 only; its fp16 keeps fp16 gradients, engine.cpp).
  double fp32_gradient_accumulation_bytes_per_parameter = 0;
  // What happens to the 16-bit gradients autograd writes when the optimizer keeps an fp32 buffer of
  // its own (SixteenBitGradients). Only for 16-bit training with fp32 gradient accumulation.
  SixteenBitGradients sixteen_bit_gradients = SixteenBitGradients::accumulated_by_the_gemms;
  // Whether data parallelism (dp > 1) runs through PyTorch's DistributedDataParallel without
  // gradient_as_bucket_view, whose Reducer allocates one flat gradient buffer per bucket in the
  // parameters' dtype when it is built and keeps it for the whole job: as many bytes per parameter
  // as the weights, beside the stack's own gradient buffer. nanotron builds no DDP under ZeRO-1
  // with fp32 accumulation.
  bool ddp_gradient_buckets = false;
  // Whether the pipeline engine sends each TP rank's 1/tp slice of the tensor between stages and
  // all-gathers it over TP on arrival (DeepSpeed's PipelineEngine with tp > 1), rather than the
  // whole tensor from every TP rank.
  bool partitioned_pipeline_messages = false;
  PipelineExchange pipeline_exchange;
  MainGradientCopy main_gradient_copy = MainGradientCopy::optimizer_step;
  SelectiveRecompute selective_recompute = SelectiveRecompute::attention_core;
  // Whether the pipeline engine has an interleaved (virtual-stage) schedule.
  bool interleaved_pipeline = true;
  // Whether tensor parallelism is the stack's own (Megatron-style column/row layers).
  bool tensor_parallel = true;
  // The code the evidence was read from (repository and commit), and "mechanism: value (file:line)"
  // one line each, for `pipette explain`.
  std::string code;
  std::vector<std::string> evidence;
  // What no source tells for this stack; `pipette explain` prints each as an assumption.
  std::vector<std::string> assumptions;
};

const StackProfile& stack_profile(Framework framework);

// Why Transformer Engine (Megatron-core, NeMo) runs its unfused attention for the model's heads
// though the stack asks for flash attention: neither flash-attn 2 nor cuDNN's fused attention takes
// heads of that width. Empty where they do, and for the other stacks. prepare_job prices what runs.
std::string unfused_attention_fallback(const ModelSpec& model, Framework framework);

// Sets the TrainingSpec knobs a stack decides (attention kernel, TP-backward and DP overlaps, the
// sharded optimizer's collectives) from training.target.framework's profile. The reference
// frameworks' profile holds the TrainingSpec defaults, so for them this changes nothing.
void apply_stack_profile(TrainingSpec& training);

// Whether the model's norms run as eager composite ops (TrainingSpec::fused_norm off): RMSNorms
// only, since nn.LayerNorm is one fused kernel in every PyTorch.
bool composite_rms_norms(const ModelSpec& model, const TrainingSpec& training);

}  // namespace pipette
