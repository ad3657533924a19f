#include "pipette/topology/hwloc_inspect.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "guarded.hpp"

namespace pipette {

namespace {

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kClass3dController = 0x0302;
constexpr unsigned kClassVga = 0x0300;
constexpr unsigned kClassBridgeOther = 0x0680;  // NVSwitch
constexpr double kMegabytePerSecond = 1e6;      // hwloc's NVLinkBandwidth unit (MB/s)

struct PciGpuModel {
  std::uint16_t device_id;
  const char* name;
};

// NVIDIA PCI device ids (the pci.ids database) → the name the core's catalog uses. Variants the
// catalog lacks keep their own name, so a site can describe them under `gpus:` in the site file.
// The DGX-2's V100-SXM3-32GB is the V100-SXM2-32GB die at a higher power limit: same memory and
// datasheet peaks as far as planning goes.
constexpr PciGpuModel kPciGpuModels[] = {
    {0x15f8, "P100-PCIe-16GB"}, {0x15f9, "P100-SXM2-16GB"},  {0x1db1, "V100-SXM2-16GB"},
    {0x1db4, "V100-PCIe-16GB"}, {0x1db5, "V100-SXM2-32GB"},  {0x1db6, "V100-PCIe-32GB"},
    {0x1db8, "V100-SXM2-32GB"}, {0x1df6, "V100S-PCIe-32GB"}, {0x1eb8, "T4"},
    {0x20b0, "A100-40GB"},      {0x20b2, "A100-80GB"},       {0x20b5, "A100-80GB"},
    {0x20f1, "A100-40GB"},      {0x2330, "H100-SXM"},        {0x2331, "H100-PCIe"},
    {0x2335, "H200"},           {0x26b9, "L40S"},            {0x2901, "B200"},
};

using Topology = std::unique_ptr<hwloc_topology, decltype(&hwloc_topology_destroy)>;

bool is_nvidia_gpu(hwloc_obj_t pci) {
  const auto& attributes = pci->attr->pcidev;
  const unsigned device_class = attributes.class_id;
  return attributes.vendor_id == kNvidiaVendor && (device_class == kClass3dController || device_class == kClassVga);
}

bool is_nvswitch(hwloc_obj_t pci) {
  if (pci->subtype && std::strcmp(pci->subtype, "NVSwitch") == 0) return true;
  return pci->attr->pcidev.vendor_id == kNvidiaVendor && pci->attr->pcidev.class_id == kClassBridgeOther;
}

std::string bus_id(hwloc_obj_t pci) {
  char text[32];
  const auto& a = pci->attr->pcidev;
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%01x", static_cast<unsigned>(a.domain), static_cast<unsigned>(a.bus),
                static_cast<unsigned>(a.dev), static_cast<unsigned>(a.func));
  return text;
}

// The PCI device an OS device (mlx5_0, nvml3) hangs off; nullptr when there is none.
hwloc_obj_t pci_device_of(hwloc_obj_t object) {
  for (hwloc_obj_t at = object; at; at = at->parent)
    if (at->type == HWLOC_OBJ_PCI_DEVICE) return at;
  return nullptr;
}

bool is_host_bridge(hwloc_obj_t object) {
  return object->type == HWLOC_OBJ_BRIDGE && object->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

// The first non-I/O ancestor (a NUMA-bearing Package, Group or Machine), found by walking parents:
// hwloc's common-ancestor helpers assume normal objects and crash on I/O objects.
hwloc_obj_t non_io_ancestor(hwloc_obj_t object) {
  hwloc_obj_t at = object;
  while (at && (at->type == HWLOC_OBJ_BRIDGE || at->type == HWLOC_OBJ_PCI_DEVICE || at->type == HWLOC_OBJ_OS_DEVICE ||
                at->type == HWLOC_OBJ_MISC))
    at = at->parent;
  return at;
}

int numa_node_of(hwloc_obj_t object) {
  const hwloc_obj_t anchor = non_io_ancestor(object);
  if (!anchor || !anchor->nodeset || hwloc_bitmap_iszero(anchor->nodeset)) return -1;
  return hwloc_bitmap_first(anchor->nodeset);
}

std::vector<hwloc_obj_t> ancestors(hwloc_obj_t object) {
  std::vector<hwloc_obj_t> chain;
  for (hwloc_obj_t at = object; at; at = at->parent) chain.push_back(at);
  return chain;
}

PcieDistance classify(hwloc_obj_t gpu, hwloc_obj_t nic) {
  const auto gpu_chain = ancestors(gpu);
  const auto nic_chain = ancestors(nic);
  hwloc_obj_t common = nullptr;
  std::size_t nic_steps = 0;
  for (; nic_steps < nic_chain.size() && !common; ++nic_steps)
    if (std::find(gpu_chain.begin(), gpu_chain.end(), nic_chain[nic_steps]) != gpu_chain.end()) common = nic_chain[nic_steps];
  if (!common) return PcieDistance::sys;
  if (common->type == HWLOC_OBJ_BRIDGE && !is_host_bridge(common)) {
    // Bridges strictly below the common one on each side: one each is a switch's downstream port,
    // so both devices sit on one PCIe switch (nvidia-smi's PIX); more means nested switches (PXB).
    auto bridges_below = [&](const std::vector<hwloc_obj_t>& chain) {
      int bridges = 0;
      for (hwloc_obj_t at : chain) {
        if (at == common) break;
        bridges += at->type == HWLOC_OBJ_BRIDGE;
      }
      return bridges;
    };
    return bridges_below(gpu_chain) <= 1 && bridges_below(nic_chain) <= 1 ? PcieDistance::pix : PcieDistance::pxb;
  }
  if (is_host_bridge(common)) return PcieDistance::phb;
  const hwloc_obj_t gpu_anchor = non_io_ancestor(gpu);
  const hwloc_obj_t nic_anchor = non_io_ancestor(nic);
  if (gpu_anchor && nic_anchor && gpu_anchor->nodeset && nic_anchor->nodeset &&
      hwloc_bitmap_isequal(gpu_anchor->nodeset, nic_anchor->nodeset) && hwloc_bitmap_weight(gpu_anchor->nodeset) == 1)
    return PcieDistance::node;
  return PcieDistance::sys;
}

// GPU↔GPU NVLink bandwidth from hwloc's NVLinkBandwidth matrix (only hwloc builds with NVML
// record it). Switch ports are merged and paths through them closed transitively, so GPUs behind
// NVSwitches get their GPU↔switch bandwidth.
std::vector<double> nvlink_matrix(hwloc_topology_t topology, const std::vector<hwloc_obj_t>& gpus, bool through_switches) {
  unsigned count = 1;
  hwloc_distances_s* distances = nullptr;
  if (hwloc_distances_get_by_name(topology, "NVLinkBandwidth", &count, &distances, 0) != 0 || count == 0) return {};
  if (through_switches) {
    // The closure only applies across switch ports; on direct GPU↔GPU links it would drop them.
    hwloc_distances_transform(topology, distances, HWLOC_DISTANCES_TRANSFORM_MERGE_SWITCH_PORTS, nullptr, 0);
    hwloc_distances_transform(topology, distances, HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE, nullptr, 0);
  }
  std::vector<int> gpu_index_of_object(distances->nbobjs, -1);
  bool any = false;
  for (unsigned k = 0; k < distances->nbobjs; ++k) {
    const hwloc_obj_t pci = distances->objs[k] ? pci_device_of(distances->objs[k]) : nullptr;
    const auto found = std::find(gpus.begin(), gpus.end(), pci);
    if (found != gpus.end()) {
      gpu_index_of_object[k] = static_cast<int>(found - gpus.begin());
      any = true;
    }
  }
  std::vector<double> matrix;
  if (any) {
    const std::size_t n = gpus.size();
    matrix.assign(n * n, 0.0);
    for (unsigned row = 0; row < distances->nbobjs; ++row)
      for (unsigned column = 0; column < distances->nbobjs; ++column) {
        const int from = gpu_index_of_object[row], to = gpu_index_of_object[column];
        if (from >= 0 && to >= 0 && from != to)
          matrix[static_cast<std::size_t>(from) * n + to] =
              static_cast<double>(distances->values[row * distances->nbobjs + column]) * kMegabytePerSecond;
      }
  }
  hwloc_distances_release(topology, distances);
  return matrix;
}

NodeInspection inspect(hwloc_topology_t topology) {
  NodeInspection node;
  std::vector<hwloc_obj_t> gpu_objects;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topology, nullptr); pci; pci = hwloc_get_next_pcidev(topology, pci)) {
    if (is_nvidia_gpu(pci)) gpu_objects.push_back(pci);
    if (is_nvswitch(pci)) ++node.nvswitches;
  }
  auto by_bus = [](hwloc_obj_t a, hwloc_obj_t b) { return bus_id(a) < bus_id(b); };
  std::sort(gpu_objects.begin(), gpu_objects.end(), by_bus);
  for (hwloc_obj_t pci : gpu_objects) {
    const auto device_id = static_cast<std::uint16_t>(pci->attr->pcidev.device_id);
    node.gpus.push_back({bus_id(pci), device_id, gpu_model_from_pci_device_id(device_id), numa_node_of(pci)});
  }

  std::vector<hwloc_obj_t> nic_objects;
  for (hwloc_obj_t os = hwloc_get_next_osdev(topology, nullptr); os; os = hwloc_get_next_osdev(topology, os))
    if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) nic_objects.push_back(os);
  auto nic_bus = [](hwloc_obj_t os) {
    const hwloc_obj_t pci = pci_device_of(os);
    return pci ? bus_id(pci) : std::string();
  };
  std::stable_sort(nic_objects.begin(), nic_objects.end(), [&](hwloc_obj_t a, hwloc_obj_t b) { return nic_bus(a) < nic_bus(b); });
  for (hwloc_obj_t os : nic_objects) node.nics.push_back({os->name ? os->name : "", nic_bus(os), numa_node_of(os)});
  for (hwloc_obj_t gpu : gpu_objects) {
    std::vector<PcieDistance> row;
    for (hwloc_obj_t nic : nic_objects) row.push_back(classify(gpu, nic));
    node.gpu_nic_distance.push_back(std::move(row));
  }

  node.nvlink_bandwidth_bytes_per_second = nvlink_matrix(topology, gpu_objects, node.nvswitches > 0);
  const bool matrix_has_links =
      std::any_of(node.nvlink_bandwidth_bytes_per_second.begin(), node.nvlink_bandwidth_bytes_per_second.end(),
                  [](double value) { return value > 0; });
  if (node.nvswitches > 0) {
    node.interconnect = GpuInterconnect::nvswitch;
  } else if (matrix_has_links) {
    node.interconnect = GpuInterconnect::nvlink;
  }
  return node;
}

Result<NodeInspection> load_and_inspect(const std::string& xml_path) {
  return guarded("hwloc inspection ", xml_path, [&]() -> Result<NodeInspection> {
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) return Error{"hwloc: cannot initialise a topology"};
    Topology topology(raw, &hwloc_topology_destroy);
    // Without KEEP_ALL hwloc drops every PCI device, bridge and OS device, and with them the GPUs.
    hwloc_topology_set_io_types_filter(topology.get(), HWLOC_TYPE_FILTER_KEEP_ALL);
  // Caches and Misc objects play no part in GPU/NIC placement; skipping them roughly halves the
  // load time of a big node, which the plugin pays at every job start.
  hwloc_topology_set_cache_types_filter(topology.get(), HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(topology.get(), HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(topology.get(), HWLOC_OBJ_MISC, HWLOC_TYPE_FILTER_KEEP_NONE);
  // The x86 backend binds a thread to every PU in turn to run CPUID, which waits on the scheduler
  // of a busy node; the Linux backend already gives the CPU and NUMA structure needed here.
  hwloc_topology_set_components(topology.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    if (!xml_path.empty() && hwloc_topology_set_xml(topology.get(), xml_path.c_str()) != 0)
      return Error{xml_path + ": hwloc cannot read this XML topology (" + std::strerror(errno) +
                   "); export one with `lstopo-no-graphics --of xml`"};
    if (hwloc_topology_load(topology.get()) != 0)
      return Error{(xml_path.empty() ? std::string("hwloc: cannot load this machine's topology") : xml_path + ": hwloc cannot load it") +
                   " (" + std::strerror(errno) + ")"};
    return inspect(topology.get());
  });
}

}  // namespace

const char* to_string(PcieDistance distance) {
  switch (distance) {
    case PcieDistance::pix: return "PIX";
    case PcieDistance::pxb: return "PXB";
    case PcieDistance::phb: return "PHB";
    case PcieDistance::node: return "NODE";
    case PcieDistance::sys: return "SYS";
  }
  return "SYS";
}

const char* to_string(GpuInterconnect interconnect) {
  switch (interconnect) {
    case GpuInterconnect::pcie: return "pcie";
    case GpuInterconnect::nvlink: return "nvlink";
    case GpuInterconnect::nvswitch: return "nvswitch";
  }
  return "pcie";
}

std::string gpu_model_from_pci_device_id(std::uint16_t device_id) {
  for (const auto& model : kPciGpuModels)
    if (model.device_id == device_id) return model.name;
  return {};
}

Result<NodeInspection> inspect_local_node() { return load_and_inspect(""); }

Result<NodeInspection> inspect_topology_xml(const std::string& path) {
  if (path.empty()) return Error{"hwloc XML path is empty; name an `lstopo --of xml` export"};
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    return Error{path + ": no such hwloc XML file; export one with `lstopo-no-graphics --of xml > FILE`"};
  return load_and_inspect(path);
}

std::vector<int> nearest_nic_of_gpus(const NodeInspection& node) {
  std::vector<int> rails;
  if (node.nics.empty() || node.gpu_nic_distance.size() != node.gpus.size()) return rails;
  std::vector<int> served(node.nics.size(), 0);
  for (const std::vector<PcieDistance>& row : node.gpu_nic_distance) {
    int best = 0;
    for (int nic = 1; nic < static_cast<int>(row.size()); ++nic) {
      const auto n = static_cast<size_t>(nic), b = static_cast<size_t>(best);
      if (row[n] < row[b] || (row[n] == row[b] && served[n] < served[b])) best = nic;
    }
    ++served[static_cast<size_t>(best)];
    rails.push_back(best);
  }
  return rails;
}

int nics_per_gpu(const NodeInspection& node) {
  if (node.nics.empty() || node.gpus.empty() || node.gpu_nic_distance.size() != node.gpus.size()) return 0;
  const auto nearest = [](const std::vector<PcieDistance>& distances) {
    return *std::min_element(distances.begin(), distances.end());
  };
  int fewest = static_cast<int>(node.nics.size());
  for (const std::vector<PcieDistance>& row : node.gpu_nic_distance) {
    const PcieDistance gpu_nearest = nearest(row);
    const auto first_nic = static_cast<size_t>(std::find(row.begin(), row.end(), gpu_nearest) - row.begin());
    const auto local_nics = static_cast<int>(std::count(row.begin(), row.end(), gpu_nearest));
    std::vector<PcieDistance> column;
    for (const std::vector<PcieDistance>& other : node.gpu_nic_distance) column.push_back(other[first_nic]);
    const auto local_gpus = static_cast<int>(std::count(column.begin(), column.end(), nearest(column)));
    fewest = std::min(fewest, (local_nics + local_gpus - 1) / local_gpus);
  }
  return fewest;
}

std::string hardware_fingerprint(const NodeInspection& node) {
  std::string models;
  for (const auto& gpu : node.gpus) {
    const std::string model = gpu.model.empty() ? "10de:" + std::to_string(gpu.pci_device_id) : gpu.model;
    if (models.find(model) == std::string::npos) models += (models.empty() ? "" : "+") + model;
  }
  return std::to_string(node.gpus.size()) + "x" + (models.empty() ? "none" : models) + "/" + to_string(node.interconnect) +
         "/" + std::to_string(node.nics.size()) + "xnic";
}

}  // namespace pipette
