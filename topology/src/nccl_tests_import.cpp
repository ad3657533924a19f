#include "pipette/topology/nccl_tests_import.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

namespace pipette {
namespace {

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t position = 0;
  while (position < line.size()) {
    while (position < line.size() && std::isspace(static_cast<unsigned char>(line[position]))) ++position;
    const size_t start = position;
    while (position < line.size() && !std::isspace(static_cast<unsigned char>(line[position]))) ++position;
    if (position > start) words.push_back(line.substr(start, position - start));
  }
  return words;
}

bool all_digits(std::string_view word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The column layout of one result table, from its header line.
struct TableLayout {
  int prefix_columns = 0;  // size, count, type, redop, root (fewer in old layouts)
  int size_column = -1, count_column = -1, type_column = -1, redop_column = -1, root_column = -1;
  int group_columns = 0;   // columns per placement (out-of-place, then in-place)
  int time_offset = -1, algbw_offset = -1, busbw_offset = -1, wrong_offset = -1;
};

// A header names size and count, then two equal groups that each start with time or cputime.
std::optional<TableLayout> table_layout_from(const std::vector<std::string_view>& names) {
  std::vector<int> time_columns;
  TableLayout layout;
  for (int i = 0; i < static_cast<int>(names.size()); ++i) {
    const std::string_view name = names[static_cast<size_t>(i)];
    if (name == "time" || name == "cputime") time_columns.push_back(i);
    if (!time_columns.empty()) continue;
    if (name == "size") layout.size_column = i;
    else if (name == "count") layout.count_column = i;
    else if (name == "type") layout.type_column = i;
    else if (name == "redop") layout.redop_column = i;
    else if (name == "root") layout.root_column = i;
  }
  if (layout.size_column < 0 || layout.count_column < 0 || time_columns.size() != 2) return std::nullopt;
  layout.prefix_columns = time_columns[0];
  layout.group_columns = time_columns[1] - time_columns[0];
  if (static_cast<int>(names.size()) != time_columns[1] + layout.group_columns) return std::nullopt;
  for (int offset = 0; offset < layout.group_columns; ++offset) {
    const std::string_view name = names[static_cast<size_t>(layout.prefix_columns + offset)];
    if (name == "time" || name == "cputime") layout.time_offset = offset;
    else if (name == "algbw") layout.algbw_offset = offset;
    else if (name == "busbw") layout.busbw_offset = offset;
    else if (name == "#wrong") layout.wrong_offset = offset;  // old layouts' `error` is no count
  }
  if (layout.algbw_offset < 0 || layout.busbw_offset < 0) return std::nullopt;
  return layout;
}

class LineParser {
 public:
  LineParser(const std::string& source, int line) : source_(source), line_(line) {}

  Error error(const std::string& what) const {
    return Error{source_ + ":" + std::to_string(line_) + ": " + what};
  }

  Result<double> number(std::string_view word, const char* column) const {
    const std::string text(word);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < 0) {
      return error(std::string(column) + " '" + text + "' is not a non-negative number");
    }
    return value;
  }

  Result<std::int64_t> integer(std::string_view word, const char* column) const {
    std::int64_t value = 0;
    const auto [stop, status] = std::from_chars(word.data(), word.data() + word.size(), value);
    if (word.empty() || status != std::errc() || stop != word.data() + word.size()) {
      return error(std::string(column) + " '" + std::string(word) + "' is not an integer");
    }
    return value;
  }

 private:
  const std::string& source_;
  int line_;
};

Result<NcclTestsTiming> parse_timing(const LineParser& parser, const std::vector<std::string_view>& words, int first,
                                     const TableLayout& layout) {
  NcclTestsTiming timing;
  Result<double> time = parser.number(words[static_cast<size_t>(first + layout.time_offset)], "time");
  Result<double> algbw = parser.number(words[static_cast<size_t>(first + layout.algbw_offset)], "algbw");
  Result<double> busbw = parser.number(words[static_cast<size_t>(first + layout.busbw_offset)], "busbw");
  for (const Result<double>* value : {&time, &algbw, &busbw}) {
    if (!*value) return value->error();
  }
  timing.time_seconds = *time * 1e-6;
  timing.algorithm_bytes_per_second = *algbw * 1e9;
  timing.bus_bytes_per_second = *busbw * 1e9;
  if (layout.wrong_offset >= 0) {
    const std::string_view wrong = words[static_cast<size_t>(first + layout.wrong_offset)];
    if (wrong != "N/A") {
      Result<double> count = parser.number(wrong, "#wrong");
      if (!count) return count.error();
      timing.wrong_elements = static_cast<long>(*count);
    }
  }
  return timing;
}

// "nccl-library=22703" → "2.27.3"
std::string version_from_preamble(const std::vector<std::string_view>& words) {
  for (std::string_view word : words) {
    constexpr std::string_view key = "nccl-library=";
    if (!word.starts_with(key)) continue;
    int code = 0;
    const std::string_view digits = word.substr(key.size());
    if (std::from_chars(digits.data(), digits.data() + digits.size(), code).ec == std::errc() && code > 0) {
      return nccl_version_string(code);
    }
  }
  return "";
}

}  // namespace

std::string nccl_version_string(int version_code) {
  const bool current_scheme = version_code >= 20900;  // major·10000 + minor·100 + patch since 2.9
  const int major = current_scheme ? version_code / 10000 : version_code / 1000;
  const int minor = current_scheme ? (version_code % 10000) / 100 : (version_code % 1000) / 100;
  const int patch = version_code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Result<std::vector<NcclTestsRun>> parse_nccl_tests_output(std::string_view text, const std::string& source_name) {
  std::vector<NcclTestsRun> runs;
  NcclTestsRun current;
  std::optional<TableLayout> layout;
  auto finish_run = [&] {
    if (layout || !current.rows.empty()) runs.push_back(std::move(current));
    current = NcclTestsRun{};
    layout.reset();
  };

  int line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    const LineParser parser(source_name, line_number);
    std::vector<std::string_view> words = split_words(line);
    if (words.empty()) continue;

    if (words[0].starts_with("#")) {
      if (words[0] == "#") {
        words.erase(words.begin());
      } else {
        words[0].remove_prefix(1);  // "#wrong" as the first column never happens; "#size" may
      }
      if (words.empty()) continue;
      const bool preamble = words[0] == "nccl-tests" || words[0] == "Collective" || words[0] == "nThread";
      if (preamble && (layout || !current.rows.empty())) finish_run();
      if (current.first_line == 0) current.first_line = line_number;
      if (words[0] == "nccl-tests") {
        current.nccl_version = version_from_preamble(words);
      } else if (words[0] == "Collective" && words.size() >= 4 && words[1] == "test" && words[2] == "starting:") {
        current.collective = std::string(words[3]);
      } else if (words[0] == "Rank" && words.size() >= 4) {
        const auto on = std::find(words.begin(), words.end(), "on");
        if (on == words.end() || on + 1 == words.end()) return parser.error("a '#  Rank' line without 'on HOST'");
        const std::string host(*(on + 1));
        ++current.ranks;
        if (std::find(current.hosts.begin(), current.hosts.end(), host) == current.hosts.end()) current.hosts.push_back(host);
      } else if (std::find(words.begin(), words.end(), "size") != words.end() &&
                 std::find(words.begin(), words.end(), "algbw") != words.end()) {
        if (!current.rows.empty()) finish_run();  // a second table without a preamble
        if (current.first_line == 0) current.first_line = line_number;
        layout = table_layout_from(words);
        if (!layout) return parser.error("unrecognised nccl-tests table header (expected size, count, then time/algbw/busbw twice)");
      }
      continue;
    }

    // Result rows start with the size. Other lines (NCCL_DEBUG output, srun messages) pass by.
    if (!layout || !all_digits(words[0])) continue;
    const int full = layout->prefix_columns + 2 * layout->group_columns;
    const int in_place_only = layout->prefix_columns + layout->group_columns;
    if (static_cast<int>(words.size()) != full && static_cast<int>(words.size()) != in_place_only) {
      return parser.error("a result row has " + std::to_string(words.size()) + " columns, the table header " +
                          std::to_string(full));
    }
    NcclTestsRow row;
    row.line = line_number;
    Result<std::int64_t> size = parser.integer(words[static_cast<size_t>(layout->size_column)], "size");
    if (!size) return size.error();
    Result<std::int64_t> count = parser.integer(words[static_cast<size_t>(layout->count_column)], "count");
    if (!count) return count.error();
    row.size_bytes = static_cast<double>(*size);
    row.count = *count;
    if (layout->type_column >= 0) row.type = std::string(words[static_cast<size_t>(layout->type_column)]);
    if (layout->redop_column >= 0) row.redop = std::string(words[static_cast<size_t>(layout->redop_column)]);
    if (layout->root_column >= 0) {
      Result<std::int64_t> root = parser.integer(words[static_cast<size_t>(layout->root_column)], "root");
      if (!root) return root.error();
      row.root = static_cast<int>(*root);
    }
    row.has_out_of_place = static_cast<int>(words.size()) == full;
    int group = layout->prefix_columns;
    if (row.has_out_of_place) {
      Result<NcclTestsTiming> timing = parse_timing(parser, words, group, *layout);
      if (!timing) return timing.error();
      row.out_of_place = *timing;
      group += layout->group_columns;
    }
    Result<NcclTestsTiming> timing = parse_timing(parser, words, group, *layout);
    if (!timing) return timing.error();
    row.in_place = *timing;
    current.rows.push_back(std::move(row));
  }
  finish_run();
  std::erase_if(runs, [](const NcclTestsRun& run) { return run.rows.empty(); });
  if (runs.empty()) return Error{source_name + ": no nccl-tests result table found (is this the output of an *_perf binary?)"};
  return runs;
}

Result<std::vector<NcclTestsRun>> read_nccl_tests_output(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{path + ": cannot open the nccl-tests output"};
  std::ostringstream text;
  text << file.rdbuf();
  return parse_nccl_tests_output(text.str(), path);
}

Result<std::vector<TransferTiming>> bus_timings(const NcclTestsRun& run) {
  // busbw / algbw is the collective's bus factor, the same on every row; the row with the largest
  // algbw has the most significant digits to compute it from.
  const NcclTestsTiming* best = nullptr;
  for (const NcclTestsRow& row : run.rows) {
    for (const NcclTestsTiming* timing : {&row.in_place, row.has_out_of_place ? &row.out_of_place : nullptr}) {
      if (timing != nullptr && timing->bus_bytes_per_second > 0 &&
          (best == nullptr || timing->algorithm_bytes_per_second > best->algorithm_bytes_per_second)) {
        best = timing;
      }
    }
  }
  if (best == nullptr || best->algorithm_bytes_per_second <= 0) {
    return Error{"nccl-tests run at line " + std::to_string(run.first_line) +
                 ": no row has a non-zero bus bandwidth; include larger sizes (-e 1G)"};
  }
  const double bus_factor = best->bus_bytes_per_second / best->algorithm_bytes_per_second;
  std::vector<TransferTiming> timings;
  for (const NcclTestsRow& row : run.rows) {
    if (row.size_bytes <= 0) continue;
    for (const NcclTestsTiming* timing : {&row.in_place, row.has_out_of_place ? &row.out_of_place : nullptr}) {
      if (timing == nullptr || timing->wrong_elements > 0 || timing->time_seconds <= 0) continue;
      timings.push_back({row.size_bytes * bus_factor, timing->time_seconds});
    }
  }
  if (timings.empty()) {
    return Error{"nccl-tests run at line " + std::to_string(run.first_line) + ": no row without wrong elements"};
  }
  return timings;
}

Result<LinkCache> link_cache_from_nccl_tests(const NcclTestsRun& run, const NcclTestsImportOptions& options) {
  const std::string where = "nccl-tests run at line " + std::to_string(run.first_line);
  if (options.measured_at_unix_seconds <= 0) return Error{where + ": give the time it was measured"};
  std::vector<std::string> nodes = options.node_names.empty() ? run.hosts : options.node_names;
  if (nodes.empty()) {
    return Error{where + ": the output has no '#  Rank … on HOST' lines; name the nodes it ran on"};
  }
  if (!run.hosts.empty() && nodes.size() != run.hosts.size()) {
    return Error{where + ": it ran on " + std::to_string(run.hosts.size()) + " hosts but " +
                 std::to_string(nodes.size()) + " node names were given"};
  }
  if (nodes.size() > 2) {
    return Error{where + ": it spans " + std::to_string(nodes.size()) +
                 " nodes; a collective over more than two nodes runs at its slowest link and says nothing about "
                 "any one pair: import runs on one node or one node pair"};
  }
  Result<std::vector<TransferTiming>> timings = bus_timings(run);
  if (!timings) return timings.error();
  Result<AlphaBetaFit> fit = fit_alpha_beta(*timings);
  if (!fit) return Error{where + ": " + fit.error().message};
  const std::string version =
      !options.nccl_version.empty() ? options.nccl_version : (!run.nccl_version.empty() ? run.nccl_version : "unknown");

  LinkCache cache;
  if (nodes.size() == 2) {
    if (nodes[0] == nodes[1]) return Error{where + ": both node names are " + nodes[0]};
    PairMeasurement pair;
    pair.node_a = std::min(nodes[0], nodes[1]);
    pair.node_b = std::max(nodes[0], nodes[1]);
    pair.measured_at_unix_seconds = options.measured_at_unix_seconds;
    pair.nccl_version = version;
    pair.bandwidth_bytes_per_second = fit->bandwidth_bytes_per_second;
    pair.latency_seconds = fit->latency_seconds;
    for (const TransferTiming& point : fit->median_points) pair.points.push_back({point.message_bytes, point.time_seconds});
    cache.pairs.push_back(std::move(pair));
    return cache;
  }
  const int gpus = run.ranks;
  if (gpus < 2) return Error{where + ": a one-node run needs its '#  Rank' lines (two or more GPUs) to fill the intra-node matrix"};
  NodeMeasurement node;
  node.name = nodes[0];
  node.measured_at_unix_seconds = options.measured_at_unix_seconds;
  node.nccl_version = version;
  node.gpus = gpus;
  node.bandwidth_bytes_per_second.assign(static_cast<size_t>(gpus * gpus), fit->bandwidth_bytes_per_second);
  node.latency_seconds.assign(static_cast<size_t>(gpus * gpus), fit->latency_seconds);
  for (int gpu = 0; gpu < gpus; ++gpu) {
    node.bandwidth_bytes_per_second[static_cast<size_t>(gpu * gpus + gpu)] = 0;
    node.latency_seconds[static_cast<size_t>(gpu * gpus + gpu)] = 0;
  }
  cache.nodes.push_back(std::move(node));
  return cache;
}

}  // namespace pipette
