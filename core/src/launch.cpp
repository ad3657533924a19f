#include "pipette/core/launch.hpp"

#include <algorithm>
#include <cstdio>

#include "pipette/core/pipeline_blocks.hpp"
#include "pipette/core/simulator.hpp"
#include "pipette/core/units.hpp"

namespace pipette {

namespace {

bool even_split(const std::vector<int>& layers) {
  return std::all_of(layers.begin(), layers.end(), [&](int count) { return count == layers.front(); });
}

// [a, b x (p-2), c]: what Megatron's first/last-stage counts express (transformer_config.py
// __post_init__ "Uneven PP": the middle stages share the remaining layers equally).
// A stage without decoder layers (pp > layers, or a fixed split with a 0).
bool has_empty_stage(const std::vector<int>& layers) {
  return std::any_of(layers.begin(), layers.end(), [](int count) { return count < 1; });
}

// Megatron's --decoder-first/last-pipeline-num-layers must be larger than 0 (transformer_config.py
// @d98e8a64 l.2304, 2323): a split with a stage of no decoder layers needs the layout ("E|", "|L").
bool first_last_form(const std::vector<int>& layers) {
  if (has_empty_stage(layers)) return false;
  if (layers.size() < 3) return true;
  return std::all_of(layers.begin() + 1, layers.end() - 1, [&](int count) { return count == layers[1]; });
}

// The middle stages' count b of a first/last-form split (for two stages, the larger end).
int middle_layers(const std::vector<int>& layers) {
  return layers.size() >= 3 ? layers[1] : *std::max_element(layers.begin(), layers.end());
}

std::string megatron_problem(const FrameworkTarget& target, const ParallelConfig& config, int num_microbatches) {
  const std::vector<int>& layers = config.layers_per_stage;
  const int chunks = effective_virtual_stages(config);
  if (chunks > 1) {
    if (interleaved_group_size(config.pp, num_microbatches) == 0) {
      return "the interleaved schedule needs at least pp=" + std::to_string(config.pp) + " micro-batches (has " +
             std::to_string(num_microbatches) + ")";
    }
    if (std::any_of(layers.begin(), layers.end(), [&](int count) { return count % chunks != 0; })) {
      return "every stage's layers must split into vpp=" + std::to_string(chunks) + " equal chunks";
    }
  }
  if (even_split(layers) || target.pipeline_layout) return {};
  if (chunks == 1 && first_last_form(layers)) return {};
  return "layer split " + format_layer_split(layers) +
         " needs --pipeline-model-parallel-layout (Megatron-core 0.13 or later; site key "
         "megatron_pipeline_layout: true)";
}

std::string torchtitan_problem(const ModelSpec& model, const ParallelConfig& config, int num_microbatches) {
  if (config.distributed_optimizer) return "torchtitan shards optimizer state only through FSDP; plan with distopt=off (fsdp=on shards it)";
  if (config.recompute == RecomputeMode::selective && (model.is_moe() || model.is_mla())) {
    return "torchtitan's per-operator selective checkpointing is priced for dense blocks without multi-latent "
           "attention; plan recompute=none or full";
  }
  if (config.pp == 1) {
    // Without a pipeline each micro-batch is a gradient-accumulation step, and each reduces its
    // gradients over DP (trainer.py train_step runs them without disabling gradient sync); the
    // model prices one reduction per iteration. FSDP's per-micro-batch reduce-scatters are priced
    // (exposed_fsdp_seconds, performance.cpp).
    if (config.dp > 1 && num_microbatches > 1 && !config.fully_sharded) {
      return "torchtitan reduces gradients after every accumulation step; pp > 1 or one micro-batch per replica";
    }
    return {};
  }
  const std::vector<int>& layers = config.layers_per_stage;
  if (effective_virtual_stages(config) > 1) {
    if (!even_split(layers) || model.num_layers % (config.pp * config.virtual_stages) != 0) {
      return "torchtitan's interleaved schedule needs an even split into pp x vpp stages";
    }
    // PyTorch's ScheduleInterleaved1F1B (torch/distributed/pipelining/schedules.py __init__, read at
    // pytorch/pytorch 00722e64: tests/conformance/framework_rules.hpp) runs
    // max(1, m / pp) rounds of equal size and refuses m that they do not divide; a round is the
    // group size priced (interleaved_group_size gives the same N whenever torchtitan accepts m).
    // It also runs m < pp in one short round, which the schedule model does not price.
    if (interleaved_group_size(config.pp, num_microbatches) == 0) {
      return "Pipette prices the interleaved schedule with at least pp=" + std::to_string(config.pp) +
             " micro-batches (has " + std::to_string(num_microbatches) + ")";
    }
    const int rounds = num_microbatches / config.pp;
    if (num_microbatches % rounds != 0) {
      return "torchtitan's Interleaved1F1B needs the micro-batches (" + std::to_string(num_microbatches) +
             ") to be a multiple of its rounds, micro-batches / pp = " + std::to_string(rounds);
    }
    return {};
  }
  // Schedule1F1B.__init__ (schedules.py): at least as many micro-batches as stages, one per rank.
  if (num_microbatches < config.pp) {
    return "torchtitan's 1F1B needs at least pp=" + std::to_string(config.pp) + " micro-batches";
  }
  if (has_empty_stage(layers)) {
    return "layer split " + format_layer_split(layers) +
           " has a stage without layers, which the exported --parallelism.pipeline_parallel_layers_per_stage cannot "
           "express; plan with pp <= " + std::to_string(model.num_layers);
  }
  const int middle = middle_layers(layers);
  if (!first_last_form(layers) || layers.front() > middle || layers.back() > middle) {
    return "layer split " + format_layer_split(layers) +
           " is not [a, b x (p-2), c] with a, c <= b (torchtitan's first/last stage less layers)";
  }
  return {};
}

std::string torchtitan_expert_problem(const ModelSpec& model, const ParallelConfig& config) {
  if (!model.is_moe()) return {};
  // torchtitan models/common/moe_sharding.py @b5bcd76c l.201-238: without EP the experts are
  // split over the TP mesh (etp = tp), with EP they are whole on the sparse (efsdp, ep) mesh;
  // distributed/parallel_dims.py l.186-192: ep divides dp_shard·cp·tp, and efsdp =
  // dp_shard·cp·tp / ep shards the experts with FSDP (config/configs.py l.282-290).
  if (config.ep == 1) {
    return config.etp == config.tp ? std::string() : "torchtitan splits experts over tp without ep (etp must be tp)";
  }
  if (config.etp != 1) return "torchtitan has no expert tensor parallelism with ep (etp must be 1)";
  if (config.ep != config.tp) {
    return "torchtitan's ep borrows the tp ranks here (dp_shard = 1): ep must equal tp, or experts are FSDP-sharded";
  }
  return {};
}

std::string boolean(bool value) { return value ? "true" : "false"; }

std::string or_null(int value, bool present) { return present ? std::to_string(value) : "null"; }

// --pipeline-model-parallel-layout: stage i = vpp_rank x pp + pp_rank; "E" before the first
// layer, "L" (the loss) after the last; written out without "*" so that the unquoted expansion of
// the variable in a job script cannot glob.
std::string layout_text(const LaunchDescription& launch) {
  std::string text = "E";
  for (int chunk = 0; chunk < launch.virtual_stages; ++chunk) {
    for (int stage = 0; stage < launch.pp; ++stage) {
      if (chunk > 0 || stage > 0) text += '|';
      text.append(static_cast<size_t>(launch.layers_per_stage[static_cast<size_t>(stage)] / launch.virtual_stages), 't');
    }
  }
  return text + "L";
}

enum class SplitFlags { none, first_last, layout };

SplitFlags split_flags(const LaunchDescription& launch) {
  if (launch.pp == 1 || even_split(launch.layers_per_stage)) return SplitFlags::none;
  if (launch.virtual_stages == 1 && first_last_form(launch.layers_per_stage)) return SplitFlags::first_last;
  return SplitFlags::layout;
}

// --moe-layer-freq as an explicit list (1: MoE layer, 0: dense), without the "*" of Megatron's
// "([0]*k+[1]*n)" form so that an unquoted expansion cannot glob.
std::string layer_pattern(const LaunchDescription& launch) {
  std::string text = "[";
  for (int layer = 0; layer < launch.num_layers; ++layer) {
    if (layer > 0) text += ',';
    text += layer < launch.first_dense_layers ? '0' : '1';
  }
  return text + "]";
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// The stacks with a StackProfile other than the reference (stack_profile.hpp) run dense models
// only here: their MoE layers are not priced. None of their pipeline engines interleaves
// (nanotron: parallel/pipeline_parallel/engine.py has afab and 1f1b; DeepSpeed's TrainSchedule,
// deepspeed/runtime/pipe/schedule.py l.189-257).
std::string profiled_stack_problem(Framework framework, const ModelSpec& model, const ParallelConfig& config) {
  const std::string name = to_string(framework);
  // launch_problem's caller names the framework ("nanotron cannot build it: ...").
  if (config.cp > 1) return "context parallelism is not priced for " + name + " (cp must be 1)";
  if (config.virtual_stages > 1 && config.pp > 1) return name + " has no interleaved pipeline schedule (vpp must be 1)";
  const std::vector<int>& layers = config.layers_per_stage;
  switch (framework) {
    case Framework::nanotron:
      // recompute_layer checkpoints whole decoder layers (models/llama.py @2411b022 l.761-776):
      // full recompute or none. nanotron takes no layer split: build_model partitions the model by
      // compute cost itself (models/base.py l.221-233), so only that partition can run.
      if (config.recompute == RecomputeMode::selective)
        return "nanotron recomputes whole layers (recompute_layer) or nothing, not selectively";
      if (const std::vector<int> own = layers_of(nanotron_partition(model, config.pp)); layers != own)
        return "nanotron partitions the model itself (models/base.py build_model): on pp=" + std::to_string(config.pp) +
               " its layers per stage are [" + format_layer_split(own) + "], not [" + format_layer_split(layers) + "]";
      // ZeRO-1 beside dp > 1 is not refused: every release (v0.1-v0.5), the bench_cluster branch
      // and main until 7bc99232 run it; the search only leaves it off unless it is fixed
      // (distributed_optimizer_for, search.cpp), for the main that breaks it.
      return {};
    case Framework::megatron_deepspeed:
      // Megatron-DeepSpeed takes no split: DeepSpeed's 'type:transformer' partition makes its own
      // (megatron_deepspeed_layer_split).
      if (const std::vector<int> own = megatron_deepspeed_layer_split(model.num_layers, config.pp); layers != own)
        return "megatron-deepspeed partitions the layers itself (DeepSpeed's 'type:transformer'): on pp=" +
               std::to_string(config.pp) + " its layers per stage are [" + format_layer_split(own) + "], not [" +
               format_layer_split(layers) + "]";
      return {};
    case Framework::deepspeed:
      // A model of the user's own under DeepSpeed's PipelineModule: placed uniformly here.
      if (!even_split(layers)) return name + " splits the layers uniformly; layer split " + format_layer_split(layers) + " is not even";
      if (config.tp > 1)
        return "DeepSpeed's engine has no tensor parallelism of its own (tp must be 1)";
      if (config.recompute == RecomputeMode::selective)
        return "DeepSpeed checkpoints whole layers (deepspeed.checkpointing), not selectively";
      return {};
    default: return {};
  }
}

}  // namespace

// Megatron-core's expert-parallel rules, shared by every framework (each framework's own are below).
std::string expert_problem(const ModelSpec& model, const ParallelConfig& config) {
  if (!model.is_moe()) {
    return config.ep == 1 && config.etp == 1 ? std::string() : "ep and etp need a model with experts (num_experts)";
  }
  // arguments.py @d98e8a64 l.1655-1658.
  if (model.num_experts % config.ep != 0) {
    return "ep=" + std::to_string(config.ep) + " does not divide the " + std::to_string(model.num_experts) + " experts";
  }
  // parallel_state.py @d98e8a64 l.874-884: world % (etp·ep·pp) == 0, i.e. ep·etp divides a stage.
  if (config.stage_ranks() % (config.ep * config.etp) != 0) {
    return "ep x etp = " + std::to_string(config.ep * config.etp) + " does not divide the " +
           std::to_string(config.stage_ranks()) + " ranks of a pipeline stage";
  }
  // The expert MLP's column- and row-parallel split over etp (experts.py: moe_ffn_hidden_size / etp).
  if (model.moe_ffn_hidden_size % config.etp != 0) {
    return "etp=" + std::to_string(config.etp) + " does not divide moe_ffn_hidden_size " +
           std::to_string(model.moe_ffn_hidden_size);
  }
  // moe_layer.py @d98e8a64 l.636-640: training with TP and experts without SP raises.
  if (config.tp > 1 && !config.sequence_parallel) return "MoE layers with tp > 1 need sequence parallelism";
  return {};
}

ModelSpec model_for_sequence(const ModelSpec& model, int sequence_length) {
  ModelSpec launched = model;
  if (launched.learned_position_embeddings > 0) {
    launched.learned_position_embeddings = std::max(launched.learned_position_embeddings, sequence_length);
  }
  return launched;
}

LaunchDescription describe_launch(const ModelSpec& model, const TrainingSpec& training, const Plan& plan) {
  const ParallelConfig& config = plan.config;
  LaunchDescription launch;
  launch.tp = config.tp;
  launch.pp = config.pp;
  launch.dp = config.dp;
  launch.cp = config.cp;
  if (model.is_moe()) {
    launch.ep = config.ep;
    launch.etp = config.etp;
    launch.num_experts = model.num_experts;
    launch.router_topk = model.router_topk;
    launch.moe_ffn_hidden_size = model.moe_ffn_hidden_size;
    launch.shared_expert_ffn_hidden_size = model.shared_expert_ffn_hidden_size;
    launch.num_layers = model.num_layers;
    launch.first_dense_layers = model.first_dense_layers;
    launch.router_load_balancing = to_string(model.router_load_balancing);
  }
  // Zero without multi-latent attention (validate() holds them to it).
  launch.q_lora_rank = model.q_lora_rank;
  launch.kv_lora_rank = model.kv_lora_rank;
  launch.qk_head_dim = model.qk_head_dim;
  launch.qk_pos_emb_head_dim = model.qk_pos_emb_head_dim;
  launch.v_head_dim = model.v_head_dim;
  launch.micro_batch = config.micro_batch;
  launch.num_microbatches = plan.num_microbatches;
  launch.global_batch = static_cast<std::int64_t>(config.micro_batch) * config.dp * plan.num_microbatches;
  launch.virtual_stages = effective_virtual_stages(config);
  launch.microbatch_group_size =
      launch.virtual_stages > 1 ? interleaved_group_size(config.pp, plan.num_microbatches) : 0;
  launch.layers_per_stage = config.layers_per_stage;
  launch.recompute = config.recompute;
  launch.recomputed_layers_per_chunk = config.recompute == RecomputeMode::full ? config.recomputed_layers_per_chunk : 0;
  launch.sequence_parallel = config.sequence_parallel && config.tp > 1;
  launch.distributed_optimizer = config.distributed_optimizer;
  launch.fully_sharded = config.fully_sharded;
  // What critical_path and the simulator assume: overlapped reduction whenever there is one to
  // overlap, and the parameter all-gather under the next forwards whenever they price it.
  launch.overlap_grad_reduce = training.overlap_gradient_reduce && config.dp_cp() > 1;
  launch.overlap_param_gather = parameter_gather_share(config, training) > 0;
  // What the performance model prices (performance.cpp): the userbuffers overlap and the async TP
  // backward only under sequence parallelism (Megatron asserts it for --tp-comm-overlap,
  // training/arguments.py @d98e8a64 l.1441-1442; nanotron's async row-parallel layers need
  // REDUCE_SCATTER, parallel/tensor_parallel/nn.py @2411b022 l.145-146).
  launch.tp_comm_overlap = training.overlap_tensor_parallel_communication && launch.sequence_parallel;
  launch.tp_backward_overlap = training.overlap_tensor_parallel_backward && launch.sequence_parallel;
  launch.fp32_gradients = training.gradients_in_fp32 || training.precision == Precision::fp32;
  launch.precision = training.precision;
  launch.tp_recompute_allgather = training.tensor_parallel_recompute_allgather;
  launch.cross_entropy_fusion = training.cross_entropy_fusion;
  launch.pipeline_schedule = training.pipeline_schedule;
  launch.sequence_length = training.sequence_length;
  const ModelSpec launched = model_for_sequence(model, training.sequence_length);
  launch.max_position_embeddings = std::max(launched.learned_position_embeddings, training.sequence_length);
  // Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with tp > 1 before Blackwell (arguments.py
  // validate_args), so that each TP collective is queued before the GEMM it feeds; NeMo runs the
  // same Megatron-core layers. torchtitan's FSDP wants more than one connection.
  if (config.tp > 1 && training.target.framework != Framework::torchtitan) {
    launch.environment.emplace_back("CUDA_DEVICE_MAX_CONNECTIONS", "1");
  }
  // Megatron-DeepSpeed reads its batch and ZeRO stage from a DeepSpeed JSON beside its arguments.
  if (training.target.framework == Framework::megatron_deepspeed) {
    launch.environment.emplace_back("PIPETTE_DEEPSPEED_CONFIG", deepspeed_config(launch));
  }
  return launch;
}

std::string model_problem(Framework framework, const ModelSpec& model) {
  const bool profiled = framework == Framework::megatron_deepspeed || framework == Framework::nanotron ||
                        framework == Framework::deepspeed;
  // The stacks with a StackProfile other than the reference price dense models only
  // (profiled_stack_problem).
  if (profiled && model.is_moe()) return "its mixture-of-experts layers are not priced for " + std::string(to_string(framework));
  if (profiled && model.is_mla()) return "its multi-latent attention is not priced for " + std::string(to_string(framework));
  // ALiBi is BigScience's Megatron-DeepSpeed (--position-embedding-type alibi: megatron/arguments.py
  // l.398-401, model/transformer.py l.490-498 @8387ae17; deepspeedai's @4efb479d keeps only the enum,
  // megatron/enums.py l.31-34, so a BLOOM job runs the fork). Megatron-LM's --position-embedding-type
  // takes learned_absolute, rope, yarn, mrope, relative or none (megatron/training/arguments.py
  // @d98e8a64 l.2397-2398); torchtitan's and nanotron's models apply RoPE. deepspeed runs the job's
  // own model.
  if (model.alibi && !runs_on_deepspeed(framework)) {
    return std::string("its ALiBi attention biases (alibi: true) are not among ") + to_string(framework) +
           "'s position embeddings (plan it for megatron-deepspeed or deepspeed)";
  }
  // nanotron's attention is flash-attn 2's flash_attn_varlen_func (models/llama.py @2411b022 l.21-22,
  // 290), which pads a head to a multiple of 8 (Dao-AILab/flash-attention @0251105a
  // flash_attn/flash_attn_interface.py l.942) but stops above 256 (csrc/flash_attn/flash_api.cpp
  // l.634, mha_varlen_fwd).
  const int widest_head = std::max(model.query_key_head_width(), model.value_head_width());
  if (framework == Framework::nanotron && widest_head > 256) {
    return "its heads are " + std::to_string(widest_head) +
           " wide, and nanotron's flash-attn 2 (flash_attn_varlen_func, models/llama.py l.290) takes at most 256";
  }
  return {};
}

std::string mlp_split_problem(const ModelSpec& model, Framework framework, int tp) {
  // Transformer Engine's linears (transformer_engine/pytorch/module/linear.py @d0067d0d l.1623-1625,
  // under Megatron-core and NeMo), Megatron-DeepSpeed's (megatron/core/tensor_parallel/layers.py
  // @4efb479d l.535, 722: divide() asserts) and nanotron's (parallel/tensor_parallel/nn.py @2411b022
  // l.63, 128) split their ffn-wide dimension into equal shards; torchtitan's DTensors shard
  // unevenly, and DeepSpeed runs no TP of its own.
  if (tp <= 1 || framework == Framework::torchtitan || framework == Framework::deepspeed) return {};
  for (const int width : {model.ffn_hidden_size, model.shared_expert_ffn_hidden_size}) {
    if (width > 0 && width % tp != 0)
      return "tp=" + std::to_string(tp) + " does not divide the MLP's " + std::to_string(width) + "-wide hidden layer";
  }
  return {};
}

namespace {

// Full recompute of the first N layers of each chunk (--recompute-method block) is Megatron-core's
// (recompute.py @d98e8a64 l.164-177, which NeMo's Megatron-Bridge runs); the other stacks
// checkpoint every layer or none.
std::string recompute_problem(Framework framework, const ParallelConfig& config) {
  if (config.recompute != RecomputeMode::full || config.recomputed_layers_per_chunk <= 0) return {};
  const std::string what = "recompute=" + recompute_knob(config);
  switch (framework) {
    case Framework::megatron_core:
    case Framework::nemo: return {};
    case Framework::torchtitan:
      // ActivationCheckpointing.apply wraps every transformer block (distributed/
      // activation_checkpoint.py @b5bcd76c l.150-163).
      return "torchtitan's activation checkpointing wraps every transformer block, not the first N of a stage (" + what +
             "): plan with recompute=full";
    case Framework::nanotron:
      return "nanotron's recompute_layer checkpoints every decoder layer or none (models/llama.py @2411b022 "
             "l.761-776), not the first N of a stage (" + what + "): plan with recompute=full";
    case Framework::megatron_deepspeed:
      // GPTModelPipe, what --deepspeed builds, turns only the uniform method into DeepSpeed's
      // activation_checkpoint_interval (megatron/model/gpt_model.py @4efb479d l.446-451).
      return "megatron-deepspeed's pipeline model (GPTModelPipe) ignores --recompute-method block and recomputes "
             "nothing (" + what + "): plan with recompute=full";
    case Framework::deepspeed:
      // PipelineModule checkpoints spans of activation_checkpoint_interval layers
      // (deepspeed/runtime/pipe/module.py @edaa7221 l.373-382).
      return "DeepSpeed's PipelineModule checkpoints every span of activation_checkpoint_interval layers, not the "
             "first N of a stage (" + what + "): plan with recompute=full";
  }
  return {};
}

// What Pipette prices as FSDP (ParallelConfig::fully_sharded) is torchtitan's FSDP2 on a dense
// model without a pipeline: apply_fsdp_to_decoder (distributed/fsdp.py @b5bcd76c l.168-368) with
// dp_shard = dp and no replication, one fully_shard unit per transformer block.
std::string fully_sharded_problem(Framework framework, const ModelSpec& model, const ParallelConfig& config) {
  if (!config.fully_sharded) return {};
  if (framework != Framework::torchtitan) {
    return std::string("fsdp=on: Pipette prices fully sharded data parallelism as torchtitan's FSDP2 only; plan ") +
           to_string(framework) + " with fsdp=off";
  }
  if (model.is_moe()) return "fsdp=on: Pipette prices FSDP for dense models only (torchtitan shards experts on its efsdp mesh)";
  // With pp, torchtitan keeps every block gathered from its forward to its backward
  // (get_fsdp_reshard_after_forward_policy, fsdp.py l.112-136: "default" is not pp_enabled), which
  // the memory model does not count.
  if (config.pp > 1) return "fsdp=on with pp > 1 (torchtitan then keeps the stage's parameters gathered) is not priced; plan with pp=1 or fsdp=off";
  if (config.distributed_optimizer) return "fsdp=on shards the optimizer state itself; plan with distopt=off";
  // With one data rank torchtitan's string shards nothing (dp_shard x cp = 1): that is replication.
  if (config.dp_cp() < 2) return "fsdp=on shards over the dp x cp ranks and needs more than one; plan with fsdp=off";
  return {};
}

}  // namespace

bool default_fully_sharded(Framework framework, const ModelSpec& model, int pp, int data_ranks) {
  // torchtitan's data_parallel_shard_degree defaults to -1, every rank the other dimensions leave
  // (config/configs.py @b5bcd76c l.133-144): FSDP wherever Pipette prices it.
  return framework == Framework::torchtitan && !model.is_moe() && pp == 1 && data_ranks > 1;
}

std::string launch_problem(const FrameworkTarget& target, const ModelSpec& model, const ParallelConfig& config,
                           int num_microbatches) {
  if (const std::string problem = model_problem(target.framework, model); !problem.empty()) return problem;
  if (const std::string problem = recompute_problem(target.framework, config); !problem.empty()) return problem;
  if (static_cast<int>(config.layers_per_stage.size()) != config.pp) return "layers_per_stage must have pp entries";
  if (const std::string problem = expert_problem(model, config); !problem.empty()) return problem;
  if (const std::string problem = fully_sharded_problem(target.framework, model, config); !problem.empty()) return problem;
  switch (target.framework) {
    case Framework::megatron_core:
    case Framework::nemo: return megatron_problem(target, config, num_microbatches);
    case Framework::torchtitan: {
      // torchtitan shards parameters with FSDP whenever cp > 1 (ParallelDims.fsdp_enabled is
      // dp_shard or cp enabled, distributed/parallel_dims.py @b5bcd76c l.644-645), over dp_shard x cp.
      if (config.cp > 1 && !config.fully_sharded) {
        return "torchtitan shards parameters with FSDP over cp: plan cp > 1 with fsdp=on (or cp=1)";
      }
      // torchtitan gathers MLA's input to the whole sequence on every TP rank before its
      // replicated down projections (models/deepseek_v3/sharding.py @b5bcd76c l.96-116);
      // Megatron-core, as priced, runs them on the rank's s/tp tokens with SP. Without SP both run
      // them on every token.
      if (model.is_mla() && config.tp > 1 && config.sequence_parallel) {
        return "torchtitan runs multi-latent attention's down projections on the whole sequence on every tp rank, "
               "not sequence-split as priced (plan with sp=off or tp=1)";
      }
      if (const std::string problem = torchtitan_expert_problem(model, config); !problem.empty()) return problem;
      return torchtitan_problem(model, config, num_microbatches);
    }
    case Framework::megatron_deepspeed:
    case Framework::nanotron:
    case Framework::deepspeed: return profiled_stack_problem(target.framework, model, config);
  }
  return "unknown framework";
}

namespace {

// The sizes Megatron-LM and Megatron-DeepSpeed take alike.
std::string megatron_size_arguments(const LaunchDescription& launch) {
  return "--tensor-model-parallel-size " + std::to_string(launch.tp) + " --pipeline-model-parallel-size " +
         std::to_string(launch.pp) + " --micro-batch-size " + std::to_string(launch.micro_batch) +
         " --global-batch-size " + std::to_string(launch.global_batch) + " --seq-length " +
         std::to_string(launch.sequence_length) + " --max-position-embeddings " +
         std::to_string(launch.max_position_embeddings);
}

// Megatron's recompute flags (both stacks: --recompute-granularity, --recompute-method,
// --recompute-num-layers). Full recompute of every layer is the uniform method one layer at a
// time; of the first N layers of each chunk, the block method (transformer_config.py @d98e8a64
// l.543-555).
std::string megatron_recompute_arguments(const LaunchDescription& launch) {
  switch (launch.recompute) {
    case RecomputeMode::none: return {};
    case RecomputeMode::selective: return " --recompute-granularity selective";
    case RecomputeMode::full:
      if (launch.recomputed_layers_per_chunk > 0)
        return " --recompute-granularity full --recompute-method block --recompute-num-layers " +
               std::to_string(launch.recomputed_layers_per_chunk);
      return " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  }
  return {};
}

}  // namespace

std::string megatron_arguments(const LaunchDescription& launch) {
  std::string args = megatron_size_arguments(launch);
  // Ring attention over the cp group: Megatron's default --cp-comm-type p2p (arguments.py
  // @d98e8a64 l.3221) is what the model prices, so only the size is passed.
  if (launch.cp > 1) args += " --context-parallel-size " + std::to_string(launch.cp);
  const SplitFlags flags = split_flags(launch);
  if (flags == SplitFlags::layout) {
    args += " --pipeline-model-parallel-layout " + layout_text(launch);
  } else if (launch.virtual_stages > 1) {
    args += " --num-layers-per-virtual-pipeline-stage " +
            std::to_string(launch.layers_per_stage.front() / launch.virtual_stages);
  }
  if (flags == SplitFlags::first_last) {
    const std::vector<int>& layers = launch.layers_per_stage;
    const int middle = middle_layers(layers);
    if (layers.size() == 2 || layers.front() != middle) {
      args += " --decoder-first-pipeline-num-layers " + std::to_string(layers.front());
    }
    if (layers.size() == 2 || layers.back() != middle) {
      args += " --decoder-last-pipeline-num-layers " + std::to_string(layers.back());
    }
  }
  // Megatron's default group size is pp (model_parallel_config.py __post_init__).
  if (launch.microbatch_group_size > 0 && launch.microbatch_group_size != launch.pp) {
    args += " --microbatch-group-size-per-virtual-pipeline-stage " + std::to_string(launch.microbatch_group_size);
  }
  args += megatron_recompute_arguments(launch);
  if (launch.sequence_parallel) args += " --sequence-parallel";
  if (launch.distributed_optimizer) args += " --use-distributed-optimizer";
  if (launch.overlap_grad_reduce) args += " --overlap-grad-reduce";
  if (launch.overlap_param_gather) args += " --overlap-param-gather";
  if (launch.tp_comm_overlap) args += " --tp-comm-overlap";
  // bf16 accumulates and reduces gradients in fp32 unless told (training/arguments.py @d98e8a64
  // l.1213-1217).
  if (!launch.fp32_gradients) args += " --grad-reduce-in-bf16";
  // Its implementation is left at Megatron's default, "native" (model_parallel_config.py @d98e8a64
  // l.325): the one priced (stack_profile.cpp).
  if (launch.cross_entropy_fusion) args += " --cross-entropy-loss-fusion";
  if (launch.num_experts > 0) {
    // The MoE layer as priced: the alltoall dispatcher and grouped expert GEMMs (Megatron's
    // defaults are the allgather dispatcher and per-expert GEMMs: transformer_config.py
    // @d98e8a64 l.850, 891), no a2a or shared-expert overlap (their defaults, l.717).
    args += " --expert-model-parallel-size " + std::to_string(launch.ep) + " --expert-tensor-parallel-size " +
            std::to_string(launch.etp) + " --num-experts " + std::to_string(launch.num_experts) +
            " --moe-router-topk " + std::to_string(launch.router_topk) + " --moe-ffn-hidden-size " +
            std::to_string(launch.moe_ffn_hidden_size) + " --moe-router-load-balancing-type " +
            launch.router_load_balancing + " --moe-token-dispatcher-type alltoall --moe-grouped-gemm";
    if (launch.shared_expert_ffn_hidden_size > 0) {
      args += " --moe-shared-expert-intermediate-size " + std::to_string(launch.shared_expert_ffn_hidden_size);
    }
    if (launch.first_dense_layers > 0) args += " --moe-layer-freq " + layer_pattern(launch);
  }
  if (launch.kv_lora_rank > 0) {
    // --multi-latent-attention is TransformerConfig.multi_latent_attention as a switch
    // (transformer_config.py @d98e8a64 l.288, argument_utils.py l.190-191); the widths are
    // arguments.py l.3548-3557. --q-lora-rank's default None is "no Q latent".
    args += " --multi-latent-attention";
    if (launch.q_lora_rank > 0) args += " --q-lora-rank " + std::to_string(launch.q_lora_rank);
    args += " --kv-lora-rank " + std::to_string(launch.kv_lora_rank) + " --qk-head-dim " +
            std::to_string(launch.qk_head_dim) + " --qk-pos-emb-head-dim " + std::to_string(launch.qk_pos_emb_head_dim) +
            " --v-head-dim " + std::to_string(launch.v_head_dim);
  }
  return args;
}

std::string nemo_overrides(const LaunchDescription& launch) {
  const SplitFlags flags = split_flags(launch);
  const std::vector<int>& layers = launch.layers_per_stage;
  const bool interleaved = launch.virtual_stages > 1;
  const bool first_last = flags == SplitFlags::first_last;
  std::string text;
  const auto set = [&text](const char* key, const std::string& value) {
    if (!text.empty()) text += ' ';
    text.append(key).append(1, '=').append(value);
  };
  // Every switch is written out, off included, so that a recipe's own setting cannot survive.
  set("model.tensor_model_parallel_size", std::to_string(launch.tp));
  set("model.pipeline_model_parallel_size", std::to_string(launch.pp));
  set("model.context_parallel_size", std::to_string(launch.cp));
  set("model.virtual_pipeline_model_parallel_size", or_null(launch.virtual_stages, interleaved));
  set("model.microbatch_group_size_per_vp_stage", or_null(launch.microbatch_group_size, interleaved));
  set("model.num_layers_in_first_pipeline_stage", or_null(layers.front(), first_last));
  set("model.num_layers_in_last_pipeline_stage", or_null(layers.back(), first_last));
  std::string layout = "null";
  if (flags == SplitFlags::layout) layout.assign(1, '\'').append(layout_text(launch)).append(1, '\'');
  set("model.pipeline_model_parallel_layout", layout);
  set("model.sequence_parallel", boolean(launch.sequence_parallel));
  const bool full = launch.recompute == RecomputeMode::full;
  set("model.recompute_granularity", launch.recompute == RecomputeMode::none ? "null" : to_string(launch.recompute));
  const bool block = full && launch.recomputed_layers_per_chunk > 0;
  set("model.recompute_method", full ? (block ? "block" : "uniform") : "null");
  set("model.recompute_num_layers", full ? std::to_string(block ? launch.recomputed_layers_per_chunk : 1) : "null");
  // The recipe's dataset owns the sequence length and run_recipe.py copies it to the model; a
  // GPT model provider's position table is seq_length long.
  set("model.seq_length", std::to_string(launch.sequence_length));
  set("dataset.seq_length", std::to_string(launch.sequence_length));
  set("train.micro_batch_size", std::to_string(launch.micro_batch));
  set("train.global_batch_size", std::to_string(launch.global_batch));
  // Bridge turns both on when either is (config.py _validate_and_sync_distributed_optimizer_settings).
  set("ddp.use_distributed_optimizer", boolean(launch.distributed_optimizer));
  set("optimizer.use_distributed_optimizer", boolean(launch.distributed_optimizer));
  set("ddp.overlap_grad_reduce", boolean(launch.overlap_grad_reduce));
  set("ddp.overlap_param_gather", boolean(launch.overlap_param_gather));
  set("optimizer.overlap_param_gather", boolean(launch.overlap_param_gather));
  set("model.cross_entropy_loss_fusion", boolean(launch.cross_entropy_fusion));
  if (launch.num_experts > 0) {
    // Megatron-Bridge's GPT providers are Megatron-core TransformerConfigs: the same fields.
    set("model.expert_model_parallel_size", std::to_string(launch.ep));
    set("model.expert_tensor_parallel_size", std::to_string(launch.etp));
    set("model.num_moe_experts", std::to_string(launch.num_experts));
    set("model.moe_router_topk", std::to_string(launch.router_topk));
    set("model.moe_ffn_hidden_size", std::to_string(launch.moe_ffn_hidden_size));
    set("model.moe_router_load_balancing_type", launch.router_load_balancing);
    set("model.moe_token_dispatcher_type", "alltoall");
    set("model.moe_grouped_gemm", "true");
    set("model.moe_shared_expert_overlap", "false");
    set("model.overlap_moe_expert_parallel_comm", "false");
    set("model.moe_shared_expert_intermediate_size",
        or_null(launch.shared_expert_ffn_hidden_size, launch.shared_expert_ffn_hidden_size > 0));
    if (launch.first_dense_layers > 0) set("model.moe_layer_freq", "'" + layer_pattern(launch) + "'");
  }
  if (launch.kv_lora_rank > 0) {
    // MLATransformerConfig's fields (transformer_config.py @d98e8a64 l.3278-3300): they exist on
    // an MLA model provider only (Megatron-Bridge's DeepSeek recipes). Its q_lora_rank defaults to
    // 512, so "no Q latent" is written out as null.
    set("model.multi_latent_attention", "true");
    set("model.q_lora_rank", or_null(launch.q_lora_rank, launch.q_lora_rank > 0));
    set("model.kv_lora_rank", std::to_string(launch.kv_lora_rank));
    set("model.qk_head_dim", std::to_string(launch.qk_head_dim));
    set("model.qk_pos_emb_head_dim", std::to_string(launch.qk_pos_emb_head_dim));
    set("model.v_head_dim", std::to_string(launch.v_head_dim));
  }
  return text;
}

std::string torchtitan_arguments(const LaunchDescription& launch) {
  const std::int64_t tokens_per_microbatch = static_cast<std::int64_t>(launch.micro_batch) * launch.sequence_length;
  std::string args = "--parallelism.tensor_parallel_degree " + std::to_string(launch.tp) +
                     (launch.sequence_parallel ? " --parallelism.enable_sequence_parallel"
                                               : " --parallelism.no-enable_sequence_parallel") +
                     " --parallelism.pipeline_parallel_degree " + std::to_string(launch.pp) +
                     " --parallelism.data_parallel_replicate_degree " + std::to_string(launch.fully_sharded ? 1 : launch.dp) +
                     " --parallelism.data_parallel_shard_degree " + std::to_string(launch.fully_sharded ? launch.dp : 1) +
                     " --parallelism.context_parallel_degree " + std::to_string(launch.cp);
  if (launch.num_experts > 0) args += " --parallelism.expert_parallel_degree " + std::to_string(launch.ep);
  if (launch.pp > 1) {
    const std::vector<int>& layers = launch.layers_per_stage;
    const bool interleaved = launch.virtual_stages > 1;
    const int per_stage = interleaved ? layers.front() / launch.virtual_stages : middle_layers(layers);
    args += std::string(" --parallelism.pipeline_parallel_schedule ") + (interleaved ? "Interleaved1F1B" : "1F1B") +
            " --parallelism.pipeline_parallel_layers_per_stage " + std::to_string(per_stage) +
            " --parallelism.pipeline_parallel_first_stage_less_layers " +
            std::to_string(interleaved ? 0 : per_stage - layers.front()) +
            " --parallelism.pipeline_parallel_last_stage_less_layers " +
            std::to_string(interleaved ? 0 : per_stage - layers.back()) +
            " --parallelism.num_pp_microbatches " + std::to_string(launch.num_microbatches);
  }
  args += " --training.num_tokens_per_microbatch_per_dp_rank " + std::to_string(tokens_per_microbatch) +
          " --training.num_tokens_per_train_step " + std::to_string(tokens_per_microbatch * launch.dp * launch.num_microbatches) +
          " --training.max_context_length " + std::to_string(launch.sequence_length);
  // A tyro subcommand: after every option of the root config. Its default is selective.
  switch (launch.recompute) {
    case RecomputeMode::none: args += " activation-checkpoint:none"; break;
    case RecomputeMode::selective: args += " activation-checkpoint:selective"; break;
    case RecomputeMode::full: args += " activation-checkpoint:full"; break;
  }
  return args;
}

std::string nanotron_overrides(const LaunchDescription& launch) {
  // Keys of nanotron's config (config/parallelism_config.py l.15 ParallelismArgs, l.36
  // tp_recompute_allgather, config/config.py
  // l.340 TokensArgs and l.405 OptimizerArgs @2411b022); every switch the profile prices is written out.
  std::string text = "parallelism.dp=" + std::to_string(launch.dp) + " parallelism.tp=" + std::to_string(launch.tp) +
                     " parallelism.pp=" + std::to_string(launch.pp) +
                     " parallelism.pp_engine=" + to_string(launch.pipeline_schedule) +
                     " parallelism.tp_mode=" + (launch.sequence_parallel ? "REDUCE_SCATTER" : "ALL_REDUCE") +
                     " parallelism.tp_linear_async_communication=" + boolean(launch.tp_backward_overlap) +
                     " parallelism.tp_recompute_allgather=" + boolean(launch.tp_recompute_allgather) +
                     " parallelism.recompute_layer=" + boolean(launch.recompute == RecomputeMode::full) +
                     " tokens.micro_batch_size=" + std::to_string(launch.micro_batch) +
                     " tokens.batch_accumulation_per_replica=" + std::to_string(launch.num_microbatches) +
                     " tokens.sequence_length=" + std::to_string(launch.sequence_length) +
                     " optimizer.zero_stage=" + (launch.distributed_optimizer ? "1" : "0") +
                     " optimizer.accumulate_grad_in_fp32=" + boolean(launch.fp32_gradients);
  return text;
}

std::string megatron_deepspeed_arguments(const LaunchDescription& launch) {
  // Megatron-DeepSpeed's own arguments (megatron/arguments.py @4efb479d): --zero-stage l.1487,
  // --deepspeed (DeepSpeed's add_config_arguments), --recompute-granularity l.830.
  std::string args = megatron_size_arguments(launch) + megatron_recompute_arguments(launch);
  if (launch.sequence_parallel) args += " --sequence-parallel";
  args += std::string(" --deepspeed --zero-stage ") + (launch.distributed_optimizer ? "1" : "0");
  return args;
}

std::string deepspeed_config(const LaunchDescription& launch) {
  // DeepSpeed's batch keys and ZeRO stage (deepspeed/runtime/config.py, zero/config.py @edaa7221);
  // train_batch_size = micro-batch x accumulation steps x dp, as DeepSpeed checks. The precision
  // sections (runtime/precision_config.py l.34-49, 95-106: off unless enabled) and
  // data_types.grad_accum_dtype (constants.py l.494-496, config.py l.895-896 and DtypeEnum l.101-106)
  // choose the optimizer (engine.py l.1978-2021): without them DeepSpeed would train the job's 16-bit
  // parameters with the bare optimizer, no fp32 master weights.
  std::string precision;
  if (launch.precision == Precision::bf16) {
    precision = std::string(", \"bf16\": {\"enabled\": true}, \"data_types\": {\"grad_accum_dtype\": \"") +
                (launch.fp32_gradients ? "fp32" : "bf16") + "\"}";
  } else if (launch.precision == Precision::fp16) {
    precision = ", \"fp16\": {\"enabled\": true}";
  }
  return "{\"train_batch_size\": " + std::to_string(launch.global_batch) +
         ", \"train_micro_batch_size_per_gpu\": " + std::to_string(launch.micro_batch) +
         ", \"gradient_accumulation_steps\": " + std::to_string(launch.num_microbatches) +
         ", \"zero_optimization\": {\"stage\": " + (launch.distributed_optimizer ? "1" : "0") + "}" + precision + "}";
}

bool needs_distributed_optimizer(const TrainingSpec& training) {
  const Framework framework = training.target.framework;
  // DeepSpeed's _do_optimizer_sanity_check (engine.py @edaa7221 l.1978-2021): bf16 parameters with
  // fp32 accumulation are the BF16_Optimizer under ZeRO stage 1 (l.1994-1996, since 8d87c89e,
  // 2023-01); without ZeRO they raise NotImplementedError (l.2011-2021, since 09885efe, 2026-01;
  // before it they too ran the BF16_Optimizer, which shards its fp32 state over dp either way).
  return runs_on_deepspeed(framework) && training.precision == Precision::bf16 && training.gradients_in_fp32;
}

std::string optimizer_problem(const TrainingSpec& training, const ParallelConfig& config) {
  if (needs_distributed_optimizer(training) && !config.distributed_optimizer) {
    return "DeepSpeed runs bf16 with fp32 gradient accumulation (its BF16_Optimizer, the one priced) only under "
           "ZeRO stage 1 (deepspeed/runtime/engine.py @edaa7221 l.1994-1996; without ZeRO it raises "
           "NotImplementedError, l.2011-2021): plan with distopt=on";
  }
  return {};
}

std::pair<std::string, std::string> framework_arguments(Framework framework, const LaunchDescription& launch) {
  switch (framework) {
    case Framework::megatron_core: return {"PIPETTE_MEGATRON_ARGS", megatron_arguments(launch)};
    case Framework::nemo: return {"PIPETTE_NEMO_OVERRIDES", nemo_overrides(launch)};
    case Framework::torchtitan: return {"PIPETTE_TORCHTITAN_ARGS", torchtitan_arguments(launch)};
    case Framework::megatron_deepspeed: return {"PIPETTE_MEGATRON_DEEPSPEED_ARGS", megatron_deepspeed_arguments(launch)};
    case Framework::nanotron: return {"PIPETTE_NANOTRON_OVERRIDES", nanotron_overrides(launch)};
    case Framework::deepspeed: return {"PIPETTE_DEEPSPEED_CONFIG", deepspeed_config(launch)};
  }
  return {"PIPETTE_MEGATRON_ARGS", megatron_arguments(launch)};
}

EnvironmentVariables plan_variables(const ModelSpec& model, const TrainingSpec& training, const Plan& plan,
                                    const std::vector<std::string>& node_names, const std::string& plan_hash) {
  const LaunchDescription launch = describe_launch(model, training, plan);
  std::string rank_order;
  for (const int gpu : plan.placement.gpu_of_rank) {
    if (!rank_order.empty()) rank_order += ',';
    rank_order += std::to_string(gpu);
  }
  std::string node_order;
  for (const int node : plan.node_order) {
    if (!node_order.empty()) node_order += ',';
    node_order += node_names.at(static_cast<size_t>(node));
  }
  EnvironmentVariables variables = {
      {"PIPETTE_TP", std::to_string(launch.tp)},
      {"PIPETTE_PP", std::to_string(launch.pp)},
      {"PIPETTE_DP", std::to_string(launch.dp)},
      {"PIPETTE_CP", std::to_string(launch.cp)},
      {"PIPETTE_EP", std::to_string(launch.ep)},
      {"PIPETTE_ETP", std::to_string(launch.etp)},
      {"PIPETTE_VPP", std::to_string(plan.config.virtual_stages)},
      {"PIPETTE_MICRO_BATCH", std::to_string(launch.micro_batch)},
      {"PIPETTE_GLOBAL_BATCH", std::to_string(launch.global_batch)},
      {"PIPETTE_NUM_MICROBATCHES", std::to_string(launch.num_microbatches)},
      {"PIPETTE_RECOMPUTE", recompute_knob(plan.config)},
      {"PIPETTE_SEQUENCE_PARALLEL", launch.sequence_parallel ? "1" : "0"},
      {"PIPETTE_DISTRIBUTED_OPTIMIZER", launch.distributed_optimizer ? "1" : "0"},
      {"PIPETTE_FULLY_SHARDED", launch.fully_sharded ? "1" : "0"},
      {"PIPETTE_RANK_ORDER", rank_order},
      {"PIPETTE_NODE_ORDER", node_order},
      {"PIPETTE_PREDICTED_ITER_MS", fixed(plan.time.iteration_seconds / units::millisecond, 1)},
      {"PIPETTE_PREDICTED_MEM_GIB", fixed(plan.peak_memory_bytes / units::gibibyte, 1)},
      {"PIPETTE_PLAN_HASH", plan_hash},
      framework_arguments(training.target.framework, launch),
  };
  variables.insert(variables.end(), launch.environment.begin(), launch.environment.end());
  variables.emplace_back("PIPETTE_STATUS", "ok");
  return variables;
}

const std::vector<std::string>& plan_variable_names() {
  static const std::vector<std::string> names = {
      "PIPETTE_TP", "PIPETTE_PP", "PIPETTE_DP", "PIPETTE_CP", "PIPETTE_EP", "PIPETTE_ETP", "PIPETTE_VPP", "PIPETTE_MICRO_BATCH", "PIPETTE_GLOBAL_BATCH",
      "PIPETTE_NUM_MICROBATCHES", "PIPETTE_RECOMPUTE", "PIPETTE_SEQUENCE_PARALLEL", "PIPETTE_DISTRIBUTED_OPTIMIZER",
      "PIPETTE_FULLY_SHARDED", "PIPETTE_RANK_ORDER", "PIPETTE_NODE_ORDER", "PIPETTE_PREDICTED_ITER_MS", "PIPETTE_PREDICTED_MEM_GIB", "PIPETTE_PLAN_HASH",
      "PIPETTE_MEGATRON_ARGS", "PIPETTE_NEMO_OVERRIDES", "PIPETTE_TORCHTITAN_ARGS",
      "PIPETTE_MEGATRON_DEEPSPEED_ARGS", "PIPETTE_NANOTRON_OVERRIDES", "PIPETTE_DEEPSPEED_CONFIG"};
  return names;
}

}  // namespace pipette
