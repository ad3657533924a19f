// The probe's round schedule: the circle method must cover every node pair exactly once with no
// node in two pairs of one round, for any node count (odd counts give each node one bye).
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "pipette/probe/round_schedule.hpp"

namespace pipette::probe {
namespace {

TEST(CircleSchedule, EveryPairExactlyOnceAndNoNodeTwiceInARound) {
  for (int n = 2; n <= 64; ++n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto rounds = circle_schedule(n);
    EXPECT_EQ(static_cast<int>(rounds.size()), n % 2 == 0 ? n - 1 : n);
    std::set<std::pair<int, int>> met;
    int pairs_seen = 0;
    for (const auto& round : rounds) {
      std::vector<int> busy(static_cast<size_t>(n), 0);
      EXPECT_EQ(static_cast<int>(round.size()), n / 2);  // as many pairs as the round can hold
      for (const Pairing& pair : round) {
        ASSERT_GE(pair.first, 0);
        ASSERT_LT(pair.first, pair.second);
        ASSERT_LT(pair.second, n);
        EXPECT_EQ(++busy[static_cast<size_t>(pair.first)], 1);
        EXPECT_EQ(++busy[static_cast<size_t>(pair.second)], 1);
        EXPECT_TRUE(met.insert({pair.first, pair.second}).second) << pair.first << "-" << pair.second << " twice";
        ++pairs_seen;
      }
    }
    EXPECT_EQ(pairs_seen, n * (n - 1) / 2);
    EXPECT_EQ(static_cast<int>(met.size()), n * (n - 1) / 2);
  }
}

TEST(CircleSchedule, OddCountsGiveEachNodeExactlyOneBye) {
  for (int n = 3; n <= 63; n += 2) {
    const auto rounds = circle_schedule(n);
    std::vector<int> byes(static_cast<size_t>(n), 0);
    for (const auto& round : rounds) {
      for (int node = 0; node < n; ++node) {
        if (partner_in(round, node) < 0) ++byes[static_cast<size_t>(node)];
      }
    }
    for (int node = 0; node < n; ++node) EXPECT_EQ(byes[static_cast<size_t>(node)], 1) << "n=" << n << " node " << node;
  }
}

TEST(CircleSchedule, PartnerIsSymmetric) {
  const auto rounds = circle_schedule(7);
  for (const auto& round : rounds) {
    for (int node = 0; node < 7; ++node) {
      const int partner = partner_in(round, node);
      if (partner >= 0) {
        EXPECT_EQ(partner_in(round, partner), node);
      }
    }
  }
}

TEST(CircleSchedule, FewerThanTwoParticipantsHaveNoRounds) {
  EXPECT_TRUE(circle_schedule(0).empty());
  EXPECT_TRUE(circle_schedule(1).empty());
  const auto two = circle_schedule(2);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0], (std::vector<Pairing>{{0, 1}}));
}

}  // namespace
}  // namespace pipette::probe
