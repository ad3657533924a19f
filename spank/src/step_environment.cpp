#include "step_environment.hpp"

#include <vector>

#include "pipette/core/launch.hpp"

namespace pipette::spank {

const char* const* plan_variable_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> pointers;
    for (const std::string& name : pipette::plan_variable_names()) pointers.push_back(name.c_str());
    pointers.push_back(nullptr);
    return pointers;
  }();
  return names.data();
}

EnvironmentList step_environment(const ModelSpec& model, const TrainingSpec& training, const Plan& plan,
                                 const StepLayout& layout, const std::string& plan_hash) {
  return plan_variables(model, training, plan, layout.node_names, plan_hash);
}

}  // namespace pipette::spank
