#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/cluster.hpp"
#include "pipette/core/result.hpp"

namespace pipette {

// The link-measurement cache: what pipette-probe (and `pipette links import`) measured, read by the
// plugin and the CLI at plan time.
//
// File format, version 1. A YAML document (yaml-cpp and any YAML 1.2 reader load it) restricted
// to the shape below so that a 1024-node cache (523,776 pairs) reads in milliseconds with a
// line-oriented reader: three top-level keys, then one entry per line as a flow mapping. Comments
// (`#` lines) and blank lines may appear anywhere. Units are in the field names: GB/s = 1e9
// bytes/s (as nccl-tests reports), µs, bytes. Times are UTC ISO-8601 (`2026-12-01T17:00:00Z`).
//
//   pipette_link_cache: 1            # format version; readers reject versions they do not know
//   nodes:                           # per node; `{}` when empty
//     gpu001: {measured_at: 2026-12-01T17:00:00Z, nccl_version: 2.21.5, fingerprint: H100-SXM-80GB.8.nvswitch.8xmlx5,
//              gpus: 2, bandwidth_gb_per_s: [[0, 360], [360, 0]], latency_us: [[0, 3.1], [3.1, 0]]}
//   pairs:                           # per unordered node pair, names sorted; `{}` when empty
//     gpu001 gpu002: {measured_at: 2026-12-01T17:05:00Z, nccl_version: 2.21.5, bandwidth_gb_per_s: 45.2,
//                     latency_us: 12.3, message_bytes: [1048576, 67108864], time_us: [35.5, 1497.1]}
//
// (Each entry is on ONE line in the file; it is wrapped above only for reading.)
// Node entries: measured_at is required; nccl_version, fingerprint and the intra-node matrices
// (gpus × gpus, row = sender, diagonal ignored) are optional — a node can be known by fingerprint
// alone. Pair entries: bandwidth_gb_per_s (β, the asymptotic bandwidth of the α–β fit with every
// rail in use), latency_us (α) and measured_at are required; message_bytes/time_us hold the raw
// points (≥ 2 sizes when present, the time of one message of that size). A pair is the
// bidirectional measurement of both directions at once, so it fills both directions of the
// cluster's link matrix.
//
// Readers accept partial caches (any subset of nodes and pairs). NaN, inf, negative or zero
// bandwidths, negative latencies, malformed lines and unknown fields are errors that name the file,
// line and entry. Writers replace the file atomically (temporary file in the same directory, fsync,
// rename, fsync of the directory) and merge with what is there: per node and per pair the newer
// measured_at wins (ties: the incoming entry), nothing is dropped.

// Version 2 adds four optional pair fields (below); a file that uses none of them is written as
// version 1, so older readers keep reading it. Readers accept both versions and refuse the new
// fields in a version-1 file.
//
// Version 3 adds an optional fourth top-level key, the collective curve pipette-probe
// --collectives measures: per node count n ≥ 2, the bus bandwidth (nccl-tests' definition,
// doc/PERFORMANCE.md) of an all-reduce and an all-gather over the first n nodes of the probe's
// allocation, median over the timed iterations, at one message size (bytes per GPU):
//
//   collectives:                     # per node count; `{}` when empty
//     8: {measured_at: 2026-12-01T17:10:00Z, nccl_version: 2.21.5, message_bytes: 268435456,
//         all_reduce_bus_gb_per_s: 99.56, all_gather_bus_gb_per_s: 101.2}
//
// measured_at, message_bytes and both bandwidths are required, nccl_version is optional. Merging
// keeps the newer entry per node count, as for nodes and pairs. A file is written as version 3
// only when it has a curve (else as before), and readers refuse `collectives:` in older versions.
inline constexpr int kLinkCacheFormatVersion = 3;

struct MessageTiming {
  double message_bytes = 0;
  double time_seconds = 0;  // one message of that size
};

struct PairMeasurement {
  std::string node_a;  // node_a < node_b (byte order); write_link_cache sorts them
  std::string node_b;
  std::int64_t measured_at_unix_seconds = 0;
  std::string nccl_version;
  double bandwidth_bytes_per_second = 0;  // β
  double latency_seconds = 0;             // α
  std::vector<MessageTiming> points;      // raw measurements behind the fit
  // Version 2, optional (all four or none; 0 when not measured): one flow GPU i ↔ GPU i
  // (`rail_gb_per_s`, `rail_latency_us`) and one flow GPU i ↔ GPU j on another rail
  // (`cross_rail_gb_per_s`, `cross_rail_latency_us`), measured back to back; their ratio is what a
  // flow between rails gets through the spine of this fabric.
  double rail_bandwidth_bytes_per_second = 0;
  double rail_latency_seconds = 0;
  double cross_rail_bandwidth_bytes_per_second = 0;
  double cross_rail_latency_seconds = 0;
  bool has_cross_rail() const { return cross_rail_bandwidth_bytes_per_second > 0; }
};

struct NodeMeasurement {
  std::string name;
  std::int64_t measured_at_unix_seconds = 0;
  std::string nccl_version;
  std::string fingerprint;  // hardware_fingerprint() of the node when measured
  int gpus = 0;             // 0: no intra-node matrix recorded
  std::vector<double> bandwidth_bytes_per_second;  // gpus × gpus, row-major
  std::vector<double> latency_seconds;             // gpus × gpus, row-major
};

// One point of the collective curve, as planning reads it (LinkTable) ...
struct CollectiveBusBandwidth {
  int nodes = 0;  // ≥ 2
  std::int64_t measured_at_unix_seconds = 0;
  double message_bytes = 0;  // per GPU
  double all_reduce_bus_bytes_per_second = 0;
  double all_gather_bus_bytes_per_second = 0;
};
// ... and as the cache file holds it.
struct CollectiveMeasurement : CollectiveBusBandwidth {
  std::string nccl_version;
};

struct LinkCache {
  std::vector<NodeMeasurement> nodes;  // sorted by name after read/merge
  std::vector<PairMeasurement> pairs;  // sorted by (node_a, node_b) after read/merge
  std::vector<CollectiveMeasurement> collectives;  // sorted by node count after read/merge
};

// Reads a cache. A missing file is an error (callers decide whether that means "use priors").
Result<LinkCache> read_link_cache(const std::string& path);
Result<LinkCache> parse_link_cache(std::string_view text, const std::string& source_name);
std::string format_link_cache(const LinkCache& cache);

// Merges `incoming` into `base`: newer measured_at wins per node, per pair and per node count of
// the collective curve; nothing dropped.
LinkCache merge_link_caches(LinkCache base, const LinkCache& incoming);

// Reads the cache at `path` if it exists, merges `incoming`, and replaces the file atomically
// (with its binary index, see read_link_table).
// Concurrent writers are serialised with an flock on `path` + ".lock". Returns an error (never
// throws) naming the path and the failing step.
Result<LinkCache> update_link_cache(const std::string& path, const LinkCache& incoming);

// What planning needs from a cache, with node names interned so that assembly touches each pair
// once by index (a 1024-node cache has 523,776 pairs): no raw points, no NCCL versions.
struct LinkTable {
  struct Pair {
    std::uint32_t node_a = 0;  // indexes into names
    std::uint32_t node_b = 0;
    std::int64_t measured_at_unix_seconds = 0;
    double bandwidth_bytes_per_second = 0;
    double latency_seconds = 0;
    double rail_bandwidth_bytes_per_second = 0;  // PairMeasurement's cross-rail sample; 0: none
    double rail_latency_seconds = 0;
    double cross_rail_bandwidth_bytes_per_second = 0;
    double cross_rail_latency_seconds = 0;
  };
  struct Node {
    std::uint32_t name = 0;
    std::int64_t measured_at_unix_seconds = 0;
    std::string fingerprint;
    int gpus = 0;
    std::vector<double> bandwidth_bytes_per_second;  // gpus × gpus
    std::vector<double> latency_seconds;
  };
  std::vector<std::string> names;
  std::vector<Node> nodes;
  std::vector<Pair> pairs;
  std::vector<CollectiveBusBandwidth> collectives;  // ascending node count
  bool from_index = false;  // read from the binary index rather than by parsing the YAML
};

LinkTable link_table_of(const LinkCache& cache);

// The planning view of the cache at `path`. update_link_cache also writes `path` + ".index", a
// binary copy of this table stamped with the YAML file's size, mtime, inode and device; when the
// stamp matches the YAML as it is now, the index is read instead of the YAML (milliseconds instead
// of a second for 1024 nodes). The YAML stays the source of truth: a hand-edited, copied or
// replaced YAML no longer matches its index and is parsed; a damaged index is ignored. The index
// holds exactly what parsing the YAML gives, bit for bit, so both paths plan identically.
Result<LinkTable> read_link_table(const std::string& path);

// UTC ISO-8601 <-> Unix seconds. Accepted: YYYY-MM-DDTHH:MM:SS[.fraction](Z|+00:00).
Result<std::int64_t> parse_utc_timestamp(std::string_view text);
std::string format_utc_timestamp(std::int64_t unix_seconds);

// How much an entry measured `age_seconds` ago still counts: 1 while fresh, then halving every
// half-life, 0 past max_age (when max_age_seconds > 0). Assembly blends a measured link toward the
// site's prior with this weight, geometrically: bandwidth = measured^w · prior^(1−w), the same for
// latency. So a 2-half-lives-old 40 GB/s measurement with a 50 GB/s prior counts as 40^0.25·50^0.75.
struct StalenessPolicy {
  double fresh_for_seconds = 7 * 24 * 3600.0;
  double half_life_seconds = 14 * 24 * 3600.0;
  double max_age_seconds = 0;  // 0: never discarded, only down-weighted
};
double staleness_weight(const StalenessPolicy& policy, double age_seconds);
Link blend_toward_prior(const Link& measured, const Link& prior, double weight);

}  // namespace pipette
