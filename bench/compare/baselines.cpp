#include "baselines.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "pipette/core/memory.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/placement.hpp"

namespace pipette::bench {

namespace {

std::vector<int> divisors(std::int64_t value) {
  std::vector<int> result;
  for (std::int64_t d = 1; d <= value; ++d) {
    if (value % d == 0) result.push_back(static_cast<int>(d));
  }
  return result;
}

bool tp_divides_heads(const ModelSpec& model, int tp) {
  return model.num_attention_heads % tp == 0 && model.num_kv_heads % tp == 0;
}

// Every method runs its pick with the memory-saving settings that cost no time (sequence
// parallelism with TP, the distributed optimizer with DP), so a pick is never scored as slower or
// less likely to fit than it would be in a current Megatron-LM.
ParallelConfig config_of(const ModelSpec& model, int tp, int pp, int dp, int micro_batch, RecomputeMode recompute,
                         std::vector<int> layers_per_stage = {}) {
  ParallelConfig config;
  config.tp = tp;
  config.pp = pp;
  config.dp = dp;
  config.micro_batch = micro_batch;
  config.recompute = recompute;
  config.sequence_parallel = tp > 1;
  config.distributed_optimizer = dp > 1;
  config.layers_per_stage =
      layers_per_stage.empty() ? balanced_layers_per_stage(model.num_layers, pp) : std::move(layers_per_stage);
  return config;
}

// The same cluster as every link were its nominal speed: what a tool without measurements sees.
Cluster nominal_cluster(const Cluster& cluster, const SiteKnowledge& site) {
  Cluster nominal = cluster;
  nominal.inter_node = LinkMatrix(cluster.num_nodes(), site.nominal_inter_node);
  for (LinkMatrix& node : nominal.intra_node) node = LinkMatrix(cluster.gpus_per_node, site.nominal_intra_node);
  return nominal;
}

// A stage's time for one micro-batch, forward and backward with its TP collectives, as a
// profiling run would measure it (the slowest replica's).
double stage_seconds(const WorkProfile& work, const CommunicationTimes& communication, size_t stage) {
  const StageWork& stage_work = work.stages[stage];
  const auto& tp = communication.tp_seconds[stage];
  return stage_work.forward_compute_seconds + stage_work.backward_compute_seconds + *std::max_element(tp.begin(), tp.end());
}

// AMP's layer partition (pipe_ast) minimises (B − 1)·max stage + Σ stages + Σ boundary messages;
// with identical transformer layers and boundary messages of one size that is the split with the
// smallest slowest stage, the first stage also carrying the embedding and the last the LM head.
std::vector<int> amp_layer_split(const ModelSpec& model, const WorkProfile& balanced, int pp) {
  if (pp == 1) return {model.num_layers};
  // An interior stage has no embedding or head; pp ≥ 3 always has one, pp = 2 infers the layer
  // cost from the first stage minus its embedding share.
  const StageWork& first = balanced.stages.front();
  const double layer_seconds =
      (first.forward_compute_seconds + first.backward_compute_seconds - first.embedding_and_head_seconds) /
      first.num_layers;
  const double first_extra = first.embedding_and_head_seconds;
  const double last_extra = balanced.stages.back().embedding_and_head_seconds;
  const auto layers_within = [&](double budget, double extra) {
    return static_cast<int>(std::floor((budget - extra) / layer_seconds + 1e-9));
  };
  const auto fits = [&](double budget) {
    std::int64_t total = 0;
    for (int stage = 0; stage < pp; ++stage) {
      const double extra = stage == 0 ? first_extra : (stage == pp - 1 ? last_extra : 0.0);
      const int layers = layers_within(budget, extra);
      if (layers < 1) return false;
      total += layers;
    }
    return total >= model.num_layers;
  };
  // The optimum is one of the values n·layer + extra; search n for each stage kind.
  std::vector<double> budgets;
  for (int n = 1; n <= model.num_layers; ++n) {
    for (const double extra : {0.0, first_extra, last_extra}) budgets.push_back(n * layer_seconds + extra);
  }
  std::sort(budgets.begin(), budgets.end());
  const auto best = std::find_if(budgets.begin(), budgets.end(), fits);
  std::vector<int> layers(static_cast<size_t>(pp));
  for (int stage = 0; stage < pp; ++stage) {
    const double extra = stage == 0 ? first_extra : (stage == pp - 1 ? last_extra : 0.0);
    layers[static_cast<size_t>(stage)] = std::min(layers_within(*best, extra), model.num_layers);
  }
  // Take the surplus from the interior stages first (they hold no embedding or head).
  int surplus = std::accumulate(layers.begin(), layers.end(), 0) - model.num_layers;
  for (int pass = 0; surplus > 0; pass = (pass + 1) % 2) {
    for (int stage = pp - 1; stage >= 0 && surplus > 0; --stage) {
      const bool end_stage = stage == 0 || stage == pp - 1;
      if ((pass == 0) == end_stage || layers[static_cast<size_t>(stage)] <= 1) continue;
      --layers[static_cast<size_t>(stage)];
      --surplus;
    }
  }
  return layers;
}

// AMP's cost model (cost_homo.py predict_single + pipe.py pipe_cost): a GPipe-style pipeline
// (B − 1)·max stage + Σ stages, each stage's compute with its TP all-reduces, one activation
// message per stage boundary, plus the slowest stage's data-parallel all-reduce, not overlapped.
// Bandwidths are the nominal ones of the cluster description.
double amp_cost_seconds(const WorkProfile& work, const CommunicationTimes& communication) {
  double slowest_stage = 0;
  double stages = 0;
  for (size_t stage = 0; stage < work.stages.size(); ++stage) {
    const double seconds = stage_seconds(work, communication, stage);
    slowest_stage = std::max(slowest_stage, seconds);
    stages += seconds;
  }
  double boundaries = 0;
  for (const auto& boundary : communication.p2p_seconds) boundaries += boundary.front();
  const double data_parallel = *std::max_element(communication.dp_seconds.begin(), communication.dp_seconds.end());
  return (work.num_microbatches - 1) * slowest_stage + stages + boundaries + data_parallel;
}

// Pipette's latency model (the released code's cost_total_iterl_split_opt): memory-efficient 1F1B
// in groups of pp micro-batches, each group paying one micro-batch's trip through all pp stages
// and the slowest pipeline's transfers (activation forward, gradient back); the remaining pp − 1
// stage times of the drain; and stage 0's data-parallel all-reduce.
double pipette_latency_seconds(const ParallelConfig& config, const WorkProfile& work,
                               const CommunicationTimes& communication) {
  double stage = 0;
  for (size_t s = 0; s < work.stages.size(); ++s) stage = std::max(stage, stage_seconds(work, communication, s));
  double slowest_pipeline_transfers = 0;
  for (int replica = 0; replica < config.dp; ++replica) {
    double transfers = 0;
    for (const auto& boundary : communication.p2p_seconds) transfers += 2 * boundary[static_cast<size_t>(replica)];
    slowest_pipeline_transfers = std::max(slowest_pipeline_transfers, transfers);
  }
  const int microbatches = work.num_microbatches;
  const int groups = microbatches / config.pp;
  const double one_trip = config.pp * stage + slowest_pipeline_transfers;
  const double pipeline = groups >= 1 ? groups * one_trip + (config.pp - 1) * stage : one_trip + (microbatches - 1) * stage;
  return pipeline + communication.dp_seconds.front();
}

}  // namespace

std::string describe(const ParallelConfig& config) {
  std::string text = "tp" + std::to_string(config.tp) + " pp" + std::to_string(config.pp) + " dp" +
                     std::to_string(config.dp) + " mbs" + std::to_string(config.micro_batch);
  if (config.virtual_stages > 1) text += " vpp" + std::to_string(config.virtual_stages);
  if (config.recompute != RecomputeMode::none) text += std::string(" rc-") + to_string(config.recompute);
  return text;
}

bool fits_in_memory(const ModelSpec& model, const TrainingSpec& training, const ParallelConfig& config,
                    const SiteKnowledge& site) {
  for (const StageMemory& stage : estimate_memory(model, training, config, site.overheads)) {
    if (stage.total_bytes() > site.usable_memory_bytes) return false;
  }
  return true;
}

BaselinePick common_practice(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                             const SiteKnowledge& site) {
  // TP fills the node; a model whose heads do not split eight ways gets the largest TP that divides them.
  int tp = cluster.gpus_per_node;
  while (tp > 1 && !(cluster.gpus_per_node % tp == 0 && tp_divides_heads(model, tp))) --tp;
  const std::int64_t batch = training.global_batch_sequences;
  for (const RecomputeMode recompute : {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full}) {
    for (const int pp : divisors(cluster.num_gpus() / tp)) {
      // Megatron-LM's default split needs pp to divide the layers.
      if (pp > model.num_layers || model.num_layers % pp != 0) continue;
      const int dp = cluster.num_gpus() / (tp * pp);
      if (batch % dp != 0) continue;
      const ParallelConfig config = config_of(model, tp, pp, dp, 1, recompute);
      if (fits_in_memory(model, training, config, site)) return {config, default_placement(config), {}};
    }
  }
  return {std::nullopt, {}, "no pp fits with tp=" + std::to_string(tp) + " and micro-batch 1"};
}

AmpPicks amp(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster, const SiteKnowledge& site) {
  const Cluster nominal = nominal_cluster(cluster, site);
  const std::int64_t batch = training.global_batch_sequences;
  double best_cost = std::numeric_limits<double>::infinity();
  double best_fitting_cost = std::numeric_limits<double>::infinity();
  AmpPicks picks{{std::nullopt, {}, "no (tp, pp, dp, micro-batch) divides the job"},
                 {std::nullopt, {}, "nothing in its space fits"}};
  for (const int tp : divisors(cluster.gpus_per_node)) {
    if (!tp_divides_heads(model, tp)) continue;
    for (const int pp : divisors(cluster.num_gpus() / tp)) {
      if (pp > model.num_layers) continue;
      const int dp = cluster.num_gpus() / (tp * pp);
      if (batch % dp != 0) continue;
      for (const int micro_batch : divisors(batch / dp)) {
        ParallelConfig config = config_of(model, tp, pp, dp, micro_batch, RecomputeMode::none);
        config.layers_per_stage = amp_layer_split(model, profile_work(model, training, cluster.gpu, config), pp);
        const WorkProfile work = profile_work(model, training, cluster.gpu, config);
        const Placement placement = default_placement(config);
        const double cost = amp_cost_seconds(work, communication_times(nominal, config, work, placement));
        if (cost < best_cost) {
          best_cost = cost;
          picks.best = {config, placement, {}};
        }
        if (cost < best_fitting_cost && fits_in_memory(model, training, config, site)) {
          best_fitting_cost = cost;
          picks.best_fitting = {config, placement, {}};
        }
      }
    }
  }
  return picks;
}

BaselinePick pipette_paper(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster,
                           const SiteKnowledge& site, const PlacementEffort& effort) {
  // The released code's space: tp in {1, 2, 4, 8} within a node, pp dividing both the servers and
  // the layers, micro-batch in {1, 2, 4, 8}; its memory estimator (ours here) filters the rest.
  struct Candidate {
    ParallelConfig config;
    double latency_seconds = 0;
  };
  std::vector<Candidate> candidates;
  const std::int64_t batch = training.global_batch_sequences;
  for (const int tp : {1, 2, 4, 8}) {
    if (cluster.gpus_per_node % tp != 0 || !tp_divides_heads(model, tp)) continue;
    for (const int pp : divisors(cluster.num_nodes())) {
      if (pp > model.num_layers || model.num_layers % pp != 0) continue;
      const int dp = cluster.num_gpus() / (tp * pp);
      if (batch % dp != 0) continue;
      for (const int micro_batch : {1, 2, 4, 8}) {
        if ((batch / dp) % micro_batch != 0) continue;
        for (const RecomputeMode recompute : {RecomputeMode::none, RecomputeMode::full}) {
          const ParallelConfig config = config_of(model, tp, pp, dp, micro_batch, recompute);
          if (!fits_in_memory(model, training, config, site)) continue;
          const WorkProfile work = profile_work(model, training, cluster.gpu, config);
          const double latency = pipette_latency_seconds(
              config, work, communication_times(cluster, config, work, default_placement(config)));
          candidates.push_back({config, latency});
          break;  // recompute only adds time once the plan fits without it
        }
      }
    }
  }
  if (candidates.empty()) return {std::nullopt, {}, "nothing fits its space (pp | nodes, mbs <= 8)"};
  // The released code anneals each configuration it reports; the latency model's ranking in
  // Slurm's order decides which few are worth annealing here (placement only lowers the
  // communication terms, which are a small part of every candidate's latency).
  constexpr size_t annealed = 3;
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.latency_seconds < b.latency_seconds; });
  candidates.resize(std::min(candidates.size(), annealed));
  double best_latency = std::numeric_limits<double>::infinity();
  BaselinePick best;
  for (const Candidate& candidate : candidates) {
    const WorkProfile work = profile_work(model, training, cluster.gpu, candidate.config);
    const PlacementResult annealed_placement =
        optimize_placement_pipette_paper(cluster, candidate.config, work, training, effort);
    const double latency = pipette_latency_seconds(
        candidate.config, work, communication_times(cluster, candidate.config, work, annealed_placement.placement));
    if (latency < best_latency) {
      best_latency = latency;
      best = {candidate.config, annealed_placement.placement, {}};
    }
  }
  return best;
}

}  // namespace pipette::bench
