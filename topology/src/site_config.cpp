#include "pipette/topology/site_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/units.hpp"
#include "pipette/topology/job_planner.hpp"

namespace pipette {

namespace {

constexpr double kHour = 3600.0;

// Reads one YAML document strictly. Every error is "FILE:LINE: key 'a.b' <what> (<fix>)".
class StrictReader {
 public:
  explicit StrictReader(std::string source) : source_(std::move(source)) {}

  using FieldReader = std::function<std::optional<Error>(const YAML::Node& value, const std::string& key)>;
  struct Field {
    const char* name;
    FieldReader read;
  };

  Error error(const YAML::Node& node, const std::string& key, const std::string& what) const {
    return Error{source_ + ":" + std::to_string(node.Mark().line + 1) + ": key '" + key + "' " + what};
  }

  std::optional<Error> mapping(const YAML::Node& node, const std::string& path, const std::vector<Field>& fields) const {
    if (node.IsNull()) return std::nullopt;
    if (!node.IsMap()) return error(node, path.empty() ? "(top level)" : path, "must be a mapping of keys (" + names(fields) + ")");
    std::set<std::string> seen;
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      const std::string full = path.empty() ? key : path + "." + key;
      if (!seen.insert(key).second) return error(entry.first, full, "appears twice; keep one");
      const Field* field = nullptr;
      for (const auto& candidate : fields)
        if (key == candidate.name) field = &candidate;
      if (!field) return error(entry.first, full, "is not a known key; expected one of: " + names(fields));
      if (auto problem = field->read(entry.second, full)) return problem;
    }
    return std::nullopt;
  }

  // Field readers. Each checks the type and range and says what to write instead.
  FieldReader number(double& out, double minimum, double maximum) const {
    return [this, &out, minimum, maximum](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
      double parsed = 0;
      if (!value.IsScalar() || !YAML::convert<double>::decode(value, parsed) || !std::isfinite(parsed) ||
          parsed < minimum || parsed > maximum) {
        const std::string range = maximum == std::numeric_limits<double>::max()
                                      ? "a number of at least " + text(minimum)
                                      : "a number from " + text(minimum) + " to " + text(maximum);
        return error(value, key, "must be " + range + " (got " + shown(value) + ")");
      }
      out = parsed;
      return std::nullopt;
    };
  }
  template <typename Integer>
  FieldReader integer(Integer& out, long long minimum, long long maximum) const {
    return [this, &out, minimum, maximum](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
      long long parsed = 0;
      if (!value.IsScalar() || !YAML::convert<long long>::decode(value, parsed) || parsed < minimum || parsed > maximum)
        return error(value, key, "must be an integer from " + std::to_string(minimum) + " to " +
                                            std::to_string(maximum) + " (got " + shown(value) + ")");
      out = static_cast<Integer>(parsed);
      return std::nullopt;
    };
  }
  FieldReader boolean(bool& out) const {
    return [this, &out](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
      if (!value.IsScalar() || !YAML::convert<bool>::decode(value, out))
        return error(value, key, "must be true or false (got " + shown(value) + ")");
      return std::nullopt;
    };
  }
  FieldReader string(std::string& out) const {
    return [this, &out](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
      if (value.IsNull()) {
        out.clear();
        return std::nullopt;
      }
      if (!value.IsScalar()) return error(value, key, "must be a string (got a " + kind(value) + ")");
      out = value.Scalar();
      return std::nullopt;
    };
  }
  FieldReader string_list(std::vector<std::string>& out) const {
    return [this, &out](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
      if (!value.IsSequence()) return error(value, key, "must be a list of strings, e.g. [/etc/pipette/models]");
      out.clear();
      for (const auto& item : value) {
        if (!item.IsScalar()) return error(item, key, "must be a list of strings (an item is a " + kind(item) + ")");
        out.push_back(item.Scalar());
      }
      return std::nullopt;
    };
  }
  template <typename Enum>
  FieldReader choice(Enum& out, std::vector<std::pair<const char*, Enum>> choices) const {
    return [this, &out, choices](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
      std::string allowed;
      for (const auto& [name, option] : choices) {
        if (value.IsScalar() && value.Scalar() == name) {
          out = option;
          return std::nullopt;
        }
        allowed += (allowed.empty() ? "" : " | ") + std::string(name);
      }
      return error(value, key, "must be " + allowed + " (got " + shown(value) + ")");
    };
  }

 private:
  static std::string kind(const YAML::Node& node) {
    return node.IsMap() ? "mapping" : node.IsSequence() ? "list" : node.IsNull() ? "empty value" : "scalar";
  }
  static std::string shown(const YAML::Node& node) { return node.IsScalar() ? "'" + node.Scalar() + "'" : "a " + kind(node); }
  static std::string text(double value) {
    std::string out = std::to_string(value);
    out.erase(out.find_last_not_of('0') + 1);
    if (!out.empty() && out.back() == '.') out.pop_back();
    return out;
  }
  static std::string names(const std::vector<Field>& fields) {
    std::string out;
    for (const auto& field : fields) out += (out.empty() ? "" : ", ") + std::string(field.name);
    return out;
  }

  std::string source_;
};

constexpr double kAny = std::numeric_limits<double>::max();

// The site file sets how much work planning does on every node at every job start, so the
// knobs that multiply it are bounded a margin above what any site needs:
//  - search.top_k ≤ 100 and search.placement_candidates ≤ 64: each kept candidate may get its own
//    placement search; the defaults are 5 and 8;
//  - placement.max_moves ≤ 10^7: 50× the default, whose 200,000 moves already take about 6 s on a
//    1024-node cluster with a full link cache (bench/RESULTS.md, user_init);
//  - defaults.global_batch ≤ kMaxGlobalBatchSequences and defaults.sequence_length ≤ 2^24
//    tokens, the same limits as --pipette-batch and --pipette-seq.
constexpr long long kMaxTopK = 100;
constexpr long long kMaxPlacementCandidates = 64;
constexpr long long kMaxPlacementMoves = 10'000'000;
constexpr long long kMaxSequenceLength = 1 << 24;
// planning.time_limit_seconds ≤ 50: while a step plans, slurmstepd cannot act on scancel (see
// PlanningBudget), and Slurm's UnkillableStepTimeout (default 60 s) drains a node whose step
// outlives it.
// planning.memory_limit_mib ≥ 64: below that even a 4-node plan fails.
constexpr double kMaxPlanningSeconds = 50;
constexpr double kMinPlanningMib = 64;
constexpr double kMaxPlanningMib = 1 << 20;

// One GPU in `gpus:`: a catalog name with some fields replaced, or a new GPU with every field.
std::optional<Error> read_gpu(const StrictReader& reader, const YAML::Node& node, const std::string& key, GpuSpec& gpu) {
  std::string name;
  double memory_gib = -1, fp32 = -1, fp16 = -1, bf16 = -1, fp8 = -1, hbm = -1;
  if (auto problem = reader.mapping(
          node, key,
          {{"name", reader.string(name)},
           {"memory_gib", reader.number(memory_gib, 1, 100000)},
           {"peak_fp32_tflops", reader.number(fp32, 0, 1e6)},
           {"peak_fp16_tflops", reader.number(fp16, 0, 1e6)},
           {"peak_bf16_tflops", reader.number(bf16, 0, 1e6)},
           {"peak_fp8_tflops", reader.number(fp8, 0, 1e6)},
           {"hbm_gb_per_s", reader.number(hbm, 1, 1e6)}}))
    return problem;
  if (name.empty()) return reader.error(node, key + ".name", "is required: the GPU's name, e.g. H100-SXM");
  const GpuSpec* known = find_gpu(name);
  if (known) {
    gpu = *known;
  } else if (memory_gib < 0 || bf16 < 0 || fp16 < 0 || fp32 < 0 || hbm < 0) {
    return reader.error(node, key, "describes GPU '" + name +
                                       "', which the built-in catalog does not know: give memory_gib, peak_fp32_tflops, "
                                       "peak_fp16_tflops, peak_bf16_tflops and hbm_gb_per_s (peak_fp8_tflops optional)");
  }
  gpu.name = name;
  if (memory_gib >= 0) gpu.memory_bytes = memory_gib * units::gibibyte;
  if (fp32 >= 0) gpu.peak_fp32_flop_per_second = fp32 * units::teraflop;
  if (fp16 >= 0) gpu.peak_fp16_flop_per_second = fp16 * units::teraflop;
  if (bf16 >= 0) gpu.peak_bf16_flop_per_second = bf16 * units::teraflop;
  if (fp8 >= 0) gpu.peak_fp8_flop_per_second = fp8 * units::teraflop;
  if (hbm >= 0) gpu.hbm_bytes_per_second = hbm * units::gigabyte;
  return std::nullopt;
}

std::optional<Error> read_site(const StrictReader& reader, const YAML::Node& root, SiteConfig& site) {
  double fresh_hours = site.staleness.fresh_for_seconds / kHour;
  double half_life_hours = site.staleness.half_life_seconds / kHour;
  double max_age_hours = site.staleness.max_age_seconds / kHour;
  LinkPriors& priors = site.priors;
  double nic_gbit = priors.nic_bandwidth_bytes_per_second / units::gigabit;
  double inter_latency_us = priors.inter_node_latency_seconds / units::microsecond;
  double intra_gb = priors.intra_node_bandwidth_bytes_per_second / units::gigabyte;
  double intra_latency_us = priors.intra_node_latency_seconds / units::microsecond;
  double cross_rail_latency_us = priors.cross_rail_extra_latency_seconds / units::microsecond;
  SearchOptions& search = site.search;
  double margin_gib = search.memory_safety_margin_bytes / units::gibibyte;
  double context_gib = search.overheads.cuda_context_bytes / units::gibibyte;
  double nccl_mib = search.overheads.nccl_buffer_bytes_per_communicator / units::mebibyte;
  double planning_mib = site.planning.memory_limit_bytes / units::mebibyte;

  auto gpus_reader = [&](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
    if (!value.IsSequence()) return reader.error(value, key, "must be a list of GPU descriptions (- name: ...)");
    site.gpus.clear();
    for (std::size_t i = 0; i < value.size(); ++i) {
      GpuSpec gpu;
      if (auto problem = read_gpu(reader, value[i], key + "[" + std::to_string(i) + "]", gpu)) return problem;
      site.gpus.push_back(gpu);
    }
    return std::nullopt;
  };
  auto factors_reader = [&](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
    if (!value.IsSequence() || value.size() == 0)
      return reader.error(value, key, "must be a non-empty list of factors in (0, 1], e.g. [1.0, 0.75, 0.5]");
    priors.switch_level_factors.clear();
    for (const auto& item : value) {
      double factor = 0;
      if (!item.IsScalar() || !YAML::convert<double>::decode(item, factor) || !(factor > 0 && factor <= 1))
        return reader.error(item, key, "must hold factors in (0, 1] (got " + (item.IsScalar() ? "'" + item.Scalar() + "'" : std::string("a non-scalar")) + ")");
      priors.switch_level_factors.push_back(factor);
    }
    return std::nullopt;
  };
  auto fixed_reader = [&](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
    if (auto problem = reader.string(site.defaults.fixed)(value, key)) return problem;
    if (auto knobs = parse_fixed_knobs(site.defaults.fixed); !knobs)
      return reader.error(value, key, "is not valid: " + knobs.error().message);
    return std::nullopt;
  };
  // defaults.engine: the --pipette-engine keys, each read by the same parser.
  std::vector<StrictReader::Field> engine_fields;
  for (const std::string& name : engine_keys()) {
    engine_fields.push_back({name.c_str(), [&reader, &site](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
                               const std::string field = key.substr(key.rfind('.') + 1);
                               if (!value.IsScalar()) return reader.error(value, key, "must be a value, e.g. " + field + ": on");
                               if (auto problem = set_engine_override(site.defaults.engine, field, value.Scalar()))
                                 return reader.error(value, key, *problem);
                               return std::nullopt;
                             }});
  }
  // defaults.precision is the engine's precision key under its older name, with its spellings
  // (engine_precisions) in this reader's message; given both, they must agree.
  std::optional<Precision> precision;
  YAML::Node precision_node;
  std::vector<std::pair<const char*, Precision>> precision_choices;
  for (const Precision spelled : engine_precisions()) precision_choices.emplace_back(to_string(spelled), spelled);
  auto precision_reader = [&](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
    Precision parsed = Precision::bf16;
    if (auto problem = reader.choice(parsed, precision_choices)(value, key)) return problem;
    precision = parsed;
    precision_node = value;
    return std::nullopt;
  };
  auto seed_reader = [&](const YAML::Node& value, const std::string& key) -> std::optional<Error> {
    if (!value.IsScalar() || !YAML::convert<std::uint64_t>::decode(value, search.placement.seed) ||
        value.Scalar().find('-') != std::string::npos)
      return reader.error(value, key, "must be an integer from 0 to 18446744073709551615");
    return std::nullopt;
  };
  auto section = [&](std::vector<StrictReader::Field> fields) {
    return [&reader, fields](const YAML::Node& value, const std::string& key) { return reader.mapping(value, key, fields); };
  };

  auto problem = reader.mapping(
      root, "",
      {{"mode", reader.choice(site.default_mode, {{"auto", PipetteMode::automatic}, {"plan", PipetteMode::plan}, {"off", PipetteMode::off}})},
       {"failure_policy",
        reader.choice(site.failure_policy, {{"run-unplanned", FailurePolicy::run_unplanned}, {"fail", FailurePolicy::fail_job}})},
       {"gpu", reader.string(site.gpu)},
       {"framework", reader.choice(site.framework.framework, {{"megatron-core", Framework::megatron_core},
                                                               {"nemo", Framework::nemo},
                                                               {"torchtitan", Framework::torchtitan},
                                                               {"megatron-deepspeed", Framework::megatron_deepspeed},
                                                               {"nanotron", Framework::nanotron},
                                                               {"deepspeed", Framework::deepspeed}})},
       {"megatron_pipeline_layout", reader.boolean(site.framework.pipeline_layout)},
       {"gpus", gpus_reader},
       {"model_dirs", reader.string_list(site.model_dirs)},
       {"defaults", section({{"model", reader.string(site.defaults.model)},
                             {"global_batch", reader.integer(site.defaults.global_batch_sequences, 1, kMaxGlobalBatchSequences)},
                             {"sequence_length", reader.integer(site.defaults.sequence_length, 1, kMaxSequenceLength)},
                             {"fixed", fixed_reader},
                             {"precision", precision_reader},
                             {"engine", section(engine_fields)}})},
       {"links", section({{"cache", reader.string(site.link_cache)},
                          {"require_measurements", reader.boolean(site.require_measurements)},
                          {"fresh_for_hours", reader.number(fresh_hours, 0, kAny)},
                          {"half_life_hours", reader.number(half_life_hours, 0.01, kAny)},
                          {"max_age_hours", reader.number(max_age_hours, 0, kAny)}})},
       {"calibration", section({{"file", reader.string(site.calibration_file)}})},
       {"priors", section({{"nic_gbit_per_s", reader.number(nic_gbit, 1, 1e6)},
                           {"rails", reader.integer(priors.rails, 0, 64)},
                           {"attained_fraction", reader.number(priors.attained_fraction, 0.01, 1)},
                           {"inter_node_latency_us", reader.number(inter_latency_us, 0, 1e6)},
                           {"intra_node_gb_per_s", reader.number(intra_gb, 0, 1e6)},
                           {"intra_node_latency_us", reader.number(intra_latency_us, 0, 1e6)},
                           {"board_gpus", reader.integer(priors.board_gpus, 0, 64)},
                           {"topology_conf", reader.string(priors.topology_conf)},
                           {"switch_level_factors", factors_reader},
                           {"fabric", reader.choice(priors.rail_only, {{"rail-optimized", false}, {"rail-only", true}})},
                           {"cross_rail_extra_latency_us", reader.number(cross_rail_latency_us, 0, 1e3)},
                           {"nccl_pxn", reader.boolean(priors.nccl_pxn)},
                           {"network", reader.choice(priors.network, {{"infiniband", NetworkKind::infiniband},
                                                                      {"roce", NetworkKind::roce},
                                                                      {"efa", NetworkKind::efa}})}})},
       {"memory", section({{"safety_margin_gib", reader.number(margin_gib, 0, 1e4)},
                           {"cuda_context_gib", reader.number(context_gib, 0, 1e3)},
                           {"nccl_buffer_mib_per_communicator", reader.number(nccl_mib, 0, 1e6)},
                           {"allocator_fragmentation_fraction",
                            reader.number(search.overheads.allocator_fragmentation_fraction, 0, 1)},
                           {"expandable_segments", reader.boolean(search.overheads.expandable_segments)}})},
       {"search", section({{"top_k", reader.integer(search.top_k, 1, kMaxTopK)},
                           {"optimize_placement", reader.boolean(search.optimize_placement)},
                           {"placement_candidates", reader.integer(search.placement_candidates, 1, kMaxPlacementCandidates)}})},
       {"planning", section({{"time_limit_seconds", reader.number(site.planning.time_limit_seconds, 1, kMaxPlanningSeconds)},
                             {"memory_limit_mib", reader.number(planning_mib, kMinPlanningMib, kMaxPlanningMib)}})},
       {"placement", section({{"max_moves", reader.integer(search.placement.max_moves, 0, kMaxPlacementMoves)},
                              {"seed", seed_reader},
                              {"exact_up_to_nodes", reader.integer(search.placement.exact_up_to_nodes, 0, 16)}})}});
  if (problem) return problem;
  if (precision) {
    if (const std::optional<Precision> engine_precision = merge_precision(site.defaults.engine, *precision))
      return reader.error(precision_node, "defaults.precision",
                          "disagrees with defaults.engine.precision (" + std::string(to_string(*engine_precision)) + "); keep one");
  }

  site.staleness = {fresh_hours * kHour, half_life_hours * kHour, max_age_hours * kHour};
  priors.nic_bandwidth_bytes_per_second = nic_gbit * units::gigabit;
  priors.inter_node_latency_seconds = inter_latency_us * units::microsecond;
  priors.intra_node_bandwidth_bytes_per_second = intra_gb * units::gigabyte;
  priors.intra_node_latency_seconds = intra_latency_us * units::microsecond;
  priors.cross_rail_extra_latency_seconds = cross_rail_latency_us * units::microsecond;
  search.memory_safety_margin_bytes = margin_gib * units::gibibyte;
  search.overheads.cuda_context_bytes = context_gib * units::gibibyte;
  search.overheads.nccl_buffer_bytes_per_communicator = nccl_mib * units::mebibyte;
  site.planning.memory_limit_bytes = planning_mib * units::mebibyte;
  return std::nullopt;
}

}  // namespace

const char* to_string(PipetteMode mode) {
  switch (mode) {
    case PipetteMode::automatic: return "auto";
    case PipetteMode::plan: return "plan";
    case PipetteMode::off: return "off";
  }
  return "off";
}

const char* to_string(FailurePolicy policy) {
  return policy == FailurePolicy::fail_job ? "fail" : "run-unplanned";
}

Result<SiteConfig> parse_site_config(std::string_view text, const std::string& source_name) {
  SiteConfig site;
  site.source = source_name;
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    const StrictReader reader(source_name);
    if (auto problem = read_site(reader, root, site)) return *problem;
  } catch (const YAML::Exception& error) {
    return Error{source_name + ":" + std::to_string(error.mark.line + 1) + ": not valid YAML (" + error.msg + ")"};
  } catch (const std::exception& error) {
    return Error{source_name + ": cannot read the site file (" + error.what() + ")"};
  }
  return site;
}

Result<SiteConfig> load_site_config(const std::string& path) {
  try {
    std::ifstream file(path);
    if (!file) return Error{path + ": cannot read the site file (" + std::strerror(errno) + "); fix the path or its permissions"};
    std::ostringstream contents;
    contents << file.rdbuf();
    auto site = parse_site_config(contents.str(), path);
    if (!site) return site;
    // Relative paths name files beside the site file, wherever the reader runs from.
    const std::filesystem::path base = std::filesystem::path(path).parent_path();
    auto anchor = [&base](std::string& value) {
      if (!value.empty() && std::filesystem::path(value).is_relative()) value = (base / value).lexically_normal().string();
    };
    anchor(site->link_cache);
    anchor(site->calibration_file);
    anchor(site->priors.topology_conf);
    for (auto& dir : site->model_dirs) anchor(dir);
    return site;
  } catch (const std::exception& error) {
    return Error{path + ": cannot read the site file (" + error.what() + ")"};
  }
}

const GpuSpec* find_site_gpu(const SiteConfig& site, std::string_view name) {
  for (const GpuSpec& gpu : site.gpus) {
    if (gpu.name.size() == name.size() &&
        std::equal(gpu.name.begin(), gpu.name.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        }))
      return &gpu;
  }
  return find_gpu(name);
}

}  // namespace pipette
