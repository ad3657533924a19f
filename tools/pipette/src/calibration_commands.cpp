#include "calibration_commands.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <sstream>

#include "pipette/core/units.hpp"
#include "pipette/topology/calibration_file.hpp"
#include "pipette/topology/job_planner.hpp"
#include "pipette/topology/plan_record.hpp"
#include "pipette/topology/run_records.hpp"
#include "planning.hpp"
#include "text_table.hpp"

namespace pipette::cli {

namespace {

constexpr const char* kPrefix = "pipette calibrate: ";

int fail(const std::string& message) {
  std::fprintf(stderr, "%s%s\n", kPrefix, message.c_str());
  return 1;
}

void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

std::string signed_percent(double fraction) { return strprintf("%+.1f%%", 100 * fraction); }

std::string measured_text(const RecordResidual& residual) {
  return residual.target == CalibrationTarget::iteration_time ? human_seconds(residual.measured)
                                                              : human_gibibytes(residual.measured);
}

std::string value_text(const std::string& name, double value) {
  return name.ends_with("_seconds") ? human_seconds(value) : strprintf("%.4g", value);
}

// What the command line says about the records (each may be absent).
Result<RunDescription> flags_of(const Arguments& arguments) {
  RunDescription flags;
  flags.name = "the command line";
  flags.model = arguments.value("model").value_or("");
  flags.gpu = arguments.value("gpu").value_or("");
  flags.framework = arguments.value("framework").value_or("");
  flags.engine = arguments.value("engine").value_or("");
  if (auto engine = parse_engine_overrides(flags.engine); !engine) return engine.error();
  const auto integer = [&](const char* name, std::optional<int>& out) -> std::optional<Error> {
    auto value = arguments.positive_integer(name);
    if (!value) return value.error();
    out = *value;
    return std::nullopt;
  };
  std::optional<int> global_batch;
  for (const auto& [name, out] : std::initializer_list<std::pair<const char*, std::optional<int>*>>{
           {"num-nodes", &flags.nodes}, {"gpus-per-node", &flags.gpus_per_node}, {"seq", &flags.sequence_length},
           {"global-batch", &global_batch}}) {
    if (auto problem = integer(name, *out)) return *problem;
  }
  if (global_batch) flags.global_batch = *global_batch;
  if (const auto layout = arguments.value("layout")) {
    auto knobs = parse_fixed_knobs(*layout);
    if (!knobs) return Error{"--layout: " + knobs.error().message};
    flags.tp = knobs->tp;
    flags.pp = knobs->pp;
    flags.dp = knobs->dp;
    flags.cp = knobs->cp;
    flags.ep = knobs->ep;
    flags.etp = knobs->etp;
    flags.vpp = knobs->virtual_stages;
    flags.micro_batch = knobs->micro_batch;
    flags.recompute = knobs->recompute;
    flags.recomputed_layers_per_chunk = knobs->recomputed_layers_per_chunk.value_or(0);
    flags.sequence_parallel = knobs->sequence_parallel;
    flags.distributed_optimizer = knobs->distributed_optimizer;
  }
  return flags;
}

std::string command_output(const std::string& command) {
  std::string text;
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return text;
  char buffer[4096];
  while (const size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, n);
  ::pclose(pipe);
  return text;
}

// `scontrol show job -o JOBID`'s KEY=VALUE words (a value runs to the next space).
std::map<std::string, std::string> scontrol_fields(const std::string& job) {
  std::map<std::string, std::string> fields;
  const std::string text = command_output("scontrol show job -o " + job);
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find_first_of(" \n", start), text.size());
    const std::string word = text.substr(start, end - start);
    if (const size_t equals = word.find('='); equals != std::string::npos) fields[word.substr(0, equals)] = word.substr(equals + 1);
    start = end + 1;
  }
  return fields;
}

// "ClusterName = NAME" of `scontrol show config`, which keys the plan records.
std::string cluster_name() {
  std::istringstream lines(command_output("scontrol show config"));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ClusterName", 0) != 0) continue;
    const size_t equals = line.find('=');
    if (equals == std::string::npos) break;
    const size_t begin = line.find_first_not_of(' ', equals + 1);
    return begin == std::string::npos ? "" : line.substr(begin, line.find_last_not_of(" \r") + 1 - begin);
  }
  return "";
}

// The job's output file and the plan Pipette gave it, both the calling user's own.
Result<std::pair<std::string, RunDescription>> slurm_job(const std::string& job) {
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
    return Error{"--slurm-job '" + quoted_input(job) + "': give a numeric job id"};
  const auto fields = scontrol_fields(job);
  const auto stdout_path = fields.find("StdOut");
  if (stdout_path == fields.end() || stdout_path->second.empty())
    return Error{"--slurm-job " + job + ": scontrol show job does not know it (finished too long ago?); pass the job's output "
                 "file and --layout instead"};
  const auto user = fields.find("UserId");
  const std::string own_uid = "(" + std::to_string(::getuid()) + ")";
  if (user == fields.end() || user->second.find(own_uid) == std::string::npos)
    return Error{"--slurm-job " + job + " belongs to " + (user == fields.end() ? "an unknown user" : user->second) +
                 "; only the job's own user can calibrate from its plan"};
  const passwd* account = ::getpwuid(::getuid());
  const std::string state = state_home(std::getenv("XDG_STATE_HOME"), account ? account->pw_dir : nullptr);
  if (state.empty()) return Error{"no state directory ($XDG_STATE_HOME or your home), where the plan of job " + job + " is kept"};
  auto plan = read_plan_record(plan_record_path(state, cluster_name(), static_cast<std::uint32_t>(std::stoul(job))));
  if (!plan) return Error{"--slurm-job " + job + ": " + plan.error().message + " (was the job planned by Pipette?)"};
  return std::make_pair(stdout_path->second, std::move(plan).value());
}

}  // namespace

std::string fit_report(const CalibrationFit& fit) {
  const CalibrationRange& range = fit.range;
  std::string out = "calibration of " + range.framework + " on " + range.gpu + " from " + std::to_string(range.records) +
                    " record(s): " + strprintf("%.3g", range.min_parameters / 1e9) + "B–" +
                    strprintf("%.3g", range.max_parameters / 1e9) + "B parameters, " + std::to_string(range.min_nodes) +
                    "–" + std::to_string(range.max_nodes) + " nodes\n";
  for (const std::string& warning : fit.warnings) out += "  warning: " + warning + "\n";
  TextTable factors({{"factor", TextTable::Align::left}, {"value"}, {"± 1σ"}, {"", TextTable::Align::left}});
  for (const FittedParameter& parameter : fit.parameters) {
    factors.add_row({parameter.name, value_text(parameter.name, parameter.value),
                     parameter.fitted ? value_text(parameter.name, parameter.uncertainty) : "",
                     parameter.fitted ? "fitted" : "held at the built-in value: " + parameter.held_because});
  }
  out += factors.render("  ") + "\n";
  TextTable residuals({{"record", TextTable::Align::left}, {"what", TextTable::Align::left}, {"measured"}, {"built-in"},
                       {"calibrated"}, {"leave-one-out"}});
  for (const RecordResidual& residual : fit.residuals) {
    residuals.add_row({residual.record, residual.quantity,
                       measured_text(residual), signed_percent(residual.raw_error), signed_percent(residual.fitted_error),
                       signed_percent(residual.leave_one_out_error)});
  }
  out += residuals.render("  ");
  for (const CalibrationTarget target : {CalibrationTarget::iteration_time, CalibrationTarget::memory}) {
    const double raw = median_absolute_error(fit.residuals, target, &RecordResidual::raw_error);
    if (raw == 0) continue;
    out += strprintf("  median |error| of %s: built-in %.1f%%, calibrated %.1f%%, leave-one-out %.1f%%\n",
                     target == CalibrationTarget::iteration_time ? "iteration time" : "peak memory", 100 * raw,
                     100 * median_absolute_error(fit.residuals, target, &RecordResidual::fitted_error),
                     100 * median_absolute_error(fit.residuals, target, &RecordResidual::leave_one_out_error));
  }
  if (fit.oom_checked > 0)
    out += strprintf("  fits / out of memory predicted right: built-in %d of %d, calibrated %d of %d\n", fit.oom_right_raw,
                     fit.oom_checked, fit.oom_right_fitted, fit.oom_checked);
  return out;
}

int calibrate_command(const Arguments& arguments) {
  auto selection = select_site(arguments, "calibrate");
  if (!selection) return std::fprintf(stderr, "%s\n", selection.error().message.c_str()), 1;
  auto flags = flags_of(arguments);
  if (!flags) return fail(flags.error().message);

  // Each file's descriptions, completed by the job's plan (with --slurm-job) and the flags.
  std::vector<std::string> files = arguments.operands();
  std::optional<RunDescription> plan;
  if (const auto job = arguments.value("slurm-job")) {
    auto found = slurm_job(*job);
    if (!found) return fail(found.error().message);
    files.push_back(found->first);
    plan = std::move(found->second);
  }
  if (files.empty()) return fail("no run records: give log or CSV files, or --slurm-job JOBID (see pipette calibrate --help)");
  std::vector<RunRecord> records;
  for (const std::string& file : files) {
    auto runs = read_run_records(file);
    if (!runs) return fail(runs.error().message);
    for (RunDescription& run : *runs) {
      for (const std::string& warning : run.warnings) std::fprintf(stderr, "%swarning: %s\n", kPrefix, warning.c_str());
      Result<RunDescription> completed = plan ? complete_run(std::move(run), *plan) : Result<RunDescription>(std::move(run));
      // A table's rows are complete; the flags describe the logs.
      if (completed && !file.ends_with(".csv")) completed = complete_run(std::move(completed).value(), *flags);
      if (!completed) return fail(completed.error().message);
      auto record = resolve_run(*completed, selection->site, {});
      if (!record) return fail(record.error().message);
      records.push_back(std::move(record).value());
    }
  }

  // One fit per framework and GPU; nothing is written unless every fit succeeds.
  std::map<std::pair<std::string, std::string>, std::vector<RunRecord>> groups;
  for (RunRecord& record : records) groups[{record.framework, record.cluster.gpu.name}].push_back(std::move(record));
  CalibrationBase base;
  base.overheads = selection->site.search.overheads;
  std::vector<CalibrationEntry> entries;
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  for (const auto& [key, group] : groups) {
    auto fit = fit_calibration(group, base);
    if (!fit) return std::fprintf(stderr, "pipette %s — nothing written\n", fit.error().message.c_str()), 1;
    print(fit_report(*fit) + "\n");
    entries.push_back(calibration_entry_of(*fit, now));
  }
  if (arguments.flag("dry-run")) return print("--dry-run: no calibration file written\n"), 0;
  const std::string output = arguments.value("output").value_or(selection->site.calibration_file);
  if (output.empty()) return fail("the site file names no calibration.file; give --output FILE or --dry-run");
  if (!arguments.value("site") && !arguments.value("output"))
    return fail("give --site or --output: the bundled example's calibration is never written");
  for (const CalibrationEntry& entry : entries) {
    auto written = update_calibration_file(output, entry);
    if (!written) return fail(written.error().message);
    print("wrote " + entry.range.framework + " on " + entry.range.gpu + " into " + output + "\n");
  }
  return 0;
}

std::string calibration_report(const PlanningOutcome& outcome) {
  if (!outcome.calibration) return "calibration: none applies (built-in constants; see pipette calibrate)\n";
  const CalibrationEntry& entry = *outcome.calibration;
  const Plan& calibrated_plan = outcome.plans.front();
  std::string out = "calibration: " + entry.range.framework + " on " + entry.range.gpu + ", " +
                    std::to_string(entry.range.records) + " record(s), fitted " +
                    format_utc_timestamp(entry.fitted_at_unix_seconds) + "\n";
  if (!outcome.uncalibrated_best) return out + "  under the built-in constants this configuration does not fit\n";
  const Plan& raw = *outcome.uncalibrated_best;
  TextTable table({{"prediction", TextTable::Align::left}, {"built-in"}, {"calibrated"}, {"change"}});
  const auto row = [&](const char* what, double before, double after, const std::string& a, const std::string& b) {
    table.add_row({what, a, b, signed_percent(after / before - 1)});
  };
  row("iteration time", raw.time.iteration_seconds, calibrated_plan.time.iteration_seconds,
      human_seconds(raw.time.iteration_seconds), human_seconds(calibrated_plan.time.iteration_seconds));
  row("tokens/s", raw.tokens_per_second, calibrated_plan.tokens_per_second, strprintf("%.0f", raw.tokens_per_second),
      strprintf("%.0f", calibrated_plan.tokens_per_second));
  row("peak memory per GPU", raw.peak_memory_bytes, calibrated_plan.peak_memory_bytes, human_gibibytes(raw.peak_memory_bytes),
      human_gibibytes(calibrated_plan.peak_memory_bytes));
  out += table.render("  ");
  const std::string outside = outside_range(entry.range, entry.range.framework, outcome.model, outcome.cluster);
  out += outside.empty() ? "  inside the calibrated range\n"
                         : "  outside the calibrated range (extrapolated): " + outside + "\n";
  return out;
}

}  // namespace pipette::cli
