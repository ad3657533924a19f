#include "pipette/probe/round_schedule.hpp"

#include <algorithm>

namespace pipette::probe {

std::vector<std::vector<Pairing>> circle_schedule(int participants) {
  std::vector<std::vector<Pairing>> rounds;
  if (participants < 2) return rounds;
  // Pad to an even count; the phantom (index `participants` when odd) marks a bye.
  const int padded = participants + (participants % 2);
  const int rotating = padded - 1;  // participant padded−1 stays fixed in the centre of the circle
  rounds.reserve(static_cast<size_t>(rotating));
  for (int round = 0; round < rotating; ++round) {
    std::vector<Pairing> pairs;
    pairs.reserve(static_cast<size_t>(padded / 2));
    auto add = [&](int a, int b) {
      if (a >= participants || b >= participants) return;  // the phantom's partner has a bye
      pairs.push_back({std::min(a, b), std::max(a, b)});
    };
    add(round, padded - 1);
    for (int step = 1; step < padded / 2; ++step) {
      add((round + step) % rotating, (round - step + rotating) % rotating);
    }
    rounds.push_back(std::move(pairs));
  }
  return rounds;
}

int partner_in(const std::vector<Pairing>& round, int participant) {
  for (const Pairing& pair : round) {
    if (pair.first == participant) return pair.second;
    if (pair.second == participant) return pair.first;
  }
  return -1;
}

}  // namespace pipette::probe
