#include "pipette/core/search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/launch.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/pipeline_blocks.hpp"
#include "pipette/core/placement.hpp"
#include "pipette/core/simulator.hpp"
#include "pipette/core/stack_profile.hpp"
#include "pipette/core/units.hpp"

namespace pipette {

namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / units::gibibyte);
  return text;
}

std::string family_of(int tp, int pp, int cp = 1) {
  return "tp=" + std::to_string(tp) + (cp > 1 ? " cp=" + std::to_string(cp) : "") + " pp=" + std::to_string(pp);
}

std::string describe(const ParallelConfig& config) {
  std::string text = family_of(config.tp, config.pp, config.cp) + " dp=" + std::to_string(config.dp);
  if (config.ep > 1 || config.etp > 1) text += " ep=" + std::to_string(config.ep) + " etp=" + std::to_string(config.etp);
  text += " mbs=" + std::to_string(config.micro_batch);
  if (config.virtual_stages > 1) text += " vpp=" + std::to_string(config.virtual_stages);
  text += " recompute=" + recompute_knob(config);
  if (config.sequence_parallel) text += " sp";
  if (config.distributed_optimizer) text += " distopt";
  if (config.fully_sharded) text += " fsdp";
  return text;
}

struct PeakMemory {
  double bytes = 0;
  int stage = 0;
  std::vector<StageMemory> per_stage;
};

PeakMemory peak_memory(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config,
                       const RuntimeOverheads& overheads) {
  PeakMemory peak;
  peak.per_stage = estimate_memory(model, training, config, overheads);
  for (int stage = 0; stage < config.pp; ++stage) {
    const double total = peak.per_stage[static_cast<size_t>(stage)].total_bytes();
    if (total > peak.bytes) peak.bytes = total, peak.stage = stage;
  }
  return peak;
}

std::string memory_reason(const PeakMemory& peak, double usable_bytes) {
  return "stage " + std::to_string(peak.stage) + " needs " + gib(peak.bytes) + " > " + gib(usable_bytes);
}

// What the search may vary, after the fixed knobs and the problem's shape.
struct SearchSpace {
  const ModelSpec& model;
  const TrainingSpec& training;
  int gpus_per_node = 0;
  int num_gpus = 0;
  double usable_bytes = 0;
  const RuntimeOverheads& overheads;
  FixedKnobs fixed;
};

struct Candidate {
  ParallelConfig config;
  double peak_memory_bytes = 0;
  double lower_bound_seconds = 0;  // critical path with free communication
  double iteration_seconds = 0;
};

struct Enumeration {
  std::vector<Candidate> fitting;
  std::vector<Rejection> rejections;
  std::optional<ParallelConfig> leanest;  // smallest peak memory over everything tried
  PeakMemory leanest_peak;
};

template <typename T>
bool allowed(const std::optional<T>& fixed, const T& value) {
  return !fixed || *fixed == value;
}

std::vector<int> divisors(std::int64_t value) {
  std::vector<int> result;
  for (std::int64_t d = 1; d * d <= value; ++d) {
    if (value % d != 0) continue;
    result.push_back(static_cast<int>(d));
    if (d * d != value) result.push_back(static_cast<int>(value / d));
  }
  std::sort(result.begin(), result.end());
  return result;
}

// Recompute modes in order of cost; the first that fits wins, since the others only add time.
// Megatron's selective recompute saves nothing with flash attention (no s×s tensors to drop);
// torchtitan's per-operator checkpointing does (stack_profile.hpp, SelectiveRecompute).
std::vector<RecomputeMode> recompute_modes(const SearchSpace& space) {
  const bool selective_saves_nothing =
      space.training.attention == AttentionKernel::flash &&
      stack_profile(space.training.target.framework).selective_recompute == SelectiveRecompute::attention_core;
  std::vector<RecomputeMode> modes;
  for (const RecomputeMode mode : {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full}) {
    if (mode == RecomputeMode::selective && !space.fixed.recompute && selective_saves_nothing) continue;
    if (allowed(space.fixed.recompute, mode)) modes.push_back(mode);
  }
  return modes;
}

// Sequence parallelism never costs time in this model (same ring traffic, less elementwise work,
// smaller p2p messages) and saves memory, so it is on whenever tp > 1 unless fixed; likewise the
// distributed optimizer (the same reduction traffic, a sharded optimizer step, less memory).
bool sequence_parallel_for(const SearchSpace& space, int tp) {
  return tp > 1 && space.fixed.sequence_parallel.value_or(true);
}
// torchtitan's data parallelism is replication here (launch_problem), unless fixed otherwise.
// nanotron's ZeRO-1 beside dp > 1 runs in every release (v0.1-v0.5: trainer.py make_ddp leaves
// DDP out under ZeRO-1 with fp32 accumulation, l.701-703 @v0.5, l.743-745 @a27e8fe8, the
// bench_cluster branch) and on main until 7bc99232 (2025-06-23); since then main builds DDP
// whenever dp > 1 (trainer.py l.1093-1095 @2411b022, 'or' binds looser than 'and') and its fp32
// hook raises NotImplementedError under ZeRO-1 (optim/gradient_accumulator.py l.354-355). So the
// search picks it only when fixed: a user who fixes it runs a nanotron that has it, and gets it
// priced rather than refused.
bool distributed_optimizer_for(const SearchSpace& space, int dp) {
  const Framework framework = space.training.target.framework;
  const bool default_on = framework != Framework::torchtitan && framework != Framework::nanotron;
  // Megatron-LM asserts --use-distributed-optimizer beside --fp8-param-gather at any dp
  // (training/arguments.py @d98e8a64 l.1095-1097); with one replica it shards nothing.
  // DeepSpeed takes bf16 with fp32 accumulation only under ZeRO stage 1 (needs_distributed_optimizer).
  const bool required = (framework == Framework::megatron_core && space.training.fp8_parameters &&
                         space.training.precision == Precision::fp8) ||
                        needs_distributed_optimizer(space.training);
  return (dp > 1 || required) && space.fixed.distributed_optimizer.value_or(default_on);
}

bool fully_sharded_for(const SearchSpace& space, int pp, int data_ranks) {
  return space.fixed.fully_sharded.value_or(default_fully_sharded(space.training.target.framework, space.model, pp, data_ranks));
}

std::vector<int> virtual_stage_options(const SearchSpace& space, int pp, int microbatches) {
  std::vector<int> options;
  if (allowed(space.fixed.virtual_stages, 1)) options.push_back(1);
  const int layers = space.model.num_layers;
  // Megatron's interleaved schedule: equal chunks (pp·v divides the layers) and m ≥ pp.
  if (pp > 1 && microbatches >= pp && layers % pp == 0) {
    for (int v = 2; v <= layers / pp; ++v) {
      if ((layers / pp) % v == 0 && allowed(space.fixed.virtual_stages, v)) options.push_back(v);
    }
  }
  return options;
}

// Layer splits to try for pp stages: the balanced one, and (plain 1F1B only) ones that also count
// the LM head as the h layers' worth of work it is, so the last stage takes fewer layers. Those
// keep the form [a, b x (p-2), c] that every framework can build, with b = ceil(L/p) (the ends
// share the rest) or b = round((L + h)/p) (the load of every stage even); the first stage never
// takes more than b. Where the site allows --pipeline-model-parallel-layout, also the best split
// of any shape.
std::vector<std::vector<int>> layer_splits(const SearchSpace& space, int pp) {
  if (static_cast<int>(space.fixed.layers_per_stage.size()) == pp) return {space.fixed.layers_per_stage};
  // nanotron and Megatron-DeepSpeed take no split: they partition the model themselves
  // (pipeline_blocks.hpp).
  if (std::vector<int> own = own_layer_split(space.model, space.training.target.framework, pp); !own.empty()) return {own};
  const int num_layers = space.model.num_layers;
  std::vector<std::vector<int>> splits{balanced_layers_per_stage(num_layers, pp)};
  if (pp == 1) return splits;
  const auto add = [&](std::vector<int> split) {
    if (std::find(splits.begin(), splits.end(), split) == splits.end()) splits.push_back(std::move(split));
  };
  const double head_flops = 2.0 * space.model.hidden_size * space.model.vocab_size;
  const double layer_flops = layer_forward_flops(space.model, space.training, ParallelConfig{}) / space.training.sequence_length;
  const double head_layers = head_flops / layer_flops;
  for (const int middle : {(num_layers + pp - 1) / pp, static_cast<int>(std::lround((num_layers + head_layers) / pp))}) {
    const int ends = num_layers - middle * (pp - 2);
    if (middle < 1 || ends < 2) continue;
    int last = std::clamp(static_cast<int>(std::lround((ends - head_layers) / 2)), 1, ends - 1);
    if (ends - last > middle) last = ends - middle;
    std::vector<int> split(static_cast<size_t>(pp), middle);
    split.front() = ends - last;
    split.back() = last;
    add(std::move(split));
  }
  if (!space.training.target.pipeline_layout || pp > num_layers) return splits;
  std::vector<int> layers(static_cast<size_t>(pp), 0);
  for (int layer = 0; layer < num_layers; ++layer) {
    // Every stage needs a layer; then the least loaded stage takes the next (interior first on ties).
    size_t stage = 0;
    double lightest = std::numeric_limits<double>::infinity();
    for (size_t candidate = 0; candidate < layers.size(); ++candidate) {
      const bool last = candidate + 1 == layers.size();
      const double key = layers[candidate] == 0 ? -1.0 : layers[candidate] + (last ? head_layers : 0.0);
      const bool end = candidate == 0 || last;
      if (key < lightest || (key == lightest && !end)) lightest = key, stage = candidate;
    }
    ++layers[stage];
  }
  add(std::move(layers));
  return splits;
}

// TP sizes worth evaluating: the divisors of a node's GPUs, and whole nodes (2, 4 nodes' worth)
// with TP priced over the network: for a model with many heads on many nodes, tp 16/32 can beat a
// deeper pipeline (issue 14's measurements), and the cost model says when.
std::vector<int> tensor_parallel_sizes(int gpus_per_node, int num_gpus) {
  std::vector<int> sizes = divisors(gpus_per_node);
  for (int nodes = 2; nodes <= 4 && gpus_per_node * nodes <= num_gpus; nodes *= 2) {
    if (num_gpus % (gpus_per_node * nodes) == 0) sizes.push_back(gpus_per_node * nodes);
  }
  return sizes;
}

// Context-parallel sizes to try with tensor parallelism tp. cp > 1 needs flash attention (ring
// attention runs inside Transformer Engine's fused attention) and a sequence that cuts into 2·cp
// equal chunks (Megatron-LM arguments.py @d98e8a64 l.1335-1338); cp divides the GPUs left after tp.
// Unless fixed, the search keeps at least 4096 tokens on a rank: every published CP recipe does
// (ground_truth_data: Megatron-Bridge's Llama 3.1 405B at 8192 tokens with cp = 2, NeMo's long
// sequence table at 16K-32K tokens per rank), and below that the K/V passes, which shrink as s/cp,
// stop hiding under the attention steps, which shrink as (s/cp)²; the bound keeps short-sequence
// searches as small as before.
constexpr int kLeastTokensPerContextParallelRank = 4096;

std::vector<int> context_parallel_sizes(const SearchSpace& space, int tp) {
  std::vector<int> sizes;
  const int s = space.training.sequence_length;
  for (const int cp : divisors(space.num_gpus / tp)) {
    if (!allowed(space.fixed.cp, cp)) continue;
    if (cp > 1 && (space.training.attention != AttentionKernel::flash || s % (2 * cp) != 0)) continue;
    if (cp > 1 && !space.fixed.cp && s / cp < kLeastTokensPerContextParallelRank) continue;
    sizes.push_back(cp);
  }
  return sizes;
}

// Expert layouts (ep, etp) to try for an MoE model on a stage of `stage_ranks` ranks with tensor
// parallelism tp; {(1, 1)} for dense models. As Megatron-core requires: ep divides num_experts
// (arguments.py @d98e8a64 l.1655-1658) and ep·etp divides the stage's ranks (parallel_state.py
// l.874-884, world/pp there); etp divides the expert width. etp is 1 or tp (Megatron's default
// etp = tp, arguments.py l.587-588): the recipes of the fidelity rows use one of the two, and a
// larger etp only splits already small expert GEMMs further while adding etp gathers of every
// routed token.
std::vector<std::pair<int, int>> expert_layouts(const SearchSpace& space, int tp, int stage_ranks) {
  const ModelSpec& model = space.model;
  if (!model.is_moe()) return {{1, 1}};
  std::vector<std::pair<int, int>> layouts;
  std::vector<int> etps{1};
  if (tp > 1) etps.push_back(tp);
  for (const int etp : etps) {
    if (!allowed(space.fixed.etp, etp) || model.moe_ffn_hidden_size % etp != 0) continue;
    for (const int ep : divisors(model.num_experts)) {
      if (!allowed(space.fixed.ep, ep) || stage_ranks % (ep * etp) != 0) continue;
      layouts.emplace_back(ep, etp);
    }
  }
  if (space.fixed.etp && std::none_of(etps.begin(), etps.end(), [&](int etp) { return etp == *space.fixed.etp; })) {
    // A fixed etp outside the search's own choices: still honour it where it is legal.
    const int etp = *space.fixed.etp;
    for (const int ep : divisors(model.num_experts)) {
      if (etp >= 1 && model.moe_ffn_hidden_size % etp == 0 && allowed(space.fixed.ep, ep) && stage_ranks % (ep * etp) == 0)
        layouts.emplace_back(ep, etp);
    }
  }
  return layouts;
}

Enumeration enumerate(const SearchSpace& space) {
  Enumeration result;
  const ModelSpec& model = space.model;
  const std::int64_t batch = space.training.global_batch_sequences;
  for (const int tp : tensor_parallel_sizes(space.gpus_per_node, space.num_gpus)) {
    if (!allowed(space.fixed.tp, tp)) continue;
    const bool heads_split = model.num_attention_heads % tp == 0 && model.num_kv_heads % tp == 0;
    const std::string unsplit = heads_split ? mlp_split_problem(model, space.training.target.framework, tp)
                                            : "does not divide " + std::to_string(model.num_attention_heads) +
                                                  " attention heads and " + std::to_string(model.num_kv_heads) + " KV heads";
    if (!unsplit.empty()) {
      if (tp > space.gpus_per_node && !space.fixed.tp) continue;  // not a candidate, not a rejection
      result.rejections.push_back({"tp=" + std::to_string(tp), unsplit});
      continue;
    }
    if (space.num_gpus % tp != 0) continue;
    for (const int cp : context_parallel_sizes(space, tp)) {
    for (const int pp : divisors(space.num_gpus / (tp * cp))) {
      if (!allowed(space.fixed.pp, pp)) continue;
      if (pp > model.num_layers && !space.fixed.pp) break;  // stages without layers only when asked for
      const int dp = space.num_gpus / (tp * cp * pp);
      if (!allowed(space.fixed.dp, dp)) continue;
      const std::string family = family_of(tp, pp, cp);
      if (batch % dp != 0) {
        result.rejections.push_back({family, "global batch " + std::to_string(batch) + " is not divisible by dp=" +
                                                 std::to_string(dp)});
        continue;
      }
      const std::vector<std::vector<int>> splits = layer_splits(space, pp);
      const std::vector<std::pair<int, int>> expert_options = expert_layouts(space, tp, tp * cp * dp);
      if (expert_options.empty()) {
        result.rejections.push_back({family, "no expert layout: ep must divide " + std::to_string(model.num_experts) +
                                                 " experts and ep x etp the " + std::to_string(tp * cp * dp) +
                                                 " ranks of a stage"});
        continue;
      }
      for (const auto& [ep, etp] : expert_options) {
      ParallelConfig config;
      config.tp = tp;
      config.pp = pp;
      config.dp = dp;
      config.cp = cp;
      config.ep = ep;
      config.etp = etp;
      config.sequence_parallel = sequence_parallel_for(space, tp);
      config.distributed_optimizer = distributed_optimizer_for(space, dp * cp);
      config.fully_sharded = fully_sharded_for(space, pp, dp * cp);
      if (const std::string problem = optimizer_problem(space.training, config); !problem.empty()) {
        result.rejections.push_back({family, problem});
        continue;
      }
      const std::string expert_family =
          model.is_moe() ? family + " ep=" + std::to_string(ep) + " etp=" + std::to_string(etp) : family;
      std::optional<PeakMemory> family_leanest;
      std::optional<std::string> family_unbuildable;  // why the first candidate the framework cannot build was skipped
      bool family_fits = false;
      for (const int micro_batch : divisors(batch / dp)) {
        if (!allowed(space.fixed.micro_batch, micro_batch)) continue;
        config.micro_batch = micro_batch;
        const int microbatches = static_cast<int>(batch / dp / micro_batch);
        bool micro_batch_fits = false;
        bool micro_batch_over_memory = false;
        for (const int chunks : virtual_stage_options(space, pp, microbatches)) {
         config.virtual_stages = chunks;
         for (size_t split = 0; split < (chunks == 1 ? splits.size() : 1); ++split) {
          config.layers_per_stage = splits[split];
          for (const RecomputeMode mode : recompute_modes(space)) {
            config.recompute = mode;
            // Block recompute only when fixed (recompute=block:N): the free search keeps to all or none.
            config.recomputed_layers_per_chunk =
                mode == RecomputeMode::full ? space.fixed.recomputed_layers_per_chunk.value_or(0) : 0;
            const std::string unbuildable = launch_problem(space.training.target, model, config, microbatches);
            if (!unbuildable.empty()) {
              if (!family_unbuildable) family_unbuildable = unbuildable;
              continue;
            }
            PeakMemory peak = peak_memory(model, space.training, config, space.overheads);
            if (peak.bytes <= space.usable_bytes) {
              result.fitting.push_back({config, peak.bytes, 0, 0});
              micro_batch_fits = family_fits = true;
              break;
            }
            micro_batch_over_memory = true;
            if (!family_leanest || peak.bytes < family_leanest->bytes) family_leanest = peak;
            if (!result.leanest || peak.bytes < result.leanest_peak.bytes) {
              result.leanest = config;
              result.leanest_peak = std::move(peak);
            }
          }
         }
        }
        // Memory grows with the micro-batch: once even the leanest variant of one fails, larger ones do too.
        if (!micro_batch_fits && micro_batch_over_memory) break;
      }
      if (!family_fits && family_leanest) {
        result.rejections.push_back({expert_family, memory_reason(*family_leanest, space.usable_bytes)});
      } else if (!family_fits && family_unbuildable) {
        result.rejections.push_back({expert_family, std::string(to_string(space.training.target.framework)) +
                                                        " cannot build it: " + *family_unbuildable});
      }
      }
    }
    }
  }
  return result;
}

CommunicationTimes free_communication(const ParallelConfig& config) {
  CommunicationTimes communication;
  communication.p2p_seconds.assign(static_cast<size_t>(config.pp - 1), std::vector<double>(1, 0.0));
  communication.tp_seconds.assign(static_cast<size_t>(config.pp), std::vector<double>(1, 0.0));
  communication.dp_seconds.assign(static_cast<size_t>(config.pp), 0.0);
  return communication;
}

// Iteration time with every message free: a lower bound of the real time, since links only add.
double lower_bound_seconds(const ParallelConfig& config, const WorkProfile& work, const TrainingSpec& training) {
  ParallelConfig one_replica = config;
  one_replica.dp = 1;  // with free links every replica (and every lane of it) is the same
  one_replica.cp = 1;
  return critical_path(one_replica, work, free_communication(config), training).iteration_seconds;
}

Plan make_plan(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
               const ParallelConfig& config, const WorkProfile& work, std::vector<StageMemory> memory,
               const TimeBreakdown& time, Placement placement, double default_placement_seconds) {
  Plan plan;
  plan.config = config;
  plan.num_microbatches = work.num_microbatches;
  plan.time = time;
  plan.memory_per_stage = std::move(memory);
  for (const StageMemory& stage : plan.memory_per_stage) plan.peak_memory_bytes = std::max(plan.peak_memory_bytes, stage.total_bytes());
  const double tokens = static_cast<double>(training.global_batch_sequences) * training.sequence_length;
  plan.tokens_per_second = tokens / time.iteration_seconds;
  const double peak = peak_flop_per_second(cluster.gpu, training.precision);
  plan.model_flops_utilization = model_flops_per_iteration(model, training) / (time.iteration_seconds * peak * cluster.num_gpus());
  plan.placement = std::move(placement);
  plan.default_placement_iteration_seconds = default_placement_seconds;
  plan.node_order = node_order_of(cluster, plan.placement);
  // Inter-node links this job relies on that nobody measured (priors from the site file).
  constexpr int listed = 8;
  int unmeasured = 0;
  for (int from = 0; from < cluster.num_nodes(); ++from) {
    for (int to = from + 1; to < cluster.num_nodes(); ++to) {
      if (cluster.inter_node.at(from, to).measured) continue;
      if (unmeasured++ < listed) {
        plan.links_assumed.push_back(cluster.node_names[static_cast<size_t>(from)] + " <-> " +
                                     cluster.node_names[static_cast<size_t>(to)]);
      }
    }
  }
  if (unmeasured > listed) plan.links_assumed.push_back("... and " + std::to_string(unmeasured - listed) + " more node pairs");
  // And the GPU pairs inside nodes, which every plan of more than one GPU per node talks over.
  int nodes_on_priors = 0;
  for (const LinkMatrix& links : cluster.intra_node) {
    bool assumed = false;
    for (int from = 0; from < cluster.gpus_per_node && !assumed; ++from)
      for (int to = 0; to < cluster.gpus_per_node && !assumed; ++to) assumed = from != to && !links.at(from, to).measured;
    nodes_on_priors += assumed;
  }
  if (nodes_on_priors > 0)
    plan.links_assumed.push_back("GPU pairs inside " + std::to_string(nodes_on_priors) + " of " +
                                 std::to_string(cluster.num_nodes()) + " nodes: " +
                                 (cluster.intra_node_prior_source.empty() ? "priors" : cluster.intra_node_prior_source));
  return plan;
}

// The full evaluation of one configuration in Slurm's node order.
struct Evaluated {
  WorkProfile work;
  TimeBreakdown time;
};

Evaluated evaluate_in_default_order(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                                    const ParallelConfig& config, const ComputeEfficiency& efficiency) {
  Evaluated evaluated;
  evaluated.work = profile_work(model, training, cluster.gpu, config, efficiency);
  const CommunicationTimes communication =
      communication_times(cluster, config, evaluated.work, default_placement(config));
  evaluated.time = critical_path(config, evaluated.work, communication, training);
  return evaluated;
}

// `move_work_spent`, when given, grows by what the placement search spent (PlacementEffort's unit).
Plan finish_plan(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                 const ParallelConfig& config, const SearchOptions& options, const Evaluated& evaluated,
                 double* move_work_spent = nullptr) {
  std::vector<StageMemory> memory = estimate_memory(model, training, config, options.overheads);
  if (!options.optimize_placement) {
    return make_plan(model, training, cluster, config, evaluated.work, std::move(memory), evaluated.time,
                     default_placement(config), evaluated.time.iteration_seconds);
  }
  PlacementResult placed = optimize_placement(cluster, config, evaluated.work, training, options.placement);
  if (move_work_spent != nullptr) *move_work_spent += placed.move_work;
  const CommunicationTimes communication = communication_times(cluster, config, evaluated.work, placed.placement);
  const TimeBreakdown time = critical_path(config, evaluated.work, communication, training);
  Plan plan = make_plan(model, training, cluster, config, evaluated.work, std::move(memory), time,
                        std::move(placed.placement), evaluated.time.iteration_seconds);
  plan.placement_search = {placed.moves_evaluated, placed.move_budget, placed.moves_to_best, placed.exact,
                           placed.local_moves, placed.identity_local_order_iteration_seconds};
  return plan;
}

// The closed form (critical_path) follows the simulated schedule within a few percent, and not
// always on the same side: interleaved schedules with few micro-batches per group come out
// optimistic, wide DP rings pessimistic. Two plans that close can therefore be ranked the wrong way
// round (bench/compare's plan_comparison found picks up to 10% slower in simulation than a
// baseline's), so plans within this fraction of the best closed-form time are ordered by
// simulate_schedule of their (placed, for the best placement_candidates) schedule; the rest follow by
// closed form.
constexpr double kCloseCallFraction = 0.06;
constexpr size_t kMostCloseCalls = 16;

// How much more of its default-to-bound gap a runner-up's placement may recover than the best
// placed plan's did, before the search stops expecting it to (see search_plans).
constexpr double kRunnerUpReach = 2.0;

void rank_close_calls_by_simulation(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                                    const ComputeEfficiency& efficiency, std::vector<Plan>& plans) {
  if (plans.empty()) return;
  double best_seconds = plans.front().time.iteration_seconds;
  for (const Plan& plan : plans) best_seconds = std::min(best_seconds, plan.time.iteration_seconds);
  // (outside the close calls, ranking time, index): a plan beyond the band keeps its place behind
  // every close call, whatever the close calls' simulated times, so that two kinds of time are
  // never compared.
  std::vector<std::tuple<bool, double, size_t>> order;
  for (size_t index = 0; index < plans.size(); ++index) {
    const Plan& plan = plans[index];
    double seconds = plan.time.iteration_seconds;
    const bool close_call = seconds <= best_seconds * (1 + kCloseCallFraction);
    if (close_call) {
      const WorkProfile work = profile_work(model, training, cluster.gpu, plan.config, efficiency);
      const CommunicationTimes communication = communication_times(cluster, plan.config, work, plan.placement);
      seconds = simulated_iteration_seconds(plan.config, work, communication, training);
    }
    order.emplace_back(!close_call, seconds, index);
  }
  std::stable_sort(order.begin(), order.end());
  std::vector<Plan> ranked;
  for (const auto& [beyond, seconds, index] : order) ranked.push_back(std::move(plans[index]));
  plans = std::move(ranked);
}

std::string check_inputs(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster) {
  for (const std::string& problem : {validate(model), validate(training), validate(cluster)}) {
    if (!problem.empty()) return problem;
  }
  const std::vector<int>& split = training.fixed.layers_per_stage;
  if (!split.empty()) {
    const bool counts = std::all_of(split.begin(), split.end(), [](int layers) { return layers >= 0; });
    const std::int64_t total = std::accumulate(split.begin(), split.end(), std::int64_t{0});
    if (!counts || total != model.num_layers || !training.fixed.pp || *training.fixed.pp != static_cast<int>(split.size())) {
      return "the fixed split of " + std::to_string(split.size()) + " stages does not fit " + std::to_string(model.num_layers) +
             " layers on pp=" + (training.fixed.pp ? std::to_string(*training.fixed.pp) : std::string("(not fixed)"));
    }
  }
  if (peak_flop_per_second(cluster.gpu, training.precision) <= 0) {
    return std::string("GPU ") + cluster.gpu.name + " has no " + to_string(training.precision) +
           " tensor cores; choose another precision";
  }
  return {};
}

SearchSpace space_of(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                     const SearchOptions& options) {
  return SearchSpace{model,           training, cluster.gpus_per_node, cluster.num_gpus(),
                     cluster.gpu.memory_bytes - options.memory_safety_margin_bytes, options.overheads,
                     training.fixed};
}

template <auto Knob>
bool reset_knob(FixedKnobs& knobs) {
  const bool was_fixed = (knobs.*Knob).has_value();
  (knobs.*Knob).reset();
  return was_fixed;
}

// recompute=block:N is the recompute knob and its layer count together.
bool reset_recompute(FixedKnobs& knobs) {
  knobs.recomputed_layers_per_chunk.reset();
  return reset_knob<&FixedKnobs::recompute>(knobs);
}

// The smallest change that makes something fit, tried from the least to the most disruptive:
// release one fixed knob, then more nodes of the same kind.
std::string smallest_change(const SearchSpace& space, int num_nodes) {
  struct Release {
    const char* knob;
    bool (*release)(FixedKnobs&);  // resets the knob; false when it was not fixed
  };
  const Release releases[] = {
      {"mbs", reset_knob<&FixedKnobs::micro_batch>},
      {"recompute", reset_recompute},
      {"vpp", reset_knob<&FixedKnobs::virtual_stages>},
      {"sp", reset_knob<&FixedKnobs::sequence_parallel>},
      {"distopt", reset_knob<&FixedKnobs::distributed_optimizer>},
      {"fsdp", reset_knob<&FixedKnobs::fully_sharded>},
      {"pp", reset_knob<&FixedKnobs::pp>},
      {"tp", reset_knob<&FixedKnobs::tp>},
      {"dp", reset_knob<&FixedKnobs::dp>},
      {"cp", reset_knob<&FixedKnobs::cp>},
      {"ep", reset_knob<&FixedKnobs::ep>},
      {"etp", reset_knob<&FixedKnobs::etp>},
  };
  for (const Release& release : releases) {
    SearchSpace relaxed = space;
    if (!release.release(relaxed.fixed)) continue;
    const Enumeration relaxed_result = enumerate(relaxed);
    if (!relaxed_result.fitting.empty()) {
      return std::string("stop fixing ") + release.knob + " (" + describe(relaxed_result.fitting.front().config) + " fits)";
    }
  }
  SearchSpace bigger = space;
  bigger.fixed.dp.reset();
  const auto fits_on = [&](int nodes) {
    bigger.num_gpus = space.num_gpus / num_nodes * nodes;
    return !enumerate(bigger).fitting.empty();
  };
  for (int factor = 2; factor <= 64; factor *= 2) {
    if (!fits_on(num_nodes * factor)) continue;
    int nodes = num_nodes * factor / 2 + 1;  // the first count in the last doubling that fits
    while (!fits_on(nodes)) ++nodes;
    return "use at least " + std::to_string(nodes) + " nodes (have " + std::to_string(num_nodes) + ")";
  }
  return "even " + std::to_string(num_nodes * 64) +
         " nodes are not enough: shorten the sequence, or use GPUs with more memory";
}

}  // namespace

Result<SearchResult> search_plans(const ModelSpec& requested_model, const TrainingSpec& training, const Cluster& cluster,
                                  const SearchOptions& options) {
  const ModelSpec model = model_for_sequence(requested_model, training.sequence_length);
  const std::string problem = check_inputs(model, training, cluster);
  if (!problem.empty()) return Error{problem};
  // Said once, rather than as the reason every layout was dropped ("no plan fits ... memory").
  if (const std::string unplannable = model_problem(training.target.framework, model); !unplannable.empty())
    return Error{std::string(to_string(training.target.framework)) + " cannot train " + model.name + ": " + unplannable};
  const SearchSpace space = space_of(model, training, cluster, options);
  Enumeration enumeration = enumerate(space);
  if (enumeration.fitting.empty() && !enumeration.leanest && enumeration.rejections.empty()) {
    // Nothing was priced, so memory is not why: the fixed knobs rule out every layout.
    return Error{"the fixed knobs leave no layout for " + std::to_string(space.num_gpus) + " GPUs and a global batch of " +
                 std::to_string(training.global_batch_sequences) + " sequences (tp x cp x pp x dp must make " +
                 std::to_string(space.num_gpus) + ", and dp x mbs divide the batch); " +
                 smallest_change(space, cluster.num_nodes())};
  }
  if (enumeration.fitting.empty()) {
    std::string message = "no parallel plan fits " + cluster.gpu.name + " memory (" + gib(space.usable_bytes) +
                          " usable per GPU) on " + std::to_string(cluster.num_nodes()) + " nodes x " +
                          std::to_string(cluster.gpus_per_node) + " GPUs";
    if (enumeration.leanest) {
      message += ": the leanest, " + describe(*enumeration.leanest) + ", needs " + gib(enumeration.leanest_peak.bytes) +
                 " on stage " + std::to_string(enumeration.leanest_peak.stage);
    } else if (!enumeration.rejections.empty()) {
      message += ": " + enumeration.rejections.front().family + ": " + enumeration.rejections.front().reason;
    }
    return Error{message + "; " + smallest_change(space, cluster.num_nodes())};
  }

  // Branch and bound: a candidate's free-communication time bounds its real time from below, so
  // candidates are evaluated in order of that bound until it passes the k-th best real time.
  for (Candidate& candidate : enumeration.fitting) {
    candidate.lower_bound_seconds =
        lower_bound_seconds(candidate.config, profile_work(model, training, cluster.gpu, candidate.config, options.efficiency), training);
  }
  // Stable: equal bounds keep the enumeration's order, so ties resolve the same on every node.
  std::stable_sort(enumeration.fitting.begin(), enumeration.fitting.end(), [](const Candidate& a, const Candidate& b) {
    return a.lower_bound_seconds < b.lower_bound_seconds;
  });
  // Placement can change which layout wins on an uneven fabric: keep enough candidates to re-rank.
  // Beyond those, close calls (kCloseCallFraction) are kept, unplaced, for the simulated ranking.
  const size_t keep = static_cast<size_t>(
      std::max({1, options.top_k, options.optimize_placement ? options.placement_candidates : 0}));
  const size_t capacity = std::max(keep, kMostCloseCalls);
  // Candidates are kept, and placed, in order of the best time placement could reach: their time
  // with every link at the cluster's best (a lower bound for any placement). Slurm's order alone
  // would misrank them wherever placement gains much, e.g. a layout whose DP rings cross a
  // degraded pair in Slurm's order but not once placed.
  // Where an expert all-to-all group cannot fit on a node, every placement sends part of it over
  // some node's own links, not the cluster's best pair: bound_all_to_all prices that
  // (and replaces the best links where a node's rails are shared: Slurm's order shares them most).
  const NodeBestLinks best_of_nodes = options.optimize_placement ? best_links_of_nodes(cluster) : NodeBestLinks{};
  const Cluster optimistic = options.optimize_placement ? with_best_links(cluster, best_of_nodes) : Cluster{};
  const auto reachable_seconds = [&](const ParallelConfig& config, const Evaluated& evaluated) {
    if (!options.optimize_placement) return evaluated.time.iteration_seconds;
    CommunicationTimes communication = communication_times(optimistic, config, evaluated.work, default_placement(config));
    bound_all_to_all(cluster, best_of_nodes, config, evaluated.work, communication);
    return iteration_seconds(config, evaluated.work, communication, training);
  };
  std::vector<std::pair<double, size_t>> best;  // (reachable_seconds, index), sorted, at most `capacity`
  std::vector<std::optional<Evaluated>> evaluated_of(enumeration.fitting.size());  // kept for those in `best`
  SearchResult result;
  result.rejections = std::move(enumeration.rejections);
  for (size_t index = 0; index < enumeration.fitting.size(); ++index) {
    Candidate& candidate = enumeration.fitting[index];
    if (best.size() >= keep) {
      const double close_call = best.front().first * (1 + kCloseCallFraction);
      const double bound = std::max(best[keep - 1].first, best.size() < capacity ? close_call : 0.0);
      if (candidate.lower_bound_seconds >= bound) break;
    }
    evaluated_of[index] = evaluate_in_default_order(model, training, cluster, candidate.config, options.efficiency);
    candidate.iteration_seconds = evaluated_of[index]->time.iteration_seconds;
    ++result.candidates_evaluated;
    const double reachable = reachable_seconds(candidate.config, *evaluated_of[index]);
    best.insert(std::upper_bound(best.begin(), best.end(), std::make_pair(reachable, index)), {reachable, index});
    if (best.size() > capacity) {
      evaluated_of[best.back().second].reset();
      best.pop_back();
    }
  }

  // Placement re-ranks the kept candidates: first the best in Slurm's order (what every
  // placement can at least keep), then the rest by reachable time. On a measured fabric
  // each placement search costs a large share of the job-start time, so a candidate keeps Slurm's
  // order when placing it is not expected to beat the best placed plan so far:
  //  - its time with every link at the cluster's best (a lower bound for any placement) is no
  //    better; or
  //  - the placements found so far recovered only a fraction of the gap between the default order
  //    and that bound (the fabric's structure, e.g. slow links between switch groups, keeps every
  //    layout away from it), and even kRunnerUpReach times that fraction of the candidate's own gap
  //    would not get it there.
  const double close_call = best.front().first * (1 + kCloseCallFraction);
  const auto best_in_slurms_order = std::min_element(best.begin(), best.end(), [&](const auto& a, const auto& b) {
    return evaluated_of[a.second]->time.iteration_seconds < evaluated_of[b.second]->time.iteration_seconds;
  });
  std::rotate(best.begin(), best_in_slurms_order, std::next(best_in_slurms_order));
  double best_placed_seconds = std::numeric_limits<double>::infinity();
  double best_recovered_fraction = 1;  // of the best placed plan's default-to-bound gap
  double job_move_work = 0;            // spent by the placement searches so far (PlacementEffort)
  for (size_t rank = 0; rank < best.size(); ++rank) {
    const auto& [seconds, index] = best[rank];
    if (rank >= keep && seconds > close_call) break;
    const ParallelConfig& config = enumeration.fitting[index].config;
    const Evaluated& evaluated = *evaluated_of[index];
    SearchOptions candidate_options = options;
    candidate_options.optimize_placement = options.optimize_placement && rank < keep;
    const double default_seconds = evaluated.time.iteration_seconds;
    const double bound_seconds = seconds;  // reachable_seconds: the default order's time without placement
    if (candidate_options.optimize_placement && !result.plans.empty()) {
      const double expected_reach = std::min(1.0, kRunnerUpReach * best_recovered_fraction);
      candidate_options.optimize_placement =
          default_seconds - expected_reach * (default_seconds - bound_seconds) < best_placed_seconds;
    }
    const double job_work_left = static_cast<double>(options.placement.max_job_move_work) - job_move_work;
    if (candidate_options.optimize_placement && rank > 0 && job_work_left < 1) candidate_options.optimize_placement = false;
    candidate_options.placement.max_move_work = static_cast<std::int64_t>(
        std::min(static_cast<double>(options.placement.max_move_work), std::max(0.0, job_work_left)));
    result.plans.push_back(finish_plan(model, training, cluster, config, candidate_options, evaluated, &job_move_work));
    const double placed_seconds = result.plans.back().time.iteration_seconds;
    if (candidate_options.optimize_placement && placed_seconds < best_placed_seconds) {
      best_placed_seconds = placed_seconds;
      best_recovered_fraction =
          default_seconds > bound_seconds ? std::max(0.0, (default_seconds - placed_seconds) / (default_seconds - bound_seconds)) : 1.0;
    }
  }
  rank_close_calls_by_simulation(model, training, cluster, options.efficiency, result.plans);
  if (result.plans.size() > static_cast<size_t>(options.top_k)) result.plans.resize(static_cast<size_t>(std::max(0, options.top_k)));
  return result;
}

Result<ParallelConfig> complete_layout(const ModelSpec& requested_model, const TrainingSpec& training, const Cluster& cluster,
                                       const ParallelConfig& requested) {
  const ModelSpec model = model_for_sequence(requested_model, training.sequence_length);
  const std::string problem = check_inputs(model, training, cluster);
  if (!problem.empty()) return Error{problem};
  ParallelConfig config = requested;
  const std::string shape = describe(config);
  if (config.tp < 1 || config.pp < 1 || config.dp < 1 || config.micro_batch < 1 || config.virtual_stages < 1) {
    return Error{shape + ": every knob must be at least 1"};
  }
  if (config.world_size() != cluster.num_gpus()) {
    return Error{shape + ": uses " + std::to_string(config.world_size()) + " GPUs, the job has " +
                 std::to_string(cluster.num_gpus())};
  }
  if (cluster.gpus_per_node % config.tp != 0 && config.tp % cluster.gpus_per_node != 0) {
    return Error{shape + ": tp must divide the " + std::to_string(cluster.gpus_per_node) +
                 " GPUs of a node or span whole nodes (a multiple of them)"};
  }
  if (model.num_attention_heads % config.tp != 0 || model.num_kv_heads % config.tp != 0) {
    return Error{shape + ": tp must divide the attention heads and the KV heads"};
  }
  if (const std::string unsplit = mlp_split_problem(model, training.target.framework, config.tp); !unsplit.empty()) {
    return Error{shape + ": " + unsplit};
  }
  // Sequence parallelism over one rank is no sequence parallelism, and the frameworks run it so:
  // Megatron-LM turns it off when tp = 1 (arguments.py @d98e8a64 l.1430-1439), nanotron's
  // REDUCE_SCATTER mode gathers nothing over a group of one (parallel/tensor_parallel/
  // functional.py @2411b022 l.483-484). A layout fixed with sp on at tp 1 (a config written once for
  // every tp) is priced as what runs, not refused.
  if (config.tp == 1) config.sequence_parallel = false;
  if (config.ep < 1 || config.etp < 1 || config.cp < 1) return Error{shape + ": cp, ep and etp must be at least 1"};
  if (config.cp > 1 && training.sequence_length % (2 * config.cp) != 0) {
    return Error{shape + ": the sequence length " + std::to_string(training.sequence_length) +
                 " must be a multiple of 2 x cp (Megatron-LM arguments.py l.1335-1338)"};
  }
  if (config.cp > 1 && training.attention != AttentionKernel::flash) {
    return Error{shape + ": context parallelism needs flash attention"};
  }
  if (training.global_batch_sequences % (static_cast<std::int64_t>(config.dp) * config.micro_batch) != 0) {
    return Error{shape + ": the global batch of " + std::to_string(training.global_batch_sequences) +
                 " sequences is not a multiple of dp x mbs"};
  }
  if (config.layers_per_stage.empty()) config.layers_per_stage = default_layer_split(model, training.target.framework, config.pp);
  if (static_cast<int>(config.layers_per_stage.size()) != config.pp ||
      std::accumulate(config.layers_per_stage.begin(), config.layers_per_stage.end(), 0) != model.num_layers ||
      *std::min_element(config.layers_per_stage.begin(), config.layers_per_stage.end()) < 0) {
    return Error{shape + ": layers_per_stage must give each of the " + std::to_string(config.pp) +
                 " stages zero or more layers and sum to " + std::to_string(model.num_layers)};
  }
  const int microbatches =
      static_cast<int>(training.global_batch_sequences / (static_cast<std::int64_t>(config.dp) * config.micro_batch));
  if (config.virtual_stages > 1 && config.pp > 1) {
    const bool equal_chunks = std::all_of(config.layers_per_stage.begin(), config.layers_per_stage.end(),
                                          [&](int layers) { return layers % config.virtual_stages == 0; });
    if (!equal_chunks) return Error{shape + ": every stage's layers must split into vpp equal chunks"};
    if (microbatches < config.pp) return Error{shape + ": the interleaved schedule needs at least pp micro-batches"};
  }
  if (config.pp == 1) config.virtual_stages = 1;
  return config;
}

Result<ParallelConfig> complete_configuration(const ModelSpec& requested_model, const TrainingSpec& training,
                                              const Cluster& cluster, const ParallelConfig& requested) {
  auto config = complete_layout(requested_model, training, cluster, requested);
  if (!config) return config;
  const ModelSpec model = model_for_sequence(requested_model, training.sequence_length);
  const int microbatches =
      static_cast<int>(training.global_batch_sequences / (static_cast<std::int64_t>(config->dp) * config->micro_batch));
  std::string unbuildable = launch_problem(training.target, model, *config, microbatches);
  if (unbuildable.empty()) unbuildable = optimizer_problem(training, *config);
  if (!unbuildable.empty())
    return Error{describe(requested) + ": " + to_string(training.target.framework) + " cannot build it: " + unbuildable};
  return config;
}

Result<Plan> evaluate_plan(const ModelSpec& requested_model, const TrainingSpec& training, const Cluster& cluster,
                           const ParallelConfig& requested, const SearchOptions& options) {
  const auto completed = complete_configuration(requested_model, training, cluster, requested);
  if (!completed) return completed.error();
  const ModelSpec model = model_for_sequence(requested_model, training.sequence_length);
  const ParallelConfig& config = *completed;
  const PeakMemory peak = peak_memory(model, training, config, options.overheads);
  const double usable = cluster.gpu.memory_bytes - options.memory_safety_margin_bytes;
  if (peak.bytes > usable) return Error{describe(requested) + ": " + memory_reason(peak, usable)};
  return finish_plan(model, training, cluster, config, options, evaluate_in_default_order(model, training, cluster, config, options.efficiency));
}

}  // namespace pipette
