#pragma once
// The step-wide PIPETTE_* variables that hand a plan to the unchanged training script.
#include <string>

#include "pipette/core/model.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/training.hpp"
#include "rank_table.hpp"

namespace pipette::spank {

// core's plan_variables (the same function `pipette plan --json` uses) for the step's nodes:
// PIPETTE_TP ... the target framework's string, CUDA_DEVICE_MAX_CONNECTIONS where the launch needs
// it, and PIPETTE_STATUS=ok. Call it once make_rank_table has accepted the plan for this layout:
// the rank order it exports is the placement itself, and make_rank_table checks that the
// placement and the node order are permutations of the step's GPUs and nodes.
EnvironmentList step_environment(const ModelSpec& model, const TrainingSpec& training, const Plan& plan,
                                 const StepLayout& layout, const std::string& plan_hash);

// The names step_environment sets, so that a failed step can clear values it inherited (an
// `srun` inside a planned batch script must not keep the batch step's plan when its own fails).
const char* const* plan_variable_names();

}  // namespace pipette::spank
