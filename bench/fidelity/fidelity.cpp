// Model fidelity against published measurements (../shared/ground_truth_data/):
//  - megatron_sc21_table1.csv (Narayanan et al. SC21 Table 1, A100, fp16): iteration time;
//  - korthikanti2022_tables.csv Table 5 (A100): iteration time, full recompute and SP + selective;
//  - nvidia_nemo_megatron_bridge_perf_summary.csv, dense models on DGX-H100: tokens/s per GPU;
//  - ultrascale_dp_tp_scaling.csv (nanotron, H100): the 1B DP throughput (extra, never fitted) and
//    the memory panels, priced with framework nanotron's stack profile and, for comparison, with
//    the Megatron-core one (stack_time_report, memory_report).
//  - bench/fidelity/data/bloom_176b_megatron_deepspeed_a100.csv (in the repository; BigScience's
//    BLOOM-176B logs on Jean Zay, A100, Megatron-DeepSpeed): iteration time, extra, never fitted, with
//    the megatron-deepspeed stack profile and, for comparison, the Megatron-core one;
//  - bench/fidelity/data/torchtitan_llama3_8b_h100_fsdp_cp.csv (in the repository; the torchtitan
//    team's Llama 3.1 8B FSDP + CP runs, H100): peak memory, never fitted, torchtitan's profile.
//  - bench/fidelity/data/torchtitan_llama3_8b_h100_fsdp_selective.csv (in the repository; the same
//    team's eager FSDP runs with per-operator selective checkpointing): peak memory and tokens/s
//    (extra), never fitted, torchtitan's profile.
//  - bench/fidelity/data/bigscience_a100_megatron_deepspeed_prototypes.csv (in the repository; BigScience's
//    BLOOM-176B prototype runs, A100, Megatron-DeepSpeed fp16): GPU memory as nvidia-smi showed it and
//    iteration time (extra), never fitted, the megatron-deepspeed profile.
// For each row the published configuration is evaluated exactly as the search evaluates plans
// (profile_work → communication_times in Slurm's order → critical_path); rows the model cannot
// represent (LoRA, mixture-of-experts, architectures not published) are
// listed with the reason. With --fit the compute-efficiency constants are fitted on half of the
// configurations (alternate configurations of each source) and printed; the report shows the
// fitted and the held-out half separately. Context-parallel rows (the cp > 1 rows of the NeMo
// table and nvidia_nemo_long_sequence_cp.csv) are never fitted: no constant is fitted to them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/memory.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/stack_profile.hpp"
#include "pipette/core/units.hpp"
#include "pipette/topology/model_file.hpp"

namespace pipette {
namespace {

// A CSV of ../shared/ground_truth_data, or with `local` of bench/fidelity/data (tables kept in the
// repository, with '#' lines naming their sources).
std::vector<std::vector<std::string>> read_csv(const std::string& name, bool local = false) {
  const std::string path = std::string(local ? PIPETTE_FIDELITY_DATA_DIR : PIPETTE_GROUND_TRUTH_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fidelity: cannot read %s\n", path.c_str());
    std::exit(1);
  }
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (local && line.rfind('#', 0) == 0) continue;
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (const char c : line) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        fields.emplace_back();
      } else {
        fields.back() += c;
      }
    }
    rows.push_back(fields);
  }
  return rows;
}

// The first number of a cell such as "4", "1 (2)", "n/a" (→ fallback).
int leading_int(const std::string& cell, int fallback) {
  try {
    size_t used = 0;
    const int value = std::stoi(cell, &used);
    return used > 0 ? value : fallback;
  } catch (...) {
    return fallback;
  }
}

double leading_double(const std::string& cell) {
  try {
    return std::stod(cell);
  } catch (...) {
    return 0;
  }
}

ModelSpec gpt(const std::string& name, int layers, int hidden, int heads, int vocab) {
  ModelSpec model;
  model.name = name;
  model.num_layers = layers;
  model.hidden_size = hidden;
  model.num_attention_heads = heads;
  model.num_kv_heads = heads;
  model.ffn_hidden_size = 4 * hidden;
  model.vocab_size = vocab;
  model.tied_embeddings = true;
  model.learned_position_embeddings = 2048;
  return model;
}

ModelSpec preset(const std::string& name) {
  const Result<ModelSpec> model = load_model(name, {std::string(PIPETTE_SOURCE_DIR) + "/etc/models"});
  if (!model.ok()) {
    std::fprintf(stderr, "fidelity: %s\n", model.error().message.c_str());
    std::exit(1);
  }
  return *model;
}

// NVIDIA's Nemotron-4 340B (arXiv 2406.11704 Table 1): squared-ReLU MLP (two matrices), GQA.
ModelSpec nemotron4_340b() {
  ModelSpec model;
  model.name = "nemotron4-340b";
  model.num_layers = 96;
  model.hidden_size = 18432;
  model.num_attention_heads = 96;
  model.num_kv_heads = 8;
  model.ffn_hidden_size = 73728;
  model.vocab_size = 256000;
  model.linear_bias = false;
  model.dropout = false;
  return model;
}

// DGX nodes as measured (ground_truth_data/nccl_bandwidth_measurements.csv): all-reduce bus
// bandwidth inside a node (A100 NVLink3 235 GB/s; H100 NVLink4 without NVLS ~367 GB/s) and per
// node pair over 8 rails (HDR ~24 GB/s per NIC; NDR ~47 GB/s per NIC).
struct System {
  const char* gpu;
  double intra_node_bytes_per_second;
  double inter_node_bytes_per_second;
  NetworkKind network = NetworkKind::infiniband;  // DGX systems: NVIDIA's InfiniBand
  // A board the catalog's GPU stands for with other memory or clocks (0: the catalog's).
  double memory_bytes = 0;
  double hbm_bytes_per_second = 0;
  double peak_16bit_flop_per_second = 0;
  int rails = 8;  // NICs per node, one rail each: a node pair's bandwidth is shared over them
};
const System dgx_a100{"A100-80GB", 235e9, 8 * 24e9};
const System dgx_h100{"H100-SXM", 367e9, 8 * 47e9};
// DGX-2: V100 NVLink2 through NVSwitch, ~130 GB/s all-reduce bus bandwidth (6 links × 25 GB/s at
// NCCL's usual ~85%); the runs used here stay inside one node.
const System dgx2_v100{"V100-SXM2-32GB", 130e9, 8 * 12e9};

// Jean Zay's A100 partition (gpu_p5), where BigScience trained BLOOM: 8 A100 80GB per node, 4
// Omni-Path links per node (github.com/bigscience-workshop/bigscience @9e64edec
// train/tr11-176B-ml/README.md l.41-47), which NCCL drives through its IB verbs transport
// (experiments/bandwidth/all_reduce_bench-a100-n4.txt l.119: "NET/IB : Using [0]hfi1_1 ... [3]hfi1_3").
// Assumed, not published: the board is an HGX A100 with NVSwitch as in a DGX A100, so the node is
// priced as dgx_a100's measured 235 GB/s. Across nodes there are two figures and neither is chosen
// (bloom_rows and bigscience_time_rows report every row under both):
//  - measured: the all-reduce bus bandwidth BigScience measured there on 4 nodes x 8 GPUs in January
//    2022, before the run (the same file, median of its 160 per-rank "busbw" lines: 40.54 Gb/s =
//    5.07 GB/s; experiments/bandwidth/README.md l.70-83), a tenth of the line rate. The README still
//    reported it on 2022-02-21 ("tried a larger number but got the same results", commit a6f804c),
//    in the week of the prototype runs (2022-02-17 to 02-24): the network those rows had;
//  - line rate: 4 x 100 Gb/s Omni-Path (Intel OPA 100 series; Jean Zay's fabric is "Intel Omni-Path
//    100 Gb/s", LMI MAG March 2020 p.27) at the share of its line rate NCCL reaches on the DGX A100's
//    HDR NICs (24 of 25 GB/s, dgx_a100 above): 4 x 12 GB/s.
const System jean_zay_a100_measured{"A100-80GB", 235e9, 40.54e9 / 8, NetworkKind::infiniband, 0, 0, 0, 4};
const System jean_zay_a100_line_rate{"A100-80GB", 235e9, 4 * 12e9, NetworkKind::infiniband, 0, 0, 0, 4};
// Both, named as the report shows them: every Jean Zay row is priced under each.
const std::pair<const char*, System> jean_zay_a100_networks[] = {
    {"network as measured in Jan 2022", jean_zay_a100_measured}, {"network at Omni-Path line rate", jean_zay_a100_line_rate}};

Cluster cluster_of(const System& system, int gpus) {
  Cluster cluster;
  const int nodes = std::max(1, gpus / 8);
  for (int node = 0; node < nodes; ++node) cluster.node_names.push_back("node" + std::to_string(node));
  cluster.gpus_per_node = std::min(gpus, 8);
  cluster.nics_per_node = system.rails;
  cluster.gpu = *find_gpu(system.gpu);
  if (system.memory_bytes > 0) cluster.gpu.memory_bytes = system.memory_bytes;
  if (system.hbm_bytes_per_second > 0) cluster.gpu.hbm_bytes_per_second = system.hbm_bytes_per_second;
  if (system.peak_16bit_flop_per_second > 0)
    cluster.gpu.peak_fp16_flop_per_second = cluster.gpu.peak_bf16_flop_per_second = system.peak_16bit_flop_per_second;
  cluster.intra_node.assign(static_cast<size_t>(nodes),
                            LinkMatrix(cluster.gpus_per_node, Link{system.intra_node_bytes_per_second, 3e-6, true}));
  cluster.inter_node = LinkMatrix(nodes, Link{system.inter_node_bytes_per_second, 6e-6, true});
  cluster.collective_scaling = collective_scaling_of(system.network);
  // Every system here is an 8-GPU board, whatever share of it a row uses.
  cluster.nvls_all_reduce_speedup = board_fabric(system.gpu, 8).nvls_all_reduce_speedup;
  return cluster;
}

enum class Metric { iteration_seconds, tokens_per_second_per_gpu, model_tflops_per_gpu };

struct Row {
  std::string source;
  std::string label;
  ModelSpec model;
  TrainingSpec training;
  ParallelConfig config;
  System system = dgx_a100;
  int gpus = 0;
  Metric metric = Metric::iteration_seconds;
  AttentionFlops attention_count = AttentionFlops::full_square;  // how a model-TFLOP/s figure counts attention
  double published = 0;
  std::string excluded;  // why the model cannot represent this row; empty when it can
  std::string group;     // identical configurations share a group (and a fit/held-out side)
  bool fit = false;
  bool extra = false;    // a source beyond the three the report must cover: never fitted
  bool held_out = false; // within its source, never in the fitting half (a model priced after the fit)
  // Excluded after the constants were fitted: the row's group keeps its place in the alternation, so
  // every other row stays on the side of the split the fit used.
  bool excluded_after_fit = false;
  RuntimeOverheads overheads;
};

ParallelConfig config_of(const ModelSpec& model, int tp, int pp, int gpus, int micro_batch, int chunks) {
  ParallelConfig config;
  config.tp = tp;
  config.pp = pp;
  config.dp = std::max(1, gpus / (tp * pp));
  config.micro_batch = micro_batch;
  config.virtual_stages = pp > 1 ? chunks : 1;
  config.layers_per_stage = balanced_layers_per_stage(model.num_layers, pp);
  return config;
}

std::string config_label(const ParallelConfig& c) {
  std::string text = "tp" + std::to_string(c.tp) + (c.cp > 1 ? " cp" + std::to_string(c.cp) : "") + " pp" +
                     std::to_string(c.pp) + " dp" + std::to_string(c.dp) +
                     " mbs" + std::to_string(c.micro_batch);
  if (c.virtual_stages > 1) text += " vp" + std::to_string(c.virtual_stages);
  if (c.ep > 1 || c.etp > 1) text += " ep" + std::to_string(c.ep) + " etp" + std::to_string(c.etp);
  if (c.recompute == RecomputeMode::full && c.recomputed_layers_per_chunk > 0) text += " recompute=" + recompute_knob(c);
  return text;
}

std::vector<Row> sc21_rows() {
  std::vector<Row> rows;
  const auto table = read_csv("megatron_sc21_table1.csv");
  for (size_t i = 1; i < table.size(); ++i) {
    const auto& f = table[i];
    Row row;
    row.source = "SC21 Table 1";
    std::string name = f[0];
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    row.model = preset("megatron-" + name);
    row.gpus = std::stoi(f[8]);
    row.training.global_batch_sequences = std::stoi(f[9]);
    row.training.sequence_length = 2048;
    row.training.precision = Precision::fp16;
    row.training.attention = AttentionKernel::unfused;
    row.training.overlap_gradient_reduce = f[12] == "torch";  // 2021's "local" DDP reduced after backward
    row.training.overlap_tensor_parallel_backward = false;    // 2021: synchronous TP all-reduces
    const int pp = std::stoi(f[6]);
    const int layers_per_chunk = leading_int(f[11], 0);
    const int chunks = layers_per_chunk > 0 ? row.model.num_layers / pp / layers_per_chunk : 1;
    row.config = config_of(row.model, std::stoi(f[5]), pp, row.gpus, std::stoi(f[10]), chunks);
    row.config.recompute = RecomputeMode::full;  // SC21's runs recompute activations
    row.published = std::stod(f[16]);
    row.label = f[0] + " " + config_label(row.config) + " B" + f[9];
    row.group = row.label;
    rows.push_back(row);
  }
  return rows;
}

std::vector<Row> korthikanti_rows() {
  std::vector<Row> rows;
  const auto table = read_csv("korthikanti2022_tables.csv");
  for (size_t i = 1; i < table.size(); ++i) {
    const auto& f = table[i];
    if (f[0] != "T3/T5" || f[10].rfind("iter_time_", 0) != 0) continue;
    Row row;
    row.source = "Korthikanti Table 5";
    row.model = gpt(f[1], std::stoi(f[4]), std::stoi(f[3]), std::stoi(f[2]), 51200);
    row.gpus = std::stoi(f[7]);
    row.training.global_batch_sequences = std::stoi(f[8]);
    row.training.sequence_length = 2048;
    row.training.precision = Precision::bf16;
    row.training.attention = AttentionKernel::unfused;
    row.config = config_of(row.model, std::stoi(f[5]), std::stoi(f[6]), row.gpus, std::stoi(f[9]), 1);
    const bool selective = f[10] == "iter_time_sp_plus_selective";
    row.config.recompute = selective ? RecomputeMode::selective : RecomputeMode::full;
    row.config.sequence_parallel = selective;
    row.published = std::stod(f[11]);
    row.label = f[1] + " " + config_label(row.config) + (selective ? " SP+selective" : " full recompute");
    row.group = f[1];  // both recompute modes of one model stay on one side of the split
    rows.push_back(row);
  }
  return rows;
}

bool nemo_moe_name(const std::string& name) {
  for (const char* family : {"Qwen3_30B", "Qwen3_235B", "DeepSeek", "GPT OSS", "Kimi", "Nemotron_3", "Mixtral"})
    if (name.find(family) != std::string::npos) return true;
  return false;
}

// NeMo / Megatron-Bridge model names → our presets; otherwise why the row is not representable.
std::string nemo_model(const std::string& name, ModelSpec& model) {
  static const std::map<std::string, std::string> presets = {
      {"LLAMA3_8B", "llama3-8b"},    {"LLAMA3-8B", "llama3-8b"},     {"LLAMA3_70B", "llama3-70b"},
      {"LLAMA3-70B", "llama3-70b"},  {"LLAMA3.1_405B", "llama3-405b"}, {"LLAMA2-7B", "llama2-7b"},
      {"LLAMA2-13B", "llama2-13b"},  {"LLAMA2-70B", "llama2-70b"},   {"GPT3-5B", "gpt3-5b"},
      {"GPT3-20B", "gpt3-20b"},      {"GPT3-175B", "gpt3-175b"}};
  const auto found = presets.find(name);
  if (found != presets.end()) {
    model = preset(found->second);
    return {};
  }
  if (name == "Nemotron-340B") {
    model = nemotron4_340b();
    return {};
  }
  // Token-dropping runs cap each expert's tokens (a capacity factor); the model prices dropless
  // routing with an assumed imbalance.
  if (name.find("(tokendrop)") != std::string::npos) return "token dropping (expert capacity factor) not modelled";
  static const std::map<std::string, std::string> moe_presets = {
      {"Qwen3_30B_a3B", "qwen3-30b-a3b"}, {"Qwen3_235B_a22B", "qwen3-235b-a22b"}, {"GPT OSS 120B", "gpt-oss-120b"},
      {"DeepSeekV3 (dropless)", "deepseek-v3"}};
  if (const auto moe = moe_presets.find(name); moe != moe_presets.end()) {
    model = preset(moe->second);
    return {};
  }
  if (nemo_moe_name(name)) return "mixture-of-experts without a preset";
  return "architecture not published in our sources";
}

// A NeMo / Megatron-Bridge H100 recipe's layout and settings on `row` (its model, GPUs and
// precision set): the published tp/cp/pp/vp, SP with TP, the distributed optimizer over dp x cp.
void apply_nemo_h100_recipe(Row& row, int tp, int cp, int pp, int micro_batch, int vp) {
  row.config = config_of(row.model, tp, pp, row.gpus / cp, micro_batch, vp);
  row.config.cp = cp;
  row.config.sequence_parallel = tp > 1;
  row.config.distributed_optimizer = row.config.dp_cp() > 1;
  row.training.overlap_tensor_parallel_communication = tp > 1;  // NeMo's H100 recipes use userbuffers
  row.training.gradients_in_fp32 = false;  // Megatron-core's default: the grad buffer in the param dtype
  row.overheads.expandable_segments = true;  // every Megatron-Bridge recipe sets it
  row.training.fp8_parameters = row.training.precision == Precision::fp8;  // its fp8 recipes gather fp8 params
}

// DeepSeek-V3 on DGX-H100 (the 25.09 "dropless" row), held out: it came with the MLA model, after
// the constants were fitted. What the table does not say, from Megatron-Bridge's H100 recipes
// (@067f987d): perf_recipes/deepseek/h100/deepseek_v3.py l.28-51 runs tp 2, pp 8, vp 4, ep 64,
// SP, mbs 1 with the layout "Et|(tt|)*30mL": 32 chunks, the first with one layer, the last with
// the MTP layer and the loss and no decoder layer, so pipeline ranks hold 7, 8 x 6, 6 layers (rank
// r: chunks r, r + 8, r + 16, r + 24); recipes/deepseek/h100/deepseek_v3.py l.132 sets etp 1. It
// turns the gradient-reduce overlap off (l.45-46). Not priced as run:
//  - the MTP layer and its second LM-head pass on the last rank (mtp_num_layers 1, l.136-138 of
//    the recipe): one MoE layer and one head more than priced there;
//  - recompute_modules ["mla_up_proj", "mlp"] under selective granularity (l.43; common.py
//    l.35): neither is a Pipette recompute mode, priced as no recompute (its re-run forwards are
//    missing from the time, its savings from the memory);
//  - HybridEP's flex dispatcher (apply_flex_dispatcher_backend picks it on Hopper,
//    training/flex_dispatcher_backend.py l.70-84), priced as the alltoall dispatcher's volumes;
//  - chunks of unequal size on ranks 0 and 7 (1 + 2 + 2 + 2, 2 + 2 + 2 + 0), priced as equal
//    quarters of the rank's layers.
// moe_router_force_load_balancing (common.py l.37) is already applied to every MoE row.
void apply_deepseek_v3_h100_recipe(Row& row) {
  row.config.layers_per_stage = {7, 8, 8, 8, 8, 8, 8, 6};
  row.training.overlap_gradient_reduce = false;
  row.held_out = true;
}

std::vector<Row> nemo_rows() {
  std::vector<Row> rows;
  const auto table = read_csv("nvidia_nemo_megatron_bridge_perf_summary.csv");
  for (size_t i = 1; i < table.size(); ++i) {
    const auto& f = table[i];
    if (f.size() < 20 || f[4] != "DGX-H100") continue;
    Row row;
    row.source = "NeMo DGX-H100";
    row.system = dgx_h100;
    row.metric = Metric::tokens_per_second_per_gpu;
    const std::string excluded = nemo_model(f[3], row.model);
    // MoE rows form their own source, so that their groups alternate between the fitting and the
    // held-out half among themselves and leave the dense rows' split as it was. No constant is
    // fitted to them (the fit runs only with --fit).
    const bool moe = nemo_moe_name(f[3]);
    if (moe) row.source = "NeMo DGX-H100 MoE";
    row.gpus = std::stoi(f[5]);
    const std::string precision = f[6];
    row.training.precision = precision.rfind("BF16", 0) == 0 ? Precision::bf16 : Precision::fp8;
    row.training.global_batch_sequences = std::stoi(f[7]);
    row.training.sequence_length = std::stoi(f[9]);
    row.training.attention = AttentionKernel::flash;
    // The fused cross entropy: Megatron-Bridge's GPT providers turn it on (models/gpt_provider.py
    // @067f987d l.205) and its performance scripts pick Transformer Engine's kernels for it
    // (scripts/performance/utils/overrides.py l.83-84), priced as Megatron-core's native fused ones.
    row.training.cross_entropy_fusion = true;
    const int tp = leading_int(f[10], 1), pp = leading_int(f[11], 1), cp = leading_int(f[12], 1);
    const int vp = leading_int(f[13], 1);
    row.published = leading_double(f[18]);
    row.label = f[3] + " (" + f[1] + (f[2].find("SFT") != std::string::npos ? " SFT" : "") + ") " +
                std::to_string(row.gpus) + " GPUs " + (precision.empty() ? "FP8" : precision.substr(0, precision.find(' ')));
    if (!excluded.empty()) {
      row.excluded = excluded;
    } else if (f[2].find("LoRA") != std::string::npos || f[20].find("LoRA") != std::string::npos) {
      row.excluded = "LoRA fine-tuning (frozen weights) not modelled";
    } else if (f[2].find("SFT") != std::string::npos || f[20].find("SFT") != std::string::npos) {
      row.excluded = "fine-tuning on packed variable-length sequences not modelled";
    } else if (leading_int(f[16], 0) > 0) {
      // The fsdp column: the run sharded weights and gradients too (Megatron-FSDP). On DGX-H100 that
      // is Llama-3 8B fp8 in 25.09 (Megatron-Bridge r0.1.0 scripts/performance/configs/llama3/
      // llama3_8b_llm_pretrain.yaml l.73-77: use_megatron_fsdp true, nccl_ub true) and 25.11
      // (r0.2.0 docs/performance-summary.md l.90: FSDP 1), which Pipette does not price.
      row.excluded = "Megatron-FSDP (fsdp " + f[16] + ") not modelled";
      row.excluded_after_fit = true;  // priced (held out) as the distributed optimizer until 2026-12-04
    } else if (const int ga = leading_int(f[17], 0), mbs = leading_int(f[8], 1), gbs = std::stoi(f[7]),
               dp = row.gpus / (tp * pp * cp);
               ga > 0 && gbs != dp * mbs * ga) {
      // A row whose batch columns contradict its layout does not say what ran. On DGX-H100 that is
      // GPT-OSS 120B in 25.11 (mbs 4, ga 2 on tp 1 pp 4: 512 is 16 x 4 x 8), whose mbs and ga are
      // those of the B200 row beside it (ep 64, dp 64: 64 x 4 x 2); the release's H100 preset keeps
      // micro-batch 1 (Megatron-Bridge r0.2.0 scripts/performance/configs/gpt_oss/
      // workload_base_configs.py l.22-28, 58-62).
      row.excluded = "batch columns disagree: gbs " + f[7] + " is not dp " + std::to_string(dp) + " x mbs " +
                     std::to_string(mbs) + " x ga " + std::to_string(ga);
      row.excluded_after_fit = true;  // priced at the table's mbs until 2026-12-04
    }
    if (cp > 1) {
      // Context-parallel rows: checked, never fitted (a source of their own).
      row.source = "NeMo DGX-H100 cp > 1";
      row.extra = true;
    }
    if (row.excluded.empty()) {
      apply_nemo_h100_recipe(row, tp, cp, pp, leading_int(f[8], 1), vp);
      // The table leaves etp empty: Megatron-Bridge's H100 Qwen3 MoE recipes set
      // expert_tensor_parallel_size = 1 (src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py
      // @04eb4f8d), and GPT-OSS runs tp = 1.
      if (moe) row.config.ep = leading_int(f[14], 1), row.config.etp = leading_int(f[15], 1);
      if (moe) {
        // Every H100 MoE recipe of Megatron-Bridge sets moe_router_force_load_balancing = True
        // (perf_recipes/qwen/h100/qwen3_moe.py and perf_recipes/gpt_oss/h100/gpt_oss.py @067f987d):
        // the router hands every expert the same number of tokens, so no imbalance.
        row.training.expert_load_imbalance_factor = 1.0;
        // GPT-OSS-120B's recipe recomputes the expert activation (recompute_granularity
        // "selective", recompute_modules ["layernorm", "moe_act"], same file); the Qwen3 recipes
        // recompute nothing (recompute_granularity None).
        row.training.recompute_moe_activation = f[3] == "GPT OSS 120B";
      }
      if (row.model.is_mla()) apply_deepseek_v3_h100_recipe(row);
      row.label += " " + config_label(row.config) + " B" + f[7] + " s" + f[9];
    }
    row.group = row.model.name + "/" + std::to_string(row.gpus) + "/" + f[7] + "/" + f[8] + "/" + f[9] + "/" + f[10] +
                "/" + f[11] + "/" + f[13] + "/" + f[2];
    rows.push_back(row);
  }
  return rows;
}

// Extra checks, never fitted. NeMo's long-sequence table (nvidia_nemo_long_sequence_cp.csv): Llama 2
// 7B in fp8 on DGX-H100 at 4K-1M tokens, the published tp/pp/dp/cp (cp = 1 up to 16K), one sequence
// per micro-batch, with the recipe settings of the NeMo rows above, compared in model TFLOP/s per
// GPU. The table does not say how it counts attention, which decides the figure at long sequences:
// every row is reported under both counts, the full s x s (SC21's, NeMo's flops formulas) and the
// causal half (Megatron-LM's today), as two sources; neither is fitted or chosen. The DGX-B200 rows
// are left out: the bench has no measured DGX-B200 links.
std::vector<Row> long_sequence_rows() {
  std::vector<Row> rows;
  const auto table = read_csv("nvidia_nemo_long_sequence_cp.csv");
  for (size_t i = 1; i < table.size(); ++i) {
    const auto& f = table[i];
    if (f.size() < 13 || f[2] != "DGX-H100") continue;
    Row row;
    row.source = "NeMo long sequence H100, full-square count (extra)";
    row.extra = true;
    row.system = dgx_h100;
    row.metric = Metric::model_tflops_per_gpu;
    row.model = preset("llama2-7b");
    row.gpus = std::stoi(f[4]);
    row.training.global_batch_sequences = std::stoi(f[5]);
    row.training.sequence_length = std::stoi(f[3]) * 1024;
    row.training.precision = Precision::fp8;
    apply_nemo_h100_recipe(row, std::stoi(f[7]), std::stoi(f[10]), std::stoi(f[8]), 1, 1);
    row.published = std::stod(f[11]);
    row.label = "LLAMA2-7B " + f[3] + "K " + config_label(row.config) + " B" + f[5];
    row.group = row.label;
    rows.push_back(row);
    row.source = "NeMo long sequence H100, causal count (extra)";
    row.attention_count = AttentionFlops::causal;
    rows.push_back(row);
  }
  return rows;
}

// Extra checks, never fitted. Megatron-Core's H100 weak-scaling table (bf16; the README's runs use
// sequence 4096 and a 131072-token vocabulary; we assume GPT-style GeLU layers, micro-batch 1, no
// interleaving, flash attention, SP, the distributed optimizer and TP overlap), compared in model
// TFLOP/s per GPU (SC21's count).
std::vector<Row> megatron_core_h100_rows() {
  std::vector<Row> rows;
  const auto table = read_csv("megatron_core_h100_weak_scaling.csv");
  for (size_t i = 1; i < table.size(); ++i) {
    const auto& f = table[i];
    Row row;
    row.source = "Megatron-Core H100 weak scaling (extra)";
    row.extra = true;
    row.system = dgx_h100;
    row.metric = Metric::model_tflops_per_gpu;
    row.model = gpt(f[0], std::stoi(f[3]), std::stoi(f[2]), std::stoi(f[1]), 131072);
    row.gpus = std::stoi(f[7]);
    row.training.global_batch_sequences = std::stoi(f[8]);
    row.training.sequence_length = 4096;
    row.training.precision = Precision::bf16;
    row.training.overlap_tensor_parallel_communication = true;
    row.config = config_of(row.model, std::stoi(f[4]), std::stoi(f[5]), row.gpus, 1, 1);
    row.config.sequence_parallel = row.config.tp > 1;
    row.config.distributed_optimizer = row.config.dp > 1;
    row.published = std::stod(f[9]);
    row.label = f[0] + " " + config_label(row.config) + " B" + f[8];
    row.group = row.label;
    rows.push_back(row);
  }
  return rows;
}

// Megatron-LM's January 2021 README scaling table (DGX-2 V100 and DGX A100, fp16, sequence 1024,
// tensor parallelism only, full recompute, the whole per-replica batch as one micro-batch).
std::vector<Row> megatron_2021_rows() {
  std::vector<Row> rows;
  const auto table = read_csv("megatron_jan2021_scaling.csv");
  for (size_t i = 1; i < table.size(); ++i) {
    const auto& f = table[i];
    Row row;
    row.source = "Megatron-LM Jan 2021 (extra)";
    row.extra = true;
    row.system = f[6] == "DGX-A100" ? dgx_a100 : dgx2_v100;
    row.model = gpt(f[0], std::stoi(f[3]), std::stoi(f[1]), std::stoi(f[2]), 51200);
    row.model.learned_position_embeddings = 1024;
    row.gpus = std::stoi(f[7]);
    row.training.global_batch_sequences = std::stoi(f[8]);
    row.training.sequence_length = 1024;
    row.training.precision = Precision::fp16;
    row.training.attention = AttentionKernel::unfused;
    row.training.overlap_tensor_parallel_backward = false;  // 2021: synchronous TP all-reduces
    const int tp = std::stoi(f[5]);
    const int dp = row.gpus / tp;
    row.config = config_of(row.model, tp, 1, row.gpus, static_cast<int>(row.training.global_batch_sequences / dp), 1);
    row.config.recompute = RecomputeMode::full;
    row.published = std::stod(f[9]) / 1000;
    row.label = f[0] + " " + f[6] + " " + config_label(row.config) + " B" + f[8];
    row.group = row.label;
    rows.push_back(row);
  }
  return rows;
}

// Published memory figures (../shared/ground_truth_data/ultrascale_dp_tp_scaling.csv, the Ultra-Scale
// Playbook's nanotron runs on H100 80GB): the 3B model's largest micro-batch per TP degree without and
// with sequence parallelism, and the 1B model's memory under data parallelism. The playbook does not
// print the runs' configuration; the script that generated them does: scripts/scaling_benchmarks.py
// on nanotron's nouamanetazi/ultrascale-playbook branch @e24d2483 (l.2: "Generates configs and SLURM
// scripts for scaling benchmarks used in https://huggingface.co/spaces/nanotron/ultrascale-playbook";
// its comment at l.352-361 lists the TP+SP chart's tokens/s to the hundredth), over
// examples/config_tiny_llama_bench.yaml (@67c5ebb6, the nouamane/bench2 branch): bf16, fp32 gradient
// accumulation, ZeRO stage 0, pp_engine 1f1b, no recompute (l.31, 55, 72, 77). From the script:
//  - the models, (layers, hidden, heads, ffn) at l.306-307: 1B (16, 2048, 32, 8192), 3B (28, 3072,
//    32, 8192); Llama layers with multi-head attention (NUM_KEY_VALUE_HEADS None, l.14), tied
//    embeddings below an ffn of 10000 (l.78), sequence 4096 (l.372);
//  - TP+SP is tp_mode REDUCE_SCATTER with tp_linear_async_communication, TP is ALL_REDUCE without it
//    (l.88); tp_recompute_allgather is left unset, so nanotron's default of the time, on
//    (config/parallelism_config.py l.37 @f6a7db37, the bench2 branch's base; since 9cc81bb6,
//    2024-07-17): the column-parallel GEMMs save the sequence shard and re-gather it;
//  - the 3B's vocabulary, 131072: the script's VOCAB_SIZES (l.376), and the only size that gives the
//    3B's "3.57G" (l.307: 131072 x 3072 + 28 x (3 x 3072 x 8192 + 4 x 3072^2) = 3.574e9);
//  - for the 1B DP runs the script's final state keeps no loop (each campaign rewrote it), so their
//    vocabulary and micro-batch are create_config's defaults, vocab_size 32768 and micro_batch_size 1
//    (l.42, 50), with its zero_stage 0 (l.44), which the figure confirms: it is the same at every dp,
//    as sharded optimizer states could not be. memory_rows shows the script's other vocabularies and
//    micro-batches beside them, not compared.
// None of this is fitted.
enum class MemoryMetric { peak_bytes, max_micro_batch };

struct MemoryRow {
  std::string source;
  std::string label;
  ModelSpec model;
  TrainingSpec training;
  ParallelConfig config;
  MemoryMetric metric = MemoryMetric::peak_bytes;
  double published = 0;
  bool in_gibibytes = false;  // shown as its source prints it: GiB, else GB
  // What the figure counts: PyTorch's caching allocator (its own counters), or the whole GPU as
  // nvidia-smi shows it, the CUDA context and NCCL's buffers included.
  bool whole_gpu = false;
  std::string excluded;  // why the row is shown but not compared
};

ModelSpec nanotron_llama(const std::string& name, int layers, int hidden, int ffn, int heads, int vocab) {
  ModelSpec model = gpt(name, layers, hidden, heads, vocab);
  model.ffn_hidden_size = ffn;
  model.ffn_kind = FfnKind::swiglu;
  model.norm_kind = NormKind::rmsnorm;
  model.linear_bias = false;
  model.dropout = false;
  model.learned_position_embeddings = 0;
  return model;
}

double peak_memory_bytes(const MemoryRow& row, const ParallelConfig& config) {
  double peak = 0;
  for (const StageMemory& stage : estimate_memory(row.model, row.training, config, RuntimeOverheads{})) {
    peak = std::max(peak, stage.total_bytes());
  }
  return peak;
}

// What a published nanotron memory figure measures: nanotron logs PyTorch's own counters each
// step (torch.cuda.max_memory_allocated / max_memory_reserved, nanotron src/nanotron/logging.py
// l.250-259 @a27e8fe8, the bench_cluster branch; bench_cluster/report.py l.69-79 @f55b5e5 parses
// them), which hold neither the CUDA context nor NCCL's own buffers. The estimator's nearest figure
// is what the caching allocator holds (reserved, the larger of the two).
double peak_caching_allocator_bytes(const MemoryRow& row, const ParallelConfig& config) {
  const RuntimeOverheads overheads{};
  const std::vector<StageMemory> stages = estimate_memory(row.model, row.training, config, overheads);
  double peak = 0;
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    peak = std::max(peak, caching_allocator_bytes(stages[stage], config, static_cast<int>(stage), overheads));
  }
  return peak;
}

// The largest micro-batch whose peak fits the GPU (one micro-batch per step, as a max-batch sweep runs).
int largest_fitting_micro_batch(const MemoryRow& row, double capacity_bytes) {
  int best = 0;
  for (int mbs = 1; mbs <= 512; ++mbs) {
    ParallelConfig config = row.config;
    config.micro_batch = mbs;
    MemoryRow trial = row;
    trial.training.global_batch_sequences = static_cast<std::int64_t>(mbs) * config.dp;
    if (peak_memory_bytes(trial, config) > capacity_bytes) break;
    best = mbs;
  }
  return best;
}

// A memory row's training: its sequence, batch and precision on `framework`, with that stack's profile.
TrainingSpec stack_training(Framework framework, Precision precision, int sequence_length, std::int64_t global_batch) {
  TrainingSpec training;
  training.sequence_length = sequence_length;
  training.global_batch_sequences = global_batch;
  training.precision = precision;
  training.target.framework = framework;
  apply_stack_profile(training);
  return training;
}

// A 1B DP memory row's data parallelism, micro-batch (one per step) and label.
void set_ultrascale_dp_layout(MemoryRow& row, int dp, int micro_batch) {
  row.config = config_of(row.model, 1, 1, dp, micro_batch, 1);
  row.training.global_batch_sequences = static_cast<std::int64_t>(micro_batch) * dp;
  row.label = "1B dp" + std::to_string(dp) + " mbs" + std::to_string(micro_batch) + ", vocabulary " +
              std::to_string(row.model.vocab_size) + ": peak memory PyTorch reserved";
}

std::vector<MemoryRow> ultrascale_memory_rows() {
  std::vector<MemoryRow> rows;
  auto table = read_csv("ultrascale_dp_tp_scaling.csv");
  table.erase(table.begin());  // the header
  for (const auto& f : table) {
    MemoryRow row;
    row.training = stack_training(Framework::nanotron, Precision::bf16, 4096, 0);  // the batch: below
    const int degree = std::stoi(f[3]);
    row.published = std::stod(f[6]);
    if (f[0] == "dp_scaling") {
      row.source = "Ultra-Scale Playbook DP memory (nanotron 1B)";
      row.model = nanotron_llama("1B", 16, 2048, 8192, 32, 32768);
      set_ultrascale_dp_layout(row, degree, 1);
      row.published *= units::gigabyte;
    } else {
      row.source = "Ultra-Scale Playbook TP largest batch (nanotron 3B)";
      row.model = nanotron_llama("3B", 28, 3072, 8192, 32, 131072);
      row.config = config_of(row.model, degree, 1, degree, 1, 1);
      row.config.sequence_parallel = f[0] == "tp_sp_scaling";
      row.training.overlap_tensor_parallel_backward = row.config.sequence_parallel;  // tp_linear_async_communication
      row.training.tensor_parallel_recompute_allgather = true;
      row.metric = MemoryMetric::max_micro_batch;
      row.label = "3B tp" + std::to_string(degree) + (row.config.sequence_parallel ? " sp" : "") + ": largest micro-batch";
    }
    rows.push_back(row);
  }
  return rows;
}

// A torchtitan team's run of Llama 3.1 8B (the llama3-8b preset's shape) under FSDP over fsdp x cp
// GPUs, priced as the torchtitan profile runs it (eager, 16-bit GEMMs), with its published peak
// reserved memory in GiB.
MemoryRow torchtitan_fsdp_memory_row(const std::string& source, int sequence_length, std::int64_t global_batch, int fsdp,
                                     int cp, int micro_batch, RecomputeMode recompute, double published_gibibytes) {
  MemoryRow row;
  row.source = source;
  row.model = preset("llama3-8b");
  row.training = stack_training(Framework::torchtitan, Precision::bf16, sequence_length, global_batch);
  row.config = config_of(row.model, 1, 1, fsdp * cp, micro_batch, 1);
  row.config.dp = fsdp;
  row.config.cp = cp;
  row.config.recompute = recompute;
  row.config.fully_sharded = true;
  row.published = published_gibibytes * units::gibibyte;
  row.in_gibibytes = true;
  return row;
}

// torchtitan's own FSDP + CP memory figures (bench/fidelity/data/torchtitan_llama3_8b_h100_fsdp_cp.csv,
// whose header names the source): on 8 H100, one sequence per GPU, full activation checkpointing,
// FSDP over dp_shard x cp. The runs used torch.compile and Float8 linears, which the profile does
// not price, so the comparison is of memory only. Never fitted.
std::vector<MemoryRow> torchtitan_memory_rows() {
  std::vector<MemoryRow> rows;
  auto table = read_csv("torchtitan_llama3_8b_h100_fsdp_cp.csv", true);
  table.erase(table.begin());  // the header
  for (const auto& f : table) {
    const int fsdp = std::stoi(f[0]), cp = std::stoi(f[1]);
    MemoryRow row = torchtitan_fsdp_memory_row("torchtitan Llama 3.1 8B FSDP + CP (compile and Float8 not priced)",
                                               std::stoi(f[2]), fsdp, fsdp, cp, 1, RecomputeMode::full, std::stod(f[4]));
    row.label = "8B FSDP " + f[0] + " CP " + f[1] + " at " + f[2] + " tokens: peak memory reserved";
    rows.push_back(row);
  }
  return rows;
}

// BigScience's BLOOM-176B prototype runs on Jean Zay (bench/fidelity/data/
// bigscience_a100_megatron_deepspeed_prototypes.csv, whose header names the source and the
// configuration): Megatron-DeepSpeed in fp16 (gradients accumulated in fp16) with ZeRO stage 1 (or 0)
// and full recompute on A100 80GB. The bloom-176b preset's layer kind at each run's hidden size,
// layer count and heads; DeepSpeed's default 'type:transformer' partition splits the layers evenly and
// adds the tied embeddings to the first and last stage. Never fitted.
struct PrototypeRun {
  std::vector<std::string> fields;  // the CSV row
  ModelSpec model;
  TrainingSpec training;
  ParallelConfig config;
  std::string label;
};

std::vector<PrototypeRun> bigscience_prototype_runs() {
  std::vector<PrototypeRun> runs;
  auto table = read_csv("bigscience_a100_megatron_deepspeed_prototypes.csv", true);
  table.erase(table.begin());  // the header
  for (const auto& f : table) {
    PrototypeRun run;
    run.fields = f;
    run.model = preset("bloom-176b");
    run.model.hidden_size = std::stoi(f[3]);
    run.model.num_layers = std::stoi(f[4]);
    run.model.num_attention_heads = run.model.num_kv_heads = std::stoi(f[5]);
    run.model.ffn_hidden_size = 4 * run.model.hidden_size;
    run.training = stack_training(Framework::megatron_deepspeed, Precision::fp16, 2048, std::stoll(f[10]));
    // fp16 accumulates its gradients in fp16 under DeepSpeed, as `pipette` prices it (engine.cpp).
    run.training.gradients_in_fp32 = false;
    const int tp = std::stoi(f[6]), pp = std::stoi(f[7]), dp = std::stoi(f[8]);
    run.config = config_of(run.model, tp, pp, tp * pp * dp, std::stoi(f[9]), 1);
    run.config.recompute = RecomputeMode::full;
    run.config.distributed_optimizer = std::stoi(f[11]) == 1;
    run.label = "h" + f[3] + " L" + f[4] + " a" + f[5] + " " + config_label(run.config) + " ZeRO-" + f[11] + " (l." + f[0] +
                ", " + f[1] + ")";
    runs.push_back(run);
  }
  return runs;
}

// Their memory: the busiest GPU as nvidia-smi showed it.
std::vector<MemoryRow> bigscience_memory_rows() {
  std::vector<MemoryRow> rows;
  for (const PrototypeRun& run : bigscience_prototype_runs()) {
    MemoryRow row;
    row.source = "BigScience 176B prototypes A100, Megatron-DeepSpeed fp16 (nvidia-smi)";
    row.model = run.model;
    row.training = run.training;
    row.config = run.config;
    row.published = std::stod(run.fields[12]) * units::gigabyte;
    row.whole_gpu = true;
    row.label = run.label;
    const std::string& note = run.fields.size() > 14 ? run.fields[14] : std::string();
    if (note.rfind("above the same layout", 0) == 0) row.excluded = "contradicts its own table: " + note;
    rows.push_back(row);
  }
  return rows;
}

// torchtitan's own eager FSDP figures with its per-operator selective checkpointing
// (bench/fidelity/data/torchtitan_llama3_8b_h100_fsdp_selective.csv, whose header names the source):
// Llama 3.1 8B on 8 and 128 H100, two sequences of 8192 tokens per GPU, FSDP over every GPU. The
// runs' torchtitan (2024-12) computed the loss on the whole fp32 logits, where the profile prices
// today's; neither compile nor Float8 ran. Their RMSNorm was torchtitan's own composite class (the
// llama3_8b config's norm_type "rmsnorm", train_configs/llama3_8b.toml @9dec370 l.21;
// torchtitan/models/norms.py l.77-101), which eager runs as separate ops over an fp32 copy: the
// engine's fused-norm=off. Never fitted.
struct TorchtitanSelectiveRun {
  MemoryRow memory;                       // its configuration and published memory
  double tokens_per_second_per_gpu = 0;   // its published throughput
  std::string label;                      // for the time rows
};

std::vector<TorchtitanSelectiveRun> torchtitan_selective_runs() {
  std::vector<TorchtitanSelectiveRun> runs;
  auto table = read_csv("torchtitan_llama3_8b_h100_fsdp_selective.csv", true);
  table.erase(table.begin());  // the header
  for (const auto& f : table) {
    TorchtitanSelectiveRun run;
    run.memory = torchtitan_fsdp_memory_row(
        "torchtitan Llama 3.1 8B FSDP, per-operator selective checkpointing (eager)", std::stoi(f[4]), std::stoll(f[3]),
        std::stoi(f[1]), 1, std::stoi(f[2]), RecomputeMode::selective, std::stod(f[6]));
    run.memory.label = "8B FSDP " + f[1] + " mbs" + f[2] + " at " + f[4] + " tokens: peak memory reserved";
    run.memory.training.fused_norm = false;
    run.tokens_per_second_per_gpu = std::stod(f[5]);
    run.label = "8B FSDP " + f[1] + " mbs" + f[2] + " selective at " + f[4] + " tokens";
    runs.push_back(run);
  }
  return runs;
}

// The 1B DP runs' vocabulary and micro-batch are create_config's defaults (see above). The other
// vocabularies and micro-batches the script names (VOCAB_SIZES l.376 and its comment, 49152 and
// 131072; MBS l.373-374) are shown beside them at dp 8, not compared: what the choice is worth.
std::vector<MemoryRow> ultrascale_dp_memory_with_other_script_settings(const MemoryRow& smallest_dp) {
  std::vector<MemoryRow> rows;
  for (const int vocabulary : {32768, 49152, 131072}) {
    for (const int micro_batch : {1, 2}) {
      if (vocabulary == smallest_dp.model.vocab_size && micro_batch == smallest_dp.config.micro_batch) continue;
      MemoryRow row = smallest_dp;
      row.model.vocab_size = vocabulary;
      set_ultrascale_dp_layout(row, smallest_dp.config.dp, micro_batch);
      row.excluded = "another setting the script names (the DP runs' own is not recorded); not compared";
      rows.push_back(row);
    }
  }
  return rows;
}

// Every published memory figure the report shows (excluded rows are shown, not compared).
std::vector<MemoryRow> memory_rows() {
  std::vector<MemoryRow> rows = ultrascale_memory_rows();
  const auto after_dp_rows = std::find_if(rows.begin(), rows.end(), [](const MemoryRow& row) {
    return row.metric != MemoryMetric::peak_bytes;
  });
  const std::vector<MemoryRow> other_settings = ultrascale_dp_memory_with_other_script_settings(rows.front());
  rows.insert(after_dp_rows, other_settings.begin(), other_settings.end());
  for (MemoryRow& row : torchtitan_memory_rows()) rows.push_back(std::move(row));
  for (TorchtitanSelectiveRun& run : torchtitan_selective_runs()) rows.push_back(std::move(run.memory));
  for (MemoryRow& row : bigscience_memory_rows()) rows.push_back(std::move(row));
  return rows;
}

// The Ultra-Scale Playbook's throughput (ultrascale_dp_tp_scaling.csv, the same runs as the memory
// rows, configured as ultrascale_memory_rows says), never fitted: the 1B under DP, and the 3B under
// TP with SP at the micro-batch each was measured at, which the generating script's comment gives
// (scaling_benchmarks.py @e24d2483 l.352-361: (tp, mbs) = (2, 3), (4, 9), (8, 18), (16, 40),
// (32, 90), beside these very tokens/s); the TP rows without SP are left out, their micro-batch is
// not published. The cluster is AWS p5 on EFA as a site would describe it: the node at what a ring
// attains inside it (ultrascale_collective_bandwidth_vs_nodes.csv: all-gather bus bandwidth on 1
// node, 249.85 GB/s; its all-reduce's 435.97 is NVLink SHARP's, 1.74 times that, which the
// catalog's H100 board prices at NCCL's 1.59), node pairs as
// a pair measurement sees them (the same file on 2 nodes), and network kind efa, whose contention
// curve (collective_scaling_of, core/src/cluster.cpp) prices the fall beyond a pair. That curve was
// fitted on the file's 2, 8 and 32-node all-reduce medians; the DP labels say which rows sit at
// those node counts and which were held out (4, 16).
std::vector<Row> ultrascale_time_rows() {
  std::map<std::pair<std::string, int>, double> bus_bytes_per_second;  // (collective, nodes) → median
  const auto bandwidth = read_csv("ultrascale_collective_bandwidth_vs_nodes.csv");
  for (size_t i = 1; i < bandwidth.size(); ++i)
    bus_bytes_per_second[{bandwidth[i][0], std::stoi(bandwidth[i][1])}] = std::stod(bandwidth[i][4]) * 1e9;
  const System p5{"H100-SXM", bus_bytes_per_second.at({"AllGather", 1}), bus_bytes_per_second.at({"AllReduce", 2}),
                  NetworkKind::efa};
  const auto table = read_csv("ultrascale_dp_tp_scaling.csv");
  const auto published = [&](const char* plot, int degree) {
    for (const auto& f : table) {
      if (f[0] == plot && std::stoi(f[3]) == degree) return std::stod(f[4]);
    }
    return 0.0;
  };
  const std::map<int, int> measured_micro_batch = {{2, 3}, {4, 9}, {8, 18}, {16, 40}, {32, 90}};
  std::vector<Row> rows;
  for (const MemoryRow& memory : ultrascale_memory_rows()) {
    const bool data_parallel = memory.metric == MemoryMetric::peak_bytes;
    if (!data_parallel && !memory.config.sequence_parallel) continue;
    Row row;
    row.extra = true;
    row.metric = Metric::tokens_per_second_per_gpu;
    row.model = memory.model;
    row.training = memory.training;
    row.config = memory.config;
    row.system = p5;
    if (data_parallel) {
      row.source = "Ultra-Scale Playbook DP throughput (nanotron 1B, extra)";
      row.gpus = row.config.dp;
      row.published = published("dp_scaling", row.gpus);
    } else {
      row.source = "Ultra-Scale Playbook TP+SP throughput (nanotron 3B, extra)";
      row.gpus = row.config.tp;
      row.config.micro_batch = measured_micro_batch.at(row.config.tp);
      row.training.global_batch_sequences = row.config.micro_batch;
      row.published = published("tp_sp_scaling", row.gpus);
    }
    const int nodes = std::max(1, row.gpus / 8);
    const char* curve = !data_parallel ? "" : nodes == 1 ? "" : nodes == 2 ? ", EFA pair"
                                            : nodes == 8 || nodes == 32 ? ", EFA curve fitted here" : ", EFA curve held out";
    row.label = (data_parallel ? "1B dp" + std::to_string(row.gpus) : "3B tp" + std::to_string(row.gpus) + " sp") + " mbs" +
                std::to_string(row.config.micro_batch) + " on " + std::to_string(nodes) + " node(s)" + curve;
    row.group = row.label;
    rows.push_back(row);
  }
  return rows;
}

// BLOOM-176B on Jean Zay (bench/fidelity/data/bloom_176b_megatron_deepspeed_a100.csv, whose header
// names the sources and the configuration), never fitted: priced with the megatron-deepspeed stack
// profile (and, in stack_time_report, the Megatron-core one). Full recompute, bf16, the BF16_Optimizer
// as ZeRO-1 over DP (its fp32 gradient buffer unsharded, as gradients_in_fp32 prices it). Pipeline
// stages as DeepSpeed's 'type:transformer|embedding' partition cuts them: the two tied embeddings
// count as layers, 72 units split evenly, so the first and last stage hold one transformer layer
// fewer (README.md l.133-143 for PP 12: 5, 6 x 10, 5). The first iteration after a resume is listed
// but not compared: it includes warm-up (the next iteration is 10-29% faster in four of the five
// layouts that logged one, equal in the fifth).
// Every row is priced twice, under the two inter-node figures of jean_zay_a100_* (two sources).
std::vector<Row> bloom_rows() {
  std::vector<Row> rows;
  const auto table = read_csv("bloom_176b_megatron_deepspeed_a100.csv", true);
  for (const auto& [network, system] : jean_zay_a100_networks) {
    for (size_t i = 1; i < table.size(); ++i) {
      const auto& f = table[i];
      Row row;
      row.source = std::string("BLOOM-176B Jean Zay A100, Megatron-DeepSpeed, ") + network + " (extra)";
      row.extra = true;
      row.system = system;
      row.model = preset("bloom-176b");
      row.gpus = std::stoi(f[3]);
      row.training.global_batch_sequences = std::stoi(f[8]);
      row.training.sequence_length = std::stoi(f[9]);
      row.training.precision = Precision::bf16;
      row.training.target.framework = Framework::megatron_deepspeed;
      apply_stack_profile(row.training);
      const int tp = std::stoi(f[4]), pp = std::stoi(f[5]);
      row.config = config_of(row.model, tp, pp, row.gpus, std::stoi(f[7]), 1);
      row.config.recompute = RecomputeMode::full;
      row.config.distributed_optimizer = row.config.dp > 1;
      const int units_per_stage = (row.model.num_layers + 2) / pp;
      row.config.layers_per_stage.assign(static_cast<size_t>(pp), units_per_stage);
      row.config.layers_per_stage.front() -= 1;
      row.config.layers_per_stage.back() -= 1;
      row.published = std::stod(f[11]);
      const std::string iteration = f[10].empty() ? "no log line" : "iteration " + f[10];
      row.label = "176B " + config_label(row.config) + " B" + f[8] + " (" + f[0] + " l." + f[1] + ", " + iteration + ")";
      row.group = row.label;
      if (f[12] == "first iteration after resume") row.excluded = "first iteration after a resume (warm-up)";
      rows.push_back(row);
    }
  }
  return rows;
}

// Their iteration time (each run's second iteration, bigscience_prototype_runs), extra and never
// fitted, under the two Jean Zay network figures as BLOOM-176B's rows are.
std::vector<Row> bigscience_time_rows() {
  std::vector<Row> rows;
  const std::vector<PrototypeRun> runs = bigscience_prototype_runs();
  for (const auto& [network, system] : jean_zay_a100_networks) {
    for (const PrototypeRun& run : runs) {
      Row row;
      row.source = std::string("BigScience 176B prototypes A100, Megatron-DeepSpeed fp16, ") + network + " (extra)";
      row.extra = true;
      row.system = system;
      row.model = run.model;
      row.training = run.training;
      row.config = run.config;
      row.gpus = run.config.world_size();
      row.published = std::stod(run.fields[13]);
      row.label = run.label;
      row.group = row.label;
      rows.push_back(row);
    }
  }
  return rows;
}

// The torchtitan team's eager FSDP runs with per-operator selective checkpointing (the rows of
// torchtitan_selective_runs), in tokens/s per GPU, extra and never fitted. Their Grand Teton
// hosts: H100 with 96 GB of HBM2e at 2.4 TB/s and a 500 W power limit, whose 16-bit peak the source
// puts between the H100 SXM's (989 TFLOP/s) and the H100 NVL's (835): every row is priced under
// each. NVLink inside the host and 400 Gb/s RDMA per GPU between hosts, priced as dgx_h100's (RoCE).
std::vector<Row> torchtitan_time_rows() {
  std::vector<Row> rows;
  const std::pair<const char*, double> peaks[] = {{"16-bit peak as the H100 SXM's", 989e12},
                                                  {"16-bit peak as the H100 NVL's", 835e12}};
  const std::vector<TorchtitanSelectiveRun> runs = torchtitan_selective_runs();
  for (const auto& [peak_name, peak] : peaks) {
    System system = dgx_h100;
    system.network = NetworkKind::roce;
    system.memory_bytes = 96 * units::gibibyte * find_gpu("H100-SXM")->memory_bytes / (80 * units::gibibyte);
    system.hbm_bytes_per_second = 2.4e12;
    system.peak_16bit_flop_per_second = peak;
    for (const TorchtitanSelectiveRun& run : runs) {
      Row row;
      row.source = std::string("torchtitan Llama 3.1 8B FSDP eager, 500 W H100 HBM2e, ") + peak_name + " (extra)";
      row.extra = true;
      row.metric = Metric::tokens_per_second_per_gpu;
      row.system = system;
      row.model = run.memory.model;
      row.training = run.memory.training;
      row.config = run.memory.config;
      row.gpus = row.config.world_size();
      row.published = run.tokens_per_second_per_gpu;
      row.label = run.label;
      row.group = row.label;
      rows.push_back(row);
    }
  }
  return rows;
}

struct Prediction {
  double iteration_seconds = 0;
  double value = 0;  // in the row's metric
  double error = 0;  // value / published − 1
  double peak_memory_bytes = 0;
};

Prediction predict(const Row& row, const ComputeEfficiency& efficiency) {
  const Cluster cluster = cluster_of(row.system, row.gpus);
  const WorkProfile work = profile_work(row.model, row.training, cluster.gpu, row.config, efficiency);
  const CommunicationTimes communication = communication_times(cluster, row.config, work, default_placement(row.config));
  Prediction prediction;
  prediction.iteration_seconds = critical_path(row.config, work, communication, row.training).iteration_seconds;
  const double tokens = static_cast<double>(row.training.global_batch_sequences) * row.training.sequence_length;
  switch (row.metric) {
    case Metric::iteration_seconds: prediction.value = prediction.iteration_seconds; break;
    case Metric::tokens_per_second_per_gpu: prediction.value = tokens / prediction.iteration_seconds / row.gpus; break;
    case Metric::model_tflops_per_gpu:
      prediction.value =
          model_flops_per_iteration(row.model, row.training, row.attention_count) / prediction.iteration_seconds /
          row.gpus / units::teraflop;
      break;
  }
  prediction.error = prediction.value / row.published - 1;
  for (const StageMemory& stage : estimate_memory(row.model, row.training, row.config, row.overheads)) {
    prediction.peak_memory_bytes = std::max(prediction.peak_memory_bytes, stage.total_bytes());
  }
  return prediction;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Alternate configurations of each source go to the fitting half.
void split(std::vector<Row>& rows) {
  std::map<std::string, std::map<std::string, int>> order;  // source → group → index
  for (Row& row : rows) {
    if ((!row.excluded.empty() && !row.excluded_after_fit) || row.extra || row.held_out) continue;
    auto& groups = order[row.source];
    const auto found = groups.emplace(row.group, static_cast<int>(groups.size())).first;
    row.fit = found->second % 2 == 0;
  }
}

// A mixture-of-experts row: its fitting half is reported as such, but no constant is fitted to it.
bool moe_row(const Row& row) { return row.config.ep > 1 || row.config.etp > 1 || row.model.is_moe(); }

double fit_loss(const std::vector<Row>& rows, const ComputeEfficiency& efficiency) {
  double loss = 0;
  for (const Row& row : rows) {
    if (!row.fit || !row.excluded.empty() || moe_row(row)) continue;
    const double log_error = std::log(predict(row, efficiency).value / row.published);
    loss += log_error * log_error;
  }
  return loss;
}

// Coordinate descent in log space on the fitting half; bounded to physical ranges.
ComputeEfficiency fit(const std::vector<Row>& rows) {
  ComputeEfficiency best = fitted_compute_efficiency();
  double* parameters[] = {&best.gemm_fraction_16bit, &best.gemm_fraction_fp8, &best.attention_fraction,
                          &best.memory_fraction, &best.layer_overhead_seconds};
  // Physical ceilings: no GEMM outruns the best tuned matmul of its GPU, which is the MAMF table of
  // the ml-engineering book (github.com/stas00/ml-engineering compute/accelerator/README.md
  // @b9e29720): bf16 on A100 SXM, where the 16-bit fraction is fitted, in the GPU catalog; fp8 on
  // H100 SXM 1402.6 of 1979 TF. FlashAttention-3 reports up to ~75% of the H100 bf16 peak; HBM
  // streaming kernels reach ~90% of the datasheet bandwidth.
  const double upper[] = {best.fitted_gpu_attainable_16bit_matmul_fraction, 1402.6 / 1979, 0.75, 0.90, 1e-3};
  double best_loss = fit_loss(rows, best);
  for (double step = 1.3; step > 1.002; step = std::sqrt(step)) {
    for (int round = 0; round < 8; ++round) {
      bool improved = false;
      for (size_t k = 0; k < std::size(parameters); ++k) {
        for (const double factor : {step, 1 / step}) {
          ComputeEfficiency trial = best;
          double* value = reinterpret_cast<double*>(reinterpret_cast<char*>(&trial) +
                                                    (reinterpret_cast<char*>(parameters[k]) - reinterpret_cast<char*>(&best)));
          *value = std::min(*value * factor, upper[k]);
          const double loss = fit_loss(rows, trial);
          if (loss < best_loss) best = trial, best_loss = loss, improved = true;
        }
      }
      if (!improved) break;
    }
  }
  return best;
}

std::string percent(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", 100 * value);
  return text;
}

std::string number(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

void report(const std::vector<Row>& rows, const ComputeEfficiency& efficiency) {
  std::printf("| source | row | half | published | predicted | error | our memory |\n|---|---|---|---|---|---|---|\n");
  std::map<std::string, std::vector<double>> errors;  // "source/half" → |error|
  for (const Row& row : rows) {
    const char* unit = row.metric == Metric::iteration_seconds           ? " s"
                       : row.metric == Metric::tokens_per_second_per_gpu ? " tok/s/GPU"
                                                                         : " TFLOP/s/GPU";
    const int digits = row.metric == Metric::tokens_per_second_per_gpu ? 0 : row.metric == Metric::iteration_seconds ? 2 : 1;
    if (!row.excluded.empty()) {
      std::printf("| %s | %s | excluded | %s%s | — | %s | |\n", row.source.c_str(), row.label.c_str(),
                  number(row.published, digits).c_str(), unit, row.excluded.c_str());
      continue;
    }
    const Prediction prediction = predict(row, efficiency);
    const Cluster cluster = cluster_of(row.system, row.gpus);
    const bool fits = prediction.peak_memory_bytes <= cluster.gpu.memory_bytes;
    const char* half = row.extra ? "extra" : row.fit ? "fit" : "held out";
    std::printf("| %s | %s | %s | %s%s | %s%s | %s | %.1f GiB%s |\n", row.source.c_str(), row.label.c_str(), half, number(row.published, digits).c_str(), unit,
                number(prediction.value, digits).c_str(), unit, percent(prediction.error).c_str(),
                prediction.peak_memory_bytes / units::gibibyte, fits ? "" : " (over)");
    if (row.extra) {
      errors[row.source + " / extra, never fitted"].push_back(std::abs(prediction.error));
      continue;
    }
    // The "all" lines stay the dense models' (their figures predate the MoE rows).
    const bool moe = moe_row(row);
    for (const std::string& key : {row.source + " / " + half, row.source + " / all", std::string("all / ") + half,
                                  std::string("all / all")}) {
      if (moe && key.rfind("all / ", 0) == 0) continue;
      errors[key].push_back(std::abs(prediction.error));
    }
  }
  std::printf("\nTime (iteration time or throughput), by source and by whether the row was used to fit the "
              "efficiency constants:\n\n| rows | count | median abs error | worst abs error |\n|---|---|---|---|\n");
  for (const auto& [key, values] : errors) {
    std::printf("| %s | %zu | %.1f%% | %.1f%% |\n", key.c_str(), values.size(), 100 * median(values),
                100 * *std::max_element(values.begin(), values.end()));
  }
}

// Rows of a stack other than Megatron-core (their framework's profile, stack_profile.hpp) against
// the same rows priced with the Megatron-core profile: what the profile changes.
void stack_time_report(const std::vector<Row>& rows, const ComputeEfficiency& efficiency) {
  std::printf("\nTime of the rows run on another stack, with its profile and with the Megatron-core one:\n\n| source | "
              "row | published | predicted | error | with the Megatron-core profile | error |\n|---|---|---|---|---|---|---|\n");
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> errors;
  for (const Row& row : rows) {
    if (!row.excluded.empty() || row.training.target.framework == Framework::megatron_core) continue;
    Row reference = row;
    reference.training.target.framework = Framework::megatron_core;
    apply_stack_profile(reference.training);
    const Prediction stack = predict(row, efficiency), before = predict(reference, efficiency);
    std::printf("| %s | %s | %.0f | %.0f | %s | %.0f | %s |\n", row.source.c_str(), row.label.c_str(), row.published,
                stack.value, percent(stack.error).c_str(), before.value, percent(before.error).c_str());
    errors[row.source].first.push_back(std::abs(stack.error));
    errors[row.source].second.push_back(std::abs(before.error));
  }
  std::printf("\n| source | rows | median abs error | worst abs error | Megatron-core profile: median | worst |\n"
              "|---|---|---|---|---|---|\n");
  for (const auto& [source, pair] : errors) {
    const auto& [stack, before] = pair;
    std::printf("| %s | %zu | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", source.c_str(), stack.size(), 100 * median(stack),
                100 * *std::max_element(stack.begin(), stack.end()), 100 * median(before),
                100 * *std::max_element(before.begin(), before.end()));
  }
}

// Memory. No memory constant is fitted: every row is held out. Two kinds of evidence: published
// figures (ultrascale_dp_tp_scaling.csv's memory panels, torchtitan's FSDP + CP table, BigScience's
// A100 prototype runs), and every published run above, which
// ran, so its configuration must be predicted to fit its GPU.
// The row's figure as predicted for the row's stack, and as predicted had the reference
// (Megatron-core / Transformer Engine) profile been used, to show what the stack profile changes.
std::pair<double, double> memory_prediction(const MemoryRow& row, double capacity) {
  const auto predict_for = [&](const MemoryRow& r) {
    if (r.metric == MemoryMetric::max_micro_batch) return static_cast<double>(largest_fitting_micro_batch(r, capacity));
    return r.whole_gpu ? peak_memory_bytes(r, r.config) : peak_caching_allocator_bytes(r, r.config);
  };
  MemoryRow reference = row;
  reference.training.target.framework = Framework::megatron_core;
  apply_stack_profile(reference.training);
  return {predict_for(row), predict_for(reference)};
}

void memory_report(const std::vector<Row>& rows) {
  std::printf("\n| memory source | row | published | predicted | error | with the Megatron-core profile | error |\n"
              "|---|---|---|---|---|---|---|\n");
  std::map<std::string, std::vector<double>> errors, reference_errors;
  for (const MemoryRow& row : memory_rows()) {
    const double capacity = find_gpu("H100-SXM")->memory_bytes;
    const auto [predicted, reference] = memory_prediction(row, capacity);
    const bool batches = row.metric == MemoryMetric::max_micro_batch;
    const auto shown = [&](double value) {
      if (batches) return number(value, 0);
      return row.in_gibibytes ? number(value / units::gibibyte, 2) + " GiB" : number(value / units::gigabyte, 2) + " GB";
    };
    if (!row.excluded.empty()) {
      std::printf("| %s | %s | %s | %s | excluded: %s | | |\n", row.source.c_str(), row.label.c_str(),
                  shown(row.published).c_str(), shown(predicted).c_str(), row.excluded.c_str());
      continue;
    }
    const double error = predicted / row.published - 1;
    const double reference_error = reference / row.published - 1;
    errors[row.source].push_back(std::abs(error));
    reference_errors[row.source].push_back(std::abs(reference_error));
    std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", row.source.c_str(), row.label.c_str(),
                shown(row.published).c_str(), shown(predicted).c_str(), percent(error).c_str(), shown(reference).c_str(),
                percent(reference_error).c_str());
  }
  std::map<std::string, std::pair<int, int>> fits;  // source → (predicted to fit, rows)
  for (const Row& row : rows) {
    if (!row.excluded.empty()) continue;
    const Prediction prediction = predict(row, fitted_compute_efficiency());
    auto& [fit, count] = fits[row.source];
    fit += prediction.peak_memory_bytes <= cluster_of(row.system, row.gpus).gpu.memory_bytes;
    ++count;
  }
  std::printf("\nMemory, by source (never fitted: every row is held out), with the row's stack profile and, before it, "
              "the Megatron-core one:\n\n| source | rows | median abs error | worst abs error | Megatron-core profile: "
              "median | worst |\n|---|---|---|---|---|---|\n");
  for (const auto& [source, values] : errors) {
    const std::vector<double>& before = reference_errors[source];
    std::printf("| %s | %zu | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", source.c_str(), values.size(), 100 * median(values),
                100 * *std::max_element(values.begin(), values.end()), 100 * median(before),
                100 * *std::max_element(before.begin(), before.end()));
  }
  std::printf("\nPublished runs (they ran, so they fit) predicted to fit their GPU:\n\n| source | predicted to fit |\n|---|---|\n");
  for (const auto& [source, counts] : fits) std::printf("| %s | %d of %d |\n", source.c_str(), counts.first, counts.second);
}

std::string plan_label(const Plan& plan) {
  std::string label = config_label(plan.config) + " " + to_string(plan.config.recompute);
  if (plan.config.sequence_parallel) label += " sp";
  if (plan.config.distributed_optimizer) label += " distopt";
  return label;
}

// For every SC21 Table 1 job: the published plan's predicted time, the search's pick with every
// knob free, and its pick restricted to what Megatron-LM had in 2021 (full recompute, no sequence
// parallelism, no distributed optimizer).
void plan_comparison(const std::vector<Row>& rows) {
  std::printf("\n| SC21 Table 1 job | published plan (full recompute) | predicted | Pipette's plan, all knobs | predicted | "
              "Pipette's plan, SC21's features | predicted |\n|---|---|---|---|---|---|---|\n");
  SearchOptions options;
  options.optimize_placement = false;
  options.top_k = 1;
  for (const Row& row : rows) {
    if (row.source != "SC21 Table 1") continue;
    const Cluster cluster = cluster_of(row.system, row.gpus);
    const Result<Plan> published = evaluate_plan(row.model, row.training, cluster, row.config, options);
    TrainingSpec sc21_features = row.training;
    sc21_features.fixed.recompute = RecomputeMode::full;
    sc21_features.fixed.sequence_parallel = false;
    sc21_features.fixed.distributed_optimizer = false;
    std::printf("| %s, %d GPUs, B=%lld | %s | %s |", row.model.name.c_str(), row.gpus,
                static_cast<long long>(row.training.global_batch_sequences), config_label(row.config).c_str(),
                published.ok() ? (number(published->time.iteration_seconds, 2) + " s").c_str()
                               : ("does not fit: " + published.error().message).c_str());
    for (const TrainingSpec& training : {row.training, sc21_features}) {
      const Result<SearchResult> searched = search_plans(row.model, training, cluster, options);
      if (!searched.ok()) {
        std::printf(" search failed: %s | |", searched.error().message.c_str());
        continue;
      }
      const Plan& pick = searched->plans.front();
      std::string speedup;
      if (published.ok()) speedup = " (" + number(published->time.iteration_seconds / pick.time.iteration_seconds, 2) + "x)";
      std::printf(" %s | %s s%s |", plan_label(pick).c_str(), number(pick.time.iteration_seconds, 2).c_str(),
                  speedup.c_str());
    }
    std::printf("\n");
  }
}

}  // namespace
}  // namespace pipette

int main(int argc, char** argv) {
  using namespace pipette;
  std::vector<Row> rows = sc21_rows();
  for (auto more : {korthikanti_rows(), nemo_rows(), megatron_core_h100_rows(), megatron_2021_rows(), ultrascale_time_rows(),
                    long_sequence_rows(), bloom_rows(), bigscience_time_rows(), torchtitan_time_rows()}) {
    rows.insert(rows.end(), more.begin(), more.end());
  }
  split(rows);
  ComputeEfficiency efficiency = fitted_compute_efficiency();
  if (argc > 1 && std::string(argv[1]) == "--fit") {
    efficiency = fit(rows);
    std::printf("fitted on %zu rows: gemm_fraction_16bit=%.4f gemm_fraction_fp8=%.4f attention_fraction=%.4f "
                "memory_fraction=%.4f layer_overhead_seconds=%.3g chunk_pass_overhead_seconds=%.3g (loss %.4f, was %.4f)\n\n",
                static_cast<size_t>(std::count_if(rows.begin(), rows.end(),
                                                  [](const Row& r) { return r.fit && r.excluded.empty() && !moe_row(r); })),
                efficiency.gemm_fraction_16bit, efficiency.gemm_fraction_fp8, efficiency.attention_fraction,
                efficiency.memory_fraction, efficiency.layer_overhead_seconds, efficiency.chunk_pass_overhead_seconds,
                fit_loss(rows, efficiency),
                fit_loss(rows, fitted_compute_efficiency()));
  }
  report(rows, efficiency);
  stack_time_report(rows, efficiency);
  memory_report(rows);
  plan_comparison(rows);
  return 0;
}
