#include "pipette/topology/hostlist.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "guarded.hpp"

namespace pipette {

namespace {

// Longer digit runs could overflow 64 bits; they are treated as part of the name.
constexpr std::size_t kMaxNumberDigits = 18;

struct NumberRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  int width = 0;  // digits, zero-padded
};

// One item of an expression: literal text interleaved with bracket groups.
struct Segment {
  std::string literal;                // used when ranges is empty
  std::vector<NumberRange> ranges;    // a bracket group
};

bool is_separator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_padded(std::string& out, std::uint64_t number, int width) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, number).ptr;
  for (int pad = width - static_cast<int>(end - digits); pad > 0; --pad) out.push_back('0');
  out.append(digits, end);
}

Error hostlist_error(std::string_view expression, const std::string& what) {
  return Error{"hostlist \"" + quoted_input(expression) + "\": " + what};
}

Result<std::uint64_t> parse_number(std::string_view digits, std::string_view expression) {
  if (digits.empty() || digits.size() > kMaxNumberDigits)
    return hostlist_error(expression, '"' + quoted_input(digits) +
                                          "\" is not a number of 1 to 18 digits; write ranges like [01-16,20]");
  std::uint64_t value = 0;
  for (char c : digits) {
    if (!is_digit(c))
      return hostlist_error(expression, '"' + quoted_input(digits) +
                                            "\" is not a number; write ranges like [01-16,20]");
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

Result<NumberRange> parse_range(std::string_view text, std::string_view expression) {
  const auto dash = text.find('-');
  const std::string_view lo_text = text.substr(0, dash);
  auto lo = parse_number(lo_text, expression);
  if (!lo) return lo.error();
  NumberRange range{*lo, *lo, static_cast<int>(lo_text.size())};
  if (dash != std::string_view::npos) {
    auto hi = parse_number(text.substr(dash + 1), expression);
    if (!hi) return hi.error();
    if (*hi < *lo)
      return hostlist_error(expression, "range \"" + quoted_input(text) + "\" runs backwards; write lo-hi with lo <= hi");
    range.hi = *hi;
  }
  if (range.hi - range.lo >= kMaxHostsPerRange)
    return hostlist_error(expression, "range \"" + quoted_input(text) + "\" has more than 65536 hosts (Slurm's limit); split it");
  return range;
}

Result<std::vector<Segment>> parse_item(std::string_view item, std::string_view expression) {
  std::vector<Segment> segments;
  std::size_t pos = 0;
  while (pos < item.size()) {
    const auto open = item.find_first_of("[]", pos);
    if (open == std::string_view::npos) {
      segments.push_back({std::string(item.substr(pos)), {}});
      break;
    }
    if (item[open] == ']') return hostlist_error(expression, "']' without '[' in \"" + quoted_input(item) + "\"");
    if (open > pos) segments.push_back({std::string(item.substr(pos, open - pos)), {}});
    const auto close = item.find_first_of("[]", open + 1);
    if (close == std::string_view::npos || item[close] == '[')
      return hostlist_error(expression, "'[' without matching ']' in \"" + quoted_input(item) + "\"");
    Segment group;
    std::string_view body = item.substr(open + 1, close - open - 1);
    while (true) {
      const auto comma = body.find(',');
      auto range = parse_range(body.substr(0, comma), expression);
      if (!range) return range.error();
      group.ranges.push_back(*range);
      if (comma == std::string_view::npos) break;
      body.remove_prefix(comma + 1);
    }
    segments.push_back(std::move(group));
    pos = close + 1;
  }
  return segments;
}

std::size_t count_names(const std::vector<Segment>& segments) {
  std::size_t total = 1;
  for (const auto& segment : segments) {
    if (segment.ranges.empty()) continue;
    std::size_t in_group = 0;
    for (const auto& range : segment.ranges) in_group += static_cast<std::size_t>(range.hi - range.lo + 1);
    if (in_group > kMaxExpandedHosts || total > kMaxExpandedHosts / in_group) return kMaxExpandedHosts + 1;
    total *= in_group;
  }
  return total;
}

std::size_t longest_name(const std::vector<Segment>& segments) {
  std::size_t length = 0;
  for (const auto& segment : segments) {
    std::size_t longest_number = 0;
    for (const auto& range : segment.ranges) {
      char digits[24];
      const auto digit_count = static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, range.hi).ptr - digits);
      longest_number = std::max({longest_number, digit_count, static_cast<std::size_t>(range.width)});
    }
    length += segment.ranges.empty() ? segment.literal.size() : longest_number;
  }
  return length;
}

void emit_names(const std::vector<Segment>& segments, std::size_t index, std::string& name,
                std::vector<std::string>& out) {
  if (index == segments.size()) {
    out.push_back(name);
    return;
  }
  const Segment& segment = segments[index];
  const std::size_t keep = name.size();
  if (segment.ranges.empty()) {
    name += segment.literal;
    emit_names(segments, index + 1, name, out);
  } else {
    for (const auto& range : segment.ranges) {
      for (std::uint64_t number = range.lo; number <= range.hi; ++number) {
        append_padded(name, number, range.width);
        emit_names(segments, index + 1, name, out);
        name.resize(keep);
      }
    }
  }
  name.resize(keep);
}

// A host split as Slurm splits it: prefix + trailing number (absent for names without digits).
struct HostRange {
  std::string_view prefix;
  bool numeric = false;
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  int width = 0;
};

HostRange split_host(std::string_view host) {
  std::size_t digits_start = host.size();
  while (digits_start > 0 && is_digit(host[digits_start - 1])) --digits_start;
  const std::size_t digits = host.size() - digits_start;
  if (digits == 0 || digits > kMaxNumberDigits) return {host, false, 0, 0, 0};
  std::uint64_t number = 0;
  for (char c : host.substr(digits_start)) number = number * 10 + static_cast<std::uint64_t>(c - '0');
  return {host.substr(0, digits_start), true, number, number, static_cast<int>(digits)};
}

int decimal_digits(std::uint64_t number) {
  int digits = 1;
  while (number >= 10) {
    number /= 10;
    ++digits;
  }
  return digits;
}

int zero_padding(std::uint64_t number, int width) { return std::max(0, width - decimal_digits(number)); }

// Slurm's rule for joining n (width wn) and m (width wm) into one range: allowed when printing
// both with one of the widths changes neither number's zero padding; that width is adopted.
bool join_widths(std::uint64_t n, int& wn, std::uint64_t m, int& wm) {
  const bool n_changes = zero_padding(n, wn) != zero_padding(n, wm);
  const bool m_changes = zero_padding(m, wm) != zero_padding(m, wn);
  if (n_changes && m_changes) return false;
  if (n_changes)
    wm = wn;
  else
    wn = wm;
  return true;
}

bool same_bracket(const HostRange& a, const HostRange& b) { return a.numeric && b.numeric && a.prefix == b.prefix; }

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view expression) {
  return guarded("hostlist ", std::string(expression.substr(0, 80)), [&]() -> Result<std::vector<std::string>> {
    std::vector<std::string> hosts;
    std::size_t pos = 0;
    while (pos < expression.size()) {
      if (is_separator(expression[pos])) {
        ++pos;
        continue;
      }
      std::size_t end = pos;
      int depth = 0;
      while (end < expression.size() && (depth > 0 || !is_separator(expression[end]))) {
        if (expression[end] == '[') ++depth;
        if (expression[end] == ']') --depth;
        ++end;
      }
      auto segments = parse_item(expression.substr(pos, end - pos), expression);
      if (!segments) return segments.error();
      if (longest_name(*segments) > kMaxHostNameLength)
        return hostlist_error(expression, "names a host longer than " + std::to_string(kMaxHostNameLength) +
                                              " characters; host names are at most 253");
      const std::size_t count = count_names(*segments);
      if (count > kMaxExpandedHosts - hosts.size())
        return hostlist_error(expression, "expands to more than " + std::to_string(kMaxExpandedHosts) + " hosts");
      if (hosts.capacity() < hosts.size() + count) hosts.reserve(std::max(hosts.size() + count, 2 * hosts.capacity()));
      std::string name;
      emit_names(*segments, 0, name, hosts);
      pos = end;
    }
    return hosts;
  });
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  std::vector<HostRange> ranges;
  ranges.reserve(hosts.size());
  for (const auto& host : hosts) {
    HostRange next = split_host(host);
    if (!ranges.empty()) {
      HostRange& last = ranges.back();
      // A range stops at kMaxHostsPerRange hosts, the most expand_hostlist (and Slurm) reads back.
      if (same_bracket(last, next) && last.hi + 1 == next.lo && last.hi - last.lo + 1 < kMaxHostsPerRange &&
          join_widths(last.lo, last.width, next.lo, next.width)) {
        last.hi = next.hi;
        continue;
      }
    }
    ranges.push_back(next);
  }

  std::string out;
  for (std::size_t i = 0; i < ranges.size();) {
    if (!out.empty()) out.push_back(',');
    out += ranges[i].prefix;
    if (!ranges[i].numeric) {
      ++i;
      continue;
    }
    std::size_t group_end = i + 1;
    while (group_end < ranges.size() && same_bracket(ranges[group_end - 1], ranges[group_end])) ++group_end;
    const bool bracket = group_end - i > 1 || ranges[i].hi > ranges[i].lo;
    if (bracket) out.push_back('[');
    for (std::size_t k = i; k < group_end; ++k) {
      if (k > i) out.push_back(',');
      append_padded(out, ranges[k].lo, ranges[k].width);
      if (ranges[k].hi > ranges[k].lo) {
        out.push_back('-');
        append_padded(out, ranges[k].hi, ranges[k].width);
      }
    }
    if (bracket) out.push_back(']');
    i = group_end;
  }
  return out;
}

}  // namespace pipette
