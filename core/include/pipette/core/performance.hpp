#pragma once
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/stack_profile.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

// The performance model in three layers, so that placement search and the schedule simulator
// reuse exactly the same costs:
//   1. profile_work: what each pipeline stage computes and sends, independent of placement;
//   2. communication_times: what those messages cost on the links the placement uses;
//   3. critical_path: the closed-form 1F1B / interleaved iteration time from 1 and 2.

struct StageWork {
  int first_layer = 0;
  int num_layers = 0;
  // One micro-batch through all of this pipeline rank's layers (all its chunks), math only.
  double forward_compute_seconds = 0;
  double backward_compute_seconds = 0;   // includes recompute
  double recompute_seconds = 0;
  double tp_bytes_per_microbatch = 0;    // bytes each GPU puts on the wire in TP collectives, fwd + bwd
                                         // (an all-reduce of P bytes over t GPUs: 2(t−1)/t · P); with
                                         // TrainingSpec::overlap_tensor_parallel_communication only
                                         // the share not hidden under GEMMs
  int tp_collectives_per_microbatch = 0; // all-reduce equivalents, for latency: each costs 2(t−1) ring
                                         // steps; a reduce-scatter + all-gather pair (SP) counts once
  // The share of tp_bytes_per_microbatch that all-reduces carry (the rest: all-gathers and
  // reduce-scatters), and whether the job lets NCCL run all-reduces inside a node with NVLink
  // SHARP (TrainingSpec::nccl_nvls; Cluster::nvls_all_reduce_speedup says where it helps).
  double tp_all_reduce_share = 1;
  bool nvls_all_reduce = false;
  // How the stage's TP collective time falls on its passes (exposed_tp_seconds): the share issued in
  // the forward pass, the share the backward issues asynchronously beside a GEMM (hidden up to
  // tp_overlap_window_seconds, the backward GEMM time of one micro-batch they can run under), the
  // rest exposed in the backward (with full recompute, the recomputed forward's too).
  double tp_forward_share = 0.5;
  double tp_hideable_share = 0;
  double tp_overlap_window_seconds = 0;
  double gradient_bytes_per_gpu = 0;     // what this stage's DP reduction moves per GPU (expert gradients excluded)
  // How many collectives the stack cuts that reduction into, and the expert gradients' reduction
  // (each pays a collective's latency: StackProfile::gradient_buckets). Of each model chunk's share
  // of the reduction, the share in the bucket that waits for the chunk's backward to end: for chunk
  // 0 (which holds the stage's first parameters, the word embedding on the first stage) and for the
  // later chunks. 1: the chunk is one bucket, reduced after its backward; 0: nothing waits (the
  // reduction streams beside the backward).
  int gradient_reduction_collectives = 1;
  int expert_gradient_reduction_collectives = 1;
  double first_chunk_gradient_tail_share = 0;
  double later_chunk_gradient_tail_share = 0;
  bool dp_reduction_is_all_reduce = true;  // not a reduce-scatter (+ all-gather) of a sharded optimizer or FSDP
  // FSDP (ParallelConfig::fully_sharded): the collectives of one micro-batch as shares of the stage's
  // dp_seconds (a ring all-reduce of gradient_bytes_per_gpu): those the forward's compute can hide
  // (the blocks' parameter all-gathers), those the backward's can (the all-gathers again and the
  // gradient reduce-scatters), and those nothing runs beside (the first unit's all-gather, the last
  // unit's reduce-scatter). Zero otherwise.
  double fsdp_forward_share = 0;
  double fsdp_backward_share = 0;
  double fsdp_unhidden_share = 0;
  // ComputeEfficiency::overlapped_compute_slowdown: what the compute beside this stage's
  // overlapped collectives loses (the hidden TP share, FSDP's hidden gathers and reduce-scatters,
  // an overlapped DP reduction: exposed_tp_seconds, exposed_fsdp_seconds, overlapped_reduction_end).
  double overlapped_compute_slowdown = 0;
  // Mixture of experts (zero for dense stages): the stage's MoE layers; its all-to-alls per
  // micro-batch (dispatch and combine, forward and backward) and the bytes each rank sends each
  // peer of its ep group in one of them; the bytes all-gathered (and reduce-scattered) over the
  // etp group around the experts per all-to-all; the expert gradients reduced over expert-dp.
  int moe_layers = 0;
  int ep_all_to_alls_per_microbatch = 0;
  double ep_bytes_per_peer = 0;
  double etp_gather_bytes = 0;
  double expert_gradient_bytes_per_gpu = 0;
  // Context parallelism (all zero when cp = 1). Transformer Engine's ring attention
  // (AttnFuncWithCPAndKVP2P, dot_product_attention/context_parallel.py @d0067d0d) runs cp steps per
  // layer and pass, each computing the rank's queries against one K/V chunk while the next chunk
  // travels one hop around the cp ring: in the forward cp − 1 passes of the rank's K/V chunk
  // (l.1698-1717); in the backward cp passes, K/V first, then K/V with the dK/dV accumulated so
  // far, dK/dV alone last (l.2460-2495). With causal load balancing every step computes the same
  // share of the attention, so a pass is exposed only by what it takes beyond one step.
  int cp_forward_rings = 0;          // per micro-batch: the stage's layers, again for recomputed attention
  int cp_backward_rings = 0;         // per micro-batch: the stage's layers
  double cp_kv_chunk_bytes = 0;      // one rank's K and V of one micro-batch (s/cp tokens, kv/tp wide)
  double cp_forward_step_seconds = 0;   // the attention of one ring step, forward
  double cp_backward_step_seconds = 0;  // and backward
  // Of the ring's exposed time, the share that falls on the forward pass (the first forward's
  // rings; the recomputed forward's and the backward's fall on the backward), by bytes passed.
  double cp_forward_share = 0;
  double optimizer_seconds = 0;
  // Part of forward + backward compute spent in the embedding (first stage) and the LM head with
  // its cross entropy (last stage); the reason end stages are slower than the rest.
  double embedding_and_head_seconds = 0;
};

struct WorkProfile {
  std::vector<StageWork> stages;         // size pp
  double p2p_bytes_per_microbatch = 0;   // activation (= its gradient) message per GPU between stages
  // Per boundary (pp − 1 entries, stage s to s + 1) where they differ from that: nanotron's own
  // partition (pipeline_blocks.hpp) sends the logits after the lm_head and nothing to its idle
  // ranks. Empty: every boundary carries p2p_bytes_per_microbatch.
  std::vector<double> boundary_bytes_per_microbatch;
  // How a boundary's exchange runs (StackProfile::pipeline_exchange): p2p_seconds is the whole
  // exchange; where it blocks both ranks, the schedule counts it in the receiver's forward and the
  // sender's backward instead of on a link.
  PipelineExchange boundary_exchange;
  int num_microbatches = 0;
  int virtual_stages = 1;
  PipelineSchedule pipeline_schedule = PipelineSchedule::one_forward_one_backward;  // the training's
  // A model whose output layer reuses the word embedding, split over pipeline ranks, keeps the two
  // copies equal by summing their gradients after the backward: every (tp, lane) rank of the first
  // stage all-reduces its V/tp·h gradient shard with its counterpart on the stage holding the
  // output layer (Megatron-core finalize_model_grads.py _allreduce_word_embedding_grads after the
  // DP reduction; DeepSpeed's PipelineEngine _exec_reduce_tied_grads; nanotron
  // parallel/tied_parameters.py sync_tied_weights_gradients, trainer.py l.492 @a27e8fe8).
  // The bytes each rank reduces (in the gradient's precision, as the DP reduction) and that stage;
  // 0 and -1 where nothing is tied across ranks.
  double tied_embedding_gradient_bytes = 0;
  int tied_embedding_head_stage = -1;
};

// The message of one micro-batch from stage `from_stage` to the next (its gradient comes back the
// same size): what communication_times and the placement search both price.
double boundary_bytes(const WorkProfile& work, int from_stage);

WorkProfile profile_work(const ModelSpec& model, const TrainingSpec& training, const GpuSpec& gpu,
                         const ParallelConfig& config);

// How fast the kernels of a transformer layer run on a GPU, as fractions of its datasheet peaks.
// A GEMM of M×N×K takes 2MNK / (gemm_fraction · peak) + its operand and result bytes /
// (memory_fraction · HBM bandwidth): small per-GPU shapes (hidden/tp, micro-batch × sequence) are
// memory bound and slow, large ones approach the compute roof. Elementwise kernels (norms, bias,
// activation, dropout, residual, fp8 casts, softmax of unfused attention, cross entropy, Adam) are
// memory bound. Fitted on published measurements: see fitted_compute_efficiency().
struct ComputeEfficiency {
  double gemm_fraction_16bit = 0;        // of the fp16/bf16 (or fp32) dense peak, on the GPU it was fitted on
  // GpuSpec::attainable_16bit_matmul_fraction of that GPU. A GPU whose own attainable fraction is
  // known runs 16-bit GEMMs at gemm_fraction_16bit × (its fraction / this one); 0: no such scaling.
  double fitted_gpu_attainable_16bit_matmul_fraction = 0;
  double gemm_fraction_fp8 = 0;          // of the fp8 dense peak
  double attention_fraction = 0;         // flash attention's share of the 16-bit peak
  double memory_fraction = 0;            // of HBM bandwidth, for memory-bound kernels
  double layer_overhead_seconds = 0;     // launch and synchronisation gaps per layer forward (2× backward)
  // Per forward or backward pass of one model chunk for one micro-batch: posting and waiting for
  // its p2p messages and the schedule's own work. What makes many tiny interleaved chunks slower.
  double chunk_pass_overhead_seconds = 0;
  // How much slower compute runs while a collective runs beside it: NCCL's kernels hold SMs (a
  // block per channel) and HBM bandwidth that the GEMMs then lack. A prior, not fitted.
  double overlapped_compute_slowdown = 0;
};
ComputeEfficiency fitted_compute_efficiency();
WorkProfile profile_work(const ModelSpec& model, const TrainingSpec& training, const GpuSpec& gpu,
                         const ParallelConfig& config, const ComputeEfficiency& efficiency);

// Forward FLOPs of one transformer layer for one micro-batch on one GPU, with the attention core
// as the kernel runs it (causal flash attention skips the masked half of the s×s work).
double layer_forward_flops(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config);

// A stage's TP collective time per micro-batch (CommunicationTimes::tp_seconds) as its forward and
// backward passes see it: what runs hidden under the backward's GEMMs is not on them, but slows
// those GEMMs by overlapped_compute_slowdown of its time.
struct TpPassSeconds {
  double forward = 0;
  double backward = 0;  // with what the hidden share slows the GEMMs it runs beside
  double hidden = 0;    // the collectives' own time beside the backward's GEMMs, on neither pass
  double total() const { return forward + backward; }
};
TpPassSeconds exposed_tp_seconds(const StageWork& stage, double tp_seconds);

// A stage's FSDP collective time per micro-batch that its compute does not hide: FSDP2 issues each
// unit's all-gather on its own stream ahead of the unit (the forward as the CPU runs ahead, the
// backward by prefetching one unit), so a pass waits only for what it gathers and reduces beyond
// its own compute, and for the unhidden share. dp_seconds: CommunicationTimes::dp_seconds[stage].
double exposed_fsdp_seconds(const StageWork& stage, double dp_seconds);

// Seconds for one GPU to send `bytes` to another, with `concurrent_flows` GPUs of the same node
// pair sending at once (they share the node pair's rails). Across nodes the flow attains
// `contention` of the node pair's figures (CollectiveScaling::bandwidth_factor for the nodes
// sending at the same moment; 1 for a flow on an otherwise quiet fabric).
double p2p_seconds(const Cluster& cluster, int from_gpu, int to_gpu, double bytes, int concurrent_flows,
                   double contention = 1.0);

// How many of its links a ring over g GPUs of one node uses at once: one where an NVSwitch or a
// single path joins them, g - 1 on a board that wires every pair (Cluster::intra_node_full_mesh).
double ring_links_in_use(int g, bool full_mesh);

// Ring all-reduce (or reduce-scatter + all-gather) over the given GPUs, one flat pipelined ring
// when the group spans nodes; α–β cost, bottleneck link.
double ring_allreduce_seconds(const Cluster& cluster, const std::vector<int>& gpus, double bytes);

struct CommunicationTimes {
  // p2p_seconds[s][d]: one message between stage s and s + 1 of DP replica d (size pp − 1, dp).
  std::vector<std::vector<double>> p2p_seconds;
  // tp_seconds[s][d]: TP collective time per micro-batch (fwd + bwd) of stage s, replica d.
  std::vector<std::vector<double>> tp_seconds;
  // dp_seconds[s]: the slowest DP group's gradient reduction of stage s (then its slowest
  // expert-dp group's, for MoE stages).
  std::vector<double> dp_seconds;
  // MoE: ep_group_seconds[s][g]: the all-to-alls (and etp gathers) of one micro-batch, forward +
  // backward, of expert group g of stage s (expert_groups_per_stage of them; empty for dense
  // models); ep_seconds[s]: the slowest group's, which every rank of the stage waits for (the
  // all-to-all is synchronous and the groups chain all replicas of the stage). Not overlapped:
  // Megatron-core's --overlap-moe-expert-parallel-comm and --moe-shared-expert-overlap are off by
  // default (transformer_config.py @d98e8a64 l.717) and the exports do not set them.
  std::vector<std::vector<double>> ep_group_seconds;
  std::vector<double> ep_seconds;
  // Context parallelism: cp_seconds[s][d]: the exposed ring passes of one micro-batch, forward +
  // backward, of stage s of DP replica d (the slowest of its tp cp-rings, whose tp collectives tie
  // them together); every lane of the replica waits for it (its cp ranks step through the ring
  // together). Empty when cp = 1.
  std::vector<std::vector<double>> cp_seconds;
  // wraparound_p2p_seconds[d]: one message from stage pp − 1 to stage 0 of replica d, the hop to
  // the next model chunk of the interleaved schedule (size dp when virtual_stages > 1 and pp > 1,
  // else empty). The same message size as p2p_seconds; gradients travel it back the other way.
  std::vector<double> wraparound_p2p_seconds;
  // The tied word embedding's gradient all-reduce (WorkProfile::tied_embedding_gradient_bytes):
  // the slowest of the first stage's ranks with their counterparts, all at once; 0 without one.
  double tied_embedding_seconds = 0;
};

// cp_seconds of stage `stage` as lane `lane` (a member of the dp·cp group) waits for it: its DP
// replica's; 0 without context parallelism.
double cp_ring_seconds_of(const ParallelConfig& config, const CommunicationTimes& communication, int stage, int lane);

CommunicationTimes communication_times(const Cluster& cluster, const ParallelConfig& config,
                                       const WorkProfile& work, const Placement& placement);

// Closed-form critical path of the (interleaved) 1F1B schedule; per replica, slowest replica wins;
// then the exposed DP reduction and the optimizer step.
TimeBreakdown critical_path(const ParallelConfig& config, const WorkProfile& work,
                            const CommunicationTimes& communication, const TrainingSpec& training);

// critical_path(...).iteration_seconds without the breakdown's attribution passes: what the
// placement search evaluates once per move.
double iteration_seconds(const ParallelConfig& config, const WorkProfile& work,
                         const CommunicationTimes& communication, const TrainingSpec& training);

// How the s×s attention core is counted in model FLOPs. Causal: only the unmasked half, as
// Megatron-LM counts it today (training.py num_floating_point_operations @d98e8a64 l.1163-1169,
// "causal mask (only half of the mask is non-zero)") and as causal flash attention runs it, so MFU
// stays under 100% at long sequences. Full square: Narayanan et al. SC21's count, which published
// model-TFLOP/s figures of that era use.
enum class AttentionFlops { causal, full_square };

// Model FLOPs of one iteration (no recompute), for MFU and tokens/s.
double model_flops_per_iteration(const ModelSpec& model, const TrainingSpec& training,
                                 AttentionFlops attention = AttentionFlops::causal);

// Megatron-order placement in Slurm's node order: rank r on global GPU r.
Placement default_placement(const ParallelConfig& config);

}  // namespace pipette
