#include "pipette/topology/job_planner.hpp"

#include <ctime>
#include <filesystem>

#include "pipette/core/launch.hpp"
#include "pipette/core/stack_profile.hpp"
#include "pipette/topology/cluster_assembly.hpp"
#include "pipette/topology/link_cache.hpp"
#include "pipette/topology/model_file.hpp"
#include "pipette/topology/topology_conf.hpp"

#include "guarded.hpp"

namespace pipette {

namespace {

Result<NodeInspection> inspection_for(const JobRequest& request) {
  if (request.inspection) return *request.inspection;
  if (!request.topology_xml.empty()) return inspect_topology_xml(request.topology_xml);
  return inspect_local_node();
}

// The cache, or nullptr with a note when there is none and the site allows that.
Result<std::optional<LinkTable>> cache_for(const JobRequest& request, const SiteConfig& site,
                                           std::vector<std::string>& notes) {
  const std::string path = request.link_cache.empty() ? site.link_cache : request.link_cache;
  if (path.empty()) {
    if (site.require_measurements)
      return Error{site.source + ": links.require_measurements is true but links.cache names no cache; set links.cache"};
    notes.push_back("no link cache configured (links.cache): every link is a prior");
    return std::optional<LinkTable>();
  }
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    if (site.require_measurements)
      return Error{"link cache " + path + " does not exist and the site requires measurements "
                   "(links.require_measurements); run pipette-probe on these nodes"};
    notes.push_back("no link cache at " + path + ": every link is a prior (run pipette-probe to measure them)");
    return std::optional<LinkTable>();
  }
  auto cache = read_link_table(path);
  if (!cache) return cache.error();
  return std::optional<LinkTable>(std::move(cache).value());
}

// Applies the site's calibration for the job's framework (the one that runs the plan) and GPU to the cluster and the search's
// constants. No file yet: the built-in constants and a note; a damaged file is an error, never
// silently ignored.
std::optional<Error> apply_calibration(const JobRequest& request, const SiteConfig& site, PreparedJob& job) {
  if (request.uncalibrated || site.calibration_file.empty()) return std::nullopt;
  std::error_code error;
  if (!std::filesystem::exists(site.calibration_file, error)) {
    job.notes.push_back("no calibration file at " + site.calibration_file + ": built-in constants (run pipette calibrate)");
    return std::nullopt;
  }
  auto file = read_calibration_file(site.calibration_file);
  if (!file) return file.error();
  const std::string framework = to_string(job.training.target.framework);
  const CalibrationEntry* entry = find_calibration(*file, framework, job.cluster.gpu.name);
  if (!entry) {
    job.notes.push_back("calibration file has no entry for " + framework + " on " + job.cluster.gpu.name + ": built-in constants");
    return std::nullopt;
  }
  job.cluster = calibrated(job.cluster, entry->calibration);
  job.options.efficiency = calibrated(job.options.efficiency, entry->calibration);
  job.options.overheads = calibrated(job.options.overheads, entry->calibration);
  job.calibration = *entry;
  std::string note = "calibrated on " + std::to_string(entry->range.records) + " " + framework + " run(s) on " +
                     entry->range.gpu + " (" + site.calibration_file + ", fitted " +
                     format_utc_timestamp(entry->fitted_at_unix_seconds) + ")";
  if (const std::string outside = outside_range(entry->range, framework, job.model, job.cluster); !outside.empty())
    note += "; this job lies outside the calibrated range: " + outside;
  job.notes.push_back(note);
  return std::nullopt;
}

// Transformer Engine picks its attention backend from the heads (Pipette exports no backend switch),
// so where no fused kernel takes them the job runs unfused attention, and is priced so. A flash
// kernel that the site or the job asked for cannot be had, nor can context parallelism without it.
std::optional<Error> fall_back_to_unfused_attention(PreparedJob& job) {
  TrainingSpec& training = job.training;
  if (training.attention != AttentionKernel::flash) return std::nullopt;
  const std::string why = unfused_attention_fallback(job.model, training.target.framework);
  if (why.empty()) return std::nullopt;
  for (EngineSetting& setting : job.engine) {
    if (setting.key != "attention") continue;
    if (setting.source != EngineSource::stack)
      return Error{"engine attention=flash (" + std::string(to_string(setting.source)) + ") cannot run " + job.model.name +
                   ": " + why + "; drop attention=flash"};
    setting.value = to_string(AttentionKernel::unfused);
  }
  training.attention = AttentionKernel::unfused;
  if (const std::string problem = validate(training); !problem.empty()) return Error{problem + ": " + why};
  job.notes.push_back(why + "; priced as such (scores kept per layer, selective recompute considered)");
  return std::nullopt;
}

}  // namespace

Result<PreparedJob> prepare_job(const JobRequest& request, const SiteConfig& site) {
  return guarded("planning", std::string(), [&]() -> Result<PreparedJob> {
    PreparedJob job;
    const std::string model_name = request.model.empty() ? site.defaults.model : request.model;
    if (model_name.empty())
      return Error{"no model: pass one (--pipette-model / --model, a preset name or a model file) or set defaults.model in the site file"};

    TrainingSpec& training = job.training;
    training.global_batch_sequences = request.global_batch > 0 ? request.global_batch : site.defaults.global_batch_sequences;
    training.sequence_length = request.sequence_length > 0 ? request.sequence_length : site.defaults.sequence_length;
    if (training.global_batch_sequences < 1)
      return Error{"no global batch: pass one (--pipette-batch / --global-batch) or set defaults.global_batch in the site file"};
    if (training.sequence_length < 1)
      return Error{"no sequence length: pass one (--pipette-seq / --seq) or set defaults.sequence_length in the site file"};
    auto fixed = parse_fixed_knobs(request.fixed.empty() ? site.defaults.fixed : request.fixed);
    if (!fixed) return fixed.error();
    training.fixed = *fixed;
    training.target = site.framework;
    if (!request.framework.empty() && !parse_framework(request.framework, training.target.framework)) {
      return Error{"unknown framework '" + quoted_input(request.framework) + "'; use " + framework_spellings()};
    }
    apply_stack_profile(training);  // the stack's attention kernel and overlaps (stack_profile.hpp)
    auto job_engine = parse_engine_overrides(request.engine);
    if (!job_engine) return job_engine.error();
    if (!request.precision.empty()) {
      EngineOverrides precision;
      if (auto problem = set_engine_override(precision, "precision", request.precision))
        return Error{*problem};
      if (const std::optional<Precision> engine_precision = merge_precision(*job_engine, *precision.precision))
        return Error{std::string("precision ") + to_string(*precision.precision) + " conflicts with the engine's precision=" +
                     to_string(*engine_precision) + "; give it once"};
    }
    ResolvedEngine engine = apply_engine_overrides(training, site.defaults.engine, *job_engine);
    if (!engine.problem.empty()) return Error{engine.problem};
    job.engine = std::move(engine.settings);
    training.fixed.layers_per_stage = request.fixed_layers_per_stage;
    if (const std::string problem = validate(training); !problem.empty()) return Error{problem};

    std::vector<std::string> model_dirs = request.model_dirs;
    model_dirs.insert(model_dirs.end(), site.model_dirs.begin(), site.model_dirs.end());
    for (const auto& dir : default_model_dirs()) model_dirs.push_back(dir);
    auto model = load_model(model_name, model_dirs);
    if (!model) return model.error();
    job.model = model_for_sequence(*model, training.sequence_length);
    if (job.model.learned_position_embeddings != model->learned_position_embeddings) {
      job.notes.push_back(job.model.name + " has " + std::to_string(model->learned_position_embeddings) +
                          " learned positions; the plan grows the table to the sequence length (--max-position-embeddings " +
                          std::to_string(job.model.learned_position_embeddings) + "), priced as such");
    }
    if (auto problem = fall_back_to_unfused_attention(job)) return *problem;

    auto inspection = inspection_for(request);
    if (!inspection) {
      if (request.gpus_per_node < 1 || (request.gpu.empty() && site.gpu.empty())) return inspection.error();
      job.notes.push_back("hwloc inspection failed (" + inspection.error().message + "); using the given GPU model and count");
      inspection = NodeInspection{};
    }

    auto cache = cache_for(request, site, job.notes);
    if (!cache) return cache.error();

    std::optional<SwitchTree> switches;
    if (!site.priors.topology_conf.empty()) {
      auto tree = load_topology_conf(site.priors.topology_conf);
      if (!tree) return tree.error();
      switches = std::move(tree).value();
    }

    AssemblyInput input;
    input.node_names = request.node_names;
    input.gpus_per_node = request.gpus_per_node;
    input.gpu = request.gpu;
    input.local = &*inspection;
    input.cache = *cache ? &**cache : nullptr;
    input.switches = switches ? &*switches : nullptr;
    input.reference_time_unix_seconds =
        request.reference_time_unix_seconds > 0 ? request.reference_time_unix_seconds : static_cast<std::int64_t>(std::time(nullptr));
    auto assembled = assemble_cluster(input, site);
    if (!assembled) return assembled.error();

    job.cluster = std::move(assembled->cluster);
    job.links_assumed = std::move(assembled->links_assumed);
    job.notes.insert(job.notes.end(), assembled->notes.begin(), assembled->notes.end());
    job.measured_node_pairs = assembled->measured_node_pairs;
    job.assumed_node_pairs = assembled->assumed_node_pairs;
    job.options = site.search;
    if (request.top_k > 0) job.options.top_k = request.top_k;
    if (auto problem = apply_calibration(request, site, job)) return *problem;
    return job;
  });
}

}  // namespace pipette
