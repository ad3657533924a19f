#pragma once
#include <string>
#include <vector>

#include "pipette/core/result.hpp"
#include "pipette/probe/round_schedule.hpp"

namespace pipette::probe {

// What one task reports about itself before measuring (gathered to every rank).
struct TaskIdentity {
  int rank = 0;
  int node_index = 0;  // SLURM_NODEID
  int local_rank = 0;  // SLURM_LOCALID
  std::string node_name;
  std::string fingerprint;  // the node's hardware fingerprint; only local rank 0's counts
};

// Which node and GPU each rank drives, checked for the shape the probe needs: nodes 0..N−1, the
// same number of tasks g on every node, local ranks 0..g−1 once each, one name per node, names
// distinct across nodes.
struct ProbeLayout {
  std::vector<std::string> node_names;    // by node index
  std::vector<std::string> fingerprints;  // by node index
  int gpus_per_node = 0;
  std::vector<int> rank_of;  // node × gpus_per_node + local → rank
  std::vector<int> node_of_rank;
  std::vector<int> local_of_rank;

  int num_nodes() const { return static_cast<int>(node_names.size()); }
  int rank_at(int node, int local) const { return rank_of[static_cast<size_t>(node * gpus_per_node + local)]; }
};

Result<ProbeLayout> make_layout(const std::vector<TaskIdentity>& tasks);

// The rounds every rank runs, derived identically on every rank. Measurements are numbered by
// slot: first the inter-node rounds, then the intra-node rounds, each × every message size.
// Each rank records, per slot, the median time of its own exchanges (NaN where it had a bye).
struct MeasurementPlan {
  std::vector<double> message_bytes;               // per GPU, ascending
  std::vector<std::vector<Pairing>> inter_rounds;  // over node indices
  std::vector<std::vector<Pairing>> intra_rounds;  // over local GPU indices (empty: --no-intra)
  // A sample of inter_rounds (the first --cross-rail of them) measured again with one flow per
  // node pair: GPU 0 ↔ GPU 0 (one rail), then GPU 0 ↔ GPU g/2 of the other node (another rail).
  std::vector<std::vector<Pairing>> cross_rail_rounds;

  int num_sizes() const { return static_cast<int>(message_bytes.size()); }
  int num_slots() const {
    return static_cast<int>(inter_rounds.size() + intra_rounds.size() + 2 * cross_rail_rounds.size()) * num_sizes();
  }
  int inter_slot(int round, int size_index) const { return round * num_sizes() + size_index; }
  int intra_slot(int round, int size_index) const {
    return (static_cast<int>(inter_rounds.size()) + round) * num_sizes() + size_index;
  }
  int cross_rail_slot(int round, bool crossed, int size_index) const {
    return (static_cast<int>(inter_rounds.size() + intra_rounds.size()) + 2 * round + (crossed ? 1 : 0)) * num_sizes() +
           size_index;
  }
};

// `cross_rail_rounds`: how many inter-node rounds to sample across rails (at most all of them;
// none with one GPU per node).
MeasurementPlan make_measurement_plan(const ProbeLayout& layout, std::vector<double> message_bytes,
                                      bool measure_intra_node, int cross_rail_rounds = 0);

// The local GPU each node of a cross-rail pair uses: GPU 0 on the lower-numbered node; GPU 0
// (aligned) or GPU g/2 (crossed, another rail on DGX/HGX cabling) on the other.
int cross_rail_local(const ProbeLayout& layout, int node, int partner, bool crossed);
// The rank this rank exchanges with in a cross-rail round, or −1 when it sits the slot out.
int cross_rail_peer(const ProbeLayout& layout, const MeasurementPlan& plan, int round, bool crossed, int rank);

// The rank this rank exchanges with in an inter-node round (GPU i of its node with GPU i of the
// partner node), or −1 for a bye.
int inter_node_peer(const ProbeLayout& layout, const MeasurementPlan& plan, int round, int rank);
// The rank this rank exchanges with in an intra-node round (same node), or −1 for a bye.
int intra_node_peer(const ProbeLayout& layout, const MeasurementPlan& plan, int round, int rank);

}  // namespace pipette::probe
