#pragma once
// The plans a user would otherwise run, re-implemented from the published methods of the tools
// that pick them, so that bench/compare can score them with the same simulator as Pipette's own.
// Each baseline sees what its tool sees: (a) nothing but the node size and a memory model,
// (b) one nominal bandwidth for every link, (c) the measured links, through its own closed-form
// model and placement objective. See baselines.cpp for the sources.
#include <optional>
#include <string>

#include "pipette/core/cluster.hpp"
#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/training.hpp"

namespace pipette::bench {

struct BaselinePick {
  std::optional<ParallelConfig> config;  // empty: the method found nothing it would run
  Placement placement;
  std::string why_none;                  // set when config is empty
};

// What every method is told about the site: the memory it may fill, and the nominal link speeds
// an administrator would quote (the site file's priors), which is all that AMP ever sees.
struct SiteKnowledge {
  double usable_memory_bytes = 0;
  RuntimeOverheads overheads;
  Link nominal_inter_node;  // a node pair with all rails busy
  Link nominal_intra_node;
};

// (a) Common practice (Megatron-LM / NeMo recipes): TP = GPUs per node, micro-batch 1, an even
// layer split, sequence parallelism and the distributed optimizer on, the smallest PP that fits
// by our memory model (without recompute if any PP allows it, else selective, else full), and
// Slurm's rank order.
BaselinePick common_practice(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                             const SiteKnowledge& site);

// (b) AMP (Li et al., NeurIPS 2022): minimises its cost model over (tp, pp, dp, micro-batch) on a
// cluster description with one bandwidth per link kind, with no memory check; Slurm's rank order.
// `best` is its pick; `best_fitting` the first pick down its ranking that fits our memory model
// (what a user ends up running after the out-of-memory failures).
struct AmpPicks {
  BaselinePick best;
  BaselinePick best_fitting;
};
AmpPicks amp(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster, const SiteKnowledge& site);

// (c) Pipette as published (Yim et al., DATE 2024, and its released code): its closed-form
// latency model on the measured links, its memory check, and its node-permutation annealing
// against its own objective (optimize_placement_pipette_paper).
BaselinePick pipette_paper(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                           const SiteKnowledge& site, const PlacementEffort& effort);

// The busiest stage's memory by our estimator against what the site allows.
bool fits_in_memory(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config,
                    const SiteKnowledge& site);

std::string describe(const ParallelConfig& config);

}  // namespace pipette::bench
