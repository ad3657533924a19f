#pragma once
// State that slurmstepd carries from init (as root) through user_init (as the job user) to
// task_init (in each forked task): computed before any task exists, read-only afterwards.
#include <string>
#include <vector>

#include "options.hpp"
#include "pipette/topology/site_config.hpp"
#include "plugin_config.hpp"
#include "rank_table.hpp"

namespace pipette::spank {

struct RemoteContext {
  PluginConfig config;
  std::string setup_error;         // plugstack arguments or site file; reported if Pipette is asked for
  SiteConfig site;                 // built-in defaults unless a trusted site file loaded

  bool active = false;             // Pipette was asked for in this step
  bool per_task = false;           // this step's tasks get RANK etc. (auto mode, not the batch step)
  bool strict = false;
  std::string error;               // why the step runs unplanned; empty when planned
  std::vector<EnvironmentList> task_environment;  // per local task id
  bool one_task_per_gpu = false;   // LOCAL_RANK follows the devices each task sees (task_init)
  std::string step_devices;        // the step's CUDA_VISIBLE_DEVICES on this node
};

RemoteContext& remote_context();

}  // namespace pipette::spank
