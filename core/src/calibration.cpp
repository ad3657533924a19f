#include "pipette/core/calibration.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace pipette {

bool Calibration::empty() const {
  return std::all_of(calibration_parameters().begin(), calibration_parameters().end(),
                     [this](const CalibrationParameter& parameter) { return !(this->*parameter.member); });
}

std::span<const CalibrationParameter> calibration_parameters() {
  // Bounds are physical: no kernel beats its roof (so a factor stops where the built-in fraction
  // reaches 1), nor runs below a third of the built-in share on a healthy GPU; launch gaps are at
  // most a few milliseconds; NCCL attains at most its line rate (the assembled links are 80% of it)
  // and loses at most half per node doubling; activations are within a factor of two of the layer
  // formula; PyTorch's caching allocator reserves 0–50% beyond what it hands out.
  static const ComputeEfficiency built_in = fitted_compute_efficiency();
  static const std::array<CalibrationParameter, 10> parameters{{
      {"gemm_16bit_efficiency_factor", "16-bit GEMM speed relative to the built-in share of the peak",
       &Calibration::gemm_16bit_efficiency_factor, 0.33, 1 / built_in.gemm_fraction_16bit, CalibrationTarget::iteration_time},
      {"gemm_fp8_efficiency_factor", "fp8 GEMM speed relative to the built-in share of the peak",
       &Calibration::gemm_fp8_efficiency_factor, 0.33, 1 / built_in.gemm_fraction_fp8, CalibrationTarget::iteration_time},
      {"attention_efficiency_factor", "flash-attention speed relative to the built-in share of the peak",
       &Calibration::attention_efficiency_factor, 0.33, 1 / built_in.attention_fraction, CalibrationTarget::iteration_time},
      {"collective_efficiency", "attained link bandwidth relative to the assembled cluster's",
       &Calibration::collective_efficiency, 0.1, 1.25, CalibrationTarget::iteration_time},
      {"memory_bound_efficiency_factor", "elementwise-kernel speed relative to the built-in share of HBM bandwidth",
       &Calibration::memory_bound_efficiency_factor, 0.33, 1 / built_in.memory_fraction, CalibrationTarget::iteration_time},
      {"layer_overhead_seconds", "launch and synchronisation gap per layer forward (2x backward)",
       &Calibration::layer_overhead_seconds, 0, 2e-3, CalibrationTarget::iteration_time},
      {"pipeline_hop_overhead_seconds", "posting and waiting for p2p per chunk pass",
       &Calibration::pipeline_hop_overhead_seconds, 0, 5e-3, CalibrationTarget::iteration_time},
      {"collective_loss_per_node_doubling", "inter-node bandwidth lost per doubling of the node count",
       &Calibration::collective_loss_per_node_doubling, 0, 0.5, CalibrationTarget::iteration_time},
      {"allocator_reserve_fraction", "caching allocator: reserved / allocated - 1 at peak",
       &Calibration::allocator_reserve_fraction, 0, 0.5, CalibrationTarget::memory},
      {"activation_memory_factor", "measured / modelled activation bytes",
       &Calibration::activation_memory_factor, 0.5, 2.0, CalibrationTarget::memory},
  }};
  return parameters;
}

ComputeEfficiency calibrated(const ComputeEfficiency& base, const Calibration& calibration) {
  ComputeEfficiency efficiency = base;
  efficiency.gemm_fraction_16bit *= calibration.gemm_16bit_efficiency_factor.value_or(1.0);
  efficiency.gemm_fraction_fp8 *= calibration.gemm_fp8_efficiency_factor.value_or(1.0);
  efficiency.attention_fraction *= calibration.attention_efficiency_factor.value_or(1.0);
  efficiency.memory_fraction *= calibration.memory_bound_efficiency_factor.value_or(1.0);
  efficiency.layer_overhead_seconds = calibration.layer_overhead_seconds.value_or(base.layer_overhead_seconds);
  efficiency.chunk_pass_overhead_seconds =
      calibration.pipeline_hop_overhead_seconds.value_or(base.chunk_pass_overhead_seconds);
  return efficiency;
}

RuntimeOverheads calibrated(const RuntimeOverheads& base, const Calibration& calibration) {
  RuntimeOverheads overheads = base;
  overheads.activation_memory_factor = calibration.activation_memory_factor.value_or(base.activation_memory_factor);
  overheads.allocator_fragmentation_fraction =
      calibration.allocator_reserve_fraction.value_or(base.allocator_fragmentation_fraction);
  return overheads;
}

Cluster calibrated(const Cluster& cluster, const Calibration& calibration) {
  const double all_links = calibration.collective_efficiency.value_or(1.0);
  const double doublings = cluster.num_nodes() > 1 ? std::log2(static_cast<double>(cluster.num_nodes())) : 0.0;
  const double inter_node = all_links * std::pow(1 - calibration.collective_loss_per_node_doubling.value_or(0.0), doublings);
  if (all_links == 1.0 && inter_node == 1.0) return cluster;
  Cluster scaled = cluster;
  const auto scale = [](LinkMatrix& links, double factor) {
    for (int from = 0; from < links.size(); ++from)
      for (int to = 0; to < links.size(); ++to) links.at(from, to).bandwidth_bytes_per_second *= factor;
  };
  for (LinkMatrix& node : scaled.intra_node) scale(node, all_links);
  scale(scaled.inter_node, inter_node);
  return scaled;
}

double effective_value(const CalibrationParameter& parameter, const CalibrationBase& base, const Calibration& calibration) {
  if (const auto& value = calibration.*parameter.member) return *value;
  const auto& m = parameter.member;
  if (m == &Calibration::layer_overhead_seconds) return base.efficiency.layer_overhead_seconds;
  if (m == &Calibration::pipeline_hop_overhead_seconds) return base.efficiency.chunk_pass_overhead_seconds;
  if (m == &Calibration::collective_loss_per_node_doubling) return 0.0;
  if (m == &Calibration::activation_memory_factor) return base.overheads.activation_memory_factor;
  if (m == &Calibration::allocator_reserve_fraction) return base.overheads.allocator_fragmentation_fraction;
  return 1.0;  // the efficiency factors
}

RecordPrediction predict_record(const RunRecord& record, const CalibrationBase& base, const Calibration& calibration) {
  RecordPrediction prediction;
  const Cluster cluster = calibrated(record.cluster, calibration);
  const WorkProfile work =
      profile_work(record.model, record.training, cluster.gpu, record.config, calibrated(base.efficiency, calibration));
  const CommunicationTimes communication =
      communication_times(cluster, record.config, work, default_placement(record.config));
  prediction.iteration_seconds = iteration_seconds(record.config, work, communication, record.training);
  const RuntimeOverheads overheads = calibrated(base.overheads, calibration);
  const std::vector<StageMemory> stages = estimate_memory(record.model, record.training, record.config, overheads);
  for (int index = 0; index < static_cast<int>(stages.size()); ++index) {
    const StageMemory& stage = stages[static_cast<std::size_t>(index)];
    const double allocated = stage.allocated_bytes();
    prediction.peak_allocated_bytes = std::max(prediction.peak_allocated_bytes, allocated);
    prediction.peak_reserved_bytes =
        std::max(prediction.peak_reserved_bytes, caching_allocator_bytes(stage, record.config, index, overheads));
    prediction.peak_device_bytes = std::max(prediction.peak_device_bytes, stage.total_bytes());
  }
  return prediction;
}

std::string outside_range(const CalibrationRange& range, const std::string& framework, const ModelSpec& model,
                          const Cluster& cluster) {
  std::string why;
  const auto add = [&why](const std::string& text) { why += (why.empty() ? "" : "; ") + text; };
  if (framework != range.framework) add("framework " + framework + " (calibrated on " + range.framework + ')');
  if (cluster.gpu.name != range.gpu) add("GPU " + cluster.gpu.name + " (calibrated on " + range.gpu + ')');
  const double parameters = static_cast<double>(total_parameters(model));
  // Within 10% of the largest or smallest model seen counts as seen: presets round their sizes.
  if (parameters < range.min_parameters / 1.1 || parameters > range.max_parameters * 1.1) {
    add("model of " + std::to_string(static_cast<long long>(std::llround(parameters / 1e9))) + "B parameters (calibrated on " +
        std::to_string(static_cast<long long>(std::llround(range.min_parameters / 1e9))) + "B–" +
        std::to_string(static_cast<long long>(std::llround(range.max_parameters / 1e9))) + "B)");
  }
  if (cluster.num_nodes() < range.min_nodes || cluster.num_nodes() > range.max_nodes) {
    add(std::to_string(cluster.num_nodes()) + " nodes (calibrated on " + std::to_string(range.min_nodes) + '-' +
        std::to_string(range.max_nodes) + ')');
  }
  return why;
}

double median_absolute_error(const std::vector<RecordResidual>& residuals, CalibrationTarget target,
                             double RecordResidual::*pick) {
  std::vector<double> errors;
  for (const RecordResidual& residual : residuals)
    if (residual.target == target) errors.push_back(std::abs(residual.*pick));
  if (errors.empty()) return 0;
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  return n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
}

namespace {

// One residual of the least squares: a record and what of it is compared.
enum class Observed { iteration_seconds, peak_reserved_bytes, peak_allocated_bytes, peak_device_bytes };
struct Observation {
  const RunRecord* record;
  Observed what;
  double measured;
};

double predicted(const RecordPrediction& prediction, Observed what) {
  switch (what) {
    case Observed::iteration_seconds: return prediction.iteration_seconds;
    case Observed::peak_reserved_bytes: return prediction.peak_reserved_bytes;
    case Observed::peak_allocated_bytes: return prediction.peak_allocated_bytes;
    case Observed::peak_device_bytes: return prediction.peak_device_bytes;
  }
  return 0;
}

// The residual report's name for it.
const char* quantity_of(Observed what) {
  switch (what) {
    case Observed::iteration_seconds: return "iteration time";
    case Observed::peak_reserved_bytes: return "max reserved";
    case Observed::peak_allocated_bytes: return "max allocated";
    case Observed::peak_device_bytes: return "device memory";
  }
  return "";
}

CalibrationTarget target_of(Observed what) {
  return what == Observed::iteration_seconds ? CalibrationTarget::iteration_time : CalibrationTarget::memory;
}

// The fit in coordinates u ∈ [0, 1] per free parameter: value = lower + u · (upper − lower).
class Problem {
 public:
  Problem(const std::vector<Observation>& observations, const std::vector<const CalibrationParameter*>& free,
          const CalibrationBase& base, const Calibration& fixed)
      : observations_(observations), free_(free), base_(base), fixed_(fixed) {}

  Calibration at(const std::vector<double>& u) const {
    Calibration calibration = fixed_;
    for (size_t j = 0; j < free_.size(); ++j)
      calibration.*(free_[j]->member) = free_[j]->lower + u[j] * (free_[j]->upper - free_[j]->lower);
    return calibration;
  }

  // log(predicted / measured) per observation.
  std::vector<double> residuals(const std::vector<double>& u) const {
    const Calibration calibration = at(u);
    std::vector<double> r;
    r.reserve(observations_.size());
    const RunRecord* last = nullptr;
    RecordPrediction prediction;
    for (const Observation& observation : observations_) {
      if (observation.record != last) prediction = predict_record(*observation.record, base_, calibration);
      last = observation.record;
      r.push_back(std::log(std::max(predicted(prediction, observation.what), 1e-30) / observation.measured));
    }
    return r;
  }

  // Forward differences, stepping inward at the upper bound. J[i][j] = ∂r_i/∂u_j.
  std::vector<std::vector<double>> jacobian(const std::vector<double>& u, const std::vector<double>& r) const {
    constexpr double step = 1e-4;
    std::vector<std::vector<double>> j(r.size(), std::vector<double>(u.size()));
    for (size_t k = 0; k < u.size(); ++k) {
      std::vector<double> moved = u;
      const double h = u[k] + step <= 1 ? step : -step;
      moved[k] += h;
      const std::vector<double> r_moved = residuals(moved);
      for (size_t i = 0; i < r.size(); ++i) j[i][k] = (r_moved[i] - r[i]) / h;
    }
    return j;
  }

  size_t size() const { return free_.size(); }

 private:
  const std::vector<Observation>& observations_;
  const std::vector<const CalibrationParameter*>& free_;
  const CalibrationBase& base_;
  const Calibration& fixed_;
};

double sum_of_squares(const std::vector<double>& r) {
  return std::inner_product(r.begin(), r.end(), r.begin(), 0.0);
}

// Solves A x = b (A symmetric positive definite, small) by Gaussian elimination with partial
// pivoting; false when singular.
bool solve(std::vector<std::vector<double>> a, std::vector<double>& b) {
  const size_t n = b.size();
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t row = col + 1; row < n; ++row)
      if (std::abs(a[row][col]) > std::abs(a[pivot][col])) pivot = row;
    if (!(std::abs(a[pivot][col]) > 1e-300)) return false;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (size_t row = col + 1; row < n; ++row) {
      const double f = a[row][col] / a[col][col];
      for (size_t k = col; k < n; ++k) a[row][k] -= f * a[col][k];
      b[row] -= f * b[col];
    }
  }
  for (size_t col = n; col-- > 0;) {
    for (size_t k = col + 1; k < n; ++k) b[col] -= a[col][k] * b[k];
    b[col] /= a[col][col];
  }
  return true;
}

std::vector<std::vector<double>> normal_matrix(const std::vector<std::vector<double>>& j, size_t n) {
  std::vector<std::vector<double>> a(n, std::vector<double>(n, 0.0));
  for (const auto& row : j)
    for (size_t p = 0; p < n; ++p)
      for (size_t q = 0; q < n; ++q) a[p][q] += row[p] * row[q];
  return a;
}

// Projected Levenberg–Marquardt from u0; returns the best u found.
std::vector<double> minimise(const Problem& problem, std::vector<double> u) {
  const size_t n = problem.size();
  if (n == 0) return u;
  std::vector<double> r = problem.residuals(u);
  double cost = sum_of_squares(r);
  double lambda = 1e-3;
  for (int iteration = 0; iteration < 60 && lambda < 1e10; ++iteration) {
    const auto j = problem.jacobian(u, r);
    const auto a = normal_matrix(j, n);
    std::vector<double> gradient(n, 0.0);
    for (size_t i = 0; i < r.size(); ++i)
      for (size_t p = 0; p < n; ++p) gradient[p] -= j[i][p] * r[i];
    bool improved = false;
    while (!improved && lambda < 1e10) {
      auto damped = a;
      for (size_t p = 0; p < n; ++p) damped[p][p] += lambda * std::max(a[p][p], 1e-12);
      std::vector<double> step = gradient;
      if (!solve(damped, step)) {
        lambda *= 4;
        continue;
      }
      std::vector<double> trial = u;
      for (size_t p = 0; p < n; ++p) trial[p] = std::clamp(u[p] + step[p], 0.0, 1.0);
      const std::vector<double> r_trial = problem.residuals(trial);
      const double trial_cost = sum_of_squares(r_trial);
      if (trial_cost < cost) {
        const bool converged = cost - trial_cost < 1e-12 * (1 + cost);
        u = trial, r = r_trial, cost = trial_cost, lambda = std::max(lambda / 3, 1e-9), improved = true;
        if (converged) return u;
      } else {
        lambda *= 4;
      }
    }
  }
  return u;
}

double to_unit(const CalibrationParameter& parameter, double value) {
  return std::clamp((value - parameter.lower) / (parameter.upper - parameter.lower), 0.0, 1.0);
}

std::vector<Observation> observations_of(const std::vector<const RunRecord*>& records) {
  std::vector<Observation> observations;
  for (const RunRecord* record : records) {
    if (record->out_of_memory) continue;
    if (record->iteration_seconds) observations.push_back({record, Observed::iteration_seconds, *record->iteration_seconds});
    if (record->peak_reserved_bytes) observations.push_back({record, Observed::peak_reserved_bytes, *record->peak_reserved_bytes});
    if (record->peak_allocated_bytes)
      observations.push_back({record, Observed::peak_allocated_bytes, *record->peak_allocated_bytes});
    if (record->peak_device_bytes) observations.push_back({record, Observed::peak_device_bytes, *record->peak_device_bytes});
  }
  return observations;
}

// Fits the free parameters of both targets on `observations`, the rest as in `fixed`.
Calibration fit_free(const std::vector<Observation>& observations, const std::vector<const CalibrationParameter*>& free,
                     const CalibrationBase& base) {
  const Calibration none;
  const Problem problem(observations, free, base, none);
  std::vector<double> u;
  for (const CalibrationParameter* parameter : free) u.push_back(to_unit(*parameter, effective_value(*parameter, base, none)));
  return problem.at(minimise(problem, u));
}

bool same_job(const RunRecord& a, const RunRecord& b) {
  const ParallelConfig& x = a.config;
  const ParallelConfig& y = b.config;
  return a.model.name == b.model.name && a.cluster.num_nodes() == b.cluster.num_nodes() &&
         a.training.global_batch_sequences == b.training.global_batch_sequences &&
         a.training.sequence_length == b.training.sequence_length && a.training.precision == b.training.precision &&
         x.tp == y.tp && x.pp == y.pp && x.dp == y.dp && x.cp == y.cp && x.ep == y.ep && x.etp == y.etp &&
         x.layers_per_stage == y.layers_per_stage && x.micro_batch == y.micro_batch &&
         x.virtual_stages == y.virtual_stages && x.recompute == y.recompute &&
         x.recomputed_layers_per_chunk == y.recomputed_layers_per_chunk &&
         x.sequence_parallel == y.sequence_parallel && x.distributed_optimizer == y.distributed_optimizer &&
         x.fully_sharded == y.fully_sharded;
}

// Records of the same job must agree: one OOM and one run is an error (which is true?); times or
// memory 20% apart is a warning (a noisy neighbour, a different software stack?).
std::optional<Error> check_agreement(const std::vector<const RunRecord*>& records, std::vector<std::string>& warnings) {
  for (size_t i = 0; i < records.size(); ++i) {
    for (size_t k = i + 1; k < records.size(); ++k) {
      const RunRecord& a = *records[i];
      const RunRecord& b = *records[k];
      if (!same_job(a, b)) continue;
      if (a.out_of_memory != b.out_of_memory)
        return Error{"calibrate: " + a.name + " and " + b.name + " describe the same job but only " +
                     (a.out_of_memory ? a.name : b.name) + " ran out of memory; drop the wrong one"};
      const auto apart = [](const std::optional<double>& x, const std::optional<double>& y) {
        return x && y && std::abs(std::log(*x / *y)) > std::log(1.2);
      };
      if (apart(a.iteration_seconds, b.iteration_seconds) || apart(a.peak_reserved_bytes, b.peak_reserved_bytes) ||
          apart(a.peak_device_bytes, b.peak_device_bytes))
        warnings.push_back(a.name + " and " + b.name + " describe the same job but measured more than 20% apart");
    }
  }
  return std::nullopt;
}

// One standard error of each free parameter as a share of its bounds: σ² (JᵀJ)⁻¹ in the
// bound-normalised coordinates with σ² = SSR / (observations − parameters), per target.
std::vector<double> uncertainty_shares(const std::vector<Observation>& observations,
                                       const std::vector<const CalibrationParameter*>& free, const CalibrationBase& base,
                                       const Calibration& at) {
  std::vector<double> shares(free.size(), 0.0);
  for (const CalibrationTarget target : {CalibrationTarget::iteration_time, CalibrationTarget::memory}) {
    std::vector<const CalibrationParameter*> own_free;
    std::vector<size_t> index;
    for (size_t p = 0; p < free.size(); ++p)
      if (free[p]->target == target) own_free.push_back(free[p]), index.push_back(p);
    std::vector<Observation> own;
    std::copy_if(observations.begin(), observations.end(), std::back_inserter(own),
                 [target](const Observation& o) { return target_of(o.what) == target; });
    if (own_free.empty()) continue;
    const Problem problem(own, own_free, base, at);
    std::vector<double> u;
    for (const CalibrationParameter* parameter : own_free) u.push_back(to_unit(*parameter, *(at.*parameter->member)));
    const std::vector<double> r = problem.residuals(u);
    const auto a = normal_matrix(problem.jacobian(u, r), own_free.size());
    const double variance = sum_of_squares(r) / static_cast<double>(own.size() - own_free.size());
    for (size_t p = 0; p < own_free.size(); ++p) {
      std::vector<double> unit(own_free.size(), 0.0);
      unit[p] = 1;
      shares[index[p]] = solve(a, unit) ? std::sqrt(std::max(0.0, variance * unit[p])) : 1.0;
    }
  }
  return shares;
}

constexpr double kMaxUncertaintyShare = 0.25;

// Which parameters of one target the observations determine, in the table's order: each must move
// the predictions (≥ 0.2% rms over a tenth of its range) and bring something the kept ones do not
// (≥ 10% of its effect orthogonal to theirs), a target needs two observations per fitted
// parameter, and fitted with the ones kept so far no standard error may span more than a quarter
// of its bounds. Kept parameters are appended to `free`; the others are held at their built-in values, with the reason.
void determined(const std::vector<Observation>& observations, CalibrationTarget target,
                                                    const CalibrationBase& base,
                                                    std::vector<const CalibrationParameter*>& free,
                                                    std::vector<FittedParameter>& report) {
  std::vector<const CalibrationParameter*> candidates;
  for (const CalibrationParameter& parameter : calibration_parameters())
    if (parameter.target == target) candidates.push_back(&parameter);
  std::vector<Observation> own;
  std::copy_if(observations.begin(), observations.end(), std::back_inserter(own),
               [target](const Observation& o) { return target_of(o.what) == target; });
  const Calibration none;
  const Problem problem(own, candidates, base, none);
  std::vector<double> u;
  for (const CalibrationParameter* parameter : candidates) u.push_back(to_unit(*parameter, effective_value(*parameter, base, none)));
  const std::vector<double> r = own.empty() ? std::vector<double>() : problem.residuals(u);
  const auto j = own.empty() ? std::vector<std::vector<double>>() : problem.jacobian(u, r);

  std::vector<const CalibrationParameter*> kept;
  std::vector<std::vector<double>> basis;  // orthonormal columns of the kept parameters
  for (size_t k = 0; k < candidates.size(); ++k) {
    FittedParameter entry;
    entry.name = candidates[k]->name;
    entry.value = effective_value(*candidates[k], base, none);
    std::vector<double> column(own.size());
    for (size_t i = 0; i < own.size(); ++i) column[i] = j[i][k];
    const double norm = std::sqrt(sum_of_squares(column));
    std::vector<double> orthogonal = column;
    size_t closest = 0;
    double closest_overlap = -1;
    for (size_t b = 0; b < basis.size(); ++b) {
      const double overlap = std::inner_product(column.begin(), column.end(), basis[b].begin(), 0.0);
      if (std::abs(overlap) > closest_overlap) closest_overlap = std::abs(overlap), closest = b;
      for (size_t i = 0; i < own.size(); ++i) orthogonal[i] -= overlap * basis[b][i];
    }
    const double orthogonal_norm = std::sqrt(sum_of_squares(orthogonal));
    std::vector<const CalibrationParameter*> tentative = free;
    tentative.push_back(candidates[k]);
    const auto worst_share = [&] {
      const std::vector<double> shares =
          uncertainty_shares(observations, tentative, base, fit_free(observations, tentative, base));
      return *std::max_element(shares.begin(), shares.end());
    };
    double share = 0;
    if (own.empty()) {
      entry.held_because = target == CalibrationTarget::memory ? "no record reports its memory"
                                                               : "no record reports its iteration time";
    } else if (own.size() < 2 * (kept.size() + 1)) {
      entry.held_because = std::to_string(own.size()) + " observation(s) determine at most " +
                           std::to_string(own.size() / 2) + " parameter(s) (two observations each)";
    } else if (0.1 * norm / std::sqrt(static_cast<double>(own.size())) < 0.002) {
      entry.held_because = "the records barely depend on it (a tenth of its range moves them by < 0.2%)";
    } else if (orthogonal_norm < 0.1 * norm) {
      entry.held_because = std::string("indistinguishable from ") + kept[closest]->name + " on these records";
    } else if ((share = worst_share()) > kMaxUncertaintyShare) {
      entry.held_because = "too uncertain on these records with the factors above (one standard error spans " +
                           std::to_string(static_cast<int>(std::lround(100 * std::min(share, 9.99)))) + "% of the bounds)";
    } else {
      for (double& x : orthogonal) x /= orthogonal_norm;
      basis.push_back(orthogonal);
      kept.push_back(candidates[k]);
      free.push_back(candidates[k]);
      entry.fitted = true;
    }
    report.push_back(entry);
  }
}


}  // namespace

Result<CalibrationFit> fit_calibration(const std::vector<RunRecord>& records, const CalibrationBase& base) {
  if (records.empty()) return Error{"calibrate: no run records"};
  CalibrationFit fit;
  CalibrationRange& range = fit.range;
  range.framework = records.front().framework;
  range.gpu = records.front().cluster.gpu.name;
  std::vector<const RunRecord*> usable;
  for (const RunRecord& record : records) {
    if (record.framework != range.framework || record.cluster.gpu.name != range.gpu) {
      return Error{"calibrate: " + record.name + " is " + record.framework + " on " + record.cluster.gpu.name + " but " +
                   records.front().name + " is " + range.framework + " on " + range.gpu +
                   "; calibrate each framework and GPU separately"};
    }
    const bool memory_report = record.peak_reserved_bytes || record.peak_allocated_bytes || record.peak_device_bytes;
    if (record.out_of_memory && !memory_report)
      fit.warnings.push_back(record.name + ": out of memory with no memory report: only checks the OOM prediction");
    if (!record.out_of_memory && !record.iteration_seconds && !memory_report) {
      fit.warnings.push_back(record.name + ": neither an iteration time nor a memory report: not used");
      continue;
    }
    usable.push_back(&record);
    const double parameters = static_cast<double>(total_parameters(record.model));
    const int nodes = record.cluster.num_nodes();
    if (range.records == 0) {
      range.min_parameters = range.max_parameters = parameters;
      range.min_nodes = range.max_nodes = nodes;
    }
    range.min_parameters = std::min(range.min_parameters, parameters);
    range.max_parameters = std::max(range.max_parameters, parameters);
    range.min_nodes = std::min(range.min_nodes, nodes);
    range.max_nodes = std::max(range.max_nodes, nodes);
    ++range.records;
  }

  if (auto problem = check_agreement(usable, fit.warnings)) return *problem;
  const std::vector<Observation> observations = observations_of(usable);
  std::vector<const CalibrationParameter*> free;
  determined(observations, CalibrationTarget::iteration_time, base, free, fit.parameters);
  determined(observations, CalibrationTarget::memory, base, free, fit.parameters);
  if (free.empty()) {
    std::string reasons;
    for (const FittedParameter& parameter : fit.parameters) reasons += "; " + parameter.name + ": " + parameter.held_because;
    return Error{"calibrate: the " + std::to_string(usable.size()) + " usable record(s) determine no factor" + reasons};
  }
  fit.calibration = fit_free(observations, free, base);
  const std::vector<double> shares = uncertainty_shares(observations, free, base, fit.calibration);
  for (size_t p = 0; p < free.size(); ++p) {
    for (FittedParameter& entry : fit.parameters) {
      if (entry.name != free[p]->name) continue;
      entry.value = *(fit.calibration.*free[p]->member);
      entry.uncertainty = shares[p] * (free[p]->upper - free[p]->lower);
    }
  }

  const Calibration none;
  for (size_t i = 0; i < observations.size(); ++i) {
    const Observation& observation = observations[i];
    RecordResidual residual;
    residual.record = observation.record->name;
    residual.target = target_of(observation.what);
    residual.quantity = quantity_of(observation.what);
    residual.measured = observation.measured;
    residual.raw_error = predicted(predict_record(*observation.record, base, none), observation.what) / observation.measured - 1;
    residual.fitted_error =
        predicted(predict_record(*observation.record, base, fit.calibration), observation.what) / observation.measured - 1;
    std::vector<Observation> others;
    for (const Observation& other : observations)
      if (other.record != observation.record) others.push_back(other);
    const Calibration without = fit_free(others, free, base);
    residual.leave_one_out_error =
        predicted(predict_record(*observation.record, base, without), observation.what) / observation.measured - 1;
    fit.residuals.push_back(residual);
  }

  for (const RunRecord* record : usable) {
    const bool has_outcome =
        record->out_of_memory || record->iteration_seconds || record->peak_reserved_bytes || record->peak_device_bytes;
    if (!has_outcome) continue;
    const double capacity = record->cluster.gpu.memory_bytes;
    ++fit.oom_checked;
    fit.oom_right_raw += (predict_record(*record, base, none).peak_device_bytes > capacity) == record->out_of_memory;
    fit.oom_right_fitted += (predict_record(*record, base, fit.calibration).peak_device_bytes > capacity) == record->out_of_memory;
  }
  return fit;
}

}  // namespace pipette
