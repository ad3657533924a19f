#include "pipette/probe/probe_options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace pipette::probe {
namespace {

constexpr double kMaxMessageBytes = 8.0 * 1024 * 1024 * 1024;

Result<long> parse_integer(const std::string& text, const std::string& what, long minimum, long maximum) {
  long value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || value < minimum || value > maximum) {
    return Error{what + ": expected an integer in [" + std::to_string(minimum) + ", " +
                 std::to_string(maximum) + "], got '" + text + "'"};
  }
  return value;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

Result<std::vector<double>> parse_size_list(const std::string& text) {
  std::vector<double> sizes;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    Result<double> size = parse_byte_size(text.substr(start, comma - start));
    if (!size) return Error{"--sizes: " + size.error().message};
    sizes.push_back(*size);
    start = comma + 1;
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (sizes.size() < 2) {
    return Error{"--sizes: give at least two distinct message sizes (e.g. 64K,128M) so latency and "
                 "bandwidth can both be fitted"};
  }
  return sizes;
}

}  // namespace

Result<double> parse_byte_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return Error{"'" + text + "' is not a size (examples: 4096, 64K, 1M, 2GiB)"};
  const std::string suffix = lowercase(text.substr(digits));
  double multiplier = 0;
  if (suffix.empty() || suffix == "b") multiplier = 1;
  else if (suffix == "k" || suffix == "kib") multiplier = 1024.0;
  else if (suffix == "m" || suffix == "mib") multiplier = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "gib") multiplier = 1024.0 * 1024 * 1024;
  else return Error{"'" + text + "': unknown unit '" + text.substr(digits) + "' (use B, K, M or G; binary)"};
  Result<long> count = parse_integer(text.substr(0, digits), "size '" + text + "'", 1, 1L << 40);
  if (!count) return count.error();
  const double bytes = static_cast<double>(*count) * multiplier;
  if (bytes > kMaxMessageBytes) return Error{"'" + text + "' is larger than the 8 GiB the probe allows"};
  return bytes;
}

std::string probe_usage() {
  return "usage: srun -N <nodes> --ntasks-per-node=<gpus per node> pipette-probe --out CACHE [options]\n"
         "\n"
         "Measures the bandwidth and latency of every node pair (GPU i of node A with GPU i of node B,\n"
         "all rails at once, in rounds scheduled so that no node is in two pairs at a time) and of every\n"
         "GPU pair inside each node, fits latency + bytes / bandwidth to each, and merges the results\n"
         "into the link cache CACHE (atomically; newer entries win, none are dropped).\n"
         "\n"
         "options:\n"
         "  --out CACHE          link cache to update (created if missing)\n"
         "  --rendezvous DIR     directory on a file system every node shares; rank 0 writes NCCL's\n"
         "                       unique id there. Not needed when NCCL_COMM_ID=host:port is set.\n"
         "  --sizes LIST         message sizes per GPU, comma-separated, at least two\n"
         "                       (default 64K,1M,16M,128M; binary units B, K, M, G)\n"
         "  --warmup N           untimed exchanges per size and pair before timing (default 5)\n"
         "  --iters N            timed exchanges per size and pair; the median counts (default 20)\n"
         "  --no-intra           skip the GPU pairs inside each node\n"
         "  --cross-rail ROUNDS  also time, for the node pairs of the first ROUNDS rounds, one flow\n"
         "                       GPU 0 <-> GPU 0 (one rail) and one GPU 0 <-> GPU g/2 (another rail);\n"
         "                       planning prices flows between rails by their ratio (default 0: off)\n"
         "  --collectives        also time an all-reduce and an all-gather over the first 2, 4, 8, ...\n"
         "                       nodes and over all of them, and store their bus bandwidth per node\n"
         "                       count; planning takes how collectives fall with the node count from\n"
         "                       this curve instead of the site's priors.network\n"
         "  --collective-size S  the collectives' size per GPU (default 256M; with --collectives)\n"
         "  --timeout SECONDS    abort when one exchange waits longer than this (default 300)\n"
         "  --version            print the version and exit\n"
         "  --help               this text\n"
         "\n"
         "Each task drives GPU SLURM_LOCALID (or the only GPU it sees). Node names come from\n"
         "SLURMD_NODENAME, else the host name.\n";
}

Result<ProbeOptions> parse_probe_options(const std::vector<std::string>& args, const std::string& nccl_comm_id) {
  ProbeOptions options;
  bool collective_size_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string name = arg;
    std::string value;
    bool has_inline_value = false;
    if (const size_t equals = arg.find('='); arg.starts_with("--") && equals != std::string::npos) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
      has_inline_value = true;
    }
    auto take_value = [&]() -> Result<std::string> {
      if (has_inline_value) return value;
      if (i + 1 >= args.size()) return Error{name + " needs a value (see --help)"};
      return args[++i];
    };
    if (name == "--help" || name == "-h") {
      options.show_help = true;
      return options;
    }
    if (name == "--version") {
      options.show_version = true;
      return options;
    }
    if (name == "--no-intra" || name == "--collectives") {
      if (has_inline_value) return Error{name + " takes no value (got '" + arg + "')"};
      if (name == "--no-intra") options.measure_intra_node = false;
      else options.measure_collectives = true;
      continue;
    }
    if (name != "--out" && name != "--rendezvous" && name != "--sizes" && name != "--warmup" &&
        name != "--iters" && name != "--timeout" && name != "--cross-rail" && name != "--collective-size") {
      return Error{"unknown option '" + arg + "' (see --help)"};
    }
    Result<std::string> taken = take_value();
    if (!taken) return taken.error();
    const std::string& text = *taken;
    if (name == "--out") {
      if (text.empty()) return Error{"--out needs a file name"};
      options.cache_path = text;
    } else if (name == "--rendezvous") {
      if (text.empty()) return Error{"--rendezvous needs a directory"};
      options.rendezvous_dir = text;
    } else if (name == "--sizes") {
      Result<std::vector<double>> sizes = parse_size_list(text);
      if (!sizes) return sizes.error();
      options.message_bytes = *sizes;
    } else if (name == "--warmup") {
      Result<long> count = parse_integer(text, "--warmup", 0, 10000);
      if (!count) return count.error();
      options.warmup_iterations = static_cast<int>(*count);
    } else if (name == "--iters") {
      Result<long> count = parse_integer(text, "--iters", 3, 100000);
      if (!count) return count.error();
      options.timed_iterations = static_cast<int>(*count);
    } else if (name == "--collective-size") {
      Result<double> bytes = parse_byte_size(text);
      if (!bytes) return Error{"--collective-size: " + bytes.error().message};
      options.collective_bytes = *bytes;
      collective_size_given = true;
    } else if (name == "--cross-rail") {
      Result<long> rounds = parse_integer(text, "--cross-rail", 0, 1 << 20);
      if (!rounds) return rounds.error();
      options.cross_rail_rounds = static_cast<int>(*rounds);
    } else {
      Result<long> seconds = parse_integer(text, "--timeout", 1, 86400);
      if (!seconds) return seconds.error();
      options.timeout_seconds = static_cast<double>(*seconds);
    }
  }
  if (options.cache_path.empty()) return Error{"--out CACHE is required: the link cache to update"};
  if (collective_size_given && !options.measure_collectives)
    return Error{"--collective-size is the size of --collectives' measurements: add --collectives or drop it"};
  if (options.rendezvous_dir.empty() && nccl_comm_id.empty()) {
    return Error{"--rendezvous DIR (a directory every node shares) is required unless NCCL_COMM_ID=host:port is set"};
  }
  return options;
}

Result<TaskPlacement> task_placement_from_environment(const EnvironmentLookup& getenv_fn,
                                                      const std::string& host_name) {
  TaskPlacement placement;
  auto read = [&](const char* variable, int fallback, long minimum) -> Result<int> {
    const char* text = getenv_fn(variable);
    if (text == nullptr) return fallback;
    Result<long> value = parse_integer(text, variable, minimum, 1L << 24);
    if (!value) return value.error();
    return static_cast<int>(*value);
  };
  const bool in_slurm = getenv_fn("SLURM_PROCID") != nullptr;
  for (const char* variable : {"SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID"}) {
    if (in_slurm && getenv_fn(variable) == nullptr) {
      return Error{std::string("SLURM_PROCID is set but ") + variable + " is not: run pipette-probe under srun"};
    }
  }
  Result<int> rank = read("SLURM_PROCID", 0, 0);
  Result<int> world = read("SLURM_NTASKS", 1, 1);
  Result<int> local = read("SLURM_LOCALID", 0, 0);
  Result<int> node = read("SLURM_NODEID", 0, 0);
  for (const Result<int>* value : {&rank, &world, &local, &node}) {
    if (!*value) return value->error();
  }
  placement.rank = *rank;
  placement.world_size = *world;
  placement.local_rank = *local;
  placement.node_index = *node;
  if (placement.rank >= placement.world_size) {
    return Error{"SLURM_PROCID=" + std::to_string(placement.rank) + " is not below SLURM_NTASKS=" +
                 std::to_string(placement.world_size)};
  }
  const char* slurm_node = getenv_fn("SLURMD_NODENAME");
  placement.node_name = (slurm_node != nullptr && *slurm_node != '\0') ? slurm_node : host_name;
  if (placement.node_name.empty()) return Error{"cannot name this node: SLURMD_NODENAME is unset and the host name is empty"};
  const char* job = getenv_fn("SLURM_JOB_ID");
  const char* step = getenv_fn("SLURM_STEP_ID");
  placement.step_id = job != nullptr ? std::string(job) + "." + (step != nullptr ? step : "0") : "local";
  return placement;
}

}  // namespace pipette::probe
