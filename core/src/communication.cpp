// The network half of the performance model: α–β costs of point-to-point messages and ring
// collectives on the measured per-link bandwidths and latencies of one cluster.
//
// Mechanisms modelled, and why:
//  - Inter-node links are node-pair aggregates over all rails (pipette-probe measures them with
//    every rail busy). A flow from one GPU uses that GPU's NICs, one on a DGX and four on an AWS
//    p5 (NCCL spreads its channels over them), and k concurrent flows share the node's NICs
//    (Cluster::sender_share_of_node_pair): one flow cannot use more than its own GPU's NICs, many
//    flows cannot use more than all of them.
//  - NCCL's ring all-reduce costs 2(n−1)/n · bytes / bandwidth + 2(n−1) · α. A ring runs at its
//    slowest link and pays its slowest step's latency on every step.
//  - Across nodes NCCL's ring is one flat ring through every member, nodes consecutive, built as
//    sub-rings (channels), one per local GPU, each leaving a node through its own rail. It is
//    pipelined: NVLink and the NICs carry their shares at once and the slower paces the ring
//    (flat_ring_cost). The node ring runs at its slowest node pair, so a ring over more nodes sees
//    a worse bottleneck and more latency steps: one source of the fall of bus bandwidth with node
//    count in ground_truth_data/ultrascale_collective_bandwidth_vs_nodes.csv, which a model with
//    one nominal inter-node bandwidth cannot reproduce.
//  - Pairs, measured or assumed, do not show what a collective over many nodes meets on a shared
//    fabric (contention across its tiers, the slowest of many fluctuating hops at every step). How
//    much that costs depends on the fabric (flat on NVIDIA's InfiniBand, steep on AWS EFA), so it
//    is data in the cluster (CollectiveScaling, cluster.hpp) applied to every ring across nodes:
//    DP reductions, TP and expert-TP groups that cross nodes. Pipeline messages are node-pair
//    transfers and keep their pairs' figures.
//  - Node-pair links are rail-aligned figures (GPU i ↔ GPU i). A flow between GPUs on different
//    rails (Cluster::rail_of) takes one of two paths (RailFabric in cluster.hpp says why):
//    through the spine, at the spine's share of the aligned bandwidth plus its extra latency; or
//    PXN, rail-aligned after an NVLink hop to the sender's GPU on the receiver's rail. PXN is
//    NCCL's default for send/recv (the pipeline's messages); rings keep their GPUs' own NICs and
//    cross the spine, except on a rail-only fabric, which has no spine and forwards over NVLink.
//    The NVLink hop's time is added, not overlapped: in the 1F1B steady state it is taken from
//    the TP collectives that share the same NVLink ports.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "communication_internal.hpp"
#include "pipette/core/performance.hpp"

namespace pipette {

// add_ring_links says why.
double ring_links_in_use(int g, bool full_mesh) { return full_mesh && g > 2 ? g - 1.0 : 1.0; }

namespace {

int node_of(const Cluster& cluster, int gpu) { return gpu / cluster.gpus_per_node; }
int local_of(const Cluster& cluster, int gpu) { return gpu % cluster.gpus_per_node; }

// How much faster than a ring an all-reduce among GPUs of one node runs (NVLink SHARP, where the
// node has it and the stack lets NCCL use it).
double nvls_speedup(const Cluster& cluster, const StageWork& work) {
  return work.nvls_all_reduce ? cluster.nvls_all_reduce_speedup : 1.0;
}

// Whether the `members` GPUs gpu_of(0), gpu_of(1), ... all sit on one node.
template <typename GpuOf>
bool on_one_node(const Cluster& cluster, int members, GpuOf gpu_of) {
  const int node = node_of(cluster, gpu_of(0));
  for (int m = 1; m < members; ++m)
    if (node_of(cluster, gpu_of(m)) != node) return false;
  return true;
}

// Bandwidth one of `flows` concurrent flows (each from its own GPU) gets on a node pair.
double flow_bandwidth_bytes_per_second(const Cluster& cluster, int from_node, int to_node, int flows) {
  return cluster.inter_node.at(from_node, to_node).bandwidth_bytes_per_second * cluster.sender_share_of_node_pair(flows);
}

// Whether two local GPUs (of different nodes) send on different rails.
bool on_different_rails(const Cluster& cluster, int local_a, int local_b) {
  return cluster.nics_per_node > 1 && cluster.rail_of(local_a) != cluster.rail_of(local_b);
}

// PXN's forwarding GPU: the first local GPU on `rail`; -1 when none is (then the sender's own NIC).
int local_gpu_on_rail(const Cluster& cluster, int rail) {
  for (int local = 0; local < cluster.gpus_per_node; ++local)
    if (cluster.rail_of(local) == rail) return local;
  return -1;
}

// One flow between two nodes as the fabric carries it: its bandwidth and the latency it pays.
struct FlowPrice {
  double bandwidth_bytes_per_second = 0;
  double latency_seconds = 0;
};

// A flow from `from_local` on `from_node` towards a GPU on rail `to_rail` of `to_node`, one of
// `flows` sharing the node pair. `forward_over_nvlink`: take PXN rather than the spine when the
// rails differ (the spine is no choice on a rail-only fabric).
FlowPrice inter_node_flow(const Cluster& cluster, int from_node, int from_local, int to_node, int to_rail, int flows,
                          bool forward_over_nvlink) {
  const Link& aligned = cluster.inter_node.at(from_node, to_node);
  FlowPrice price{flow_bandwidth_bytes_per_second(cluster, from_node, to_node, flows), aligned.latency_seconds};
  if (cluster.nics_per_node <= 1 || cluster.rail_of(from_local) == to_rail) return price;
  const RailFabric& rails = cluster.rails;
  const int proxy = local_gpu_on_rail(cluster, to_rail);
  if ((forward_over_nvlink || rails.spine_bandwidth_fraction == 0) && proxy >= 0 && proxy != from_local) {
    const Link& hop = cluster.intra_node[static_cast<size_t>(from_node)].at(from_local, proxy);
    price.bandwidth_bytes_per_second =
        1 / (1 / price.bandwidth_bytes_per_second + 1 / hop.bandwidth_bytes_per_second);
    price.latency_seconds += hop.latency_seconds;
    return price;
  }
  price.bandwidth_bytes_per_second *= rails.spine_bandwidth_fraction;
  price.latency_seconds += rails.spine_extra_latency_seconds;
  return price;
}

// Cost of an all-reduce over a fixed group as a function of the payload: payload · per_byte + latency;
// a payload cut into several collectives (a bucketed gradient reduction) pays each one's latency.
struct CollectiveCost {
  double seconds_per_payload_byte = 0;
  double latency_seconds = 0;
  double seconds(double payload_bytes, int collectives = 1) const {
    return payload_bytes * seconds_per_payload_byte + collectives * latency_seconds;
  }
};

struct RingBottleneck {
  double bandwidth_bytes_per_second = std::numeric_limits<double>::infinity();
  double latency_seconds = 0;
  void add(const Link& link) {
    bandwidth_bytes_per_second = std::min(bandwidth_bytes_per_second, link.bandwidth_bytes_per_second);
    latency_seconds = std::max(latency_seconds, link.latency_seconds);
  }
};

// A group of GPUs seen as NCCL's ring: its nodes in order of first appearance (the node ring
// follows rank order) and, per node, the local GPUs in rank order.
class NodeRing {
 public:
  // Linear when every node's members are consecutive in rank order (the usual case), O(n log n)
  // otherwise: DP groups of a 1024-node job have 1024 members, and the placement search builds two
  // per move.
  NodeRing(const Cluster& cluster, const std::vector<int>& gpus) : size_(static_cast<int>(gpus.size())) {
    local_gpus_.resize(gpus.size());
    nodes_.reserve(gpus.size());
    group_begin_.reserve(gpus.size() + 1);
    for (size_t i = 0; i < gpus.size(); ++i) {
      const int node = node_of(cluster, gpus[i]);
      if (nodes_.empty() || nodes_.back() != node) {
        nodes_.push_back(node);
        group_begin_.push_back(static_cast<int>(i));
      }
      local_gpus_[i] = local_of(cluster, gpus[i]);
    }
    group_begin_.push_back(static_cast<int>(gpus.size()));
    if (revisits_a_node(cluster)) group_scattered_members(cluster, gpus);
    same_count_everywhere_ = true;
    for (int i = 1; i < node_count(); ++i) {
      if (gpus_on(i) == gpus_on(0)) continue;
      same_count_everywhere_ = false;
      break;
    }
    note_same_locals_everywhere();
  }
  // Becomes the ring of another group whose i-th member sits on the same node as this group's
  // i-th member, for every i (the DP groups of one stage's tp indices in the usual case): the
  // node grouping, which depends on the members' nodes only, is kept, and only the local GPUs are
  // read again. The result equals NodeRing(cluster, that group's GPUs), without its allocations.
  // `gpu_of_member(i)`: the other group's i-th member.
  template <typename GpuOfMember>
  void relabel(const Cluster& cluster, GpuOfMember gpu_of_member) {
    for (size_t i = 0; i < local_gpus_.size(); ++i)
      local_gpus_[i] = local_of(cluster, gpu_of_member(member_of_position_.empty() ? static_cast<int>(i) : member_of_position_[i]));
    note_same_locals_everywhere();
  }
  int size() const { return size_; }
  int node_count() const { return static_cast<int>(nodes_.size()); }
  const std::vector<int>& nodes() const { return nodes_; }
  int node(int index) const { return nodes_[static_cast<size_t>(index)]; }
  // Every node holds as many of the group's GPUs.
  bool same_count_everywhere() const { return same_count_everywhere_; }
  int gpus_on(int index) const { return group_begin_[static_cast<size_t>(index) + 1] - group_begin_[static_cast<size_t>(index)]; }
  int local_gpu(int index, int k) const { return local_gpus_[static_cast<size_t>(group_begin_[static_cast<size_t>(index)] + k)]; }
  std::pair<int, int> edge(int index) const { return {node(index), node((index + 1) % node_count())}; }
  // Whether hop `index` (this node to the next) stays on one rail: NCCL pairs each sub-ring's GPU
  // with one on the same rail of the next node where the two nodes' GPUs of the group share
  // enough rails.
  // `subrings`: subrings(), which the caller has at hand.
  bool hop_on_one_rail(const Cluster& cluster, int index, int subrings) const {
    if (same_locals_everywhere_) return true;  // what the usual case below finds on every hop
    const int next = (index + 1) % node_count();
    const int count = gpus_on(index);
    if (count == 1 && gpus_on(next) == 1) return cluster.rail_of(local_gpu(index, 0)) == cluster.rail_of(local_gpu(next, 0));
    // The usual case: the same local GPUs on both nodes (every node's GPUs in one order).
    const auto here = local_gpus_.begin() + group_begin_[static_cast<size_t>(index)];
    const auto there = local_gpus_.begin() + group_begin_[static_cast<size_t>(next)];
    // A plain loop: std::equal on ints becomes a memcmp call, dearer than comparing two or four
    // ints, and the placement search asks this for every hop of several rings per move.
    bool same_locals = count == gpus_on(next);
    for (int k = 0; k < count && same_locals; ++k) same_locals = here[k] == there[k];
    if (same_locals) return true;
    return std::popcount(rails_on(cluster, index) & rails_on(cluster, next)) >= subrings;
  }
  bool on_one_rail_throughout(const Cluster& cluster) const {
    if (cluster.nics_per_node <= 1) return true;
    const int rings = subrings();
    for (int i = 0; i < node_count(); ++i)
      if (!hop_on_one_rail(cluster, i, rings)) return false;
    return true;
  }

  // Inter-node sub-rings (one per local GPU) run in parallel; the node with the fewest GPUs
  // pushes its whole share through that many of them.
  int subrings() const {
    int fewest = size_;
    for (int i = 0; i < node_count(); ++i) fewest = std::min(fewest, gpus_on(i));
    return fewest;
  }

 private:
  // Whether every node holds the same local GPUs in the same order (every node's GPUs in one
  // order, the usual case): then every hop stays on one rail, which the placement search would
  // otherwise establish hop by hop for several rings per move.
  void note_same_locals_everywhere() {
    same_locals_everywhere_ = same_count_everywhere_;
    if (!same_locals_everywhere_ || node_count() < 2) return;
    const auto count = static_cast<size_t>(gpus_on(0));  // every node's: nodes hold consecutive runs
    // Compared in locals, not through the member (which the compiler would store at every step).
    const int* locals = local_gpus_.data();
    for (size_t first = count; first < local_gpus_.size(); first += count)
      for (size_t k = 0; k < count; ++k)
        if (locals[first + k] != locals[k]) {
          same_locals_everywhere_ = false;
          return;
        }
  }

  bool revisits_a_node(const Cluster& cluster) const {
    // Pairwise is cheaper than a bitmap of every node of the cluster for a few nodes only: the
    // expert-DP rings of the job-start benchmark's MoE layouts cross 32 nodes, 496 comparisons.
    constexpr size_t kPairwiseUpTo = 8;
    if (nodes_.size() <= kPairwiseUpTo) {
      for (size_t i = 1; i < nodes_.size(); ++i)
        if (std::find(nodes_.begin(), nodes_.begin() + static_cast<std::ptrdiff_t>(i), nodes_[i]) != nodes_.begin() + static_cast<std::ptrdiff_t>(i))
          return true;
      return false;
    }
    std::vector<bool> seen(static_cast<size_t>(cluster.num_nodes()));
    for (const int node : nodes_) {
      if (seen[static_cast<size_t>(node)]) return true;
      seen[static_cast<size_t>(node)] = true;
    }
    return false;
  }

  // Some node's members are not consecutive: key each member by (its node's first member, itself);
  // sorting that key groups members by node, nodes in order of first appearance, members in rank order.
  void group_scattered_members(const Cluster& cluster, const std::vector<int>& gpus) {
    std::vector<std::pair<int, int>> by_node(gpus.size());  // (node, member)
    for (size_t i = 0; i < gpus.size(); ++i) by_node[i] = {node_of(cluster, gpus[i]), static_cast<int>(i)};
    std::sort(by_node.begin(), by_node.end());
    std::vector<std::pair<int, int>> order(gpus.size());  // (node's first member, member)
    for (size_t i = 0, first = 0; i < by_node.size(); ++i) {
      if (by_node[i].first != by_node[first].first) first = i;
      order[i] = {by_node[first].second, by_node[i].second};
    }
    std::sort(order.begin(), order.end());
    nodes_.clear();
    group_begin_.clear();
    local_gpus_.clear();
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || order[i].first != order[i - 1].first) {
        nodes_.push_back(node_of(cluster, gpus[static_cast<size_t>(order[i].first)]));
        group_begin_.push_back(static_cast<int>(i));
      }
      local_gpus_.push_back(local_of(cluster, gpus[static_cast<size_t>(order[i].second)]));
      member_of_position_.push_back(order[i].second);
    }
    group_begin_.push_back(static_cast<int>(order.size()));
  }

  // The rails the group's GPUs on node `index` send on, as a bit set (rails beyond 63 fold over).
  std::uint64_t rails_on(const Cluster& cluster, int index) const {
    std::uint64_t rails = 0;
    for (int k = 0; k < gpus_on(index); ++k) rails |= std::uint64_t{1} << (cluster.rail_of(local_gpu(index, k)) % 64);
    return rails;
  }

  int size_ = 0;
  std::vector<int> nodes_;
  std::vector<int> group_begin_;  // node_count() + 1 offsets into local_gpus_
  std::vector<int> local_gpus_;   // grouped by node, rank order within a node
  std::vector<int> member_of_position_;  // which member local_gpus_[i] is; empty: member i
  bool same_count_everywhere_ = false;
  bool same_locals_everywhere_ = false;
};

// The links a ring through g GPUs of one node runs on, `local_gpu_at(k)` the k-th in rank order.
// NCCL builds a ring as several channels, each taking its bandwidth from every link it crosses,
// and searches until the channels together reach a GPU's summed NVLink bandwidth
// (github.com/NVIDIA/nccl @5067397c src/graph/search.cc: followPath l.81-121, getTotalBw
// l.30-38, the stop at nChannels · bw ≥ totalBw l.1198). Behind NVSwitches every channel leaves a
// GPU on the same links, and a pair's figure is already that whole bandwidth: the ring runs at its
// slowest consecutive pair. Where every pair is wired directly (Cluster::intra_node_full_mesh), the
// channels spread over the g − 1 links each GPU has to the others: on a uniform mesh each of the
// (g − 1)! directed rings through all g carries an equal share and every link is full, so the ring
// runs at g − 1 times its slowest pair.
template <typename LocalGpuAt>
void add_ring_links(RingBottleneck& bottleneck, const LinkMatrix& links, int g, bool full_mesh, LocalGpuAt local_gpu_at) {
  if (!full_mesh) {
    for (int k = 0; k < g; ++k) bottleneck.add(links.at(local_gpu_at(k), local_gpu_at((k + 1) % g)));
    return;
  }
  for (int a = 0; a < g; ++a)
    for (int b = 0; b < g; ++b)
      if (a != b) bottleneck.add(links.at(local_gpu_at(a), local_gpu_at(b)));
}

template <typename LocalGpuAt>
RingBottleneck intra_node_ring(const Cluster& cluster, int node, int g, LocalGpuAt local_gpu_at) {
  RingBottleneck bottleneck;
  add_ring_links(bottleneck, cluster.intra_node[static_cast<size_t>(node)], g, cluster.intra_node_full_mesh, local_gpu_at);
  bottleneck.bandwidth_bytes_per_second *= ring_links_in_use(g, cluster.intra_node_full_mesh);
  return bottleneck;
}

// A ring all-reduce over g GPUs at the given bottleneck.
CollectiveCost single_node_ring_cost(int g, const RingBottleneck& links) {
  if (g < 2) return {};
  return {2.0 * (g - 1) / g / links.bandwidth_bytes_per_second, 2.0 * (g - 1) * links.latency_seconds};
}

// A ring all-reduce inside each of the ring's nodes, at the slowest node: the plain ring on one
// node; across nodes the NVLink side of the flat ring (flat_ring_cost scales it to the ring's
// share), with NCCL's intra-node steps. The slowest bandwidth and latency are taken separately
// (they differ only on mixed nodes).
CollectiveCost intra_node_cost(const Cluster& cluster, const NodeRing& ring) {
  if (ring.same_count_everywhere() && ring.node_count() > 0) {
    // The usual case: one g on every node, and a node's cost falls as its bottleneck bandwidth
    // rises and grows with its bottleneck latency. Division and multiplication round
    // monotonically, so the slowest node's costs are the costs at the bottleneck of all nodes'
    // links, bit for bit: one division instead of one per node (the placement search prices
    // several of these rings per move).
    const int g = ring.gpus_on(0);
    RingBottleneck all;
    for (int i = 0; i < ring.node_count() && g > 1; ++i)
      add_ring_links(all, cluster.intra_node[static_cast<size_t>(ring.node(i))], g, cluster.intra_node_full_mesh,
                     [&](int k) { return ring.local_gpu(i, k); });
    all.bandwidth_bytes_per_second *= ring_links_in_use(g, cluster.intra_node_full_mesh);
    return single_node_ring_cost(g, all);
  }
  CollectiveCost cost;
  for (int i = 0; i < ring.node_count(); ++i) {
    const int g = ring.gpus_on(i);
    const CollectiveCost node_cost =
        single_node_ring_cost(g, intra_node_ring(cluster, ring.node(i), g, [&](int k) { return ring.local_gpu(i, k); }));
    cost.seconds_per_payload_byte = std::max(cost.seconds_per_payload_byte, node_cost.seconds_per_payload_byte);
    cost.latency_seconds = std::max(cost.latency_seconds, node_cost.latency_seconds);
  }
  return cost;
}

// The NIC side of the flat ring (flat_ring_cost): each of the ring's n members sends 1/subrings of
// its 2(n − 1)/n · P over its rail, at the node ring's slowest node pair (an assumed pair is the
// median pair) times the fabric's contention factor for the ring's node count (CollectiveScaling:
// pair figures, measured or assumed, cannot show a many-node collective's contention, so it
// applies on top of both), and pays the 2(N − 1) inter-node steps' latency.
// `flows_on_edge(from_node, to_node)`: how many flows share that node pair while this ring runs
// (its own sub-rings plus those of concurrent collectives).
template <typename FlowsOnEdge>
CollectiveCost inter_node_cost(const Cluster& cluster, const NodeRing& ring, FlowsOnEdge flows_on_edge) {
  CollectiveCost cost;
  const int nodes = ring.node_count();
  if (nodes < 2) return cost;
  double slowest_flow_bytes_per_second = std::numeric_limits<double>::infinity();
  double slowest_latency_seconds = 0;
  const int subrings = ring.subrings();
  const bool rails_matter = cluster.nics_per_node > 1;
  for (int i = 0; i < nodes; ++i) {
    const auto [from, to] = ring.edge(i);
    const int flows = flows_on_edge(from, to);
    const Link& link = cluster.inter_node.at(from, to);
    double flow_bytes_per_second = 0;
    double flow_latency_seconds = 0;
    if (!rails_matter || ring.hop_on_one_rail(cluster, i, subrings)) {
      flow_bytes_per_second = flow_bandwidth_bytes_per_second(cluster, from, to, flows);
      flow_latency_seconds = link.latency_seconds;
    } else {
      const FlowPrice flow = inter_node_flow(cluster, from, ring.local_gpu(i, 0), to,
                                             cluster.rail_of(ring.local_gpu((i + 1) % nodes, 0)), flows, false);
      flow_bytes_per_second = flow.bandwidth_bytes_per_second;
      flow_latency_seconds = flow.latency_seconds;
    }
    slowest_flow_bytes_per_second = std::min(slowest_flow_bytes_per_second, flow_bytes_per_second);
    slowest_latency_seconds = std::max(slowest_latency_seconds, flow_latency_seconds);
  }
  slowest_flow_bytes_per_second *= cluster.collective_scaling.bandwidth_factor(nodes);
  const double members = ring.size();
  cost.seconds_per_payload_byte = 2.0 * (members - 1) / members / subrings / slowest_flow_bytes_per_second;
  cost.latency_seconds = 2.0 * (nodes - 1) * slowest_latency_seconds;
  return cost;
}

// NCCL's ring over a group that spans nodes is one flat ring through all n members, nodes
// consecutive, and it is pipelined: every hop forwards a chunk at every step, so NVLink and the
// NICs carry their traffic at the same time and the slower of the two paces the ring. Of each
// member's 2(n − 1)/n · P, the share its sub-ring sends over a NIC is 1/subrings (one node exit
// per sub-ring per node), inter_node_cost's figure; the rest leaves over NVLink: intra_node_cost's
// figure (2(g − 1)/g · P at the node's ring rate) times (n − 1)/n. So
// the bus bandwidth of a ring across nodes is the lower of the node's ring rate · g/(g − 1) and
// the NICs' rate, whatever the node count: NVIDIA's 192 GB/s for DGX A100 rings of 2 and more
// nodes (8 x ~24 GB/s HDR) and 365.84 GB/s on 4 HGX H100 nodes (8 x 46-48 GB/s NDR;
// ground_truth_data/nccl_bandwidth_measurements.csv). A reduce-scatter inside each node, an
// inter-node ring of the shards and an all-gather after it, one phase after the other, would
// price those at 148 and 221 GB/s; NCCL's own cost model, too, prices a ring's bus bandwidth as
// its channels times one channel's bottleneck, not as phases (src/graph/tuning.cc l.306, 324
// @5067397c). The latencies add, each step at its own link's, as NCCL's own
// model prices a ring: 2(N − 1) inter-node steps for an all-reduce (src/graph/tuning.cc
// l.411-412 @5067397c). Its intra-node steps are counted as one node's ring, 2(g − 1): NCCL's ring
// counts 2(n − N), but where that would matter, latency-bound all-reduces over many nodes, NCCL
// picks its tree, which it prices at 2(g − 1) intra-node steps and 2 log2 N inter-node ones (l.416).
CollectiveCost flat_ring_cost(const NodeRing& ring, const CollectiveCost& intra, const CollectiveCost& inter) {
  if (ring.node_count() < 2) return intra;
  const double n = ring.size();
  const double nvlink = intra.seconds_per_payload_byte * (n - 1) / n;
  return {std::max(nvlink, inter.seconds_per_payload_byte), intra.latency_seconds + inter.latency_seconds};
}

template <typename FlowsOnEdge>
CollectiveCost ring_allreduce_cost(const Cluster& cluster, const NodeRing& ring, FlowsOnEdge flows_on_edge) {
  return flat_ring_cost(ring, intra_node_cost(cluster, ring), inter_node_cost(cluster, ring, flows_on_edge));
}

std::vector<int> gpus_of_tp_group(const ParallelConfig& config, const detail::RankMap& map, int stage, int replica) {
  std::vector<int> gpus(static_cast<size_t>(config.tp));
  for (int t = 0; t < config.tp; ++t)
    gpus[static_cast<size_t>(t)] = map.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, replica, stage}))];
  return gpus;
}

// The gradient-reduction group: Megatron reduces over dp·cp ranks (one per lane).
std::vector<int> gpus_of_dp_group(const ParallelConfig& config, const detail::RankMap& map, int stage, int tp_index) {
  std::vector<int> gpus(static_cast<size_t>(config.dp_cp()));
  for (int d = 0; d < config.dp_cp(); ++d)
    gpus[static_cast<size_t>(d)] = map.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {tp_index, d, stage}))];
  return gpus;
}

// Flows of one pipeline boundary leaving `from_node` towards `to_node` at the same time: every
// GPU of from_node at stage `from_stage` whose partner at `to_stage` sits on to_node. DP replicas
// run the same schedule in lockstep, so their messages share the rails too.
int concurrent_boundary_flows(const Cluster& cluster, const ParallelConfig& config, const detail::RankMap& map,
                              int from_node, int to_node, int from_stage, int to_stage) {
  int flows = 0;
  const int first = from_node * cluster.gpus_per_node;
  for (int gpu = first; gpu < first + cluster.gpus_per_node; ++gpu) {
    const int rank = map.rank_of_gpu[static_cast<size_t>(gpu)];
    if (rank < 0) continue;
    const RankPosition& position = map.position_of_rank[static_cast<size_t>(rank)];
    if (position.pp_index != from_stage) continue;
    const int partner = map.gpu_of_rank[static_cast<size_t>(
        rank_of_position(config, {position.tp_index, position.lane, to_stage}))];
    if (node_of(cluster, partner) == to_node) ++flows;
  }
  return flows;
}

}  // namespace

double p2p_seconds(const Cluster& cluster, int from_gpu, int to_gpu, double bytes, int concurrent_flows, double contention) {
  if (from_gpu == to_gpu) return 0;
  const int from_node = node_of(cluster, from_gpu);
  const int to_node = node_of(cluster, to_gpu);
  if (from_node == to_node) {
    // NVLink/NVSwitch and PCIe peer links are per GPU pair: other pairs do not share them.
    const Link& link = cluster.intra_node[static_cast<size_t>(from_node)].at(local_of(cluster, from_gpu),
                                                                              local_of(cluster, to_gpu));
    return link.latency_seconds + bytes / link.bandwidth_bytes_per_second;
  }
  const int from_local = local_of(cluster, from_gpu);
  const FlowPrice flow = inter_node_flow(cluster, from_node, from_local, to_node,
                                         cluster.rail_of(local_of(cluster, to_gpu)), concurrent_flows, cluster.rails.pxn);
  return flow.latency_seconds + bytes / (flow.bandwidth_bytes_per_second * contention);
}

double ring_allreduce_seconds(const Cluster& cluster, const std::vector<int>& gpus, double bytes) {
  const NodeRing ring(cluster, gpus);
  const int own_flows = ring.subrings();
  return ring_allreduce_cost(cluster, ring, [own_flows](int, int) { return own_flows; }).seconds(bytes);
}

namespace detail {

RankMap make_rank_map(const Cluster& cluster, const ParallelConfig& config, const Placement& placement) {
  RankMap map;
  map.gpu_of_rank = placement.gpu_of_rank;
  map.rank_of_gpu.assign(static_cast<size_t>(cluster.num_gpus()), -1);
  std::vector<char> in_use(static_cast<size_t>(cluster.num_nodes()), 0);
  for (size_t rank = 0; rank < placement.gpu_of_rank.size(); ++rank) {
    map.rank_of_gpu[static_cast<size_t>(placement.gpu_of_rank[rank])] = static_cast<int>(rank);
    map.position_of_rank.push_back(position_of_rank(config, static_cast<int>(rank)));
    in_use[static_cast<size_t>(node_of(cluster, placement.gpu_of_rank[rank]))] = 1;
  }
  map.pipeline_hop_contention =
      cluster.collective_scaling.bandwidth_factor(static_cast<int>(std::count(in_use.begin(), in_use.end(), 1)));
  return map;
}

double stage_boundary_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                              double message_bytes, const PipelineExchange& exchange, int from_stage, int to_stage,
                              int replica, BoundaryPriceMemo* memo) {
  // Both directions averaged, the data messages and the latency-bound ones.
  const auto exchange_seconds = [&](int sender, int receiver, int forward_flows, int backward_flows) {
    const auto both_ways = [&](double bytes) {
      return 0.5 * (p2p_seconds(cluster, sender, receiver, bytes, forward_flows, map.pipeline_hop_contention) +
                    p2p_seconds(cluster, receiver, sender, bytes, backward_flows, map.pipeline_hop_contention));
    };
    return exchange.data_messages * both_ways(message_bytes) +
           (exchange.small_messages > 0 ? exchange.small_messages * both_ways(0) : 0.0);
  };
  // One flow between two nodes while every other flow of the same two stages between the same two
  // nodes sends too.
  const auto price = [&](int sender, int receiver, int sender_node, int receiver_node) {
    const int forward_flows = concurrent_boundary_flows(cluster, config, map, sender_node, receiver_node, from_stage, to_stage);
    const int backward_flows = concurrent_boundary_flows(cluster, config, map, receiver_node, sender_node, to_stage, from_stage);
    return exchange_seconds(sender, receiver, forward_flows, backward_flows);
  };
  double slowest = 0;
  // The tp flows of a replica usually cross one node pair, where every rail-aligned flow costs the
  // same: price one of them once.
  int priced_sender_node = -1;
  int priced_receiver_node = -1;
  double priced_seconds = 0;
  for (int t = 0; t < config.tp; ++t) {
    const int sender = map.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, replica, from_stage}))];
    const int receiver = map.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, replica, to_stage}))];
    const int sender_node = node_of(cluster, sender);
    const int receiver_node = node_of(cluster, receiver);
    if (sender_node == receiver_node) {
      slowest = std::max(slowest, exchange_seconds(sender, receiver, 1, 1));
      continue;
    }
    if (on_different_rails(cluster, local_of(cluster, sender), local_of(cluster, receiver))) {
      slowest = std::max(slowest, price(sender, receiver, sender_node, receiver_node));  // priced per flow
      continue;
    }
    if (sender_node != priced_sender_node || receiver_node != priced_receiver_node) {
      const auto compute = [&] { return price(sender, receiver, sender_node, receiver_node); };
      priced_seconds = memo != nullptr ? memo->seconds({sender_node, receiver_node, from_stage, to_stage}, compute) : compute();
      priced_sender_node = sender_node;
      priced_receiver_node = receiver_node;
    }
    slowest = std::max(slowest, priced_seconds);
  }
  return slowest;
}

double tp_collective_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                             const StageWork& work, int stage, int replica) {
  if (config.tp <= 1) return 0;
  const auto gpu_of = [&](int t) { return map.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, replica, stage}))]; };
  const bool one_node = on_one_node(cluster, config.tp, gpu_of);
  CollectiveCost cost;
  if (one_node) {  // the usual case, priced without building the group
    cost = single_node_ring_cost(config.tp, intra_node_ring(cluster, node_of(cluster, gpu_of(0)), config.tp,
                                                            [&](int t) { return local_of(cluster, gpu_of(t)); }));
  } else {
    const NodeRing ring(cluster, gpus_of_tp_group(config, map, stage, replica));
    const int own_flows = ring.subrings();
    cost = ring_allreduce_cost(cluster, ring, [own_flows](int, int) { return own_flows; });
  }
  // tp_bytes_per_microbatch counts bytes on the wire per GPU; an all-reduce of P bytes puts
  // 2(t−1)/t · P there. Inside a node NVLink SHARP may run the all-reduces faster than the ring.
  const double wire_bytes_per_payload_byte = 2.0 * (config.tp - 1) / config.tp;
  const double all_reduce_speedup = one_node ? nvls_speedup(cluster, work) : 1.0;
  const double ring_share = 1 - work.tp_all_reduce_share + work.tp_all_reduce_share / all_reduce_speedup;
  return cost.seconds_per_payload_byte * ring_share * (work.tp_bytes_per_microbatch / wire_bytes_per_payload_byte) +
         cost.latency_seconds * work.tp_collectives_per_microbatch;
}

namespace {

// Whether groups a and b of gpu_of (group, member) visit the same nodes in the same order.
template <typename GpuOf>
bool same_node_ring(const Cluster& cluster, int members, GpuOf gpu_of, int a, int b) {
  for (int m = 0; m < members; ++m)
    if (node_of(cluster, gpu_of(a, m)) != node_of(cluster, gpu_of(b, m))) return false;
  return true;
}

// The slowest of the ring all-reduces of `bytes` over `groups` (group k's member m on GPU
// gpu_of(k, m)), which all visit the same nodes in the same order (same_node_ring; the usual case:
// the DP groups of a stage's tp indices, with TP groups inside nodes). Every group crosses every
// edge of one node ring, and `sharing_groups` groups' sub-rings share each edge; only the
// intra-node rings and the rails differ between the groups, so one NodeRing is relabelled from
// group to group instead of built for each.
template <typename GpuOf>
double reductions_on_one_node_ring(const Cluster& cluster, const std::vector<int>& groups, int members, GpuOf gpu_of,
                                   int sharing_groups, double bytes, int collectives) {
  std::vector<int> first_gpus(static_cast<size_t>(members));
  for (int m = 0; m < members; ++m) first_gpus[static_cast<size_t>(m)] = gpu_of(groups.front(), m);
  NodeRing first(cluster, first_gpus);
  double slowest = 0;
  const int flows = sharing_groups * first.subrings();
  const CollectiveCost inter = inter_node_cost(cluster, first, [flows](int, int) { return flows; });
  const bool intra_phase = first.size() > first.node_count();  // some node holds two GPUs of a group
  const bool rails_matter = cluster.nics_per_node > 1 && first.node_count() > 1;
  const bool first_on_one_rail = !rails_matter || !intra_phase || first.on_one_rail_throughout(cluster);
  const auto flows_on_edge = [flows](int, int) { return flows; };
  // With one GPU per node, a group's ring crosses rails where its neighbours' rails differ; where
  // that happens hop for hop as in group 0's ring, its NIC side costs the same.
  // Each member's rail is read once per group and group 0's hops once per call: the expert
  // reductions of an MoE stage ask this for every (etp, ep) position on every move.
  const auto rail_at = [&](int k, int m) { return cluster.rail_of(local_of(cluster, gpu_of(k, m))); };
  std::vector<char> first_hop_on_one_rail;  // hop m → m + 1 of group 0's ring stays on one rail
  if (!intra_phase && rails_matter) {
    first_hop_on_one_rail.resize(static_cast<size_t>(members));
    const int first_rail = rail_at(groups.front(), 0);
    int rail = first_rail;
    for (int m = 0; m < members; ++m) {
      const int next_rail = m + 1 < members ? rail_at(groups.front(), m + 1) : first_rail;
      first_hop_on_one_rail[static_cast<size_t>(m)] = rail == next_rail;
      rail = next_rail;
    }
  }
  const auto crosses_rails_as_first = [&](int k) {
    const int first_rail = rail_at(k, 0);
    int rail = first_rail;
    for (int m = 0; m < members; ++m) {
      const int next_rail = m + 1 < members ? rail_at(k, m + 1) : first_rail;
      if ((rail == next_rail) != static_cast<bool>(first_hop_on_one_rail[static_cast<size_t>(m)])) return false;
      rail = next_rail;
    }
    return true;
  };
  for (const int k : groups) {
    if (k == groups.front() || !(intra_phase || rails_matter)) {
      const CollectiveCost intra = intra_phase ? intra_node_cost(cluster, first) : CollectiveCost{};
      slowest = std::max(slowest, flat_ring_cost(first, intra, inter).seconds(bytes, collectives));
      continue;
    }
    if (!intra_phase && crosses_rails_as_first(k)) {
      slowest = std::max(slowest, inter.seconds(bytes, collectives));
      continue;
    }
    // The same nodes in the same order as the first group: its ring becomes this one (what the rest of
    // the loop needs of it is in `inter` and first_on_one_rail).
    NodeRing& ring = first;
    ring.relabel(cluster, [&](int m) { return gpu_of(k, m); });
    const bool same_inter = !rails_matter || (first_on_one_rail && ring.on_one_rail_throughout(cluster));
    const CollectiveCost own_inter = same_inter ? inter : inter_node_cost(cluster, ring, flows_on_edge);
    const CollectiveCost intra = intra_phase ? intra_node_cost(cluster, ring) : CollectiveCost{};
    slowest = std::max(slowest, flat_ring_cost(ring, intra, own_inter).seconds(bytes, collectives));
  }
  return slowest;
}

// How many flows each node pair carries while several collectives run at once: add() every edge
// of every collective with its flows, then read flows(from, to).
class ConcurrentEdgeFlows {
 public:
  explicit ConcurrentEdgeFlows(const Cluster& cluster) : nodes_(cluster.num_nodes()) {}
  void add(int from, int to, int flows) { edges_.emplace_back(key(from, to), flows); }
  void add(const NodeRing& ring) {
    if (ring.node_count() < 2) return;
    for (int i = 0; i < ring.node_count(); ++i) {
      const auto [from, to] = ring.edge(i);
      add(from, to, ring.subrings());
    }
  }
  // After the last add(): sums the flows of each node pair.
  void merge() {
    std::sort(edges_.begin(), edges_.end());
    size_t kept = 0;
    for (const auto& [edge, flows] : edges_) {
      if (kept > 0 && edges_[kept - 1].first == edge)
        edges_[kept - 1].second += flows;
      else
        edges_[kept++] = {edge, flows};
    }
    edges_.resize(kept);
  }
  int flows(int from, int to) const {
    return std::lower_bound(edges_.begin(), edges_.end(), std::pair<std::int64_t, int>(key(from, to), 0))->second;
  }

 private:
  std::int64_t key(int from, int to) const { return static_cast<std::int64_t>(from) * nodes_ + to; }
  std::int64_t nodes_;
  std::vector<std::pair<std::int64_t, int>> edges_;
};

// The slowest of `rings` all-reducing `bytes` each at the same time: the sub-rings of every ring
// crossing a node pair share its rails.
double slowest_concurrent_allreduce_seconds(const Cluster& cluster, const std::vector<NodeRing>& rings, double bytes,
                                            int collectives) {
  ConcurrentEdgeFlows edges(cluster);
  for (const NodeRing& ring : rings) edges.add(ring);
  edges.merge();
  const auto flows_on_edge = [&edges](int from, int to) { return edges.flows(from, to); };
  double slowest = 0;
  for (const NodeRing& ring : rings)
    slowest = std::max(slowest, ring_allreduce_cost(cluster, ring, flows_on_edge).seconds(bytes, collectives));
  return slowest;
}

double dense_dp_reduction_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                                  const StageWork& work, int stage) {
  const int lanes = config.dp_cp();
  if (lanes <= 1) return 0;
  // Every tp index of the stage reduces its own shard over its own DP group, all at once, so
  // groups that cross the same node pair share its rails. A distributed optimizer's
  // reduce-scatter + all-gather moves the same bytes in the same ring steps as one all-reduce.
  const auto gpu_of = [&](int t, int d) { return map.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, d, stage}))]; };
  bool one_node_ring = true;
  for (int t = 1; t < config.tp && one_node_ring; ++t) one_node_ring = same_node_ring(cluster, lanes, gpu_of, 0, t);
  if (one_node_ring) {
    std::vector<int> tp_indices(static_cast<size_t>(config.tp));
    std::iota(tp_indices.begin(), tp_indices.end(), 0);
    const double ring_seconds =
        reductions_on_one_node_ring(cluster, tp_indices, lanes, gpu_of, config.tp, work.gradient_bytes_per_gpu,
                                    work.gradient_reduction_collectives);
    const bool one_node_all_reduce =
        work.dp_reduction_is_all_reduce && on_one_node(cluster, lanes, [&](int d) { return gpu_of(0, d); });
    return one_node_all_reduce ? ring_seconds / nvls_speedup(cluster, work) : ring_seconds;
  }
  std::vector<NodeRing> rings;
  rings.reserve(static_cast<size_t>(config.tp));
  for (int t = 0; t < config.tp; ++t) rings.emplace_back(cluster, gpus_of_dp_group(config, map, stage, t));
  return slowest_concurrent_allreduce_seconds(cluster, rings, work.gradient_bytes_per_gpu, work.gradient_reduction_collectives);
}

// The expert gradients' reduction: every (etp, ep) position of the stage reduces its experts'
// shard over its expert-dp group, ep·etp groups at once sharing the node pairs' rails.
double expert_dp_reduction_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                                   const StageWork& work, int stage) {
  const int edp = config.expert_dp();
  if (edp <= 1 || work.expert_gradient_bytes_per_gpu <= 0) return 0;
  // Group k is the (etp, ep) position (k / ep, k % ep). Every group's ring is priced as sharing
  // each of its edges with all ep·etp groups' sub-rings. Groups on the same node ring (the
  // ep·etp positions of one node in the usual case) are priced on one relabelled NodeRing.
  const int groups = config.ep * config.etp;
  const auto gpu_of = [&](int k, int g) {
    return map.gpu_of_rank[static_cast<size_t>(rank_of_expert_position(config, stage, {k / config.ep, k % config.ep, g}))];
  };
  std::vector<int> nodes(static_cast<size_t>(groups) * static_cast<size_t>(edp));  // group k's from k·edp
  for (int k = 0; k < groups; ++k)
    for (int g = 0; g < edp; ++g) nodes[static_cast<size_t>(k * edp + g)] = node_of(cluster, gpu_of(k, g));
  const auto nodes_of = [&](int k) { return nodes.begin() + static_cast<std::ptrdiff_t>(k) * edp; };
  // Groups by node ring: first_of[k], the first group on group k's ring (flat, without a vector
  // per class: this runs for every stage a move touches).
  std::vector<int> first_of(static_cast<size_t>(groups));
  for (int k = 0; k < groups; ++k) {
    first_of[static_cast<size_t>(k)] = k;
    for (int first = 0; first < k; ++first) {
      if (first_of[static_cast<size_t>(first)] != first || !std::equal(nodes_of(k), nodes_of(k) + edp, nodes_of(first))) continue;
      first_of[static_cast<size_t>(k)] = first;
      break;
    }
  }
  double slowest = 0;
  std::vector<int> members;  // of one ring, in order
  for (int first = 0; first < groups; ++first) {
    if (first_of[static_cast<size_t>(first)] != first) continue;
    members.clear();
    for (int k = first; k < groups; ++k)
      if (first_of[static_cast<size_t>(k)] == first) members.push_back(k);
    slowest = std::max(slowest, reductions_on_one_node_ring(cluster, members, edp, gpu_of, groups,
                                                            work.expert_gradient_bytes_per_gpu,
                                                            work.expert_gradient_reduction_collectives));
  }
  return slowest;
}

}  // namespace

double dp_reduction_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                            const StageWork& work, int stage) {
  // Dense and expert gradient buffers are reduced on their own communicators, one after the other.
  return dense_dp_reduction_seconds(cluster, config, map, work, stage) +
         expert_dp_reduction_seconds(cluster, config, map, work, stage);
}

double tied_embedding_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                              const WorkProfile& work) {
  if (work.tied_embedding_gradient_bytes <= 0 || work.tied_embedding_head_stage <= 0) return 0;
  struct Pair {
    int first_node, head_node, first_gpu, head_gpu;
    auto operator<=>(const Pair&) const = default;
  };
  std::vector<Pair> pairs;
  pairs.reserve(static_cast<size_t>(config.tp) * static_cast<size_t>(config.dp_cp()));
  ConcurrentEdgeFlows edges(cluster);
  for (int lane = 0; lane < config.dp_cp(); ++lane) {
    for (int t = 0; t < config.tp; ++t) {
      const auto gpu_at = [&](int stage) { return map.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, lane, stage}))]; };
      const int first_gpu = gpu_at(0);
      const int head_gpu = gpu_at(work.tied_embedding_head_stage);
      const Pair pair{node_of(cluster, first_gpu), node_of(cluster, head_gpu), first_gpu, head_gpu};
      pairs.push_back(pair);
      if (pair.first_node == pair.head_node) continue;
      edges.add(pair.first_node, pair.head_node, 1);  // a two-member ring: one flow each way
      edges.add(pair.head_node, pair.first_node, 1);
    }
  }
  edges.merge();
  const auto flows_on_edge = [&edges](int from, int to) { return edges.flows(from, to); };
  // The pairs of one node pair differ only in their local GPUs: one ring per node pair, relabelled
  // for each of its pairs (the job-start search reprices this on many of its moves).
  std::sort(pairs.begin(), pairs.end());
  double slowest = 0;
  for (size_t first = 0; first < pairs.size();) {
    size_t end = first + 1;
    while (end < pairs.size() && pairs[end].first_node == pairs[first].first_node && pairs[end].head_node == pairs[first].head_node) ++end;
    NodeRing ring(cluster, {pairs[first].first_gpu, pairs[first].head_gpu});
    for (size_t k = first; k < end; ++k) {
      if (k > first) ring.relabel(cluster, [&](int member) { return member == 0 ? pairs[k].first_gpu : pairs[k].head_gpu; });
      slowest = std::max(slowest, ring_allreduce_cost(cluster, ring, flows_on_edge).seconds(work.tied_embedding_gradient_bytes));
    }
    first = end;
  }
  return slowest;
}

// Per node, its GPUs that send all-to-all traffic to other nodes while stage `stage`'s expert
// groups run theirs: every GPU of the stage there whose group has a member elsewhere, i.e. every
// member of a group that spans nodes. All of the stage's groups run their all-to-alls in the same
// phase: every DP replica of the stage runs the same micro-batches in the same order, and each
// layer's all-to-all holds a group's members until all of them reach it; a group wider than a
// replica's tp·cp ranks (the expert grid is carved from the stage's tp·cp·dp ranks, Megatron's
// order tp-cp-ep-dp-pp, parallel_state.py @d98e8a64 l.617) ties the replicas it spans together at
// every layer. Other stages are not counted: in 1F1B they run other micro-batches, forward against
// backward, so their layers' all-to-alls (a small part of each step) fall at unrelated moments;
// counting them would price every stage as if they always met.
// A placement search only permutes whole nodes and the GPUs inside them, which changes neither a
// node's set of the stage's ranks nor which groups span nodes: a node swap swaps two nodes'
// counts, and a group's price changes only when its own members move (PlacementEvaluator
// recomputes just those).
std::vector<int> inter_node_senders_of_stage(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                                             int stage) {
  if (!gpus_share_rails(cluster)) return {};
  std::vector<int> senders(static_cast<size_t>(cluster.num_nodes()), 0);
  // Each rank of the stage is in one group: one pass over the groups counts each rank once.
  for (int group = 0; group < expert_groups_per_stage(config); ++group) {
    const auto gpu_of_member = [&](int e) {
      return map.gpu_of_rank[static_cast<size_t>(
          rank_of_expert_position(config, stage, {group % config.etp, e, group / config.etp}))];
    };
    if (on_one_node(cluster, config.ep, gpu_of_member)) continue;
    for (int e = 0; e < config.ep; ++e) ++senders[static_cast<size_t>(node_of(cluster, gpu_of_member(e)))];
  }
  return senders;
}

double ep_all_to_all_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                             const StageWork& work, int stage, int group, std::span<const int> inter_node_senders) {
  if (work.ep_all_to_alls_per_microbatch == 0) return 0;
  const int etp_index = group % config.etp;
  const int edp_index = group / config.etp;
  const int ep = config.ep;
  double slowest = 0;
  if (ep > 1) {
    // One all-to-all: every member sends ep_bytes_per_peer to each other member at once. Inside a
    // node the sends to its peers share the sender's NVLink/PCIe port (NVSwitch gives one GPU its
    // pair bandwidth to all peers together, not to each), so they add up; where every pair is
    // wired directly (Cluster::intra_node_full_mesh) each send has its own links and the slowest
    // one decides. Between nodes every
    // member on node A sends to every member on node B; a node's sends to all other nodes leave
    // through its rails, which every GPU of A sending out of A at the same time shares (not only
    // this group's members there: inter_node_senders_of_stage counts them). As for every other
    // flow in this file (flow_bandwidth_bytes_per_second), S such GPUs each get
    // Cluster::sender_share_of_node_pair(S) of the node pair's bandwidth B: all-to-all is
    // NCCL send/recv, which PXN (the file's head; introduced for all2all, NVIDIA blog "Doubling
    // all2all Performance with NVIDIA Collective Communication Library 2.12") sends out on the
    // receiver's rail, so a sender is not held to its own NIC. The intra- and inter-node parts use
    // different links and run together; each of the other nodes adds one latency (NCCL posts the
    // peers' sends together but each remote peer pays one).
    // The members' nodes in order of first appearance, each with its members in rank order: a
    // member's intra-node sum and its node's inter-node sum read only those, O(ep · GPUs per node
    // + nodes²) rather than O(ep² · nodes) (the placement search prices groups of 128 members per
    // move). The sums run in the same order as over all members, so the result is the same.
    std::vector<int> gpus(static_cast<size_t>(ep));
    std::vector<int> nodes;
    std::vector<std::vector<int>> members_of_node;  // indices into gpus, per entry of nodes
    for (int e = 0; e < ep; ++e) {
      const int gpu = map.gpu_of_rank[static_cast<size_t>(rank_of_expert_position(config, stage, {etp_index, e, edp_index}))];
      gpus[static_cast<size_t>(e)] = gpu;
      const int node = node_of(cluster, gpu);
      const auto found = std::find(nodes.begin(), nodes.end(), node);
      if (found == nodes.end()) {
        nodes.push_back(node);
        members_of_node.emplace_back(1, e);
      } else {
        members_of_node[static_cast<size_t>(found - nodes.begin())].push_back(e);
      }
    }
    const double bytes = work.ep_bytes_per_peer;
    // Where every GPU has NICs of its own (gpus_share_rails false) no two senders share one, whoever sends:
    // the count of the group's own members gives the same price, with no table to read.
    const bool rails_shared = gpus_share_rails(cluster) && nodes.size() > 1;
    for (size_t n = 0; n < nodes.size(); ++n) {
      const int node = nodes[n];
      const std::vector<int>& members = members_of_node[n];
      const int senders = rails_shared ? inter_node_senders[static_cast<size_t>(node)] : static_cast<int>(members.size());
      // Every member of a node sends the same bytes to the same other nodes on the same rails.
      double inter = 0;
      for (size_t o = 0; o < nodes.size(); ++o) {
        if (o == n) continue;
        const int receivers = static_cast<int>(members_of_node[o].size());
        const Link& pair = cluster.inter_node.at(node, nodes[o]);
        // This member's share: its receivers' bytes, at its share of the node pair's rails.
        inter += receivers * bytes / (pair.bandwidth_bytes_per_second * cluster.sender_share_of_node_pair(senders)) +
                 pair.latency_seconds;
      }
      const LinkMatrix& links = cluster.intra_node[static_cast<size_t>(node)];
      for (const int member : members) {
        const int local = local_of(cluster, gpus[static_cast<size_t>(member)]);
        double intra = 0, intra_latency = 0;
        for (const int peer : members) {
          if (peer == member) continue;
          const Link& link = links.at(local, local_of(cluster, gpus[static_cast<size_t>(peer)]));
          const double send_seconds = bytes / link.bandwidth_bytes_per_second;
          intra = cluster.intra_node_full_mesh ? std::max(intra, send_seconds) : intra + send_seconds;
          intra_latency = std::max(intra_latency, link.latency_seconds);
        }
        slowest = std::max(slowest, std::max(intra + intra_latency, inter));
      }
    }
  }
  double gather = 0;
  if (config.etp > 1 && work.etp_gather_bytes > 0) {
    // The all-gather over etp of the tokens the ep all-to-all delivered, and the reduce-scatter
    // before combine: half an all-reduce each, over the etp group of every ep member; the slowest.
    std::vector<int> etp_gpus(static_cast<size_t>(config.etp));
    for (int e = 0; e < ep; ++e) {
      for (int i = 0; i < config.etp; ++i)
        etp_gpus[static_cast<size_t>(i)] =
            map.gpu_of_rank[static_cast<size_t>(rank_of_expert_position(config, stage, {i, e, edp_index}))];
      gather = std::max(gather, 0.5 * ring_allreduce_seconds(cluster, etp_gpus, work.etp_gather_bytes));
    }
  }
  return work.ep_all_to_alls_per_microbatch * (slowest + gather);
}

double cp_ring_seconds(const Cluster& cluster, const ParallelConfig& config, const RankMap& map,
                       const StageWork& work, int stage, int replica) {
  const int cp = config.cp;
  if (cp <= 1 || work.cp_backward_rings == 0) return 0;
  // Every member sends to the next of its ring and receives from the previous at once (TE's
  // flash_attn_p2p_communicate, batched isend/irecv), the tp rings of the replica's stage together:
  // a hop between two nodes shares the node pair with every other hop of these rings that crosses
  // it the same way. A pass ends when its slowest hop does.
  const auto gpu_at = [&](int t, int c) {
    return map.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, lane_of(config, c, replica), stage}))];
  };
  const auto flows_between = [&](int from_node, int to_node) {
    int flows = 0;
    for (int t = 0; t < config.tp; ++t)
      for (int c = 0; c < cp; ++c)
        flows += node_of(cluster, gpu_at(t, c)) == from_node && node_of(cluster, gpu_at(t, (c + 1) % cp)) == to_node;
    return flows;
  };
  const auto pass_seconds = [&](double bytes) {
    double slowest = 0;
    for (int t = 0; t < config.tp; ++t) {
      for (int c = 0; c < cp; ++c) {
        const int from = gpu_at(t, c);
        const int to = gpu_at(t, (c + 1) % cp);
        const int from_node = node_of(cluster, from);
        const int to_node = node_of(cluster, to);
        const int flows = from_node == to_node ? 1 : flows_between(from_node, to_node);
        slowest = std::max(slowest, p2p_seconds(cluster, from, to, bytes, flows));
      }
    }
    return slowest;
  };
  const double kv = pass_seconds(work.cp_kv_chunk_bytes);
  const double kv_and_grad = cp > 2 ? pass_seconds(2 * work.cp_kv_chunk_bytes) : 0.0;
  const auto beyond = [](double pass, double step) { return std::max(0.0, pass - step); };
  // Forward: cp − 1 K/V passes per ring. Backward: the K/V pass, cp − 2 passes of K/V with dK/dV,
  // the dK/dV pass (as large as the K/V one).
  return work.cp_forward_rings * (cp - 1) * beyond(kv, work.cp_forward_step_seconds) +
         work.cp_backward_rings * (2 * beyond(kv, work.cp_backward_step_seconds) +
                                   (cp - 2) * beyond(kv_and_grad, work.cp_backward_step_seconds));
}

}  // namespace detail

CommunicationTimes communication_times(const Cluster& cluster, const ParallelConfig& config,
                                       const WorkProfile& work, const Placement& placement) {
  const detail::RankMap map = detail::make_rank_map(cluster, config, placement);
  CommunicationTimes times;
  const auto pp = static_cast<size_t>(config.pp);
  const auto dp = static_cast<size_t>(config.dp_cp());  // one entry per lane
  times.p2p_seconds.assign(pp > 0 ? pp - 1 : 0, std::vector<double>(dp, 0.0));
  times.tp_seconds.assign(pp, std::vector<double>(dp, 0.0));
  times.dp_seconds.assign(pp, 0.0);
  for (int s = 0; s < config.pp; ++s) {
    const StageWork& stage = work.stages[static_cast<size_t>(s)];
    for (int d = 0; d < config.dp_cp(); ++d) {
      // A boundary that carries nothing (to an idle nanotron rank) costs nothing, not a latency.
      if (s + 1 < config.pp && boundary_bytes(work, s) > 0)
        times.p2p_seconds[static_cast<size_t>(s)][static_cast<size_t>(d)] =
            detail::stage_boundary_seconds(cluster, config, map, boundary_bytes(work, s), work.boundary_exchange, s,
                                           s + 1, d);
      times.tp_seconds[static_cast<size_t>(s)][static_cast<size_t>(d)] =
          detail::tp_collective_seconds(cluster, config, map, stage, s, d);
    }
    times.dp_seconds[static_cast<size_t>(s)] = detail::dp_reduction_seconds(cluster, config, map, stage, s);
  }
  if (!work.stages.empty() && std::any_of(work.stages.begin(), work.stages.end(), [](const StageWork& stage) {
        return stage.ep_all_to_alls_per_microbatch > 0;
      })) {
    const auto groups = static_cast<size_t>(expert_groups_per_stage(config));
    times.ep_group_seconds.assign(pp, std::vector<double>(groups, 0.0));
    times.ep_seconds.assign(pp, 0.0);
    for (int s = 0; s < config.pp; ++s) {
      // Counted once for all of the stage's groups.
      const std::vector<int> senders = detail::inter_node_senders_of_stage(cluster, config, map, s);
      for (size_t g = 0; g < groups; ++g) {
        const double seconds = detail::ep_all_to_all_seconds(cluster, config, map, work.stages[static_cast<size_t>(s)],
                                                             s, static_cast<int>(g), senders);
        times.ep_group_seconds[static_cast<size_t>(s)][g] = seconds;
        times.ep_seconds[static_cast<size_t>(s)] = std::max(times.ep_seconds[static_cast<size_t>(s)], seconds);
      }
    }
  }
  if (config.cp > 1) {
    times.cp_seconds.assign(pp, std::vector<double>(static_cast<size_t>(config.dp), 0.0));
    for (int s = 0; s < config.pp; ++s)
      for (int d = 0; d < config.dp; ++d)
        times.cp_seconds[static_cast<size_t>(s)][static_cast<size_t>(d)] =
            detail::cp_ring_seconds(cluster, config, map, work.stages[static_cast<size_t>(s)], s, d);
  }
  times.tied_embedding_seconds = detail::tied_embedding_seconds(cluster, config, map, work);
  if (config.virtual_stages > 1 && config.pp > 1) {
    times.wraparound_p2p_seconds.resize(dp);
    for (int d = 0; d < config.dp_cp(); ++d)
      times.wraparound_p2p_seconds[static_cast<size_t>(d)] =
          detail::stage_boundary_seconds(cluster, config, map, work.p2p_bytes_per_microbatch, work.boundary_exchange,
                                         config.pp - 1, 0, d);
  }
  return times;
}

}  // namespace pipette
