#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/engine.hpp"
#include "pipette/core/result.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/training.hpp"
#include "pipette/topology/link_cache.hpp"

namespace pipette {

// The site-defaults file (/etc/slurm/pipette.yaml; every key is shown and explained in
// etc/pipette.yaml). Strict: an unknown key, a wrong type or an out-of-range value is an error
// "FILE:LINE: key 'a.b': what is wrong and what to write instead". Absent keys keep the defaults
// below, so an empty file is valid.

enum class PipetteMode { automatic, plan, off };  // file spelling: auto | plan | off
enum class FailurePolicy { run_unplanned, fail_job };  // file spelling: run-unplanned | fail

const char* to_string(PipetteMode mode);
const char* to_string(FailurePolicy policy);

// Links never measured get these. Network gear quotes Gb/s, so the file does too
// (priors.nic_gbit_per_s); it is converted once, here, with units::gigabit.
struct LinkPriors {
  double nic_bandwidth_bytes_per_second = 200 * 1e9 / 8;  // one rail (NIC port), nominal
  int rails = 0;             // NICs per node used by the job; 0: count the node's InfiniBand/RoCE NICs
  double attained_fraction = 0.8;  // what NCCL attains of the nominal rate
  double inter_node_latency_seconds = 10e-6;
  double intra_node_bandwidth_bytes_per_second = 0;  // 0: from the hardware (NVLink / NVSwitch / PCIe)
  double intra_node_latency_seconds = 3e-6;
  // GPUs on one node's board (an HGX/DGX baseboard), where hwloc cannot count them (the CLI on a
  // login node); 0: as many as the job uses per node. Decides the fabric a partial node is priced on.
  int board_gpus = 0;
  std::string topology_conf;                // Slurm topology.conf ("" = none)
  std::vector<double> switch_level_factors = {1.0, 0.75, 0.5};  // by level of the lowest common switch
  // How the rails meet (RailFabric in core/cluster.hpp). rail-optimized: a fat tree whose leaves
  // each serve one rail of a scalable unit (DGX SuperPOD reference architecture), so a cross-rail
  // flow crosses the spine as a cross-leaf pair does: switch_level_factors[1] of a rail-aligned
  // flow. rail-only: no spine between rails (Wang et al., "Rail-only", arXiv:2307.12169); every
  // cross-rail flow forwards over NVLink.
  bool rail_only = false;
  double cross_rail_extra_latency_seconds = 1e-6;  // two more switch hops (leaf → spine → leaf)
  bool nccl_pxn = true;                             // NCCL_PXN_DISABLE=0, NCCL's default
  // What kind of network joins the nodes: how the bandwidth of a collective over many nodes falls
  // (collective_scaling_of in core/src/cluster.cpp: flat on InfiniBand, steep on AWS EFA). A curve
  // measured by pipette-probe --collectives in the link cache replaces it (cluster_assembly.cpp).
  NetworkKind network = NetworkKind::infiniband;
};

struct JobDefaults {
  std::string model;                 // preset or file; "" = the user must give one
  std::int64_t global_batch_sequences = 0;
  int sequence_length = 0;
  std::string fixed;                 // parse_fixed_knobs syntax
  // defaults.engine (and defaults.precision, the same as its precision key): over the stack's own.
  EngineOverrides engine;
};

// What planning may cost at job start, on each node of each step (the plugin plans in a child
// process and gives up at these limits; the `pipette` CLI plans without them). Bounding the work
// itself is the job of the input limits (model file, options, `search` and `placement` keys):
// these are the backstop, and they can only turn a plan into "unplanned", never into another plan.
struct PlanningBudget {
  // Below Slurm's MessageTimeout (default 10 s): a step that is signalled (scancel) before its
  // tasks start keeps slurmd's reply waiting until planning ends (slurmstepd/req.c,
  // _wait_for_job_running), and slurmctld marks a node that answers later "not responding".
  double time_limit_seconds = 8;
  double memory_limit_bytes = 4.0 * (1 << 30);  // address space beyond what slurmstepd has mapped
};

struct SiteConfig {
  std::string source;                        // the file it came from; "" = built-in defaults
  PipetteMode default_mode = PipetteMode::off;   // installing Pipette changes no job until asked
  FailurePolicy failure_policy = FailurePolicy::run_unplanned;
  bool require_measurements = false;         // no usable cache → error instead of priors
  std::string gpu;                           // GPU model when hwloc cannot tell ("" = detect)
  FrameworkTarget framework;                 // what runs the jobs unless they say (--pipette-framework)
  std::vector<GpuSpec> gpus;                 // site additions to / overrides of the core catalog
  std::vector<std::string> model_dirs;       // searched before the built-in presets
  std::string link_cache;                    // path of the link cache ("" = none)
  // `pipette calibrate`'s output ("" = none: the built-in constants); a job uses its framework's entry.
  std::string calibration_file;
  StalenessPolicy staleness;
  LinkPriors priors;
  SearchOptions search;                      // memory margin, runtime overheads, placement effort, top_k
  PlanningBudget planning;
  JobDefaults defaults;
};

Result<SiteConfig> load_site_config(const std::string& path);
Result<SiteConfig> parse_site_config(std::string_view text, const std::string& source_name);

// The site's own GPU list first, then the core catalog (case-insensitive); nullptr when unknown.
const GpuSpec* find_site_gpu(const SiteConfig& site, std::string_view name);

}  // namespace pipette
