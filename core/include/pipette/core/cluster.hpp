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

// The GPUs a job was given. Nodes are in Slurm's order (the order of the job's node list);
// that order is the "default placement". Inter-node links are node-pair aggregates with all
// rails (NICs) in use at once, as pipette-probe measures them.
struct Cluster {
  std::vector<std::string> node_names;
  int gpus_per_node = 0;
  int nics_per_node = 1;                    // rails; a transfer by k GPUs uses min(k, rails) of them
  GpuSpec gpu;
  std::vector<LinkMatrix> intra_node;       // per node, gpus_per_node × gpus_per_node
  LinkMatrix inter_node;                    // nodes × nodes

  int num_nodes() const { return static_cast<int>(node_names.size()); }
  int num_gpus() const { return num_nodes() * gpus_per_node; }
};

std::string validate(const Cluster& cluster);

}  // namespace pipette
