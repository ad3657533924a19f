#include "published_runs.hpp"

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

}  // namespace

PublishedSplit nemo_dgx_h100_split(const std::string& table_path, const SiteConfig& site) {
  static const std::map<std::string, std::string> presets = {
      {"LLAMA3_8B", "llama3-8b"},   {"LLAMA3-8B", "llama3-8b"},   {"LLAMA3-70B", "llama3-70b"},   {"LLAMA3_70B", "llama3-70b"}, {"LLAMA2-7B", "llama2-7b"}, {"LLAMA2-13B", "llama2-13b"},
      {"LLAMA2-70B", "llama2-70b"}, {"GPT3-5B", "gpt3-5b"},       {"GPT3-20B", "gpt3-20b"},   {"GPT3-175B", "gpt3-175b"}};
  PublishedSplit split;
  std::ifstream in(table_path);
  std::string line;
  std::getline(in, line);  // header: source,release,section,model,system,gpus,precision,gbs,mbs,seq_len,tp,pp,cp,vp,...
  int row = 1, usable = 0;
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
    auto record = resolve_run(run, site, {});
    if (!record) {
      split.skipped.push_back(record.error().message);
      continue;
    }
    (usable++ % 2 == 0 ? split.fit : split.held_out).push_back(std::move(record).value());
  }
  return split;
}

}  // namespace pipette
