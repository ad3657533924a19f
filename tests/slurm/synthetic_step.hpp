#pragma once
// A step as user_init would describe it, on synthetic nodes node0, node1, … of 8 GPUs each, for
// the plugin's unit tests and fuzz targets: llama2-7b, global batch 256, sequence 4096, auto mode.
#include <string>

#include "step_plan.hpp"

namespace pipette::spank::testing {

inline StepRequest synthetic_step(int nodes, int tasks_per_node, int node_index) {
  StepRequest request;
  request.settings.mode = Mode::auto_remap;
  request.settings.model = "llama2-7b";
  request.settings.global_batch = 256;
  request.settings.sequence_length = 4096;
  for (int i = 0; i < nodes; ++i) request.layout.node_names.push_back("node" + std::to_string(i));
  request.layout.gpus_per_node = 8;
  request.layout.tasks_per_node = tasks_per_node;
  request.node_index = node_index;
  request.job_id = 7;
  request.step_id = 0;
  request.reference_time_unix_seconds = 1'800'000'000;
  return request;
}

inline SiteConfig h100_site() {
  SiteConfig site;
  site.gpu = "H100-SXM";
  return site;
}

}  // namespace pipette::spank::testing
