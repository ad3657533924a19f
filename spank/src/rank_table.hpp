#pragma once
// From a plan to what each Slurm task of a step must be told: the Megatron rank it plays, its
// local rank, the node ranks, and the rendezvous address. Pure: computed once per node in
// user_init, so that task_init (between fork and exec) only copies strings into the environment.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipette/core/plan.hpp"

namespace pipette::spank {

using EnvironmentList = std::vector<std::pair<std::string, std::string>>;

// How the step's tasks sit on the plan's GPUs. Slurm numbers tasks node-major with the default
// block distribution: SLURM_PROCID = node_index × tasks_per_node + local_id.
struct StepLayout {
  std::vector<std::string> node_names;  // the step's node list in Slurm's order
  int gpus_per_node = 0;
  int tasks_per_node = 0;  // 0 in the batch step
};

enum class Launch {
  per_gpu,   // one task per GPU: each task is a training rank
  per_node,  // one task per node: a launcher such as torchrun starts the GPU processes
};

struct RankTable {
  Launch launch = Launch::per_gpu;
  std::vector<int> rank_order;        // entry r = the SLURM_PROCID that acts as rank r (per_gpu)
  std::vector<int> node_rank_of_node; // node index → NODE_RANK
  std::vector<int> node_of_node_rank; // NODE_RANK → node index
  int master_node = 0;                // node index of the node that holds rank 0
  std::uint16_t master_port = 0;
};

struct RankTableResult {
  RankTable table;
  std::string error;  // why the layout cannot carry the plan; empty on success
};

// `job_id` and `step_id` pick a rendezvous port that differs between concurrent steps.
RankTableResult make_rank_table(const Plan& plan, const StepLayout& layout, std::uint32_t job_id,
                                std::uint32_t step_id);

// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT (and, for
// per-node launchers, torchrun's PET_* defaults) for one local task of one node.
EnvironmentList task_environment(const RankTable& table, const StepLayout& layout, int node_index,
                                 int local_task);

std::string join(const std::vector<int>& numbers);

// The LOCAL_RANK of task `local_task` of a one-task-per-GPU step: the position, among the devices
// the task sees (its CUDA_VISIBLE_DEVICES), of the GPU it drives, which is entry `local_task` of
// the devices the step has on this node (the step's CUDA_VISIBLE_DEVICES). With per-task binding
// (--gpus-per-task=1, --gpu-bind=single:1) each task sees only its own GPU, so that is 0; when
// every task sees the whole node it is `local_task` (SLURM_LOCALID). A task that sees no list,
// or whose list lacks that GPU, keeps `local_task` if it sees that many devices, else 0.
int visible_local_rank(int local_task, std::string_view step_devices, std::string_view task_devices);

}  // namespace pipette::spank
