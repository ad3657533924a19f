#include <algorithm>
#include <charconv>

#include "pipette/topology/job_planner.hpp"

namespace pipette {

namespace {

// One "key=value" item of the --fix and --engine grammar, after a comma unless it is the first.
void append_item(std::string& out, std::string_view key, std::string_view value) {
  if (!out.empty()) out += ',';
  out += key;
  out += '=';
  out += value;
}

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

Error item_error(std::string_view option, std::string_view item, const std::string& what) {
  return Error{std::string(option) + ": \"" + quoted_input(item) + "\": " + what};
}

// The `key=value,...` grammar --pipette-fix and --pipette-engine share: items split at commas,
// whitespace around them ignored, each key at most once. `read` takes each item's key and value
// and returns what is wrong with them, or nothing.
template <typename Read>
std::optional<Error> read_items(std::string_view text, std::string_view option, std::string_view example,
                                const std::string& keys, Read&& read) {
  std::vector<std::string> seen;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const std::string_view item = trim(text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    pos = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) {
      if (trim(text).empty()) break;
      return item_error(option, text, "empty item; separate them with single commas, e.g. " + std::string(example));
    }
    const auto equals = item.find('=');
    if (equals == std::string_view::npos) return item_error(option, item, "expected key=value; keys are " + keys);
    const std::string key(trim(item.substr(0, equals)));
    for (const auto& earlier : seen)
      if (earlier == key) return item_error(option, item, quoted_input(key) + " is given twice; keep one");
    seen.push_back(key);
    if (std::optional<std::string> problem = read(key, trim(item.substr(equals + 1))))
      return item_error(option, item, *problem);
  }
  return std::nullopt;
}

constexpr Precision kEnginePrecisions[] = {Precision::fp32, Precision::fp16, Precision::bf16, Precision::fp8};

std::optional<bool> on_off(std::string_view value) {
  if (value == "on" || value == "true" || value == "1") return true;
  if (value == "off" || value == "false" || value == "0") return false;
  return std::nullopt;
}

}  // namespace

Result<RecomputeKnob> parse_recompute_knob(std::string_view value) {
  for (const RecomputeMode mode : {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full})
    if (value == to_string(mode)) return RecomputeKnob{mode, 0};
  constexpr std::string_view block = "block:";
  if (value.substr(0, block.size()) == block) {
    const std::string_view count = value.substr(block.size());
    int layers = 0;
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), layers);
    if (ec == std::errc() && end == count.data() + count.size() && layers >= 1) return RecomputeKnob{RecomputeMode::full, layers};
    return Error{"recompute=block:N needs N, the layers recomputed per model chunk, to be a positive integer (e.g. "
                 "block:5; recompute=full recomputes every layer)"};
  }
  return Error{"recompute must be none, selective, full or block:N (full recompute of the first N layers of each "
               "model chunk)"};
}

Result<FixedKnobs> parse_fixed_knobs(std::string_view text) {
  static const std::string keys = "tp, pp, dp, cp, ep, etp, mbs, vpp, recompute, sp, distopt, fsdp";
  FixedKnobs knobs;
  const auto read = [&](const std::string& key, std::string_view value) -> std::optional<std::string> {
    auto positive = [&](std::optional<int>& slot) -> std::optional<std::string> {
      int number = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
      if (ec != std::errc() || end != value.data() + value.size() || number < 1) return key + " needs a positive integer";
      slot = number;
      return std::nullopt;
    };
    auto boolean = [&](std::optional<bool>& slot) -> std::optional<std::string> {
      slot = on_off(value);
      if (!slot) return key + " must be on or off";
      return std::nullopt;
    };
    if (key == "tp") return positive(knobs.tp);
    if (key == "pp") return positive(knobs.pp);
    if (key == "dp") return positive(knobs.dp);
    if (key == "cp") return positive(knobs.cp);
    if (key == "ep") return positive(knobs.ep);
    if (key == "etp") return positive(knobs.etp);
    if (key == "mbs") return positive(knobs.micro_batch);
    if (key == "vpp") return positive(knobs.virtual_stages);
    if (key == "recompute") {
      const auto recompute = parse_recompute_knob(value);
      if (!recompute) return recompute.error().message;
      knobs.recompute = recompute->mode;
      if (recompute->recomputed_layers_per_chunk > 0) knobs.recomputed_layers_per_chunk = recompute->recomputed_layers_per_chunk;
      return std::nullopt;
    }
    if (key == "sp") return boolean(knobs.sequence_parallel);
    if (key == "distopt") return boolean(knobs.distributed_optimizer);
    if (key == "fsdp") return boolean(knobs.fully_sharded);
    return "unknown knob \"" + quoted_input(key) + "\"; keys are " + keys;
  };
  if (auto problem = read_items(text, "--pipette-fix", "tp=8,pp=4", keys, read)) return *problem;
  return knobs;
}

std::optional<std::string> set_engine_override(EngineOverrides& overrides, const std::string& key, std::string_view value) {
  const auto boolean = [&](std::optional<bool>& slot) -> std::optional<std::string> {
    slot = on_off(value);
    if (!slot) return key + " must be on or off (got \"" + quoted_input(value) + "\")";
    return std::nullopt;
  };
  if (key == "precision") {
    for (const Precision precision : engine_precisions()) {
      if (value == to_string(precision)) {
        overrides.precision = precision;
        return std::nullopt;
      }
    }
    return "precision must be " + precision_spellings() + " (got \"" + quoted_input(value) + "\")";
  }
  if (key == "attention") {
    for (const AttentionKernel kernel : {AttentionKernel::flash, AttentionKernel::unfused}) {
      if (value == to_string(kernel)) {
        overrides.attention = kernel;
        return std::nullopt;
      }
    }
    return "attention must be flash or unfused (got \"" + quoted_input(value) + "\")";
  }
  if (key == "fp32-grads") return boolean(overrides.fp32_gradients);
  if (key == "dp-overlap") return boolean(overrides.dp_overlap);
  if (key == "tp-overlap") return boolean(overrides.tp_overlap);
  if (key == "tp-comm-overlap") return boolean(overrides.tp_comm_overlap);
  if (key == "tp-recompute-allgather") return boolean(overrides.tp_recompute_allgather);
  if (key == "ce-fusion") return boolean(overrides.cross_entropy_fusion);
  if (key == "fused-norm") return boolean(overrides.fused_norm);
  if (key == "fp8-params") return boolean(overrides.fp8_parameters);
  if (key == "nvls") return boolean(overrides.nvls);
  if (key == "pp-schedule") {
    for (const PipelineSchedule schedule :
         {PipelineSchedule::one_forward_one_backward, PipelineSchedule::all_forward_all_backward}) {
      if (value == to_string(schedule)) {
        overrides.pipeline_schedule = schedule;
        return std::nullopt;
      }
    }
    return "pp-schedule must be 1f1b or afab (got \"" + quoted_input(value) + "\")";
  }
  return "unknown key \"" + quoted_input(key) + "\"; keys are " + engine_key_list();
}

std::span<const Precision> engine_precisions() { return kEnginePrecisions; }

std::string precision_spellings() {
  std::string out;
  const std::span<const Precision> precisions = engine_precisions();
  for (std::size_t i = 0; i < precisions.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 < precisions.size() ? ", " : " or ") + to_string(precisions[i]);
  return out;
}

std::string engine_key_list() {
  std::string out;
  for (const std::string& key : engine_keys()) out += (out.empty() ? "" : ", ") + key;
  return out;
}

std::optional<Precision> merge_precision(EngineOverrides& engine, Precision precision) {
  if (engine.precision && *engine.precision != precision) return engine.precision;
  engine.precision = precision;
  return std::nullopt;
}

Result<EngineOverrides> parse_engine_overrides(std::string_view text) {
  EngineOverrides overrides;
  const auto read = [&](const std::string& key, std::string_view value) { return set_engine_override(overrides, key, value); };
  if (auto problem = read_items(text, "engine", "precision=bf16,dp-overlap=off", engine_key_list(), read)) return *problem;
  return overrides;
}

Result<std::vector<int>> parse_layer_split(std::string_view text) {
  constexpr int max_stages = 1024;
  constexpr int max_layers = 1 << 20;
  std::vector<int> layers_per_stage;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    int layers = -1;
    const auto [end, code] = std::from_chars(text.data() + start, text.data() + comma, layers);
    if (code != std::errc() || end != text.data() + comma || layers < 0 || layers > max_layers)
      return Error{"the split is not a list of layer counts"};
    layers_per_stage.push_back(layers);
    if (static_cast<int>(layers_per_stage.size()) > max_stages) return Error{"the split has more than 1024 stages"};
    start = comma + 1;
  }
  return layers_per_stage;
}

std::string format_engine_overrides(const EngineOverrides& overrides) {
  std::string out;
  const auto add = [&](const char* key, const std::string& value) { append_item(out, key, value); };
  const auto boolean = [&](const char* key, const std::optional<bool>& value) {
    if (value) add(key, *value ? "on" : "off");
  };
  if (overrides.precision) add("precision", to_string(*overrides.precision));
  if (overrides.attention) add("attention", to_string(*overrides.attention));
  boolean("fp8-params", overrides.fp8_parameters);
  boolean("fp32-grads", overrides.fp32_gradients);
  boolean("dp-overlap", overrides.dp_overlap);
  boolean("tp-overlap", overrides.tp_overlap);
  boolean("tp-comm-overlap", overrides.tp_comm_overlap);
  boolean("tp-recompute-allgather", overrides.tp_recompute_allgather);
  boolean("ce-fusion", overrides.cross_entropy_fusion);
  boolean("fused-norm", overrides.fused_norm);
  if (overrides.pipeline_schedule) add("pp-schedule", to_string(*overrides.pipeline_schedule));
  boolean("nvls", overrides.nvls);
  return out;
}

std::string format_fixed_knobs(const FixedKnobs& knobs) {
  std::string out;
  const auto add = [&](const char* key, const std::string& value) { append_item(out, key, value); };
  if (knobs.tp) add("tp", std::to_string(*knobs.tp));
  if (knobs.pp) add("pp", std::to_string(*knobs.pp));
  if (knobs.dp) add("dp", std::to_string(*knobs.dp));
  if (knobs.cp) add("cp", std::to_string(*knobs.cp));
  if (knobs.ep) add("ep", std::to_string(*knobs.ep));
  if (knobs.etp) add("etp", std::to_string(*knobs.etp));
  if (knobs.micro_batch) add("mbs", std::to_string(*knobs.micro_batch));
  if (knobs.virtual_stages) add("vpp", std::to_string(*knobs.virtual_stages));
  if (knobs.recompute) add("recompute", recompute_knob(*knobs.recompute, knobs.recomputed_layers_per_chunk.value_or(0)));
  if (knobs.sequence_parallel) add("sp", *knobs.sequence_parallel ? "on" : "off");
  if (knobs.distributed_optimizer) add("distopt", *knobs.distributed_optimizer ? "on" : "off");
  if (knobs.fully_sharded) add("fsdp", *knobs.fully_sharded ? "on" : "off");
  return out;
}

}  // namespace pipette
