#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pipette/probe/measurement_plan.hpp"
#include "pipette/topology/link_cache.hpp"

namespace pipette::probe {

// The cache entries one probe run produced, and what could not be turned into one.
struct ProbeOutcome {
  LinkCache cache;
  std::vector<std::string> warnings;  // one line each: a pair or node whose timings gave no fit
};

// Turns the gathered timings into link-cache entries.
// `slot_seconds` is rank-major: slot_seconds[rank × plan.num_slots() + slot] is the median time one
// exchange of that rank took in that slot (NaN where the rank had a bye).
//
// A node pair's time at a size is the slowest of its 2·g GPUs, since the pair is done when every
// rail is; its message is g × size bytes (all rails at once), so the fitted bandwidth is the
// node pair's aggregate, as Cluster::inter_node expects. Each exchange sends and receives at once,
// so the figure is the per-direction bandwidth under full-duplex load. Inside a node, the pair
// (i, j) takes the slower of its two GPUs and fills both directions of the matrix.
// Nodes get an entry (time, NCCL version, fingerprint, matrix) only with a complete intra-node
// matrix: the cache keeps the newer entry per node, so an entry without one (--no-intra, one GPU
// per node) would replace a measured matrix with nothing.
ProbeOutcome assemble_link_cache(const ProbeLayout& layout, const MeasurementPlan& plan,
                                 std::span<const double> slot_seconds, std::int64_t measured_at_unix_seconds,
                                 const std::string& nccl_version);

}  // namespace pipette::probe
