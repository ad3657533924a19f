#pragma once
#include <vector>

namespace pipette::probe {

// Two participants (nodes, or GPUs inside one node) that measure their link in the same round.
// first < second.
struct Pairing {
  int first = 0;
  int second = 0;
  friend bool operator==(const Pairing&, const Pairing&) = default;
};

// Round-robin schedule by the circle method: every unordered pair of `participants` meets exactly
// once and each participant is in at most one pair per round, so all pairs of a round can measure
// at the same time without sharing an endpoint. An even count takes participants − 1 rounds; an odd
// count is padded with a phantom, whose partner sits the round out (a bye), and takes participants
// rounds. Fewer than two participants: no rounds. Deterministic: every rank of the probe computes
// the same schedule on its own, so the schedule never travels over the network.
std::vector<std::vector<Pairing>> circle_schedule(int participants);

// The partner of `participant` in `round`, or −1 when it has a bye.
int partner_in(const std::vector<Pairing>& round, int participant);

}  // namespace pipette::probe
