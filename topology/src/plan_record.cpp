#include "pipette/topology/plan_record.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <set>
#include <sstream>

#include "atomic_file.hpp"
#include "guarded.hpp"
#include "pipette/topology/job_planner.hpp"

namespace pipette {

namespace {

// Owned by this user and writable by nobody else: what a state file and its directories must be.
std::optional<Error> private_to_user(const std::string& path, const char* what) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return Error{system_error(std::string("cannot stat ") + what, path)};
  if (status.st_uid != ::getuid())
    return Error{std::string(what) + " " + path + " belongs to uid " + std::to_string(status.st_uid) + ", not to you (uid " +
                 std::to_string(::getuid()) + ")"};
  if (status.st_mode & (S_IWGRP | S_IWOTH))
    return Error{std::string(what) + " " + path + " is writable by other users; chmod go-w it"};
  return std::nullopt;
}

}  // namespace

std::string state_home(const char* xdg_state_home, const char* home) {
  if (xdg_state_home && xdg_state_home[0] == '/') return xdg_state_home;
  if (home && home[0] == '/') return (std::filesystem::path(home) / ".local/state").string();
  return "";
}

std::string plan_record_path(const std::string& state_home, const std::string& cluster, std::uint32_t job_id) {
  return (std::filesystem::path(state_home) / "pipette/jobs" / (cluster + '-' + std::to_string(job_id) + ".plan")).string();
}

Result<std::string> write_plan_record(const std::string& state_home, const std::string& cluster, std::uint32_t job_id,
                                      const std::vector<std::pair<std::string, std::string>>& values) {
  return guarded("plan record for job ", std::to_string(job_id), [&]() -> Result<std::string> {
    if (state_home.empty() || std::filesystem::path(state_home).is_relative())
      return Error{"no absolute state directory ($XDG_STATE_HOME or $HOME) to keep the plan in"};
    if (cluster.empty() || cluster.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                               std::string::npos)
      return Error{"cluster name '" + quoted_input(cluster) + "' is not [A-Za-z0-9_-]"};
    std::error_code ignored;
    std::filesystem::create_directories(state_home, ignored);
    std::filesystem::path directory = state_home;
    for (const char* part : {"pipette", "jobs"}) {
      directory /= part;
      if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST)
        return Error{system_error("cannot create", directory.string())};
    }
    if (auto problem = private_to_user(directory.string(), "plan directory")) return *problem;
    const std::string path = plan_record_path(state_home, cluster, job_id);
    std::string text = "pipette_plan_record=" + std::to_string(kPlanRecordFormatVersion) + "\njob_id=" + std::to_string(job_id) + "\n";
    for (const auto& [key, value] : values) {
      if (value.find('\n') != std::string::npos) return Error{"plan value " + key + " holds a newline"};
      text += key + "=" + value + "\n";
    }
    auto written = write_temporary(path, text, 0600);
    if (!written) return written.error();
    if (auto problem = rename_over(*written, path)) return *problem;
    return path;
  });
}

Result<RunDescription> parse_plan_record(std::string_view text, const std::string& source_name) {
  RunDescription run;
  run.name = source_name;
  std::set<std::string> seen;
  int number = 0;
  std::optional<Error> problem;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.empty()) continue;
    const std::string where = source_name + ":" + std::to_string(number) + ": ";
    const size_t equals = line.find('=');
    if (equals == std::string::npos) return Error{where + "expected key=value"};
    const std::string key = line.substr(0, equals), value = line.substr(equals + 1);
    if (!seen.insert(key).second) return Error{where + key + " appears twice"};
    const auto integer = [&](std::optional<int>& out) {
      int parsed = 0;
      const auto [end, code] = std::from_chars(value.data(), value.data() + value.size(), parsed);
      if (code != std::errc() || end != value.data() + value.size() || parsed < 1)
        problem = Error{where + key + " must be a positive integer (got '" + quoted_input(value) + "')"};
      else out = parsed;
    };
    std::optional<int> ignored, global_batch;
    if (key == "pipette_plan_record") {
      if (value != "1" && value != std::to_string(kPlanRecordFormatVersion))
        return Error{where + "plan record format " + quoted_input(value) + "; this Pipette reads 1 to " +
                     std::to_string(kPlanRecordFormatVersion)};
    } else if (key == "job_id") integer(ignored);
    else if (key == "model") run.model = value;
    else if (key == "framework") run.framework = value;
    else if (key == "engine") run.engine = value;
    else if (key == "gpu") run.gpu = value;
    else if (key == "nodes") integer(run.nodes);
    else if (key == "node_list") {
      for (size_t start = 0; start <= value.size();) {
        const size_t comma = std::min(value.find(',', start), value.size());
        if (comma > start) run.node_names.push_back(value.substr(start, comma - start));
        start = comma + 1;
      }
    }
    else if (key == "gpus_per_node") integer(run.gpus_per_node);
    else if (key == "global_batch") { integer(global_batch); if (global_batch) run.global_batch = *global_batch; }
    else if (key == "sequence_length") integer(run.sequence_length);
    else if (key == "tp") integer(run.tp);
    else if (key == "pp") integer(run.pp);
    else if (key == "dp") integer(run.dp);
    else if (key == "cp") integer(run.cp);
    else if (key == "ep") integer(run.ep);
    else if (key == "etp") integer(run.etp);
    else if (key == "layers_per_stage") {
      // Stages without a layer (pp > layers) hold 0.
      auto split = parse_layer_split(value);
      if (!split) problem = Error{where + "layers_per_stage must be comma-separated layer counts (got '" + quoted_input(value) + "')"};
      else run.layers_per_stage = std::move(split).value();
    }
    else if (key == "vpp") integer(run.vpp);
    else if (key == "mbs") integer(run.micro_batch);
    else if (key == "recompute") {
      const auto recompute = parse_recompute_knob(value);
      if (!recompute) return Error{where + recompute.error().message};
      run.recompute = recompute->mode;
      run.recomputed_layers_per_chunk = recompute->recomputed_layers_per_chunk;
    } else if (key == "sp" || key == "distopt" || key == "fsdp") {
      if (value != "0" && value != "1") return Error{where + key + " must be 0 or 1"};
      (key == "sp" ? run.sequence_parallel : key == "distopt" ? run.distributed_optimizer : run.fully_sharded) = value == "1";
    } else {
      return Error{where + "unknown key " + quoted_input(key)};
    }
    if (problem) return *problem;
  }
  if (!seen.count("pipette_plan_record")) return Error{source_name + ": not a Pipette plan record (no pipette_plan_record line)"};
  return run;
}

Result<RunDescription> read_plan_record(const std::string& path) {
  return guarded("plan record ", path, [&]() -> Result<RunDescription> {
    if (auto problem = private_to_user(std::filesystem::path(path).parent_path().string(), "plan directory")) return *problem;
    if (auto problem = private_to_user(path, "plan record")) return *problem;
    auto contents = read_whole_file("plan record ", path);
    if (!contents) return contents.error();
    return parse_plan_record(*contents, path);
  });
}

}  // namespace pipette
