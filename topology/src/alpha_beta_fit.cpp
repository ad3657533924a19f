#include "pipette/topology/alpha_beta_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace pipette {
namespace {

double median_of(std::vector<double> values) {
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
  return 0.5 * (lower + upper);
}

}  // namespace

Result<AlphaBetaFit> fit_alpha_beta(std::span<const TransferTiming> timings) {
  std::map<double, std::vector<double>> times_by_size;
  for (const TransferTiming& timing : timings) {
    if (!std::isfinite(timing.message_bytes) || !std::isfinite(timing.time_seconds) ||
        timing.message_bytes <= 0 || timing.time_seconds <= 0) {
      return Error{"alpha-beta fit: timing (" + std::to_string(timing.message_bytes) + " bytes, " +
                   std::to_string(timing.time_seconds) + " s) is not a positive finite number"};
    }
    times_by_size[timing.message_bytes].push_back(timing.time_seconds);
  }
  if (times_by_size.size() < 2) {
    return Error{"alpha-beta fit: needs timings at two or more distinct message sizes, got " +
                 std::to_string(times_by_size.size())};
  }

  AlphaBetaFit fit;
  for (auto& [bytes, times] : times_by_size) fit.median_points.push_back({bytes, median_of(times)});

  // Weighted least squares of t = α + n·γ (γ = 1/β) with weights 1/t², i.e. relative residuals.
  double sum_w = 0, sum_wn = 0, sum_wnn = 0, sum_wt = 0, sum_wnt = 0;
  for (const TransferTiming& point : fit.median_points) {
    const double weight = 1.0 / (point.time_seconds * point.time_seconds);
    sum_w += weight;
    sum_wn += weight * point.message_bytes;
    sum_wnn += weight * point.message_bytes * point.message_bytes;
    sum_wt += weight * point.time_seconds;
    sum_wnt += weight * point.message_bytes * point.time_seconds;
  }
  const double determinant = sum_w * sum_wnn - sum_wn * sum_wn;
  double alpha = (sum_wnn * sum_wt - sum_wn * sum_wnt) / determinant;
  double gamma = (sum_w * sum_wnt - sum_wn * sum_wt) / determinant;
  if (alpha < 0) {
    alpha = 0;
    gamma = sum_wnt / sum_wnn;
    fit.latency_clamped = true;
  }
  if (!(gamma > 0) || !std::isfinite(gamma)) {
    return Error{"alpha-beta fit: time does not grow with message size (" +
                 std::to_string(fit.median_points.front().time_seconds * 1e6) + " us at " +
                 std::to_string(fit.median_points.front().message_bytes) + " B, " +
                 std::to_string(fit.median_points.back().time_seconds * 1e6) + " us at " +
                 std::to_string(fit.median_points.back().message_bytes) +
                 " B); measure larger messages"};
  }
  fit.latency_seconds = alpha;
  fit.bandwidth_bytes_per_second = 1.0 / gamma;
  for (const TransferTiming& point : fit.median_points) {
    const double predicted = alpha + point.message_bytes * gamma;
    fit.max_relative_residual = std::max(fit.max_relative_residual,
                                         std::abs(point.time_seconds - predicted) / point.time_seconds);
  }
  return fit;
}

}  // namespace pipette
