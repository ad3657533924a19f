#include "framework_rules.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <sstream>

namespace pipette::conformance {

namespace {

// "M:L" below = megatron/... file:line at the Megatron-LM commit in framework_rules.hpp,
// "B:" Megatron-Bridge, "T:" torchtitan, "P:" torch/distributed/pipelining/ of PyTorch.

std::vector<std::string> words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> result;
  for (std::string word; stream >> word;) result.push_back(word);
  return result;
}

std::optional<std::string> environment_value(const JobFacts& facts, const std::string& name) {
  for (const auto& [key, value] : facts.environment) {
    if (key == name) return value;
  }
  return std::nullopt;
}

std::optional<int> integer(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoi(text);
}

// argparse's reading of "--flag [value]" words: the last occurrence of an option wins, a switch
// takes no value ("" for it). Sets `refusal` for a stray word or a flag not in `known`.
std::map<std::string, std::string> argparse_values(const std::string& arguments, const std::vector<std::string>& known,
                                                   std::string& refusal) {
  std::map<std::string, std::string> values;
  const std::vector<std::string> tokens = words(arguments);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].starts_with("--")) {
      refusal = "stray token '" + tokens[i] + "'";
      return values;
    }
    const bool has_value = i + 1 < tokens.size() && !tokens[i + 1].starts_with("--");
    const std::string option = tokens[i].substr(2);
    values[option] = has_value ? tokens[++i] : "";
  }
  for (const auto& [flag, value] : values) {
    if (std::find(known.begin(), known.end(), flag) == known.end()) {
      refusal = "argparse: unrecognized argument --" + flag;
      return values;
    }
  }
  return values;
}

// KEY=VALUE words (NeMo's Hydra overrides, nanotron's dotted config keys); sets `refusal` for a
// word without '='.
std::map<std::string, std::string> override_values(const std::string& overrides, std::string& refusal) {
  std::map<std::string, std::string> values;
  for (const std::string& token : words(overrides)) {
    const size_t equals = token.find('=');
    if (equals == std::string::npos) {
      refusal = "not a KEY=VALUE override: " + token;
      return values;
    }
    values[token.substr(0, equals)] = token.substr(equals + 1);
  }
  return values;
}

// A pipeline layout string: stages split by '|', E/t/L characters (layout.py parse_str_to_list).
std::vector<std::string> layout_stages(const std::string& layout) {
  std::vector<std::string> stages(1);
  for (const char c : layout) {
    if (c == '|') {
      stages.emplace_back();
    } else if (c != ',') {
      stages.back() += c;
    }
  }
  return stages;
}

// Megatron-core's TransformerConfig.__post_init__ and the interleaved schedule's group-size check:
// the rules NeMo/Megatron-Bridge (whose model providers are TransformerConfigs) and Megatron-LM share.
struct CoreConfig {
  int tp = 1, pp = 1, dp = 1, cp = 1, micro_batch = 1;
  std::int64_t global_batch = 0;
  std::optional<int> first_stage_layers, last_stage_layers, virtual_stages, group_size;
  std::optional<std::string> layout;
  std::string recompute_granularity;  // "" = None
  std::string recompute_method;
  std::optional<int> recompute_num_layers;
  bool sequence_parallel = false, distributed_optimizer = false, overlap_grad_reduce = false,
       overlap_param_gather = false, tp_comm_overlap = false, grad_reduce_in_bf16 = false, cross_entropy_fusion = false;
  int sequence_length = 0;
  // MoE: absent unless given.
  std::optional<int> num_experts, ep, etp, router_topk, moe_ffn_hidden_size;
  std::string dispatcher;  // "" = the default
  bool grouped_gemm = false;
  // Multi-latent attention as the string builds it (q_lora_rank 0: none, its default).
  bool multi_latent_attention = false;
  int q_lora_rank = 0;
  std::optional<int> kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim, v_head_dim;
};

// Multi-latent attention: Megatron-core builds MLASelfAttention only with multi_latent_attention
// (M:training/argument_utils.py:292-293 picks MLATransformerConfig, M:core/models/gpt/
// gpt_layer_specs.py:244); its widths fall back to their defaults when absent
// (M:training/arguments.py:3548-3557: kv 32, qk 128, rope 64, v 128). Whatever it builds must be
// the attention that was priced.
std::string check_attention(const CoreConfig& c, const JobFacts& facts) {
  if (!c.multi_latent_attention) {
    return facts.kv_lora_rank > 0 ? "a multi-latent-attention model launched with standard attention (priced)" : "";
  }
  if (facts.kv_lora_rank == 0) return "multi-latent attention on a model without it (priced)";
  if (c.q_lora_rank != facts.q_lora_rank || c.kv_lora_rank.value_or(32) != facts.kv_lora_rank ||
      c.qk_head_dim.value_or(128) != facts.qk_head_dim || c.qk_pos_emb_head_dim.value_or(64) != facts.qk_pos_emb_head_dim ||
      c.v_head_dim.value_or(128) != facts.v_head_dim) {
    return "the string's multi-latent-attention widths differ from the model's (priced)";
  }
  return {};
}

// Megatron-core's expert rules, shared by Megatron-LM and Bridge (both end in TransformerConfig and
// initialize_model_parallel). What Pipette priced, where the framework would start otherwise, is
// checked in the same place and marked "priced".
std::string check_experts(const CoreConfig& c, const JobFacts& facts, BuiltLayout& built) {
  const int ep = c.ep.value_or(1);
  // M:training/arguments.py:587-588: etp defaults to tp.
  const int etp = c.etp.value_or(c.tp);
  if (!c.num_experts) {
    if (facts.num_experts > 0) return "an MoE model launched without its experts (priced)";
    // M:training/arguments.py:1655-1656, M:core/transformer/transformer_config.py:1595.
    if (ep > 1) return "expert parallelism without num_experts (M:training/arguments.py:1656)";
    built.ep = 1;
    built.etp = 1;
    return {};
  }
  if (*c.num_experts != facts.num_experts || c.router_topk.value_or(2) != facts.router_topk ||
      c.moe_ffn_hidden_size.value_or(-1) != facts.moe_ffn_hidden_size) {
    return "the string's experts, top-k or expert width differ from the model's (priced)";
  }
  // M:training/arguments.py:1657.
  if (*c.num_experts % ep != 0) return "num_experts % ep (M:training/arguments.py:1657)";
  // M:core/parallel_state.py:874-884: world % (etp * ep * pp).
  if (facts.world_size % (etp * ep * c.pp) != 0) return "world size % (etp x ep x pp) (M:core/parallel_state.py:881)";
  // M:core/extensions/transformer_engine.py:1265-1267: the grouped expert linears divide their
  // width by the expert tp size.
  if (facts.moe_ffn_hidden_size % etp != 0) return "moe_ffn_hidden_size % etp (M:core/extensions/transformer_engine.py:1265)";
  // M:core/transformer/moe/moe_layer.py:636-640: training with TP > 1 and experts without SP raises.
  if (c.tp > 1 && !c.sequence_parallel) return "MoE with tp > 1 without sequence parallelism (M:core/transformer/moe/moe_layer.py:636)";
  // M:core/transformer/transformer_config.py:891: the dispatcher is allgather, alltoall or flex.
  const std::string dispatcher = c.dispatcher.empty() ? "allgather" : c.dispatcher;
  if (dispatcher != "allgather" && dispatcher != "alltoall" && dispatcher != "flex") {
    return "unknown token dispatcher " + dispatcher + " (M:core/transformer/transformer_config.py:891)";
  }
  if (dispatcher != "alltoall" || !c.grouped_gemm) return "not the alltoall dispatcher with grouped GEMMs that was priced";
  built.ep = ep;
  built.etp = etp;
  return {};
}

// The same Megatron-core settings under Megatron-LM's argument names and Bridge's config keys.
struct SizeNames {
  const char* tp;
  const char* cp;
  const char* pp;
  const char* micro_batch;
  const char* global_batch;
  const char* first_stage_layers;
  const char* last_stage_layers;
  const char* group_size;
};
constexpr SizeNames kMegatronNames{"tensor-model-parallel-size", "context-parallel-size", "pipeline-model-parallel-size", "micro-batch-size",
                                   "global-batch-size", "decoder-first-pipeline-num-layers",
                                   "decoder-last-pipeline-num-layers",
                                   "microbatch-group-size-per-virtual-pipeline-stage"};
constexpr SizeNames kNemoNames{"model.tensor_model_parallel_size", "model.context_parallel_size", "model.pipeline_model_parallel_size",
                               "train.micro_batch_size", "train.global_batch_size",
                               "model.num_layers_in_first_pipeline_stage", "model.num_layers_in_last_pipeline_stage",
                               "model.microbatch_group_size_per_vp_stage"};

template <typename Number>
CoreConfig read_sizes(const SizeNames& names, Number number) {
  CoreConfig c;
  c.tp = number(names.tp).value_or(1);
  c.cp = number(names.cp).value_or(1);
  c.pp = number(names.pp).value_or(1);
  c.micro_batch = number(names.micro_batch).value_or(1);
  c.global_batch = number(names.global_batch).value_or(0);
  c.first_stage_layers = number(names.first_stage_layers);
  c.last_stage_layers = number(names.last_stage_layers);
  c.group_size = number(names.group_size);
  return c;
}

// Multi-latent attention's widths under both spellings.
struct MlaNames {
  const char* q_lora_rank;
  const char* kv_lora_rank;
  const char* qk_head_dim;
  const char* qk_pos_emb_head_dim;
  const char* v_head_dim;
};
constexpr MlaNames kMegatronMlaNames{"q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim"};
constexpr MlaNames kNemoMlaNames{"model.q_lora_rank", "model.kv_lora_rank", "model.qk_head_dim",
                                 "model.qk_pos_emb_head_dim", "model.v_head_dim"};

template <typename Number>
void read_mla_widths(const MlaNames& names, Number number, CoreConfig& c) {
  c.q_lora_rank = number(names.q_lora_rank).value_or(0);
  c.kv_lora_rank = number(names.kv_lora_rank);
  c.qk_head_dim = number(names.qk_head_dim);
  c.qk_pos_emb_head_dim = number(names.qk_pos_emb_head_dim);
  c.v_head_dim = number(names.v_head_dim);
}

std::string check_core(const CoreConfig& c, const JobFacts& facts, BuiltLayout& built) {
  const int L = facts.num_layers;
  // M:training/arguments.py:424-450: the model-parallel size is tp x pp x cp, dp the rest.
  if (c.tp < 1 || c.pp < 1 || c.cp < 1 || facts.world_size % (c.tp * c.pp * c.cp) != 0) {
    return "world size not divisible by tp x pp x cp (M:training/arguments.py:432)";
  }
  built.tp = c.tp;
  built.pp = c.pp;
  built.cp = c.cp;
  built.dp = facts.world_size / (c.tp * c.pp * c.cp);
  if (facts.num_attention_heads % c.tp != 0) return "num_attention_heads % tp (M:core/transformer/transformer_config.py:1446)";
  if (facts.num_kv_heads % c.tp != 0) return "num_query_groups % tp (M:core/transformer/transformer_config.py:1462)";
  if (c.global_batch % (static_cast<std::int64_t>(c.micro_batch) * built.dp) != 0) {
    return "global batch not divisible by micro batch x dp (M:core/num_microbatches_calculator.py:381)";
  }
  built.micro_batch = c.micro_batch;
  built.global_batch = c.global_batch;
  const int microbatches = static_cast<int>(c.global_batch / (static_cast<std::int64_t>(c.micro_batch) * built.dp));
  int vpp = c.virtual_stages.value_or(1);
  std::vector<int> split;
  if (c.layout) {
    // transformer_config.py:2242-2290 and pipeline_parallel_layer_layout.py:25-150.
    if (c.first_stage_layers || c.last_stage_layers) return "layout with first/last stage layers (M:core/transformer/transformer_config.py:2251)";
    const std::vector<std::string> stages = layout_stages(*c.layout);
    if (stages.size() % static_cast<size_t>(c.pp) != 0) return "layout stages % pp (M:core/transformer/pipeline_parallel_layer_layout.py:41)";
    const int detected = static_cast<int>(stages.size()) / c.pp;
    if (c.virtual_stages && *c.virtual_stages != detected) return "vpp conflicts with the layout (M:core/transformer/transformer_config.py:2279)";
    vpp = detected;
    std::string layers_only;
    for (const std::string& stage : stages) layers_only += stage;
    if (layers_only.empty() || layers_only.front() != 'E' || layers_only.back() != 'L') {
      return "layout must start with E and end with L (M:core/transformer/pipeline_parallel_layer_layout.py:95)";
    }
    if (std::count(layers_only.begin(), layers_only.end(), 'E') != 1 || std::count(layers_only.begin(), layers_only.end(), 'L') != 1) {
      return "one E and one L (M:core/transformer/pipeline_parallel_layer_layout.py:103)";
    }
    if (std::count(layers_only.begin(), layers_only.end(), 't') != L) return "layout decoder layers != num_layers (M:core/transformer/pipeline_parallel_layer_layout.py:107)";
    if (layers_only.find_first_not_of("EtL") != std::string::npos) return "unknown layout character (M:core/transformer/pipeline_parallel_layer_layout.py:315)";
    split.assign(static_cast<size_t>(c.pp), 0);
    std::vector<int> chunk_layers(stages.size());
    for (size_t i = 0; i < stages.size(); ++i) {
      chunk_layers[i] = static_cast<int>(std::count(stages[i].begin(), stages[i].end(), 't'));
      split[i % static_cast<size_t>(c.pp)] += chunk_layers[i];
    }
    // Pipette's schedule model runs equal chunks per rank; a layout with unequal chunks would be
    // built, but not as priced.
    for (size_t i = 0; i < stages.size(); ++i) {
      if (chunk_layers[i] * vpp != split[i % static_cast<size_t>(c.pp)]) return "unequal chunks on one rank (not what was priced)";
    }
  } else if (c.first_stage_layers || c.last_stage_layers) {
    // transformer_config.py:2294-2357 ("Uneven PP").
    int remaining = L;
    int middle_stages = c.pp;
    for (const auto& end : {c.first_stage_layers, c.last_stage_layers}) {
      if (!end) continue;
      if (*end <= 0) return "first/last stage layers must be > 0 (M:core/transformer/transformer_config.py:2301)";
      if (*end % vpp != 0) return "first/last stage layers % vpp (M:core/transformer/transformer_config.py:2305)";
      remaining -= *end;
      --middle_stages;
    }
    if ((remaining != 0) != (middle_stages != 0)) return "middle layers vs middle stages mismatch (M:core/transformer/transformer_config.py:2339)";
    if (middle_stages > 0 && remaining % middle_stages != 0) return "middle layers % middle stages (M:core/transformer/transformer_config.py:2347)";
    if (middle_stages > 0 && (remaining / middle_stages) % vpp != 0) return "middle layers per rank % vpp (M:core/transformer/transformer_config.py:2356)";
    const int per_middle = middle_stages > 0 ? remaining / middle_stages : 0;
    split.assign(static_cast<size_t>(c.pp), per_middle);
    if (c.first_stage_layers) split.front() = *c.first_stage_layers;
    if (c.last_stage_layers) split.back() = *c.last_stage_layers;
  } else {
    if (L % c.pp != 0) return "num_layers % pp with an even split (M:training/arguments.py:995)";
    if ((L / c.pp) % vpp != 0) return "layers per rank % vpp (M:training/arguments.py:972)";
    split.assign(static_cast<size_t>(c.pp), L / c.pp);
  }
  if (vpp > 1) {
    if (c.pp < 2) return "interleaving needs pp > 1 (M:training/arguments.py:1004)";
    // model_parallel_config.py:567 (default N = pp), schedules.py:1160-1180.
    const int group = c.group_size.value_or(c.pp);
    if (group > microbatches || group < c.pp) return "group size outside [pp, M] (M:core/pipeline_parallel/schedules.py:1160)";
    const int remainder = microbatches % group;
    if (remainder > 0 && remainder < c.pp) return "M mod N in (0, pp) (M:core/pipeline_parallel/schedules.py:1173)";
    built.microbatch_group_size = group;
  }
  built.virtual_stages = vpp;
  built.layers_per_stage = split;
  // Recompute: transformer_config.py:1900-1932.
  if (!c.recompute_granularity.empty()) {
    if (c.recompute_granularity != "full" && c.recompute_granularity != "selective") return "recompute granularity (M:core/transformer/transformer_config.py:1901)";
    if (c.recompute_granularity == "selective" && (!c.recompute_method.empty() || c.recompute_num_layers)) {
      return "selective recompute takes no method or layer count (M:training/arguments.py:1425, transformer_config.py:1926)";
    }
    if (c.recompute_granularity == "full") {
      if (c.recompute_method != "uniform" && c.recompute_method != "block") return "full recompute needs a method (M:core/transformer/transformer_config.py:1913)";
      if (!c.recompute_num_layers || *c.recompute_num_layers < 1) return "full recompute needs recompute_num_layers >= 1 (M:core/transformer/transformer_config.py:1919)";
      // block: layer i of each TransformerBlock (a stage's chunk) is checkpointed while
      // i < recompute_num_layers, more than the chunk holds meaning all (M:core/recompute.py:164-177);
      // uniform checkpoints spans of recompute_num_layers layers (l.153-162), 1: every layer.
      if (c.recompute_method == "block") built.recomputed_layers_per_chunk = *c.recompute_num_layers;
      else if (*c.recompute_num_layers != 1) return "uniform recompute of spans of several layers is not Pipette's full recompute (M:core/recompute.py:153-162)";
    }
    built.recompute = c.recompute_granularity;
  }
  // arguments.py:1024: --overlap-param-gather needs the distributed optimizer and --overlap-grad-reduce.
  if (c.overlap_param_gather && (!c.distributed_optimizer || !c.overlap_grad_reduce)) {
    return "overlap-param-gather without distributed optimizer and overlap-grad-reduce (M:training/arguments.py:1024)";
  }
  // arguments.py:1433: sequence parallelism is dropped (silently) with tp = 1.
  built.sequence_parallel = c.sequence_parallel && c.tp > 1;
  // arguments.py:1441-1442: userbuffers overlap only with sequence parallelism (after the drop above).
  if (c.tp_comm_overlap && !built.sequence_parallel) {
    return "tp-comm-overlap without sequence parallelism (M:training/arguments.py:1442)";
  }
  built.tp_comm_overlap = c.tp_comm_overlap;
  // arguments.py:1204-1217: bf16 accumulates and reduces gradients in fp32 unless --grad-reduce-in-bf16
  // (training.py:2635 hands that to DDP as grad_reduce_in_fp32).
  built.fp32_gradients = !c.grad_reduce_in_bf16;
  built.cross_entropy_fusion = c.cross_entropy_fusion;
  built.distributed_optimizer = c.distributed_optimizer;
  built.overlap_grad_reduce = c.overlap_grad_reduce;
  built.overlap_param_gather = c.overlap_param_gather;
  built.sequence_length = c.sequence_length;
  // M:training/arguments.py:1335-1338: the sequence splits into 2 x cp chunks for load balancing.
  if (c.cp > 1 && c.sequence_length % (2 * c.cp) != 0) {
    return "seq-length should be a multiple of 2 * context-parallel-size (M:training/arguments.py:1336)";
  }
  // arguments.py:1477: tp > 1 before Blackwell asserts CUDA_DEVICE_MAX_CONNECTIONS=1 (Pipette does not
  // know the GPU generation here, so the check holds for every GPU).
  if (c.tp > 1 && environment_value(facts, "CUDA_DEVICE_MAX_CONNECTIONS") != "1") {
    return "tp > 1 without CUDA_DEVICE_MAX_CONNECTIONS=1 (M:training/arguments.py:1477)";
  }
  if (const std::string problem = check_attention(c, facts); !problem.empty()) return problem;
  return check_experts(c, facts, built);
}

}  // namespace

Verdict check_megatron(const std::string& arguments, const JobFacts& facts) {
  Verdict verdict;
  static const std::vector<std::string> known = {
      "tensor-model-parallel-size", "pipeline-model-parallel-size", "micro-batch-size", "global-batch-size",
      "seq-length", "max-position-embeddings", "num-layers-per-virtual-pipeline-stage",
      "num-virtual-stages-per-pipeline-rank", "pipeline-model-parallel-layout", "decoder-first-pipeline-num-layers",
      "decoder-last-pipeline-num-layers", "microbatch-group-size-per-virtual-pipeline-stage", "recompute-granularity",
      "recompute-method", "recompute-num-layers", "sequence-parallel", "use-distributed-optimizer",
      "overlap-grad-reduce", "overlap-param-gather",
      // M:core/model_parallel_config.py:265 tp_comm_overlap, a flag through ArgumentGroupFactory
      // (M:training/arguments.py:2373); M:training/arguments.py:3053 --grad-reduce-in-bf16.
      "tp-comm-overlap", "grad-reduce-in-bf16",
      // M:core/model_parallel_config.py:320 cross_entropy_loss_fusion, a flag through
      // ArgumentGroupFactory (M:training/arguments.py:2373).
      "cross-entropy-loss-fusion",
      // M:core/model_parallel_config.py:100 context_parallel_size, a flag through
      // ArgumentGroupFactory(TransformerConfig) (M:training/arguments.py:2373; TransformerConfig is a
      // ModelParallelConfig).
      "context-parallel-size",
      // MoE (M:training/arguments.py:3518-3536 and the TransformerConfig fields arguments.py turns
      // into flags: expert_model_parallel_size, moe_router_topk, moe_ffn_hidden_size, ...).
      "expert-model-parallel-size", "expert-tensor-parallel-size", "num-experts", "moe-router-topk",
      "moe-ffn-hidden-size", "moe-router-load-balancing-type", "moe-token-dispatcher-type", "moe-grouped-gemm",
      "moe-shared-expert-intermediate-size", "moe-layer-freq",
      // MLA: M:core/transformer/transformer_config.py:288 multi_latent_attention, a store_true switch
      // through ArgumentGroupFactory (M:training/argument_utils.py:190-191); the widths are
      // M:training/arguments.py:3548-3557.
      "multi-latent-attention", "q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim"};
  std::map<std::string, std::string> values = argparse_values(arguments, known, verdict.refusal);
  if (!verdict.refusal.empty()) return verdict;
  const auto number = [&](const char* flag) -> std::optional<int> {
    const auto found = values.find(flag);
    return found == values.end() ? std::nullopt : integer(found->second);
  };
  const auto present = [&](const char* flag) { return values.count(flag) > 0; };
  // arguments.py:929: at most one way to ask for virtual stages.
  if (int(present("num-layers-per-virtual-pipeline-stage")) + int(present("num-virtual-stages-per-pipeline-rank")) +
          int(present("pipeline-model-parallel-layout")) > 1) {
    verdict.refusal = "more than one virtual pipeline option (M:training/arguments.py:929)";
    return verdict;
  }
  CoreConfig c = read_sizes(kMegatronNames, number);
  if (present("pipeline-model-parallel-layout")) c.layout = values["pipeline-model-parallel-layout"];
  if (const auto per_chunk = number("num-layers-per-virtual-pipeline-stage")) {
    // arguments.py:953-979.
    if (c.first_stage_layers || c.last_stage_layers) {
      verdict.refusal = "--num-layers-per-virtual-pipeline-stage with an uneven split (M:training/arguments.py:955)";
      return verdict;
    }
    if (facts.num_layers % c.pp != 0 || (facts.num_layers / c.pp) % *per_chunk != 0) {
      verdict.refusal = "layers per stage % layers per virtual stage (M:training/arguments.py:968-973)";
      return verdict;
    }
    const int vpp = facts.num_layers / c.pp / *per_chunk;
    if (vpp > 1) c.virtual_stages = vpp;
  }
  if (const auto vpp = number("num-virtual-stages-per-pipeline-rank"); vpp && *vpp > 1) c.virtual_stages = vpp;
  c.recompute_granularity = present("recompute-granularity") ? values["recompute-granularity"] : "";
  c.recompute_method = present("recompute-method") ? values["recompute-method"] : "";
  c.recompute_num_layers = number("recompute-num-layers");
  c.sequence_parallel = present("sequence-parallel");
  c.distributed_optimizer = present("use-distributed-optimizer");
  c.overlap_grad_reduce = present("overlap-grad-reduce");
  c.overlap_param_gather = present("overlap-param-gather");
  c.tp_comm_overlap = present("tp-comm-overlap");
  c.grad_reduce_in_bf16 = present("grad-reduce-in-bf16");
  c.cross_entropy_fusion = present("cross-entropy-loss-fusion");
  c.sequence_length = number("seq-length").value_or(0);
  c.num_experts = number("num-experts");
  c.ep = number("expert-model-parallel-size");
  c.etp = number("expert-tensor-parallel-size");
  c.router_topk = number("moe-router-topk");
  c.moe_ffn_hidden_size = number("moe-ffn-hidden-size");
  c.dispatcher = present("moe-token-dispatcher-type") ? values["moe-token-dispatcher-type"] : "";
  c.grouped_gemm = present("moe-grouped-gemm");
  c.multi_latent_attention = present("multi-latent-attention");
  read_mla_widths(kMegatronMlaNames, number, c);
  // M:training/arguments.py:3532-3534: the load-balancing choices.
  if (present("moe-router-load-balancing-type")) {
    static const std::vector<std::string> choices = {"aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn",
                                                     "quantile_balancing", "none"};
    if (std::find(choices.begin(), choices.end(), values["moe-router-load-balancing-type"]) == choices.end()) {
      verdict.refusal = "argparse: invalid choice for --moe-router-load-balancing-type (M:training/arguments.py:3533)";
      return verdict;
    }
  }
  // The job script sets the model and usually --seq-length and --max-position-embeddings itself;
  // Pipette's come last and win. arguments.py:1354.
  const std::optional<int> positions = number("max-position-embeddings");
  if (c.sequence_length < 1 || !positions || *positions < c.sequence_length) {
    verdict.refusal = "max_position_embeddings < seq_length (M:training/arguments.py:1354)";
    return verdict;
  }
  verdict.built.max_position_embeddings = *positions;
  verdict.refusal = check_core(c, facts, verdict.built);
  return verdict;
}

Verdict check_nemo(const std::string& overrides, const JobFacts& facts) {
  Verdict verdict;
  std::map<std::string, std::string> values = override_values(overrides, verdict.refusal);
  if (!verdict.refusal.empty()) return verdict;
  // Hydra override values: null, true/false, integers, quoted strings (B:training/utils/omegaconf_utils.py:163).
  const auto is_null = [&](const char* key) { return !values.count(key) || values[key] == "null"; };
  const auto number = [&](const char* key) -> std::optional<int> { return is_null(key) ? std::nullopt : integer(values[key]); };
  const auto flag = [&](const char* key) { return values.count(key) && values[key] == "true"; };
  for (const auto& [key, value] : values) {
    const bool known_section = key.starts_with("model.") || key.starts_with("train.") || key.starts_with("ddp.") ||
                               key.starts_with("optimizer.") || key.starts_with("dataset.");
    if (!known_section) {
      verdict.refusal = "no ConfigContainer section for " + key;
      return verdict;
    }
    if (value != "null" && value != "true" && value != "false" && !integer(value) &&
        !(value.size() >= 2 && value.front() == '\'' && value.back() == '\'') && value.find_first_of(" '\"") != std::string::npos) {
      verdict.refusal = "unparsable override value " + key + "=" + value;
      return verdict;
    }
  }
  CoreConfig c = read_sizes(kNemoNames, number);
  c.virtual_stages = number("model.virtual_pipeline_model_parallel_size");
  // Bridge's GPT provider is a Megatron-core TransformerConfig (B:models/gpt_provider.py:129), so
  // the layout reaches transformer_config.py's parsing; Bridge skips its own even-chunk assert
  // with a layout (B:models/gpt_provider.py:248-255) and passes it quoted, as here
  // (B:examples/model_verification_cards/glm5-2/card.yaml:170).
  if (!is_null("model.pipeline_model_parallel_layout")) {
    std::string layout = values["model.pipeline_model_parallel_layout"];
    if (layout.size() >= 2 && layout.front() == '\'') layout = layout.substr(1, layout.size() - 2);
    c.layout = layout;
  }
  c.recompute_granularity = is_null("model.recompute_granularity") ? "" : values["model.recompute_granularity"];
  c.recompute_method = is_null("model.recompute_method") ? "" : values["model.recompute_method"];
  c.recompute_num_layers = number("model.recompute_num_layers");
  c.sequence_parallel = flag("model.sequence_parallel");
  // B:training/config.py:2111-2137 turns both distributed-optimizer (and param-gather) switches on
  // when either is: a plan that wants them off must say so in both places.
  c.distributed_optimizer = flag("ddp.use_distributed_optimizer") || flag("optimizer.use_distributed_optimizer");
  c.overlap_grad_reduce = flag("ddp.overlap_grad_reduce");
  c.overlap_param_gather = flag("ddp.overlap_param_gather") || flag("optimizer.overlap_param_gather");
  // B:models/gpt_provider.py:205: the GPT providers fuse the loss unless told not to.
  c.cross_entropy_fusion = !values.count("model.cross_entropy_loss_fusion") || flag("model.cross_entropy_loss_fusion");
  c.sequence_length = number("model.seq_length").value_or(0);
  // MoE: the TransformerConfig fields themselves (M:core/transformer/transformer_config.py:239,
  // 740-760, 850, 891; parallel sizes in model_parallel_config.py).
  c.num_experts = number("model.num_moe_experts");
  c.ep = number("model.expert_model_parallel_size");
  c.etp = number("model.expert_tensor_parallel_size");
  c.router_topk = number("model.moe_router_topk");
  c.moe_ffn_hidden_size = number("model.moe_ffn_hidden_size");
  c.dispatcher = is_null("model.moe_token_dispatcher_type") ? "" : values["model.moe_token_dispatcher_type"];
  c.grouped_gemm = flag("model.moe_grouped_gemm");
  // MLA: MLATransformerConfig's fields (M:core/transformer/transformer_config.py:3285-3300); a
  // Bridge MLA provider is one, and its q_lora_rank defaults to 512, not to "none": absent, the
  // recipe's own value stands, which only null (no Q latent) or the model's width hold to the plan.
  c.multi_latent_attention = flag("model.multi_latent_attention");
  if (c.multi_latent_attention) {
    if (!values.count("model.q_lora_rank")) {
      verdict.refusal = "model.q_lora_rank left to the recipe (MLATransformerConfig default 512, M:core/transformer/transformer_config.py:3288)";
      return verdict;
    }
    read_mla_widths(kNemoMlaNames, number, c);
    if (!c.kv_lora_rank || !c.qk_head_dim || !c.qk_pos_emb_head_dim || !c.v_head_dim) {
      verdict.refusal = "an MLA width left to the recipe (not what was priced)";
      return verdict;
    }
  }
  // B:training/config.py:1644: model and dataset sequence lengths must match.
  if (number("dataset.seq_length") != number("model.seq_length")) {
    verdict.refusal = "model.seq_length != dataset.seq_length (B:training/config.py:1644)";
    return verdict;
  }
  // A GPT provider's position table is seq_length long (max_sequence_length=seq_length).
  verdict.built.max_position_embeddings = c.sequence_length;
  verdict.refusal = check_core(c, facts, verdict.built);
  return verdict;
}

Verdict check_torchtitan(const std::string& arguments, const JobFacts& facts) {
  Verdict verdict;
  std::map<std::string, std::string> values;
  std::string checkpointing = "selective";  // T:trainer.py:108, default_factory=SelectiveAC.Config
  const std::vector<std::string> tokens = words(arguments);
  bool subcommand_seen = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].starts_with("activation-checkpoint:")) {
      // T:distributed/activation_checkpoint.py:332-336 (tyro subcommands).
      checkpointing = tokens[i].substr(std::string("activation-checkpoint:").size());
      if (checkpointing != "none" && checkpointing != "full" && checkpointing != "selective" && checkpointing != "memory-budget") {
        verdict.refusal = "unknown activation-checkpoint subcommand " + checkpointing;
        return verdict;
      }
      subcommand_seen = true;
      continue;
    }
    if (subcommand_seen) {
      verdict.refusal = "root option after the subcommand: tyro reads it as the subcommand's";
      return verdict;
    }
    if (!tokens[i].starts_with("--")) {
      verdict.refusal = "stray token '" + tokens[i] + "'";
      return verdict;
    }
    const bool has_value = i + 1 < tokens.size() && !tokens[i + 1].starts_with("--") && !tokens[i + 1].starts_with("activation-checkpoint:");
    const std::string option = tokens[i].substr(2);
    values[option] = has_value ? tokens[++i] : "";
  }
  const auto number = [&](const std::string& key, int fallback) -> std::int64_t {
    const auto found = values.find(key);
    return found == values.end() ? fallback : std::stoll(found->second);
  };
  // T:config/configs.py:121-240 and 36-63 (defaults).
  const int tp = static_cast<int>(number("parallelism.tensor_parallel_degree", 1));
  const int pp = static_cast<int>(number("parallelism.pipeline_parallel_degree", 1));
  const int replicate = static_cast<int>(number("parallelism.data_parallel_replicate_degree", 1));
  const int shard = static_cast<int>(number("parallelism.data_parallel_shard_degree", -1));
  const int cp = static_cast<int>(number("parallelism.context_parallel_degree", 1));  // configs.py:239
  bool sequence_parallel = true;  // configs.py:169
  if (values.count("parallelism.no-enable_sequence_parallel")) sequence_parallel = false;
  // T:distributed/parallel_dims.py:176-182.
  if (shard < 1 || cp < 1 || replicate * shard * cp * tp * pp != facts.world_size) {
    verdict.refusal = "dp_replicate * dp_shard * cp * tp * pp != world size (T:distributed/parallel_dims.py:182)";
    return verdict;
  }
  // T:distributed/parallel_dims.py:644-645: FSDP is on whenever dp_shard or cp is, sharding over
  // dp_shard x cp (T:distributed/fsdp.py:54-63). Pipette prices it on dense models without a
  // pipeline and without replication (core/src/launch.cpp fully_sharded_problem).
  const bool fsdp = shard > 1 || cp > 1;
  if (fsdp && replicate > 1) {
    verdict.refusal = "HSDP (dp_replicate > 1 beside FSDP): not what Pipette priced";
    return verdict;
  }
  if (fsdp && pp > 1) {
    verdict.refusal = "FSDP with pp > 1 keeps each stage gathered (T:distributed/fsdp.py:112-136): not what Pipette priced";
    return verdict;
  }
  if (fsdp && facts.num_experts > 0) {
    verdict.refusal = "FSDP of a model with experts (efsdp mesh): not what Pipette priced";
    return verdict;
  }
  if (facts.num_attention_heads % tp != 0 || facts.num_kv_heads % tp != 0) {
    verdict.refusal = "tp must divide the heads (the model's colwise split)";
    return verdict;
  }
  // T:models/deepseek_v3/sharding.py:96-116: MLA's input is gathered to Replicate on the TP mesh
  // before the replicated down projections, which then run on every token: priced sequence-split
  // with SP (Megatron-core's way).
  if (facts.kv_lora_rank > 0 && tp > 1 && sequence_parallel) {
    verdict.refusal = "MLA down projections on the gathered sequence with SP: not what was priced";
    return verdict;
  }
  // T:config/configs.py:282-290, T:distributed/parallel_dims.py:186-192: ep divides
  // dp_shard * cp * tp (cp = 1 past the FSDP check above); efsdp = dp_shard * cp * tp / ep shards the experts with FSDP
  // when above 1 (parallel_dims.py _mesh_exist "efsdp"), which Pipette does not price.
  // T:models/common/moe_sharding.py:201-238: without EP the experts are split over TP.
  const int ep = static_cast<int>(number("parallelism.expert_parallel_degree", 1));
  if (ep < 1 || (shard * cp * tp) % ep != 0) {  // parallel_dims.py:188
    verdict.refusal = "expert_parallel_degree must divide dp_shard * cp * tp (T:distributed/parallel_dims.py:190)";
    return verdict;
  }
  if (ep > 1 && shard * tp / ep > 1) {
    verdict.refusal = "experts FSDP-sharded over efsdp > 1: not what Pipette priced";
    return verdict;
  }
  if (ep > 1 && facts.num_experts == 0) {
    verdict.refusal = "expert parallelism on a dense model (priced)";
    return verdict;
  }
  if (facts.num_experts > 0 && facts.num_experts % ep != 0) {
    verdict.refusal = "num_experts % expert_parallel_degree (T:models/common/decoder.py:204)";
    return verdict;
  }
  const std::int64_t tokens_per_microbatch = number("training.num_tokens_per_microbatch_per_dp_rank", 16384);
  const int microbatches_per_pp = pp > 1 ? static_cast<int>(number("parallelism.num_pp_microbatches", 1)) : 1;
  const std::int64_t step_tokens = number("training.num_tokens_per_train_step", -1);
  const int context = static_cast<int>(number("training.max_context_length", 2048));
  // T:trainer.py:296-306: the tokens of a micro-batch split evenly over the TP ranks with SP and
  // into 2·cp chunks with context parallelism.
  const std::int64_t token_divisor = (tp > 1 && sequence_parallel ? tp : 1) * (cp > 1 ? 2 * cp : 1);
  if (tokens_per_microbatch % token_divisor != 0) {
    verdict.refusal = "tokens per micro-batch % (tp with SP x 2cp) (T:trainer.py:302)";
    return verdict;
  }
  // T:trainer.py:413-428, over the batch mesh, dp_replicate x dp_shard
  // (T:distributed/parallel_dims.py:374).
  const int batch = replicate * shard;
  const std::int64_t per_accumulation = tokens_per_microbatch * microbatches_per_pp * batch;
  if (step_tokens < 1 || step_tokens % per_accumulation != 0) {
    verdict.refusal = "num_tokens_per_train_step not a multiple of one accumulation step (T:trainer.py:419)";
    return verdict;
  }
  if (tokens_per_microbatch % context != 0) {
    verdict.refusal = "a micro-batch is not whole sequences of max_context_length";
    return verdict;
  }
  BuiltLayout& built = verdict.built;
  built.tp = tp;
  built.pp = pp;
  built.cp = cp;
  built.dp = batch;
  built.fully_sharded = fsdp;
  built.ep = facts.num_experts > 0 ? ep : 1;
  built.etp = facts.num_experts > 0 ? (ep > 1 ? 1 : tp) : 1;
  built.sequence_length = context;
  built.max_position_embeddings = context;
  built.micro_batch = static_cast<int>(tokens_per_microbatch / context);
  built.global_batch = step_tokens / context;
  built.sequence_parallel = sequence_parallel && tp > 1;
  built.overlap_grad_reduce = batch * cp > 1;  // FSDP/replicate reduce under the backward passes
  if (checkpointing == "memory-budget") {
    verdict.refusal = "memory-budget checkpointing is not a Pipette recompute mode";
    return verdict;
  }
  built.recompute = checkpointing;
  const int L = facts.num_layers;
  if (pp == 1) {
    // T:trainer.py:856: one forward-backward per accumulation step, none with gradient sync off,
    // so each reduces the gradients over DP: priced once per iteration, it would run that often.
    // FSDP's per-step reduce-scatters are priced (exposed_fsdp_seconds).
    if (!fsdp && replicate > 1 && step_tokens / per_accumulation > 1) {
      verdict.refusal = "a gradient reduction per accumulation step (T:trainer.py:856): not what was priced";
      return verdict;
    }
    built.layers_per_stage = {L};
    return verdict;
  }
  // T:distributed/pipeline_parallel.py:194-262 (_get_pipeline_metadata) and 357-420
  // (_generate_llm_fqn_per_model_part).
  const std::string schedule = values.count("parallelism.pipeline_parallel_schedule") ? values["parallelism.pipeline_parallel_schedule"] : "1F1B";
  const bool single = schedule == "1F1B" || schedule == "GPipe";
  if (!single && schedule != "Interleaved1F1B") {
    verdict.refusal = "schedule " + schedule + " is not one Pipette prices";
    return verdict;
  }
  const int first_less = static_cast<int>(number("parallelism.pipeline_parallel_first_stage_less_layers", 1));
  const int last_less = static_cast<int>(number("parallelism.pipeline_parallel_last_stage_less_layers", 1));
  const int effective = L + first_less + last_less;
  int stages = single ? pp : 2 * pp;
  if (values.count("parallelism.pipeline_parallel_layers_per_stage")) {
    const int per = static_cast<int>(number("parallelism.pipeline_parallel_layers_per_stage", 1));
    stages = (effective + per - 1) / per;
    if (stages % pp != 0) {
      verdict.refusal = "virtual stages % pp (T:distributed/pipeline_parallel.py:233)";
      return verdict;
    }
    if (single && stages != pp) {
      verdict.refusal = "single-stage schedule needs one stage per rank (T:distributed/pipeline_parallel.py:244)";
      return verdict;
    }
    if (!single && stages / pp < 2) {
      verdict.refusal = "multi-stage schedule needs >= 2 stages per rank (T:distributed/pipeline_parallel.py:252)";
      return verdict;
    }
  }
  const int per_stage = effective / stages;
  const int extra = effective % stages;
  if (stages > effective || per_stage == 0 || first_less > per_stage || last_less > per_stage) {
    verdict.refusal = "stage layer distribution (T:distributed/pipeline_parallel.py:390-416)";
    return verdict;
  }
  std::vector<int> chunk_layers(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    chunk_layers[static_cast<size_t>(s)] = per_stage + (s < extra ? 1 : 0) - (s == 0 ? first_less : 0) -
                                           (s == stages - 1 ? last_less : 0);
    if (chunk_layers[static_cast<size_t>(s)] < 1) {
      verdict.refusal = "a pipeline stage without layers";
      return verdict;
    }
  }
  const int vpp = stages / pp;
  // Looped schedules place stage s on rank s mod pp.
  built.layers_per_stage.assign(static_cast<size_t>(pp), 0);
  for (int s = 0; s < stages; ++s) built.layers_per_stage[static_cast<size_t>(s % pp)] += chunk_layers[static_cast<size_t>(s)];
  for (int s = 0; s < stages; ++s) {
    if (chunk_layers[static_cast<size_t>(s)] * vpp != built.layers_per_stage[static_cast<size_t>(s % pp)]) {
      verdict.refusal = "unequal chunks on one rank (not what was priced)";
      return verdict;
    }
  }
  built.virtual_stages = vpp;
  // T:distributed/pipeline_parallel.py:127 hands num_pp_microbatches to the schedule as is (and
  // :305 only warns below the stage count). P:schedules.py, class Schedule1F1B.__init__: "Number of
  // microbatches (m) must be greater than or equal to the number of stages (pp)"; ScheduleGPipe
  // takes any count.
  if (schedule == "1F1B" && microbatches_per_pp < pp) {
    verdict.refusal = "1F1B with fewer micro-batches than stages (P:schedules.py Schedule1F1B.__init__)";
    return verdict;
  }
  if (vpp > 1) {
    // P:schedules.py, class ScheduleInterleaved1F1B.__init__: number_of_rounds = max(1, m // pp),
    // microbatches_per_round = m // rounds, and m % rounds != 0 raises; forward_stage_index in
    // _calculate_single_rank_operations moves to the next local stage every microbatches_per_round
    // forwards: Megatron's group size N.
    const int rounds = std::max(1, microbatches_per_pp / pp);
    if (microbatches_per_pp % rounds != 0) {
      verdict.refusal = "micro-batches not a multiple of the rounds (P:schedules.py ScheduleInterleaved1F1B.__init__)";
      return verdict;
    }
    built.microbatch_group_size = microbatches_per_pp / rounds;
  }
  return verdict;
}

// The profiled stacks. "N:" = src/nanotron/ at nanotron 2411b022, "D:" = deepspeed/ at DeepSpeed
// edaa7221, "MD:" = megatron/ at Megatron-DeepSpeed 4efb479d (framework_rules.hpp).

namespace {

// An integer value of a key in the flat DeepSpeed JSON Pipette writes; nullopt when absent or not
// an integer.
std::optional<std::int64_t> json_integer(const std::string& json, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  const size_t at = json.find(quoted);
  if (at == std::string::npos) return std::nullopt;
  size_t value = json.find(':', at + quoted.size());
  if (value == std::string::npos) return std::nullopt;
  value = json.find_first_not_of(' ', value + 1);
  const size_t end = json.find_first_not_of("-0123456789", value);
  if (value == std::string::npos || end == value) return std::nullopt;
  return std::stoll(json.substr(value, end - value));
}

// Whether the JSON's precision section `name` ({"enabled": true}) is on; absent, it is off
// (D:runtime/precision_config.py:34-49, 95-106).
bool json_section_enabled(const std::string& json, const std::string& name) {
  const size_t at = json.find("\"" + name + "\"");
  if (at == std::string::npos) return false;
  const size_t close = json.find('}', at);
  const size_t enabled = json.find("\"enabled\"", at);
  if (enabled == std::string::npos || enabled > close) return false;
  const size_t value = json.find_first_not_of(" :", enabled + std::string("\"enabled\"").size());
  return value != std::string::npos && json.compare(value, 4, "true") == 0;
}

// The string value of a key in the JSON; nullopt when absent.
std::optional<std::string> json_string(const std::string& json, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  const size_t at = json.find(quoted);
  if (at == std::string::npos) return std::nullopt;
  const size_t open = json.find_first_not_of(" :", at + quoted.size());
  if (open == std::string::npos || json[open] != '"') return std::nullopt;
  const size_t close = json.find('"', open + 1);
  if (close == std::string::npos) return std::nullopt;
  return json.substr(open + 1, close - open - 1);
}

// DeepSpeed's choice of optimizer wrapper from the JSON's precision, data_types.grad_accum_dtype and
// ZeRO stage (D:runtime/engine.py:1978-2021 _do_optimizer_sanity_check, get_data_types l.1485-1496:
// the accumulation dtype defaults to the model's; DtypeEnum D:runtime/config.py:101-106). Fills the
// precision and whether gradients accumulate in fp32; a mix it does not run is its refusal.
std::string check_deepspeed_precision(const std::string& json, std::int64_t stage, bool pipeline, BuiltLayout& built) {
  const bool fp16 = json_section_enabled(json, "fp16");
  const bool bf16 = json_section_enabled(json, "bf16") || json_section_enabled(json, "bfloat16");
  if (fp16 && bf16) return "fp16 and bf16 both enabled";
  const std::string model = fp16 ? "fp16" : bf16 ? "bf16" : "fp32";
  std::string accumulation = model;
  if (const std::optional<std::string> given = json_string(json, "grad_accum_dtype")) {
    static const std::vector<std::pair<std::string, std::vector<std::string>>> spellings = {
        {"fp16", {"torch.float16", "fp16", "float16", "half"}},
        {"fp32", {"torch.float32", "fp32", "float32", "float"}},
        {"bf16", {"torch.bfloat16", "bf16", "bfloat16"}}};
    accumulation.clear();
    for (const auto& [canonical, names] : spellings) {
      if (std::find(names.begin(), names.end(), *given) != names.end()) accumulation = canonical;
    }
    if (accumulation.empty()) return "'" + *given + "' is not a valid DtypeEnum (D:runtime/config.py:101-106)";
  }
  built.precision = model;
  if (stage > 0) {
    // ZeRO: bf16 with fp32 accumulation at stage 1 is the BF16_Optimizer (l.1994-1996); the other
    // mixes are the ZeRO optimizer, accumulating in the model's dtype.
    built.fp32_gradients = model == "fp32" || (model == "bf16" && accumulation == "fp32" && stage == 1);
    return {};
  }
  if (model != accumulation) return "unsupported mix of model_dtype and grad_accum_dtype (D:runtime/engine.py:2021)";
  // Equal dtypes (l.2011-2019): fp16 is the FP16_Optimizer (fp32 master weights and gradients at the
  // step); bf16 the BF16_Optimizer with bf16 accumulation in a pipeline, else plain bf16 DDP.
  if (model == "bf16" && !pipeline) return "bf16 without ZeRO or a pipeline is DDP_BFLOAT16: no fp32 master weights, not what was priced";
  built.fp32_gradients = model != "bf16";
  return {};
}

// DeepSpeed's checks of its JSON config on dp data-parallel ranks (the config's world_size,
// D:runtime/config.py:711-724) and pp pipeline stages, for a model that is a PipelineModule or not.
std::string check_deepspeed_config(const std::string& json, int dp, int pp, bool pipeline_module, BuiltLayout& built) {
  const auto train_batch = json_integer(json, "train_batch_size");
  const auto micro_batch = json_integer(json, "train_micro_batch_size_per_gpu");
  const auto accumulation = json_integer(json, "gradient_accumulation_steps");
  if (!train_batch || !micro_batch || !accumulation) return "a batch key is missing: DeepSpeed would derive it (not what was priced)";
  // D:runtime/config.py:931-940 (_batch_assertion).
  if (*train_batch <= 0 || *micro_batch <= 0 || *accumulation <= 0) return "a batch size <= 0 (D:runtime/config.py:931-935)";
  if (*train_batch != *micro_batch * *accumulation * dp)
    return "train_batch_size != micro_batch_per_gpu * gradient_acc_step * world_size (D:runtime/config.py:937)";
  // D:runtime/zero/config.py:81-87 (ZeroStageEnum); without the key, stage 0 (l.95).
  const std::int64_t stage = json.find("\"zero_optimization\"") == std::string::npos ? 0 : json_integer(json, "stage").value_or(0);
  if (stage < 0 || stage > 3) return "no ZeRO stage " + std::to_string(stage) + " (D:runtime/zero/config.py:81-87)";
  if (pp > 1 && stage >= 2) return "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism (D:runtime/pipe/engine.py:76-77)";
  if (stage >= 2) return "ZeRO stage " + std::to_string(stage) + " shards gradients or parameters: not what was priced";
  built.micro_batch = static_cast<int>(*micro_batch);
  built.global_batch = *train_batch;
  built.distributed_optimizer = stage == 1;
  return check_deepspeed_precision(json, stage, pipeline_module, built);
}

// DeepSpeed's PipelineModule partition of the transformer layers (Megatron-DeepSpeed's GPTModelPipe
// passes partition_method='type:transformer', MD:model/gpt_model.py:463): D:runtime/utils.py:606-624
// partition_uniform, the first L mod pp stages one layer more.
std::vector<int> uniform_partition(int layers, int pp) {
  std::vector<int> split(static_cast<size_t>(pp), layers / pp);
  for (int stage = 0; stage < layers % pp; ++stage) ++split[static_cast<size_t>(stage)];
  return split;
}

}  // namespace

Verdict check_nanotron(const std::string& overrides, const JobFacts& facts) {
  Verdict verdict;
  std::map<std::string, std::string> values = override_values(overrides, verdict.refusal);
  if (!verdict.refusal.empty()) return verdict;
  // The dataclass fields these keys name: N:config/parallelism_config.py:29-39 (ParallelismArgs),
  // N:config/config.py:343-346 (TokensArgs), 409-412 (OptimizerArgs).
  static const std::vector<std::string> known = {
      "parallelism.dp", "parallelism.tp", "parallelism.pp", "parallelism.pp_engine", "parallelism.tp_mode",
      "parallelism.tp_linear_async_communication", "parallelism.recompute_layer", "parallelism.context_parallel_size",
      // N:config/parallelism_config.py:36.
      "parallelism.tp_recompute_allgather",
      "tokens.micro_batch_size", "tokens.batch_accumulation_per_replica", "tokens.sequence_length",
      "optimizer.zero_stage", "optimizer.accumulate_grad_in_fp32"};
  for (const auto& [key, value] : values) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      verdict.refusal = "no field " + key + " in nanotron's Config";
      return verdict;
    }
  }
  const auto number = [&](const char* key, int fallback) -> std::optional<int> {
    return values.count(key) ? integer(values[key]) : std::optional<int>(fallback);
  };
  const auto boolean = [&](const char* key) { return values.count(key) && values[key] == "true"; };
  const std::optional<int> dp = number("parallelism.dp", 0), tp = number("parallelism.tp", 0),
                           pp = number("parallelism.pp", 0), cp = number("parallelism.context_parallel_size", 1),
                           micro_batch = number("tokens.micro_batch_size", 0),
                           accumulation = number("tokens.batch_accumulation_per_replica", 0),
                           sequence = number("tokens.sequence_length", 0), zero = number("optimizer.zero_stage", 0);
  if (!dp || !tp || !pp || !cp || !micro_batch || !accumulation || !sequence || !zero || *dp < 1 || *tp < 1 ||
      *pp < 1 || *micro_batch < 1 || *accumulation < 1 || *sequence < 1) {
    verdict.refusal = "a size, batch or sequence field missing or not a positive integer";
    return verdict;
  }
  // N:config/utils_config.py:103-109; the dataclass default is afab (N:config/parallelism_config.py:43-44).
  const std::string engine = values.count("parallelism.pp_engine") ? values["parallelism.pp_engine"] : "afab";
  if (engine != "afab" && engine != "1f1b") {
    verdict.refusal = "pp_engine should be one of ['afab', '1f1b'] (N:config/utils_config.py:109)";
    return verdict;
  }
  // N:config/parallelism_config.py:45-46, 52-53: TensorParallelLinearMode[...upper()].
  std::string mode = values.count("parallelism.tp_mode") ? values["parallelism.tp_mode"] : "ALL_REDUCE";
  std::transform(mode.begin(), mode.end(), mode.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (mode != "ALL_REDUCE" && mode != "REDUCE_SCATTER") {
    verdict.refusal = "KeyError: no TensorParallelLinearMode " + mode + " (N:config/parallelism_config.py:53)";
    return verdict;
  }
  const bool async = boolean("parallelism.tp_linear_async_communication");
  if (async && mode == "ALL_REDUCE") {
    verdict.refusal = "async_communication is not supported for ALL_REDUCE mode (N:parallel/tensor_parallel/nn.py:145-146)";
    return verdict;
  }
  // N:parallel/context.py:26-28.
  if (*tp * *pp * *cp * *dp != facts.world_size) {
    verdict.refusal = "TP*CP*DP*PP != WORLD_SIZE (N:parallel/context.py:26-28)";
    return verdict;
  }
  // N:config/config.py:536-547.
  if (facts.num_attention_heads % *tp != 0 || facts.num_kv_heads < *tp || facts.num_attention_heads % facts.num_kv_heads != 0) {
    verdict.refusal = "heads % tp, kv heads >= tp, heads % kv heads (N:config/config.py:536-547)";
    return verdict;
  }
  // N:parallel/pipeline_parallel/engine.py:252-254.
  if (engine == "1f1b" && *accumulation < *pp - 1) {
    verdict.refusal = "1f1b needs at least pp - 1 micro-batches (N:parallel/pipeline_parallel/engine.py:252-254)";
    return verdict;
  }
  const bool fp32_accumulation = boolean("optimizer.accumulate_grad_in_fp32");
  // N:trainer.py:1093-1095 builds DDP whenever dp > 1; N:helpers.py:444-461 gives it the fp32 hook
  // with reduce_scatter = ZeRO, which raises (N:optim/gradient_accumulator.py:354-355).
  if (*zero > 0 && fp32_accumulation && *dp > 1) {
    verdict.refusal = "NotImplementedError in the DDP fp32 hook under ZeRO (N:optim/gradient_accumulator.py:354-355)";
    return verdict;
  }
  // What the profile prices (core/src/stack_profile.cpp): ZeRO-1 at most (N:helpers.py:409 builds
  // the same optimizer for any stage > 0). The engine, the TP overlap, the re-gather and the
  // gradient precision are read back below and compared with the launch.
  if (*zero > 1 || *cp != 1) {
    verdict.refusal = "ZeRO stage or cp: not what was priced";
    return verdict;
  }
  BuiltLayout& built = verdict.built;
  built.tp = *tp;
  built.pp = *pp;
  built.dp = *dp;
  built.micro_batch = *micro_batch;
  built.global_batch = static_cast<std::int64_t>(*micro_batch) * *accumulation * *dp;  // N:config/config.py:556-557
  built.sequence_length = *sequence;
  built.recompute = boolean("parallelism.recompute_layer") ? "full" : "none";
  built.sequence_parallel = mode == "REDUCE_SCATTER";
  built.distributed_optimizer = *zero == 1;
  built.tp_backward_overlap = async;
  built.fp32_gradients = fp32_accumulation;
  // N:config/parallelism_config.py:36: the dataclass default is true.
  built.tp_recompute_allgather = !values.count("parallelism.tp_recompute_allgather") || boolean("parallelism.tp_recompute_allgather");
  built.pipeline_schedule = engine;
  return verdict;
}

Verdict check_deepspeed(const std::string& config, const JobFacts& facts) {
  Verdict verdict;
  // The user's PipelineModule takes its stage count from PIPETTE_PP (README, Other stacks); DeepSpeed
  // has no tensor parallelism of its own, so the rest of the world is data parallel.
  const std::optional<int> pp = integer(environment_value(facts, "PIPETTE_PP").value_or(""));
  if (!pp || *pp < 1 || facts.world_size % *pp != 0) {
    verdict.refusal = "PIPETTE_PP does not divide the world";
    return verdict;
  }
  const int dp = facts.world_size / *pp;
  verdict.refusal = check_deepspeed_config(config, dp, *pp, *pp > 1, verdict.built);
  verdict.built.pp = *pp;
  verdict.built.dp = dp;
  return verdict;
}

Verdict check_megatron_deepspeed(const std::string& arguments, const JobFacts& facts) {
  Verdict verdict;
  // The flags of MD:arguments.py (--micro-batch-size l.801, --recompute-* l.830-850,
  // --sequence-parallel l.972, --tensor-model-parallel-size l.1149, --zero-stage l.1487) and
  // DeepSpeed's --deepspeed.
  static const std::vector<std::string> known = {
      "tensor-model-parallel-size", "pipeline-model-parallel-size", "micro-batch-size", "global-batch-size",
      "seq-length", "max-position-embeddings", "recompute-granularity", "recompute-method", "recompute-num-layers",
      "sequence-parallel", "deepspeed", "zero-stage"};
  std::map<std::string, std::string> values = argparse_values(arguments, known, verdict.refusal);
  if (!verdict.refusal.empty()) return verdict;
  const auto number = [&](const char* flag, int fallback) -> std::optional<int> {
    return values.count(flag) ? integer(values[flag]) : std::optional<int>(fallback);
  };
  const std::string granularity = values.count("recompute-granularity") ? values["recompute-granularity"] : "";
  const std::string method = values.count("recompute-method") ? values["recompute-method"] : "";
  if (!granularity.empty() && granularity != "full" && granularity != "selective") {
    verdict.refusal = "argparse: invalid choice for --recompute-granularity (MD:arguments.py:830-831)";
    return verdict;
  }
  if (!method.empty() && method != "uniform" && method != "block") {
    verdict.refusal = "argparse: invalid choice for --recompute-method (MD:arguments.py:842-843)";
    return verdict;
  }
  if (granularity == "selective" && !method.empty()) {
    verdict.refusal = "recompute method with selective granularity (MD:arguments.py:379-382)";
    return verdict;
  }
  const std::optional<int> tp_given = number("tensor-model-parallel-size", 1), pp_given = number("pipeline-model-parallel-size", 1),
                           micro_batch = number("micro-batch-size", 0), global_batch = number("global-batch-size", 0),
                           sequence = number("seq-length", 0), positions = number("max-position-embeddings", 0);
  if (!tp_given || !pp_given || !micro_batch || !global_batch || !sequence || !positions || *tp_given < 1 || *pp_given < 1) {
    verdict.refusal = "argparse: a size is not an integer";
    return verdict;
  }
  // MD:arguments.py:73-75, 85-87 (each size capped by what the world leaves), 104, 108.
  const int tp = std::min(*tp_given, facts.world_size);
  if (facts.world_size % tp != 0) {
    verdict.refusal = "world size is not divisible by tensor model parallel size (MD:arguments.py:75)";
    return verdict;
  }
  const int pp = std::min(*pp_given, facts.world_size / tp);
  if (facts.world_size % (tp * pp) != 0) {
    verdict.refusal = "world size is not divisible by tp * pp * sp (MD:arguments.py:104)";
    return verdict;
  }
  const int dp = facts.world_size / (tp * pp);
  // MD:arguments.py:164-171; MD:microbatches.py:64.
  if (*micro_batch < 1 || *global_batch < 1 || *global_batch % (*micro_batch * dp) != 0) {
    verdict.refusal = "global batch size is not divisible by micro batch size times data parallel size (MD:microbatches.py:64)";
    return verdict;
  }
  if (*positions < *sequence) {
    verdict.refusal = "max_position_embeddings < seq_length (MD:arguments.py:311)";
    return verdict;
  }
  if (!values.count("deepspeed")) {
    verdict.refusal = "without --deepspeed Megatron's own optimizer and schedule run: not what was priced";
    return verdict;
  }
  // DeepSpeed is handed the JSON Pipette exports beside the arguments (--deepspeed_config).
  const std::optional<std::string> config = environment_value(facts, "PIPETTE_DEEPSPEED_CONFIG");
  if (!config) {
    verdict.refusal = "--deepspeed without a DeepSpeed config";
    return verdict;
  }
  BuiltLayout& built = verdict.built;
  // The model is GPTModelPipe, a PipelineModule, at any pp (Megatron-DeepSpeed pretrain_gpt.py:51-52).
  verdict.refusal = check_deepspeed_config(*config, dp, pp, true, built);
  if (!verdict.refusal.empty()) return verdict;
  // DeepSpeed's engine steps once per train_batch_size samples: it must be Megatron's global batch.
  if (built.global_batch != *global_batch || built.micro_batch != *micro_batch) {
    verdict.refusal = "DeepSpeed's batch keys and Megatron's --micro/global-batch-size disagree";
    return verdict;
  }
  built.tp = tp;
  built.pp = pp;
  built.dp = dp;
  built.sequence_length = *sequence;
  built.max_position_embeddings = *positions;
  built.recompute = granularity.empty() ? "none" : granularity;
  built.sequence_parallel = values.count("sequence-parallel") && tp > 1;  // MD:arguments.py:387-388
  built.layers_per_stage = uniform_partition(facts.num_layers, pp);
  return verdict;
}

}  // namespace pipette::conformance
