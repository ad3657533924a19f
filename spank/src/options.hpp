#pragma once
// The plugin's user-facing options, independent of Slurm: each option's command-line name and
// environment variable, value parsing, the record of values an option callback received, and the
// merge of command line, environment and site defaults.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pipette::spank {

enum class Mode { off, plan, auto_remap };  // auto_remap is `--pipette=auto`
const char* to_string(Mode mode);

enum class OptionId { mode, model, global_batch, sequence_length, fix, strict, framework, engine, precision, count };
inline constexpr std::size_t option_count = static_cast<std::size_t>(OptionId::count);

struct OptionInfo {
  OptionId id;
  const char* name;      // command-line name without the leading "--"
  const char* env_var;   // the environment variable that sets the same value
  const char* arginfo;   // nullptr when the option takes no argument
  const char* usage;
  int has_arg;           // 0 none, 1 required, 2 optional (SPANK's convention)
};
const std::array<OptionInfo, option_count>& option_table();
const OptionInfo& info(OptionId id);

// Parses a value of one option (the text after "=" or of the environment variable) into its
// canonical form, or returns a one-line error naming the option. `source` names where the value
// came from ("--pipette-batch", "PIPETTE_BATCH", "site file") for the message.
struct Parsed {
  std::string canonical;  // e.g. "auto" for `--pipette`, "512" for " 512"
  std::string error;      // empty when the value is valid
};
Parsed parse_option_value(OptionId id, std::optional<std::string_view> value, std::string_view source);

// Values in canonical form, one optional per option.
struct OptionValues {
  std::array<std::optional<std::string>, option_count> values;
  const std::optional<std::string>& operator[](OptionId id) const { return values[static_cast<std::size_t>(id)]; }
  std::optional<std::string>& operator[](OptionId id) { return values[static_cast<std::size_t>(id)]; }
};

// What the option callbacks received. Slurm may call a callback twice in one process with the
// same value; the same value again is fine, a different one is a conflict.
class OptionRecorder {
 public:
  // Returns an empty string on success, else the error (invalid value or a conflicting repeat).
  std::string record(OptionId id, std::optional<std::string_view> value, std::string_view source);
  const OptionValues& values() const { return values_; }
  void clear() { values_ = {}; }

 private:
  OptionValues values_;
};

// Settings after merging: command line over environment over site defaults.
struct Settings {
  Mode mode = Mode::off;
  std::string model;                        // preset name or file path; empty: the site's default
  std::optional<std::int64_t> global_batch; // sequences
  std::optional<int> sequence_length;
  std::string fix;                          // "tp=8,mbs=1"; empty: nothing fixed
  bool strict = false;
  std::string framework;                    // a framework_spellings() name; empty: the site's `framework`
  std::string engine;                       // "dp-overlap=off,..." (parse_engine_overrides); empty: the site's
  std::string precision;                    // fp32|fp16|bf16|fp8; empty: the engine's, the site's, bf16
};

// What the site file decides when neither the command line nor the environment does. The
// model, batch, sequence length and fixed knobs default inside the planner, which reads the
// site file's `defaults:` itself.
struct SiteDefaults {
  std::optional<std::string> mode;  // canonical: auto, plan or off
  std::optional<bool> strict;       // failure_policy: fail
};

// Reads environment values for every option through `getenv_fn` (std::getenv locally,
// spank_getenv remotely) and parses them. Invalid ones are reported in `error` (first only).
template <typename GetEnv>
OptionValues read_environment(GetEnv&& getenv_fn, std::string& error) {
  OptionValues env;
  for (const OptionInfo& option : option_table()) {
    std::optional<std::string> raw = getenv_fn(option.env_var);
    if (!raw || raw->empty()) continue;  // an empty variable counts as unset
    Parsed parsed = parse_option_value(option.id, *raw, option.env_var);
    if (!parsed.error.empty()) {
      if (error.empty()) error = parsed.error;
      continue;
    }
    env[option.id] = parsed.canonical;
  }
  return env;
}

// One-line description of the first option set on both the command line and in the environment
// with different values, or an empty string. Used at submission, where an ambiguous request is
// rejected; remotely the command line wins.
std::string find_conflict(const OptionValues& command_line, const OptionValues& environment);

Settings merge(const OptionValues& command_line, const OptionValues& environment, const SiteDefaults& site);

}  // namespace pipette::spank
