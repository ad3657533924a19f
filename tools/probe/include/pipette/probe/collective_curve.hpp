#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pipette/core/result.hpp"
#include "pipette/probe/measurement_plan.hpp"
#include "pipette/topology/link_cache.hpp"

namespace pipette::probe {

// pipette-probe --collectives: how the attained bandwidth of a collective falls with the number of
// nodes it spans (the link cache's `collectives:` curve, which planning uses instead of the
// site's priors.network; CollectiveScaling in core/include/pipette/core/cluster.hpp).

enum class Collective { all_reduce, all_gather };

// The subsets measured: the first 2, 4, 8, … nodes of the allocation (Slurm's node order, the
// order the plan places ranks in) and all N of them. Each run is one all-reduce and one
// all-gather of `message_bytes` per GPU (nccl-tests' size: the all-reduce's buffer, the
// all-gather's output, so each GPU contributes message_bytes / ranks) by every GPU of the subset.
// Slots: subset × 2 + (0 all-reduce, 1 all-gather); each rank records its median time per slot,
// NaN where it is outside the subset.
struct CollectivePlan {
  std::vector<int> node_counts;  // ascending
  double message_bytes = 0;
  int gpus_per_node = 0;

  int num_slots() const { return 2 * static_cast<int>(node_counts.size()); }
  int slot(int subset, Collective collective) const { return 2 * subset + (collective == Collective::all_gather ? 1 : 0); }
  int ranks_in(int subset) const { return node_counts[static_cast<size_t>(subset)] * gpus_per_node; }
  // The bytes of one collective call per GPU: the all-reduce's buffer (whole 4-byte floats), the
  // all-gather's share (message_bytes / ranks, rounded down; at least 1). Bus bandwidth is
  // computed from these, so the rounding never inflates it.
  double bytes_per_rank(int subset, Collective collective) const;
};

// Errors (one line) when the allocation has fewer than 2 nodes or message_bytes is below 4 (the
// all-reduce runs on 4-byte floats).
Result<CollectivePlan> make_collective_plan(const ProbeLayout& layout, double message_bytes);

// Whether `rank` takes part in subset `subset`: its node is among the first node_counts[subset].
bool in_collective_subset(const ProbeLayout& layout, const CollectivePlan& plan, int subset, int rank);

// Bus bandwidth as nccl-tests defines it (NVIDIA/nccl-tests doc/PERFORMANCE.md, "Bus bandwidth"):
// algbw = S / t with S the collective's size (the all-reduce's buffer, the all-gather's whole
// output); busbw = algbw · 2(n−1)/n for all-reduce and algbw · (n−1)/n for all-gather, n ranks,
// so that it compares with the hardware's link rate whatever n is.
double bus_bandwidth_bytes_per_second(Collective collective, double size_bytes, double seconds, int ranks);

// The curve's entries from the gathered medians (slot_seconds[rank × plan.num_slots() + slot]):
// a subset's time is its slowest rank's median (the collective is done when every rank is). A
// subset whose ranks left a slot empty or non-positive is reported in `warnings` and left out.
std::vector<CollectiveMeasurement> assemble_collective_curve(const ProbeLayout& layout, const CollectivePlan& plan,
                                                             std::span<const double> slot_seconds,
                                                             std::int64_t measured_at_unix_seconds,
                                                             const std::string& nccl_version,
                                                             std::vector<std::string>& warnings);

// The median of timed iterations (the upper one of the middle two for an even count).
double median_seconds(std::vector<double> seconds);

}  // namespace pipette::probe
