#include "planning.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include "pipette/core/launch.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/search.hpp"
#include "pipette/topology/hostlist.hpp"
#include "pipette/topology/job_planner.hpp"
#include "pipette/topology/link_cache.hpp"

namespace pipette::cli {

namespace {

// Whether `knobs` fix every knob that each model has; cp may be left out (1).
bool every_common_knob_fixed(const FixedKnobs& knobs) {
  return knobs.tp && knobs.pp && knobs.dp && knobs.micro_batch && knobs.virtual_stages && knobs.recompute &&
         knobs.sequence_parallel && knobs.distributed_optimizer;
}

// A model with experts has two knobs more: ep and etp decide its memory and time, so without them
// the search picks the expert layout around the other fixed knobs.
bool expert_knobs_fixed(const FixedKnobs& knobs, const ModelSpec& model) {
  return !model.is_moe() || (knobs.ep && knobs.etp);
}

// The configuration that every-knob-fixed `knobs` name for `job`; fsdp, when not fixed, as the
// search would choose it (default_fully_sharded).
ParallelConfig fixed_configuration(const FixedKnobs& knobs, const PreparedJob& job) {
  ParallelConfig config;
  config.tp = *knobs.tp;
  config.pp = *knobs.pp;
  config.dp = *knobs.dp;
  config.cp = knobs.cp.value_or(1);
  config.ep = knobs.ep.value_or(1);
  config.etp = knobs.etp.value_or(1);
  config.micro_batch = *knobs.micro_batch;
  config.virtual_stages = *knobs.virtual_stages;
  config.recompute = *knobs.recompute;
  config.recomputed_layers_per_chunk = knobs.recomputed_layers_per_chunk.value_or(0);
  config.sequence_parallel = *knobs.sequence_parallel;
  config.distributed_optimizer = *knobs.distributed_optimizer;
  config.fully_sharded = knobs.fully_sharded.value_or(
      default_fully_sharded(job.training.target.framework, job.model, config.pp, config.dp_cp()));
  return config;
}

// Every node a cache knows, sorted by name (pair endpoints included).
std::vector<std::string> cache_nodes(const LinkCache& cache) {
  std::set<std::string> names;
  for (const auto& node : cache.nodes) names.insert(node.name);
  for (const auto& pair : cache.pairs) {
    names.insert(pair.node_a);
    names.insert(pair.node_b);
  }
  return {names.begin(), names.end()};
}

Result<std::vector<std::string>> select_nodes(const Arguments& arguments, const SiteSelection& selection,
                                              const std::string& prefix) {
  const auto hostlist = arguments.value("nodes");
  const auto count = arguments.positive_integer("num-nodes");
  if (!count) return count.error();
  if (hostlist && *count) return Error{prefix + "give --nodes or --num-nodes, not both"};
  if (hostlist) {
    auto names = expand_hostlist(*hostlist);
    if (!names) return Error{prefix + "--nodes '" + *hostlist + "': " + names.error().message};
    if (names->empty()) return Error{prefix + "--nodes '" + *hostlist + "' names no node"};
    return names;
  }
  std::vector<std::string> known;
  if (!selection.link_cache.empty()) {
    auto cache = read_link_cache(selection.link_cache);
    if (!cache) return Error{prefix + cache.error().message};
    known = cache_nodes(*cache);
  }
  if (!*count) {
    if (known.empty()) {
      return Error{prefix + "no nodes: give --nodes HOSTLIST or --num-nodes N (the link cache names none)"};
    }
    return known;
  }
  const int wanted = **count;
  if (known.empty()) {
    // No cache: name the nodes; every link is a prior.
    std::vector<std::string> names;
    for (int i = 1; i <= wanted; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "node%03d", i);
      names.emplace_back(name);
    }
    return names;
  }
  if (static_cast<size_t>(wanted) > known.size()) {
    return Error{prefix + "--num-nodes " + std::to_string(wanted) + ": the link cache " + selection.link_cache +
                 " knows " + std::to_string(known.size()) +
                 " nodes; give --nodes HOSTLIST (pairs it has not measured get the site's priors)"};
  }
  known.resize(static_cast<size_t>(wanted));
  return known;
}

// With a site calibration in force: the chosen configuration once more under the built-in
// constants, for explain's side-by-side.
std::optional<Error> add_uncalibrated(JobRequest request, const SiteConfig& site, PlanningOutcome& outcome) {
  if (!outcome.calibration || outcome.plans.empty()) return std::nullopt;
  request.uncalibrated = true;
  auto raw = prepare_job(request, site);
  if (!raw) return raw.error();
  auto plan = evaluate_plan(raw->model, raw->training, raw->cluster, outcome.plans.front().config, raw->options);
  if (plan) outcome.uncalibrated_best = std::move(plan).value();
  return std::nullopt;
}

}  // namespace

std::string example_cluster_dir() {
  for (const char* candidate : {PIPETTE_SOURCE_EXAMPLE_DIR, PIPETTE_INSTALLED_EXAMPLE_DIR}) {
    std::error_code error;
    if (std::filesystem::exists(std::filesystem::path(candidate) / "site.yaml", error)) return candidate;
  }
  return "";
}

Result<SiteSelection> select_site(const Arguments& arguments, const std::string& command) {
  const std::string prefix = "pipette " + command + ": ";
  SiteSelection selection;
  if (const auto path = arguments.value("site")) {
    auto site = load_site_config(*path);
    if (!site) return Error{prefix + site.error().message};
    selection.site = std::move(*site);
    selection.link_cache = selection.site.link_cache;
    selection.source = "site file " + *path;
  } else {
    const std::string directory = example_cluster_dir();
    if (directory.empty()) {
      return Error{prefix + "no --site given and the bundled example cluster is not installed (looked in " +
                   PIPETTE_SOURCE_EXAMPLE_DIR + " and " + PIPETTE_INSTALLED_EXAMPLE_DIR + ")"};
    }
    const std::string site_path = directory + "/site.yaml";
    auto site = load_site_config(site_path);
    if (!site) return Error{prefix + site.error().message};
    selection.site = std::move(*site);
    selection.link_cache = selection.site.link_cache;
    selection.source = "bundled example cluster (" + directory + ")";
  }
  if (const auto cache = arguments.value("links")) {
    selection.link_cache = *cache;
    selection.source += ", link cache " + *cache;
  }
  return selection;
}

Result<PlanningOutcome> plan_from_arguments(const Arguments& arguments, const std::string& command) {
  const std::string prefix = "pipette " + command + ": ";
  auto selection = select_site(arguments, command);
  if (!selection) return selection.error();

  const auto model = arguments.value("model");
  if (!model && selection->site.defaults.model.empty()) {
    return Error{prefix + "--model is required (a preset such as llama3-70b, or a model YAML file)"};
  }
  auto nodes = select_nodes(arguments, *selection, prefix);
  if (!nodes) return nodes.error();
  const auto gpus_per_node = arguments.positive_integer("gpus-per-node");
  if (!gpus_per_node) return gpus_per_node.error();
  const auto global_batch = arguments.positive_integer("global-batch");
  if (!global_batch) return global_batch.error();
  const auto sequence_length = arguments.positive_integer("seq");
  if (!sequence_length) return sequence_length.error();
  const auto top_k = arguments.positive_integer("top");
  if (!top_k) return top_k.error();

  JobRequest request;
  request.model = model.value_or("");
  request.node_names = std::move(*nodes);
  request.gpus_per_node = gpus_per_node->value_or(8);
  // The CLI plans a cluster it does not run on: never inspect this (login) machine.
  request.inspection = NodeInspection{};
  request.link_cache = selection->link_cache;
  request.global_batch = global_batch->value_or(0);
  request.sequence_length = sequence_length->value_or(0);
  request.fixed = arguments.value("fix").value_or("");
  request.framework = arguments.value("framework").value_or("");
  request.engine = arguments.value("engine").value_or("");
  request.precision = arguments.value("precision").value_or("");
  request.top_k = top_k->value_or(5);

  PlanningOutcome outcome;
  outcome.cluster_source = selection->source;
  const std::string fixed_text = request.fixed.empty() ? selection->site.defaults.fixed : request.fixed;
  const auto knobs = parse_fixed_knobs(fixed_text);
  if (!knobs) return Error{prefix + "--fix: " + knobs.error().message};

  // Prepared already when the common knobs are all fixed; searched when the expert knobs are not.
  std::optional<PreparedJob> prepared;
  if (every_common_knob_fixed(*knobs)) {
    auto job = prepare_job(request, selection->site);
    if (!job) return Error{prefix + job.error().message};
    outcome.every_knob_fixed = expert_knobs_fixed(*knobs, job->model);
    prepared = std::move(*job);
  }
  if (outcome.every_knob_fixed) {
    // Exactly the configuration asked for, fitting or not: evaluate it on the same prepared job.
    // Only a configuration that runs on this job but is too big "does not fit"; anything else
    // (the wrong GPU count, a knob the model or the framework refuses: complete_configuration,
    // which evaluate_plan runs first, refuses it) is an error.
    const ParallelConfig asked = fixed_configuration(*knobs, *prepared);
    auto plan = evaluate_plan(prepared->model, prepared->training, prepared->cluster, asked, prepared->options);
    if (!plan) {
      const auto config = complete_configuration(prepared->model, prepared->training, prepared->cluster, asked);
      if (!config) return Error{prefix + config.error().message};
      outcome.fixed_memory =
          estimate_memory(model_for_sequence(prepared->model, prepared->training.sequence_length), prepared->training,
                          *config, prepared->options.overheads);
      outcome.does_not_fit = plan.error().message;
      outcome.fixed_config = *config;
    } else {
      outcome.plans.push_back(std::move(*plan));
    }
    outcome.model = std::move(prepared->model);
    outcome.training = std::move(prepared->training);
    outcome.cluster = std::move(prepared->cluster);
    outcome.links_measured = prepared->measured_node_pairs;
    outcome.links_assumed = prepared->assumed_node_pairs;
    outcome.calibration = std::move(prepared->calibration);
    outcome.engine = std::move(prepared->engine);
    outcome.notes = std::move(prepared->notes);
    if (auto problem = add_uncalibrated(request, selection->site, outcome)) return Error{prefix + problem->message};
    return outcome;
  }

  auto job = prepared ? search_prepared_job(std::move(*prepared)) : plan_job(request, selection->site);
  if (!job) return Error{prefix + job.error().message};
  outcome.model = std::move(job->model);
  outcome.training = std::move(job->training);
  outcome.cluster = std::move(job->cluster);
  outcome.plans = std::move(job->search.plans);
  outcome.rejections = std::move(job->search.rejections);
  outcome.candidates_evaluated = job->search.candidates_evaluated;
  outcome.links_measured = job->measured_node_pairs;
  outcome.links_assumed = job->assumed_node_pairs;
  if (outcome.plans.empty()) return Error{prefix + "the planner returned no plan"};
  outcome.calibration = std::move(job->calibration);
  outcome.engine = std::move(job->engine);
  outcome.notes = std::move(job->notes);
  if (auto problem = add_uncalibrated(request, selection->site, outcome)) return Error{prefix + problem->message};
  return outcome;
}

}  // namespace pipette::cli
