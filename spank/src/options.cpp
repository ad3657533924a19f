#include "options.hpp"

#include <charconv>

#include "pipette/core/result.hpp"
#include "pipette/core/training.hpp"
#include "pipette/topology/job_planner.hpp"

namespace pipette::spank {

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::off: return "off";
    case Mode::plan: return "plan";
    case Mode::auto_remap: return "auto";
  }
  return "off";
}

const std::array<OptionInfo, option_count>& option_table() {
  static const std::array<OptionInfo, option_count> table = {{
      {OptionId::mode, "pipette", "PIPETTE", "auto|plan|off",
       "[pipette] plan the TP/PP/DP layout at job start: auto exports the plan and remaps RANK, "
       "plan exports it only, off disables (no value: auto)",
       2},
      {OptionId::model, "pipette-model", "PIPETTE_MODEL", "PRESET|FILE",
       "[pipette] model to plan for: a preset name (e.g. llama3-70b) or a model YAML file", 1},
      {OptionId::global_batch, "pipette-batch", "PIPETTE_BATCH", "SEQUENCES",
       "[pipette] global batch size in sequences", 1},
      {OptionId::sequence_length, "pipette-seq", "PIPETTE_SEQ", "TOKENS",
       "[pipette] sequence length in tokens", 1},
      {OptionId::fix, "pipette-fix", "PIPETTE_FIX", "KNOB=VALUE[,...]",
       "[pipette] knobs the search must keep, e.g. tp=8,mbs=1 "
       "(tp, pp, dp, cp, ep, etp, mbs, vpp, recompute=none|selective|full|block:N, sp, distopt, fsdp)",
       1},
      {OptionId::strict, "pipette-strict", "PIPETTE_STRICT", nullptr,
       "[pipette] fail the job when it cannot be planned instead of running it unplanned", 0},
      // A short placeholder: the six names joined by '|' are one word no terminal or man page can break.
      {OptionId::framework, "pipette-framework", "PIPETTE_FRAMEWORK", "NAME",
       "[pipette] the training framework that runs the plan (megatron-core, nemo, torchtitan, "
       "megatron-deepspeed, nanotron or deepspeed): only plans it can build are considered, "
       "and its arguments are exported (default: the site's framework)",
       1},
      {OptionId::engine, "pipette-engine", "PIPETTE_ENGINE", "KEY=VALUE[,...]",
       "[pipette] the engine's switches, over the site's defaults.engine: precision, attention, fp8-params, "
       "fp32-grads, dp-overlap, tp-overlap, tp-comm-overlap, tp-recompute-allgather, ce-fusion, fused-norm, pp-schedule, nvls "
       "(e.g. dp-overlap=off,tp-comm-overlap=on)",
       1},
      {OptionId::precision, "pipette-precision", "PIPETTE_PRECISION", "fp32|fp16|bf16|fp8",
       "[pipette] training precision (default: the site's defaults.precision, else bf16)", 1},
  }};
  return table;
}

const OptionInfo& info(OptionId id) { return option_table()[static_cast<std::size_t>(id)]; }

namespace {

constexpr std::int64_t kMaxSequenceLengthTokens = std::int64_t{1} << 24;

// A positive integer no larger than `max`, written in decimal without sign or suffix.
std::optional<std::int64_t> parse_positive(std::string_view text, std::int64_t max) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value <= 0 || value > max) return std::nullopt;
  return value;
}

Parsed invalid(std::string_view source, std::string_view value, std::string_view expected) {
  return {{}, std::string(source) + ": invalid value '" + quoted_input(value) +
                  "' (expected " + std::string(expected) + ")"};
}

// A planner parser's error, which names the option its own way (`prefix`), reworded to name the
// actual source.
Parsed reworded(std::string_view source, const Error& error, std::string_view prefix) {
  std::string_view reason = error.message;
  if (reason.starts_with(prefix)) reason.remove_prefix(prefix.size());
  return {{}, std::string(source) + ": " + std::string(reason)};
}

}  // namespace

Parsed parse_option_value(OptionId id, std::optional<std::string_view> raw, std::string_view source) {
  // Slurm hands an option given without a value to remote callbacks as "" and forwards it to
  // srun and job steps as the text "(null)".
  if (raw && (raw->empty() || *raw == "(null)")) raw.reset();
  const std::string_view value = raw ? *raw : std::string_view{};
  switch (id) {
    case OptionId::mode:
      if (!raw || value == "auto") return {"auto", {}};
      if (value == "plan" || value == "off") return {std::string(value), {}};
      return invalid(source, value, "auto, plan or off");
    case OptionId::model:
      if (value.empty()) return invalid(source, value, "a preset name or a model file path");
      return {std::string(value), {}};
    // The planner's own limits (core/training.hpp; sequences beyond 2^24 tokens are not trained,
    // and the site file's defaults.sequence_length has the same bound), refused at submission.
    case OptionId::global_batch:
      if (auto number = parse_positive(value, kMaxGlobalBatchSequences)) return {std::to_string(*number), {}};
      return invalid(source, value, "a positive number of sequences, at most " + std::to_string(kMaxGlobalBatchSequences));
    case OptionId::sequence_length:
      if (auto number = parse_positive(value, kMaxSequenceLengthTokens)) return {std::to_string(*number), {}};
      return invalid(source, value, "a positive number of tokens, at most " + std::to_string(kMaxSequenceLengthTokens));
    case OptionId::fix: {
      if (value.empty()) return invalid(source, value, "knob=value pairs such as tp=8,mbs=1");
      const Result<FixedKnobs> knobs = parse_fixed_knobs(value);
      if (knobs) return {std::string(value), {}};
      return reworded(source, knobs.error(), "--pipette-fix: ");
    }
    case OptionId::strict:
      // The command-line flag has no argument; the environment variable is a boolean.
      if (!raw || value == "1" || value == "yes" || value == "true" || value == "on") return {"1", {}};
      if (value == "0" || value == "no" || value == "false" || value == "off") return {"0", {}};
      return invalid(source, value, "1/yes/true/on or 0/no/false/off");
    case OptionId::framework: {
      Framework framework = Framework::megatron_core;
      if (parse_framework(value, framework)) return {std::string(value), {}};
      return invalid(source, value, framework_spellings());
    }
    case OptionId::engine: {
      if (value.empty()) return invalid(source, value, "key=value pairs such as dp-overlap=off");
      const Result<EngineOverrides> overrides = parse_engine_overrides(value);
      if (overrides) return {std::string(value), {}};
      return reworded(source, overrides.error(), "engine: ");
    }
    case OptionId::precision: {
      EngineOverrides overrides;
      if (!set_engine_override(overrides, "precision", value)) return {std::string(value), {}};
      return invalid(source, value, precision_spellings());
    }
    case OptionId::count: break;
  }
  return {{}, "unknown option"};
}

std::string OptionRecorder::record(OptionId id, std::optional<std::string_view> value, std::string_view source) {
  Parsed parsed = parse_option_value(id, value, source);
  if (!parsed.error.empty()) return parsed.error;
  std::optional<std::string>& slot = values_[id];
  if (slot && *slot != parsed.canonical) {
    return std::string("--") + info(id).name + " given twice with different values ('" + *slot +
           "' and '" + parsed.canonical + "')";
  }
  slot = std::move(parsed.canonical);
  return {};
}

std::string find_conflict(const OptionValues& command_line, const OptionValues& environment) {
  for (const OptionInfo& option : option_table()) {
    const auto& cli = command_line[option.id];
    const auto& env = environment[option.id];
    if (cli && env && *cli != *env) {
      return std::string("--") + option.name + "=" + *cli + " conflicts with " + option.env_var + "=" +
             *env + " in the environment; unset " + option.env_var + " or make them agree";
    }
  }
  return {};
}

Settings merge(const OptionValues& command_line, const OptionValues& environment, const SiteDefaults& site) {
  auto pick = [&](OptionId id) -> std::optional<std::string> {
    if (command_line[id]) return command_line[id];
    return environment[id];
  };
  Settings settings;
  const std::optional<std::string> mode = pick(OptionId::mode);
  const std::string mode_text = mode ? *mode : site.mode.value_or("off");
  settings.mode = mode_text == "auto" ? Mode::auto_remap : mode_text == "plan" ? Mode::plan : Mode::off;
  settings.model = pick(OptionId::model).value_or("");
  if (auto batch = pick(OptionId::global_batch)) settings.global_batch = std::stoll(*batch);
  if (auto seq = pick(OptionId::sequence_length)) settings.sequence_length = std::stoi(*seq);
  settings.fix = pick(OptionId::fix).value_or("");
  const std::optional<std::string> strict = pick(OptionId::strict);
  settings.strict = strict ? *strict == "1" : site.strict.value_or(false);
  settings.framework = pick(OptionId::framework).value_or("");
  settings.engine = pick(OptionId::engine).value_or("");
  settings.precision = pick(OptionId::precision).value_or("");
  return settings;
}

}  // namespace pipette::spank
