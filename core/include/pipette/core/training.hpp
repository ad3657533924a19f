#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipette {

enum class Precision { fp32, fp16, bf16, fp8 };  // fp8: fp8 GEMMs, bf16 master weights and activations
enum class RecomputeMode { none, selective, full };
enum class AttentionKernel { unfused, flash };
// The order a pipeline rank runs its micro-batches in. 1F1B (Megatron, DeepSpeed, torchtitan, and
// nanotron's 1f1b engine): warm-up forwards, then one forward and one backward in turn, so a rank
// holds at most pp − rank micro-batches. All forward, all backward (nanotron's afab engine, its
// default: parallel/pipeline_parallel/engine.py @2411b022 l.175-232; config/parallelism_config.py
// l.43-44): every micro-batch's forward, then every backward in the same order, so every rank
// holds all of its replica's micro-batches, and the loss rank each one's saved softmax.
enum class PipelineSchedule { one_forward_one_backward, all_forward_all_backward };

// How a stack's sharded optimizer (ZeRO-1, Megatron's distributed optimizer) moves gradients and
// parameters across the data-parallel group.
enum class ShardedOptimizerCollectives {
  // Megatron-core's distributed optimizer: with overlap_gradient_reduce (--overlap-grad-reduce
  // --overlap-param-gather) the gradients are reduce-scattered under the backward and the updated
  // parameters all-gathered under the next iteration's first forwards; without it reduce-scatter,
  // step and gather run back to back (parameter_gather_share, simulator.hpp).
  reduce_scatter_and_overlapped_gather,
  // nanotron's and DeepSpeed's ZeRO-1: the gradients are all-reduced whole after the last backward,
  // whatever overlap_gradient_reduce says, and the updated 16-bit parameters all-gathered after the
  // optimizer step, before the next forward may start.
  all_reduce_and_gather_after_step,
};

// Knobs the search must keep. An empty optional means "the search may choose".
struct FixedKnobs {
  std::optional<int> tp;
  std::optional<int> pp;
  std::optional<int> dp;
  std::optional<int> cp;   // context parallel
  std::optional<int> ep;   // expert model parallel (MoE models)
  std::optional<int> etp;  // expert tensor parallel (MoE models)
  std::optional<int> micro_batch;
  std::optional<int> virtual_stages;  // interleaved schedule chunks per pipeline rank
  std::optional<RecomputeMode> recompute;
  // With recompute full: the layers recomputed per model chunk (ParallelConfig::
  // recomputed_layers_per_chunk); empty: all of them.
  std::optional<int> recomputed_layers_per_chunk;
  std::optional<bool> sequence_parallel;
  std::optional<bool> distributed_optimizer;
  std::optional<bool> fully_sharded;  // FSDP (ParallelConfig::fully_sharded)
  // Layers of each pipeline stage; empty: the search chooses. Used with pp fixed to as many
  // stages (a restarted job keeps its first start's split, so its checkpoint loads).
  std::vector<int> layers_per_stage;
};

// The training framework that runs the plan. The search considers only what it can build
// (core/include/pipette/core/launch.hpp states each framework's rules).
enum class Framework {
  megatron_core,  // Megatron-LM's pretrain_gpt.py and its arguments
  nemo,           // NeMo 2 / Megatron-Bridge recipes (Megatron-core underneath)
  torchtitan,
  // Stacks whose kernels and overlaps differ from Megatron-core / Transformer Engine; each has a
  // StackProfile (stack_profile.hpp) that says how, with the code it was read from.
  megatron_deepspeed,  // Megatron-DeepSpeed: Megatron-LM's model code under DeepSpeed's engine
  nanotron,            // Hugging Face nanotron
  deepspeed,           // a model of the user's own under DeepSpeed's engine (ZeRO, PipelineModule)
};
struct FrameworkTarget {
  Framework framework = Framework::megatron_core;
  // Megatron-core's --pipeline-model-parallel-layout (Megatron-core 0.13 and later) expresses any
  // layer split; without it an uneven split must have the form [a, b x (p-2), c].
  bool pipeline_layout = false;
};

struct TrainingSpec {
  std::int64_t global_batch_sequences = 0;
  int sequence_length = 0;
  Precision precision = Precision::bf16;
  AttentionKernel attention = AttentionKernel::flash;
  bool gradients_in_fp32 = true;       // Megatron's fp32 main-grad accumulation buffer
  bool overlap_gradient_reduce = true; // DP reduction overlapped with the last backward passes
  // With the distributed optimizer (config.distributed_optimizer); set from the stack's profile.
  ShardedOptimizerCollectives sharded_optimizer = ShardedOptimizerCollectives::reduce_scatter_and_overlapped_gather;
  // Megatron-core's --tp-comm-overlap (Transformer Engine userbuffers, needs sequence parallelism):
  // the all-gathers and reduce-scatters run in chunks under the GEMMs they feed.
  bool overlap_tensor_parallel_communication = false;
  // The backward's TP collectives that Megatron-core / Transformer Engine issue asynchronously beside
  // a GEMM (the column-parallel input-gradient all-reduce or reduce-scatter under wgrad, SP's
  // re-gather of the saved input under dgrad): on by default there; Megatron-LM of 2021 (before
  // --async-tensor-model-parallel-allreduce) ran them synchronously.
  bool overlap_tensor_parallel_backward = true;
  // With sequence parallelism, whether a column-parallel GEMM saves its input as the rank's
  // sequence shard and all-gathers it again in the backward (true: Transformer Engine, nanotron's
  // parallelism.tp_recompute_allgather, its default since 9cc81bb6, 2024-07) or saves the gathered
  // input whole and re-gathers nothing (false: nanotron's switch off, and every nanotron release
  // v0.1-v0.5: parallel/tensor_parallel/functional.py @a27e8fe8 l.352-358; @2411b022 l.464-545).
  bool tensor_parallel_recompute_allgather = true;
  // Whether the job's NCCL may run all-reduces inside a node with NVLink SHARP (NCCL_NVLS_ENABLE:
  // NCCL's default 2 uses it wherever the node supports it; Cluster::nvls_all_reduce_speedup says
  // where that is).
  bool nccl_nvls = true;
  // Megatron's --fp8-param-gather (Megatron-Bridge's fp8 recipes set it, training/mixed_precision.py
  // @067f987d): the GEMM weights live as fp8 tensors (a byte and its transpose) instead of 16-bit
  // weights beside Transformer Engine's cached fp8 casts, and the distributed optimizer all-gathers
  // them in fp8 (distributed_data_parallel_config.py @d98e8a64 l.78). Only with fp8 precision.
  bool fp8_parameters = false;
  // Megatron-core's --cross-entropy-loss-fusion (Megatron-Bridge's model.cross_entropy_loss_fusion):
  // the vocab-parallel cross entropy as a few compiled kernels instead of one pass per operation
  // (StackProfile::fused_loss). Set from the stack's profile.
  bool cross_entropy_fusion = false;
  // Whether an RMSNorm runs as one fused kernel. Every stack's does (Transformer Engine, apex,
  // nanotron's Triton kernel, PyTorch's aten::_fused_rms_norm), except torchtitan's on a PyTorch
  // without that kernel or before torchtitan used nn.RMSNorm: eager composite ops over an fp32
  // copy (composite_rms_norm_extra_bytes).
  bool fused_norm = true;
  // Assumption, not a measurement: the busiest expert rank receives this many times the average
  // routed tokens (Megatron's dropless default, --moe-expert-capacity-factor unset, drops none, so
  // the imbalance the aux loss leaves lands on the expert GEMMs, the all-to-alls and the routed
  // activations). 1.1 (a named assumption, not fitted: the busiest rank 10% over the mean once an
  // auxiliary loss has balanced the router); 1 is perfect balance.
  double expert_load_imbalance_factor = 1.1;
  // Megatron's selective recompute of the MoE expert activation (--recompute-granularity selective
  // --recompute-modules moe_act; transformer/moe/experts.py @d98e8a64 l.269-276, 1020-1030): the
  // activation output fc2 needs is freed and the activation re-run in the backward. Megatron-Bridge's
  // GPT-OSS-120B H100 recipe sets it (perf_recipes/gpt_oss/h100/gpt_oss.py @067f987d); the fidelity
  // rows set it from their recipes. Not yet a searched knob, nor exported.
  bool recompute_moe_activation = false;
  PipelineSchedule pipeline_schedule = PipelineSchedule::one_forward_one_backward;
  FixedKnobs fixed;
  FrameworkTarget target;
};

// The search counts micro-batches in int; beyond this a global batch would overflow them (and no
// job trains with more sequences per step).
inline constexpr std::int64_t kMaxGlobalBatchSequences = std::int64_t{1} << 24;

std::string validate(const TrainingSpec& training);
// 16-bit (fp16 or bf16) training whose gradients the optimizer accumulates in an fp32 buffer: where
// a stack that lets autograd write 16-bit .grads first (StackProfile::sixteen_bit_gradients) adds
// them in after each backward.
bool sixteen_bit_gradients_accumulated_in_fp32(const TrainingSpec& training);
const char* to_string(Precision precision);
const char* to_string(RecomputeMode mode);
// "block:N" for full recompute of N layers per model chunk (N > 0), else to_string(mode).
std::string recompute_knob(RecomputeMode mode, int recomputed_layers_per_chunk);
const char* to_string(AttentionKernel kernel);
const char* to_string(PipelineSchedule schedule);  // "1f1b", "afab" (the engine's pp-schedule values)
// megatron-deepspeed and deepspeed: the stacks whose optimizer and precision DeepSpeed's engine chooses.
bool runs_on_deepspeed(Framework framework);
const char* to_string(Framework framework);  // megatron-core, nemo, torchtitan, megatron-deepspeed, nanotron, deepspeed
// Every spelling, for messages: "megatron-core, nemo, torchtitan, megatron-deepspeed, nanotron or deepspeed".
const char* framework_spellings();
// The framework of that spelling, or false when there is none.
bool parse_framework(std::string_view text, Framework& framework);

}  // namespace pipette
