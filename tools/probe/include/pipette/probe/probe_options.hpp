#pragma once
#include <functional>
#include <string>
#include <vector>

#include "pipette/core/result.hpp"

namespace pipette::probe {

// What `pipette-probe` was asked to do (its command line).
struct ProbeOptions {
  std::string cache_path;      // --out: the link cache to merge the measurements into
  std::string rendezvous_dir;  // --rendezvous: shared directory for NCCL's unique id; empty: NCCL_COMM_ID
  std::vector<double> message_bytes = {64.0 * 1024, 1024.0 * 1024, 16.0 * 1024 * 1024, 128.0 * 1024 * 1024};
  int warmup_iterations = 5;
  int timed_iterations = 20;
  bool measure_intra_node = true;   // --no-intra turns the intra-node rounds off
  int cross_rail_rounds = 0;        // --cross-rail N: sample the node pairs of N rounds across rails
  bool measure_collectives = false;  // --collectives: the all-reduce / all-gather curve over 2, 4, … N nodes
  double collective_bytes = 256.0 * 1024 * 1024;  // --collective-size: per GPU (nccl-tests' size column)
  double timeout_seconds = 300;     // any one wait on the network longer than this aborts the probe
  bool show_help = false;
  bool show_version = false;
};

// Parses the arguments after the program name. `nccl_comm_id` is the NCCL_COMM_ID variable (or
// empty): without it, --rendezvous is required. Errors are one line naming the option.
Result<ProbeOptions> parse_probe_options(const std::vector<std::string>& args, const std::string& nccl_comm_id);
std::string probe_usage();

// "64K", "1M", "1MiB", "4096", "2G" → bytes (binary prefixes, as nccl-tests' -b/-e take them).
Result<double> parse_byte_size(const std::string& text);

// Where this process sits in the job step, from the variables srun sets for every task.
struct TaskPlacement {
  int rank = 0;        // SLURM_PROCID
  int world_size = 1;  // SLURM_NTASKS
  int local_rank = 0;  // SLURM_LOCALID: also the GPU this task drives
  int node_index = 0;  // SLURM_NODEID
  std::string node_name;  // SLURMD_NODENAME (Slurm's name for the node), else the host name
  std::string step_id;    // SLURM_JOB_ID.SLURM_STEP_ID, names the rendezvous file; "local" outside Slurm
};

using EnvironmentLookup = std::function<const char*(const char* name)>;
Result<TaskPlacement> task_placement_from_environment(const EnvironmentLookup& getenv_fn,
                                                      const std::string& host_name);

}  // namespace pipette::probe
