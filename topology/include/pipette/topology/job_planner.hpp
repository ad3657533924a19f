#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/engine.hpp"
#include "pipette/core/model.hpp"
#include "pipette/core/result.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/training.hpp"
#include "pipette/topology/calibration_file.hpp"
#include "pipette/topology/hwloc_inspect.hpp"
#include "pipette/topology/site_config.hpp"

namespace pipette {

// The one entry point the SPANK plugin and the `pipette` CLI share: request + site file → plans.

// "tp=8,pp=4,dp=2,mbs=1,vpp=2,recompute=selective,sp=on,distopt=off": comma-separated key=value,
// whitespace around items ignored, each key at most once. Keys: tp pp dp mbs vpp (positive
// integers), recompute (none|selective|full|block:N), sp and distopt (on|off|true|false|1|0). An empty
// string fixes nothing. Errors name the offending item: `--pipette-fix: "tp=x": tp needs a
// positive integer`.
Result<FixedKnobs> parse_fixed_knobs(std::string_view text);
// The inverse, in the order above, only the knobs that are set ("tp=8,recompute=selective").
std::string format_fixed_knobs(const FixedKnobs& knobs);

// One value of the recompute knob as --pipette-fix, a plan record and a run table write it: none,
// selective, full (every layer keeps only its input) or block:N, N >= 1: full recompute of the
// first N layers of each model chunk, the rest keeping everything (Megatron's --recompute-method
// block --recompute-num-layers N). An N above a chunk's layers recomputes them all, as Megatron's
// loop does (recompute.py @d98e8a64 l.171-177). recomputed_layers_per_chunk is 0 unless block.
struct RecomputeKnob {
  RecomputeMode mode = RecomputeMode::none;
  int recomputed_layers_per_chunk = 0;
};
// The problem, without the item: "recompute must be none, selective, full or block:N ...".
Result<RecomputeKnob> parse_recompute_knob(std::string_view value);

// A split as format_layer_split writes it ("7,7,6,6,6"), as the layout record and the plan record
// keep it: every item a layer count from 0 (a stage without layers) to 2^20, at most 1024 stages
// (the model file's layer limit). The problem is "the split is not a list of layer counts" or "the
// split has more than 1024 stages".
Result<std::vector<int>> parse_layer_split(std::string_view text);

// The engine's switches (core/engine.hpp) as a user writes them: "precision=fp8,attention=unfused,
// fp32-grads=on,dp-overlap=off,tp-overlap=on,tp-comm-overlap=on,tp-recompute-allgather=off", in the
// grammar of parse_fixed_knobs; booleans on|off|true|false|1|0. Errors name the item, the key and
// the accepted values: `engine: "dp-overlap=maybe": dp-overlap must be on or off (got "maybe")`.
Result<EngineOverrides> parse_engine_overrides(std::string_view text);
// The switches `overrides` sets, in engine_keys() order, as parse_engine_overrides reads them.
std::string format_engine_overrides(const EngineOverrides& overrides);
// One key's value into `overrides` (the site file's defaults.engine mapping reads each key with
// it); the problem, without the item, when the key or value is not valid.
std::optional<std::string> set_engine_override(EngineOverrides& overrides, const std::string& key, std::string_view value);
// "precision, attention, ...": the keys, for messages.
std::string engine_key_list();
// The precisions the engine's precision key accepts, each spelled as to_string writes it, in the
// order messages list them: the one list of precision spellings (--engine precision=, --precision,
// --pipette-precision, defaults.engine.precision and the site file's defaults.precision).
std::span<const Precision> engine_precisions();
// "fp32, fp16, bf16 or fp8": engine_precisions, for messages.
std::string precision_spellings();
// A precision given on its own (--precision / --pipette-precision, the site file's
// defaults.precision) into `engine`, whose precision key (--engine precision=,
// defaults.engine.precision) may say it too: given both, they must agree. Returns the engine's
// precision where they disagree, leaving `engine` as it was, for the caller's one-line error
// naming its own two places.
std::optional<Precision> merge_precision(EngineOverrides& engine, Precision precision);

struct JobRequest {
  std::string model;                      // preset or file; "" = site default
  std::int64_t global_batch = 0;          // sequences; 0 = site default
  int sequence_length = 0;                // tokens; 0 = site default
  std::string fixed;                      // parse_fixed_knobs syntax; "" = site default
  std::string framework;                  // megatron-core | nemo | torchtitan; "" = the site's `framework`
  std::string engine;                     // parse_engine_overrides syntax; over the site's defaults.engine
  std::string precision;                  // fp32 | fp16 | bf16 | fp8 (--precision); "" = engine's, site's, stack's
  std::vector<int> fixed_layers_per_stage;  // FixedKnobs::layers_per_stage; empty = the search chooses
  std::vector<std::string> node_names;    // expanded (expand_hostlist), Slurm's order
  int gpus_per_node = 0;                  // 0 = the GPUs hwloc finds on this node
  std::string gpu;                        // GPU model name; "" = detect, then the site's `gpu`
  std::optional<NodeInspection> inspection;  // given: used as is; else topology_xml or this machine
  std::string topology_xml;               // hwloc XML to inspect instead of this machine
  std::string link_cache;                 // overrides the site's links.cache; "" = the site's
  std::vector<std::string> model_dirs;    // searched before the site's and the built-in presets
  int top_k = 0;                          // 0 = the site's search.top_k
  // Staleness reference, identical on every node of a job (the plugin passes the job's start
  // time); 0 = now.
  std::int64_t reference_time_unix_seconds = 0;
  bool uncalibrated = false;              // true: the built-in constants even when the site has a calibration
};

struct JobPlan {
  ModelSpec model;
  TrainingSpec training;
  Cluster cluster;
  SearchResult search;                    // plans best first, rejections; every plan's links_assumed is filled
  std::vector<std::string> links_assumed; // which links were assumed, and why (summarised)
  std::vector<std::string> notes;         // e.g. "no link cache at /var/…: every link is a prior"
  int measured_node_pairs = 0;
  int assumed_node_pairs = 0;
  std::optional<CalibrationEntry> calibration;  // the site calibration the plans were made with
  std::vector<EngineSetting> engine;      // every engine switch as planned and where it came from
};

// Everything plan_job does before the search: the resolved model and training (request, then
// site defaults), the assembled cluster and the notes. The CLI's `simulate` and `explain` use it
// to evaluate a given configuration on the same cluster.
struct PreparedJob {
  ModelSpec model;
  TrainingSpec training;
  Cluster cluster;
  SearchOptions options;                  // the site's, with the request's top_k
  // The site calibration the cluster and options carry (calibration.file), if any applies.
  std::optional<CalibrationEntry> calibration;
  std::vector<EngineSetting> engine;      // every engine switch as planned and where it came from
  std::vector<std::string> links_assumed;
  std::vector<std::string> notes;
  int measured_node_pairs = 0;
  int assumed_node_pairs = 0;
};
Result<PreparedJob> prepare_job(const JobRequest& request, const SiteConfig& site);

// Loads the model, reads the link cache (missing: priors and a note, or an error when the site
// requires measurements), inspects the node, assembles the cluster, and searches. Never throws;
// every error is one line naming the input and what would fix it.
Result<JobPlan> plan_job(const JobRequest& request, const SiteConfig& site);

// plan_job's search on a job prepare_job has prepared already.
Result<JobPlan> search_prepared_job(PreparedJob job);

}  // namespace pipette
