#pragma once
// The published NeMo / Megatron-Bridge performance table as run records, for the calibration
// check (bench/calibrate and tests/topology/calibration_published_test.cpp): calibrate on one half
// of a stack's runs, predict the other.
#include <string>
#include <vector>

#include "pipette/core/calibration.hpp"
#include "pipette/topology/site_config.hpp"

namespace pipette {

struct PublishedSplit {
  std::vector<RunRecord> fit;       // alternate usable rows, from the first
  std::vector<RunRecord> held_out;  // the others
  std::vector<std::string> skipped; // rows the model cannot represent, with the reason
};

// Pre-training rows of ../shared/ground_truth_data/nvidia_nemo_megatron_bridge_perf_summary.csv on
// DGX-H100 whose dense model is one of our presets, without context parallelism: iteration time =
// global batch × sequence / (tokens/s per GPU × GPUs). Sequence parallelism with tp > 1 and the
// distributed optimizer with dp > 1, TP overlap and 16-bit gradient buffers, as NeMo's recipes run. `site` gives the cluster priors.
PublishedSplit nemo_dgx_h100_split(const std::string& table_path, const SiteConfig& site);

// BigScience's BLOOM-176B prototype runs on Jean Zay (A100 80GB, Megatron-DeepSpeed, fp16, ZeRO-1,
// full recompute; bench/fidelity/data/bigscience_a100_megatron_deepspeed_prototypes.csv, whose
// header names the source): a stack and a GPU the built-in constants were not fitted on. Given to
// calibrate as a user would give them: `work_dir` receives a run table and, per architecture,
// a model file of `bloom_model_file`'s layer kind at the run's hidden size, layer count and heads
// (4 x hidden MLP), and the records are read back from them. Alternate rows fit.
PublishedSplit bigscience_prototype_split(const std::string& prototypes_csv, const std::string& bloom_model_file,
                                          const SiteConfig& site, const std::string& work_dir);

}  // namespace pipette
