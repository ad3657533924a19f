#pragma once
#include <string>
#include <vector>

namespace pipette {

struct GpuSpec {
  std::string name;
  double memory_bytes = 0;
  // Dense peak (no sparsity) per precision.
  double peak_fp32_flop_per_second = 0;
  double peak_fp16_flop_per_second = 0;   // also bf16 on every GPU we know
  double peak_bf16_flop_per_second = 0;
  double peak_fp8_flop_per_second = 0;    // 0 where the GPU has no fp8 tensor cores
  double hbm_bytes_per_second = 0;
  // The largest share of the dense 16-bit peak that a tuned bf16 matmul sustains on this GPU (at
  // its power limit the clock drops under dense tensor-core load, on some GPUs more than on
  // others); 0 where it has not been measured.
  double attainable_16bit_matmul_fraction = 0;
};

// One directed link as measured or assumed. Time to move n bytes ≈ latency + n / bandwidth.
struct Link {
  double bandwidth_bytes_per_second = 0;
  double latency_seconds = 0;
  bool measured = false;  // false: a prior from the site file or the hardware table
};

// Square matrix of links, row = source, column = destination. The diagonal is unused.
class LinkMatrix {
 public:
  LinkMatrix() = default;
  LinkMatrix(int size, const Link& fill) : size_(size), links_(static_cast<size_t>(size) * size, fill) {}
  int size() const { return size_; }
  const Link& at(int from, int to) const { return links_[static_cast<size_t>(from) * size_ + to]; }
  Link& at(int from, int to) { return links_[static_cast<size_t>(from) * size_ + to]; }

 private:
  int size_ = 0;
  std::vector<Link> links_;
};

// Which rail each GPU's inter-node traffic uses and what a flow between different rails costs
// (issue 18). On a rail-optimized fat tree (NVIDIA DGX SuperPOD reference architecture, DGX H100,
// "Network Fabrics": "Traffic per rail of the DGX H100 systems is always one hop away from the
// other 31 nodes in a SU. Traffic between nodes, or between rails, traverses the spine layer")
// local GPU i's NIC sits on leaf i of its scalable unit, so a flow from rail i to rail j on another
// node goes leaf → spine → leaf. NCCL's send/recv avoids that where it can: with PXN (on by
// default: NCCL_PXN_DISABLE=0, NCCL_P2P_PXN_LEVEL=2 "use PXN as much as possible", src/graph/
// search.cc and paths.cc) the sender moves the data over NVLink to the GPU of its own node that
// sits on the receiver's rail, which sends it rail-aligned; the NVLink hop takes bandwidth the
// node's TP collectives use. Ring collectives keep their own GPU's NIC (NCCL_CROSS_NIC=2 pairs
// NICs only where the ring's GPUs allow), so a ring hop between different rails crosses the spine.
struct RailFabric {
  // rail_of_local_gpu[i]: the NIC (rail) nearest local GPU i, from hwloc. Empty: GPU i uses rail
  // i · rails / gpus_per_node (DGX/HGX cabling: 8 GPUs, 8 NICs, GPU i on NIC i).
  std::vector<int> rail_of_local_gpu;
  // NICs one GPU spreads its channels over where a node has more NICs than GPUs (NCCL's
  // netsPerGpu: the NICs nearest the GPU over the GPUs nearest them, rounded up; src/graph/topo.cc
  // @5067397c l.2039-2075 ncclTopoGetLocalNetType; send/recv opens at least one channel per such
  // NIC, src/graph/paths.cc l.942-950). From hwloc where it saw the job's NICs; 0: the
  // node's NICs over its GPUs, rounded up, at least 1 (NICs spread evenly over the GPUs, as an AWS
  // p5's 32 EFA NICs over its 8 H100s, 4 each).
  int nics_per_gpu = 0;
  // A flow between different rails through the spine: its bandwidth relative to a rail-aligned
  // flow over the same node pair, and the latency the two extra switch hops add. A fraction of 0
  // means there is no spine path (a rail-only fabric: every cross-rail flow takes PXN).
  double spine_bandwidth_fraction = 1.0;
  double spine_extra_latency_seconds = 0;
  bool pxn = true;        // NCCL's send/recv forwards cross-rail flows over NVLink (its default)
  bool measured = false;  // spine figures from pipette-probe's cross-rail pairs, not a prior
};

// The kind of network between nodes (site file priors.network). It decides how the attained
// bandwidth of a collective falls with the number of nodes it spans (collective_scaling_of).
enum class NetworkKind { infiniband, roce, efa };

const char* to_string(NetworkKind kind);

// How a collective over n nodes attains less than its node pairs show: contention. A ring over n
// nodes loads the fabric with n hops per rail at once and every ring step waits for its slowest hop
// at that moment. A pair measurement (or a prior, which stands for the median pair) reports a
// pair's typical rate, not the slowest of n fluctuating hops, and not the load of a whole many-node
// collective on shared spine tiers. The fall is a property of the fabric, so it is data per
// NetworkKind: inter-node bandwidth of a collective over n ≥ 2 nodes = its slowest pair's ×
// (2/n)^contention_exponent (every doubling beyond a pair keeps 2^−exponent of the bandwidth), on
// top of measured and assumed pairs alike. The default is InfiniBand's: none.
// collective_scaling_of (cluster.cpp) gives each kind's figures and their sources.
//
// Where pipette-probe --collectives measured the fall (link cache `collectives:`), the measured
// points replace the prior's power law: `measured` holds them and contention_exponent is the
// power law fitted to them, used only beyond the largest measured count
// (measured_collective_scaling).
struct MeasuredCollectiveFactor {
  int nodes = 0;                 // > 2
  double bandwidth_factor = 0;   // bus bandwidth over `nodes` nodes / that over 2 nodes, in (0, 1]
};

struct CollectiveScaling {
  double contention_exponent = 0;
  std::vector<MeasuredCollectiveFactor> measured;  // ascending nodes; empty: the prior alone
  // The contention factor for a collective whose ring crosses `nodes` nodes (1 below 3 nodes).
  double bandwidth_factor(int nodes) const;
};

CollectiveScaling collective_scaling_of(NetworkKind kind);

// The scaling a measured curve gives: `falls` are the bus bandwidths over n > 2 nodes relative to
// the 2-node point (any order; one per node count). See cluster.cpp for the interpolation and the
// extrapolation.
CollectiveScaling measured_collective_scaling(std::vector<MeasuredCollectiveFactor> falls);

// The GPUs a job was given. Nodes are in Slurm's order (the order of the job's node list);
// that order is the "default placement". Inter-node links are node-pair aggregates with all
// rails (NICs) in use at once, as pipette-probe measures them.
struct Cluster {
  std::vector<std::string> node_names;
  int gpus_per_node = 0;
  int nics_per_node = 1;                    // rails (NICs); sender_share_of_node_pair says how GPUs use them
  GpuSpec gpu;
  std::vector<LinkMatrix> intra_node;       // per node, gpus_per_node × gpus_per_node
  LinkMatrix inter_node;                    // nodes × nodes, rail-aligned flows (GPU i ↔ GPU i)
  RailFabric rails;
  CollectiveScaling collective_scaling;     // how collectives over many nodes fall (NetworkKind)
  // Every pair of a node's GPUs has NVLinks of its own, no NVSwitch between them (4-GPU SXM
  // boards). NCCL then spreads a ring's channels over every link among its GPUs, so intra_node's
  // pair figures are each one link, not the GPU's whole bandwidth as behind NVSwitches
  // (communication.cpp says how rings and all-to-alls use them).
  bool intra_node_full_mesh = false;
  // An all-reduce among GPUs of one node runs this many times faster than a ring over intra_node's
  // links where the stack lets NCCL use NVLink SHARP (StageWork::nvls_all_reduce): the board's
  // BoardFabric::nvls_all_reduce_speedup behind NVSwitches that reduce in the switch, else 1.
  // intra_node holds what a ring (or a pair measurement) attains, which all-gathers and
  // reduce-scatters keep.
  double nvls_all_reduce_speedup = 1;
  // Where intra_node's unmeasured pairs came from (the site's figure, hwloc, the GPU catalog), one
  // sentence for reports; planning reads only the links.
  std::string intra_node_prior_source;

  // The rail local GPU `local_gpu` sends on.
  int rail_of(int local_gpu) const {
    if (!rails.rail_of_local_gpu.empty()) return rails.rail_of_local_gpu[static_cast<size_t>(local_gpu)];
    return gpus_per_node > 0 ? local_gpu * nics_per_node / gpus_per_node : 0;
  }

  // The NICs one sending GPU drives (RailFabric::nics_per_gpu, or its default).
  int nics_per_sending_gpu() const;
  // The share of a node pair's bandwidth (inter_node, all rails at once) each of `senders` GPUs
  // sending out of a node at the same time gets: each drives nics_per_sending_gpu() NICs, and
  // together they share the node's nics_per_node. One NIC's share per GPU on a DGX (8 GPUs, 8
  // NICs), four on an AWS p5 (8 GPUs, 32 NICs): the same node pair, the same per-GPU bandwidth.
  double sender_share_of_node_pair(int senders) const;

  int num_nodes() const { return static_cast<int>(node_names.size()); }
  int num_gpus() const { return num_nodes() * gpus_per_node; }
};

std::string validate(const Cluster& cluster);

}  // namespace pipette
