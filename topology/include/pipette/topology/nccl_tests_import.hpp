#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/result.hpp"
#include "pipette/topology/alpha_beta_fit.hpp"
#include "pipette/topology/link_cache.hpp"

namespace pipette {

// Import of NVIDIA nccl-tests output (all_reduce_perf, sendrecv_perf, all_gather_perf, … — every
// *_perf binary prints the same table) for sites that already run it.
//
// The format, as printed by github.com/NVIDIA/nccl-tests (src/common.cu up to v2.13; src/util.cu
// writeDeviceReport / writeBenchmarkLinePreamble / writeBenchmarkLineBody from v2.14):
//
//   # nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703      (v2.14 and later)
//   # Collective test starting: all_reduce_perf                             (v2.14 and later)
//   # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 ...
//   #
//   # Using devices
//   #  Rank  0 Group  0 Pid  41233 on    gpu001 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
//   ...
//   #                                                              out-of-place                       in-place
//   #       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
//   #        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
//        1048576        262144     float     sum      -1    61.19   17.14   32.13       0    60.85   17.23   32.31       0
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth    : 147.2
//
// Columns are found by name in the header line, so older layouts (no `root` column; `error`, the
// largest numerical error, instead of `#wrong`), `cputime` (-C 1), the bitwise-check column and
// `N/A` in #wrong (-c 0) all read. Times are µs; algbw/busbw GB/s (1e9 bytes/s). A file may hold
// several runs one after another (a sweep over binaries or node pairs).

struct NcclTestsTiming {
  double time_seconds = 0;
  double algorithm_bytes_per_second = 0;  // algbw: size / time
  double bus_bytes_per_second = 0;        // busbw: algbw × the collective's bus factor
  long wrong_elements = -1;               // −1: not checked (N/A, or an old `error` column)
};

struct NcclTestsRow {
  int line = 0;              // 1-based line in the input, for messages
  double size_bytes = 0;     // per rank
  std::int64_t count = 0;    // elements
  std::string type;          // float, bfloat16, …
  std::string redop;         // sum, …; "" in layouts without it
  int root = -1;
  bool has_out_of_place = false;
  NcclTestsTiming out_of_place;
  NcclTestsTiming in_place;
};

struct NcclTestsRun {
  int first_line = 0;
  std::string collective;          // "all_reduce_perf" when the output says; "" otherwise
  std::string nccl_version;        // "2.27.3" from the nccl-tests version line's nccl-library; "" if absent
  std::vector<std::string> hosts;  // distinct hosts of the "#  Rank" lines, in rank order
  int ranks = 0;                   // number of "#  Rank" lines
  std::vector<NcclTestsRow> rows;
};

// Parses every run in `text`. Errors name `source_name`, the line and the column; a file with no
// result table is an error.
Result<std::vector<NcclTestsRun>> parse_nccl_tests_output(std::string_view text, const std::string& source_name);
Result<std::vector<NcclTestsRun>> read_nccl_tests_output(const std::string& path);

// The timings of a run as points for the α–β fit: per row, the bytes each rank moves over its
// bottleneck link (size × busbw/algbw — 2(n−1)/n for all-reduce, 1 for send/receive) and the
// time, both in-place and out-of-place (the fit takes their median). Rows with wrong elements are
// left out (corrupted data says nothing about bandwidth). β of the fit is then the bus bandwidth.
// Error: no row gives the bus factor (every busbw printed as 0.00), or no usable row.
Result<std::vector<TransferTiming>> bus_timings(const NcclTestsRun& run);

struct NcclTestsImportOptions {
  // The node names the run covered, in the order of its ranks' hosts. Empty: the host names the
  // output prints (gethostname() on each rank; give names when those differ from Slurm's).
  std::vector<std::string> node_names;
  std::int64_t measured_at_unix_seconds = 0;  // nccl-tests prints no date: the caller knows it
  std::string nccl_version;                   // empty: the version the output prints, else "unknown"
};

// Cache entries from one run, by the number of nodes it spans:
// - two nodes: one node-pair entry whose bandwidth is the fitted bus bandwidth. For all_reduce_perf
//   with every GPU of both nodes that is the node pair's all-rails bandwidth (the quantity
//   pipette-probe measures); for sendrecv_perf with one rank per node it is one rail's.
// - one node: a node entry whose intra-node matrix holds the fitted bus bandwidth and latency for
//   every GPU pair (all-reduce on NVSwitch machines loads every GPU pair alike).
// - more than two nodes: an error (a ring over many nodes measures its slowest link, not any pair).
Result<LinkCache> link_cache_from_nccl_tests(const NcclTestsRun& run, const NcclTestsImportOptions& options);

// "2.21.5" from an NCCL version code (ncclGetVersion, NCCL_VERSION_CODE, nccl-tests' nccl-library=):
// major·10000 + minor·100 + patch since NCCL 2.9, major·1000 + minor·100 + patch before.
std::string nccl_version_string(int version_code);

}  // namespace pipette
