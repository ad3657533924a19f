#include "command_table.hpp"

#include <algorithm>
#include <array>

namespace pipette::cli {

namespace {

// Options shared by the planning commands (plan, explain, simulate).
constexpr OptionSpec kModel{"model", "PRESET|FILE",
                            "model preset name (see etc/models/) or a model YAML file; required", ""};
constexpr OptionSpec kNodes{"nodes", "HOSTLIST",
                            "the job's nodes as a Slurm hostlist, e.g. gpu[01-16]; default: the bundled example cluster",
                            ""};
constexpr OptionSpec kNumNodes{"num-nodes", "N",
                               "plan for N nodes instead of a hostlist (the first N of the cluster's nodes)", ""};
constexpr OptionSpec kGpusPerNode{"gpus-per-node", "N", "GPUs per node", "8"};
constexpr OptionSpec kSite{"site", "FILE", "site-defaults file; default: the bundled example cluster's", ""};
constexpr OptionSpec kLinks{"links", "CACHE", "link-measurement cache; default: the one the site file names", ""};
constexpr OptionSpec kGlobalBatch{"global-batch", "B", "global batch in sequences", "the site default"};
constexpr OptionSpec kSeq{"seq", "L", "sequence length in tokens", "the site default"};
constexpr OptionSpec kFix{"fix", "KNOBS",
                          "knobs the search must keep, e.g. tp=8,pp=4,mbs=1,vpp=2,recompute=selective,sp=on,distopt=on;"
                          " recompute is none, selective, full (every layer) or block:N (full recompute of the first N"
                          " layers of each model chunk, Megatron's --recompute-method block; Megatron-core and NeMo only);"
                          " fsdp=on|off shards parameters, gradients and optimizer state over dp x cp (torchtitan's FSDP2,"
                          " its default without a pipeline; other frameworks refuse it);"
                          " with every knob fixed (cp may be left out, meaning 1; a model with experts needs ep and etp too)"
                          " the command evaluates exactly that configuration",
                          ""};
constexpr OptionSpec kFramework{"framework", "NAME",
                                "the training framework that runs the plan (megatron-core, nemo, torchtitan, megatron-deepspeed, "
                                "nanotron, deepspeed): only plans it "
                                "can build are considered",
                                "the site's framework"};
constexpr OptionSpec kEngine{"engine", "SWITCHES",
                             "the engine's switches over the site's defaults.engine and the stack's, e.g. "
                             "dp-overlap=off,tp-comm-overlap=on; keys: precision (fp32, fp16, bf16, fp8), attention "
                             "(flash, unfused), and on|off: fp8-params (fp8 weights, megatron-core and nemo), fp32-grads, "
                             "dp-overlap, tp-overlap, tp-comm-overlap, tp-recompute-allgather (nanotron), ce-fusion (megatron-core, nemo), "
                             "fused-norm (torchtitan, deepspeed), "
                             "nvls (NCCL_NVLS_ENABLE); pp-schedule (1f1b, "
                             "afab: nanotron)",
                             "the site's, else the stack's"};
constexpr OptionSpec kPrecision{"precision", "P", "training precision: fp32, fp16, bf16 or fp8 (the engine's precision key)",
                                "the site's, else bf16"};
constexpr OptionSpec kTop{"top", "K", "how many plans to show (the chosen one and K-1 runners-up)", "5"};
constexpr OptionSpec kJson{"json", "", "print machine-readable JSON (schema: README, `pipette plan --json`)", ""};
constexpr OptionSpec kSvg{"svg", "FILE", "write the simulated schedule as an SVG Gantt chart", ""};
constexpr OptionSpec kTrace{"trace", "FILE", "write the simulated schedule as Chrome-trace JSON (opens in Perfetto)", ""};
constexpr OptionSpec kReplica{"replica", "D", "DP replica drawn in the SVG chart", "the slowest"};
constexpr OptionSpec kHelp{"help", "", "show this help", ""};

constexpr std::array<const OptionSpec*, 15> kPlanOptions{&kModel, &kNodes,  &kNumNodes, &kGpusPerNode, &kSite,
                                                         &kLinks, &kGlobalBatch, &kSeq, &kFix,   &kFramework,
                                                         &kEngine, &kPrecision, &kTop, &kJson,   &kHelp};
constexpr std::array<const OptionSpec*, 14> kExplainOptions{&kModel, &kNodes, &kNumNodes,    &kGpusPerNode,
                                                            &kSite,  &kLinks, &kGlobalBatch, &kSeq,
                                                            &kFix,   &kFramework, &kEngine, &kPrecision, &kTop, &kHelp};
constexpr std::array<const OptionSpec*, 17> kSimulateOptions{
    &kModel, &kNodes, &kNumNodes, &kGpusPerNode, &kSite,  &kLinks,    &kGlobalBatch, &kSeq,
    &kFix,   &kFramework, &kEngine, &kPrecision, &kSvg,  &kTrace,       &kReplica, &kJson,  &kHelp};
constexpr std::array<const OptionSpec*, 1> kHelpOnly{&kHelp};
constexpr std::array<const OptionSpec*, 4> kLinksShowOptions{&kSite, &kLinks, &kNodes, &kHelp};
constexpr OptionSpec kImportInto{"links", "CACHE", "the cache to merge into; default: the one --site names", ""};
constexpr OptionSpec kImportNodes{"nodes", "HOSTLIST",
                                  "the nodes each run covered, in rank order, when the host names nccl-tests printed "
                                  "are not the Slurm names",
                                  ""};
constexpr OptionSpec kMeasuredAt{"measured-at", "TIME", "when the runs were made, UTC ISO-8601", "each file's modification time"};
constexpr std::array<const OptionSpec*, 5> kLinksImportOptions{&kSite, &kImportInto, &kImportNodes, &kMeasuredAt, &kHelp};

constexpr OptionSpec kRecordsModel{"model", "PRESET|FILE", "the model the runs trained, when their records do not say", ""};
constexpr OptionSpec kRecordsNodes{"num-nodes", "N", "how many nodes the runs used, when their records do not say", ""};
constexpr OptionSpec kRecordsGpusPerNode{"gpus-per-node", "N", "GPUs per node of the runs, when their records do not say", ""};
constexpr OptionSpec kRecordsGpu{"gpu", "NAME", "the runs' GPU model", "the site's gpu"};
constexpr OptionSpec kRecordsFramework{"framework", "NAME", "the runs' framework (megatron-core, nemo, torchtitan, megatron-deepspeed, nanotron, deepspeed)",
                                       "what the log shows"};
constexpr OptionSpec kRecordsLayout{"layout", "KNOBS", "the runs' layout in --fix syntax (an MoE run's ep and etp too), when their logs do not say", ""};
constexpr OptionSpec kRecordsEngine{"engine", "SWITCHES",
                                    "the runs' engine switches in --engine syntax; what a log states (precision, attention, "
                                    "fp32 gradients, TP communication overlap) wins",
                                    "the plan's with --slurm-job, else the site's, else the stack's"};
constexpr OptionSpec kRecordsBatch{"global-batch", "B", "the runs' global batch in sequences, when their logs do not say", ""};
constexpr OptionSpec kRecordsSeq{"seq", "L", "the runs' sequence length, when their logs do not say", ""};
constexpr OptionSpec kSlurmJob{"slurm-job", "JOBID",
                               "also read a finished Pipette-planned job: its output file (scontrol show job) and the plan "
                               "the plugin kept for it ($XDG_STATE_HOME or ~/.local/state, pipette/jobs/CLUSTER-JOBID.plan)",
                               ""};
constexpr OptionSpec kCalibrationOutput{"output", "FILE", "the calibration file to merge into",
                                        "the site file's calibration.file"};
constexpr OptionSpec kDryRun{"dry-run", "", "fit and report, write nothing", ""};
constexpr std::array<const OptionSpec*, 14> kCalibrateOptions{
    &kSite,         &kRecordsModel, &kRecordsNodes, &kRecordsGpusPerNode, &kRecordsGpu, &kRecordsFramework, &kRecordsLayout,
    &kRecordsEngine, &kRecordsBatch, &kRecordsSeq,  &kSlurmJob,     &kCalibrationOutput,  &kDryRun,     &kHelp};

constexpr std::array<CommandSpec, 7> kCommands{{
    {"plan", "",
     "choose the parallel layout and rank placement of a training job",
     "Runs the same planner as the Slurm plugin on a model, a training setup and a cluster (the bundled "
     "16-node example unless --nodes/--site/--links say otherwise) and prints the chosen plan and the "
     "runners-up: sizes, micro-batch, predicted iteration time, tokens/s, MFU and peak memory per GPU "
     "against capacity, then the placement.",
     kPlanOptions},
    {"explain", "",
     "why the plan wins: time and memory breakdowns, links used, runners-up",
     "Plans like `pipette plan`, then explains the chosen plan: where the iteration time goes (compute, "
     "pipeline bubble, TP/PP/DP communication, optimizer), memory per pipeline stage, which links were "
     "measured and which assumed, and why each runner-up lost.",
     kExplainOptions},
    {"simulate", "",
     "simulate the plan's exact pipeline schedule; draw it",
     "Plans like `pipette plan` (fix every knob to simulate a given configuration), then runs the "
     "discrete-event simulation of its 1F1B, interleaved or (nanotron's afab) all-forward-all-backward "
     "schedule on the per-link times and prints "
     "the simulated iteration time beside the closed-form prediction.",
     kSimulateOptions},
    {"check-config", "FILE",
     "check a site-defaults file (and the link cache it names)",
     "Loads a site-defaults file strictly (unknown keys and wrong types are errors with their line), "
     "then the link cache it names, and reports what they contain. Exits non-zero on the first error.",
     kHelpOnly},
    {"links show", "",
     "list the link measurements of a cache",
     "Prints every node pair of a link cache (bandwidth, latency, age), marks links well below the "
     "cache's median, and the per-node intra-node summary.",
     kLinksShowOptions},
    {"links import", "FILE...",
     "merge nccl-tests output into a link cache",
     "Reads nccl-tests output files (any *_perf binary; a run over two nodes gives that node pair's "
     "bandwidth and latency from an alpha-beta fit of its timings, a run on one node the node's "
     "GPU-pair matrix), and merges them into the cache atomically; per pair and node the newer "
     "measurement wins. Give --links or --site: the bundled example's cache is never written.",
     kLinksImportOptions},
    {"calibrate", "[FILE...]",
     "fit the model's factors to this site's own finished runs",
     "Reads finished runs (Megatron-LM / NeMo, torchtitan, nanotron and DeepSpeed / Megatron-DeepSpeed logs, or a CSV table with the columns "
     "model, nodes, gpu, framework, tp, pp, dp, vpp, mbs, global_batch, seq, recompute, sp, distopt, iteration_seconds, "
     "peak_gib and status, optionally precision, ep, etp and device_gib (nvidia-smi's or DCGM's peak); README, \"Calibration\"), "
     "skips warm-up iterations (the options below complete what a log does not state), and fits per framework and GPU a few bounded factors: compute efficiency, "
     "per-layer and pipeline-hop overhead, collective efficiency and its loss with node count, the activation-memory "
     "factor and the allocator reserve. Prints each factor with its uncertainty (or why the records cannot determine "
     "it), the residual of every record before and after, and a leave-one-out error; then merges the result into the "
     "calibration file the site file names, which the plugin and every planning command use from then on.",
     kCalibrateOptions},
}};

std::string option_line(const OptionSpec& option) {
  std::string left = "  --" + std::string(option.name);
  if (!option.value_name.empty()) left += ' ' + std::string(option.value_name);
  constexpr size_t kHelpColumn = 28;
  std::string line = left + (left.size() + 2 <= kHelpColumn ? std::string(kHelpColumn - left.size(), ' ') : "\n" + std::string(kHelpColumn, ' '));
  line += std::string(option.help);
  if (!option.default_value.empty()) line += " (default: " + std::string(option.default_value) + ")";
  return line + "\n";
}

// Word-wraps a paragraph at 78 columns.
std::string wrap(std::string_view text, size_t indent) {
  std::string out;
  size_t column = 0;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    if (column > indent && column + 1 + word.size() > 78) {
      out += "\n";
      column = 0;
    }
    if (column == 0) {
      out += std::string(indent, ' ');
      column = indent;
    } else {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  return out + "\n";
}

}  // namespace

std::span<const CommandSpec> commands() { return kCommands; }

const CommandSpec* find_command(std::string_view name) {
  const auto found = std::find_if(kCommands.begin(), kCommands.end(), [&](const CommandSpec& c) { return c.name == name; });
  return found == kCommands.end() ? nullptr : &*found;
}

std::string program_help() {
  std::string out =
      "usage: pipette COMMAND [OPTIONS]\n"
      "       pipette --version\n\n"
      "Plans the parallel layout (TP/PP/DP, micro-batch, rank placement) of an LLM training job\n"
      "with the engine the Slurm plugin runs at job start.\n\n"
      "commands:\n";
  for (const auto& command : kCommands) {
    std::string left = "  " + std::string(command.name);
    out += left + std::string(left.size() < 18 ? 18 - left.size() : 1, ' ') + std::string(command.summary) + "\n";
  }
  out += "\n`pipette COMMAND --help` describes a command's options.\n";
  return out;
}

std::string command_help(const CommandSpec& command) {
  std::string out = "usage: pipette " + std::string(command.name);
  if (!command.options.empty()) out += " [OPTIONS]";
  if (!command.operands.empty()) out += ' ' + std::string(command.operands);
  out += "\n\n" + wrap(command.description, 0) + "\noptions:\n";
  for (const OptionSpec* option : command.options) out += option_line(*option);
  return out;
}

}  // namespace pipette::cli
