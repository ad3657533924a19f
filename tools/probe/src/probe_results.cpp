#include "pipette/probe/probe_results.hpp"

#include <algorithm>
#include <cmath>

#include "pipette/topology/alpha_beta_fit.hpp"

namespace pipette::probe {
namespace {

// The slowest of the given ranks' times in one slot, or NaN when any of them has none.
double slowest(std::span<const double> slot_seconds, int num_slots, int slot, std::span<const int> ranks) {
  double worst = 0;
  for (int rank : ranks) {
    const double seconds = slot_seconds[static_cast<size_t>(rank) * static_cast<size_t>(num_slots) + static_cast<size_t>(slot)];
    if (!std::isfinite(seconds)) return std::nan("");
    worst = std::max(worst, seconds);
  }
  return worst;
}

}  // namespace

ProbeOutcome assemble_link_cache(const ProbeLayout& layout, const MeasurementPlan& plan,
                                 std::span<const double> slot_seconds, std::int64_t measured_at_unix_seconds,
                                 const std::string& nccl_version) {
  ProbeOutcome outcome;
  const int g = layout.gpus_per_node;
  const int num_slots = plan.num_slots();

  for (int round = 0; round < static_cast<int>(plan.inter_rounds.size()); ++round) {
    for (const Pairing& pair : plan.inter_rounds[static_cast<size_t>(round)]) {
      std::vector<int> ranks;
      for (int node : {pair.first, pair.second}) {
        for (int local = 0; local < g; ++local) ranks.push_back(layout.rank_at(node, local));
      }
      const std::string& name_a = layout.node_names[static_cast<size_t>(pair.first)];
      const std::string& name_b = layout.node_names[static_cast<size_t>(pair.second)];
      std::vector<TransferTiming> timings;
      for (int size = 0; size < plan.num_sizes(); ++size) {
        const double seconds = slowest(slot_seconds, num_slots, plan.inter_slot(round, size), ranks);
        if (std::isfinite(seconds)) timings.push_back({plan.message_bytes[static_cast<size_t>(size)] * g, seconds});
      }
      Result<AlphaBetaFit> fit = fit_alpha_beta(timings);
      if (!fit) {
        outcome.warnings.push_back("pair " + name_a + " " + name_b + " not recorded: " + fit.error().message);
        continue;
      }
      PairMeasurement measurement;
      measurement.node_a = std::min(name_a, name_b);
      measurement.node_b = std::max(name_a, name_b);
      measurement.measured_at_unix_seconds = measured_at_unix_seconds;
      measurement.nccl_version = nccl_version;
      measurement.bandwidth_bytes_per_second = fit->bandwidth_bytes_per_second;
      measurement.latency_seconds = fit->latency_seconds;
      for (const TransferTiming& point : fit->median_points) {
        measurement.points.push_back({point.message_bytes, point.time_seconds});
      }
      outcome.cache.pairs.push_back(std::move(measurement));
    }
  }

  // The cross-rail sample: one flow on one rail and one across rails, each fitted on its own,
  // recorded on the node pair's entry (a pair whose aggregate fit failed has none to carry it).
  for (int round = 0; round < static_cast<int>(plan.cross_rail_rounds.size()); ++round) {
    for (const Pairing& pair : plan.cross_rail_rounds[static_cast<size_t>(round)]) {
      const std::string& name_a = layout.node_names[static_cast<size_t>(pair.first)];
      const std::string& name_b = layout.node_names[static_cast<size_t>(pair.second)];
      Result<AlphaBetaFit> fits[2] = {Error{""}, Error{""}};
      for (const bool crossed : {false, true}) {
        const int ranks[] = {layout.rank_at(pair.first, cross_rail_local(layout, pair.first, pair.second, crossed)),
                             layout.rank_at(pair.second, cross_rail_local(layout, pair.second, pair.first, crossed))};
        std::vector<TransferTiming> timings;
        for (int size = 0; size < plan.num_sizes(); ++size) {
          const double seconds = slowest(slot_seconds, num_slots, plan.cross_rail_slot(round, crossed, size), ranks);
          if (std::isfinite(seconds)) timings.push_back({plan.message_bytes[static_cast<size_t>(size)], seconds});
        }
        fits[crossed ? 1 : 0] = fit_alpha_beta(timings);
      }
      const auto entry = std::find_if(outcome.cache.pairs.begin(), outcome.cache.pairs.end(), [&](const PairMeasurement& p) {
        return p.node_a == std::min(name_a, name_b) && p.node_b == std::max(name_a, name_b);
      });
      if (!fits[0] || !fits[1] || entry == outcome.cache.pairs.end()) {
        const std::string why = !fits[0] ? fits[0].error().message : !fits[1] ? fits[1].error().message : "no aggregate fit to attach it to";
        outcome.warnings.push_back("pair " + name_a + " " + name_b + ": cross-rail sample not recorded: " + why);
        continue;
      }
      entry->rail_bandwidth_bytes_per_second = fits[0]->bandwidth_bytes_per_second;
      entry->rail_latency_seconds = fits[0]->latency_seconds;
      entry->cross_rail_bandwidth_bytes_per_second = fits[1]->bandwidth_bytes_per_second;
      entry->cross_rail_latency_seconds = fits[1]->latency_seconds;
    }
  }

  if (plan.intra_rounds.empty()) return outcome;
  for (int node = 0; node < layout.num_nodes(); ++node) {
    NodeMeasurement measurement;
    measurement.name = layout.node_names[static_cast<size_t>(node)];
    measurement.measured_at_unix_seconds = measured_at_unix_seconds;
    measurement.nccl_version = nccl_version;
    measurement.fingerprint = layout.fingerprints[static_cast<size_t>(node)];
    measurement.gpus = g;
    measurement.bandwidth_bytes_per_second.assign(static_cast<size_t>(g * g), 0.0);
    measurement.latency_seconds.assign(static_cast<size_t>(g * g), 0.0);
    bool complete = true;
    for (int round = 0; round < static_cast<int>(plan.intra_rounds.size()) && complete; ++round) {
      for (const Pairing& pair : plan.intra_rounds[static_cast<size_t>(round)]) {
        const int ranks[] = {layout.rank_at(node, pair.first), layout.rank_at(node, pair.second)};
        std::vector<TransferTiming> timings;
        for (int size = 0; size < plan.num_sizes(); ++size) {
          const double seconds = slowest(slot_seconds, num_slots, plan.intra_slot(round, size), ranks);
          if (std::isfinite(seconds)) timings.push_back({plan.message_bytes[static_cast<size_t>(size)], seconds});
        }
        Result<AlphaBetaFit> fit = fit_alpha_beta(timings);
        if (!fit) {
          outcome.warnings.push_back("node " + measurement.name + " not recorded: GPUs " + std::to_string(pair.first) +
                                     "-" + std::to_string(pair.second) + ": " + fit.error().message);
          complete = false;
          break;
        }
        for (auto [from, to] : {std::pair{pair.first, pair.second}, std::pair{pair.second, pair.first}}) {
          measurement.bandwidth_bytes_per_second[static_cast<size_t>(from * g + to)] = fit->bandwidth_bytes_per_second;
          measurement.latency_seconds[static_cast<size_t>(from * g + to)] = fit->latency_seconds;
        }
      }
    }
    if (complete) outcome.cache.nodes.push_back(std::move(measurement));
  }
  return outcome;
}

}  // namespace pipette::probe
