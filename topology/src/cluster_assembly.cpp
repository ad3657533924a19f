#include "pipette/topology/cluster_assembly.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <unordered_map>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/units.hpp"

#include "guarded.hpp"

namespace pipette {

namespace {

constexpr std::size_t kListedLinksMax = 12;  // longer lists are summarised
constexpr int kMaxNodes = 1 << 17;
// The link matrices are dense: nodes² inter-node links plus nodes × gpus² intra-node ones. A node
// list or GPU count beyond this is an error, not gigabytes allocated inside slurmstepd (about
// 9000 nodes of 8 GPUs fit).
constexpr double kMaxLinkMatrixBytes = 2.0 * (1 << 30);
constexpr double kGBps = units::gigabyte;

std::string gb_per_s(double bytes_per_second) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB/s", bytes_per_second / kGBps);
  return text;
}
std::string microseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f us", seconds / units::microsecond);
  return text;
}
std::string days(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f days", seconds / 86400.0);
  return text;
}

// The collective scaling the cache's curve gives (pipette-probe --collectives), or the prior
// unchanged, with a note saying which. The core prices every inter-node collective as ring
// all-reduce steps (a distributed optimizer's reduce-scatter + all-gather too, communication.cpp),
// so the all-reduce curve sets the factors; the all-gather curve is reported beside it. Each
// factor is the all-reduce bus bandwidth over n nodes relative to the 2-node point, which is the
// pair the inter-node links hold (a curve without a 2-node point says nothing relative to them
// and is not used). Like a link, a point is blended toward the prior with the staleness weight of
// the older of its two measurements: factor = measured^w · prior^(1−w), ignored at w = 0.
CollectiveScaling scaling_from_curve(const std::vector<CollectiveBusBandwidth>& curve, const CollectiveScaling& prior,
                                     const StalenessPolicy& staleness, std::int64_t now, std::vector<std::string>& notes) {
  if (curve.empty()) return prior;
  const auto pair_point = std::find_if(curve.begin(), curve.end(), [](const CollectiveBusBandwidth& p) { return p.nodes == 2; });
  if (pair_point == curve.end() || curve.size() < 2) {
    notes.push_back("collective scaling: the link cache's collective curve needs the 2-node point and at least one larger "
                    "count (re-run pipette-probe --collectives on 3 or more nodes); using the prior");
    return prior;
  }
  std::vector<MeasuredCollectiveFactor> falls;
  std::string points;
  for (const CollectiveBusBandwidth& point : curve) {
    if (point.nodes == 2) continue;
    const std::int64_t older = std::min(point.measured_at_unix_seconds, pair_point->measured_at_unix_seconds);
    const double weight = staleness_weight(staleness, static_cast<double>(now - older));
    if (!(weight > 0)) continue;
    const double measured = point.all_reduce_bus_bytes_per_second / pair_point->all_reduce_bus_bytes_per_second;
    const double prior_factor = prior.bandwidth_factor(point.nodes);
    falls.push_back({point.nodes, weight >= 1 ? measured : prior_factor * std::pow(measured / prior_factor, weight)});
    char text[96];
    std::snprintf(text, sizeof text, "%s%d nodes %.2f (all-gather %.2f)%s", points.empty() ? "" : ", ", point.nodes,
                  measured, point.all_gather_bus_bytes_per_second / pair_point->all_gather_bus_bytes_per_second,
                  weight < 1 ? " stale, blended toward the prior" : "");
    points += text;
  }
  if (falls.empty()) {
    notes.push_back("collective scaling: the link cache's collective curve is past links.max_age_hours; using the prior");
    return prior;
  }
  CollectiveScaling measured = measured_collective_scaling(std::move(falls));
  char fit[96];
  std::snprintf(fit, sizeof fit, "; beyond %d nodes exponent %.3f (fitted to the curve)", measured.measured.back().nodes,
                measured.contention_exponent);
  notes.push_back("collective scaling: measured by pipette-probe --collectives, all-reduce bus bandwidth relative to 2 nodes (" +
                  gb_per_s(pair_point->all_reduce_bus_bytes_per_second) + "): " + points + fit);
  return measured;
}

// A prior for every GPU pair inside one node, and a sentence saying where it came from.
struct IntraNodePrior {
  LinkMatrix links;
  std::string source;
  bool full_mesh = false;  // Cluster::intra_node_full_mesh
  // What the board's NVSwitches give an all-reduce (BoardFabric::nvls_all_reduce_speedup): as the
  // catalog builds the board, unless hwloc shows GPUs wired to each other directly (hwloc without
  // NVML shows no NVLink at all, which says nothing). Used where the pairs are measured.
  double nvls_all_reduce_speedup = 1;
};

// Whether every pair of the node's GPUs has NVLinks of its own: what hwloc shows (no NVSwitch and
// an NVLink between every two GPUs), else the board the GPU catalog knows.
bool every_pair_wired(const NodeInspection* local, const BoardFabric& board) {
  const int local_gpus = local ? static_cast<int>(local->gpus.size()) : 0;
  if (local_gpus > 0 && local->interconnect == GpuInterconnect::nvswitch) return false;
  if (local_gpus > 0 && !local->nvlink_bandwidth_bytes_per_second.empty()) {
    for (int from = 0; from < local_gpus; ++from)
      for (int to = 0; to < local_gpus; ++to)
        if (from != to && !(local->nvlink_bandwidth_bytes_per_second[static_cast<std::size_t>(from) * local_gpus + to] > 0))
          return false;
    return true;
  }
  return board.every_pair_wired;
}

// How many GPUs one node's board holds, which decides its fabric: what hwloc counted on this node,
// else the site's priors.board_gpus, else the job's GPUs per node. A job on 4 GPUs of an 8-GPU HGX
// H100 talks over its NVSwitches, one on a 4-GPU HGX H100 over a third of each GPU's links; only
// the site can tell the CLI on a login node which it has.
int board_gpus(const AssemblyInput& input, const SiteConfig& site, int gpus) {
  const int local_gpus = input.local ? static_cast<int>(input.local->gpus.size()) : 0;
  return local_gpus > 0 ? local_gpus : site.priors.board_gpus > 0 ? site.priors.board_gpus : gpus;
}

IntraNodePrior intra_node_prior(const AssemblyInput& input, const SiteConfig& site, const std::string& gpu_model,
                                int gpus) {
  const LinkPriors& priors = site.priors;
  const int board_size = board_gpus(input, site, gpus);
  const BoardFabric board = board_fabric(gpu_model, board_size);
  const Link pcie{board.pcie_bytes_per_second * priors.attained_fraction, priors.intra_node_latency_seconds, false};
  IntraNodePrior prior{LinkMatrix(gpus, pcie), "", every_pair_wired(input.local, board)};
  const bool wired_directly = input.local != nullptr && !input.local->gpus.empty() &&
                              input.local->interconnect == GpuInterconnect::nvlink;
  if (board.fabric == IntraNodeFabric::nvswitch && !wired_directly && gpus > 1)
    prior.nvls_all_reduce_speedup = board.nvls_all_reduce_speedup;
  const auto all_pairs_at = [&](double nominal_bytes_per_second) {
    prior.links = LinkMatrix(gpus, Link{nominal_bytes_per_second * priors.attained_fraction, priors.intra_node_latency_seconds, false});
  };
  const NodeInspection* local = input.local;
  const int local_gpus = local ? static_cast<int>(local->gpus.size()) : 0;
  if (priors.intra_node_bandwidth_bytes_per_second > 0) {
    prior.links = LinkMatrix(gpus, Link{priors.intra_node_bandwidth_bytes_per_second, priors.intra_node_latency_seconds, false});
    prior.source = "the site's priors.intra_node_gb_per_s (" + gb_per_s(priors.intra_node_bandwidth_bytes_per_second) + ")";
  } else if (local && local_gpus == gpus && !local->nvlink_bandwidth_bytes_per_second.empty()) {
    for (int from = 0; from < gpus; ++from)
      for (int to = 0; to < gpus; ++to) {
        const double nvlink = local->nvlink_bandwidth_bytes_per_second[static_cast<std::size_t>(from) * gpus + to];
        if (nvlink > 0) prior.links.at(from, to).bandwidth_bytes_per_second = nvlink * priors.attained_fraction;
      }
    prior.source = "hwloc's NVLinkBandwidth matrix (PCIe " + gb_per_s(pcie.bandwidth_bytes_per_second) +
                   " where GPUs have no direct NVLink)";
  } else if (local && local->interconnect == GpuInterconnect::nvswitch && board.gpu_nvlink_bytes_per_second > 0) {
    all_pairs_at(board.gpu_nvlink_bytes_per_second);
    prior.source = "NVSwitch all-to-all at " + gpu_model + "'s NVLink rate (" +
                   gb_per_s(board.gpu_nvlink_bytes_per_second * priors.attained_fraction) + ")";
  } else if (local_gpus == 0 && board.fabric == IntraNodeFabric::nvswitch) {
    // Nothing inspected (a login node): the node is what the vendor builds for this GPU.
    all_pairs_at(board.pair_bytes_per_second);
    prior.source = gpu_model + " boards of " + std::to_string(board_size) + " GPUs are NVSwitch all-to-all (GPU catalog): " +
                   gb_per_s(board.pair_bytes_per_second * priors.attained_fraction) + " between any two";
  } else if (board.gpu_nvlink_bytes_per_second > 0 && gpus > 1) {
    // Without NVSwitch, an SXM module's links are split among its peers on the board (4×A100: 4
    // links per pair), however many of them the job uses.
    all_pairs_at(board.pair_bytes_per_second);
    prior.source = gpu_model + " is an SXM module (always NVLink-connected; hwloc without NVML cannot show it): "
                   "its NVLink split evenly over the " + std::to_string(board_size - 1) + " other GPUs of its board (" +
                   gb_per_s(board.pair_bytes_per_second * priors.attained_fraction) + ")";
  } else {
    prior.source = "PCIe (" + gb_per_s(pcie.bandwidth_bytes_per_second) + ")";
  }
  if (prior.full_mesh && gpus > 2)
    prior.source += "; every pair has NVLinks of its own, so a ring over g GPUs runs at g - 1 times its slowest pair";
  return prior;
}

Link inter_node_prior(const SiteConfig& site, int rails, int switch_level) {
  const LinkPriors& priors = site.priors;
  double factor = 1.0;
  if (switch_level >= 0 && !priors.switch_level_factors.empty()) {
    factor = priors.switch_level_factors[std::min<std::size_t>(static_cast<std::size_t>(switch_level),
                                                               priors.switch_level_factors.size() - 1)];
  } else if (switch_level < 0 && !priors.switch_level_factors.empty()) {
    factor = priors.switch_level_factors.back();
  }
  return Link{priors.nic_bandwidth_bytes_per_second * priors.attained_fraction * rails * factor,
              priors.inter_node_latency_seconds, false};
}

// Which GPU spec the cluster has: explicit name, else what hwloc saw, else the site's `gpu`.
Result<GpuSpec> resolve_gpu(const AssemblyInput& input, const SiteConfig& site, std::vector<std::string>& notes) {
  std::string name = input.gpu;
  std::string origin = "the requested GPU";
  if (name.empty() && input.local && !input.local->gpus.empty()) {
    const InspectedGpu& first = input.local->gpus.front();
    if (first.model.empty() && site.gpu.empty()) {
      char id[16];
      std::snprintf(id, sizeof id, "10de:%04x", static_cast<unsigned>(first.pci_device_id));
      return Error{std::string("GPU ") + id + " (PCI " + first.pci_bus_id +
                   ") is not in Pipette's PCI device table; set `gpu:` in the site file to its catalog name"};
    }
    name = first.model;
    origin = "hwloc (PCI device id)";
  }
  if (name.empty()) {
    name = site.gpu;
    origin = "the site file's `gpu`";
  }
  if (name.empty())
    return Error{"no GPU model: this node shows no NVIDIA GPU and the site file sets no `gpu:`; set it (e.g. gpu: H100-SXM) "
                 "or pass the GPU model"};
  const GpuSpec* spec = find_site_gpu(site, name);
  if (!spec) {
    std::string known;
    for (const GpuSpec& gpu : gpu_catalog()) known += (known.empty() ? "" : ", ") + gpu.name;
    for (const GpuSpec& gpu : site.gpus)
      if (!find_gpu(gpu.name)) known += ", " + gpu.name;
    return Error{"GPU model '" + name + "' (from " + origin + ") is not in the catalog; use one of " + known +
                 ", or describe it under `gpus:` in the site file"};
  }
  notes.push_back("GPU " + spec->name + " from " + origin);
  return *spec;
}

}  // namespace

Result<AssembledCluster> assemble_cluster(const AssemblyInput& input, const SiteConfig& site) {
  return guarded("cluster assembly", std::string(), [&]() -> Result<AssembledCluster> {
    AssembledCluster out;
    Cluster& cluster = out.cluster;
    const int nodes = static_cast<int>(input.node_names.size());
    if (nodes == 0) return Error{"the node list is empty; give the job's nodes (Slurm hostlist)"};
    if (nodes > kMaxNodes) return Error{"the node list has " + std::to_string(nodes) + " nodes; Pipette plans at most " + std::to_string(kMaxNodes)};

    std::unordered_map<std::string_view, int> index_of_node;
    index_of_node.reserve(static_cast<std::size_t>(nodes) * 2);
    for (int i = 0; i < nodes; ++i) {
      const std::string& name = input.node_names[static_cast<std::size_t>(i)];
      if (name.empty()) return Error{"the node list has an empty name at position " + std::to_string(i)};
      if (!index_of_node.emplace(name, i).second) return Error{"node " + name + " appears twice in the node list; list each node once"};
    }

    auto gpu = resolve_gpu(input, site, out.notes);
    if (!gpu) return gpu.error();
    cluster.gpu = *gpu;

    const int local_gpus = input.local ? static_cast<int>(input.local->gpus.size()) : 0;
    cluster.gpus_per_node = input.gpus_per_node > 0 ? input.gpus_per_node : local_gpus;
    if (cluster.gpus_per_node < 1)
      return Error{"GPUs per node unknown: hwloc finds no NVIDIA GPU here; pass the job's GPUs per node (--gpus-per-node)"};
    if (local_gpus > 0 && cluster.gpus_per_node > local_gpus)
      return Error{"the job asks for " + std::to_string(cluster.gpus_per_node) + " GPUs per node but this node has " +
                   std::to_string(local_gpus) + "; request at most " + std::to_string(local_gpus)};
    // Only the site's board_gpus can be smaller: hwloc's count was checked above.
    if (board_gpus(input, site, cluster.gpus_per_node) < cluster.gpus_per_node)
      return Error{(site.source.empty() ? std::string("the site's") : site.source + ":") + " priors.board_gpus is " +
                   std::to_string(site.priors.board_gpus) + " but the job has " +
                   std::to_string(cluster.gpus_per_node) + " GPUs per node; set it to the GPUs one node's board holds (0: "
                   "as many as the job uses)"};
    const double matrix_bytes = (static_cast<double>(nodes) * nodes +
                                 static_cast<double>(nodes) * cluster.gpus_per_node * cluster.gpus_per_node) *
                                sizeof(Link);
    if (matrix_bytes > kMaxLinkMatrixBytes) {
      char gib[32];
      std::snprintf(gib, sizeof gib, "%.1f", matrix_bytes / (1 << 30));
      return Error{std::to_string(nodes) + " nodes × " + std::to_string(cluster.gpus_per_node) + " GPUs per node need " +
                   gib + " GiB of link matrices; Pipette plans at most 2 GiB of them (about 9000 nodes of 8 GPUs)"};
    }

    const int local_nics = input.local ? static_cast<int>(input.local->nics.size()) : 0;
    cluster.nics_per_node = site.priors.rails > 0 ? site.priors.rails : std::max(1, local_nics);
    out.notes.push_back(std::to_string(cluster.nics_per_node) + " rail(s) per node from " +
                        (site.priors.rails > 0 ? std::string("the site's priors.rails")
                                               : local_nics > 0 ? "the InfiniBand/RoCE/EFA NICs hwloc found"
                                                                : "the default (no NIC found, priors.rails unset): every GPU's flows share one NIC; set "
                                                                  "priors.rails to the NICs a node has (a DGX H100 has 8, an AWS p5 32)"));
    // Which NIC each GPU uses, where this node's GPUs and NICs are the job's (every node of a job
    // is cabled alike; a rail-optimized fabric depends on it).
    if (input.local != nullptr && static_cast<int>(input.local->gpus.size()) == cluster.gpus_per_node &&
        static_cast<int>(input.local->nics.size()) == cluster.nics_per_node) {
      cluster.rails.rail_of_local_gpu = nearest_nic_of_gpus(*input.local);
      if (!cluster.rails.rail_of_local_gpu.empty()) out.notes.push_back("each GPU's rail: its nearest NIC (hwloc)");
      cluster.rails.nics_per_gpu = nics_per_gpu(*input.local);
    }
    if (cluster.nics_per_sending_gpu() > 1)
      out.notes.push_back("each GPU sends on " + std::to_string(cluster.nics_per_sending_gpu()) + " NICs (" +
                          (cluster.rails.nics_per_gpu > 0 ? std::string("the NICs nearest it, hwloc")
                                                          : std::to_string(cluster.nics_per_node) + " NICs over " +
                                                                std::to_string(cluster.gpus_per_node) + " GPUs") +
                          "), as NCCL spreads a GPU's channels");
    cluster.collective_scaling = collective_scaling_of(site.priors.network);
    cluster.rails.pxn = site.priors.nccl_pxn;
    cluster.rails.spine_extra_latency_seconds = site.priors.cross_rail_extra_latency_seconds;
    const std::vector<double>& levels = site.priors.switch_level_factors;
    cluster.rails.spine_bandwidth_fraction =
        site.priors.rail_only ? 0.0 : levels.size() > 1 ? std::min(1.0, levels[1] / levels[0]) : 1.0;
    cluster.node_names = input.node_names;

    // Priors everywhere first; measurements then replace (or, when stale, blend into) them.
    IntraNodePrior intra = intra_node_prior(input, site, cluster.gpu.name, cluster.gpus_per_node);
    cluster.intra_node.assign(static_cast<std::size_t>(nodes), intra.links);
    cluster.intra_node_full_mesh = intra.full_mesh;
    cluster.intra_node_prior_source = intra.source;
    // Without a switch tree every pair gets the first level's factor (no oversubscription assumed).
    cluster.inter_node = LinkMatrix(nodes, inter_node_prior(site, cluster.nics_per_node, 0));
    const bool per_level = input.switches != nullptr;
    if (per_level) {
      for (int a = 0; a < nodes; ++a)
        for (int b = a + 1; b < nodes; ++b) {
          const Link prior = inter_node_prior(site, cluster.nics_per_node,
                                              common_switch_level(*input.switches, cluster.node_names[a], cluster.node_names[b]));
          cluster.inter_node.at(a, b) = prior;
          cluster.inter_node.at(b, a) = prior;
        }
    }

    const std::int64_t now = input.reference_time_unix_seconds;
    std::vector<std::string> stale_lines;
    int stale_pairs = 0;
    std::vector<char> pair_measured(static_cast<std::size_t>(nodes) * nodes, 0);
    std::vector<double> cross_rail_bandwidth_ratios;  // cross-rail / rail-aligned flow, per sampled pair
    std::vector<double> cross_rail_extra_latencies;
    if (input.cache) {
      const LinkTable& table = *input.cache;
      // Each cached name is looked up once; pairs are then matched by index.
      std::vector<int> job_index_of_name(table.names.size(), -1);
      for (std::size_t k = 0; k < table.names.size(); ++k) {
        const auto found = index_of_node.find(table.names[k]);
        if (found != index_of_node.end()) job_index_of_name[k] = found->second;
      }
      for (const LinkTable::Pair& pair : table.pairs) {
        const int a = job_index_of_name[pair.node_a];
        const int b = job_index_of_name[pair.node_b];
        if (a < 0 || b < 0 || a == b) continue;
        const double age = static_cast<double>(now - pair.measured_at_unix_seconds);
        const double weight = staleness_weight(site.staleness, age);
        const Link measured{pair.bandwidth_bytes_per_second, pair.latency_seconds, true};
        const Link link = blend_toward_prior(measured, cluster.inter_node.at(a, b), weight);
        cluster.inter_node.at(a, b) = link;
        cluster.inter_node.at(b, a) = link;
        if (link.measured) {
          pair_measured[static_cast<std::size_t>(std::min(a, b)) * nodes + std::max(a, b)] = 1;
          ++out.measured_node_pairs;
        }
        if (weight < 1.0 && stale_lines.size() <= kListedLinksMax)
          stale_lines.push_back(table.names[pair.node_a] + "-" + table.names[pair.node_b] + ": measured " + days(age) +
                                " ago, weight " + std::to_string(weight).substr(0, 5) +
                                (weight > 0 ? ", blended toward the prior" : ", ignored"));
        stale_pairs += weight < 1.0;
        if (pair.cross_rail_bandwidth_bytes_per_second > 0 && weight > 0) {
          cross_rail_bandwidth_ratios.push_back(pair.cross_rail_bandwidth_bytes_per_second / pair.rail_bandwidth_bytes_per_second);
          cross_rail_extra_latencies.push_back(pair.cross_rail_latency_seconds - pair.rail_latency_seconds);
        }
      }
      // The probe's cross-rail sample of this job's pairs replaces the fabric prior: the median
      // share a flow between rails gets of a rail-aligned one, and the median latency it adds.
      if (!cross_rail_bandwidth_ratios.empty()) {
        const auto median = [](std::vector<double> values) {
          std::sort(values.begin(), values.end());
          const std::size_t middle = values.size() / 2;
          return values.size() % 2 == 1 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
        };
        RailFabric& rails = cluster.rails;
        if (!site.priors.rail_only) rails.spine_bandwidth_fraction = std::min(1.0, median(cross_rail_bandwidth_ratios));
        rails.spine_extra_latency_seconds = std::max(0.0, median(cross_rail_extra_latencies));
        rails.measured = true;
        out.notes.push_back("cross-rail flows: " + std::to_string(cross_rail_bandwidth_ratios.size()) +
                            " measured pair(s), median " + std::to_string(rails.spine_bandwidth_fraction).substr(0, 4) +
                            " of a rail-aligned flow");
      }
      cluster.collective_scaling = scaling_from_curve(table.collectives, cluster.collective_scaling, site.staleness, now, out.notes);
      const std::string local_fingerprint = input.local && local_gpus > 0 ? hardware_fingerprint(*input.local) : "";
      for (const LinkTable::Node& measurement : table.nodes) {
        const int node = job_index_of_name[measurement.name];
        if (node < 0) continue;
        const std::string& name = table.names[measurement.name];
        if (!local_fingerprint.empty() && !measurement.fingerprint.empty() && measurement.fingerprint != local_fingerprint)
          out.notes.push_back("node " + name + " was measured as " + measurement.fingerprint + " but this node is " +
                              local_fingerprint + "; re-run pipette-probe if the hardware changed");
        if (measurement.gpus == 0) continue;
        if (measurement.gpus != cluster.gpus_per_node) {
          out.notes.push_back("node " + name + ": cached intra-node matrix is " + std::to_string(measurement.gpus) + "x" +
                              std::to_string(measurement.gpus) + " but the job uses " + std::to_string(cluster.gpus_per_node) +
                              " GPUs per node; using priors inside it");
          continue;
        }
        const double age = static_cast<double>(now - measurement.measured_at_unix_seconds);
        const double weight = staleness_weight(site.staleness, age);
        if (weight <= 0) continue;
        LinkMatrix& matrix = cluster.intra_node[static_cast<std::size_t>(node)];
        for (int from = 0; from < measurement.gpus; ++from)
          for (int to = 0; to < measurement.gpus; ++to) {
            if (from == to) continue;
            const std::size_t k = static_cast<std::size_t>(from) * measurement.gpus + to;
            const Link measured{measurement.bandwidth_bytes_per_second[k], measurement.latency_seconds[k], true};
            matrix.at(from, to) = blend_toward_prior(measured, matrix.at(from, to), weight);
          }
        ++out.measured_nodes;
      }
    }

    const int pairs = nodes * (nodes - 1) / 2;
    out.assumed_node_pairs = pairs - out.measured_node_pairs;
    const std::string prior_text = "prior " + gb_per_s(site.priors.nic_bandwidth_bytes_per_second * site.priors.attained_fraction *
                                                       cluster.nics_per_node) +
                                   " (" + std::to_string(cluster.nics_per_node) + " rail(s) x " +
                                   gb_per_s(site.priors.nic_bandwidth_bytes_per_second) + " nominal x " +
                                   std::to_string(site.priors.attained_fraction).substr(0, 4) + " attained" +
                                   (per_level ? ", scaled per switch level" : "") + "), " +
                                   microseconds(site.priors.inter_node_latency_seconds);
    if (out.assumed_node_pairs > 0) {
      if (out.measured_node_pairs == 0) {
        out.links_assumed.push_back("all " + std::to_string(pairs) + " node pairs assumed: " + prior_text +
                                    (input.cache ? " (none of them is in the link cache)" : " (no link cache)"));
      } else {
        std::vector<std::string> listed;
        for (int a = 0; a < nodes && listed.size() <= kListedLinksMax; ++a)
          for (int b = a + 1; b < nodes && listed.size() <= kListedLinksMax; ++b)
            if (!pair_measured[static_cast<std::size_t>(a) * nodes + b])
              listed.push_back(cluster.node_names[a] + "-" + cluster.node_names[b] + ": not in the link cache, " +
                               gb_per_s(cluster.inter_node.at(a, b).bandwidth_bytes_per_second) + " assumed");
        if (out.assumed_node_pairs > static_cast<int>(kListedLinksMax)) {
          listed.resize(kListedLinksMax);
          listed.push_back("... " + std::to_string(out.assumed_node_pairs - static_cast<int>(kListedLinksMax)) +
                           " more node pairs assumed: " + prior_text);
        }
        out.links_assumed.insert(out.links_assumed.end(), listed.begin(), listed.end());
      }
    }
    if (stale_pairs > static_cast<int>(kListedLinksMax)) {
      stale_lines.resize(kListedLinksMax);
      stale_lines.push_back("... " + std::to_string(stale_pairs - static_cast<int>(kListedLinksMax)) + " more stale node pairs");
    }
    out.links_assumed.insert(out.links_assumed.end(), stale_lines.begin(), stale_lines.end());
    if (out.measured_nodes < nodes)
      out.links_assumed.push_back(std::to_string(nodes - out.measured_nodes) + " of " + std::to_string(nodes) +
                                  " nodes: GPU-to-GPU links inside the node assumed from " + intra.source);
    // A measured pair (pipette-probe's send/recv) is what a ring attains, and NVLink SHARP runs an
    // all-reduce faster than that. A prior stays one figure for every collective of the node: issue
    // 14 asks its NVSwitch example, all-reduces on the catalog's H100 board, to be priced at ~360
    // GB/s, and no measurement on such a job says what its rings attain.
    if (out.measured_nodes == nodes) {
      cluster.nvls_all_reduce_speedup = intra.nvls_all_reduce_speedup;
      if (cluster.nvls_all_reduce_speedup > 1) {
        char text[240];
        std::snprintf(text, sizeof text,
                      "all-reduces inside a node: NVLink SHARP at %.2fx the ring its measured GPU pairs give (%s's "
                      "NVSwitches, NCCL's cost model), where the engine's nvls switch is on",
                      cluster.nvls_all_reduce_speedup, cluster.gpu.name.c_str());
        out.notes.push_back(text);
      }
    }

    if (const std::string problem = validate(cluster); !problem.empty()) return Error{"assembled cluster is invalid: " + problem};
    return out;
  });
}

}  // namespace pipette
