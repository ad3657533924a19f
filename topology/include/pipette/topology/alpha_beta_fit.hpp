#pragma once
#include <span>
#include <vector>

#include "pipette/core/result.hpp"

namespace pipette {

// One timed transfer: `message_bytes` moved in `time_seconds` (one repetition, or a summary).
struct TransferTiming {
  double message_bytes = 0;
  double time_seconds = 0;
};

// The α–β (latency–bandwidth, Hockney) model of a link: moving n bytes takes α + n / β.
struct AlphaBetaFit {
  double latency_seconds = 0;             // α
  double bandwidth_bytes_per_second = 0;  // β
  // The points the line was fitted to: the median time per distinct message size, sizes ascending.
  std::vector<TransferTiming> median_points;
  // Largest |measured − fitted| / measured over median_points: how well α + n/β describes the link.
  double max_relative_residual = 0;
  bool latency_clamped = false;  // the free fit gave α < 0 (noise at small sizes); α fixed at 0
};

// Fits α and β by least squares to timings of at least two distinct message sizes, any number of
// repetitions each. Robust to stragglers: repetitions of one size are reduced to their median
// first. The fit minimises relative (not absolute) error, so a 4 KiB point weighs as much as a
// 256 MiB one and α is not swamped by the large sizes. An α below zero is clamped to 0 and β refit
// through the origin. Errors: fewer than two distinct sizes, non-finite or non-positive values,
// or times that do not grow with size (no bandwidth can be derived).
Result<AlphaBetaFit> fit_alpha_beta(std::span<const TransferTiming> timings);

}  // namespace pipette
