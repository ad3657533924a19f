#include "pipette/probe/measurement_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace pipette::probe {

Result<ProbeLayout> make_layout(const std::vector<TaskIdentity>& tasks) {
  if (tasks.empty()) return Error{"no tasks"};
  int num_nodes = 0;
  for (const TaskIdentity& task : tasks) num_nodes = std::max(num_nodes, task.node_index + 1);
  std::vector<std::vector<const TaskIdentity*>> by_node(static_cast<size_t>(num_nodes));
  for (const TaskIdentity& task : tasks) {
    if (task.node_index < 0 || task.local_rank < 0) {
      return Error{"rank " + std::to_string(task.rank) + " reports a negative node or local index"};
    }
    by_node[static_cast<size_t>(task.node_index)].push_back(&task);
  }
  ProbeLayout layout;
  layout.gpus_per_node = static_cast<int>(by_node[0].size());
  layout.rank_of.assign(static_cast<size_t>(num_nodes * layout.gpus_per_node), -1);
  layout.node_of_rank.assign(tasks.size(), -1);
  layout.local_of_rank.assign(tasks.size(), -1);
  std::set<std::string> seen_names;
  for (int node = 0; node < num_nodes; ++node) {
    const auto& members = by_node[static_cast<size_t>(node)];
    if (members.empty()) {
      return Error{"node index " + std::to_string(node) + " has no task: every node of the step needs --ntasks-per-node tasks"};
    }
    if (static_cast<int>(members.size()) != layout.gpus_per_node) {
      return Error{"node " + members[0]->node_name + " has " + std::to_string(members.size()) +
                   " tasks but node " + by_node[0][0]->node_name + " has " + std::to_string(layout.gpus_per_node) +
                   ": run with --ntasks-per-node=<GPUs per node> on identical nodes"};
    }
    const std::string& name = members[0]->node_name;
    if (!seen_names.insert(name).second) return Error{"two node indices report the same node name " + name};
    layout.node_names.push_back(name);
    layout.fingerprints.emplace_back();
    for (const TaskIdentity* task : members) {
      if (task->node_name != name) {
        return Error{"node index " + std::to_string(node) + " is called both " + name + " and " + task->node_name};
      }
      if (task->local_rank >= layout.gpus_per_node) {
        return Error{"rank " + std::to_string(task->rank) + " on " + name + " has local rank " +
                     std::to_string(task->local_rank) + ", not below the " + std::to_string(layout.gpus_per_node) +
                     " tasks of its node"};
      }
      int& slot = layout.rank_of[static_cast<size_t>(node * layout.gpus_per_node + task->local_rank)];
      if (slot != -1) {
        return Error{"ranks " + std::to_string(slot) + " and " + std::to_string(task->rank) + " on " + name +
                     " both have local rank " + std::to_string(task->local_rank)};
      }
      if (task->rank < 0 || task->rank >= static_cast<int>(tasks.size())) {
        return Error{"rank " + std::to_string(task->rank) + " is outside 0.." + std::to_string(tasks.size() - 1)};
      }
      if (layout.node_of_rank[static_cast<size_t>(task->rank)] != -1) {
        return Error{"rank " + std::to_string(task->rank) + " is reported twice"};
      }
      slot = task->rank;
      if (task->local_rank == 0) layout.fingerprints.back() = task->fingerprint;
      layout.node_of_rank[static_cast<size_t>(task->rank)] = node;
      layout.local_of_rank[static_cast<size_t>(task->rank)] = task->local_rank;
    }
  }
  return layout;
}

MeasurementPlan make_measurement_plan(const ProbeLayout& layout, std::vector<double> message_bytes,
                                      bool measure_intra_node, int cross_rail_rounds) {
  MeasurementPlan plan;
  std::sort(message_bytes.begin(), message_bytes.end());
  plan.message_bytes = std::move(message_bytes);
  plan.inter_rounds = circle_schedule(layout.num_nodes());
  if (measure_intra_node) plan.intra_rounds = circle_schedule(layout.gpus_per_node);
  if (layout.gpus_per_node >= 2) {
    const auto sampled = std::min(plan.inter_rounds.size(), static_cast<size_t>(std::max(0, cross_rail_rounds)));
    plan.cross_rail_rounds.assign(plan.inter_rounds.begin(), plan.inter_rounds.begin() + static_cast<std::ptrdiff_t>(sampled));
  }
  return plan;
}

int cross_rail_local(const ProbeLayout& layout, int node, int partner, bool crossed) {
  return node < partner || !crossed ? 0 : layout.gpus_per_node / 2;
}

int cross_rail_peer(const ProbeLayout& layout, const MeasurementPlan& plan, int round, bool crossed, int rank) {
  const int node = layout.node_of_rank[static_cast<size_t>(rank)];
  const int partner = partner_in(plan.cross_rail_rounds[static_cast<size_t>(round)], node);
  if (partner < 0 || layout.local_of_rank[static_cast<size_t>(rank)] != cross_rail_local(layout, node, partner, crossed))
    return -1;
  return layout.rank_at(partner, cross_rail_local(layout, partner, node, crossed));
}

int inter_node_peer(const ProbeLayout& layout, const MeasurementPlan& plan, int round, int rank) {
  const int node = layout.node_of_rank[static_cast<size_t>(rank)];
  const int partner = partner_in(plan.inter_rounds[static_cast<size_t>(round)], node);
  return partner < 0 ? -1 : layout.rank_at(partner, layout.local_of_rank[static_cast<size_t>(rank)]);
}

int intra_node_peer(const ProbeLayout& layout, const MeasurementPlan& plan, int round, int rank) {
  const int local = layout.local_of_rank[static_cast<size_t>(rank)];
  const int partner = partner_in(plan.intra_rounds[static_cast<size_t>(round)], local);
  return partner < 0 ? -1 : layout.rank_at(layout.node_of_rank[static_cast<size_t>(rank)], partner);
}

}  // namespace pipette::probe
