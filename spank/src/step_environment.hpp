#pragma once
// The step-wide PIPETTE_* variables that hand a plan to the unchanged training script.
#include <string>

#include "pipette/core/plan.hpp"
#include "rank_table.hpp"

namespace pipette::spank {

// Arguments to append to a Megatron-LM command line: parallel sizes, batch sizes, interleaving,
// an uneven first/last pipeline stage, recompute, sequence parallelism, distributed optimizer.
std::string megatron_arguments(const Plan& plan);

// PIPETTE_TP … PIPETTE_MEGATRON_ARGS and PIPETTE_STATUS=ok.
EnvironmentList step_environment(const Plan& plan, const RankTable& table, const StepLayout& layout,
                                 const std::string& plan_hash);

// The names step_environment sets, so that a failed step can clear values it inherited (an
// `srun` inside a planned batch script must not keep the batch step's plan when its own fails).
const char* const* plan_variable_names();

}  // namespace pipette::spank
