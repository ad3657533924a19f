#include "pipette/topology/link_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <optional>

#include "atomic_file.hpp"
#include "link_index.hpp"
#include "pipette/core/units.hpp"

#include "guarded.hpp"

namespace pipette {

namespace {

constexpr std::string_view kVersionKey = "pipette_link_cache";

// ---------------------------------------------------------------- time

// Days since 1970-01-01 of a proleptic Gregorian date (the era-based civil calendar algorithm).
std::int64_t days_from_civil(std::int64_t year, unsigned month, unsigned day) {
  year -= month <= 2;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const auto year_of_era = static_cast<unsigned>(year - era * 400);
  const unsigned day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + static_cast<std::int64_t>(day_of_era) - 719468;
}

void civil_from_days(std::int64_t days, std::int64_t& year, unsigned& month, unsigned& day) {
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const auto day_of_era = static_cast<unsigned>(days - era * 146097);
  const unsigned year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const unsigned day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const unsigned month_index = (5 * day_of_year + 2) / 153;
  day = day_of_year - (153 * month_index + 2) / 5 + 1;
  month = month_index < 10 ? month_index + 3 : month_index - 9;
  year = static_cast<std::int64_t>(year_of_era) + era * 400 + (month <= 2);
}

// Shortest text that reads back as the same double ("45.25", "nan", "-inf").
std::string shortest(double value) {
  char buffer[32];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
}

// ---------------------------------------------------------------- reading

// A cursor over one line's flow value. Errors carry the column-free message; the caller adds
// file, line and entry.
class FlowCursor {
 public:
  explicit FlowCursor(std::string_view text) : text_(text) {}

  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool at_end() {
    skip_spaces();
    return pos_ == text_.size() || text_[pos_] == '#';
  }
  bool consume(char c) {
    skip_spaces();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  // A plain or double-quoted scalar (no escapes), ending before , ] } or, for keys, ':'.
  std::optional<std::string_view> scalar(bool is_key) {
    skip_spaces();
    if (pos_ < text_.size() && text_[pos_] == '"') {
      const auto close = text_.find('"', pos_ + 1);
      if (close == std::string_view::npos || text_.substr(pos_ + 1, close - pos_ - 1).find('\\') != std::string_view::npos)
        return std::nullopt;
      const auto value = text_.substr(pos_ + 1, close - pos_ - 1);
      pos_ = close + 1;
      return value;
    }
    const std::size_t start = pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ',' || c == ']' || c == '}' || c == '[' || c == '{') break;
      if (is_key && c == ':') break;
      ++pos_;
    }
    std::size_t end = pos_;
    while (end > start && (text_[end - 1] == ' ' || text_[end - 1] == '\t')) --end;
    if (end == start) return std::nullopt;
    return text_.substr(start, end - start);
  }
  std::optional<double> number() {
    const auto token = scalar(false);
    if (!token) return std::nullopt;
    double value = 0;
    const auto [ptr, ec] = std::from_chars(token->data(), token->data() + token->size(), value);
    if (ec != std::errc() || ptr != token->data() + token->size()) {
      // YAML spells the specials .nan/.inf; report them as the non-finite values they are.
      if (*token == ".nan" || *token == ".NaN" || *token == ".NAN") return std::nan("");
      if (*token == ".inf" || *token == ".Inf" || *token == "+.inf") return HUGE_VAL;
      if (*token == "-.inf" || *token == "-.Inf") return -HUGE_VAL;
      return std::nullopt;
    }
    return value;
  }
  bool number_list(std::vector<double>& out) {
    out.clear();
    if (!consume('[')) return false;
    if (consume(']')) return true;
    do {
      const auto value = number();
      if (!value) return false;
      out.push_back(*value);
    } while (consume(','));
    return consume(']');
  }
  // [[...], [...]] square; returns the side length through `side`.
  bool matrix(std::vector<double>& out, int& side) {
    out.clear();
    side = 0;
    if (!consume('[')) return false;
    std::vector<double> row;
    int rows = 0;
    do {
      if (!number_list(row)) return false;
      if (rows == 0) side = static_cast<int>(row.size());
      if (static_cast<int>(row.size()) != side) return false;
      out.insert(out.end(), row.begin(), row.end());
      ++rows;
    } while (consume(','));
    return consume(']') && rows == side;
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

struct ParseContext {
  const std::string& source;
  int line = 0;
  std::string entry;  // "node gpu001" / "pair gpu001 gpu002"

  Error error(const std::string& what) const {
    return Error{source + ":" + std::to_string(line) + ": " + (entry.empty() ? "" : entry + ": ") + what};
  }
};

// Plausibility limits in the file's units (GB/s, µs, bytes): far beyond any real link and far
// inside double's range, so that converting to SI units and back neither overflows nor
// underflows, and what the writer writes back the reader accepts again.
constexpr double kMaxQuantity = 1e15;
constexpr double kMinPositiveQuantity = 1e-9;

std::optional<Error> check_positive(const ParseContext& context, std::string_view field, double value) {
  if (!std::isfinite(value) || value < kMinPositiveQuantity || value > kMaxQuantity)
    return context.error(std::string(field) + " is " + shortest(value) +
                         "; it must be a finite number > 0, from 1e-9 to 1e15 (re-measure with pipette-probe or delete "
                         "the entry)");
  return std::nullopt;
}
std::optional<Error> check_non_negative(const ParseContext& context, std::string_view field, double value) {
  if (!std::isfinite(value) || value < 0 || value > kMaxQuantity)
    return context.error(std::string(field) + " is " + shortest(value) +
                         "; it must be a finite number >= 0, at most 1e15 (re-measure with pipette-probe or delete the "
                         "entry)");
  return std::nullopt;
}

// The writer must be able to write back whatever the reader accepts (update_link_cache re-reads
// what it writes): names are written bare as keys, other text in quotes without escapes, and the
// quoted form refuses a backslash rather than guess at an escape. So a node name is a
// hostname-like word, and no text holds a quote, a backslash or a control character.
std::optional<Error> check_text(const ParseContext& context, std::string_view field, std::string_view text, bool is_name) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == '"' || c == '\\' || (is_name && std::string_view(" ,:[]{}#").find(c) != std::string_view::npos))
      return context.error(std::string(field) + " may not contain " +
                           (byte < 0x20 || byte == 0x7f ? std::string("control characters") : "'" + std::string(1, c) + "'") +
                           (is_name ? "; node names are hostnames as Slurm lists them" : ""));
  }
  return std::nullopt;
}

// Text the writer quotes so that the reader's plain-scalar rules cannot split or trim it.
bool needs_quotes(std::string_view text) {
  return text.empty() || text.front() == ' ' || text.back() == ' ' || text.find_first_of(",:[]{}#") != std::string_view::npos;
}

// Parses "{key: value, ...}" calling handle(key, cursor) for each key; handle returns an error
// message (empty when fine).
template <typename Handler>
std::optional<Error> parse_flow_mapping(FlowCursor& cursor, const ParseContext& context, Handler&& handle) {
  if (!cursor.consume('{')) return context.error("expected a flow mapping {key: value, ...} after the entry name");
  if (cursor.consume('}')) return std::nullopt;
  do {
    const auto key = cursor.scalar(true);
    if (!key || !cursor.consume(':')) return context.error("expected `field: value` inside {...}");
    if (auto problem = handle(*key, cursor)) return problem;
  } while (cursor.consume(','));
  if (!cursor.consume('}')) return context.error("expected ',' or '}' in the entry's {...}");
  if (!cursor.at_end()) return context.error("unexpected text after the entry's closing '}'");
  return std::nullopt;
}

// measured_at and nccl_version, shared by node and pair entries. Returns nullopt when `key` is
// neither; otherwise the (possibly empty) outcome of parsing it.
std::optional<std::optional<Error>> parse_provenance_field(std::string_view key, FlowCursor& cursor,
                                                           const ParseContext& context, std::int64_t& measured_at,
                                                           std::string& nccl_version, bool& has_time) {
  if (key == "measured_at") {
    const auto text = cursor.scalar(false);
    auto time = text ? parse_utc_timestamp(*text) : Result<std::int64_t>(Error{"missing value"});
    if (!time) return std::optional<Error>(context.error("measured_at: " + time.error().message));
    measured_at = *time;
    has_time = true;
    return std::optional<Error>();
  }
  if (key == "nccl_version") {
    const auto text = cursor.scalar(false);
    if (!text) return std::optional<Error>(context.error("nccl_version needs a value such as 2.21.5"));
    if (auto bad = check_text(context, "nccl_version", *text, false)) return std::optional<Error>(bad);
    nccl_version = std::string(*text);
    return std::optional<Error>();
  }
  return std::nullopt;
}

std::optional<Error> parse_node(std::string_view name, FlowCursor& cursor, const ParseContext& context,
                                NodeMeasurement& node) {
  if (auto bad = check_text(context, "the node name", name, true)) return bad;
  node.name = std::string(name);
  bool has_time = false;
  std::vector<double> bandwidth_gb_per_s;
  std::vector<double> latency_us;
  int bandwidth_side = 0;
  int latency_side = 0;
  bool has_gpus = false;
  auto problem = parse_flow_mapping(cursor, context, [&](std::string_view key, FlowCursor& c) -> std::optional<Error> {
    if (auto handled = parse_provenance_field(key, c, context, node.measured_at_unix_seconds, node.nccl_version, has_time)) {
      return *handled;
    } else if (key == "fingerprint") {
      const auto text = c.scalar(false);
      if (!text) return context.error("fingerprint needs a value");
      if (auto bad = check_text(context, "fingerprint", *text, false)) return bad;
      node.fingerprint = std::string(*text);
    } else if (key == "gpus") {
      const auto value = c.number();
      if (!value || *value < 1 || *value > 1024 || *value != std::floor(*value))
        return context.error("gpus must be an integer from 1 to 1024");
      node.gpus = static_cast<int>(*value);
      has_gpus = true;
    } else if (key == "bandwidth_gb_per_s") {
      if (!c.matrix(bandwidth_gb_per_s, bandwidth_side))
        return context.error("bandwidth_gb_per_s must be a square matrix [[...], ...] of numbers");
    } else if (key == "latency_us") {
      if (!c.matrix(latency_us, latency_side)) return context.error("latency_us must be a square matrix [[...], ...] of numbers");
    } else {
      return context.error("unknown field \"" + std::string(key) +
                           "\"; node fields are measured_at, nccl_version, fingerprint, gpus, bandwidth_gb_per_s, latency_us");
    }
    return std::nullopt;
  });
  if (problem) return problem;
  if (!has_time) return context.error("measured_at is missing; add it (UTC ISO-8601, e.g. 2026-12-01T17:00:00Z)");
  const bool has_matrix = !bandwidth_gb_per_s.empty() || !latency_us.empty();
  if (has_matrix || has_gpus) {
    if (!has_gpus || bandwidth_side != node.gpus || latency_side != node.gpus)
      return context.error("gpus, bandwidth_gb_per_s and latency_us go together: both matrices must be gpus × gpus");
    node.bandwidth_bytes_per_second.resize(bandwidth_gb_per_s.size());
    node.latency_seconds.resize(latency_us.size());
    for (int from = 0; from < node.gpus; ++from) {
      for (int to = 0; to < node.gpus; ++to) {
        const std::size_t k = static_cast<std::size_t>(from) * node.gpus + to;
        const std::string where = "[" + std::to_string(from) + "][" + std::to_string(to) + "]";
        if (from != to) {
          if (auto bad = check_positive(context, "bandwidth_gb_per_s" + where, bandwidth_gb_per_s[k])) return bad;
        }
        if (auto bad = check_non_negative(context, "latency_us" + where, latency_us[k])) return bad;
        node.bandwidth_bytes_per_second[k] = bandwidth_gb_per_s[k] * units::gigabyte;
        node.latency_seconds[k] = latency_us[k] * units::microsecond;
      }
    }
  }
  return std::nullopt;
}

// The version-2 cross-rail fields of a pair entry: where each goes and whether it is a latency.
struct CrossRailField {
  double* target = nullptr;
  bool latency = false;
};
CrossRailField cross_rail_field(std::string_view key, PairMeasurement& pair) {
  if (key == "rail_gb_per_s") return {&pair.rail_bandwidth_bytes_per_second, false};
  if (key == "rail_latency_us") return {&pair.rail_latency_seconds, true};
  if (key == "cross_rail_gb_per_s") return {&pair.cross_rail_bandwidth_bytes_per_second, false};
  if (key == "cross_rail_latency_us") return {&pair.cross_rail_latency_seconds, true};
  return {};
}

std::optional<Error> parse_pair(std::string_view names, FlowCursor& cursor, const ParseContext& context, int version,
                                PairMeasurement& pair) {
  int cross_rail_fields = 0;
  const auto space = names.find_first_of(" \t");
  const auto second = space == std::string_view::npos ? space : names.find_first_not_of(" \t", space);
  if (second == std::string_view::npos || names.substr(second).find_first_of(" \t") != std::string_view::npos)
    return context.error("a pair is named by two node names separated by a space, e.g. `gpu001 gpu002:`");
  pair.node_a = std::string(names.substr(0, space));
  pair.node_b = std::string(names.substr(second));
  if (auto bad = check_text(context, "a node name", pair.node_a, true)) return bad;
  if (auto bad = check_text(context, "a node name", pair.node_b, true)) return bad;
  if (pair.node_a == pair.node_b) return context.error("a pair needs two different nodes");
  if (pair.node_b < pair.node_a) std::swap(pair.node_a, pair.node_b);
  bool has_time = false, has_bandwidth = false, has_latency = false;
  std::vector<double> message_bytes;
  std::vector<double> time_us;
  auto problem = parse_flow_mapping(cursor, context, [&](std::string_view key, FlowCursor& c) -> std::optional<Error> {
    if (auto handled = parse_provenance_field(key, c, context, pair.measured_at_unix_seconds, pair.nccl_version, has_time)) {
      return *handled;
    } else if (key == "bandwidth_gb_per_s") {
      const auto value = c.number();
      if (!value) return context.error("bandwidth_gb_per_s must be a number (GB/s, 1e9 bytes/s)");
      if (auto bad = check_positive(context, "bandwidth_gb_per_s", *value)) return bad;
      pair.bandwidth_bytes_per_second = *value * units::gigabyte;
      has_bandwidth = true;
    } else if (key == "latency_us") {
      const auto value = c.number();
      if (!value) return context.error("latency_us must be a number (microseconds)");
      if (auto bad = check_non_negative(context, "latency_us", *value)) return bad;
      pair.latency_seconds = *value * units::microsecond;
      has_latency = true;
    } else if (const auto cross = cross_rail_field(key, pair); cross.target != nullptr) {
      if (version < 2) return context.error(std::string(key) + " needs `pipette_link_cache: 2` at the top of the file");
      const auto value = c.number();
      if (!value) return context.error(std::string(key) + " must be a number");
      if (auto bad = cross.latency ? check_non_negative(context, std::string(key), *value) : check_positive(context, std::string(key), *value))
        return bad;
      *cross.target = *value * (cross.latency ? units::microsecond : units::gigabyte);
      ++cross_rail_fields;
    } else if (key == "message_bytes") {
      if (!c.number_list(message_bytes)) return context.error("message_bytes must be a list of numbers [1048576, ...]");
    } else if (key == "time_us") {
      if (!c.number_list(time_us)) return context.error("time_us must be a list of numbers [35.5, ...]");
    } else {
      return context.error("unknown field \"" + std::string(key) +
                           "\"; pair fields are measured_at, nccl_version, bandwidth_gb_per_s, latency_us, "
                           "message_bytes, time_us, rail_gb_per_s, rail_latency_us, cross_rail_gb_per_s, cross_rail_latency_us");
    }
    return std::nullopt;
  });
  if (problem) return problem;
  if (!has_time || !has_bandwidth || !has_latency)
    return context.error("measured_at, bandwidth_gb_per_s and latency_us are required in every pair entry");
  if (cross_rail_fields != 0 && cross_rail_fields != 4)
    return context.error("rail_gb_per_s, rail_latency_us, cross_rail_gb_per_s and cross_rail_latency_us go together");
  if (message_bytes.size() != time_us.size())
    return context.error("message_bytes and time_us must have the same length (one time per message size)");
  for (std::size_t i = 0; i < message_bytes.size(); ++i) {
    const std::string index = "[" + std::to_string(i) + "]";
    if (auto bad = check_positive(context, "message_bytes" + index, message_bytes[i])) return bad;
    if (auto bad = check_positive(context, "time_us" + index, time_us[i])) return bad;
    pair.points.push_back({message_bytes[i], time_us[i] * units::microsecond});
  }
  return std::nullopt;
}

// The largest node count a curve entry may name: far beyond any allocation, far inside int.
constexpr double kMaxCollectiveNodes = 1 << 20;

std::optional<Error> parse_collective(std::string_view count, FlowCursor& cursor, const ParseContext& context,
                                      CollectiveMeasurement& entry) {
  FlowCursor count_cursor(count);
  const auto nodes = count_cursor.number();
  if (!nodes || !count_cursor.at_end() || *nodes < 2 || *nodes > kMaxCollectiveNodes || *nodes != std::floor(*nodes))
    return context.error("a collective entry is named by its node count, an integer from 2 to 1048576 (e.g. `8:`)");
  entry.nodes = static_cast<int>(*nodes);
  bool has_time = false, has_bytes = false, has_all_reduce = false, has_all_gather = false;
  auto problem = parse_flow_mapping(cursor, context, [&](std::string_view key, FlowCursor& c) -> std::optional<Error> {
    if (auto handled = parse_provenance_field(key, c, context, entry.measured_at_unix_seconds, entry.nccl_version, has_time))
      return *handled;
    double* target = key == "message_bytes"             ? &entry.message_bytes
                     : key == "all_reduce_bus_gb_per_s" ? &entry.all_reduce_bus_bytes_per_second
                     : key == "all_gather_bus_gb_per_s" ? &entry.all_gather_bus_bytes_per_second
                                                        : nullptr;
    if (target == nullptr)
      return context.error("unknown field \"" + std::string(key) +
                           "\"; collective fields are measured_at, nccl_version, message_bytes, all_reduce_bus_gb_per_s, "
                           "all_gather_bus_gb_per_s");
    const auto value = c.number();
    if (!value) return context.error(std::string(key) + " must be a number");
    if (auto bad = check_positive(context, key, *value)) return bad;
    const bool bytes = target == &entry.message_bytes;
    *target = bytes ? *value : *value * units::gigabyte;
    (bytes ? has_bytes : target == &entry.all_reduce_bus_bytes_per_second ? has_all_reduce : has_all_gather) = true;
    return std::nullopt;
  });
  if (problem) return problem;
  if (!has_time || !has_bytes || !has_all_reduce || !has_all_gather)
    return context.error("measured_at, message_bytes, all_reduce_bus_gb_per_s and all_gather_bus_gb_per_s are required in "
                         "every collective entry (re-run pipette-probe --collectives)");
  return std::nullopt;
}

template <typename Entry, typename Key>
std::optional<Error> sort_and_reject_duplicates(std::vector<Entry>& entries, std::vector<int>& lines,
                                                const std::string& source, Key&& key, const char* kind) {
  std::vector<std::size_t> order(entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(entries[a]) < key(entries[b]); });
  std::vector<Entry> sorted;
  sorted.reserve(entries.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k > 0 && key(entries[order[k]]) == key(sorted.back())) {
      const int first = std::min(lines[order[k]], lines[order[k - 1]]);
      const int second = std::max(lines[order[k]], lines[order[k - 1]]);
      return Error{source + ":" + std::to_string(second) + ": " + kind + " is listed twice (also on line " +
                   std::to_string(first) + "); keep one of the two lines"};
    }
    sorted.push_back(std::move(entries[order[k]]));
  }
  entries = std::move(sorted);
  return std::nullopt;
}

// ---------------------------------------------------------------- writing

void append_number(std::string& out, double value) { out += shortest(value); }

std::string quoted_if_needed(const std::string& text) { return needs_quotes(text) ? "\"" + text + "\"" : text; }

void append_matrix(std::string& out, const std::vector<double>& values, int side, double scale) {
  out += '[';
  for (int row = 0; row < side; ++row) {
    out += row ? ", [" : "[";
    for (int column = 0; column < side; ++column) {
      if (column) out += ", ";
      append_number(out, values[static_cast<std::size_t>(row) * side + column] / scale);
    }
    out += ']';
  }
  out += ']';
}

template <typename Entry, typename Key>
std::vector<Entry> merge_sorted(std::vector<Entry> base, const std::vector<Entry>& incoming, Key&& key) {
  auto by_key = [&](const Entry& a, const Entry& b) { return key(a) < key(b); };
  std::vector<Entry> newer = incoming;
  std::stable_sort(newer.begin(), newer.end(), by_key);
  std::stable_sort(base.begin(), base.end(), by_key);
  std::vector<Entry> merged;
  merged.reserve(base.size() + newer.size());
  std::size_t i = 0, j = 0;
  while (i < base.size() || j < newer.size()) {
    if (j == newer.size() || (i < base.size() && key(base[i]) < key(newer[j]))) {
      merged.push_back(std::move(base[i++]));
    } else if (i == base.size() || key(newer[j]) < key(base[i])) {
      merged.push_back(newer[j++]);
    } else {
      // Same key: the newer measurement wins; on a tie the incoming one (it was written last).
      merged.push_back(base[i].measured_at_unix_seconds > newer[j].measured_at_unix_seconds ? std::move(base[i])
                                                                                            : newer[j]);
      ++i;
      ++j;
    }
    // Duplicates inside `incoming`: the later-measured one of them wins.
    if (merged.size() >= 2 && key(merged[merged.size() - 1]) == key(merged[merged.size() - 2])) {
      if (merged.back().measured_at_unix_seconds >= merged[merged.size() - 2].measured_at_unix_seconds)
        merged[merged.size() - 2] = std::move(merged.back());
      merged.pop_back();
    }
  }
  return merged;
}

auto node_key = [](const NodeMeasurement& node) -> const std::string& { return node.name; };
auto pair_key = [](const PairMeasurement& pair) { return std::pair<std::string_view, std::string_view>(pair.node_a, pair.node_b); };
auto collective_key = [](const CollectiveMeasurement& entry) { return entry.nodes; };

}  // namespace

Result<std::int64_t> parse_utc_timestamp(std::string_view text) {
  const Error bad{"\"" + std::string(text) + "\" is not a UTC ISO-8601 time like 2026-12-01T17:00:00Z"};
  auto digits = [&](std::size_t at, std::size_t count) -> std::optional<int> {
    if (at + count > text.size()) return std::nullopt;
    int value = 0;
    for (std::size_t i = at; i < at + count; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      value = value * 10 + (text[i] - '0');
    }
    return value;
  };
  const auto year = digits(0, 4), month = digits(5, 2), day = digits(8, 2);
  const auto hour = digits(11, 2), minute = digits(14, 2), second = digits(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' || text[16] != ':')
    return bad;
  std::size_t pos = 19;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    const std::size_t fraction_start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
    if (pos == fraction_start) return bad;
  }
  const std::string_view zone = text.substr(pos);
  if (zone != "Z" && zone != "z" && zone != "+00:00")
    return Error{bad.message + " (the time zone must be Z or +00:00)"};
  static constexpr unsigned days_in_month[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (*month < 1 || *month > 12 || *day < 1 || static_cast<unsigned>(*day) > days_in_month[*month - 1] ||
      *hour > 23 || *minute > 59 || *second > 60)
    return bad;
  return days_from_civil(*year, static_cast<unsigned>(*month), static_cast<unsigned>(*day)) * 86400 +
         *hour * 3600 + *minute * 60 + *second;
}

std::string format_utc_timestamp(std::int64_t unix_seconds) {
  std::int64_t days = unix_seconds / 86400;
  std::int64_t seconds_of_day = unix_seconds % 86400;
  if (seconds_of_day < 0) {
    seconds_of_day += 86400;
    --days;
  }
  std::int64_t year = 0;
  unsigned month = 0, day = 0;
  civil_from_days(days, year, month, day);
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%04lld-%02u-%02uT%02lld:%02lld:%02lldZ", static_cast<long long>(year), month, day,
                static_cast<long long>(seconds_of_day / 3600), static_cast<long long>(seconds_of_day / 60 % 60),
                static_cast<long long>(seconds_of_day % 60));
  return buffer;
}

Result<LinkCache> parse_link_cache(std::string_view text, const std::string& source_name) {
  return guarded("link cache ", source_name, [&]() -> Result<LinkCache> {
    LinkCache cache;
    std::vector<int> node_lines, pair_lines, collective_lines;
    enum class Section { none, nodes, pairs, collectives } section = Section::none;
    bool has_version = false;
    int format_version = 1;
    ParseContext context{source_name, 0, {}};
    std::size_t pos = 0;
    while (pos < text.size()) {
      const auto newline = text.find('\n', pos);
      std::string_view line = text.substr(pos, newline == std::string_view::npos ? std::string_view::npos : newline - pos);
      pos = newline == std::string_view::npos ? text.size() : newline + 1;
      ++context.line;
      context.entry.clear();
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      const auto first = line.find_first_not_of(" \t");
      if (first == std::string_view::npos || line[first] == '#') continue;
      if (line[0] == '\t' || (first > 0 && line.substr(0, first).find('\t') != std::string_view::npos))
        return context.error("indent with spaces, not tabs (YAML forbids tabs)");

      FlowCursor cursor(line.substr(first));
      const auto key = cursor.scalar(true);
      if (!key || !cursor.consume(':')) return context.error("expected `name: value`");
      if (first == 0) {
        if (*key == kVersionKey) {
          const auto version = cursor.number();
          if (!version || !cursor.at_end()) return context.error("pipette_link_cache must be a format version number");
          if (!(*version >= 1 && *version <= kLinkCacheFormatVersion) || *version != std::floor(*version))
            return context.error("format version " + shortest(*version) + " is not supported (this Pipette reads versions 1 to " +
                                 std::to_string(kLinkCacheFormatVersion) + "); upgrade Pipette or re-run pipette-probe");
          format_version = static_cast<int>(*version);
          has_version = true;
          section = Section::none;
        } else if (*key == "nodes" || *key == "pairs" || *key == "collectives") {
          if (!has_version) return context.error("the first key must be `pipette_link_cache: 1` (the format version)");
          if (*key == "collectives" && format_version < 3)
            return context.error("collectives: needs `pipette_link_cache: 3` at the top of the file");
          section = *key == "nodes" ? Section::nodes : *key == "pairs" ? Section::pairs : Section::collectives;
          if (cursor.consume('{') && !cursor.consume('}')) return context.error(std::string(*key) + ": only `{}` may follow on this line");
          if (!cursor.at_end()) return context.error("entries go on the following lines, indented");
        } else {
          return context.error("unknown top-level key \"" + std::string(*key) +
                               "\"; expected pipette_link_cache, nodes, pairs or collectives");
        }
        continue;
      }
      if (section == Section::nodes) {
        context.entry = "node " + std::string(*key);
        NodeMeasurement node;
        if (auto problem = parse_node(*key, cursor, context, node)) return *problem;
        cache.nodes.push_back(std::move(node));
        node_lines.push_back(context.line);
      } else if (section == Section::pairs) {
        context.entry = "pair " + std::string(*key);
        PairMeasurement pair;
        if (auto problem = parse_pair(*key, cursor, context, format_version, pair)) return *problem;
        cache.pairs.push_back(std::move(pair));
        pair_lines.push_back(context.line);
      } else if (section == Section::collectives) {
        context.entry = "collective over " + std::string(*key) + " nodes";
        CollectiveMeasurement entry;
        if (auto problem = parse_collective(*key, cursor, context, entry)) return *problem;
        cache.collectives.push_back(std::move(entry));
        collective_lines.push_back(context.line);
      } else {
        return context.error("an indented entry must follow `nodes:`, `pairs:` or `collectives:`");
      }
    }
    if (!has_version)
      return Error{source_name + ": not a Pipette link cache (no `pipette_link_cache: 1` line); point the site file's "
                                 "links.cache at a file written by pipette-probe"};
    if (auto problem = sort_and_reject_duplicates(cache.nodes, node_lines, source_name, node_key, "this node")) return *problem;
    if (auto problem = sort_and_reject_duplicates(cache.pairs, pair_lines, source_name, pair_key, "this node pair"))
      return *problem;
    if (auto problem = sort_and_reject_duplicates(cache.collectives, collective_lines, source_name, collective_key,
                                                  "this node count"))
      return *problem;
    return cache;
  });
}

Result<LinkCache> read_link_cache(const std::string& path) {
  return guarded("link cache ", path, [&]() -> Result<LinkCache> {
    auto contents = read_whole_file("link cache ", path, "run pipette-probe to create it or fix links.cache in the site file");
    if (!contents) return contents.error();
    return parse_link_cache(*contents, path);
  });
}

std::string format_link_cache(const LinkCache& cache) {
  std::string out;
  out.reserve(256 + cache.nodes.size() * 512 + cache.pairs.size() * 200);
  out += "# Pipette link cache: measured links between and inside nodes. Format: README.md \"Link cache\".\n";
  out += "# GB/s = 1e9 bytes/s. Written by pipette-probe / `pipette links import`; one entry per line.\n";
  out += "pipette_link_cache: ";
  const bool cross_rail = std::any_of(cache.pairs.begin(), cache.pairs.end(), [](const PairMeasurement& pair) { return pair.has_cross_rail(); });
  // The oldest version that holds what the cache has, so older readers keep reading it.
  out += !cache.collectives.empty() ? "3" : cross_rail ? "2" : "1";
  out += "\nnodes:";
  if (cache.nodes.empty()) out += " {}";
  out += '\n';
  for (const auto& node : cache.nodes) {
    out += "  " + node.name + ": {measured_at: " + format_utc_timestamp(node.measured_at_unix_seconds);
    if (!node.nccl_version.empty()) out += ", nccl_version: " + quoted_if_needed(node.nccl_version);
    if (!node.fingerprint.empty()) out += ", fingerprint: \"" + node.fingerprint + "\"";
    if (node.gpus > 0) {
      out += ", gpus: " + std::to_string(node.gpus) + ", bandwidth_gb_per_s: ";
      append_matrix(out, node.bandwidth_bytes_per_second, node.gpus, units::gigabyte);
      out += ", latency_us: ";
      append_matrix(out, node.latency_seconds, node.gpus, units::microsecond);
    }
    out += "}\n";
  }
  out += "pairs:";
  if (cache.pairs.empty()) out += " {}";
  out += '\n';
  for (const auto& pair : cache.pairs) {
    out += "  " + pair.node_a + " " + pair.node_b + ": {measured_at: " + format_utc_timestamp(pair.measured_at_unix_seconds);
    if (!pair.nccl_version.empty()) out += ", nccl_version: " + quoted_if_needed(pair.nccl_version);
    out += ", bandwidth_gb_per_s: ";
    append_number(out, pair.bandwidth_bytes_per_second / units::gigabyte);
    out += ", latency_us: ";
    append_number(out, pair.latency_seconds / units::microsecond);
    if (!pair.points.empty()) {
      out += ", message_bytes: [";
      for (std::size_t i = 0; i < pair.points.size(); ++i) {
        if (i) out += ", ";
        append_number(out, pair.points[i].message_bytes);
      }
      out += "], time_us: [";
      for (std::size_t i = 0; i < pair.points.size(); ++i) {
        if (i) out += ", ";
        append_number(out, pair.points[i].time_seconds / units::microsecond);
      }
      out += ']';
    }
    if (pair.has_cross_rail()) {
      out += ", rail_gb_per_s: ";
      append_number(out, pair.rail_bandwidth_bytes_per_second / units::gigabyte);
      out += ", rail_latency_us: ";
      append_number(out, pair.rail_latency_seconds / units::microsecond);
      out += ", cross_rail_gb_per_s: ";
      append_number(out, pair.cross_rail_bandwidth_bytes_per_second / units::gigabyte);
      out += ", cross_rail_latency_us: ";
      append_number(out, pair.cross_rail_latency_seconds / units::microsecond);
    }
    out += "}\n";
  }
  if (cache.collectives.empty()) return out;
  out += "collectives:\n";
  for (const auto& entry : cache.collectives) {
    out += "  " + std::to_string(entry.nodes) + ": {measured_at: " + format_utc_timestamp(entry.measured_at_unix_seconds);
    if (!entry.nccl_version.empty()) out += ", nccl_version: " + quoted_if_needed(entry.nccl_version);
    out += ", message_bytes: ";
    append_number(out, entry.message_bytes);
    out += ", all_reduce_bus_gb_per_s: ";
    append_number(out, entry.all_reduce_bus_bytes_per_second / units::gigabyte);
    out += ", all_gather_bus_gb_per_s: ";
    append_number(out, entry.all_gather_bus_bytes_per_second / units::gigabyte);
    out += "}\n";
  }
  return out;
}

LinkCache merge_link_caches(LinkCache base, const LinkCache& incoming) {
  LinkCache normalized = incoming;
  for (auto& pair : normalized.pairs)
    if (pair.node_b < pair.node_a) std::swap(pair.node_a, pair.node_b);
  LinkCache merged;
  merged.nodes = merge_sorted(std::move(base.nodes), normalized.nodes, node_key);
  merged.pairs = merge_sorted(std::move(base.pairs), normalized.pairs, pair_key);
  merged.collectives = merge_sorted(std::move(base.collectives), normalized.collectives, collective_key);
  return merged;
}

Result<LinkCache> update_link_cache(const std::string& path, const LinkCache& incoming) {
  return guarded("link cache ", path, [&]() -> Result<LinkCache> {
    auto lock = lock_beside(path);
    if (!lock) return lock.error();

    LinkCache base;
    if (std::filesystem::exists(path)) {
      auto existing = read_link_cache(path);
      if (!existing)
        return Error{existing.error().message + " — not overwriting it; move the damaged cache aside and re-run"};
      base = std::move(existing).value();
    }
    LinkCache merged = merge_link_caches(std::move(base), incoming);
    const std::string text = format_link_cache(merged);
    // The writer must produce what the reader accepts; refuse to replace a good file with one that is not.
    auto check = parse_link_cache(text, path);
    if (!check) return Error{"refusing to write " + path + ": the merged cache does not validate: " + check.error().message};
    std::error_code ignored;
    auto yaml = write_temporary(path, text);
    if (!yaml) return yaml.error();
    // The index is built from what parsing the written text gives, so both read paths agree to the
    // bit. It goes in place first: until the YAML's rename its stamp matches no file, so readers in
    // between parse the old YAML. A failure to write it only costs speed.
    const std::string index_path = link_index_path(path);
    if (auto index = write_temporary(index_path, encode_link_index(link_table_of(*check), yaml->status)); index) {
      if (rename_over(*index, index_path)) std::filesystem::remove(index_path, ignored);
    }
    if (auto problem = rename_over(*yaml, path)) return *problem;
    return merged;
  });
}

double staleness_weight(const StalenessPolicy& policy, double age_seconds) {
  if (policy.max_age_seconds > 0 && age_seconds > policy.max_age_seconds) return 0.0;
  if (age_seconds <= policy.fresh_for_seconds) return 1.0;
  if (policy.half_life_seconds <= 0) return 0.0;
  return std::exp2(-(age_seconds - policy.fresh_for_seconds) / policy.half_life_seconds);
}

Link blend_toward_prior(const Link& measured, const Link& prior, double weight) {
  if (weight >= 1.0) return measured;
  if (!(weight > 0.0)) return prior;
  const double w = weight;
  auto blend = [w](double m, double p) {
    if (m <= 0 || p <= 0) return w * m + (1 - w) * p;  // geometric blend needs positive values (a zero latency)
    return p * std::exp(w * std::log(m / p));          // m^w · p^(1−w), one log and one exp
  };
  Link out;
  out.bandwidth_bytes_per_second = blend(measured.bandwidth_bytes_per_second, prior.bandwidth_bytes_per_second);
  out.latency_seconds = blend(measured.latency_seconds, prior.latency_seconds);
  out.measured = true;
  return out;
}

}  // namespace pipette
