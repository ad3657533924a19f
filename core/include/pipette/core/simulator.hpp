#pragma once
#include <string>
#include <vector>

#include "pipette/core/performance.hpp"
#include "pipette/core/plan.hpp"

namespace pipette {

enum class EventKind { forward, backward, send_activation, send_gradient, dp_reduce, embedding_reduce, optimizer, dp_gather };

struct ScheduleEvent {
  EventKind kind = EventKind::forward;
  int stage = 0;           // pipeline rank
  int dp_replica = 0;
  int microbatch = -1;     // -1 for dp_reduce / embedding_reduce / optimizer / dp_gather
  int chunk = 0;           // virtual stage index on this rank
  double start_seconds = 0;
  double end_seconds = 0;
};

struct SimulationResult {
  double iteration_seconds = 0;
  std::vector<ScheduleEvent> events;  // sorted by (start, stage, dp_replica, kind, microbatch)
};

// Discrete-event simulation of the exact 1F1B / interleaved 1F1B (or all forward, all backward)
// schedule of every DP replica on the given communication times, then DP reduction and the
// optimizer step. The model, which the closed-form critical_path approximates:
//  - Operation order per pipeline rank r of p, m micro-batches, v chunks (Megatron-core):
//    v = 1: min(p − r − 1, m) warm-up forwards, then alternating forward/backward, then the
//    remaining backwards. v > 1: the forward order walks groups of N micro-batches through chunks
//    0..v−1, N = interleaved_group_size(p, m); backward k takes the k-th forward entry with chunk
//    v − 1 − c; warm-up min(2(p − r − 1) + (v − 1)N, m·v) forwards, then 1F1B, then cool-down.
//    v is ignored when p = 1; v > 1 needs m ≥ p, as in Megatron. All forward, all backward
//    (WorkProfile::pipeline_schedule, nanotron's afab): every forward, then every backward in
//    the same order, v = 1.
//  - A chunk's forward takes forward_compute_seconds / v plus its share of the TP time, backward
//    likewise; TP time per micro-batch splits between forward and backward by the number of
//    forward passes each contains (1 : 1, or 1 : 2 for the layers full recompute re-runs).
//  - Every forward sends its activation to the next virtual stage, every backward its gradient to
//    the previous one, when the op ends, without blocking the sender; a directed link between two
//    stages carries one message at a time in the order they were sent; the receiver's op waits.
//    Links r → r+1 take p2p_seconds[r][d], the interleaved hop p−1 → 0 wraparound_p2p_seconds[d].
//  - DP reduction of stage s is a collective of all replicas: without overlap it starts when every
//    replica's stage s has finished its last backward and takes dp_seconds[s]. With
//    training.overlap_gradient_reduce (Megatron enables gradient sync only for each chunk's last
//    micro-batch) chunk c's share dp_seconds[s] / v streams from the start of that chunk's last
//    backward and cannot end before that backward ends, slowed while the two run together, and
//    its last bucket (StageWork's tail share of it: the whole share where the chunk is one bucket)
//    follows the backward's end (overlapped_reduction_end); the shares run one after the other.
//  - With the distributed optimizer and overlapped reduction (parameter_gather_share > 0) the
//    reduction above is the gradient reduce-scatter, dp_seconds[s] · gradient_reduction_share, and
//    the updated parameters' all-gather, dp_seconds[s] · parameter_gather_share, runs under the next iteration's first forward
//    passes: in steady state it starts with the iteration, chunk c's parameters arrive after
//    (c + 1)/v of it, and micro-batch 0's forward of chunk c cannot end before they have.
//  - A tied word embedding split over pipeline ranks (WorkProfile::tied_embedding_head_stage): when
//    the first stage and the output layer's stage have both finished their DP reduction, the two
//    all-reduce the embedding's gradient (embedding_reduce on both) for tied_embedding_seconds.
//  - The optimizer step starts on every stage when the last stage's reduction ends (Megatron's
//    global gradient-norm all-reduce synchronises all ranks first) and takes optimizer_seconds.
//  - With the distributed optimizer of a stack that gathers after the step
//    (ShardedOptimizerCollectives::all_reduce_and_gather_after_step: nanotron, DeepSpeed) the
//    gradients are all-reduced after each stage's last backward, overlap_gradient_reduce or not,
//    and the step of stage s is followed by its parameters' all-gather (dp_gather),
//    dp_seconds[s] · parameter_gather_after_step_share; the iteration ends when the last one does.
//  - Under FSDP (config.fully_sharded, pp = 1) there is no reduction at the end: each micro-batch
//    gathers and reduce-scatters, and what its compute does not hide, exposed_fsdp_seconds, is
//    added once per micro-batch before the optimizer step (drawn as one dp_reduce span after the
//    last backward).
// Preconditions (std::invalid_argument otherwise): work and communication sized for config.
SimulationResult simulate_schedule(const ParallelConfig& config, const WorkProfile& work,
                                   const CommunicationTimes& communication, const TrainingSpec& training);

// simulate_schedule(...).iteration_seconds without recording the events: what the search needs to
// rank close calls, at a fraction of the time and memory.
double simulated_iteration_seconds(const ParallelConfig& config, const WorkProfile& work,
                                   const CommunicationTimes& communication, const TrainingSpec& training);

// Megatron-core's --microbatch-group-size-per-virtual-pipeline-stage N for the interleaved
// schedule: N = p when p divides m (the classic schedule); otherwise the smallest N in [p, m]
// whose last group is empty or has at least p micro-batches (Megatron-core rejects a last group
// smaller than p: its dependencies would form a cycle). Larger N
// means more warm-up forwards, i.e. more activations in flight. 0 when m < p (no valid N).
int interleaved_group_size(int pp, int num_microbatches);

// Model chunks per pipeline rank as the schedules run them: virtual_stages, or 1 without a
// pipeline (v is ignored when p = 1).
int effective_virtual_stages(const ParallelConfig& config);

// Megatron-core's distributed optimizer reduce-scatters the gradients (half an all-reduce's ring
// traffic) and all-gathers the updated parameters (the other half's ring steps, but of 16-bit
// parameters where the gradients are reduced in fp32). With --overlap-grad-reduce and
// --overlap-param-gather the gather is dispatched at the optimizer step and waited for, bucket by
// bucket, by the next iteration's first forward passes. parameter_gather_share: that gather's time
// as a share of dp_seconds (an all-reduce of the gradient bytes); 0 without the distributed
// optimizer or without overlap (reduce-scatter, step and gather back to back then move the gradient
// bytes of one all-reduce, as near as matters). gradient_reduction_share: the share of dp_seconds
// left to the gradient reduction (0.5 with the gather, 1 without).
// Both for training.sharded_optimizer = reduce_scatter_and_overlapped_gather (Megatron-core).
// parameter_gather_after_step_share: the same gather's share for the stacks that run it after the
// optimizer step, synchronously (all_reduce_and_gather_after_step), and 0 otherwise; their
// gradients are all-reduced (gradient_reduction_share 1) after the backward:
// gradient_reduction_overlapped is training.overlap_gradient_reduce unless such a stack shards the
// optimizer over more than one replica.
double parameter_gather_share(const ParallelConfig& config, const TrainingSpec& training);
// An all-gather of the parameters as a share of dp_seconds (an all-reduce of the gradient bytes):
// half a ring all-reduce's steps, of parameter bytes rather than gradient bytes. fp8 weights are
// gathered as one byte each (the norms' few 16-bit parameters aside).
double parameter_all_gather_share(const TrainingSpec& training);
double gradient_reduction_share(const ParallelConfig& config, const TrainingSpec& training);
double parameter_gather_after_step_share(const ParallelConfig& config, const TrainingSpec& training);
bool gradient_reduction_overlapped(const ParallelConfig& config, const TrainingSpec& training);

// When chunk `chunk`'s share (`seconds`) of `stage`'s overlapped gradient reduction, starting at
// `start`, is done beside that chunk's last backward, which would end at `backward_end` after its
// compute (the stage's backward compute over `chunks`): not before the reduction has run, and not
// before that backward has ended, its compute slowed by StageWork::overlapped_compute_slowdown for
// as long as the buckets before the last run beside it, plus the last bucket (the share's
// StageWork::first_chunk_gradient_tail_share for chunk 0, later_chunk_gradient_tail_share for the
// others), whose gradients the backward produces at its very end. Only the stage's own end
// moves: the earlier stages' last backwards, which wait for its gradient, are not delayed with it.
// The overlap is the shorter of the two, wherever the stream starts, so the end never falls as the
// reduction or the backward starts later (the placement search's bounds need it).
double overlapped_reduction_end(double start, double seconds, double backward_end, const StageWork& stage, int chunk,
                                int chunks);

// One pipeline rank's operations in execution order, as simulate_schedule runs them (all forward,
// all backward: every forward, then the backwards in the same order; no interleaved form).
struct ScheduledOp {
  bool backward = false;
  int microbatch = 0;
  int chunk = 0;
};
std::vector<ScheduledOp> pipeline_rank_program(int pp, int rank, int num_microbatches, int virtual_stages,
                                               PipelineSchedule schedule = PipelineSchedule::one_forward_one_backward);

}  // namespace pipette
