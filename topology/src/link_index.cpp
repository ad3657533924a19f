#include "link_index.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "guarded.hpp"

namespace pipette {

namespace {

// Layout, version 1 (native little-endian; other byte orders never write or read one):
//   header: magic, version, the YAML's size / mtime (ns) / inode / device, counts, and a checksum
//   of everything after the header (a damaged index is ignored, not trusted)
//   names: NUL-terminated, padded to 8 bytes
//   fingerprints: NUL-terminated per node, padded to 8 bytes
//   nodes: {u32 name, i32 gpus, i64 measured_at}
//   pairs: {u32 a, u32 b, i64 measured_at, f64 bandwidth, f64 latency, f64 rail bandwidth,
//           f64 rail latency, f64 cross-rail bandwidth, f64 cross-rail latency} (0: not measured)
//   matrices: per node with gpus > 0, gpus² bandwidths then gpus² latencies (f64)
//   collectives: {i32 nodes, u32 zero, i64 measured_at, f64 message bytes, f64 all-reduce bus
//                 bandwidth, f64 all-gather bus bandwidth}, as many as the header's collective_count
constexpr char kMagic[8] = {'P', 'I', 'P', 'L', 'I', 'N', 'K', 'X'};
constexpr std::uint32_t kIndexVersion = 4;  // 3: the cross-rail sample of a pair; 4: the collective curve

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t collective_count;
  std::uint64_t yaml_size;
  std::int64_t yaml_mtime_ns;
  std::uint64_t yaml_inode;
  std::uint64_t yaml_device;
  std::uint64_t name_count;
  std::uint64_t names_bytes;
  std::uint64_t fingerprints_bytes;
  std::uint64_t node_count;
  std::uint64_t pair_count;
  std::uint64_t matrix_values;
  std::uint64_t checksum;
};

struct NodeRecord {
  std::uint32_t name;
  std::int32_t gpus;
  std::int64_t measured_at;
};

struct PairRecord {
  std::uint32_t node_a;
  std::uint32_t node_b;
  std::int64_t measured_at;
  double bandwidth_bytes_per_second;
  double latency_seconds;
  double rail_bandwidth_bytes_per_second;
  double rail_latency_seconds;
  double cross_rail_bandwidth_bytes_per_second;
  double cross_rail_latency_seconds;
};
struct CollectiveRecord {
  std::int32_t nodes;
  std::uint32_t zero;
  std::int64_t measured_at;
  double message_bytes;
  double all_reduce_bus_bytes_per_second;
  double all_gather_bus_bytes_per_second;
};
static_assert(sizeof(PairRecord) == 64 && sizeof(NodeRecord) == 16 && sizeof(Header) == 104 && sizeof(CollectiveRecord) == 40);

// 64-bit words folded with a multiply-xor: ~2 ms for a 1024-node index, enough to catch damage.
std::uint64_t checksum_of(std::string_view payload) {
  std::uint64_t hash = 0x9E3779B97F4A7C15ULL;
  std::size_t pos = 0;
  for (; pos + 8 <= payload.size(); pos += 8) {
    std::uint64_t word;
    std::memcpy(&word, payload.data() + pos, 8);
    hash = (hash ^ word) * 0x100000001B3ULL;
    hash ^= hash >> 29;
  }
  for (; pos < payload.size(); ++pos) hash = (hash ^ static_cast<unsigned char>(payload[pos])) * 0x100000001B3ULL;
  return hash ^ (hash >> 32);
}

std::int64_t mtime_ns(const struct stat& status) {
  return static_cast<std::int64_t>(status.st_mtim.tv_sec) * 1000000000 + status.st_mtim.tv_nsec;
}

template <typename T>
void append(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}
void pad8(std::string& out) { out.append((8 - out.size() % 8) % 8, '\0'); }

// Reads fixed-size records out of the byte string, refusing to run past its end.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  bool read(T* out, std::size_t count) {
    const std::size_t size = sizeof(T) * count;
    if (count > bytes_.size() || size > bytes_.size() - pos_) return false;
    if (size == 0) return true;  // an empty vector's data() may be null
    std::memcpy(out, bytes_.data() + pos_, size);
    pos_ += size;
    return true;
  }
  bool block(std::size_t size, std::string_view& out) {
    if (size > bytes_.size() - pos_) return false;
    out = bytes_.substr(pos_, size);
    pos_ += size + (8 - size % 8) % 8;
    return pos_ <= bytes_.size();
  }
  bool at_end() const { return pos_ == bytes_.size(); }
  std::size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

bool split_strings(std::string_view block, std::size_t count, std::vector<std::string>& out) {
  out.clear();
  if (count > block.size()) return false;  // every string takes at least its NUL
  out.reserve(count);
  std::size_t pos = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const auto end = block.find('\0', pos);
    if (end == std::string_view::npos) return false;
    out.emplace_back(block.substr(pos, end - pos));
    pos = end + 1;
  }
  return true;
}

bool sane_link(double bandwidth, double latency) { return std::isfinite(bandwidth) && bandwidth > 0 && std::isfinite(latency) && latency >= 0; }

}  // namespace

LinkTable link_table_of(const LinkCache& cache) {
  LinkTable table;
  std::unordered_map<std::string_view, std::uint32_t> index;
  auto intern = [&](const std::string& name) {
    const auto [at, inserted] = index.emplace(name, static_cast<std::uint32_t>(table.names.size()));
    if (inserted) table.names.push_back(name);
    return at->second;
  };
  table.nodes.reserve(cache.nodes.size());
  for (const NodeMeasurement& node : cache.nodes)
    table.nodes.push_back({intern(node.name), node.measured_at_unix_seconds, node.fingerprint, node.gpus,
                           node.bandwidth_bytes_per_second, node.latency_seconds});
  table.pairs.reserve(cache.pairs.size());
  for (const PairMeasurement& pair : cache.pairs)
    table.pairs.push_back({intern(pair.node_a), intern(pair.node_b), pair.measured_at_unix_seconds,
                           pair.bandwidth_bytes_per_second, pair.latency_seconds, pair.rail_bandwidth_bytes_per_second,
                           pair.rail_latency_seconds, pair.cross_rail_bandwidth_bytes_per_second,
                           pair.cross_rail_latency_seconds});
  table.collectives.assign(cache.collectives.begin(), cache.collectives.end());
  return table;
}

std::string encode_link_index(const LinkTable& table, const struct stat& yaml_status) {
  std::string names, fingerprints;
  for (const auto& name : table.names) names += name + '\0';
  std::uint64_t matrix_values = 0;
  for (const auto& node : table.nodes) {
    fingerprints += node.fingerprint + '\0';
    matrix_values += 2 * node.bandwidth_bytes_per_second.size();
  }
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kIndexVersion;
  header.yaml_size = static_cast<std::uint64_t>(yaml_status.st_size);
  header.yaml_mtime_ns = mtime_ns(yaml_status);
  header.yaml_inode = static_cast<std::uint64_t>(yaml_status.st_ino);
  header.yaml_device = static_cast<std::uint64_t>(yaml_status.st_dev);
  header.name_count = table.names.size();
  header.names_bytes = names.size();
  header.fingerprints_bytes = fingerprints.size();
  header.node_count = table.nodes.size();
  header.pair_count = table.pairs.size();
  header.matrix_values = matrix_values;
  header.collective_count = static_cast<std::uint32_t>(table.collectives.size());

  std::string out;
  out.reserve(sizeof header + names.size() + fingerprints.size() + 16 + table.nodes.size() * sizeof(NodeRecord) +
              table.pairs.size() * sizeof(PairRecord) + matrix_values * sizeof(double));
  append(out, header);
  out += names;
  pad8(out);
  out += fingerprints;
  pad8(out);
  for (const auto& node : table.nodes) append(out, NodeRecord{node.name, node.gpus, node.measured_at_unix_seconds});
  for (const auto& pair : table.pairs)
    append(out, PairRecord{pair.node_a, pair.node_b, pair.measured_at_unix_seconds, pair.bandwidth_bytes_per_second,
                           pair.latency_seconds, pair.rail_bandwidth_bytes_per_second, pair.rail_latency_seconds,
                           pair.cross_rail_bandwidth_bytes_per_second, pair.cross_rail_latency_seconds});
  for (const auto& node : table.nodes) {
    out.append(reinterpret_cast<const char*>(node.bandwidth_bytes_per_second.data()),
               node.bandwidth_bytes_per_second.size() * sizeof(double));
    out.append(reinterpret_cast<const char*>(node.latency_seconds.data()), node.latency_seconds.size() * sizeof(double));
  }
  for (const auto& entry : table.collectives)
    append(out, CollectiveRecord{entry.nodes, 0, entry.measured_at_unix_seconds, entry.message_bytes,
                                 entry.all_reduce_bus_bytes_per_second, entry.all_gather_bus_bytes_per_second});
  header.checksum = checksum_of(std::string_view(out).substr(sizeof header));
  std::memcpy(out.data(), &header, sizeof header);
  return out;
}

std::optional<LinkTable> decode_link_index(std::string_view bytes, const struct stat& yaml_status) {
  if constexpr (std::endian::native != std::endian::little) return std::nullopt;
  Reader reader(bytes);
  Header header{};
  if (!reader.read(&header, 1) || std::memcmp(header.magic, kMagic, sizeof kMagic) != 0 || header.version != kIndexVersion)
    return std::nullopt;
  if (header.yaml_size != static_cast<std::uint64_t>(yaml_status.st_size) || header.yaml_mtime_ns != mtime_ns(yaml_status) ||
      header.yaml_inode != static_cast<std::uint64_t>(yaml_status.st_ino) ||
      header.yaml_device != static_cast<std::uint64_t>(yaml_status.st_dev) ||
      header.checksum != checksum_of(bytes.substr(sizeof header)))
    return std::nullopt;
  LinkTable table;
  std::string_view names, fingerprints;
  std::vector<std::string> fingerprint_list;
  if (!reader.block(header.names_bytes, names) || !split_strings(names, header.name_count, table.names)) return std::nullopt;
  if (!reader.block(header.fingerprints_bytes, fingerprints) || !split_strings(fingerprints, header.node_count, fingerprint_list))
    return std::nullopt;
  std::vector<NodeRecord> nodes(header.node_count <= bytes.size() ? header.node_count : 0);
  if (nodes.size() != header.node_count || !reader.read(nodes.data(), nodes.size())) return std::nullopt;
  if (header.pair_count > bytes.size() / sizeof(PairRecord)) return std::nullopt;
  table.pairs.resize(header.pair_count);
  static_assert(sizeof(LinkTable::Pair) == sizeof(PairRecord));
  std::vector<PairRecord> records(header.pair_count);
  if (!reader.read(records.data(), records.size())) return std::nullopt;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const PairRecord& r = records[i];
    if (r.node_a >= table.names.size() || r.node_b >= table.names.size() || !sane_link(r.bandwidth_bytes_per_second, r.latency_seconds))
      return std::nullopt;
    const bool sampled = r.cross_rail_bandwidth_bytes_per_second != 0;
    if (sampled && (!sane_link(r.rail_bandwidth_bytes_per_second, r.rail_latency_seconds) ||
                    !sane_link(r.cross_rail_bandwidth_bytes_per_second, r.cross_rail_latency_seconds)))
      return std::nullopt;
    table.pairs[i] = {r.node_a,
                      r.node_b,
                      r.measured_at,
                      r.bandwidth_bytes_per_second,
                      r.latency_seconds,
                      r.rail_bandwidth_bytes_per_second,
                      r.rail_latency_seconds,
                      r.cross_rail_bandwidth_bytes_per_second,
                      r.cross_rail_latency_seconds};
  }
  table.nodes.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeRecord& r = nodes[i];
    if (r.name >= table.names.size() || r.gpus < 0 || r.gpus > 1024) return std::nullopt;
    LinkTable::Node node{r.name, r.measured_at, std::move(fingerprint_list[i]), r.gpus, {}, {}};
    const std::size_t cells = static_cast<std::size_t>(r.gpus) * static_cast<std::size_t>(r.gpus);
    if (2 * cells * sizeof(double) > reader.remaining()) return std::nullopt;
    node.bandwidth_bytes_per_second.resize(cells);
    node.latency_seconds.resize(cells);
    if (!reader.read(node.bandwidth_bytes_per_second.data(), cells) || !reader.read(node.latency_seconds.data(), cells))
      return std::nullopt;
    table.nodes.push_back(std::move(node));
  }
  if (header.collective_count > reader.remaining() / sizeof(CollectiveRecord)) return std::nullopt;
  std::vector<CollectiveRecord> collectives(header.collective_count);
  if (!reader.read(collectives.data(), collectives.size())) return std::nullopt;
  for (const CollectiveRecord& r : collectives) {
    const auto positive = [](double value) { return std::isfinite(value) && value > 0; };
    if (r.nodes < 2 || r.zero != 0 || !positive(r.message_bytes) || !positive(r.all_reduce_bus_bytes_per_second) ||
        !positive(r.all_gather_bus_bytes_per_second) || (!table.collectives.empty() && r.nodes <= table.collectives.back().nodes))
      return std::nullopt;
    table.collectives.push_back(
        {r.nodes, r.measured_at, r.message_bytes, r.all_reduce_bus_bytes_per_second, r.all_gather_bus_bytes_per_second});
  }
  if (!reader.at_end()) return std::nullopt;
  table.from_index = true;
  return table;
}

Result<LinkTable> read_link_table(const std::string& path) {
  return guarded("link cache ", path, [&]() -> Result<LinkTable> {
    struct stat yaml_status {};
    if (::stat(path.c_str(), &yaml_status) == 0) {
      std::ifstream index(link_index_path(path), std::ios::binary);
      if (index) {
        std::string bytes;
        index.seekg(0, std::ios::end);
        const auto size = index.tellg();
        index.seekg(0);
        if (size > 0) {
          bytes.resize(static_cast<std::size_t>(size));
          index.read(bytes.data(), size);
          if (index) {
            if (auto table = decode_link_index(bytes, yaml_status)) return std::move(*table);
          }
        }
      }
    }
    auto cache = read_link_cache(path);
    if (!cache) return cache.error();
    return link_table_of(*cache);
  });
}

}  // namespace pipette
