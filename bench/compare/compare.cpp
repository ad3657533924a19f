// plan_comparison: scores Pipette's plans against what users would otherwise run, on one
// simulator. For every case of the matrix (model × cluster size × fabric) four methods pick a
// layout and a rank placement:
//   (a) common practice, (b) AMP (and, as (b'), AMP's first pick that fits), (c) Pipette as
//   published (baselines.hpp), (d) search_plans;
// each pick is scored by simulate_schedule on communication_times of the TRUE links. A pick that
// does not fit in memory by our estimator is reported as infeasible, never scored.
//
// Usage: plan_comparison [--quick] [--out-dir DIR] [--markdown FILE] [--model PRESET] [--nodes N]
// (--model and --nodes run one slice of the matrix, to look into a case).
// Writes DIR/results.csv (every case) and DIR/speedup_vs_nodes.svg; prints the summary, and
// writes it as Markdown to FILE when asked (scripts/bench.sh splices it into bench/RESULTS.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "baselines.hpp"
#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/placement.hpp"
#include "pipette/core/search.hpp"
#include "pipette/core/simulator.hpp"
#include "pipette/core/synthetic_fabric.hpp"
#include "pipette/core/units.hpp"
#include "pipette/topology/model_file.hpp"
#include "speedup_plot.hpp"

namespace pipette::bench {
namespace {

// ---- The matrix ------------------------------------------------------------------------------

struct ModelCase {
  const char* preset;
  int min_nodes;  // below this even the leanest layout does not fit 80 GB GPUs
};

// The full matrix runs (c) and (d) at the plugin's default effort, i.e. ours as shipped.
struct Matrix {
  std::vector<ModelCase> models;
  std::vector<int> node_counts;
  PlacementEffort effort;
  int placement_candidates = SearchOptions{}.placement_candidates;
};

Matrix full_matrix() {
  Matrix matrix;
  matrix.models = {{"llama2-7b", 4}, {"llama2-13b", 4}, {"llama2-70b", 4}, {"gpt3-175b", 16}};
  matrix.node_counts = {4, 16, 64, 256};
  return matrix;
}

Matrix quick_matrix() {
  Matrix matrix;
  matrix.models = {{"llama2-7b", 4}, {"llama2-70b", 4}};
  matrix.node_counts = {4, 16};
  matrix.effort.max_moves = 2000;
  matrix.placement_candidates = 4;
  return matrix;
}

TrainingSpec training_of() {
  TrainingSpec training;
  training.global_batch_sequences = 1024;  // 4M tokens, Llama 2's batch
  training.sequence_length = 4096;
  training.precision = Precision::bf16;
  training.attention = AttentionKernel::flash;
  return training;
}

SiteKnowledge site_of(const Cluster& cluster) {
  SiteKnowledge site;
  site.usable_memory_bytes = cluster.gpu.memory_bytes - 2 * units::gibibyte;  // etc/example-cluster's margin
  // The site file's priors (etc/example-cluster/site.yaml): 8 × 400 Gb/s at 90%, 10 µs; NVSwitch.
  site.nominal_inter_node = {8 * 400 * units::gigabit * 0.9, 10 * units::microsecond, false};
  site.nominal_intra_node = cluster.intra_node.front().at(0, 1);
  site.nominal_intra_node.measured = false;
  return site;
}

// ---- Scoring ---------------------------------------------------------------------------------

enum class Outcome { scored, infeasible, none };

struct Score {
  Outcome outcome = Outcome::none;
  std::string config;
  double simulated_seconds = 0;
  double predicted_seconds = 0;  // critical_path, the closed form the search ranks by
};

Score score(const ModelSpec& model, const TrainingSpec& training, const Cluster& cluster, const SiteKnowledge& site,
            const std::optional<ParallelConfig>& config, const Placement& placement) {
  if (!config) return {};
  Score result{Outcome::infeasible, describe(*config), 0};
  if (!fits_in_memory(model, training, *config, site)) return result;
  const WorkProfile work = profile_work(model, training, cluster.gpu, *config);
  const CommunicationTimes communication = communication_times(cluster, *config, work, placement);
  result.simulated_seconds = simulated_iteration_seconds(*config, work, communication, training);
  result.predicted_seconds = critical_path(*config, work, communication, training).iteration_seconds;
  result.outcome = Outcome::scored;
  return result;
}

constexpr int kMethods = 5;
constexpr int kOurs = kMethods - 1;
const char* const kMethodNames[kMethods] = {"common practice", "AMP", "AMP, first pick that fits", "Pipette (paper)",
                                            "ours"};
const char* const kMethodKeys[kMethods] = {"common", "amp", "amp_fitting", "pipette_paper", "ours"};
const char* const kColours[kOurs] = {"#1f77b4", "#d62728", "#ff7f0e", "#2ca02c"};

struct CaseResult {
  std::string model;
  int nodes = 0;
  std::string fabric;
  Score scores[kMethods];
  double ours_plan_seconds = 0;  // wall time of search_plans with placement
  // Ours' inter-node DP and pipeline neighbours, and those on different local GPU indices (issue 18).
  RailAlignment ours_rails;
  bool ours_gpu_order_gain_shown = false;  // GPUs permuted inside nodes for a predicted gain
};

CaseResult run_case(const ModelSpec& model, int nodes, std::size_t fabric_index, const Matrix& matrix) {
  const Cluster cluster = comparison_cluster(fabric_index, nodes);
  const ComparisonFabric& fabric = comparison_fabrics()[fabric_index];
  const TrainingSpec training = training_of();
  const SiteKnowledge site = site_of(cluster);
  CaseResult result{model.name, nodes, fabric.name, {}, 0, {}, false};

  const BaselinePick common = common_practice(model, training, cluster, site);
  const AmpPicks amp_picks = amp(model, training, cluster, site);
  const BaselinePick paper = pipette_paper(model, training, cluster, site, matrix.effort);
  result.scores[0] = score(model, training, cluster, site, common.config, common.placement);
  result.scores[1] = score(model, training, cluster, site, amp_picks.best.config, amp_picks.best.placement);
  result.scores[2] =
      score(model, training, cluster, site, amp_picks.best_fitting.config, amp_picks.best_fitting.placement);
  result.scores[3] = score(model, training, cluster, site, paper.config, paper.placement);

  SearchOptions options;
  options.top_k = 1;
  options.memory_safety_margin_bytes = cluster.gpu.memory_bytes - site.usable_memory_bytes;
  options.overheads = site.overheads;
  options.optimize_placement = true;
  options.placement_candidates = matrix.placement_candidates;
  options.placement = matrix.effort;
  const auto start = std::chrono::steady_clock::now();
  const Result<SearchResult> ours = search_plans(model, training, cluster, options);
  result.ours_plan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (ours.ok() && !ours.value().plans.empty()) {
    const Plan& plan = ours.value().plans.front();
    result.scores[kOurs] = score(model, training, cluster, site, plan.config, plan.placement);
    result.ours_rails = rail_alignment(cluster, plan.config, plan.placement);
    result.ours_gpu_order_gain_shown = plan.placement_search.gpu_orders_gained(plan.time.iteration_seconds);
  } else {
    std::cerr << model.name << " on " << nodes << " nodes (" << fabric.name
              << "): search_plans found nothing: " << (ours.ok() ? "empty result" : ours.error().message) << "\n";
  }
  return result;
}

// ---- Reporting -------------------------------------------------------------------------------

struct Summary {
  std::vector<double> speedups;  // ours / method, over cases where both were scored
  int infeasible = 0;
  int none = 0;
  int ours_slower = 0;
};

double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const double position = fraction * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(position);
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (position - static_cast<double>(below)) * (values[above] - values[below]);
}

std::string fixed(double value, const char* format = "%.3f") {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

Summary summarise(const std::vector<CaseResult>& cases, int method, const std::string& fabric = "") {
  Summary summary;
  for (const CaseResult& one : cases) {
    if (!fabric.empty() && one.fabric != fabric) continue;
    const Score& theirs = one.scores[method];
    const Score& ours = one.scores[kOurs];
    if (theirs.outcome == Outcome::infeasible) ++summary.infeasible;
    if (theirs.outcome == Outcome::none) ++summary.none;
    if (theirs.outcome != Outcome::scored || ours.outcome != Outcome::scored) continue;
    const double speedup = theirs.simulated_seconds / ours.simulated_seconds;
    summary.speedups.push_back(speedup);
    if (speedup < 1) ++summary.ours_slower;
  }
  return summary;
}

std::string speedup_cells(const Summary& summary) {
  if (summary.speedups.empty()) return "– | – | –";
  return fixed(percentile(summary.speedups, 0.5)) + " | " +
         fixed(*std::min_element(summary.speedups.begin(), summary.speedups.end())) + " | " +
         fixed(*std::max_element(summary.speedups.begin(), summary.speedups.end()));
}

std::string markdown(const std::vector<CaseResult>& cases, const Matrix& matrix, double total_seconds) {
  std::ostringstream out;
  out << "Matrix: models";
  for (const ModelCase& model : matrix.models) out << " " << model.preset << " (from " << model.min_nodes << " nodes)";
  out << "; nodes";
  for (const int nodes : matrix.node_counts) out << " " << nodes;
  out << " × 8 H100-SXM (80 GB, 2 GiB margin), 8 NDR rails per node; global batch "
      << training_of().global_batch_sequences << " × " << training_of().sequence_length
      << " tokens, bf16, flash attention; fabrics:\n";
  for (const ComparisonFabric& fabric : comparison_fabrics()) out << "- `" << fabric.name << "`: " << fabric.description << "\n";
  out << "\nPlacement effort for (c) and (d): at most " << matrix.effort.max_moves
      << " moves per annealing (it stops earlier on convergence), exact search up to "
      << matrix.effort.exact_up_to_nodes << " nodes; (d) re-ranks its best " << matrix.placement_candidates
      << " candidates after placement. " << cases.size() << " cases in " << fixed(total_seconds, "%.0f") << " s.\n\n";
  out << "Speedup = simulated iteration time of the method's pick / of ours (> 1: ours is faster), over the cases "
         "where both picks fit.\n\n";
  out << "| against | fabric | cases | median | min | max | ours slower | infeasible picks | no pick |\n";
  out << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (int method = 0; method < kOurs; ++method) {
    for (const std::string& fabric : [] {
           std::vector<std::string> names{""};
           for (const ComparisonFabric& one : comparison_fabrics()) names.emplace_back(one.name);
           return names;
         }()) {
      const Summary summary = summarise(cases, method, fabric);
      out << "| " << (fabric.empty() ? std::string("**") + kMethodNames[method] + "**" : "") << " | "
          << (fabric.empty() ? "**all**" : fabric) << " | " << summary.speedups.size() << " | "
          << speedup_cells(summary) << " | " << summary.ours_slower << " | " << summary.infeasible << " | "
          << summary.none << " |\n";
    }
  }
  double slowest_plan = 0;
  for (const CaseResult& one : cases) slowest_plan = std::max(slowest_plan, one.ours_plan_seconds);
  out << "\nSlowest planning (search + placement) of (d) in the matrix: " << fixed(slowest_plan, "%.2f") << " s.\n";
  int neighbours = 0, misaligned = 0, over_share = 0;
  double worst_share = 0;
  for (const CaseResult& one : cases) {
    neighbours += one.ours_rails.inter_node_neighbours;
    misaligned += one.ours_rails.on_different_local_gpus;
    worst_share = std::max(worst_share, one.ours_rails.misaligned_share());
    if (one.ours_rails.misaligned_share() > kMaxMisalignedNeighbourShare && !one.ours_gpu_order_gain_shown) ++over_share;
  }
  out << "Rails (issue 18): of (d)'s " << neighbours << " inter-node DP and pipeline neighbours, " << misaligned
      << " are on different local GPUs; worst case " << fixed(100 * worst_share, "%.1f") << "%; cases over "
      << fixed(100 * kMaxMisalignedNeighbourShare, "%.0f") << "% without a predicted gain: " << over_share << ".\n";
  return out.str();
}

void write_csv(const std::string& path, const std::vector<CaseResult>& cases) {
  std::ofstream csv(path);
  csv << "model,nodes,fabric";
  for (const char* key : kMethodKeys) {
    csv << "," << key << "_config," << key << "_outcome," << key << "_simulated_seconds," << key << "_predicted_seconds";
  }
  csv << ",ours_planning_seconds,ours_inter_node_neighbours,ours_on_different_local_gpus\n";
  for (const CaseResult& one : cases) {
    csv << one.model << "," << one.nodes << "," << one.fabric;
    for (const Score& method : one.scores) {
      const char* outcome = method.outcome == Outcome::scored ? "scored"
                            : method.outcome == Outcome::infeasible ? "infeasible" : "none";
      csv << "," << method.config << "," << outcome << ","
          << (method.outcome == Outcome::scored ? fixed(method.simulated_seconds, "%.6f") : "") << ","
          << (method.outcome == Outcome::scored ? fixed(method.predicted_seconds, "%.6f") : "");
    }
    csv << "," << fixed(one.ours_plan_seconds, "%.3f") << "," << one.ours_rails.inter_node_neighbours << ","
        << one.ours_rails.on_different_local_gpus << "\n";
  }
}

int run(int argc, char** argv) {
  bool quick = false;
  std::string out_dir = std::string(PIPETTE_SOURCE_DIR) + "/bench/compare";
  std::string markdown_path;
  std::string only_model;  // diagnosis: one model and/or one cluster size of the matrix
  int only_nodes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--quick") {
      quick = true;
    } else if (argument == "--out-dir" && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (argument == "--markdown" && i + 1 < argc) {
      markdown_path = argv[++i];
    } else if (argument == "--model" && i + 1 < argc) {
      only_model = argv[++i];
    } else if (argument == "--nodes" && i + 1 < argc) {
      only_nodes = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: plan_comparison [--quick] [--out-dir DIR] [--markdown FILE] [--model PRESET] [--nodes N]\n";
      return 2;
    }
  }
  const Matrix matrix = quick ? quick_matrix() : full_matrix();
  const auto start = std::chrono::steady_clock::now();
  std::vector<CaseResult> cases;
  for (const ModelCase& preset : matrix.models) {
    if (!only_model.empty() && only_model != preset.preset) continue;
    const Result<ModelSpec> model = load_model(preset.preset, default_model_dirs());
    if (!model.ok()) {
      std::cerr << "plan_comparison: " << model.error().message << "\n";
      return 1;
    }
    for (const int nodes : matrix.node_counts) {
      if (nodes < preset.min_nodes || (only_nodes != 0 && nodes != only_nodes)) continue;
      for (size_t fabric = 0; fabric < comparison_fabrics().size(); ++fabric) {
        cases.push_back(run_case(model.value(), nodes, fabric, matrix));
        const CaseResult& last = cases.back();
        std::fprintf(stderr, "%-11s %4d nodes %-15s", last.model.c_str(), nodes, last.fabric.c_str());
        for (int method = 0; method < kMethods; ++method) {
          const Score& one = last.scores[method];
          std::fprintf(stderr, " | %s: %s %s", kMethodKeys[method], one.config.c_str(),
                       one.outcome == Outcome::scored
                           ? (fixed(one.simulated_seconds, "%.3fs") + " (cf " + fixed(one.predicted_seconds, "%.3f") + ")").c_str()
                       : one.outcome == Outcome::infeasible ? "OOM" : "none");
        }
        std::fprintf(stderr, " | plan %.2fs\n", last.ours_plan_seconds);
      }
    }
  }
  const double total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  write_csv(out_dir + "/results.csv", cases);
  std::vector<SpeedupSeries> series;
  for (int method = 0; method < kOurs; ++method) {
    SpeedupSeries one{std::string("over ") + kMethodNames[method], kColours[method], {}};
    for (const CaseResult& result : cases) {
      if (result.scores[method].outcome == Outcome::scored && result.scores[kOurs].outcome == Outcome::scored) {
        one.points.push_back(
            {result.nodes, result.scores[method].simulated_seconds / result.scores[kOurs].simulated_seconds});
      }
    }
    const int infeasible = summarise(cases, method).infeasible;
    if (infeasible > 0) one.label += " (" + std::to_string(infeasible) + " OOM)";
    series.push_back(std::move(one));
  }
  std::ofstream(out_dir + "/speedup_vs_nodes.svg")
      << speedup_svg("Pipette's plan against the alternatives (simulated iteration time)", series, matrix.node_counts);

  const std::string report = markdown(cases, matrix, total_seconds);
  std::cout << report;
  if (!markdown_path.empty()) std::ofstream(markdown_path) << report;
  int ours_slower = 0;
  for (int method = 0; method < kOurs; ++method) ours_slower += summarise(cases, method).ours_slower;
  if (ours_slower > 0) std::cerr << "plan_comparison: ours is slower than an alternative in " << ours_slower << " cases\n";
  return 0;
}

}  // namespace
}  // namespace pipette::bench

int main(int argc, char** argv) { return pipette::bench::run(argc, argv); }
