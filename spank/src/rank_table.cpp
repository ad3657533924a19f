#include "rank_table.hpp"

namespace pipette::spank {

namespace {

// torch.distributed's customary 29500 upwards; the job and step ids spread concurrent steps of
// different jobs sharing a node over 2000 ports.
constexpr std::uint16_t base_master_port = 29500;
constexpr std::uint32_t master_port_span = 2000;

std::vector<std::string_view> split_devices(std::string_view list) {
  std::vector<std::string_view> devices;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    devices.push_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return devices;
}

}  // namespace

int visible_local_rank(int local_task, std::string_view step_devices, std::string_view task_devices) {
  const std::vector<std::string_view> visible = split_devices(task_devices);
  if (visible.empty()) return local_task;
  const std::vector<std::string_view> step = split_devices(step_devices);
  if (local_task >= 0 && static_cast<std::size_t>(local_task) < step.size()) {
    for (std::size_t index = 0; index < visible.size(); ++index) {
      if (visible[index] == step[static_cast<std::size_t>(local_task)]) return static_cast<int>(index);
    }
  }
  return local_task >= 0 && static_cast<std::size_t>(local_task) < visible.size() ? local_task : 0;
}

std::string join(const std::vector<int>& numbers) {
  std::string text;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(numbers[i]);
  }
  return text;
}

RankTableResult make_rank_table(const Plan& plan, const StepLayout& layout, std::uint32_t job_id,
                                std::uint32_t step_id) {
  RankTableResult result;
  RankTable& table = result.table;
  const int num_nodes = static_cast<int>(layout.node_names.size());
  const int gpus = num_nodes * layout.gpus_per_node;
  const std::vector<int>& gpu_of_rank = plan.placement.gpu_of_rank;

  if (static_cast<int>(gpu_of_rank.size()) != gpus) {
    result.error = "the plan places " + std::to_string(gpu_of_rank.size()) + " ranks on " + std::to_string(gpus) +
                   " GPUs";
    return result;
  }
  if (static_cast<int>(plan.node_order.size()) != num_nodes) {
    result.error = "the plan orders " + std::to_string(plan.node_order.size()) + " nodes, the step has " +
                   std::to_string(num_nodes);
    return result;
  }
  // The batch step (no tasks of its own) describes the one-task-per-GPU steps it will launch.
  if (layout.tasks_per_node == layout.gpus_per_node || layout.tasks_per_node == 0) {
    table.launch = Launch::per_gpu;
  } else if (layout.tasks_per_node == 1) {
    table.launch = Launch::per_node;
  } else {
    result.error = std::to_string(layout.tasks_per_node) + " tasks per node: run one task per GPU (--ntasks-per-node=" +
                   std::to_string(layout.gpus_per_node) + ") or one launcher per node (--ntasks-per-node=1)";
    return result;
  }

  std::vector<bool> seen(static_cast<std::size_t>(gpus), false);
  table.rank_order.resize(static_cast<std::size_t>(gpus));
  for (int rank = 0; rank < gpus; ++rank) {
    const int gpu = gpu_of_rank[static_cast<std::size_t>(rank)];
    if (gpu < 0 || gpu >= gpus || seen[static_cast<std::size_t>(gpu)]) {
      result.error = "the plan's placement is not a permutation (rank " + std::to_string(rank) + " on GPU " +
                     std::to_string(gpu) + ")";
      return result;
    }
    seen[static_cast<std::size_t>(gpu)] = true;
    // With one task per GPU and block distribution, task id = node × tasks_per_node + local = GPU.
    table.rank_order[static_cast<std::size_t>(rank)] = gpu;
  }

  table.node_of_node_rank = plan.node_order;
  table.node_rank_of_node.assign(static_cast<std::size_t>(num_nodes), -1);
  for (int node_rank = 0; node_rank < num_nodes; ++node_rank) {
    const int node = plan.node_order[static_cast<std::size_t>(node_rank)];
    if (node < 0 || node >= num_nodes || table.node_rank_of_node[static_cast<std::size_t>(node)] != -1) {
      result.error = "the plan's node order is not a permutation (entry " + std::to_string(node_rank) + ")";
      return result;
    }
    table.node_rank_of_node[static_cast<std::size_t>(node)] = node_rank;
  }
  table.master_node = table.launch == Launch::per_gpu ? gpu_of_rank.front() / layout.gpus_per_node
                                                       : plan.node_order.front();
  table.master_port =
      static_cast<std::uint16_t>(base_master_port + (job_id * 31u + step_id) % master_port_span);
  return result;
}

EnvironmentList task_environment(const RankTable& table, const StepLayout& layout, int node_index, int local_task) {
  const int num_nodes = static_cast<int>(layout.node_names.size());
  const std::string node_rank = std::to_string(table.node_rank_of_node[static_cast<std::size_t>(node_index)]);
  const std::string& master_addr = layout.node_names[static_cast<std::size_t>(table.master_node)];
  const std::string master_port = std::to_string(table.master_port);

  if (table.launch == Launch::per_node) {
    // One launcher per node: NODE_RANK follows the plan's node order; the launcher numbers the
    // GPU processes of its node itself (torchrun reads the PET_* variables as its defaults).
    return {
        {"RANK", node_rank},
        {"LOCAL_RANK", "0"},
        {"WORLD_SIZE", std::to_string(num_nodes)},
        {"LOCAL_WORLD_SIZE", "1"},
        {"NODE_RANK", node_rank},
        {"MASTER_ADDR", master_addr},
        {"MASTER_PORT", master_port},
        {"PET_NNODES", std::to_string(num_nodes)},
        {"PET_NPROC_PER_NODE", std::to_string(layout.gpus_per_node)},
        {"PET_NODE_RANK", node_rank},
        {"PET_MASTER_ADDR", master_addr},
        {"PET_MASTER_PORT", master_port},
    };
  }
  // One task per GPU: the task with local id k on node n drives GPU k of node n, and plays the
  // rank the placement put on that GPU.
  const int gpu = node_index * layout.gpus_per_node + local_task;
  int rank = -1;
  for (std::size_t r = 0; r < table.rank_order.size(); ++r) {
    if (table.rank_order[r] == gpu) {
      rank = static_cast<int>(r);
      break;
    }
  }
  return {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_task)},
      {"WORLD_SIZE", std::to_string(table.rank_order.size())},
      {"LOCAL_WORLD_SIZE", std::to_string(layout.gpus_per_node)},
      {"NODE_RANK", node_rank},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", master_port},
  };
}

}  // namespace pipette::spank
