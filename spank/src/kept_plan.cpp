#include "kept_plan.hpp"

#include <map>

#include "pipette/core/plan.hpp"
#include "pipette/topology/plan_record.hpp"
#include "layout_record.hpp"

namespace pipette::spank {

std::string keep_plan(const StepRequest& request, const StepPlan& plan, const SiteConfig& site,
                      const std::string& state_home, const std::string& cluster) {
  if (site.calibration_file.empty()) return "";
  // The step's PIPETTE_* values under the plan record's names.
  static const std::map<std::string, std::string> names = {
      {"PIPETTE_TP", "tp"},   {"PIPETTE_PP", "pp"},           {"PIPETTE_DP", "dp"},  {"PIPETTE_CP", "cp"},
      {"PIPETTE_EP", "ep"},   {"PIPETTE_ETP", "etp"},
      {"PIPETTE_VPP", "vpp"}, {"PIPETTE_MICRO_BATCH", "mbs"}, {"PIPETTE_GLOBAL_BATCH", "global_batch"},
      {"PIPETTE_RECOMPUTE", "recompute"}, {"PIPETTE_SEQUENCE_PARALLEL", "sp"}, {"PIPETTE_DISTRIBUTED_OPTIMIZER", "distopt"},
      {"PIPETTE_FULLY_SHARDED", "fsdp"}};
  const std::string model = request.settings.model.empty() ? site.defaults.model : request.settings.model;
  const int sequence_length = request.settings.sequence_length.value_or(site.defaults.sequence_length);
  const int nodes = static_cast<int>(request.layout.node_names.size());
  std::vector<std::pair<std::string, std::string>> values = {
      {"model", model}, {"nodes", std::to_string(nodes)}, {"sequence_length", std::to_string(sequence_length)}};
  if (!site.gpu.empty()) values.emplace_back("gpu", site.gpu);
  std::string node_list;
  for (const std::string& node : request.layout.node_names) node_list += (node_list.empty() ? "" : ",") + node;
  values.emplace_back("node_list", node_list);
  int gpus = 1;
  for (const auto& [name, value] : plan.step_environment) {
    const auto found = names.find(name);
    if (found == names.end()) continue;
    values.emplace_back(found->second, value);
    if (found->second == "tp" || found->second == "pp" || found->second == "dp" || found->second == "cp") gpus *= std::stoi(value);
  }
  if (nodes > 0) values.emplace_back("gpus_per_node", std::to_string(gpus / nodes));
  // The layer split the plan chose (the search may move layers off the embedding and head stages).
  const Result<RecordedLayout> layout = parse_layout_record(plan.layout_record, "the step's plan");
  if (!layout) return layout.error().message;
  values.emplace_back("layers_per_stage", format_layer_split(layout->layers_per_stage));
  values.emplace_back("framework", plan.framework);
  if (!plan.engine.empty()) values.emplace_back("engine", plan.engine);
  auto written = write_plan_record(state_home, cluster, request.job_id, values);
  return written ? "" : written.error().message;
}

}  // namespace pipette::spank
