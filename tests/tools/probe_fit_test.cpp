// The α–β fit behind every probe and nccl-tests measurement, on synthetic timings.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "pipette/topology/alpha_beta_fit.hpp"

namespace pipette {
namespace {

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

std::vector<TransferTiming> exact_timings(double alpha_seconds, double beta_bytes_per_second,
                                          const std::vector<double>& sizes) {
  std::vector<TransferTiming> timings;
  for (double bytes : sizes) timings.push_back({bytes, alpha_seconds + bytes / beta_bytes_per_second});
  return timings;
}

TEST(AlphaBetaFit, RecoversExactLatencyAndBandwidth) {
  // 12 µs and 45 GB/s: a 400 Gb/s rail pair as nccl-tests sees it.
  const auto timings = exact_timings(12e-6, 45e9, {64 * kKiB, 1 * kMiB, 16 * kMiB, 128 * kMiB});
  Result<AlphaBetaFit> fit = fit_alpha_beta(timings);
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_NEAR(fit->latency_seconds, 12e-6, 1e-12);
  EXPECT_NEAR(fit->bandwidth_bytes_per_second / 45e9, 1.0, 1e-9);
  EXPECT_LT(fit->max_relative_residual, 1e-9);
  EXPECT_FALSE(fit->latency_clamped);
  ASSERT_EQ(fit->median_points.size(), 4u);
  EXPECT_EQ(fit->median_points.front().message_bytes, 64 * kKiB);
}

TEST(AlphaBetaFit, TwoSizesDetermineTheLineExactly) {
  const auto timings = exact_timings(3e-6, 300e9, {8 * kKiB, 256 * kMiB});
  Result<AlphaBetaFit> fit = fit_alpha_beta(timings);
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_NEAR(fit->latency_seconds, 3e-6, 1e-12);
  EXPECT_NEAR(fit->bandwidth_bytes_per_second / 300e9, 1.0, 1e-9);
}

TEST(AlphaBetaFit, RobustToNoiseAndStragglers) {
  // 20 repetitions per size with 3% log-normal jitter; one repetition in eight is a straggler at 4×
  // (a preempted proxy thread, a congested switch port). Medians per size keep both α and β close.
  const double alpha = 8e-6, beta = 24e9;
  std::mt19937_64 generator(20261201);
  std::normal_distribution<double> jitter(0.0, 0.03);
  std::vector<TransferTiming> timings;
  int repetition = 0;
  for (double bytes : {16 * kKiB, 256 * kKiB, 4 * kMiB, 64 * kMiB, 256 * kMiB}) {
    for (int i = 0; i < 20; ++i, ++repetition) {
      double time = (alpha + bytes / beta) * std::exp(jitter(generator));
      if (repetition % 8 == 3) time *= 4;
      timings.push_back({bytes, time});
    }
  }
  Result<AlphaBetaFit> fit = fit_alpha_beta(timings);
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_NEAR(fit->bandwidth_bytes_per_second / beta, 1.0, 0.03);
  EXPECT_NEAR(fit->latency_seconds / alpha, 1.0, 0.10);
  EXPECT_LT(fit->max_relative_residual, 0.05);
}

TEST(AlphaBetaFit, RelativeWeightingKeepsLatencyFromLargeMessageNoise) {
  // A 1% error on the 1 GiB point is 200 µs, 100× the true α. An unweighted fit would let that
  // swamp α; the relative fit must not.
  auto timings = exact_timings(2e-6, 50e9, {4 * kKiB, 64 * kKiB, 1024 * kMiB});
  timings.back().time_seconds *= 1.01;
  Result<AlphaBetaFit> fit = fit_alpha_beta(timings);
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_NEAR(fit->latency_seconds / 2e-6, 1.0, 0.05);
  EXPECT_NEAR(fit->bandwidth_bytes_per_second / 50e9, 1.0, 0.015);
}

TEST(AlphaBetaFit, NegativeInterceptIsClampedToZeroLatency) {
  // Small messages faster than the line through the large ones predicts: the free fit has α < 0.
  std::vector<TransferTiming> timings = {{1 * kMiB, 10e-6}, {2 * kMiB, 30e-6}, {4 * kMiB, 70e-6}};
  Result<AlphaBetaFit> fit = fit_alpha_beta(timings);
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_TRUE(fit->latency_clamped);
  EXPECT_EQ(fit->latency_seconds, 0.0);
  EXPECT_GT(fit->bandwidth_bytes_per_second, 0.0);
}

TEST(AlphaBetaFit, RejectsInputsThatDetermineNoLine) {
  EXPECT_FALSE(fit_alpha_beta(std::vector<TransferTiming>{}));
  EXPECT_FALSE(fit_alpha_beta(std::vector<TransferTiming>{{1 * kMiB, 1e-4}, {1 * kMiB, 2e-4}}));
  EXPECT_FALSE(fit_alpha_beta(std::vector<TransferTiming>{{1 * kMiB, 1e-4}, {2 * kMiB, NAN}}));
  EXPECT_FALSE(fit_alpha_beta(std::vector<TransferTiming>{{1 * kMiB, 1e-4}, {2 * kMiB, -1e-4}}));
  Result<AlphaBetaFit> shrinking = fit_alpha_beta(std::vector<TransferTiming>{{1 * kMiB, 2e-4}, {64 * kMiB, 1e-4}});
  ASSERT_FALSE(shrinking);
  EXPECT_NE(shrinking.error().message.find("does not grow"), std::string::npos);
}

}  // namespace
}  // namespace pipette
