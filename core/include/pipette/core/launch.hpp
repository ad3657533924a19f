#pragma once
// What will be launched: one value that the performance model's assumptions are read from and
// that every exporter renders, so that what is priced and what runs cannot differ.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/training.hpp"

namespace pipette {

using EnvironmentVariables = std::vector<std::pair<std::string, std::string>>;

struct LaunchDescription {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;  // context parallel size
  // Mixture of experts (num_experts == 0: a dense model, nothing exported): the expert layout and
  // the MoE layer as priced, with Megatron-core's alltoall dispatcher and grouped GEMM.
  int ep = 1;
  int etp = 1;
  int num_experts = 0;
  int router_topk = 0;
  int moe_ffn_hidden_size = 0;
  int shared_expert_ffn_hidden_size = 0;
  int num_layers = 0;                    // with first_dense_layers, the MoE layer pattern
  int first_dense_layers = 0;
  std::string router_load_balancing;     // Megatron's spelling
  // Multi-latent attention (kv_lora_rank == 0: standard attention, nothing exported); q_lora_rank
  // 0: no Q latent.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_head_dim = 0;
  int qk_pos_emb_head_dim = 0;
  int v_head_dim = 0;
  int micro_batch = 1;
  std::int64_t global_batch = 0;
  int num_microbatches = 0;              // per DP replica per iteration
  int virtual_stages = 1;                // model chunks per pipeline rank (1 without a pipeline)
  int microbatch_group_size = 0;         // interleaved schedule's N (interleaved_group_size); 0 otherwise
  std::vector<int> layers_per_stage;     // size pp
  RecomputeMode recompute = RecomputeMode::none;
  int recomputed_layers_per_chunk = 0;  // ParallelConfig's: block recompute of N layers per chunk, 0 all
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  bool fully_sharded = false;            // FSDP: torchtitan's dp_shard = dp (ParallelConfig::fully_sharded)
  bool overlap_grad_reduce = false;      // DP gradient reduction under the backward passes
  bool overlap_param_gather = false;     // distributed optimizer's all-gather under the next forwards
  // The engine's switches as they reach the framework (engine.hpp): Megatron-core's --tp-comm-overlap
  // (with sequence parallelism only), the TP backward collectives beside the GEMMs (nanotron's
  // tp_linear_async_communication, with sequence parallelism only), fp32 gradients, nanotron's
  // re-gather of the column-parallel inputs and pipeline engine (pp_engine), and the fused loss.
  bool tp_comm_overlap = false;
  bool tp_backward_overlap = false;
  bool fp32_gradients = true;
  bool tp_recompute_allgather = true;
  bool cross_entropy_fusion = false;     // Megatron-core's --cross-entropy-loss-fusion
  PipelineSchedule pipeline_schedule = PipelineSchedule::one_forward_one_backward;
  // The training precision. Only DeepSpeed's JSON carries it (deepspeed_config): there it also
  // selects the optimizer that was priced; the other stacks take it from the job's own arguments.
  Precision precision = Precision::bf16;
  int sequence_length = 0;
  int max_position_embeddings = 0;       // rows of the position table the plan priced (>= sequence_length)
  EnvironmentVariables environment;      // e.g. CUDA_DEVICE_MAX_CONNECTIONS=1

  bool operator==(const LaunchDescription&) const = default;
};

// The model as it is launched for this sequence length: a learned position table shorter than
// the sequence grows to it (Megatron's --max-position-embeddings must be >= --seq-length;
// megatron/training/arguments.py validate_args), and that larger table is what gets priced.
ModelSpec model_for_sequence(const ModelSpec& model, int sequence_length);

// The launch of `plan` for `training.target`: the performance model's assumptions for the plan
// (its overlaps, the interleaved group size, the position table) made explicit.
LaunchDescription describe_launch(const ModelSpec& model, const TrainingSpec& training, const Plan& plan);

// Why `target` cannot build `config` with `num_microbatches` micro-batches, or "" when it can.
// These are the search's rules; tests/conformance re-states each framework's own start-up checks
// independently and runs them on the rendered strings.
//  - Megatron-core (megatron-core and nemo): an even split; or, without interleaving, [a, b x (p-2), c]
//    (--decoder-first/last-pipeline-num-layers); or any split with at least one layer per stage and
//    chunk when target.pipeline_layout. Interleaving needs a valid group size
//    (interleaved_group_size > 0).
//  - FSDP (fully_sharded): torchtitan only, dense models, pp = 1, distopt off (fully_sharded_problem).
//  - torchtitan: no distributed optimizer (its data parallelism is replication, or FSDP with
//    fully_sharded) and no selective recompute (torchtitan's is per-operator); without a pipeline
//    and without FSDP one micro-batch per replica when dp > 1 (each accumulation step reduces its
//    gradients, priced only as FSDP's reduce-scatters); 1F1B with at least pp micro-batches and a split [a, b x (p-2), c] with a, c <= b
//    (its first/last "less layers"); Interleaved1F1B with an even split, at least pp micro-batches
//    (what the schedule model prices) and the micro-batches a multiple of PyTorch's rounds
//    max(1, m / pp), each round then being the priced group size.
//  - megatron-deepspeed, nanotron, deepspeed: dense models, no interleaving, an even layer split;
//    nanotron and deepspeed no selective recompute; deepspeed tp = 1.
//  - Block recompute (recomputed_layers_per_chunk > 0): Megatron-core and NeMo only; the others
//    checkpoint every layer or none (recompute_problem in launch.cpp cites each). nanotron's ZeRO-1 with
//    dp > 1 is built (its releases run it; main since 7bc99232 does not, so the search picks it
//    only when distopt is fixed on: distributed_optimizer_for, search.cpp).
//  - Mixture of experts, every framework: ep divides the experts, ep x etp the ranks of a stage,
//    etp the expert width; with tp > 1 sequence parallelism (Megatron's MoE layer refuses training
//    without it). Dense models: ep = etp = 1. torchtitan has no expert tensor parallelism of its
//    own: without ep its experts are split over tp (etp = tp), with ep they are whole and ep must
//    equal tp here (its ep borrows dp_shard x cp x tp ranks and Pipette's torchtitan plans have
//    dp_shard = 1; ep < tp leaves an expert-FSDP sharding the model does not price).
//  - Context parallelism: Megatron-core and NeMo build any cp the search allows (the sequence in
//    2·cp chunks, flash attention: checked with the training spec); torchtitan cp > 1 only with
//    fully_sharded (it shards parameters with FSDP over dp_shard x cp).
std::string launch_problem(const FrameworkTarget& target, const ModelSpec& model, const ParallelConfig& config,
                           int num_microbatches);

// Whether a plan for `framework` shards its data parallelism with FSDP (ParallelConfig::fully_sharded)
// unless the user fixes it: torchtitan's own default wherever Pipette prices it (a dense model,
// pp = 1, more than one data-parallel rank, dp·cp), no other framework.
bool default_fully_sharded(Framework framework, const ModelSpec& model, int pp, int data_ranks);

// Whether the framework runs the training's precision and gradient accumulation only with the
// distributed optimizer on, at any dp: DeepSpeed (megatron-deepspeed, deepspeed) takes bf16 with fp32
// gradient accumulation (the BF16_Optimizer the stack profile prices) only under ZeRO stage 1.
bool needs_distributed_optimizer(const TrainingSpec& training);
// Why `config` cannot run on its framework for want of the distributed optimizer
// (needs_distributed_optimizer with it off); empty when it can.
std::string optimizer_problem(const TrainingSpec& training, const ParallelConfig& config);

// Megatron-core's expert-parallel rules, which every framework's launch_problem applies: ep and
// etp only with experts, ep dividing them, ep x etp a stage's ranks, etp the expert width, SP with
// tp. Empty where `config` keeps them.
std::string expert_problem(const ModelSpec& model, const ParallelConfig& config);

// The part of launch_problem no layout changes: what the framework cannot train of the model at
// all (ALiBi outside Megatron-DeepSpeed and DeepSpeed, MoE or MLA under the stacks that do not
// price them). Empty if every layout may be tried.
std::string model_problem(Framework framework, const ModelSpec& model);

// Why tp ranks cannot split the model's MLP under the framework: Megatron-style column and row
// parallel linears divide the ffn width evenly and assert it. Empty where they can.
std::string mlp_split_problem(const ModelSpec& model, Framework framework, int tp);

// Megatron-LM arguments, to append to pretrain_gpt.py's command line (PIPETTE_MEGATRON_ARGS).
std::string megatron_arguments(const LaunchDescription& launch);
// NeMo 2 / Megatron-Bridge ConfigContainer overrides, KEY=VALUE (PIPETTE_NEMO_OVERRIDES).
std::string nemo_overrides(const LaunchDescription& launch);
// torchtitan command-line options (PIPETTE_TORCHTITAN_ARGS).
std::string torchtitan_arguments(const LaunchDescription& launch);

// nanotron config overrides, dotted KEY=VALUE for its YAML (PIPETTE_NANOTRON_OVERRIDES).
std::string nanotron_overrides(const LaunchDescription& launch);
// Megatron-DeepSpeed arguments for pretrain_gpt.py (PIPETTE_MEGATRON_DEEPSPEED_ARGS).
std::string megatron_deepspeed_arguments(const LaunchDescription& launch);
// A DeepSpeed JSON config: batch, accumulation, ZeRO stage and the precision with its gradient
// accumulation dtype (PIPETTE_DEEPSPEED_CONFIG; for Megatron-DeepSpeed beside its arguments, for
// deepspeed alone).
std::string deepspeed_config(const LaunchDescription& launch);

// The framework's string (the variable's name and value) for the plan's target.
std::pair<std::string, std::string> framework_arguments(Framework framework, const LaunchDescription& launch);

// Every variable a job step gets from the plan, in the order the plugin sets them: PIPETTE_TP ...
// PIPETTE_PLAN_HASH, the target framework's string (its name says which; PIPETTE_FRAMEWORK is the
// option that asks for one, and stays the user's), the launch's environment and
// PIPETTE_STATUS=ok. `node_names`: the job's nodes in Slurm's order (plan.node_order indexes
// them). PIPETTE_RANK_ORDER is the placement: with one task per GPU and Slurm's block
// distribution a GPU's global index is the SLURM_PROCID of the task that drives it. The plugin
// and `pipette plan --json` both use this function.
EnvironmentVariables plan_variables(const ModelSpec& model, const TrainingSpec& training, const Plan& plan,
                                    const std::vector<std::string>& node_names, const std::string& plan_hash);

// The PIPETTE_* variables plan_variables may set but PIPETTE_STATUS, for clearing what a failed
// step inherited (the launch's environment, e.g. CUDA_DEVICE_MAX_CONNECTIONS, may be the user's
// own and is left alone).
const std::vector<std::string>& plan_variable_names();

}  // namespace pipette
