#include <charconv>

#include "pipette/topology/job_planner.hpp"

namespace pipette {

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

Error knob_error(std::string_view item, const std::string& what) {
  return Error{"--pipette-fix: \"" + quoted_input(item) + "\": " + what};
}

}  // namespace

Result<FixedKnobs> parse_fixed_knobs(std::string_view text) {
  FixedKnobs knobs;
  std::vector<std::string> seen;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const std::string_view item = trim(text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    pos = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) {
      if (trim(text).empty()) break;
      return knob_error(text, "empty item; separate knobs with single commas, e.g. tp=8,pp=4");
    }
    const auto equals = item.find('=');
    if (equals == std::string_view::npos)
      return knob_error(item, "expected key=value; keys are tp, pp, dp, cp, ep, etp, mbs, vpp, recompute, sp, distopt");
    const std::string key(trim(item.substr(0, equals)));
    const std::string_view value = trim(item.substr(equals + 1));
    for (const auto& earlier : seen)
      if (earlier == key) return knob_error(item, quoted_input(key) + " is given twice; keep one");
    seen.push_back(key);

    auto positive = [&](std::optional<int>& slot) -> std::optional<Error> {
      int number = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
      if (ec != std::errc() || end != value.data() + value.size() || number < 1)
        return knob_error(item, key + " needs a positive integer");
      slot = number;
      return std::nullopt;
    };
    auto on_off = [&](std::optional<bool>& slot) -> std::optional<Error> {
      if (value == "on" || value == "true" || value == "1") {
        slot = true;
      } else if (value == "off" || value == "false" || value == "0") {
        slot = false;
      } else {
        return knob_error(item, key + " must be on or off");
      }
      return std::nullopt;
    };

    std::optional<Error> problem;
    if (key == "tp") {
      problem = positive(knobs.tp);
    } else if (key == "pp") {
      problem = positive(knobs.pp);
    } else if (key == "dp") {
      problem = positive(knobs.dp);
    } else if (key == "cp") {
      problem = positive(knobs.cp);
    } else if (key == "ep") {
      problem = positive(knobs.ep);
    } else if (key == "etp") {
      problem = positive(knobs.etp);
    } else if (key == "mbs") {
      problem = positive(knobs.micro_batch);
    } else if (key == "vpp") {
      problem = positive(knobs.virtual_stages);
    } else if (key == "recompute") {
      if (value == "none") {
        knobs.recompute = RecomputeMode::none;
      } else if (value == "selective") {
        knobs.recompute = RecomputeMode::selective;
      } else if (value == "full") {
        knobs.recompute = RecomputeMode::full;
      } else {
        problem = knob_error(item, "recompute must be none, selective or full");
      }
    } else if (key == "sp") {
      problem = on_off(knobs.sequence_parallel);
    } else if (key == "distopt") {
      problem = on_off(knobs.distributed_optimizer);
    } else {
      problem = knob_error(item, "unknown knob \"" + quoted_input(key) + "\"; keys are tp, pp, dp, cp, ep, etp, mbs, vpp, recompute, sp, distopt");
    }
    if (problem) return *problem;
  }
  return knobs;
}

std::string format_fixed_knobs(const FixedKnobs& knobs) {
  std::string out;
  auto add = [&](const char* key, const std::string& value) {
    if (!out.empty()) out += ',';
    out += key;
    out += '=';
    out += value;
  };
  if (knobs.tp) add("tp", std::to_string(*knobs.tp));
  if (knobs.pp) add("pp", std::to_string(*knobs.pp));
  if (knobs.dp) add("dp", std::to_string(*knobs.dp));
  if (knobs.cp) add("cp", std::to_string(*knobs.cp));
  if (knobs.ep) add("ep", std::to_string(*knobs.ep));
  if (knobs.etp) add("etp", std::to_string(*knobs.etp));
  if (knobs.micro_batch) add("mbs", std::to_string(*knobs.micro_batch));
  if (knobs.virtual_stages) add("vpp", std::to_string(*knobs.virtual_stages));
  if (knobs.recompute) add("recompute", to_string(*knobs.recompute));
  if (knobs.sequence_parallel) add("sp", *knobs.sequence_parallel ? "on" : "off");
  if (knobs.distributed_optimizer) add("distopt", *knobs.distributed_optimizer ? "on" : "off");
  return out;
}

}  // namespace pipette
