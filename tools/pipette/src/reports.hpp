#pragma once
#include <optional>
#include <string>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/engine.hpp"
#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/simulator.hpp"
#include "pipette/core/training.hpp"
#include "pipette/topology/calibration_file.hpp"

namespace pipette::cli {

// Everything the planning commands print, gathered once.
struct PlanningOutcome {
  ModelSpec model;
  TrainingSpec training;
  Cluster cluster;
  std::string cluster_source;           // where the cluster came from, for the header line
  std::vector<Plan> plans;              // best first
  std::vector<Rejection> rejections;
  int candidates_evaluated = 0;
  bool every_knob_fixed = false;        // the user asked for exactly one configuration
  std::string does_not_fit;             // with every knob fixed: why it does not fit; else empty
  ParallelConfig fixed_config;          // with does_not_fit: the configuration and its memory
  std::vector<StageMemory> fixed_memory;
  int links_measured = 0;               // node pairs of this job with a measurement
  int links_assumed = 0;                // node pairs of this job on priors
  // The site calibration the plans were made with, and the chosen plan under the built-in
  // constants, for `explain`'s side-by-side (absent: no calibration applied).
  std::optional<CalibrationEntry> calibration;
  std::optional<Plan> uncalibrated_best;
  std::vector<EngineSetting> engine;    // the engine's switches as planned and where each came from
  std::vector<std::string> notes;       // what planning assumed or changed (JobPlan::notes), one line each
};

// `pipette plan`: header, the plans table, the chosen plan's placement.
std::string plan_report(const PlanningOutcome& outcome);
// `pipette plan --json`: schema "pipette.plan" version 1 (README, "The pipette command").
std::string plan_json(const PlanningOutcome& outcome);
// `pipette explain`.
std::string explain_report(const PlanningOutcome& outcome);

struct SimulationSummary {
  double simulated_seconds = 0;
  double closed_form_seconds = 0;
  double per_stage_busy_fraction_min = 0;  // compute time / iteration time, least busy stage
  double per_stage_busy_fraction_max = 0;
};
SimulationSummary summarize(const SimulationResult& simulation, double closed_form_seconds, int pp);
std::string simulate_report(const PlanningOutcome& outcome, const SimulationSummary& summary);
std::string simulate_json(const PlanningOutcome& outcome, const SimulationSummary& summary);

// One-line plan name, e.g. "tp=8 pp=4 dp=4 mbs=1 vpp=2 selective sp distopt".
std::string plan_label(const ParallelConfig& config);

}  // namespace pipette::cli
