#include "reports.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "calibration_commands.hpp"
#include "json_writer.hpp"
#include "pipette/core/launch.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/pipeline_blocks.hpp"
#include "pipette/core/placement.hpp"
#include "pipette/core/simulator.hpp"
#include "pipette/core/stack_profile.hpp"
#include "pipette/core/units.hpp"
#include "pipette/topology/version.hpp"
#include "text_table.hpp"

namespace pipette::cli {

namespace {

constexpr int kPlanSchemaVersion = 1;
constexpr int kMaxReplicaColumns = 8;

int node_of_gpu(const Cluster& cluster, int gpu) { return gpu / cluster.gpus_per_node; }

std::string billions(std::int64_t count) { return strprintf("%.1f B", static_cast<double>(count) / 1e9); }

std::string header(const PlanningOutcome& outcome) {
  const Cluster& cluster = outcome.cluster;
  std::string out = "pipette " + std::string(version()) + ": " + outcome.model.name + " (" +
                    billions(total_parameters(outcome.model)) + " parameters) on " +
                    std::to_string(cluster.num_nodes()) + " nodes x " + std::to_string(cluster.gpus_per_node) + " " +
                    cluster.gpu.name + " (" + std::to_string(cluster.num_gpus()) + " GPUs, " +
                    human_gibibytes(cluster.gpu.memory_bytes) + " each)\n";
  out += "cluster: " + outcome.cluster_source + "; node pairs measured " + std::to_string(outcome.links_measured) +
         ", assumed " + std::to_string(outcome.links_assumed) + "\n";
  const TrainingSpec& training = outcome.training;
  out += "training: global batch " + std::to_string(training.global_batch_sequences) + " sequences x " +
         std::to_string(training.sequence_length) + " tokens, " + to_string(training.precision) + ", " +
         to_string(training.attention) + " attention" +
         (!training.overlap_gradient_reduce ? ""
          // nanotron's and DeepSpeed's ZeRO-1 reduce after the last backward whatever the switch says
          // (ShardedOptimizerCollectives): only their plans without it overlap.
          : training.sharded_optimizer == ShardedOptimizerCollectives::all_reduce_and_gather_after_step
              ? ", gradient reduction overlapped without ZeRO-1 (with it, after the backward)"
              : ", gradient reduction overlapped") +
         (training.pipeline_schedule == PipelineSchedule::all_forward_all_backward
              ? ", all forward then all backward (nanotron afab: every micro-batch held)"
              : "") +
         "\n";
  for (const std::string& note : outcome.notes) out += "note: " + note + "\n";
  return out;
}

std::string on_off(bool flag) { return flag ? "on" : "off"; }

std::string layers_text(const std::vector<int>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(layers[i]);
  }
  return out;
}

// Layers per stage, runs of equal stages folded: "10x8", "9,10x6,11".
std::string layers_compact(const std::vector<int>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t run = 1;
    while (i + run < layers.size() && layers[i + run] == layers[i]) ++run;
    if (!out.empty()) out += ',';
    out += std::to_string(layers[i]);
    if (run > 1) out += 'x' + std::to_string(run);
    i += run;
  }
  return out;
}

// Node (and GPUs, when the TP group does not fill the node) of one (pp, lane) position; a lane is
// a DP replica, or with context parallelism one cp rank of one.
std::string position_cell(const Plan& plan, const Cluster& cluster, int pp_index, int lane) {
  const ParallelConfig& config = plan.config;
  std::set<int> nodes;
  std::vector<int> local_gpus;
  for (int tp_index = 0; tp_index < config.tp; ++tp_index) {
    const int rank = rank_of_position(config, {tp_index, lane, pp_index});
    const int gpu = plan.placement.gpu_of_rank[static_cast<size_t>(rank)];
    nodes.insert(node_of_gpu(cluster, gpu));
    local_gpus.push_back(gpu % cluster.gpus_per_node);
  }
  std::string cell;
  for (const int node : nodes) cell += (cell.empty() ? "" : "+") + cluster.node_names[static_cast<size_t>(node)];
  if (nodes.size() == 1 && config.tp < cluster.gpus_per_node) {
    const auto [low, high] = std::minmax_element(local_gpus.begin(), local_gpus.end());
    const bool contiguous = *high - *low + 1 == config.tp;
    cell += ":" + (contiguous ? std::to_string(*low) + "-" + std::to_string(*high) : layers_text(local_gpus));
  }
  return cell;
}

std::string placement_report(const Plan& plan, const Cluster& cluster) {
  const ParallelConfig& config = plan.config;
  std::string out = config.cp > 1 ? "placement of plan 1 (Megatron rank order: tp fastest, then cp, then dp, then pp):\n"
                                  : "placement of plan 1 (Megatron rank order: tp fastest, then dp, then pp):\n";
  const int shown = std::min(config.dp_cp(), kMaxReplicaColumns);
  std::vector<TextTable::Column> columns = {{"stage"}, {"layers"}};
  for (int d = 0; d < shown; ++d) {
    const std::string name = config.cp > 1 ? "replica " + std::to_string(d / config.cp) + " cp " + std::to_string(d % config.cp)
                                           : "replica " + std::to_string(d);
    columns.push_back({name, TextTable::Align::left});
  }
  TextTable table(columns);
  for (int s = 0; s < config.pp; ++s) {
    std::vector<std::string> row = {std::to_string(s), std::to_string(config.layers_per_stage[static_cast<size_t>(s)])};
    for (int d = 0; d < shown; ++d) row.push_back(position_cell(plan, cluster, s, d));
    table.add_row(row);
  }
  out += table.render("  ");
  if (shown < config.dp_cp()) {
    out += "  ... " + std::to_string(config.dp_cp() - shown) + " more " + (config.cp > 1 ? "lanes" : "replicas") +
           " (`pipette plan --json` lists every rank)\n";
  }
  if (!plan.node_order.empty()) {
    out += "  node order (NODE_RANK 0, 1, ...):";
    for (const int node : plan.node_order) out += " " + cluster.node_names[static_cast<size_t>(node)];
    out += "\n";
  }
  if (plan.default_placement_iteration_seconds > 0) {
    const double gain = 1 - plan.time.iteration_seconds / plan.default_placement_iteration_seconds;
    out += "  predicted iteration " + human_seconds(plan.time.iteration_seconds) + " with this placement, " +
           human_seconds(plan.default_placement_iteration_seconds) + " in Slurm's node order (" +
           strprintf("%.1f%% faster", 100 * gain) + ")\n";
  }
  out += "  plan hash " + plan_hash(plan) + "\n";
  return out;
}

std::string memory_cell(const Plan& plan, const Cluster& cluster) {
  return strprintf("%.1f / %.1f GiB", plan.peak_memory_bytes / units::gibibyte, cluster.gpu.memory_bytes / units::gibibyte);
}

std::string plans_table(const PlanningOutcome& outcome) {
  TextTable table({{"#"},
                   {"tp"},
                   {"pp"},
                   {"dp"},
                   {"vpp"},
                   {"mbs"},
                   {"micro-batches"},
                   {"layers/stage", TextTable::Align::left},
                   {"recompute", TextTable::Align::left},
                   {"sp", TextTable::Align::left},
                   {"dist-opt", TextTable::Align::left},
                   {"iteration"},
                   {"tokens/s"},
                   {"MFU"},
                   {"peak memory / GPU"}});
  for (size_t i = 0; i < outcome.plans.size(); ++i) {
    const Plan& plan = outcome.plans[i];
    const ParallelConfig& c = plan.config;
    table.add_row({std::to_string(i + 1), std::to_string(c.tp), std::to_string(c.pp), std::to_string(c.dp),
                   std::to_string(c.virtual_stages), std::to_string(c.micro_batch),
                   std::to_string(plan.num_microbatches), layers_compact(c.layers_per_stage), recompute_knob(c),
                   on_off(c.sequence_parallel),
                   c.fully_sharded ? "fsdp" : on_off(c.distributed_optimizer), human_seconds(plan.time.iteration_seconds),
                   strprintf("%.0f", plan.tokens_per_second), strprintf("%.1f%%", 100 * plan.model_flops_utilization),
                   memory_cell(plan, outcome.cluster)});
  }
  if (outcome.model.is_moe()) {
    // MoE plans: the expert layout of each, beside the table (dense plans have none).
    std::string experts = table.render("  ");
    for (size_t i = 0; i < outcome.plans.size(); ++i) {
      const ParallelConfig& c = outcome.plans[i].config;
      experts += strprintf("  plan %zu experts: ep=%d etp=%d (expert-dp %d)\n", i + 1, c.ep, c.etp, c.expert_dp());
    }
    return experts;
  }
  std::string rendered = table.render("  ");
  for (size_t i = 0; i < outcome.plans.size(); ++i) {
    // Long-context plans: the context-parallel size beside the table (dp counts replicas).
    const ParallelConfig& c = outcome.plans[i].config;
    if (c.cp > 1)
      rendered += strprintf("  plan %zu context parallel: cp=%d, %d tokens of each sequence per GPU\n", i + 1, c.cp,
                            outcome.training.sequence_length / c.cp);
  }
  return rendered;
}

void write_time(JsonWriter& json, const TimeBreakdown& time) {
  json.begin_object("time")
      .value("iteration_seconds", time.iteration_seconds)
      .value("compute_seconds", time.compute_seconds)
      .value("recompute_seconds", time.recompute_seconds)
      .value("pipeline_bubble_seconds", time.pipeline_bubble_seconds)
      .value("tp_communication_seconds", time.tp_communication_seconds)
      .value("pp_communication_seconds", time.pp_communication_seconds)
      .value("dp_communication_seconds", time.dp_communication_seconds)
      .value("tied_embedding_seconds", time.tied_embedding_seconds)
      .value("optimizer_seconds", time.optimizer_seconds)
      .value("embedding_imbalance_seconds", time.embedding_imbalance_seconds)
      .value("tp_hidden_seconds", time.tp_hidden_seconds)
      .value("ep_communication_seconds", time.ep_communication_seconds)
      .value("cp_communication_seconds", time.cp_communication_seconds)
      .end_object();
}

// Every variable the plugin would export for this plan (plan_variables, the plugin's own function).
void write_environment(JsonWriter& json, const Plan& plan, const PlanningOutcome& outcome) {
  json.begin_object("environment");
  for (const auto& [name, value] : plan_variables(outcome.model, outcome.training, plan, outcome.cluster.node_names,
                                                  plan_hash(plan))) {
    json.value(name, value);
  }
  json.end_object();
}

void write_plan(JsonWriter& json, const Plan& plan, const PlanningOutcome& outcome) {
  const Cluster& cluster = outcome.cluster;
  const ParallelConfig& c = plan.config;
  json.begin_object();
  json.value("plan_hash", plan_hash(plan));
  json.value("tp", c.tp).value("pp", c.pp).value("dp", c.dp).value("virtual_stages", c.virtual_stages);
  json.value("cp", c.cp).value("ep", c.ep).value("etp", c.etp);
  json.value("micro_batch", c.micro_batch).value("num_microbatches", plan.num_microbatches);
  json.value("recompute", recompute_knob(c));  // the --fix spelling: none, selective, full or block:N
  json.value("sequence_parallel", c.sequence_parallel).value("distributed_optimizer", c.distributed_optimizer);
  json.value("fully_sharded", c.fully_sharded);
  json.begin_array("layers_per_stage");
  for (const int layers : c.layers_per_stage) json.element(layers);
  json.end_array();
  json.value("iteration_seconds", plan.time.iteration_seconds);
  json.value("tokens_per_second", plan.tokens_per_second);
  json.value("model_flops_utilization", plan.model_flops_utilization);
  json.value("peak_memory_bytes", plan.peak_memory_bytes);
  json.value("gpu_memory_bytes", cluster.gpu.memory_bytes);
  write_time(json, plan.time);
  json.begin_array("memory_per_stage");
  for (const StageMemory& m : plan.memory_per_stage) {
    json.begin_object()
        .value("weights_bytes", m.weights_bytes)
        .value("gradients_bytes", m.gradients_bytes)
        .value("optimizer_state_bytes", m.optimizer_state_bytes)
        .value("activations_bytes", m.activations_bytes)
        .value("backward_end_bytes", m.backward_end_bytes)
        .value("logits_and_loss_bytes", m.logits_and_loss_bytes)
        .value("runtime_overhead_bytes", m.runtime_overhead_bytes)
        .value("step_gradients_bytes", m.step_gradients_bytes)
        .value("step_peak_bytes", m.step_peak_bytes())
        .value("total_bytes", m.total_bytes())
        .end_object();
  }
  json.end_array();
  json.begin_object("placement");
  json.begin_array("ranks");  // entry r: rank r's node and local GPU
  for (const int gpu : plan.placement.gpu_of_rank) {
    json.begin_object()
        .value("node", cluster.node_names[static_cast<size_t>(node_of_gpu(cluster, gpu))])
        .value("local_gpu", gpu % cluster.gpus_per_node)
        .end_object();
  }
  json.end_array();
  json.begin_array("node_order");
  for (const int node : plan.node_order) json.element(cluster.node_names[static_cast<size_t>(node)]);
  json.end_array();
  json.value("default_order_iteration_seconds", plan.default_placement_iteration_seconds);
  const PlacementSearchSummary& search = plan.placement_search;
  json.begin_object("search")
      .value("moves_evaluated", static_cast<long long>(search.moves_evaluated))
      .value("move_budget", static_cast<long long>(search.move_budget))
      .value("moves_to_best", static_cast<long long>(search.moves_to_best))
      .value("exact", search.exact)
      .value("local_gpu_moves", search.local_moves)
      .value("identity_local_order_iteration_seconds", search.identity_local_order_iteration_seconds)
      .end_object();
  const RailAlignment alignment = rail_alignment(cluster, c, plan.placement);
  json.value("inter_node_neighbours", alignment.inter_node_neighbours);
  json.value("neighbours_on_different_local_gpus", alignment.on_different_local_gpus);
  json.end_object();
  json.begin_array("links_assumed");
  for (const auto& link : plan.links_assumed) json.element(link);
  json.end_array();
  write_environment(json, plan, outcome);
  json.end_object();
}

void write_preamble(JsonWriter& json, const PlanningOutcome& outcome, const char* schema) {
  json.value("schema", schema).value("schema_version", kPlanSchemaVersion).value("pipette_version", version());
  json.begin_object("model")
      .value("name", outcome.model.name)
      .value("parameters", static_cast<long long>(total_parameters(outcome.model)))
      .value("layers", outcome.model.num_layers)
      .end_object();
  json.begin_object("training")
      .value("global_batch_sequences", static_cast<long long>(outcome.training.global_batch_sequences))
      .value("sequence_length", outcome.training.sequence_length)
      .value("precision", to_string(outcome.training.precision))
      .value("framework", to_string(outcome.training.target.framework))
      .value("megatron_pipeline_layout", outcome.training.target.pipeline_layout);
  // Every engine switch as planned and where it came from ("stack default", "site" or "job").
  json.begin_object("engine");
  for (const EngineSetting& setting : outcome.engine)
    json.begin_object(setting.key).value("value", setting.value).value("source", to_string(setting.source)).end_object();
  json.end_object();
  json.end_object();
  json.begin_array("notes");
  for (const std::string& note : outcome.notes) json.element(note);
  json.end_array();
  json.begin_object("cluster");
  json.value("source", outcome.cluster_source);
  json.begin_array("nodes");
  for (const auto& name : outcome.cluster.node_names) json.element(name);
  json.end_array();
  json.value("gpus_per_node", outcome.cluster.gpus_per_node)
      .value("gpu", outcome.cluster.gpu.name)
      .value("gpu_memory_bytes", outcome.cluster.gpu.memory_bytes)
      .value("node_pairs_measured", outcome.links_measured)
      .value("node_pairs_assumed", outcome.links_assumed)
      .end_object();
}

// Component name and seconds of a breakdown, in the order people read them.
std::vector<std::pair<std::string, double>> components(const TimeBreakdown& time) {
  std::vector<std::pair<std::string, double>> parts = {{"compute (incl. recompute)", time.compute_seconds},
                                                       {"pipeline bubble", time.pipeline_bubble_seconds},
                                                       {"TP communication", time.tp_communication_seconds},
                                                       {"PP communication (exposed)", time.pp_communication_seconds},
                                                       {"DP communication (exposed)", time.dp_communication_seconds},
                                                       {"optimizer step", time.optimizer_seconds}};
  // A tied embedding split over pipeline ranks only: its gradient all-reduce after the DP reduction.
  if (time.tied_embedding_seconds > 0) parts.insert(parts.end() - 1, {"tied embedding gradient all-reduce", time.tied_embedding_seconds});
  // MoE plans only: the expert all-to-alls, not overlapped.
  if (time.ep_communication_seconds > 0) parts.insert(parts.begin() + 3, {"EP all-to-all (MoE dispatch + combine)", time.ep_communication_seconds});
  // Long-context plans only: the ring attention passes that outlast the attention they overlap.
  if (time.cp_communication_seconds > 0) parts.insert(parts.begin() + 3, {"CP ring K/V passes (exposed)", time.cp_communication_seconds});
  return parts;
}

std::string time_breakdown_report(const Plan& plan) {
  std::string out = "where the time goes (plan 1, one iteration):\n";
  TextTable table({{"component", TextTable::Align::left}, {"time"}, {"share"}});
  for (const auto& [name, seconds] : components(plan.time)) {
    table.add_row({name, human_seconds(seconds), strprintf("%.1f%%", 100 * seconds / plan.time.iteration_seconds)});
  }
  table.add_row({"iteration", human_seconds(plan.time.iteration_seconds), "100.0%"});
  // Parts of the rows above, not additions to them.
  const auto share = [&](double seconds) { return strprintf("%.1f%%", 100 * seconds / plan.time.iteration_seconds); };
  table.add_row({"  of which recomputing activations", human_seconds(plan.time.recompute_seconds),
                 share(plan.time.recompute_seconds)});
  table.add_row({"  of which embedding / LM-head imbalance", human_seconds(plan.time.embedding_imbalance_seconds),
                 share(plan.time.embedding_imbalance_seconds)});
  // Beside the iteration, not in it: what Megatron's backward overlaps with its GEMMs.
  table.add_row({"  TP hidden beside backward GEMMs (not added)",
                 human_seconds(plan.time.tp_hidden_seconds), ""});
  return out + table.render("  ");
}

std::string memory_report(const ParallelConfig& config, const std::vector<StageMemory>& memory_per_stage,
                          const Cluster& cluster, const std::string& title) {
  std::string out = "memory per GPU by pipeline stage (" + title + "; GiB):\n";
  TextTable table({{"stage"},
                   {"layers"},
                   {"weights"},
                   {"grads"},
                   {"optimizer"},
                   {"activations"},
                   {"logits+loss"},
                   {"runtime"},
                   {"total"},
                   {"of capacity"}});
  const auto gib = [](double bytes) { return strprintf("%.2f", bytes / units::gibibyte); };
  for (size_t s = 0; s < memory_per_stage.size(); ++s) {
    const StageMemory& m = memory_per_stage[s];
    table.add_row({std::to_string(s), std::to_string(config.layers_per_stage[s]), gib(m.weights_bytes),
                   gib(m.gradients_bytes), gib(m.optimizer_state_bytes), gib(m.activations_bytes),
                   gib(m.logits_and_loss_bytes), gib(m.runtime_overhead_bytes), gib(m.total_bytes()),
                   strprintf("%.0f%%", 100 * m.total_bytes() / cluster.gpu.memory_bytes)});
  }
  out += table.render("  ");
  // The columns are the backward's peak; where the optimizer step's is higher, it is the total.
  for (size_t s = 0; s < memory_per_stage.size(); ++s) {
    const StageMemory& m = memory_per_stage[s];
    if (m.backward_end_bytes > 0) {
      out += strprintf("  stage %zu: a backward's end binds: %s GiB of 16-bit gradients on their way into the fp32 buffer "
                       "(or their fp32 cast) beside the other in-flight micro-batches, in the activations column\n",
                       s, gib(m.backward_end_bytes).c_str());
    }
    if (!m.step_peak_binds()) continue;
    out += strprintf("  stage %zu: the optimizer step's peak binds, %s: model state %s, fp32 gradient copy %s, runtime %s "
                     "(the backward's peak: %s)\n",
                     s, gib(m.step_peak_bytes()).c_str(), gib(m.model_state_bytes()).c_str(),
                     gib(m.step_gradients_bytes).c_str(), gib(m.step_runtime_overhead_bytes).c_str(),
                     gib(m.activation_peak_bytes()).c_str());
  }
  return out;
}

std::string link_text(const Link& link) {
  return strprintf("%.1f GB/s, %.1f µs, %s", link.bandwidth_bytes_per_second / units::gigabyte,
                   link.latency_seconds / units::microsecond, link.measured ? "measured" : "ASSUMED");
}

// How much of its slowest pair's bandwidth a collective over all of the job's nodes (and a pipeline
// hop, which meets all of them sending at once) attains, and
// whether that fall comes from pipette-probe's measured curve or the site's prior (CollectiveScaling).
std::string collective_scaling_text(const Cluster& cluster) {
  const CollectiveScaling& scaling = cluster.collective_scaling;
  std::string source;
  if (scaling.measured.empty()) {
    source = strprintf("the prior for the site's priors.network (exponent %.3f)", scaling.contention_exponent);
  } else {
    std::string counts = "2";
    for (const MeasuredCollectiveFactor& point : scaling.measured) counts += ", " + std::to_string(point.nodes);
    source = strprintf("the measured curve (pipette-probe --collectives at %s nodes; beyond %d, exponent %.3f fitted to it)",
                       counts.c_str(), scaling.measured.back().nodes, scaling.contention_exponent);
  }
  return strprintf("collectives over the job's %d nodes, and its pipeline hops: x%.3f of the slowest pair's bandwidth, from ",
                   cluster.num_nodes(), scaling.bandwidth_factor(cluster.num_nodes())) +
         source + "\n";
}

// How the plan's stack issues each stage's DP gradient reduction (StackProfile::gradient_buckets):
// in how many collectives, each paying a latency, and how much of the first model chunk's share
// waits for the backward to end. Consecutive stages cut alike share a line.
std::string gradient_reduction_text(const Plan& plan, const PlanningOutcome& outcome) {
  const ParallelConfig& config = plan.config;
  if (config.dp_cp() <= 1 || config.fully_sharded) return {};
  if (!gradient_reduction_overlapped(config, outcome.training))
    return "  DP gradient reduction: after each stage's backward, not overlapped\n";
  const WorkProfile work = profile_work(outcome.model, outcome.training, outcome.cluster.gpu, config);
  const int chunks = effective_virtual_stages(config);
  const auto cut = [&](int stage) {
    const StageWork& s = work.stages[static_cast<size_t>(stage)];
    if (s.first_chunk_gradient_tail_share >= 1)
      return chunks > 1 ? strprintf("one collective per model chunk (%d), each after its chunk's backward", chunks)
                        : std::string("one collective, after the backward");
    const char* stack = to_string(outcome.training.target.framework);
    if (chunks > 1 && s.later_chunk_gradient_tail_share >= 1)
      return strprintf("%d collectives: chunk 0 in %s's buckets, the last %.1f%% of it after the backward; %s",
                       s.gradient_reduction_collectives, stack, 100 * s.first_chunk_gradient_tail_share,
                       chunks == 2 ? "chunk 1 in one, after its own backward"
                                   : strprintf("chunks 1-%d in one each, after their own backward", chunks - 1).c_str());
    return strprintf("%d collectives (%s's buckets), the last %.1f%% of %s after the backward",
                     s.gradient_reduction_collectives, stack, 100 * s.first_chunk_gradient_tail_share,
                     chunks > 1 ? "each chunk's share" : "it");
  };
  std::vector<std::string> cuts;
  for (int stage = 0; stage < config.pp; ++stage) cuts.push_back(cut(stage));
  std::string out = "  DP gradient reduction, overlapped with the last backward:\n";
  for (int first = 0; first < config.pp;) {
    int last = first;
    while (last + 1 < config.pp && cuts[static_cast<size_t>(last + 1)] == cuts[static_cast<size_t>(first)]) ++last;
    out += (first == last ? strprintf("    stage %d: ", first) : strprintf("    stages %d-%d: ", first, last)) +
           cuts[static_cast<size_t>(first)] + "\n";
    first = last + 1;
  }
  return out;
}

// The slowest link each pipeline hop, each stage's DP group (dp x cp lanes: Megatron reduces
// gradients over both), each stage's cp rings and TP groups use: across nodes the slowest node
// pair, inside one node the slowest GPU pair (the plan's links_assumed say where unmeasured
// figures came from).
std::string links_report(const Plan& plan, const PlanningOutcome& outcome) {
  const Cluster& cluster = outcome.cluster;
  const ParallelConfig& config = plan.config;
  const auto gpu_at = [&](int t, int d, int s) {
    return plan.placement.gpu_of_rank[static_cast<size_t>(rank_of_position(config, {t, d, s}))];
  };
  const auto local_gpu = [&](int gpu) { return gpu % cluster.gpus_per_node; };
  // The slowest of the pairs a row's group talks over; a pair across nodes outranks any inside one.
  struct Slowest {
    int gpu_a = -1, gpu_b = -1;
    bool across_nodes = false;
    Link link;
  };
  const auto link_between = [&](int a, int b) {
    const int node_a = node_of_gpu(cluster, a), node_b = node_of_gpu(cluster, b);
    return node_a != node_b ? cluster.inter_node.at(node_a, node_b)
                            : cluster.intra_node[static_cast<size_t>(node_a)].at(local_gpu(a), local_gpu(b));
  };
  const auto consider = [&](Slowest& slowest, int a, int b) {
    if (a == b) return;
    const bool across = node_of_gpu(cluster, a) != node_of_gpu(cluster, b);
    const Link link = link_between(a, b);
    if (slowest.gpu_a < 0 || (across && !slowest.across_nodes) ||
        (across == slowest.across_nodes && link.bandwidth_bytes_per_second < slowest.link.bandwidth_bytes_per_second))
      slowest = {a, b, across, link};
  };
  std::string out = "links (node pairs of this job: " + std::to_string(outcome.links_measured) + " measured, " +
                    std::to_string(outcome.links_assumed) + " assumed from the site's priors):\n";
  TextTable table({{"used by", TextTable::Align::left},
                   {"slowest pair", TextTable::Align::left},
                   {"link", TextTable::Align::left}});
  const auto add = [&](const std::string& what, const Slowest& slowest, const std::string& ring_note = "") {
    if (slowest.gpu_a < 0) return;
    const std::string& node_a = cluster.node_names[static_cast<size_t>(node_of_gpu(cluster, slowest.gpu_a))];
    const std::string& node_b = cluster.node_names[static_cast<size_t>(node_of_gpu(cluster, slowest.gpu_b))];
    if (slowest.across_nodes) {
      table.add_row({what, node_a + " - " + node_b, link_text(slowest.link)});
      return;
    }
    table.add_row({what, node_a + ": GPUs " + std::to_string(local_gpu(slowest.gpu_a)) + " - " + std::to_string(local_gpu(slowest.gpu_b)),
                   link_text(slowest.link) + ring_note});
  };
  const int lanes = config.dp_cp();
  for (int s = 0; s + 1 < config.pp; ++s) {
    Slowest slowest;
    for (int d = 0; d < lanes; ++d) consider(slowest, gpu_at(0, d, s), gpu_at(0, d, s + 1));
    add("pipeline hop " + std::to_string(s) + " -> " + std::to_string(s + 1), slowest);
  }
  for (int s = 0; s < config.pp && lanes > 1; ++s) {
    Slowest slowest;
    for (int d = 0; d < lanes; ++d) consider(slowest, gpu_at(0, d, s), gpu_at(0, (d + 1) % lanes, s));
    add("DP ring of stage " + std::to_string(s), slowest);
  }
  for (int s = 0; s < config.pp && config.cp > 1; ++s) {
    Slowest slowest;
    for (int d = 0; d < lanes; ++d)
      consider(slowest, gpu_at(0, d, s), gpu_at(0, lane_of(config, (d + 1) % config.cp, d / config.cp), s));
    add("cp ring of stage " + std::to_string(s), slowest);
  }
  // A TP group's collectives: its ring's consecutive pairs, or on a board that wires every pair,
  // every pair of the group, whose ring then runs over g - 1 links at once (communication.cpp).
  for (int s = 0; s < config.pp && config.tp > 1; ++s) {
    Slowest slowest;
    for (int d = 0; d < lanes; ++d)
      for (int t = 0; t < config.tp; ++t)
        for (int u = 0; u < config.tp; ++u)
          if (u == (t + 1) % config.tp || cluster.intra_node_full_mesh) consider(slowest, gpu_at(t, d, s), gpu_at(u, d, s));
    const double links_in_use = ring_links_in_use(config.tp, cluster.intra_node_full_mesh);
    const std::string ring_note =
        links_in_use > 1 ? strprintf("; its ring runs over %.0f links at once: %.1f GB/s", links_in_use,
                                     links_in_use * slowest.link.bandwidth_bytes_per_second / units::gigabyte)
                         : "";
    add("TP group of stage " + std::to_string(s), slowest, slowest.across_nodes ? "" : ring_note);
  }
  out += table.render("  ");
  out += "  " + collective_scaling_text(cluster);
  out += gradient_reduction_text(plan, outcome);
  for (const auto& assumed : plan.links_assumed) out += "  assumed: " + assumed + "\n";
  return out;
}

std::string rail_path_text(const Cluster& cluster, const RailAlignment::Pair& pair) {
  if (!pair.cross_rail) return "same rail (the two GPUs share a NIC)";
  const RailFabric& rails = cluster.rails;
  const bool pxn = pair.kind == RailAlignment::Kind::pipeline ? rails.pxn || rails.spine_bandwidth_fraction == 0
                                                              : rails.spine_bandwidth_fraction == 0;
  if (pxn) return "cross-rail: PXN, an NVLink hop to the GPU on the peer's rail";
  return strprintf("cross-rail: through the spine at %.0f%% of a rail-aligned flow, +%.1f µs (%s)",
                   100 * rails.spine_bandwidth_fraction, rails.spine_extra_latency_seconds / units::microsecond,
                   rails.measured ? "measured" : "prior");
}

// Which inter-node neighbours the placement puts on different local GPUs (other rails on a
// rail-optimized fabric), and what the GPU orders inside nodes that did it gained.
std::string rails_report(const Plan& plan, const Cluster& cluster) {
  const RailAlignment alignment = rail_alignment(cluster, plan.config, plan.placement);
  std::string out = strprintf("rails: %d of %d inter-node DP and pipeline neighbours on different local GPUs (%.1f%%)",
                              alignment.on_different_local_gpus, alignment.inter_node_neighbours,
                              100 * alignment.misaligned_share());
  const PlacementSearchSummary& search = plan.placement_search;
  if (alignment.misaligned.empty()) return out + "; every one rail-aligned\n";
  out += "\n";
  const auto gpu_text = [&](int gpu) {
    return cluster.node_names[static_cast<size_t>(gpu / cluster.gpus_per_node)] + ':' +
           std::to_string(gpu % cluster.gpus_per_node);
  };
  constexpr size_t listed = 8;
  for (size_t i = 0; i < alignment.misaligned.size() && i < listed; ++i) {
    const RailAlignment::Pair& pair = alignment.misaligned[i];
    const std::string what = pair.kind == RailAlignment::Kind::pipeline
                                 ? "pipeline hop " + std::to_string(pair.stage) + " -> " + std::to_string(pair.stage + 1)
                                 : "DP ring of stage " + std::to_string(pair.stage);
    out += "  " + what + ": " + gpu_text(pair.gpu_a) + " - " + gpu_text(pair.gpu_b) + ", " + rail_path_text(cluster, pair) + "\n";
  }
  if (alignment.misaligned.size() > listed)
    out += "  ... and " + std::to_string(alignment.misaligned.size() - listed) + " more\n";
  const double identity = search.identity_local_order_iteration_seconds;
  if (search.local_moves && identity > plan.time.iteration_seconds) {
    out += strprintf("  why: GPUs permuted inside nodes whose measured GPU pairs differ beyond noise, or where a stage "
                     "boundary falls inside a node; the same node order with GPUs in CUDA order predicts %.3f s, "
                     "%.2f%% slower\n",
                     identity, 100 * (identity / plan.time.iteration_seconds - 1));
  } else {
    out += "  why: the layout puts these neighbours on different local positions and no GPU order of the nodes "
           "predicted faster\n";
  }
  return out;
}

// MoE models: why plan 1 has its ep and etp. Each expert layout the frameworks allow at plan 1's
// other knobs, evaluated as the search evaluates it (Slurm's node order, so that the layouts
// compare on equal terms), with what the all-to-all costs and where its groups run.
std::string experts_report(const PlanningOutcome& outcome) {
  const ModelSpec& model = outcome.model;
  if (!model.is_moe() || outcome.plans.empty()) return {};
  const Plan& best = outcome.plans.front();
  const ParallelConfig& c = best.config;
  const int gpus_per_node = std::max(1, outcome.cluster.gpus_per_node);
  std::set<int> group_nodes;
  for (int e = 0; e < c.ep; ++e) {
    const int rank = rank_of_expert_position(c, 0, {0, e, 0});
    group_nodes.insert(best.placement.gpu_of_rank[static_cast<size_t>(rank)] / gpus_per_node);
  }
  std::string out = strprintf("experts (MoE): %d experts, top-%d, expert width %d", model.num_experts, model.router_topk,
                              model.moe_ffn_hidden_size);
  if (model.shared_expert_ffn_hidden_size > 0) out += strprintf(", shared expert %d", model.shared_expert_ffn_hidden_size);
  out += strprintf("\n  plan 1: ep=%d etp=%d: %d experts per GPU, expert-dp %d; an all-to-all group spans %zu node(s)",
                   c.ep, c.etp, model.num_experts / c.ep, c.expert_dp(), group_nodes.size());
  out += "\n  all-to-alls " + human_seconds(best.time.ep_communication_seconds) + " per iteration (" +
         strprintf("%.1f%%", 100 * best.time.ep_communication_seconds / best.time.iteration_seconds) +
         "), not overlapped (Megatron-core's default); assumed expert load imbalance " +
         strprintf("%.2f", outcome.training.expert_load_imbalance_factor) + "x the mean\n";
  out += "  other expert layouts at plan 1's tp/pp/dp/mbs (Slurm's node order):\n";
  SearchOptions options;
  options.optimize_placement = false;
  TextTable table({{"ep"}, {"etp"}, {"iteration"}, {"all-to-all"}, {"peak memory / GPU"}, {"", TextTable::Align::left}});
  double chosen_seconds = 0;
  std::vector<std::vector<std::string>> rows;
  for (const int etp : std::set<int>{1, c.tp, c.etp}) {
    for (int ep = 1; ep <= model.num_experts; ++ep) {
      if (model.num_experts % ep != 0 || c.stage_ranks() % (ep * etp) != 0) continue;
      ParallelConfig alternative = c;
      alternative.ep = ep;
      alternative.etp = etp;
      const Result<Plan> evaluated = evaluate_plan(model, outcome.training, outcome.cluster, alternative, options);
      const bool chosen = ep == c.ep && etp == c.etp;
      if (!evaluated) {
        const std::string& message = evaluated.error().message;
        const size_t colon = message.find(": ");
        rows.push_back({std::to_string(ep), std::to_string(etp), "-", "-", "-",
                        colon == std::string::npos ? message : message.substr(colon + 2)});
        continue;
      }
      if (chosen) chosen_seconds = evaluated->time.iteration_seconds;
      rows.push_back({std::to_string(ep), std::to_string(etp), human_seconds(evaluated->time.iteration_seconds),
                      human_seconds(evaluated->time.ep_communication_seconds), memory_cell(*evaluated, outcome.cluster),
                      chosen ? "chosen" : strprintf("%.4f", evaluated->time.iteration_seconds)});
    }
  }
  for (auto& row : rows) {
    if (row[5] == "chosen" || row[2] == "-" || chosen_seconds <= 0) {
      table.add_row(row);
      continue;
    }
    row[5] = strprintf("%+.1f%%", 100 * (std::stod(row[5]) / chosen_seconds - 1));
    table.add_row(row);
  }
  return out + table.render("    ");
}

// Long sequences: why plan 1 has its cp. The best plan the search finds with each other
// context-parallel size the sequence and the job's fixed tp, pp and dp allow (every other knob as
// the job has it, Slurm's node order), so that cp = 1 shows what it takes to fit without
// splitting the sequence (often full recompute).
std::string context_parallel_report(const PlanningOutcome& outcome) {
  if (outcome.plans.empty()) return {};
  const Plan& best = outcome.plans.front();
  const ParallelConfig& c = best.config;
  const int s = outcome.training.sequence_length;
  if (c.cp == 1 && s < 2 * 4096) return {};  // no cp > 1 would keep 4096 tokens per GPU
  std::string out = strprintf("context parallelism: %d tokens per sequence; plan 1 has cp=%d (%d tokens per GPU)", s, c.cp,
                              s / c.cp);
  if (c.cp > 1) {
    out += ";\n  ring attention's K/V passes not hidden under attention: " + human_seconds(best.time.cp_communication_seconds) +
           " per iteration (" + strprintf("%.1f%%", 100 * best.time.cp_communication_seconds / best.time.iteration_seconds) + ")";
  }
  out += "\n  the best plan at each context-parallel size (search with cp fixed, Slurm's node order):\n";
  TextTable table({{"cp"}, {"plan", TextTable::Align::left}, {"iteration"}, {"ring exposed"}, {"peak memory / GPU"},
                   {"", TextTable::Align::left}});
  SearchOptions options;
  options.optimize_placement = false;
  options.top_k = 1;
  const int gpus = outcome.cluster.num_gpus();
  // The job's own fixed tp, pp and dp leave GPUs for some context-parallel sizes only.
  const FixedKnobs& fixed = outcome.training.fixed;
  const std::int64_t fixed_gpus = static_cast<std::int64_t>(fixed.tp.value_or(1)) * fixed.pp.value_or(1) * fixed.dp.value_or(1);
  const bool all_fixed = fixed.tp && fixed.pp && fixed.dp;
  for (int cp = 1; cp <= gpus; cp *= 2) {
    if (gpus % cp != 0 || s % (2 * cp) != 0 || (cp > 1 && s / cp < 1024)) continue;
    if (gpus % (fixed_gpus * cp) != 0 || (all_fixed && fixed_gpus * cp != gpus)) continue;
    TrainingSpec training = outcome.training;
    training.fixed.cp = cp;
    const Result<SearchResult> found = search_plans(outcome.model, training, outcome.cluster, options);
    if (!found || found->plans.empty()) {
      table.add_row({std::to_string(cp), "-", "-", "-", "-", found ? "nothing fits" : found.error().message});
      continue;
    }
    const Plan& plan = found->plans.front();
    const bool chosen = cp == c.cp;
    table.add_row({std::to_string(cp), plan_label(plan.config), human_seconds(plan.time.iteration_seconds),
                   human_seconds(plan.time.cp_communication_seconds), memory_cell(plan, outcome.cluster),
                   chosen ? "plan 1's cp"
                          : strprintf("%+.1f%% vs plan 1", 100 * (plan.time.iteration_seconds / best.time.iteration_seconds - 1))});
  }
  return out + table.render("    ");
}

std::string runners_up_report(const PlanningOutcome& outcome) {
  std::string out;
  const Plan& best = outcome.plans.front();
  if (outcome.plans.size() > 1) out += "why the runners-up lost (against plan 1):\n";
  for (size_t i = 1; i < outcome.plans.size(); ++i) {
    const Plan& plan = outcome.plans[i];
    // By name: plans list different components (an MoE, long-context or tied-embedding plan has more).
    std::map<std::string, double> theirs;
    for (const auto& [name, seconds] : components(best.time)) theirs[name] = seconds;
    std::vector<std::pair<double, std::string>> deltas;
    for (const auto& [name, seconds] : components(plan.time)) deltas.emplace_back(seconds - theirs[name], name);
    std::sort(deltas.begin(), deltas.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string reasons;
    for (const auto& [delta, name] : deltas) {
      if (delta <= 0.005 * best.time.iteration_seconds || reasons.size() > 120) continue;
      reasons += (reasons.empty() ? "" : ", ") + name + " +" + human_seconds(delta);
    }
    if (reasons.empty()) reasons = "no single component stands out";
    out += strprintf("  %zu. %s: %+.1f%% iteration time; ", i + 1, plan_label(plan.config).c_str(),
                     100 * (plan.time.iteration_seconds / best.time.iteration_seconds - 1)) +
           reasons + "\n";
  }
  if (!outcome.rejections.empty()) {
    out += "rejected (" + std::to_string(outcome.rejections.size()) + " families):\n";
    for (const auto& rejection : outcome.rejections) out += "  " + rejection.family + ": " + rejection.reason + "\n";
  }
  return out;
}

}  // namespace

std::string plan_label(const ParallelConfig& config) {
  std::string label = "tp=" + std::to_string(config.tp) + " pp=" + std::to_string(config.pp) +
                      " dp=" + std::to_string(config.dp);
  if (config.cp > 1) label += " cp=" + std::to_string(config.cp);
  if (config.ep > 1 || config.etp > 1) label += " ep=" + std::to_string(config.ep) + " etp=" + std::to_string(config.etp);
  label += " mbs=" + std::to_string(config.micro_batch);
  if (config.virtual_stages > 1) label += " vpp=" + std::to_string(config.virtual_stages);
  label += " recompute=" + recompute_knob(config);
  if (config.sequence_parallel) label += " sp";
  if (config.distributed_optimizer) label += " distopt";
  if (config.fully_sharded) label += " fsdp";
  return label;
}

std::string does_not_fit_report(const PlanningOutcome& outcome) {
  return "DOES NOT FIT: " + outcome.does_not_fit + "\n\n" +
         memory_report(outcome.fixed_config, outcome.fixed_memory, outcome.cluster, plan_label(outcome.fixed_config));
}

std::string plan_report(const PlanningOutcome& outcome) {
  std::string out = header(outcome) + "\n";
  if (!outcome.does_not_fit.empty()) return out + does_not_fit_report(outcome);
  out += (outcome.every_knob_fixed ? "the configuration you fixed:\n" : "plans, best first:\n") + plans_table(outcome);
  out += "\n" + placement_report(outcome.plans.front(), outcome.cluster);
  if (!outcome.rejections.empty()) {
    out += "\n" + std::to_string(outcome.rejections.size()) +
           " configuration families were rejected; `pipette explain` says why.\n";
  }
  return out;
}

std::string plan_json(const PlanningOutcome& outcome) {
  JsonWriter json;
  json.begin_object();
  write_preamble(json, outcome, "pipette.plan");
  json.value("every_knob_fixed", outcome.every_knob_fixed);
  if (outcome.does_not_fit.empty()) {
    json.null("does_not_fit");
  } else {
    json.value("does_not_fit", outcome.does_not_fit);
  }
  json.begin_array("plans");
  for (const Plan& plan : outcome.plans) write_plan(json, plan, outcome);
  json.end_array();
  json.begin_array("rejections");
  for (const auto& rejection : outcome.rejections) {
    json.begin_object().value("family", rejection.family).value("reason", rejection.reason).end_object();
  }
  json.end_array();
  json.end_object();
  return json.str();
}

// How the plan's stack runs, where it is not the Megatron-core / Transformer Engine stack the
// constants were fitted on: each mechanism with the code it was read from, and what is assumed.
std::string stack_report(Framework framework) {
  const StackProfile& profile = stack_profile(framework);
  if (profile.evidence.empty() && profile.assumptions.empty()) return {};
  std::string out = std::string("stack: ") + to_string(framework) +
                    " (priced by mechanism against Megatron-core's fitted constants; read in " + profile.code + ")\n";
  for (const std::string& line : profile.evidence) out += "  " + line + "\n";
  for (const std::string& line : profile.assumptions) out += "  assumption: " + line + "\n";
  return out;
}

// nanotron places the model's blocks itself (pipeline_blocks.hpp): what each pipeline rank holds
// and what each boundary carries, as the plan is priced.
std::string partition_report(const PlanningOutcome& outcome, const ParallelConfig& config) {
  if (outcome.training.target.framework != Framework::nanotron || config.pp == 1) return {};
  const PipelineBlocks blocks = nanotron_partition(outcome.model, config.pp);
  std::string out = "partition: nanotron's own (models/base.py build_model, by get_block_compute_costs)\n";
  TextTable table({{"stage", TextTable::Align::right}, {"layers", TextTable::Align::left},
                   {"also holds", TextTable::Align::left}, {"sends the next", TextTable::Align::left},
                   {"MiB per micro-batch"}});
  for (size_t s = 0; s < blocks.ranks.size(); ++s) {
    const PipelineRankBlocks& rank = blocks.ranks[s];
    std::string layers = rank.num_layers == 0 ? "-"
                         : rank.num_layers == 1
                             ? std::to_string(rank.first_layer)
                             : std::to_string(rank.first_layer) + "-" + std::to_string(rank.first_layer + rank.num_layers - 1);
    std::string holds;
    const auto add = [&](bool held, const char* name) {
      if (held) holds += (holds.empty() ? "" : ", ") + std::string(name);
    };
    add(rank.embedding, "embedding");
    add(rank.final_norm, "final norm");
    add(rank.head, "lm_head");
    add(rank.fp32_cast, "fp32 cast");
    add(rank.loss, "loss");
    add(rank.idle, "nothing (idle)");
    const bool boundary = s + 1 < blocks.ranks.size();
    const BoundaryTensor sent = boundary ? blocks.boundaries[s] : BoundaryTensor::nothing;
    table.add_row({std::to_string(s), layers, holds.empty() ? "-" : holds, boundary ? to_string(sent) : "-",
                   boundary ? strprintf("%.1f", boundary_tensor_bytes(sent, outcome.model, outcome.training, config) / units::mebibyte)
                            : "-"});
  }
  return out + table.render("  ") + "  (each boundary's gradient comes back the same size)\n";
}

// The engine's switches as planned, each with where it came from.
std::string engine_report(const std::vector<EngineSetting>& engine) {
  if (engine.empty()) return {};
  TextTable table({{"switch", TextTable::Align::left}, {"value", TextTable::Align::left}, {"from", TextTable::Align::left}});
  for (const EngineSetting& setting : engine) table.add_row({setting.key, setting.value, to_string(setting.source)});
  return "engine (--engine over the site's defaults.engine over the stack's defaults):\n" + table.render("  ");
}

std::string explain_report(const PlanningOutcome& outcome) {
  std::string out = header(outcome) + "\n";
  if (const std::string engine = engine_report(outcome.engine); !engine.empty()) out += engine + "\n";
  if (!outcome.does_not_fit.empty()) return out + does_not_fit_report(outcome);
  const Plan& best = outcome.plans.front();
  out += "plan 1: " + plan_label(best.config) + ", layers per stage " + layers_text(best.config.layers_per_stage) +
         ", " + std::to_string(best.num_microbatches) + " micro-batches per replica\n\n";
  out += time_breakdown_report(best) + "\n";
  out += calibration_report(outcome) + "\n";
  if (const std::string stack = stack_report(outcome.training.target.framework); !stack.empty()) out += stack + "\n";
  if (const std::string partition = partition_report(outcome, best.config); !partition.empty()) out += partition + "\n";
  out += memory_report(best.config, best.memory_per_stage, outcome.cluster, "plan 1") + "\n";
  if (const std::string experts = experts_report(outcome); !experts.empty()) out += experts + "\n";
  if (const std::string context = context_parallel_report(outcome); !context.empty()) out += context + "\n";
  out += links_report(best, outcome) + "\n";
  out += rails_report(best, outcome.cluster) + "\n";
  out += runners_up_report(outcome);
  return out;
}

SimulationSummary summarize(const SimulationResult& simulation, double closed_form_seconds, int pp) {
  SimulationSummary summary;
  summary.simulated_seconds = simulation.iteration_seconds;
  summary.closed_form_seconds = closed_form_seconds;
  std::map<std::pair<int, int>, double> busy;  // (stage, replica) -> compute seconds
  for (const auto& event : simulation.events) {
    if (event.kind == EventKind::forward || event.kind == EventKind::backward) {
      busy[{event.stage, event.dp_replica}] += event.end_seconds - event.start_seconds;
    }
  }
  summary.per_stage_busy_fraction_min = 1;
  for (const auto& [key, seconds] : busy) {
    const double fraction = seconds / simulation.iteration_seconds;
    summary.per_stage_busy_fraction_min = std::min(summary.per_stage_busy_fraction_min, fraction);
    summary.per_stage_busy_fraction_max = std::max(summary.per_stage_busy_fraction_max, fraction);
  }
  if (busy.empty() || pp == 0) summary.per_stage_busy_fraction_min = 0;
  return summary;
}

std::string simulate_report(const PlanningOutcome& outcome, const SimulationSummary& summary) {
  const Plan& plan = outcome.plans.front();
  std::string out = header(outcome) + "\n";
  out += "plan: " + plan_label(plan.config) + ", " + std::to_string(plan.num_microbatches) +
         " micro-batches per replica, layers per stage " + layers_text(plan.config.layers_per_stage) + "\n\n";
  TextTable table({{"iteration time", TextTable::Align::left}, {"seconds"}});
  table.add_row({"simulated (discrete-event, exact schedule)", strprintf("%.4f", summary.simulated_seconds)});
  table.add_row({"closed-form prediction", strprintf("%.4f", summary.closed_form_seconds)});
  table.add_row({"difference", strprintf("%+.2f%%", 100 * (summary.closed_form_seconds / summary.simulated_seconds - 1))});
  out += table.render("  ");
  out += strprintf("  pipeline ranks busy computing %.0f%% to %.0f%% of the iteration\n",
                   100 * summary.per_stage_busy_fraction_min, 100 * summary.per_stage_busy_fraction_max);
  return out;
}

std::string simulate_json(const PlanningOutcome& outcome, const SimulationSummary& summary) {
  JsonWriter json;
  json.begin_object();
  write_preamble(json, outcome, "pipette.simulation");
  json.begin_array("plans");
  write_plan(json, outcome.plans.front(), outcome);
  json.end_array();
  json.value("simulated_iteration_seconds", summary.simulated_seconds);
  json.value("closed_form_iteration_seconds", summary.closed_form_seconds);
  json.value("busy_fraction_min", summary.per_stage_busy_fraction_min);
  json.value("busy_fraction_max", summary.per_stage_busy_fraction_max);
  json.end_object();
  return json.str();
}

}  // namespace pipette::cli
