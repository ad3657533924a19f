#include "published_runs.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "pipette/topology/run_records.hpp"

namespace pipette {

namespace {

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (const char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) fields.emplace_back();
    else fields.back() += c;
  }
  return fields;
}

int leading_int(const std::string& cell) {
  try {
    return std::stoi(cell);
  } catch (...) {
    return 1;  // "n/a", empty: the dimension is not used
  }
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `yaml` (a model file) with each "key: value" line of `values` set.
std::string with_values(std::string yaml, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values) {
    const size_t at = yaml.find("\n" + key + ": ");
    if (at == std::string::npos) continue;
    const size_t end = yaml.find('\n', at + 1);
    yaml.replace(at + 1, end - at - 1, key + ": " + value);
  }
  return yaml;
}

// Alternates the usable runs between fitting and held out, from the first; `labels`, where given,
// name each run's record in place of where it was read.
void add_alternately(PublishedSplit& split, const std::vector<RunDescription>& runs, const SiteConfig& site,
                     const std::vector<std::string>& model_dirs, const std::vector<std::string>& labels = {}) {
  int usable = 0;
  for (size_t index = 0; index < runs.size(); ++index) {
    auto record = resolve_run(runs[index], site, model_dirs);
    if (!record) {
      split.skipped.push_back(record.error().message);
      continue;
    }
    if (index < labels.size()) record->name = labels[index];
    (usable++ % 2 == 0 ? split.fit : split.held_out).push_back(std::move(record).value());
  }
}

}  // namespace

PublishedSplit bigscience_prototype_split(const std::string& prototypes_csv, const std::string& bloom_model_file,
                                          const SiteConfig& site, const std::string& work_dir) {
  PublishedSplit split;
  std::filesystem::create_directories(work_dir);
  const std::string bloom = text_of(bloom_model_file);
  std::ifstream in(prototypes_csv);
  std::string table =
      "model,nodes,gpu,framework,precision,tp,pp,dp,mbs,global_batch,seq,recompute,distopt,iteration_seconds,device_gib,status\n";
  bool header = true;
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    if (header) {  // line,date,nodes,hidden,layers,heads,tp,pp,dp,micro_batch,global_batch,zero_stage,memory_gb,seconds_per_iteration,note
      header = false;
      continue;
    }
    const std::vector<std::string> f = csv_fields(line);
    const std::string name = "proto-h" + f[3] + "-l" + f[4] + "-a" + f[5];
    labels.push_back("chronicles-prequel.md l." + f[0] + " (h" + f[3] + " L" + f[4] + " a" + f[5] + ")");
    std::ofstream(work_dir + "/" + name + ".yaml")
        << with_values(bloom, {{"name", name}, {"num_layers", f[4]}, {"hidden_size", f[3]}, {"num_attention_heads", f[5]},
                               {"num_kv_heads", f[5]}, {"ffn_hidden_size", std::to_string(4 * std::stoi(f[3]))}});
    // The runs of those weeks: --fp16, --checkpoint-activations, --seq-length 2048, ZeRO stage 1 or 0.
    // Their memory is nvidia-smi's, printed in GB, but for the one row its own table contradicts.
    const bool contradicted = f.size() > 14 && f[14].rfind("above the same layout", 0) == 0;
    const std::string device_gib = contradicted ? "" : std::to_string(std::stod(f[12]) * 1e9 / (1024.0 * 1024 * 1024));
    table += name + "," + f[2] + ",A100-80GB,megatron-deepspeed,fp16," + f[6] + "," + f[7] + "," + f[8] + "," + f[9] + "," +
             f[10] + ",2048,full," + (f[11] == "0" ? "off" : "on") + "," + f[13] + "," + device_gib + ",ok\n";
  }
  const std::string table_path = work_dir + "/bigscience_prototypes.csv";
  std::ofstream(table_path) << table;
  auto runs = read_run_records(table_path);
  if (!runs) {
    split.skipped.push_back(runs.error().message);
    return split;
  }
  add_alternately(split, *runs, site, {work_dir}, labels);
  return split;
}

PublishedSplit nemo_dgx_h100_split(const std::string& table_path, const SiteConfig& site) {
  static const std::map<std::string, std::string> presets = {
      {"LLAMA3_8B", "llama3-8b"},   {"LLAMA3-8B", "llama3-8b"},   {"LLAMA3-70B", "llama3-70b"},   {"LLAMA3_70B", "llama3-70b"}, {"LLAMA2-7B", "llama2-7b"}, {"LLAMA2-13B", "llama2-13b"},
      {"LLAMA2-70B", "llama2-70b"}, {"GPT3-5B", "gpt3-5b"},       {"GPT3-20B", "gpt3-20b"},   {"GPT3-175B", "gpt3-175b"}};
  PublishedSplit split;
  std::ifstream in(table_path);
  std::string line;
  std::getline(in, line);  // header: source,release,section,model,system,gpus,precision,gbs,mbs,seq_len,tp,pp,cp,vp,...
  int row = 1;
  std::vector<RunDescription> runs;
  while (std::getline(in, line)) {
    ++row;
    const std::vector<std::string> f = csv_fields(line);
    if (f.size() < 19 || f[4] != "DGX-H100" || f[2].find("Pre") == std::string::npos) continue;
    const std::string name = "nemo_megatron_bridge_perf_summary.csv row " + std::to_string(row) + " (" + f[3] + ')';
    const auto preset = presets.find(f[3]);
    if (preset == presets.end()) {
      split.skipped.push_back(name + ": no preset of this architecture");
      continue;
    }
    if (leading_int(f[12]) > 1) {
      split.skipped.push_back(name + ": context parallelism not modelled");
      continue;
    }
    RunDescription run;
    run.name = name;
    run.framework = "nemo";
    run.model = preset->second;
    run.gpu = "H100-SXM";
    const int gpus = std::stoi(f[5]);
    run.nodes = gpus / 8;
    run.gpus_per_node = 8;
    run.precision = f[6].rfind("BF16", 0) == 0 ? Precision::bf16 : Precision::fp8;
    run.global_batch = std::stoll(f[7]);
    run.micro_batch = leading_int(f[8]);
    run.sequence_length = std::stoi(f[9]);
    run.tp = leading_int(f[10]);
    run.pp = leading_int(f[11]);
    run.dp = gpus / (*run.tp * *run.pp);
    run.vpp = *run.pp > 1 ? leading_int(f[13]) : 1;
    run.recompute = RecomputeMode::none;
    run.sequence_parallel = *run.tp > 1;
    run.distributed_optimizer = *run.dp > 1;
    run.tp_comm_overlap = *run.tp > 1;   // NeMo's H100 recipes overlap TP communication (userbuffers)
    run.gradients_in_fp32 = false;       // Megatron-core's default: the gradient buffer in the parameter dtype
    run.iteration_seconds = static_cast<double>(*run.global_batch) * *run.sequence_length / (std::stod(f[18]) * gpus);
    runs.push_back(std::move(run));
  }
  add_alternately(split, runs, site, {});
  return split;
}

}  // namespace pipette
