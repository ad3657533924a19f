#include "spank_options.hpp"

#include <cstdlib>
#include <optional>
#include <vector>

namespace pipette::spank {

namespace {

OptionRecorder recorder;
std::string first_remote_error;

// Submission state (sbatch, salloc, srun): set by prepare_submission before any option callback.
std::string submission_config_error;
bool environment_refused = false;
// What prepare_submission puts in the --pipette option's variable to have Slurm refuse the
// submission; Slurm prints it: "Invalid argument (<marker>) for environment variable: ...".
constexpr std::string_view refusal_marker = "refused, see the pipette error above";

std::optional<std::string> local_getenv(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return std::string(value);
}

// Slurm's name for a forwarded option: the plugin name, then the option with '-' as '_'.
std::string forwarded_variable(const OptionInfo& option) {
  std::string name = std::string("SLURM_SPANK__SLURM_SPANK_OPTION_pipette_") + option.name;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

// At submission, after the option's value was recorded: it must agree with its PIPETTE_*
// variable, and asking for Pipette needs plugstack arguments it understands.
std::string check_submitted_option(OptionId id) {
  std::string error;
  const OptionValues environment = read_environment(local_getenv, error);
  if (!error.empty()) return error;
  OptionValues given;
  given[id] = recorder.values()[id];
  if (std::string conflict = find_conflict(given, environment); !conflict.empty()) return conflict;
  if (id == OptionId::mode && given[id] != "off") return submission_config_error;
  return {};
}

int option_callback(int val, const char* optarg, int remote) noexcept {
  try {
    if (val < 0 || val >= static_cast<int>(option_count)) return remote ? 0 : -1;
    const OptionId id = static_cast<OptionId>(val);
    // prepare_submission already logged why.
    if (!remote && environment_refused && optarg && optarg == refusal_marker) return -1;
    std::optional<std::string_view> value;
    if (optarg) value = optarg;
    std::string error = recorder.record(id, value, std::string("--") + info(id).name);
    if (error.empty() && !remote) error = check_submitted_option(id);
    if (error.empty()) return 0;
    if (remote) {
      if (first_remote_error.empty()) first_remote_error = error;
      return 0;
    }
    slurm_error("pipette: %s", error.c_str());
    return -1;
  } catch (...) {
    return remote ? 0 : -1;
  }
}

std::optional<std::string> remote_getenv(spank_t sp, const char* name) {
  std::vector<char> buffer(4096);
  while (buffer.size() <= (1u << 20)) {
    const spank_err_t rc = spank_getenv(sp, name, buffer.data(), static_cast<int>(buffer.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buffer.data());
    if (rc != ESPANK_NOSPACE) return std::nullopt;
    buffer.resize(buffer.size() * 4);
  }
  return std::nullopt;
}

}  // namespace

std::string register_options(spank_t sp) {
  // SPANK wants mutable C strings; it copies them at registration.
  static std::vector<struct spank_option> options = [] {
    std::vector<struct spank_option> table;
    for (const OptionInfo& option : option_table()) {
      table.push_back({const_cast<char*>(option.name), const_cast<char*>(option.arginfo),
                       const_cast<char*>(option.usage), option.has_arg, static_cast<int>(option.id),
                       option_callback});
    }
    return table;
  }();
  for (struct spank_option& option : options) {
    const spank_err_t rc = spank_option_register(sp, &option);
    if (rc != ESPANK_SUCCESS) {
      return std::string("cannot register --") + option.name + ": " + spank_strerror(rc);
    }
  }
  return {};
}

std::optional<std::string> read_variable(spank_t sp, const char* name) {
  if (spank_remote(sp)) return remote_getenv(sp, name);
  return local_getenv(name);
}

const OptionRecorder& command_line_options() { return recorder; }
const std::string& remote_option_error() { return first_remote_error; }

OptionValues environment_options(spank_t sp, std::string& error) {
  return read_environment([sp](const char* name) { return read_variable(sp, name); }, error);
}

OptionValues forwarded_options(spank_t sp, std::string& error) {
  OptionValues values;
  for (const OptionInfo& option : option_table()) {
    const std::string name = forwarded_variable(option);
    std::optional<std::string> raw = read_variable(sp, name.c_str());
    if (!raw) continue;
    Parsed parsed = parse_option_value(option.id, *raw, std::string("--") + option.name);
    if (!parsed.error.empty()) {
      if (error.empty()) error = parsed.error;
      continue;
    }
    values[option.id] = parsed.canonical;
  }
  return values;
}

void prepare_submission(const std::string& config_error) {
  submission_config_error = config_error;
  std::string error;
  const OptionValues environment = read_environment(local_getenv, error);
  if (error.empty() && environment[OptionId::mode].value_or("off") != "off") error = config_error;
  if (error.empty()) return;
  slurm_error("pipette: %s", error.c_str());
  environment_refused = true;
  const std::string variable = forwarded_variable(info(OptionId::mode));
  if (setenv(variable.c_str(), std::string(refusal_marker).c_str(), 1) != 0) {
    slurm_error("pipette: cannot set %s, so the submission is not refused; the job will run unplanned",
                variable.c_str());
  }
}

}  // namespace pipette::spank
