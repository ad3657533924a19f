#include "pipette/topology/run_records.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "pipette/core/launch.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/units.hpp"
#include "pipette/topology/job_planner.hpp"

#include "atomic_file.hpp"
#include "guarded.hpp"

namespace pipette {

namespace {

constexpr const char* kRunTableHeader =
    "model,nodes,gpu,framework,tp,pp,dp,vpp,mbs,global_batch,seq,recompute,sp,distopt,iteration_seconds,peak_gib,status "
    "(and optionally precision, ep, etp, device_gib)";

struct Line {
  std::string_view text;
  int number = 0;
  bool last_without_newline = false;
};

std::vector<Line> lines_of(std::string_view text) {
  std::vector<Line> lines;
  int number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    Line line{text.substr(0, end), ++number, end == std::string_view::npos};
    if (!line.text.empty() && line.text.back() == '\r') line.text.remove_suffix(1);
    lines.push_back(line);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return lines;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The number right after `label` in `text` (commas as thousands separators allowed); nullopt when
// the label is absent or no number follows.
std::optional<double> number_after(std::string_view text, std::string_view label) {
  const size_t at = text.find(label);
  if (at == std::string_view::npos) return std::nullopt;
  std::string digits;
  std::string_view rest = trimmed(text.substr(at + label.size()));
  for (const char c : rest) {
    if (c == ',') continue;
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')) break;
    digits += c;
  }
  double value = 0;
  const auto [end, code] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || code != std::errc() || end != digits.data() + digits.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<int> positive_int(std::string_view text) {
  int value = 0;
  const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (code != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Per restart of a run: the first logged interval is start-up, then a tenth of the rest warm-up.
std::vector<double> steady_state(const std::vector<std::vector<double>>& segments) {
  std::vector<double> steady;
  for (const auto& segment : segments) {
    if (segment.size() < 2) continue;
    const size_t skip = 1 + (segment.size() - 1) / 10;
    steady.insert(steady.end(), segment.begin() + static_cast<std::ptrdiff_t>(skip), segment.end());
  }
  return steady;
}

bool mentions_out_of_memory(std::string_view line) {
  return line.find("CUDA out of memory") != std::string_view::npos || line.find("OutOfMemoryError") != std::string_view::npos;
}

// DeepSpeed's see_memory_usage (deepspeed/runtime/utils.py @edaa7221 l.826-829): "MA x GB Max_MA y GB
// CA z GB Max_CA w GB", in GiB (divided by 1024³). True when the line is one.
bool read_see_memory_usage(std::string_view line, RunDescription& run) {
  if (line.find("Max_MA ") == std::string_view::npos || line.find("Max_CA ") == std::string_view::npos) return false;
  const auto allocated = number_after(line, "Max_MA ");
  const auto reserved = number_after(line, "Max_CA ");
  if (!allocated || !reserved) return false;
  run.peak_allocated_bytes = std::max(run.peak_allocated_bytes.value_or(0), *allocated * units::gibibyte);
  run.peak_reserved_bytes = std::max(run.peak_reserved_bytes.value_or(0), *reserved * units::gibibyte);
  return true;
}

std::string at(const std::string& source, const Line& line) { return source + ":" + std::to_string(line.number); }

// Keeps the larger of the run's peaks and a memory line's (in `unit_bytes`); a line that lacks
// one is a warning naming it.
void keep_peaks(std::optional<double> allocated, std::optional<double> reserved, double unit_bytes,
                const std::string& where, RunDescription& run) {
  if (!allocated || !reserved) {
    run.warnings.push_back(where + ": memory line without its peak allocated and reserved ignored");
    return;
  }
  run.peak_allocated_bytes = std::max(run.peak_allocated_bytes.value_or(0), *allocated * unit_bytes);
  run.peak_reserved_bytes = std::max(run.peak_reserved_bytes.value_or(0), *reserved * unit_bytes);
}

Error interleaved_runs(const std::string& where, double step, long long previous, const char* restart_marker) {
  return Error{where + ": iteration " + std::to_string(static_cast<long long>(step)) + " after iteration " +
               std::to_string(previous) + " with no " + restart_marker +
               " between: two runs interleaved in one file; give each its own log"};
}

// The median steady-state iteration time of the logged segments, or a warning when warm-up leaves
// fewer than two iterations.
void set_steady_iteration(const std::vector<std::vector<double>>& segments, const std::string& source, RunDescription& run) {
  const std::vector<double> steady = steady_state(segments);
  if (steady.size() >= 2) {
    run.iteration_seconds = median_of(steady);
    run.steady_iterations = static_cast<int>(steady.size());
  } else if (!segments.empty() && !segments.front().empty()) {
    run.warnings.push_back(source + ": only " + std::to_string(steady.size()) +
                           " steady-state iteration line(s) after warm-up: no iteration time (run longer or log more often)");
  }
}

// A line without its terminal colour sequences (ESC[…m): torchtitan colours its metrics
// (torchtitan/tools/utils.py Color), nanotron its log prefix (logging/base.py @2411b022 l.378).
std::string without_colours(std::string_view text) {
  std::string line;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b') {
      while (i < text.size() && text[i] != 'm') ++i;
      continue;
    }
    line += text[i];
  }
  return line;
}

// ---------------------------------------------------------------- Megatron-LM / NeMo

struct MegatronArguments {
  std::map<std::string, std::string> values;
  int line = 0;
};

// The layout keys two argument blocks of one run must agree on.
constexpr const char* kLayoutKeys[] = {"tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size",
                                       "context_parallel_size",
                                       "virtual_pipeline_model_parallel_size", "micro_batch_size", "global_batch_size",
                                       "seq_length", "num_layers", "hidden_size", "num_attention_heads",
                                       "recompute_granularity", "recompute_method", "recompute_num_layers", "sequence_parallel", "use_distributed_optimizer", "world_size",
                                       "num_experts", "expert_model_parallel_size", "expert_tensor_parallel_size"};

std::optional<Error> apply_arguments(const MegatronArguments& arguments, const std::string& source, RunDescription& run) {
  const auto text = [&](const char* key) -> std::optional<std::string> {
    const auto found = arguments.values.find(key);
    if (found == arguments.values.end() || found->second == "None") return std::nullopt;
    return found->second;
  };
  const std::string where = source + ":" + std::to_string(arguments.line);
  std::optional<Error> problem;
  const auto integer = [&](const char* key, std::optional<int>& out) {
    const auto value = text(key);
    if (!value || problem) return;
    out = positive_int(*value);
    if (!out) problem = Error{where + ": argument " + key + " is '" + quoted_input(*value) + "', not a positive integer"};
  };
  const auto flag = [&](const char* key, std::optional<bool>& out) {
    if (const auto value = text(key)) out = *value == "True";
  };
  integer("tensor_model_parallel_size", run.tp);
  integer("pipeline_model_parallel_size", run.pp);
  integer("data_parallel_size", run.dp);
  integer("virtual_pipeline_model_parallel_size", run.vpp);
  integer("micro_batch_size", run.micro_batch);
  integer("seq_length", run.sequence_length);
  integer("num_layers", run.num_layers);
  integer("hidden_size", run.hidden_size);
  integer("num_attention_heads", run.num_attention_heads);
  integer("world_size", run.world_size);
  std::optional<int> global_batch;
  integer("global_batch_size", global_batch);
  integer("context_parallel_size", run.cp);
  // Expert groups, for a model with experts only: Megatron resolves an unset
  // --expert-tensor-parallel-size to tp on every run, dense ones included (arguments.py @d98e8a64
  // l.587-588), before it prints the block; a Megatron without the argument split experts over tp.
  if (text("num_experts")) {
    integer("expert_model_parallel_size", run.ep);
    integer("expert_tensor_parallel_size", run.etp);
    if (!run.ep) run.ep = 1;
    if (!run.etp) run.etp = run.tp;
  }
  if (problem) return problem;
  if (global_batch) run.global_batch = *global_batch;
  const auto granularity = text("recompute_granularity");
  run.recompute = !granularity ? RecomputeMode::none : *granularity == "full" ? RecomputeMode::full : RecomputeMode::selective;
  // --recompute-method block --recompute-num-layers N: the first N layers of each chunk
  // (recompute.py @d98e8a64 l.164-177); uniform keeps Pipette's full recompute.
  if (run.recompute == RecomputeMode::full && text("recompute_method") == "block") {
    std::optional<int> block_layers;
    integer("recompute_num_layers", block_layers);
    if (problem) return problem;
    if (!block_layers) return Error{where + ": recompute_method is block without recompute_num_layers"};
    run.recomputed_layers_per_chunk = *block_layers;
  }
  flag("sequence_parallel", run.sequence_parallel);
  flag("use_distributed_optimizer", run.distributed_optimizer);
  flag("tp_comm_overlap", run.tp_comm_overlap);
  flag("accumulate_allreduce_grads_in_fp32", run.gradients_in_fp32);
  flag("cross_entropy_loss_fusion", run.cross_entropy_fusion);
  // --overlap-grad-reduce is off unless given (training/arguments.py @d98e8a64 l.3121): a run that
  // Pipette did not plan may well have reduced its gradients after the backward.
  flag("overlap_grad_reduce", run.overlap_gradient_reduce);
  // --attention-backend (AttnBackend, core/transformer/enums.py l.51-58; printed as
  // "AttnBackend.auto"): unfused and local run Megatron's unfused attention, the others Transformer
  // Engine's fused kernels.
  if (const auto backend = text("attention_backend")) {
    run.attention = *backend == "AttnBackend.unfused" || *backend == "AttnBackend.local" ? AttentionKernel::unfused
                                                                                         : AttentionKernel::flash;
  }
  // Megatron-DeepSpeed's arguments (megatron/arguments.py @4efb479d): DeepSpeed's --deepspeed, the
  // ZeRO stage (l.1487) standing in for the distributed optimizer, the flash-attention flags
  // (l.927-933; args.use_flash_attn is their or, l.433).
  if (text("deepspeed") == "True") {
    run.framework = "megatron-deepspeed";
    std::optional<int> zero_stage;
    if (const auto stage = text("zero_stage"); stage && *stage == "0") run.distributed_optimizer = false;
    else integer("zero_stage", zero_stage);
    if (problem) return problem;
    if (zero_stage) run.distributed_optimizer = true;
    bool flash = false;
    for (const char* key : {"use_flash_attn_v1", "use_flash_attn_v2", "use_flash_attn_triton", "use_flash_attn_builder"})
      flash |= text(key) == "True";
    run.attention = flash ? AttentionKernel::flash : AttentionKernel::unfused;
  }
  if (text("fp8")) run.precision = Precision::fp8;
  else if (text("bf16") == "True") run.precision = Precision::bf16;
  else if (text("fp16") == "True") run.precision = Precision::fp16;
  return std::nullopt;
}

}  // namespace

Result<RunDescription> parse_megatron_log(std::string_view text, const std::string& source_name) {
  return guarded("run log ", source_name, [&]() -> Result<RunDescription> {
    RunDescription run;
    run.name = source_name;
    run.framework = "megatron-core";  // Megatron-LM runs on Megatron-core (the spelling of --pipette-framework)
    std::vector<std::vector<double>> segments;
    std::optional<MegatronArguments> first_arguments;
    std::optional<MegatronArguments> reading;
    long long previous_iteration = 0;
    int first_line = 0;
    for (const Line& line : lines_of(text)) {
      if (line.last_without_newline) {
        run.warnings.push_back(at(source_name, line) + ": the log ends mid-line (truncated?); its last line is ignored");
        break;
      }
      const std::string_view body = trimmed(line.text);
      if (body.find("------------------------ arguments ------------------------") != std::string_view::npos) {
        reading = MegatronArguments{{}, line.number};
        continue;
      }
      if (reading) {
        if (body.find("-------------------- end of arguments ---------------------") != std::string_view::npos) {
          if (first_arguments) {
            for (const char* key : kLayoutKeys) {
              const auto a = first_arguments->values.find(key), b = reading->values.find(key);
              const std::string before = a == first_arguments->values.end() ? "unset" : a->second;
              const std::string now = b == reading->values.end() ? "unset" : b->second;
              if (before != now)
                return Error{at(source_name, line) + ": a second arguments block says " + key + " " + quoted_input(now) +
                             " but the one at line " + std::to_string(first_arguments->line) + " said " +
                             quoted_input(before) + ": two runs in one file; give each its own log"};
            }
          } else {
            first_arguments = reading;
            if (auto problem = apply_arguments(*reading, source_name, run)) return *problem;
          }
          reading.reset();
          segments.emplace_back();
          previous_iteration = 0;
          continue;
        }
        // "  name ........ value" (arguments.py _print_args: '  {} {} {}'.format(arg, dots, value)).
        const size_t space = body.find(' ');
        if (space == std::string_view::npos) continue;
        std::string_view rest = body.substr(space);
        while (!rest.empty() && (rest.front() == ' ' || rest.front() == '.')) rest.remove_prefix(1);
        reading->values[std::string(body.substr(0, space))] = std::string(trimmed(rest));
        continue;
      }
      if (mentions_out_of_memory(body)) {
        run.out_of_memory = true;
        if (!first_line) first_line = line.number;
        continue;
      }
      if (body.find("elapsed time per iteration (ms):") != std::string_view::npos) {
        const auto iteration = number_after(body, "iteration ");
        const auto milliseconds = number_after(body, "elapsed time per iteration (ms):");
        if (!iteration || !milliseconds || !(*milliseconds > 0)) {
          return Error{at(source_name, line) + ": an iteration line without its iteration number or a positive time; "
                                               "is the log damaged?"};
        }
        if (segments.empty()) segments.emplace_back();
        if (*iteration <= previous_iteration)
          return interleaved_runs(at(source_name, line), *iteration, previous_iteration, "arguments block");
        previous_iteration = static_cast<long long>(*iteration);
        segments.back().push_back(*milliseconds / 1000);
        if (!first_line) first_line = line.number;
        continue;
      }
      if (read_see_memory_usage(body, run)) {  // Megatron-DeepSpeed: DeepSpeed's memory lines
        if (!first_line) first_line = line.number;
        continue;
      }
      if (body.find("memory (MB) |") != std::string_view::npos && body.find("[Rank ") != std::string_view::npos) {
        keep_peaks(number_after(body, "| max allocated:"), number_after(body, "| max reserved:"), units::mebibyte,
                   at(source_name, line), run);
        if (!first_line) first_line = line.number;
      }
    }
    if (reading)
      return Error{source_name + ":" + std::to_string(reading->line) + ": the arguments block never ends: the log is truncated"};
    if (!first_arguments && segments.empty() && !run.peak_reserved_bytes && !run.out_of_memory)
      return Error{source_name + ": no Megatron-LM iteration, memory or arguments lines; is this a Megatron-LM / NeMo log?"};
    set_steady_iteration(segments, source_name, run);
    if (first_line) run.name = source_name + ":" + std::to_string(first_arguments ? first_arguments->line : first_line);
    return run;
  });
}

// ---------------------------------------------------------------- torchtitan

Result<RunDescription> parse_torchtitan_log(std::string_view text, const std::string& source_name) {
  return guarded("run log ", source_name, [&]() -> Result<RunDescription> {
    RunDescription run;
    run.name = source_name;
    run.framework = "torchtitan";
    std::vector<std::vector<double>> segments(1);
    long long previous_step = 0;
    for (const Line& raw : lines_of(text)) {
      if (raw.last_without_newline) {
        run.warnings.push_back(at(source_name, raw) + ": the log ends mid-line (truncated?); its last line is ignored");
        break;
      }
      const std::string line = without_colours(raw.text);
      if (mentions_out_of_memory(line)) {
        run.out_of_memory = true;
        continue;
      }
      if (line.find("step:") == std::string::npos || line.find("tps:") == std::string::npos ||
          line.find("validate step:") != std::string::npos)
        continue;
      const auto step = number_after(line, "step:");
      const auto tps = number_after(line, "tps:");
      const auto memory = number_after(line, "memory:");
      if (!step || !tps || !(*tps > 0) || !memory) {
        return Error{at(source_name, raw) + ": a torchtitan metrics line without step, memory or tps; is the log damaged?"};
      }
      if (*step <= previous_step) segments.emplace_back();  // a restart (from a checkpoint or a new run)
      previous_step = static_cast<long long>(*step);
      segments.back().push_back(*tps);
      run.peak_reserved_bytes = std::max(run.peak_reserved_bytes.value_or(0), *memory * units::gibibyte);
      if (run.name == source_name) run.name = at(source_name, raw);
    }
    if (segments.size() > 2)
      run.warnings.push_back(source_name + ": the step counter restarted " + std::to_string(segments.size() - 1) +
                             " times; each restart's warm-up is skipped");
    const std::vector<double> steady = steady_state(segments);
    if (steady.size() >= 2) {
      run.tokens_per_second_per_gpu = median_of(steady);
      run.steady_iterations = static_cast<int>(steady.size());
    } else if (!run.peak_reserved_bytes && !run.out_of_memory) {
      return Error{source_name + ": no torchtitan metrics lines (step: … memory: … tps: …); is this a torchtitan log?"};
    }
    return run;
  });
}

// ---------------------------------------------------------------- nanotron

namespace {

// A human_format value (nanotron logging/base.py @2411b022 l.268): a number and an optional
// K/M/B/T/P/E suffix (powers of 1000).
std::optional<double> human_number_after(std::string_view text, std::string_view label) {
  const auto value = number_after(text, label);
  if (!value) return std::nullopt;
  std::string_view rest = trimmed(text.substr(text.find(label) + label.size()));
  while (!rest.empty() && (std::isdigit(static_cast<unsigned char>(rest.front())) || rest.front() == '.' ||
                           rest.front() == '-' || rest.front() == '+'))
    rest.remove_prefix(1);
  static constexpr std::string_view suffixes = "KMBTPE";
  const size_t power = rest.empty() ? std::string_view::npos : suffixes.find(rest.front());
  return power == std::string_view::npos ? *value : *value * std::pow(1000.0, static_cast<double>(power + 1));
}

// name=value pairs of a pformat'ed dataclass line; the first occurrence of a name wins (the run's
// own ParallelismArgs come before any nested evaluation config's).
void collect_fields(std::string_view line, std::map<std::string, std::string>& fields) {
  for (size_t equals = line.find('='); equals != std::string_view::npos; equals = line.find('=', equals + 1)) {
    size_t begin = equals;
    while (begin > 0 && (std::isalnum(static_cast<unsigned char>(line[begin - 1])) || line[begin - 1] == '_')) --begin;
    if (begin == equals) continue;
    const size_t end = line.find_first_of(",)", equals + 1);
    fields.emplace(std::string(line.substr(begin, equals - begin)),
                   std::string(trimmed(line.substr(equals + 1, end == std::string_view::npos ? end : end - equals - 1))));
  }
}

std::optional<Error> apply_nanotron_config(const std::map<std::string, std::string>& fields, const std::string& where,
                                           RunDescription& run) {
  const auto text = [&](const char* key) -> std::optional<std::string> {
    const auto found = fields.find(key);
    return found == fields.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
  std::optional<Error> problem;
  const auto integer = [&](const char* key, std::optional<int>& out) {
    const auto value = text(key);
    if (!value || problem) return;
    out = positive_int(*value);
    if (!out) problem = Error{where + ": config field " + key + " is '" + quoted_input(*value) + "', not a positive integer"};
  };
  std::optional<int> accumulation, context_parallel;
  integer("dp", run.dp);
  integer("tp", run.tp);
  integer("pp", run.pp);
  integer("micro_batch_size", run.micro_batch);
  integer("batch_accumulation_per_replica", accumulation);
  integer("sequence_length", run.sequence_length);
  integer("num_hidden_layers", run.num_layers);
  integer("hidden_size", run.hidden_size);
  integer("num_attention_heads", run.num_attention_heads);
  integer("context_parallel_size", context_parallel);
  if (problem) return problem;
  if (context_parallel && *context_parallel > 1)
    return Error{where + ": context_parallel_size is " + std::to_string(*context_parallel) +
                 "; Pipette does not model context parallelism, so this run cannot calibrate it"};
  if (run.dp && run.micro_batch && accumulation)
    run.global_batch = static_cast<std::int64_t>(*run.dp) * *run.micro_batch * *accumulation;
  if (const auto recompute = text("recompute_layer")) run.recompute = *recompute == "True" ? RecomputeMode::full : RecomputeMode::none;
  if (const auto mode = text("tp_mode")) run.sequence_parallel = mode->find("REDUCE_SCATTER") != std::string::npos;
  if (const auto stage = text("zero_stage")) run.distributed_optimizer = *stage != "0";
  if (const auto fp32 = text("accumulate_grad_in_fp32")) run.gradients_in_fp32 = *fp32 == "True";
  // ParallelismArgs (config/parallelism_config.py @2411b022 l.30-36, 41-48): the engine switches the
  // run had; pformat prints pp_engine as the engine object's repr (engine.py l.175, 235).
  if (const auto async = text("tp_linear_async_communication")) run.tp_backward_overlap = *async == "True";
  if (const auto regather = text("tp_recompute_allgather")) run.tp_recompute_allgather = *regather == "True";
  if (const auto engine = text("pp_engine")) {
    if (engine->find("AllForwardAllBackward") != std::string::npos) run.pipeline_schedule = PipelineSchedule::all_forward_all_backward;
    if (engine->find("OneForwardOneBackward") != std::string::npos) run.pipeline_schedule = PipelineSchedule::one_forward_one_backward;
  }
  if (const auto dtype = text("dtype")) {
    if (*dtype == "torch.bfloat16") run.precision = Precision::bf16;
    else if (*dtype == "torch.float16") run.precision = Precision::fp16;
  }
  return std::nullopt;
}

}  // namespace

Result<RunDescription> parse_nanotron_log(std::string_view text, const std::string& source_name) {
  return guarded("run log ", source_name, [&]() -> Result<RunDescription> {
    RunDescription run;
    run.name = source_name;
    run.framework = "nanotron";
    std::vector<std::vector<double>> segments;
    std::map<std::string, std::string> config;
    int config_line = 0, first_line = 0;
    bool reading_config = false, config_since_last_step = false;
    long long previous_step = 0;
    for (const Line& raw : lines_of(text)) {
      if (raw.last_without_newline) {
        run.warnings.push_back(at(source_name, raw) + ": the log ends mid-line (truncated?); its last line is ignored");
        break;
      }
      const std::string line = without_colours(raw.text);
      // A log record starts "MM/DD hh:mm:ss [LEVEL|ranks]: " (logging/base.py l.378); pformat's
      // continuation lines do not.
      const size_t record = line.find("]: ");
      const std::string_view message = record == std::string::npos ? std::string_view(line) : std::string_view(line).substr(record + 3);
      if (reading_config && record != std::string::npos && message.rfind("Config(", 0) != 0) {
        reading_config = false;
        if (config.empty()) return Error{at(source_name, raw) + ": a Config record without fields; is the log damaged?"};
        if (auto problem = apply_nanotron_config(config, source_name + ":" + std::to_string(config_line), run)) return *problem;
      }
      if (mentions_out_of_memory(line)) {
        run.out_of_memory = true;
        if (!first_line) first_line = raw.number;
        continue;
      }
      if (record != std::string::npos && trimmed(message) == "Config:") {
        if (config_line)
          run.warnings.push_back(at(source_name, raw) + ": a second Config record (a restart); the first one's layout is kept");
        else
          reading_config = true, config_line = raw.number;
        config_since_last_step = true;
        segments.emplace_back();
        continue;
      }
      if (reading_config) {
        collect_fields(message, config);
        continue;
      }
      if (line.find("iteration: ") != std::string::npos && line.find("time_per_iteration_ms:") != std::string::npos) {
        const auto step = number_after(line, "iteration: ");
        const auto milliseconds = human_number_after(line, "time_per_iteration_ms:");
        if (!step || !milliseconds || !(*milliseconds > 0))
          return Error{at(source_name, raw) + ": a nanotron iteration line without its step or a positive "
                                              "time_per_iteration_ms; is the log damaged?"};
        if (segments.empty()) segments.emplace_back();
        if (*step <= previous_step && !config_since_last_step)
          return interleaved_runs(at(source_name, raw), *step, previous_step, "Config record");
        config_since_last_step = false;
        previous_step = static_cast<long long>(*step);
        segments.back().push_back(*milliseconds / 1000);
        if (!first_line) first_line = raw.number;
        continue;
      }
      if (line.find("Peak allocated ") != std::string::npos && line.find("Peak reserved:") != std::string::npos) {
        keep_peaks(number_after(line, "Peak allocated "), number_after(line, "Peak reserved:"), units::mebibyte,
                   at(source_name, raw), run);
        if (!first_line) first_line = raw.number;
      }
    }
    if (reading_config) {
      if (auto problem = apply_nanotron_config(config, source_name + ":" + std::to_string(config_line), run)) return *problem;
    }
    if (!config_line && segments.empty() && !run.peak_reserved_bytes && !run.out_of_memory)
      return Error{source_name + ": no nanotron Config, iteration or memory lines; is this a nanotron log?"};
    set_steady_iteration(segments, source_name, run);
    if (first_line || config_line) run.name = source_name + ":" + std::to_string(config_line ? config_line : first_line);
    return run;
  });
}

// ---------------------------------------------------------------- DeepSpeed

Result<RunDescription> parse_deepspeed_log(std::string_view text, const std::string& source_name) {
  return guarded("run log ", source_name, [&]() -> Result<RunDescription> {
    RunDescription run;
    run.name = source_name;
    run.framework = "deepspeed";
    // Iteration seconds from the pipeline engine, samples per second from the throughput timer.
    std::vector<std::vector<double>> seconds(1), rates(1);
    long long previous_step = 0;
    int first_line = 0;
    int restarts = 0;
    for (const Line& raw : lines_of(text)) {
      if (raw.last_without_newline) {
        run.warnings.push_back(at(source_name, raw) + ": the log ends mid-line (truncated?); its last line is ignored");
        break;
      }
      const std::string_view line = raw.text;
      if (mentions_out_of_memory(line)) {
        run.out_of_memory = true;
        continue;
      }
      if (read_see_memory_usage(line, run)) continue;
      const bool pipeline = line.find("steps: ") != std::string_view::npos && line.find("iter time (s):") != std::string_view::npos;
      const bool timer = line.find("CurrSamplesPerSec=") != std::string_view::npos;
      if (!pipeline && !timer) continue;
      const auto step = number_after(line, pipeline ? "steps: " : "global_step=");
      const auto value = pipeline ? number_after(line, "iter time (s):") : number_after(line, "CurrSamplesPerSec=");
      if (!step || !value || !(*value > 0))
        return Error{at(source_name, raw) + ": a DeepSpeed " + (pipeline ? "steps" : "throughput") +
                     " line without its step or a positive value; is the log damaged?"};
      if (*step <= previous_step) {  // a restart (from a checkpoint or a new run)
        ++restarts;
        seconds.emplace_back();
        rates.emplace_back();
      }
      previous_step = static_cast<long long>(*step);
      (pipeline ? seconds : rates).back().push_back(*value);
      if (timer) {
        if (const auto peak = number_after(line, "MaxMemAllocated="))
          run.peak_allocated_bytes = std::max(run.peak_allocated_bytes.value_or(0), *peak * units::gibibyte);
      }
      if (!first_line) first_line = raw.number;
    }
    if (restarts > 0)
      run.warnings.push_back(source_name + ": the step counter restarted " + std::to_string(restarts) +
                             " time(s); each restart's warm-up is skipped");
    const std::vector<double> steady_seconds = steady_state(seconds), steady_rates = steady_state(rates);
    if (steady_seconds.size() >= 2) {
      run.iteration_seconds = median_of(steady_seconds);
      run.steady_iterations = static_cast<int>(steady_seconds.size());
    } else if (steady_rates.size() >= 2) {
      run.samples_per_second = median_of(steady_rates);
      run.steady_iterations = static_cast<int>(steady_rates.size());
    } else if (!run.peak_reserved_bytes && !run.peak_allocated_bytes && !run.out_of_memory) {
      return Error{source_name + ": no DeepSpeed steps, throughput or memory lines (steps: … iter time (s): …); is this a "
                                 "DeepSpeed log?"};
    }
    if (first_line) run.name = source_name + ":" + std::to_string(first_line);
    return run;
  });
}

// ---------------------------------------------------------------- table

Result<std::vector<RunDescription>> parse_run_table(std::string_view text, const std::string& source_name) {
  return guarded("run table ", source_name, [&]() -> Result<std::vector<RunDescription>> {
    const std::vector<Line> lines = lines_of(text);
    if (lines.empty()) return Error{source_name + ": empty; expected a header line " + std::string(kRunTableHeader)};
    const auto split = [](std::string_view row) {
      std::vector<std::string> cells(1);
      for (const char c : row) {
        if (c == ',') cells.emplace_back();
        else cells.back() += c;
      }
      for (auto& cell : cells) cell = std::string(trimmed(cell));
      return cells;
    };
    const std::vector<std::string> header = split(lines.front().text);
    std::map<std::string, size_t> column;
    static const std::vector<std::string> known = {"model", "nodes", "gpu", "framework", "tp", "pp", "dp", "vpp", "mbs",
                                                   "global_batch", "seq", "recompute", "sp", "distopt", "precision", "ep", "etp", "device_gib",
                                                   "iteration_seconds", "peak_gib", "status"};
    for (size_t i = 0; i < header.size(); ++i) {
      if (std::find(known.begin(), known.end(), header[i]) == known.end())
        return Error{source_name + ":1: column '" + quoted_input(header[i]) + "' is not known; the header is " + std::string(kRunTableHeader)};
      if (!column.emplace(header[i], i).second) return Error{source_name + ":1: column '" + header[i] + "' appears twice"};
    }
    for (const char* required : {"model", "nodes", "gpu", "framework", "tp", "pp", "dp", "mbs", "global_batch", "seq", "status"})
      if (!column.count(required)) return Error{source_name + ":1: no '" + required + "' column; the header is " + std::string(kRunTableHeader)};

    std::vector<RunDescription> runs;
    for (size_t index = 1; index < lines.size(); ++index) {
      const Line& line = lines[index];
      if (trimmed(line.text).empty() || trimmed(line.text).front() == '#') continue;
      const std::string where = at(source_name, line);
      const std::vector<std::string> cells = split(line.text);
      if (cells.size() != header.size())
        return Error{where + ": " + std::to_string(cells.size()) + " cells but the header has " + std::to_string(header.size()) +
                     (line.last_without_newline ? " (a truncated last line?)" : "")};
      const auto cell = [&](const char* name) -> std::string {
        const auto found = column.find(name);
        return found == column.end() ? std::string() : cells[found->second];
      };
      RunDescription run;
      run.name = where;
      run.model = cell("model");
      run.gpu = cell("gpu");
      run.framework = cell("framework");
      std::optional<Error> problem;
      const auto integer = [&](const char* name, std::optional<int>& out, bool required) {
        const std::string value = cell(name);
        if (problem || (value.empty() && !required)) return;
        out = positive_int(value);
        if (!out) problem = Error{where + ": " + name + " is '" + quoted_input(value) + "', not a positive integer"};
      };
      const auto decimal = [&](const char* name, std::optional<double>& out, double scale) {
        const std::string value = cell(name);
        if (problem || value.empty()) return;
        double parsed = 0;
        const auto [end, code] = std::from_chars(value.data(), value.data() + value.size(), parsed);
        if (code != std::errc() || end != value.data() + value.size() || !(parsed > 0) || !std::isfinite(parsed)) {
          problem = Error{where + ": " + name + " is '" + quoted_input(value) + "', not a positive number"};
          return;
        }
        out = parsed * scale;
      };
      const auto on_off = [&](const char* name, std::optional<bool>& out) {
        const std::string value = cell(name);
        if (problem || value.empty()) return;
        if (value == "on" || value == "true" || value == "1") out = true;
        else if (value == "off" || value == "false" || value == "0") out = false;
        else problem = Error{where + ": " + name + " is '" + quoted_input(value) + "'; write on or off"};
      };
      integer("nodes", run.nodes, true);
      integer("tp", run.tp, true);
      integer("pp", run.pp, true);
      integer("dp", run.dp, true);
      integer("vpp", run.vpp, false);
      integer("ep", run.ep, false);
      integer("etp", run.etp, false);
      integer("mbs", run.micro_batch, true);
      integer("seq", run.sequence_length, true);
      std::optional<int> global_batch;
      integer("global_batch", global_batch, true);
      on_off("sp", run.sequence_parallel);
      on_off("distopt", run.distributed_optimizer);
      decimal("iteration_seconds", run.iteration_seconds, 1.0);
      decimal("peak_gib", run.peak_reserved_bytes, units::gibibyte);
      decimal("device_gib", run.peak_device_bytes, units::gibibyte);
      if (problem) return *problem;
      run.global_batch = *global_batch;
      const std::string recompute_cell = cell("recompute");
      const auto recompute = parse_recompute_knob(recompute_cell.empty() ? "none" : recompute_cell);
      if (!recompute)
        return Error{where + ": recompute is '" + quoted_input(recompute_cell) + "': " + recompute.error().message};
      run.recompute = recompute->mode;
      run.recomputed_layers_per_chunk = recompute->recomputed_layers_per_chunk;
      const std::string precision = cell("precision");
      if (precision == "bf16") run.precision = Precision::bf16;
      else if (precision == "fp16") run.precision = Precision::fp16;
      else if (precision == "fp8") run.precision = Precision::fp8;
      else if (precision == "fp32") run.precision = Precision::fp32;
      else if (!precision.empty()) return Error{where + ": precision is '" + quoted_input(precision) + "'; write bf16, fp16, fp8 or fp32"};
      const std::string status = cell("status");
      if (status == "oom") run.out_of_memory = true;
      else if (status != "ok") return Error{where + ": status is '" + quoted_input(status) + "'; write ok or oom"};
      if (!run.out_of_memory && !run.iteration_seconds && !run.peak_reserved_bytes && !run.peak_device_bytes)
        return Error{where + ": status ok but no iteration_seconds, peak_gib or device_gib; give what the run measured"};
      if (run.model.empty() || run.gpu.empty() || run.framework.empty())
        return Error{where + ": model, gpu and framework must not be empty"};
      runs.push_back(std::move(run));
    }
    if (runs.empty()) return Error{source_name + ": a header but no rows"};
    return runs;
  });
}

Result<std::vector<RunDescription>> read_run_records(const std::string& path) {
  auto contents = read_whole_file("", path);
  if (!contents) return contents.error();
  const std::string& text = *contents;
  if (path.size() > 4 && path.ends_with(".csv")) return parse_run_table(text, path);
  // Where each reader's first line of its own appears; the earliest decides.
  const size_t megatron = std::min(text.find("elapsed time per iteration (ms)"), text.find("------------------------ arguments"));
  const size_t torchtitan = text.find("tps:");
  const size_t nanotron = std::min(text.find("time_per_iteration_ms:"), text.find("Config(general="));
  const size_t deepspeed = std::min(text.find("iter time (s):"), text.find("CurrSamplesPerSec="));
  const size_t first = std::min({megatron, torchtitan, nanotron, deepspeed});
  Result<RunDescription> run = first == torchtitan && torchtitan != std::string::npos ? parse_torchtitan_log(text, path)
                               : first == nanotron && nanotron != std::string::npos    ? parse_nanotron_log(text, path)
                               : first == deepspeed && deepspeed != std::string::npos  ? parse_deepspeed_log(text, path)
                                                                                       : parse_megatron_log(text, path);
  if (!run) return run.error();
  return std::vector<RunDescription>{std::move(run).value()};
}

Result<RunDescription> complete_run(RunDescription run, const RunDescription& fallback) {
  std::optional<Error> problem;
  const auto fill = [&](auto& field, const auto& given, const char* name) {
    if (problem || !given) return;
    if (!field) field = given;
    else if (*field != *given)
      problem = Error{run.name + ": the log says " + name + " " + std::to_string(*field) + " but " + fallback.name + " says " +
                      std::to_string(*given)};
  };
  const auto fill_text = [&](std::string& field, const std::string& given, const char* name) {
    if (problem || given.empty()) return;
    if (field.empty() || field == given) field = given;
    else if (std::string(name) != "framework" || !(field == "megatron-core" && given == "nemo"))
      problem = Error{run.name + ": " + name + " " + field + " but " + fallback.name + " says " + given};
    else field = given;  // NeMo logs Megatron-core's lines: the caller's name is the more precise
  };
  fill_text(run.model, fallback.model, "model");
  fill_text(run.gpu, fallback.gpu, "gpu");
  fill_text(run.framework, fallback.framework, "framework");
  using Field = std::optional<int> RunDescription::*;
  for (const auto& [field, name] : std::initializer_list<std::pair<Field, const char*>>{
           {&RunDescription::nodes, "nodes"}, {&RunDescription::gpus_per_node, "GPUs per node"},
           {&RunDescription::tp, "tp"}, {&RunDescription::pp, "pp"}, {&RunDescription::dp, "dp"},
           {&RunDescription::cp, "cp"}, {&RunDescription::ep, "ep"}, {&RunDescription::etp, "etp"},
           {&RunDescription::vpp, "vpp"}, {&RunDescription::micro_batch, "micro-batch"},
           {&RunDescription::sequence_length, "sequence length"}})
    fill(run.*field, fallback.*field, name);
  fill(run.global_batch, fallback.global_batch, "global batch");
  if (problem) return *problem;
  if (run.node_names.empty()) run.node_names = fallback.node_names;
  if (run.layers_per_stage.empty()) run.layers_per_stage = fallback.layers_per_stage;
  if (run.engine.empty()) run.engine = fallback.engine;
  if (!run.recompute) {
    run.recompute = fallback.recompute;
    run.recomputed_layers_per_chunk = fallback.recomputed_layers_per_chunk;
  }
  if (!run.sequence_parallel) run.sequence_parallel = fallback.sequence_parallel;
  if (!run.distributed_optimizer) run.distributed_optimizer = fallback.distributed_optimizer;
  if (!run.fully_sharded) run.fully_sharded = fallback.fully_sharded;
  if (!run.precision) run.precision = fallback.precision;
  if (!run.tp_comm_overlap) run.tp_comm_overlap = fallback.tp_comm_overlap;
  if (!run.gradients_in_fp32) run.gradients_in_fp32 = fallback.gradients_in_fp32;
  if (!run.attention) run.attention = fallback.attention;
  if (!run.cross_entropy_fusion) run.cross_entropy_fusion = fallback.cross_entropy_fusion;
  if (!run.overlap_gradient_reduce) run.overlap_gradient_reduce = fallback.overlap_gradient_reduce;
  if (!run.tp_backward_overlap) run.tp_backward_overlap = fallback.tp_backward_overlap;
  if (!run.tp_recompute_allgather) run.tp_recompute_allgather = fallback.tp_recompute_allgather;
  if (!run.pipeline_schedule) run.pipeline_schedule = fallback.pipeline_schedule;
  return run;
}

Result<RunRecord> resolve_run(const RunDescription& run, const SiteConfig& site, const std::vector<std::string>& model_dirs) {
  const auto missing = [&](const char* what) {
    return Error{run.name + ": the record does not say " + what + "; give it on the command line (pipette calibrate --help)"};
  };
  if (run.model.empty()) return missing("which model ran (--model)");
  if (!run.nodes) return missing("how many nodes ran it (--nodes)");
  if (!run.tp || !run.pp || !run.micro_batch || !run.global_batch || !run.sequence_length)
    return missing("its layout (tp, pp, micro-batch, global batch, sequence length: --layout and --global-batch/--seq)");
  const int tp = *run.tp, pp = *run.pp, nodes = *run.nodes;
  int gpus = run.world_size.value_or(0);
  // Megatron's world is tp × cp × pp × dp (arguments.py @d98e8a64 l.424-450).
  const int cp = run.cp.value_or(1);
  if (!gpus && run.dp) gpus = tp * cp * pp * *run.dp;
  if (!gpus && run.gpus_per_node) gpus = nodes * *run.gpus_per_node;
  if (!gpus) return missing("the data-parallel size or GPUs per node (--gpus-per-node)");
  const int dp = run.dp.value_or(gpus / (tp * cp * pp));
  if (tp * cp * pp * dp != gpus)
    return Error{run.name + ": layout tp " + std::to_string(tp) + (cp > 1 ? " × cp " + std::to_string(cp) : "") + " × pp " +
                 std::to_string(pp) + " × dp " + std::to_string(dp) + " does not make the job's " + std::to_string(gpus) + " GPUs"};
  if (gpus % nodes != 0 || (run.gpus_per_node && gpus / nodes != *run.gpus_per_node))
    return Error{run.name + ": " + std::to_string(gpus) + " GPUs do not split evenly over " + std::to_string(nodes) + " nodes" +
                 (run.gpus_per_node ? " of " + std::to_string(*run.gpus_per_node) + " GPUs" : std::string())};

  // The engine as planned or as the command line says, at the precision the log states: the stack
  // derives its defaults from the precision (DeepSpeed's fp16 gradients, engine.cpp).
  auto engine = parse_engine_overrides(run.engine);
  if (!engine) return Error{run.name + ": " + engine.error().message};
  if (run.precision) engine->precision = *run.precision;

  JobRequest request;
  request.model = run.model;
  // The record is priced as its stack runs (stack_profile.hpp); an unknown spelling is refused.
  request.framework = run.framework;
  request.engine = format_engine_overrides(*engine);
  request.global_batch = *run.global_batch;
  request.sequence_length = *run.sequence_length;
  request.node_names = run.node_names;
  if (static_cast<int>(request.node_names.size()) != nodes) {
    request.node_names.clear();
    for (int node = 0; node < nodes; ++node) request.node_names.push_back("record-node" + std::to_string(node));
  }
  request.gpus_per_node = gpus / nodes;
  request.gpu = run.gpu;
  request.inspection = NodeInspection{};
  request.model_dirs = model_dirs;
  request.uncalibrated = true;
  auto prepared = prepare_job(request, site);
  if (!prepared) return Error{run.name + ": " + prepared.error().message};

  RunRecord record;
  record.name = run.name;
  record.framework = to_string(prepared->training.target.framework);
  record.model = prepared->model;
  record.training = prepared->training;
  // What the log states ran, set as facts: the engine checks what Pipette can export, which a run
  // with a switch of its own (Megatron-DeepSpeed's flash attention) may have used.
  if (run.attention) record.training.attention = *run.attention;
  if (run.gradients_in_fp32) record.training.gradients_in_fp32 = *run.gradients_in_fp32;
  if (run.tp_comm_overlap) record.training.overlap_tensor_parallel_communication = *run.tp_comm_overlap;
  if (run.cross_entropy_fusion) record.training.cross_entropy_fusion = *run.cross_entropy_fusion;
  if (run.overlap_gradient_reduce) record.training.overlap_gradient_reduce = *run.overlap_gradient_reduce;
  if (run.tp_backward_overlap) record.training.overlap_tensor_parallel_backward = *run.tp_backward_overlap;
  if (run.tp_recompute_allgather) record.training.tensor_parallel_recompute_allgather = *run.tp_recompute_allgather;
  if (run.pipeline_schedule) record.training.pipeline_schedule = *run.pipeline_schedule;
  record.cluster = prepared->cluster;
  const ModelSpec& model = record.model;
  const auto check_dimension = [&](const std::optional<int>& stated, int actual, const char* name) -> std::optional<Error> {
    if (!stated || *stated == actual) return std::nullopt;
    return Error{run.name + ": the log's " + name + " is " + std::to_string(*stated) + " but model " + model.name + " has " +
                 std::to_string(actual) + ": the layout does not match its model; give the model that ran"};
  };
  if (auto problem = check_dimension(run.num_layers, model.num_layers, "num_layers")) return *problem;
  if (auto problem = check_dimension(run.hidden_size, model.hidden_size, "hidden_size")) return *problem;
  if (auto problem = check_dimension(run.num_attention_heads, model.num_attention_heads, "num_attention_heads")) return *problem;
  // Pricing an MoE run without its expert groups would fit the factors to another job.
  if (model.is_moe() && (!run.ep || !run.etp))
    return Error{run.name + ": " + model.name + " has experts but the record does not say its expert groups: give ep and etp " +
                 "(a table's ep and etp columns; for a log, --layout ep=N,etp=M)"};

  ParallelConfig config;
  config.tp = tp;
  config.pp = pp;
  config.dp = dp;
  config.cp = cp;
  config.ep = run.ep.value_or(1);
  config.etp = run.etp.value_or(1);
  config.micro_batch = *run.micro_batch;
  config.virtual_stages = run.vpp.value_or(1);
  config.recompute = run.recompute.value_or(RecomputeMode::none);
  config.recomputed_layers_per_chunk = config.recompute == RecomputeMode::full ? run.recomputed_layers_per_chunk : 0;
  config.sequence_parallel = run.sequence_parallel.value_or(false);
  config.distributed_optimizer = run.distributed_optimizer.value_or(false);
  config.fully_sharded = run.fully_sharded.value_or(
      default_fully_sharded(record.training.target.framework, model, pp, dp * cp));
  config.layers_per_stage = run.layers_per_stage;
  // As `pipette plan --fix` prices it (the stack's own layer split, sp off at tp 1), but not held to
  // what Pipette can export: the run ran. Its expert groups must be ones Megatron-core forms.
  auto completed = complete_layout(model, record.training, record.cluster, config);
  if (!completed) return Error{run.name + ": " + completed.error().message};
  record.config = std::move(completed).value();
  for (const std::string& problem :
       {model_problem(record.training.target.framework, model), expert_problem(model, record.config)}) {
    if (!problem.empty()) return Error{run.name + ": " + problem};
  }

  record.iteration_seconds = run.iteration_seconds;
  if (!record.iteration_seconds && run.tokens_per_second_per_gpu)
    record.iteration_seconds = static_cast<double>(*run.global_batch) * *run.sequence_length / (*run.tokens_per_second_per_gpu * gpus);
  if (!record.iteration_seconds && run.samples_per_second)
    record.iteration_seconds = static_cast<double>(*run.global_batch) / *run.samples_per_second;
  record.peak_reserved_bytes = run.peak_reserved_bytes;
  record.peak_allocated_bytes = run.peak_allocated_bytes;
  record.peak_device_bytes = run.peak_device_bytes;
  record.out_of_memory = run.out_of_memory;
  return record;
}

}  // namespace pipette
