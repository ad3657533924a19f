#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipette/core/training.hpp"

namespace pipette {

// The knobs of one parallel layout.
struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  // Context parallelism (--context-parallel-size): each rank of a cp group holds s/cp tokens of
  // every sequence, and attention exchanges K/V around the group's ring (Transformer Engine's
  // AttnFuncWithCPAndKVP2P). Megatron: world = tp·cp·pp·dp (parallel_state.py
  // initialize_model_parallel @d98e8a64 l.815-825), order tp-cp-ep-dp-pp (l.617).
  int cp = 1;
  // Expert parallelism of MoE layers (1 for dense models). Megatron-core regroups the ranks of a
  // pipeline stage for the expert layers, etp fastest, then ep, then expert-dp
  // (parallel_state.py initialize_model_parallel @d98e8a64 l.871-894, RankGenerator(tp=etp,
  // ep=ep, dp=world/(etp·ep·pp), order tp-cp-ep-dp-pp)): ep·etp divides the stage's ranks.
  int ep = 1;   // --expert-model-parallel-size
  int etp = 1;  // --expert-tensor-parallel-size
  int micro_batch = 1;        // sequences per micro-batch
  int virtual_stages = 1;     // model chunks per pipeline rank (1 = plain 1F1B)
  RecomputeMode recompute = RecomputeMode::none;
  // Full recompute of only the first N layers of each model chunk, the rest keeping everything
  // (Megatron's --recompute-method block --recompute-num-layers N); 0: every layer keeps only its
  // input (--recompute-method uniform --recompute-num-layers 1). Full recompute only.
  int recomputed_layers_per_chunk = 0;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  // Fully sharded data parallelism (FSDP, ZeRO-3): each of the dp·cp ranks keeps a 1/(dp·cp)
  // shard of the parameters, gradients and optimizer state and all-gathers a module's parameters
  // just before it runs. Priced as torchtitan runs it (FSDP2, fully_shard per transformer block:
  // fsdp_working_set in memory.cpp, exposed_fsdp_seconds in performance.cpp), without pipeline
  // parallelism; launch_problem refuses it elsewhere. Not the distributed optimizer, which shards
  // the optimizer state alone.
  bool fully_sharded = false;
  std::vector<int> layers_per_stage;  // size pp, pipeline rank order; sums to the model's layers

  int world_size() const { return tp * cp * pp * dp; }
  // Megatron's data-parallel group with context parallelism: the dp·cp ranks that reduce gradients
  // together (distributed_data_parallel.py @d98e8a64 l.289 dp_cp group, parallel_state.py
  // l.915-928) and that the distributed optimizer shards over; each member is one pipeline lane.
  int dp_cp() const { return dp * cp; }
  int stage_ranks() const { return world_size() / pp; }                 // ranks of one pipeline stage
  int expert_dp() const { return stage_ranks() / (ep * etp); }          // expert-data-parallel size
};

// Layers of a pipeline rank holding `stage_layers` whose forward runs again in the backward under
// full recompute (0 otherwise). Megatron's block method checkpoints layer i of a chunk (one
// TransformerBlock: a pipeline stage, or one virtual chunk of it) while i < recompute_num_layers
// (recompute.py @d98e8a64 l.164-177): N beyond a chunk's layers recomputes them all, which this
// clamps to as Megatron does. Under fp8 that loop first skips layers whose input needs no
// gradient; the first stage's input is the trainable embedding's output and later stages receive
// theirs with requires_grad (p2p_communication.py l.338-346), so pretraining skips none. A
// stage's layers split evenly over its chunks (search.cpp and launch_problem keep them divisible).
int recomputed_layers_of_stage(const ParallelConfig& config, int stage_layers);

// The recompute knob as a user writes it: none, selective, full, or block:N for full recompute of
// N layers per model chunk.
inline std::string recompute_knob(const ParallelConfig& config) {
  return recompute_knob(config.recompute, config.recomputed_layers_per_chunk);
}

// Tokens of a sequence one rank holds: s/cp under context parallelism (Megatron's
// get_batch_on_this_cp_rank, core/utils.py @d98e8a64 l.2660, gives each cp rank chunks cp_rank and
// 2·cp − 1 − cp_rank of the sequence cut into 2·cp), all s without.
inline double local_sequence_length(const TrainingSpec& training, const ParallelConfig& config) {
  return static_cast<double>(training.sequence_length) / config.cp;
}

// A rank's place in its stage's expert grid: local = rank % stage_ranks (its index inside its
// pipeline stage, whatever dense groups make it up) = etp_index + etp·(ep_index + ep·edp_index).
struct ExpertPosition {
  int etp_index = 0;
  int ep_index = 0;
  int edp_index = 0;
};
inline ExpertPosition expert_position_of_rank(const ParallelConfig& config, int rank) {
  const int local = rank % config.stage_ranks();
  return {local % config.etp, (local / config.etp) % config.ep, local / (config.etp * config.ep)};
}
// The rank of an expert position in stage `stage`.
inline int rank_of_expert_position(const ParallelConfig& config, int stage, const ExpertPosition& position) {
  return stage * config.stage_ranks() + position.etp_index +
         config.etp * (position.ep_index + config.ep * position.edp_index);
}
// Expert-model-parallel groups of one stage (the ranks of one all-to-all), numbered
// etp_index + etp·edp_index.
inline int expert_groups_per_stage(const ParallelConfig& config) { return config.stage_ranks() / config.ep; }

// The most even split of num_layers over pp stages that every framework can build: equal middle
// stages and two ends that share the rest, the last (which carries the LM head) taking the fewer.
// With more stages than layers, one layer a stage on the last stages before the LM head's, the
// first stage the embedding alone, the head alone once pp >= layers + 2, and the stages left over
// empty right after the first (where 1F1B keeps the most micro-batches in flight); only
// --pipeline-model-parallel-layout expresses such a split (launch_problem).
std::vector<int> balanced_layers_per_stage(int num_layers, int pp);

// A split as the layout record, the plan record and messages write it: "7,7,6,6,6".
std::string format_layer_split(const std::vector<int>& layers_per_stage);

// Ranks are in Megatron order (order 'tp-cp-ep-dp-pp', parallel_state.py @d98e8a64 l.617): tp
// fastest, then cp, then dp, then pp:
//   rank = tp_index + tp * (cp_index + cp * (dp_index + dp * pp_index))
// A lane is one member of the dp·cp group (lane = cp_index + cp·dp_index): the tp ranks of each
// stage of one lane form a pipeline, so rank = tp_index + tp * (lane + dp·cp * pp_index). The
// performance model's per-replica tables are per lane (dp·cp of them; dp when cp = 1).
struct RankPosition {
  int tp_index = 0;
  int lane = 0;
  int pp_index = 0;
  int cp_index(const ParallelConfig& config) const { return lane % config.cp; }
  int dp_index(const ParallelConfig& config) const { return lane / config.cp; }
};
// Inline: the placement search's inner loop maps ranks and positions millions of times.
inline RankPosition position_of_rank(const ParallelConfig& config, int rank) {
  const int lanes = config.dp_cp();
  return {rank % config.tp, (rank / config.tp) % lanes, rank / (config.tp * lanes)};
}
inline int rank_of_position(const ParallelConfig& config, const RankPosition& position) {
  return position.tp_index + config.tp * (position.lane + config.dp_cp() * position.pp_index);
}
// The lane of (cp_index, dp_index).
inline int lane_of(const ParallelConfig& config, int cp_index, int dp_index) { return cp_index + config.cp * dp_index; }

// Which physical GPU plays each rank. Global GPU index = node_index * gpus_per_node + local_gpu.
struct Placement {
  std::vector<int> gpu_of_rank;  // size world_size
};

struct TimeBreakdown {
  double iteration_seconds = 0;
  double compute_seconds = 0;            // forward+backward math on the critical path (incl. recompute)
  double recompute_seconds = 0;          // part of compute_seconds spent recomputing activations
  double pipeline_bubble_seconds = 0;    // critical-path time a stage waits with nothing to run
  double tp_communication_seconds = 0;   // TP collectives on the critical path
  double pp_communication_seconds = 0;   // exposed pipeline point-to-point
  // Exposed (not overlapped) gradient reduction / param gather, and the compute an overlapped
  // reduction slows (overlapped_reduction_end).
  double dp_communication_seconds = 0;
  double tied_embedding_seconds = 0;     // the tied word embedding's gradient all-reduce across pipeline ranks
  double optimizer_seconds = 0;
  double embedding_imbalance_seconds = 0;  // extra time of first/last stage for embedding and LM head
  double tp_hidden_seconds = 0;  // TP collectives of the busiest stage run beside backward GEMMs: not in the iteration
  double ep_communication_seconds = 0;  // MoE token dispatch/combine all-to-alls (and etp gathers) on the critical path
  double cp_communication_seconds = 0;  // context parallelism's ring K/V passes not hidden under attention, on the critical path
};

// One GPU's memory at its two peaks. The activation peak comes during the backward: model state
// beside the in-flight micro-batches' activations, the logits and the runtime. The optimizer step
// comes after the backward has freed the activations, and allocates for itself what the optimizer
// makes of the gradients (Megatron-core: an fp32 copy of 16-bit gradients, freed by the next
// zero_grad before the forward; memory.cpp). The larger of the two decides whether the plan fits.
struct StageMemory {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_state_bytes = 0;      // what exists through forward and backward
  double activations_bytes = 0;          // all in-flight micro-batches of all chunks
  // Of activations_bytes, what the stack holds at a backward's end beside the other in-flight
  // micro-batches (nanotron's 16-bit gradients, DeepSpeed's fp32 cast of the largest one) when that
  // moment, not the backward's start, is the peak; 0 otherwise.
  double backward_end_bytes = 0;
  double logits_and_loss_bytes = 0;      // last stage only
  double runtime_overhead_bytes = 0;     // CUDA context, NCCL buffers, allocator fragmentation
  double step_gradients_bytes = 0;       // what the optimizer step allocates beside the model state
  double step_runtime_overhead_bytes = 0;  // the runtime overhead at the step
  double model_state_bytes() const { return weights_bytes + gradients_bytes + optimizer_state_bytes; }
  double activation_peak_bytes() const {
    return model_state_bytes() + activations_bytes + logits_and_loss_bytes + runtime_overhead_bytes;
  }
  double step_peak_bytes() const { return model_state_bytes() + step_gradients_bytes + step_runtime_overhead_bytes; }
  bool step_peak_binds() const { return step_peak_bytes() > activation_peak_bytes(); }
  double total_bytes() const { return step_peak_binds() ? step_peak_bytes() : activation_peak_bytes(); }
  // What the caching allocator hands out at the binding peak (total_bytes without the runtime).
  double allocated_bytes() const {
    return total_bytes() - (step_peak_binds() ? step_runtime_overhead_bytes : runtime_overhead_bytes);
  }
};

// What the placement search spent on a plan and what permuting GPUs inside nodes bought; all
// zero when the plan kept Slurm's order unsearched.
struct PlacementSearchSummary {
  std::int64_t moves_evaluated = 0;  // layouts tried, annealing moves and exact-search nodes
  std::int64_t move_budget = 0;      // the most it was allowed (a move count, never wall time)
  std::int64_t moves_to_best = 0;
  bool exact = false;                // proven optimal
  bool local_moves = false;          // GPUs were permuted inside nodes
  // The plan's node order with every node's GPUs in CUDA order.
  double identity_local_order_iteration_seconds = 0;
  // Permuting GPUs inside nodes predicted a gain for a plan of this iteration time: the one reason
  // a plan may put inter-node neighbours on other rails (issue 18; explain shows the gain).
  bool gpu_orders_gained(double iteration_seconds) const {
    return local_moves && identity_local_order_iteration_seconds > iteration_seconds;
  }
};

struct Plan {
  ParallelConfig config;
  int num_microbatches = 0;              // per DP replica per iteration
  TimeBreakdown time;
  std::vector<StageMemory> memory_per_stage;  // size pp
  double peak_memory_bytes = 0;               // busiest stage's total
  double tokens_per_second = 0;
  double model_flops_utilization = 0;         // model FLOPs (no recompute) / (time × peak × GPUs)
  Placement placement;
  double default_placement_iteration_seconds = 0;  // the same plan in Slurm's node order
  std::vector<int> node_order;  // node_order[k] = index (in the job's node list) of the node with NODE_RANK k
  std::vector<std::string> links_assumed;  // human-readable; empty when every link used was measured
  PlacementSearchSummary placement_search;
};

// A stable 16-hex-digit hash of the plan's decisions (config, microbatches, placement). Identical
// on every node for identical inputs; independent of floating-point predictions.
std::string plan_hash(const Plan& plan);

}  // namespace pipette
