#pragma once
// plan_step under the site's planning budget (planning.time_limit_seconds, memory_limit_mib): a
// user's model file or options must not hold slurmstepd (and with it the step, scancel and the
// node) for longer than that, nor let it grow without bound. The planning runs in a forked child
// process with an address-space limit; the parent waits at most the time limit, then kills it.
// Either the child's result comes back unchanged (the same plan bit for bit as plan_step) or the
// step gets an error: the budget can only make a step unplanned, never change its plan.
#include "pipette/topology/site_config.hpp"
#include "step_plan.hpp"

namespace pipette::spank {

StepPlanResult plan_step_within_budget(const StepRequest& request, const SiteConfig& site);

// The child's result as bytes and back (exposed for the tests). decode returns false on any
// malformed input.
std::string encode(const StepPlanResult& result);
bool decode(std::string_view bytes, StepPlanResult& result);

}  // namespace pipette::spank
