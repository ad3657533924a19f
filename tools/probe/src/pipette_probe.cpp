// pipette-probe: run under srun with one task per GPU. Measures every node pair (GPU i of node A
// with GPU i of node B, all rails at once) and every GPU pair inside each node with NCCL
// send/receive, fits latency + bytes / bandwidth to each, and merges the result into the link cache;
// with --collectives it also times all-reduce and all-gather over the first 2, 4, … N nodes.
// Everything that needs no GPU lives in pipette_probe_lib and is tested on the CPU; this file is
// the CUDA/NCCL shell around it.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pipette/probe/collective_curve.hpp"
#include "pipette/probe/measurement_plan.hpp"
#include "pipette/probe/probe_options.hpp"
#include "pipette/probe/probe_results.hpp"
#include "pipette/topology/hwloc_inspect.hpp"
#include "pipette/topology/link_cache.hpp"
#include "pipette/topology/nccl_tests_import.hpp"
#include "pipette/topology/version.hpp"

namespace pipette::probe {
namespace {

// Any failure: a CUDA or NCCL call, the rendezvous, the step's shape, the cache. main() prints it
// as one `pipette-probe:` line naming the rank and node.
struct ProbeFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check_cuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  throw ProbeFailure(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void check_nccl(ncclResult_t status, const char* call, ncclComm_t comm) {
  if (status == ncclSuccess) return;
  std::string message = std::string(call) + " failed: " + ncclGetErrorString(status);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && *detail != '\0') message += " (" + std::string(detail) + ")";
  throw ProbeFailure(message);
}

#define PIPETTE_CUDA(call) check_cuda((call), #call)
#define PIPETTE_NCCL(call, comm) check_nccl((call), #call, (comm))

// A dead peer or link blocks NCCL and CUDA forever. The watchdog turns that into a one-line error
// and an exit, so srun ends the step instead of holding the nodes until the job's time limit.
class Watchdog {
 public:
  explicit Watchdog(std::string who) : who_(std::move(who)), thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void arm(std::string activity, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    activity_ = std::move(activity);
    limit_seconds_ = seconds;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    armed_ = true;
  }
  void disarm() {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(500));
      if (armed_ && std::chrono::steady_clock::now() > deadline_) {
        std::fprintf(stderr, "pipette-probe: %s: timed out after %.0f s %s; a peer task, GPU or link is not responding\n",
                     who_.c_str(), limit_seconds_, activity_.c_str());
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  }

  std::string who_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool armed_ = false;
  std::string activity_;
  double limit_seconds_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;  // last: starts once everything above is constructed
};

// Arms the watchdog for one blocking step and disarms it when the step is done.
class Deadline {
 public:
  Deadline(Watchdog& watchdog, std::string activity, double seconds) : watchdog_(watchdog) {
    watchdog_.arm(std::move(activity), seconds);
  }
  ~Deadline() { watchdog_.disarm(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  Watchdog& watchdog_;
};

int select_device(int local_rank) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    throw ProbeFailure(std::string("no CUDA device visible (cudaGetDeviceCount: ") + cudaGetErrorString(status) +
                       "); run pipette-probe on GPU nodes, one task per GPU");
  }
  if (count == 1) return 0;  // Slurm bound one GPU to this task (--gpus-per-task=1 or cgroups)
  if (local_rank >= count) {
    throw ProbeFailure("this task has local rank " + std::to_string(local_rank) + " but only " + std::to_string(count) +
                       " GPUs are visible: run with --ntasks-per-node=<GPUs per node>");
  }
  return local_rank;
}

// The node's hardware fingerprint, computed the way the plugin computes it when it plans (hwloc),
// so a cache entry measured on other hardware under the same name can be recognised. Only local
// rank 0 inspects; an inspection failure costs the fingerprint, not the measurement.
std::string node_fingerprint(const TaskPlacement& task) {
  if (task.local_rank != 0) return "";
  Result<NodeInspection> inspection = inspect_local_node();
  if (!inspection) {
    std::fprintf(stderr, "pipette-probe: warning: %s: no hardware fingerprint: %s\n", task.node_name.c_str(),
                 inspection.error().message.c_str());
    return "";
  }
  return hardware_fingerprint(*inspection);
}

// NCCL's unique id reaches every rank through a file rank 0 writes on a shared directory, or,
// with NCCL_COMM_ID=host:port, every rank derives it from the variable and rank 0's
// ncclCommInitRank listens there.
ncclUniqueId rendezvous(const ProbeOptions& options, const TaskPlacement& task, Watchdog& watchdog,
                        std::string& id_file) {
  ncclUniqueId id{};
  if (options.rendezvous_dir.empty()) {
    PIPETTE_NCCL(ncclGetUniqueId(&id), nullptr);
    return id;
  }
  id_file = options.rendezvous_dir + "/pipette-probe." + task.step_id + ".id";
  if (task.rank == 0) {
    PIPETTE_NCCL(ncclGetUniqueId(&id), nullptr);
    const std::string temporary = id_file + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) throw ProbeFailure("cannot create " + temporary + ": " + std::strerror(errno) + " (is --rendezvous a writable shared directory?)");
    const bool written = ::write(fd, &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id)) && ::fsync(fd) == 0;
    const int saved_errno = errno;
    ::close(fd);
    if (!written || ::rename(temporary.c_str(), id_file.c_str()) != 0) {
      ::unlink(temporary.c_str());
      throw ProbeFailure("cannot write " + id_file + ": " + std::strerror(written ? errno : saved_errno));
    }
    return id;
  }
  Deadline deadline(watchdog, "waiting for rank 0 to write " + id_file + " (is --rendezvous shared by every node?)",
                    options.timeout_seconds);
  while (true) {
    const int fd = ::open(id_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      const ssize_t got = ::read(fd, &id, sizeof(id));
      ::close(fd);
      if (got == static_cast<ssize_t>(sizeof(id))) return id;
    } else if (errno != ENOENT) {
      throw ProbeFailure("cannot read " + id_file + ": " + std::strerror(errno));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Identity as it travels between ranks: fixed size, so one all-gather carries everyone's.
struct WireIdentity {
  std::int32_t rank = 0;
  std::int32_t node_index = 0;
  std::int32_t local_rank = 0;
  std::int32_t reserved = 0;
  char node_name[256] = {};
  char fingerprint[256] = {};
};

void copy_field(char (&field)[256], const std::string& value, const char* what) {
  if (value.size() >= sizeof(field)) throw ProbeFailure(std::string(what) + " '" + value + "' is longer than 255 bytes");
  std::memcpy(field, value.c_str(), value.size() + 1);
}

// NCCL communicator, stream, buffers and timing events of this task.
class Link {
 public:
  Link(const ncclUniqueId& id, const TaskPlacement& task, size_t max_message_bytes, int max_iterations,
       Watchdog& watchdog, double timeout_seconds)
      : watchdog_(watchdog), timeout_seconds_(timeout_seconds), rank_(task.rank) {
    PIPETTE_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    {
      Deadline deadline(watchdog_, "in ncclCommInitRank (waiting for all " + std::to_string(task.world_size) + " tasks)",
                        timeout_seconds_);
      PIPETTE_NCCL(ncclCommInitRank(&comm_, task.world_size, id, task.rank), nullptr);
    }
    PIPETTE_CUDA(cudaMalloc(&send_, max_message_bytes));
    PIPETTE_CUDA(cudaMalloc(&receive_, max_message_bytes));
    PIPETTE_CUDA(cudaMemset(send_, task.rank & 0xff, max_message_bytes));
    PIPETTE_CUDA(cudaMalloc(&scratch_, sizeof(int)));
    starts_.resize(static_cast<size_t>(max_iterations));
    stops_.resize(static_cast<size_t>(max_iterations));
    for (int i = 0; i < max_iterations; ++i) {
      PIPETTE_CUDA(cudaEventCreate(&starts_[static_cast<size_t>(i)]));
      PIPETTE_CUDA(cudaEventCreate(&stops_[static_cast<size_t>(i)]));
    }
  }
  ~Link() {
    // Teardown errors are not actionable and must not mask the error being reported.
    for (cudaEvent_t event : starts_) cudaEventDestroy(event);
    for (cudaEvent_t event : stops_) cudaEventDestroy(event);
    cudaFree(scratch_);
    cudaFree(receive_);
    cudaFree(send_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Every rank's bytes, rank-major; all ranks call it with the same size.
  std::vector<char> all_gather(const void* mine, size_t bytes, int world_size, const std::string& what) {
    void* device = nullptr;
    PIPETTE_CUDA(cudaMalloc(&device, bytes * static_cast<size_t>(world_size)));
    std::vector<char> everyone(bytes * static_cast<size_t>(world_size));
    try {
      // In place: NCCL wants this rank's part already at its own offset of the result.
      char* own_part = static_cast<char*>(device) + bytes * static_cast<size_t>(rank_);
      PIPETTE_CUDA(cudaMemcpy(own_part, mine, bytes, cudaMemcpyHostToDevice));
      PIPETTE_NCCL(ncclAllGather(own_part, device, bytes, ncclInt8, comm_, stream_), comm_);
      wait("gathering " + what);
      PIPETTE_CUDA(cudaMemcpy(everyone.data(), device, everyone.size(), cudaMemcpyDeviceToHost));
    } catch (...) {
      cudaFree(device);
      throw;
    }
    PIPETTE_CUDA(cudaFree(device));
    return everyone;
  }

  void barrier(const std::string& what) {
    PIPETTE_NCCL(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclMax, comm_, stream_), comm_);
    wait("in the barrier " + what);
  }

  int max_over_ranks(int value) {
    PIPETTE_CUDA(cudaMemcpy(scratch_, &value, sizeof(value), cudaMemcpyHostToDevice));
    PIPETTE_NCCL(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclMax, comm_, stream_), comm_);
    wait("agreeing on the outcome");
    PIPETTE_CUDA(cudaMemcpy(&value, scratch_, sizeof(value), cudaMemcpyDeviceToHost));
    return value;
  }

  // Median time of one simultaneous send+receive of `bytes` with `peer` (−1: this rank sits the
  // slot out but still joins the barriers, which keep every pair of a round on the same size at
  // the same time, so all rails of a node pair are measured loaded).
  double median_exchange_seconds(int peer, size_t bytes, int warmup, int iterations, const std::string& what) {
    return median_seconds_of(peer >= 0, [&] { exchange(peer, bytes); }, nullptr, warmup, iterations, what);
  }

  // The communicator of the ranks that pass member = true (every rank must call it, as NCCL's
  // split is collective over the whole step); nullptr for the others.
  ncclComm_t split(bool member, const std::string& what) {
    ncclComm_t subset = nullptr;
    Deadline deadline(watchdog_, "in ncclCommSplit " + what, timeout_seconds_);
    PIPETTE_NCCL(ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, rank_, &subset, nullptr), comm_);
    return subset;
  }

  // Median time of one `collective` of `bytes_per_rank` per GPU over `subset` (nullptr: this rank
  // is outside it and only joins the barriers, so every subset is timed on an otherwise idle
  // fabric). The all-gather's output is bytes_per_rank × the subset's ranks, at most the buffer.
  double median_collective_seconds(ncclComm_t subset, Collective collective, size_t bytes_per_rank, int warmup,
                                   int iterations, const std::string& what) {
    const auto run = [&] {
      if (collective == Collective::all_reduce)
        PIPETTE_NCCL(ncclAllReduce(send_, receive_, bytes_per_rank / sizeof(float), ncclFloat, ncclSum, subset, stream_), subset);
      else
        PIPETTE_NCCL(ncclAllGather(send_, receive_, bytes_per_rank, ncclInt8, subset, stream_), subset);
    };
    return median_seconds_of(subset != nullptr, run, subset, warmup, iterations, what);
  }

 private:
  // Barrier, untimed warm-up, barrier, `iterations` calls of `operation` each timed with CUDA
  // events; the median of them, or NaN where this rank does not take part (it joins the barriers).
  template <typename Operation>
  double median_seconds_of(bool takes_part, Operation operation, ncclComm_t also_watch, int warmup, int iterations,
                           const std::string& what) {
    barrier(what);
    if (takes_part) {
      for (int i = 0; i < warmup; ++i) operation();
      wait("warming up " + what, also_watch);
    }
    barrier(what);
    if (!takes_part) return std::nan("");
    for (int i = 0; i < iterations; ++i) {
      PIPETTE_CUDA(cudaEventRecord(starts_[static_cast<size_t>(i)], stream_));
      operation();
      PIPETTE_CUDA(cudaEventRecord(stops_[static_cast<size_t>(i)], stream_));
    }
    wait(what, also_watch);
    std::vector<double> seconds(static_cast<size_t>(iterations));
    for (int i = 0; i < iterations; ++i) {
      float milliseconds = 0;
      PIPETTE_CUDA(cudaEventElapsedTime(&milliseconds, starts_[static_cast<size_t>(i)], stops_[static_cast<size_t>(i)]));
      seconds[static_cast<size_t>(i)] = milliseconds * 1e-3;
    }
    return median_seconds(std::move(seconds));
  }

  void exchange(int peer, size_t bytes) {
    PIPETTE_NCCL(ncclGroupStart(), comm_);
    PIPETTE_NCCL(ncclSend(send_, bytes, ncclInt8, peer, comm_, stream_), comm_);
    PIPETTE_NCCL(ncclRecv(receive_, bytes, ncclInt8, peer, comm_, stream_), comm_);
    PIPETTE_NCCL(ncclGroupEnd(), comm_);
  }

  // Waits for the stream while watching for NCCL's asynchronous errors (a peer's network failure
  // surfaces there, not in the stream) on the step's communicator and `also_watch` (a subset's,
  // or nullptr); the watchdog bounds the wait.
  void wait(const std::string& what, ncclComm_t also_watch = nullptr) {
    Deadline deadline(watchdog_, what, timeout_seconds_);
    while (true) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) check_cuda(status, ("cudaStreamQuery while " + what).c_str());
      ncclResult_t async_error = ncclSuccess;
      PIPETTE_NCCL(ncclCommGetAsyncError(comm_, &async_error), comm_);
      if (also_watch != nullptr && (async_error == ncclSuccess || async_error == ncclInProgress))
        PIPETTE_NCCL(ncclCommGetAsyncError(also_watch, &async_error), also_watch);
      if (async_error != ncclSuccess && async_error != ncclInProgress) {
        std::string message = "NCCL failed while " + what + ": " + ncclGetErrorString(async_error);
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw ProbeFailure(message);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Watchdog& watchdog_;
  double timeout_seconds_;
  int rank_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  void* send_ = nullptr;
  void* receive_ = nullptr;
  void* scratch_ = nullptr;
  std::vector<cudaEvent_t> starts_;
  std::vector<cudaEvent_t> stops_;
};

std::string size_label(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 3) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%g %s", bytes, units[unit]);
  return text;
}

ProbeLayout gather_layout(Link& link, const TaskPlacement& task, const std::string& fingerprint) {
  WireIdentity mine;
  mine.rank = task.rank;
  mine.node_index = task.node_index;
  mine.local_rank = task.local_rank;
  copy_field(mine.node_name, task.node_name, "node name");
  copy_field(mine.fingerprint, fingerprint, "fingerprint");
  const std::vector<char> everyone = link.all_gather(&mine, sizeof(mine), task.world_size, "every task's node and GPU");
  std::vector<TaskIdentity> tasks;
  for (int rank = 0; rank < task.world_size; ++rank) {
    WireIdentity theirs;
    std::memcpy(&theirs, everyone.data() + static_cast<size_t>(rank) * sizeof(theirs), sizeof(theirs));
    theirs.node_name[sizeof(theirs.node_name) - 1] = '\0';
    theirs.fingerprint[sizeof(theirs.fingerprint) - 1] = '\0';
    tasks.push_back({theirs.rank, theirs.node_index, theirs.local_rank, theirs.node_name, theirs.fingerprint});
  }
  Result<ProbeLayout> layout = make_layout(tasks);
  if (!layout) throw ProbeFailure(layout.error().message);
  return *std::move(layout);
}

// Runs every round; returns this rank's median time per slot (NaN where it sat out).
std::vector<double> measure(Link& link, const ProbeLayout& layout, const MeasurementPlan& plan,
                            const ProbeOptions& options, int rank) {
  std::vector<double> slot_seconds(static_cast<size_t>(plan.num_slots()), std::nan(""));
  auto run_round = [&](const char* kind, int round, int rounds, int peer, auto slot_of) {
    for (int size = 0; size < plan.num_sizes(); ++size) {
      const double bytes = plan.message_bytes[static_cast<size_t>(size)];
      const std::string what = std::string(kind) + " round " + std::to_string(round + 1) + "/" + std::to_string(rounds) +
                               " at " + size_label(bytes) + (peer >= 0 ? " with rank " + std::to_string(peer) : "");
      slot_seconds[static_cast<size_t>(slot_of(round, size))] = link.median_exchange_seconds(
          peer, static_cast<size_t>(bytes), options.warmup_iterations, options.timed_iterations, what);
    }
    if (rank == 0) {
      std::printf("pipette-probe: %s round %d/%d done\n", kind, round + 1, rounds);
      std::fflush(stdout);
    }
  };
  const int inter_rounds = static_cast<int>(plan.inter_rounds.size());
  for (int round = 0; round < inter_rounds; ++round) {
    run_round("inter-node", round, inter_rounds, inter_node_peer(layout, plan, round, rank),
              [&](int r, int s) { return plan.inter_slot(r, s); });
  }
  const int intra_rounds = static_cast<int>(plan.intra_rounds.size());
  for (int round = 0; round < intra_rounds; ++round) {
    run_round("intra-node", round, intra_rounds, intra_node_peer(layout, plan, round, rank),
              [&](int r, int s) { return plan.intra_slot(r, s); });
  }
  const int cross_rail_rounds = static_cast<int>(plan.cross_rail_rounds.size());
  for (int round = 0; round < cross_rail_rounds; ++round) {
    for (const bool crossed : {false, true}) {
      run_round(crossed ? "cross-rail" : "one-rail", round, cross_rail_rounds, cross_rail_peer(layout, plan, round, crossed, rank),
                [&](int r, int s) { return plan.cross_rail_slot(r, crossed, s); });
    }
  }
  return slot_seconds;
}

// --collectives: every subset of the plan in turn, on a communicator split off for it; returns
// this rank's median time per slot (NaN outside a subset).
std::vector<double> measure_collectives(Link& link, const ProbeLayout& layout, const CollectivePlan& plan,
                                        const ProbeOptions& options, int rank) {
  std::vector<double> slot_seconds(static_cast<size_t>(plan.num_slots()), std::nan(""));
  for (int subset = 0; subset < static_cast<int>(plan.node_counts.size()); ++subset) {
    const std::string nodes = std::to_string(plan.node_counts[static_cast<size_t>(subset)]) + " nodes";
    ncclComm_t communicator = link.split(in_collective_subset(layout, plan, subset, rank), "for the collectives over " + nodes);
    try {
      for (const Collective collective : {Collective::all_reduce, Collective::all_gather}) {
        const std::string what = std::string(collective == Collective::all_reduce ? "all-reduce" : "all-gather") +
                                 " over " + nodes + " at " + size_label(plan.message_bytes);
        slot_seconds[static_cast<size_t>(plan.slot(subset, collective))] = link.median_collective_seconds(
            communicator, collective, static_cast<size_t>(plan.bytes_per_rank(subset, collective)), options.warmup_iterations,
            options.timed_iterations, what);
      }
    } catch (...) {
      if (communicator != nullptr) ncclCommAbort(communicator);
      throw;
    }
    if (communicator != nullptr) PIPETTE_NCCL(ncclCommDestroy(communicator), nullptr);
    if (rank == 0) {
      std::printf("pipette-probe: collectives over %s done\n", nodes.c_str());
      std::fflush(stdout);
    }
  }
  return slot_seconds;
}

std::vector<double> as_seconds(const std::vector<char>& gathered) {
  std::vector<double> slot_seconds(gathered.size() / sizeof(double));
  std::memcpy(slot_seconds.data(), gathered.data(), slot_seconds.size() * sizeof(double));
  return slot_seconds;
}

// Rank 0: fit, merge into the cache, report. Returns false when the cache could not be written.
bool write_results(const ProbeLayout& layout, const MeasurementPlan& plan, const std::vector<char>& gathered,
                   const CollectivePlan* collective_plan, const std::vector<char>& collective_gathered,
                   const ProbeOptions& options) {
  int version_code = 0;
  PIPETTE_NCCL(ncclGetVersion(&version_code), nullptr);
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const std::string nccl_version = nccl_version_string(version_code);
  ProbeOutcome outcome = assemble_link_cache(layout, plan, as_seconds(gathered), now, nccl_version);
  if (collective_plan != nullptr)
    outcome.cache.collectives = assemble_collective_curve(layout, *collective_plan, as_seconds(collective_gathered), now,
                                                          nccl_version, outcome.warnings);
  for (const std::string& warning : outcome.warnings) std::fprintf(stderr, "pipette-probe: warning: %s\n", warning.c_str());
  Result<LinkCache> updated = update_link_cache(options.cache_path, outcome.cache);
  if (!updated) {
    std::fprintf(stderr, "pipette-probe: %s\n", updated.error().message.c_str());
    return false;
  }
  std::vector<double> bandwidths;
  for (const PairMeasurement& pair : outcome.cache.pairs) bandwidths.push_back(pair.bandwidth_bytes_per_second / 1e9);
  std::sort(bandwidths.begin(), bandwidths.end());
  std::printf("pipette-probe: merged %zu node pairs and %zu nodes (%d GPUs each) into %s", outcome.cache.pairs.size(),
              outcome.cache.nodes.size(), layout.gpus_per_node, options.cache_path.c_str());
  if (!bandwidths.empty()) {
    std::printf("; node-pair bandwidth min %.1f, median %.1f, max %.1f GB/s", bandwidths.front(),
                bandwidths[bandwidths.size() / 2], bandwidths.back());
  }
  std::printf("\n");
  for (const CollectiveMeasurement& entry : outcome.cache.collectives)
    std::printf("pipette-probe: %d nodes: all-reduce bus bandwidth %.1f GB/s, all-gather %.1f GB/s\n", entry.nodes,
                entry.all_reduce_bus_bytes_per_second / 1e9, entry.all_gather_bus_bytes_per_second / 1e9);
  return outcome.warnings.empty();
}

int run(const ProbeOptions& options, const TaskPlacement& task) {
  if (task.world_size < 2) {
    throw ProbeFailure("only one task: run under srun with one task per GPU, e.g. srun -N 2 --ntasks-per-node=8 pipette-probe ...");
  }
  Watchdog watchdog("rank " + std::to_string(task.rank) + " on " + task.node_name);
  const int device = select_device(task.local_rank);
  PIPETTE_CUDA(cudaSetDevice(device));
  const std::string fingerprint = node_fingerprint(task);
  std::string id_file;
  const ncclUniqueId id = rendezvous(options, task, watchdog, id_file);
  const double max_bytes = std::max(*std::max_element(options.message_bytes.begin(), options.message_bytes.end()),
                                    options.measure_collectives ? options.collective_bytes : 0.0);
  Link link(id, task, static_cast<size_t>(max_bytes), options.timed_iterations, watchdog, options.timeout_seconds);
  if (task.rank == 0 && !id_file.empty()) ::unlink(id_file.c_str());  // every rank has joined: the id is spent

  const ProbeLayout layout = gather_layout(link, task, fingerprint);
  const MeasurementPlan plan =
      make_measurement_plan(layout, options.message_bytes, options.measure_intra_node, options.cross_rail_rounds);
  // Every rank derives the same layout, so a refused curve (one node) fails every rank alike.
  std::optional<CollectivePlan> collective_plan;
  if (options.measure_collectives) {
    Result<CollectivePlan> made = make_collective_plan(layout, options.collective_bytes);
    if (!made) throw ProbeFailure(made.error().message);
    collective_plan = *std::move(made);
  }
  if (task.rank == 0) {
    std::printf("pipette-probe %s: %d nodes x %d GPUs, %zu inter-node and %zu intra-node rounds, %d sizes\n",
                version(), layout.num_nodes(), layout.gpus_per_node, plan.inter_rounds.size(), plan.intra_rounds.size(),
                plan.num_sizes());
    std::fflush(stdout);
  }
  const std::vector<double> mine = measure(link, layout, plan, options, task.rank);
  // Every rank has the same plan, so all skip the gather together when there was nothing to measure
  // (one node with --no-intra).
  const std::vector<char> gathered =
      mine.empty() ? std::vector<char>{}
                   : link.all_gather(mine.data(), mine.size() * sizeof(double), task.world_size, "timings");
  std::vector<char> collective_gathered;
  if (collective_plan) {
    const std::vector<double> timings = measure_collectives(link, layout, *collective_plan, options, task.rank);
    collective_gathered = link.all_gather(timings.data(), timings.size() * sizeof(double), task.world_size, "collective timings");
  }
  int failed = 0;
  if (task.rank == 0)
    failed = write_results(layout, plan, gathered, collective_plan ? &*collective_plan : nullptr, collective_gathered, options) ? 0 : 1;
  return link.max_over_ranks(failed);  // every task exits with rank 0's verdict
}

}  // namespace
}  // namespace pipette::probe

int main(int argc, char** argv) {
  using namespace pipette::probe;
  const std::vector<std::string> args(argv + 1, argv + argc);
  const char* comm_id = std::getenv("NCCL_COMM_ID");
  pipette::Result<ProbeOptions> options = parse_probe_options(args, comm_id != nullptr ? comm_id : "");
  if (!options) {
    std::fprintf(stderr, "pipette-probe: %s\n", options.error().message.c_str());
    return 2;
  }
  if (options->show_help) {
    std::fputs(probe_usage().c_str(), stdout);
    return 0;
  }
  if (options->show_version) {
    std::printf("pipette-probe %s\n", pipette::version());
    return 0;
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  pipette::Result<TaskPlacement> task = task_placement_from_environment(std::getenv, host);
  if (!task) {
    std::fprintf(stderr, "pipette-probe: %s\n", task.error().message.c_str());
    return 2;
  }
  try {
    return run(*options, *task);
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "pipette-probe: rank %d on %s: %s\n", task->rank, task->node_name.c_str(), failure.what());
    return 1;
  }
}
