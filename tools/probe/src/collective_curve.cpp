#include "pipette/probe/collective_curve.hpp"

#include <algorithm>
#include <cmath>

namespace pipette::probe {

double CollectivePlan::bytes_per_rank(int subset, Collective collective) const {
  if (collective == Collective::all_reduce) return 4 * std::floor(message_bytes / 4);  // whole fp32 elements
  return std::max(1.0, std::floor(message_bytes / ranks_in(subset)));
}

Result<CollectivePlan> make_collective_plan(const ProbeLayout& layout, double message_bytes) {
  if (layout.num_nodes() < 2)
    return Error{"--collectives needs at least 2 nodes (this step has " + std::to_string(layout.num_nodes()) +
                 "); run it with srun -N 2 or more"};
  if (message_bytes < 4) return Error{"--collective-size must be at least 4 bytes (the all-reduce sums floats)"};
  CollectivePlan plan;
  plan.message_bytes = message_bytes;
  plan.gpus_per_node = layout.gpus_per_node;
  for (int nodes = 2; nodes < layout.num_nodes(); nodes *= 2) plan.node_counts.push_back(nodes);
  plan.node_counts.push_back(layout.num_nodes());
  return plan;
}

bool in_collective_subset(const ProbeLayout& layout, const CollectivePlan& plan, int subset, int rank) {
  return layout.node_of_rank[static_cast<size_t>(rank)] < plan.node_counts[static_cast<size_t>(subset)];
}

double bus_bandwidth_bytes_per_second(Collective collective, double size_bytes, double seconds, int ranks) {
  const double algorithm_bytes_per_second = size_bytes / seconds;
  const double share = static_cast<double>(ranks - 1) / ranks;
  return algorithm_bytes_per_second * (collective == Collective::all_reduce ? 2 * share : share);
}

std::vector<CollectiveMeasurement> assemble_collective_curve(const ProbeLayout& layout, const CollectivePlan& plan,
                                                             std::span<const double> slot_seconds,
                                                             std::int64_t measured_at_unix_seconds,
                                                             const std::string& nccl_version,
                                                             std::vector<std::string>& warnings) {
  std::vector<CollectiveMeasurement> curve;
  const auto slots = static_cast<size_t>(plan.num_slots());
  for (int subset = 0; subset < static_cast<int>(plan.node_counts.size()); ++subset) {
    const int ranks = plan.ranks_in(subset);
    double bus[2] = {0, 0};
    bool complete = true;
    for (const Collective collective : {Collective::all_reduce, Collective::all_gather}) {
      double slowest = 0;
      for (int rank = 0; rank < static_cast<int>(layout.node_of_rank.size()); ++rank) {
        if (!in_collective_subset(layout, plan, subset, rank)) continue;
        const double seconds = slot_seconds[static_cast<size_t>(rank) * slots + static_cast<size_t>(plan.slot(subset, collective))];
        if (!(std::isfinite(seconds) && seconds > 0)) complete = false;
        slowest = std::max(slowest, seconds);
      }
      // The size nccl-tests divides by: the all-reduce's buffer, the all-gather's whole output.
      const double size_bytes = plan.bytes_per_rank(subset, collective) * (collective == Collective::all_gather ? ranks : 1);
      bus[collective == Collective::all_gather ? 1 : 0] = bus_bandwidth_bytes_per_second(collective, size_bytes, slowest, ranks);
    }
    const int nodes = plan.node_counts[static_cast<size_t>(subset)];
    if (!complete) {
      warnings.push_back("collectives over " + std::to_string(nodes) + " nodes not recorded: a rank has no timing");
      continue;
    }
    CollectiveMeasurement entry;
    entry.nodes = nodes;
    entry.measured_at_unix_seconds = measured_at_unix_seconds;
    entry.message_bytes = plan.message_bytes;
    entry.all_reduce_bus_bytes_per_second = bus[0];
    entry.all_gather_bus_bytes_per_second = bus[1];
    entry.nccl_version = nccl_version;
    curve.push_back(std::move(entry));
  }
  return curve;
}

double median_seconds(std::vector<double> seconds) {
  const auto middle = seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2);
  std::nth_element(seconds.begin(), middle, seconds.end());
  return *middle;
}

}  // namespace pipette::probe
