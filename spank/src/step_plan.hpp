#pragma once
// What user_init computes for one node of one step, without Slurm: the settings and the step's
// layout in, the variables for the step and for each local task out. The benchmark calls this
// with synthetic node lists.
#include <cstdint>
#include <string>
#include <vector>

#include "options.hpp"
#include "pipette/topology/site_config.hpp"
#include "rank_table.hpp"

namespace pipette::spank {

struct StepRequest {
  Settings settings;
  StepLayout layout;             // tasks_per_node 0 for the batch step; gpus_per_node 0: ask hwloc
  int node_index = 0;            // this node in layout.node_names
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  // Every node of a step must weigh cache entries' age alike, and Slurm 22.05 tells a step no
  // job-wide time: plan_step uses the current UTC day, which every node of a step agrees on
  // unless the step starts within clock skew of midnight. A value > 0 overrides it.
  std::int64_t reference_time_unix_seconds = 0;
  // A restart's recorded split (layout_record.hpp); empty: the search chooses.
  std::vector<int> fixed_layers_per_stage;
};

struct StepPlan {
  EnvironmentList step_environment;               // PIPETTE_*
  std::vector<EnvironmentList> task_environment;  // per local task; empty unless tasks are remapped
  std::string summary;                            // one line for the log
  std::string layout_record;                      // format_layout_record of the plan
  std::vector<std::string> notes;                 // what planning assumed or changed (JobPlan::notes)
  // What the plan was priced for beyond its layout, kept for pipette calibrate (kept_plan.hpp):
  // the framework's spelling and the engine switches the site or the job set, in --engine syntax.
  std::string framework;
  std::string engine;
};

struct StepPlanResult {
  StepPlan plan;
  std::string error;  // one line; empty on success
};

SiteDefaults site_defaults(const SiteConfig& site);

StepPlanResult plan_step(const StepRequest& request, const SiteConfig& site);

}  // namespace pipette::spank
