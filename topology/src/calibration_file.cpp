#include "pipette/topology/calibration_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>

#include "pipette/topology/link_cache.hpp"

#include "atomic_file.hpp"
#include "guarded.hpp"

namespace pipette {

namespace {

constexpr std::string_view kVersionKey = "pipette_calibration";
constexpr std::string_view kUncertaintySuffix = "_uncertainty";

std::string shortest(double value) {
  char buffer[32];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
}

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

const CalibrationParameter* parameter_named(std::string_view name) {
  for (const CalibrationParameter& parameter : calibration_parameters())
    if (name == parameter.name) return &parameter;
  return nullptr;
}

class EntryReader {
 public:
  EntryReader(const std::string& source, const YAML::Node& node) : source_(source), node_(node) {}

  Error error(const std::string& what) const {
    return Error{source_ + ":" + std::to_string(node_.Mark().line + 1) + ": calibration entry: " + what};
  }

  Result<CalibrationEntry> read() const {
    if (!node_.IsMap()) return error("must be a mapping {framework: ..., gpu: ..., ...}");
    CalibrationEntry entry;
    std::set<std::string> seen;
    for (const auto& item : node_) {
      const std::string key = item.first.Scalar();
      if (!seen.insert(key).second) return error("key '" + key + "' appears twice; keep one");
      if (!item.second.IsScalar()) return error("key '" + key + "' must be a single value");
      const std::string& text = item.second.Scalar();
      if (auto problem = field(entry, key, text)) return *problem;
    }
    for (const char* required : {"framework", "gpu", "fitted_at", "records", "min_parameters", "max_parameters", "min_nodes",
                                 "max_nodes"})
      if (!seen.count(required)) return error(std::string("has no '") + required + "'; re-run pipette calibrate");
    const CalibrationRange& range = entry.range;
    if (range.min_parameters > range.max_parameters || range.min_nodes > range.max_nodes)
      return error("its range has a minimum above its maximum; re-run pipette calibrate");
    if (entry.calibration.empty()) return error("holds no factor; re-run pipette calibrate");
    return entry;
  }

 private:
  std::optional<Error> field(CalibrationEntry& entry, const std::string& key, const std::string& text) const {
    CalibrationRange& range = entry.range;
    if (key == "framework" || key == "gpu") {
      constexpr std::string_view allowed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ._+-";
      if (text.empty() || text.size() > 64 || text.find_first_not_of(allowed) != std::string::npos)
        return error("'" + key + "' must be 1-64 letters, digits, spaces or ._+- (got '" + quoted_input(text) + "')");
      (key == "framework" ? range.framework : range.gpu) = text;
      return std::nullopt;
    }
    if (key == "fitted_at") {
      auto when = parse_utc_timestamp(text);
      if (!when) return error("'fitted_at': " + when.error().message);
      entry.fitted_at_unix_seconds = *when;
      return std::nullopt;
    }
    double value = 0;
    const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (code != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
      return error("'" + key + "' must be a number (got '" + quoted_input(text) + "')");
    if (key == "records" || key == "min_nodes" || key == "max_nodes") {
      if (value < 1 || value > 1e6 || value != std::floor(value)) return error("'" + key + "' must be a positive integer");
      (key == "records" ? range.records : key == "min_nodes" ? range.min_nodes : range.max_nodes) = static_cast<int>(value);
      return std::nullopt;
    }
    if (key == "min_parameters" || key == "max_parameters") {
      if (!(value > 0)) return error("'" + key + "' must be positive");
      (key == "min_parameters" ? range.min_parameters : range.max_parameters) = value;
      return std::nullopt;
    }
    if (key.size() > kUncertaintySuffix.size() && key.ends_with(kUncertaintySuffix)) {
      const std::string name = key.substr(0, key.size() - kUncertaintySuffix.size());
      if (!parameter_named(name)) return error("'" + key + "' is the uncertainty of no known factor");
      if (value < 0) return error("'" + key + "' must not be negative");
      entry.uncertainty[name] = value;
      return std::nullopt;
    }
    const CalibrationParameter* parameter = parameter_named(key);
    if (!parameter) {
      std::string known;
      for (const CalibrationParameter& p : calibration_parameters()) known += std::string(known.empty() ? "" : ", ") + p.name;
      return error("'" + key + "' is not a known key; factors are: " + known);
    }
    if (value < parameter->lower || value > parameter->upper)
      return error("'" + key + "' = " + text + " lies outside its physical bounds [" + shortest(parameter->lower) + ", " +
                   shortest(parameter->upper) + "]");
    entry.calibration.*parameter->member = value;
    return std::nullopt;
  }

  const std::string& source_;
  const YAML::Node& node_;
};

bool entry_before(const CalibrationEntry& a, const CalibrationEntry& b) {
  return std::tie(a.range.framework, a.range.gpu) < std::tie(b.range.framework, b.range.gpu);
}

}  // namespace

Result<CalibrationFile> parse_calibration_file(std::string_view text, const std::string& source_name) {
  return guarded("calibration file ", source_name, [&]() -> Result<CalibrationFile> {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& error) {
      return Error{source_name + ":" + std::to_string(error.mark.line + 1) + ": not valid YAML (" + error.msg +
                   "); the file is damaged: move it aside and re-run pipette calibrate"};
    }
    const std::string not_ours = source_name + ": not a Pipette calibration file (no `pipette_calibration: 1` line); "
                                               "point the site file's calibration.file at a file written by pipette calibrate";
    if (!root.IsMap() || !root[std::string(kVersionKey)]) return Error{not_ours};
    CalibrationFile file;
    for (const auto& item : root) {
      const std::string key = item.first.Scalar();
      const std::string line = source_name + ":" + std::to_string(item.first.Mark().line + 1) + ": ";
      if (key == kVersionKey) {
        if (!item.second.IsScalar() || item.second.Scalar() != std::to_string(kCalibrationFormatVersion))
          return Error{line + "calibration format version must be " + std::to_string(kCalibrationFormatVersion) +
                       " (this Pipette reads only that)"};
      } else if (key == "entries") {
        if (item.second.IsNull()) continue;
        if (!item.second.IsSequence()) return Error{line + "'entries' must be a list of {framework: ..., gpu: ..., ...}"};
        for (const auto& node : item.second) {
          auto entry = EntryReader(source_name, node).read();
          if (!entry) return entry.error();
          for (const CalibrationEntry& other : file.entries) {
            if (other.range.framework == entry->range.framework && same_name(other.range.gpu, entry->range.gpu))
              return Error{source_name + ":" + std::to_string(node.Mark().line + 1) + ": a second entry for " +
                           entry->range.framework + " on " + entry->range.gpu + "; keep one"};
          }
          file.entries.push_back(std::move(entry).value());
        }
      } else {
        return Error{line + "key '" + quoted_input(key) + "' is not known; expected pipette_calibration and entries"};
      }
    }
    std::sort(file.entries.begin(), file.entries.end(), entry_before);
    return file;
  });
}

Result<CalibrationFile> read_calibration_file(const std::string& path) {
  return guarded("calibration file ", path, [&]() -> Result<CalibrationFile> {
    auto contents = read_whole_file("calibration file ", path,
                                    "run pipette calibrate to create it or fix calibration.file in the site file");
    if (!contents) return contents.error();
    return parse_calibration_file(*contents, path);
  });
}

std::string format_calibration_file(const CalibrationFile& file) {
  std::string out = "# Pipette calibration: factors fitted on this site's own runs. Format: README.md \"Calibration\".\n"
                    "# Written by `pipette calibrate`; one entry per framework and GPU.\n";
  out += std::string(kVersionKey) + ": " + std::to_string(kCalibrationFormatVersion) + "\nentries:";
  if (file.entries.empty()) out += " []";
  out += '\n';
  for (const CalibrationEntry& entry : file.entries) {
    const CalibrationRange& range = entry.range;
    out += "  - {framework: \"" + range.framework + "\", gpu: \"" + range.gpu +
           "\", fitted_at: " + format_utc_timestamp(entry.fitted_at_unix_seconds) +
           ", records: " + std::to_string(range.records) + ", min_parameters: " + shortest(range.min_parameters) +
           ", max_parameters: " + shortest(range.max_parameters) + ", min_nodes: " + std::to_string(range.min_nodes) +
           ", max_nodes: " + std::to_string(range.max_nodes);
    for (const CalibrationParameter& parameter : calibration_parameters()) {
      const auto& value = entry.calibration.*parameter.member;
      if (!value) continue;
      out += ", " + std::string(parameter.name) + ": " + shortest(*value);
      if (const auto found = entry.uncertainty.find(parameter.name); found != entry.uncertainty.end())
        out += ", " + std::string(parameter.name) + std::string(kUncertaintySuffix) + ": " + shortest(found->second);
    }
    out += "}\n";
  }
  return out;
}

const CalibrationEntry* find_calibration(const CalibrationFile& file, std::string_view framework, std::string_view gpu) {
  for (const CalibrationEntry& entry : file.entries)
    if (entry.range.framework == framework && same_name(entry.range.gpu, gpu)) return &entry;
  return nullptr;
}

Result<CalibrationFile> update_calibration_file(const std::string& path, const CalibrationEntry& incoming) {
  return guarded("calibration file ", path, [&]() -> Result<CalibrationFile> {
    auto lock = lock_beside(path);
    if (!lock) return lock.error();
    CalibrationFile file;
    if (std::filesystem::exists(path)) {
      auto existing = read_calibration_file(path);
      if (!existing)
        return Error{existing.error().message + " — not overwriting it; move the damaged file aside and re-run"};
      file = std::move(existing).value();
    }
    auto same = std::find_if(file.entries.begin(), file.entries.end(), [&](const CalibrationEntry& entry) {
      return entry.range.framework == incoming.range.framework && same_name(entry.range.gpu, incoming.range.gpu);
    });
    if (same == file.entries.end()) {
      file.entries.push_back(incoming);
    } else if (incoming.fitted_at_unix_seconds >= same->fitted_at_unix_seconds) {
      *same = incoming;
    }
    std::sort(file.entries.begin(), file.entries.end(), entry_before);
    const std::string text = format_calibration_file(file);
    // The writer must produce what the reader accepts; refuse to replace a good file with one that is not.
    auto check = parse_calibration_file(text, path);
    if (!check) return Error{"refusing to write " + path + ": the merged file does not validate: " + check.error().message};
    auto written = write_temporary(path, text);
    if (!written) return written.error();
    if (auto problem = rename_over(*written, path)) return *problem;
    return std::move(check).value();
  });
}

CalibrationEntry calibration_entry_of(const CalibrationFit& fit, std::int64_t fitted_at_unix_seconds) {
  CalibrationEntry entry;
  entry.range = fit.range;
  entry.fitted_at_unix_seconds = fitted_at_unix_seconds;
  entry.calibration = fit.calibration;
  for (const FittedParameter& parameter : fit.parameters)
    if (parameter.fitted) entry.uncertainty[parameter.name] = parameter.uncertainty;
  return entry;
}

}  // namespace pipette
