#pragma once
// The plan a step ran with, kept for `pipette calibrate --slurm-job` in the job user's own state
// directory (topology/plan_record.hpp). Only where the site calibrates (calibration.file set).
#include <string>

#include "pipette/topology/site_config.hpp"
#include "step_plan.hpp"

namespace pipette::spank {

// Called as the job user. `state_home` as state_home() gives it, `cluster` Slurm's ClusterName.
// Returns "" when kept or when the site does not calibrate, else one line saying why not.
std::string keep_plan(const StepRequest& request, const StepPlan& plan, const SiteConfig& site,
                      const std::string& state_home, const std::string& cluster);

}  // namespace pipette::spank
