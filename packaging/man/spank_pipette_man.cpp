// Writes spank_pipette(8): the options from the plugin's option table (what sbatch/srun --help
// list), the step variables checked against the names the plugin sets, and the site file as
// shipped (/etc/slurm/pipette.yaml, every key commented).
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "options.hpp"
#include "pipette/topology/version.hpp"
#include "step_environment.hpp"
#include "troff.hpp"

namespace {

using pipette::man::escape;
using pipette::man::literal;

std::string options_section() {
  std::string out;
  for (const pipette::spank::OptionInfo& option : pipette::spank::option_table()) {
    out += ".TP\n\\fB" + literal(std::string("--") + option.name) + "\\fR";
    if (option.arginfo != nullptr) {
      out += option.has_arg == 2 ? "[=\\fI" + literal(option.arginfo) + "\\fR]" : "=\\fI" + literal(option.arginfo) + "\\fR";
    }
    out += '\n' + escape(option.usage) + "\n.br\nEnvironment: \\fB" + literal(option.env_var) + "\\fR.\n";
  }
  return out;
}

// What each step-wide variable means. Every name the plugin sets needs an entry here and every
// entry needs the plugin to set it, or the page is not generated.
const std::map<std::string, std::string>& plan_variable_meanings() {
  static const std::map<std::string, std::string> meanings = {
      {"PIPETTE_TP", "Tensor-parallel size."},
      {"PIPETTE_PP", "Pipeline-parallel size (stages)."},
      {"PIPETTE_DP", "Data-parallel size."},
      {"PIPETTE_CP", "Context-parallel size: GPUs that share each sequence (1 without context parallelism)."},
      {"PIPETTE_EP", "Expert-parallel size of MoE layers (1 for dense models)."},
      {"PIPETTE_ETP", "Expert tensor-parallel size of MoE layers (1 for dense models)."},
      {"PIPETTE_VPP", "Virtual pipeline stages per rank (1: plain 1F1B, more: interleaved 1F1B)."},
      {"PIPETTE_MICRO_BATCH", "Micro-batch size in sequences."},
      {"PIPETTE_GLOBAL_BATCH", "Global batch size in sequences."},
      {"PIPETTE_NUM_MICROBATCHES", "Micro-batches per iteration and pipeline."},
      {"PIPETTE_RECOMPUTE", "Activation recomputation: none, selective or full."},
      {"PIPETTE_SEQUENCE_PARALLEL", "Sequence parallelism on (1) or off (0)."},
      {"PIPETTE_DISTRIBUTED_OPTIMIZER", "Distributed optimizer (ZeRO-1) on (1) or off (0)."},
      {"PIPETTE_FULLY_SHARDED",
       "Fully sharded data parallelism (FSDP: parameters, gradients and optimizer state sharded over dp x cp) on (1) "
       "or off (0); torchtitan plans only."},
      {"PIPETTE_RANK_ORDER",
       "Comma-separated SLURM_PROCIDs: entry r is the task that acts as training rank r (Megatron order: "
       "tensor-parallel fastest, then data-parallel, then pipeline)."},
      {"PIPETTE_NODE_ORDER", "Comma-separated node names in the order the placement uses them (torchrun's NODE_RANK order)."},
      {"PIPETTE_PREDICTED_ITER_MS", "Predicted iteration time in milliseconds."},
      {"PIPETTE_PREDICTED_MEM_GIB", "Predicted peak memory per GPU in GiB."},
      {"PIPETTE_PLAN_HASH", "A stable hash of the plan; the same inputs give the same hash on every node."},
      {"PIPETTE_MEGATRON_ARGS",
       "The plan as Megatron-LM arguments, ready to append to its command line (framework megatron-core)."},
      {"PIPETTE_NEMO_OVERRIDES",
       "The plan as NeMo 2 / Megatron-Bridge recipe overrides, KEY=VALUE, off switches included (framework nemo)."},
      {"PIPETTE_TORCHTITAN_ARGS",
       "The plan as torchtitan command-line options, ending with its activation-checkpoint subcommand (framework "
       "torchtitan)."},
      {"PIPETTE_MEGATRON_DEEPSPEED_ARGS",
       "The plan as Megatron-DeepSpeed arguments, ending with --deepspeed --zero-stage (framework megatron-deepspeed); "
       "its DeepSpeed JSON is PIPETTE_DEEPSPEED_CONFIG."},
      {"PIPETTE_NANOTRON_OVERRIDES",
       "The plan as dotted keys of nanotron's YAML config, KEY=VALUE, pp_engine included (1f1b unless the engine's "
       "pp-schedule is afab; framework nanotron)."},
      {"PIPETTE_DEEPSPEED_CONFIG",
       "The plan's batch, gradient-accumulation steps and ZeRO stage as a DeepSpeed JSON config, to write to the file "
       "--deepspeed_config names (frameworks deepspeed and megatron-deepspeed)."},
  };
  return meanings;
}

std::string plan_variables_section(std::string& error) {
  std::set<std::string> set_by_plugin;
  std::string out;
  for (const char* const* name = pipette::spank::plan_variable_names(); *name != nullptr; ++name) {
    set_by_plugin.insert(*name);
    const auto meaning = plan_variable_meanings().find(*name);
    if (meaning == plan_variable_meanings().end()) {
      error = std::string("the plugin sets ") + *name + ", which the page does not describe";
      return "";
    }
    out += ".TP\n.B " + literal(*name) + "\n" + escape(meaning->second) + "\n";
  }
  for (const auto& [name, meaning] : plan_variable_meanings()) {
    if (!set_by_plugin.count(name)) {
      error = "the page describes " + name + ", which the plugin no longer sets";
      return "";
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::ifstream site_file(PIPETTE_SITE_FILE);
  std::stringstream site;
  site << site_file.rdbuf();
  if (!site_file || site.str().empty()) {
    std::fprintf(stderr, "%s: cannot read the site file %s\n", argv[0], PIPETTE_SITE_FILE);
    return 1;
  }
  std::string error;
  const std::string plan_variables = plan_variables_section(error);
  if (!error.empty()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
    return 1;
  }
  return pipette::man::generate(argc, argv,
                                {{"VERSION", pipette::version()},
                                 {"OPTIONS", options_section()},
                                 {"PLAN_VARIABLES", plan_variables},
                                 {"SITE_FILE", pipette::man::verbatim(site.str())}});
}
