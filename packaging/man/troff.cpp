#include "troff.hpp"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace pipette::man {

std::string escape(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string literal(std::string_view text) {
  std::string out;
  for (char c : escape(text)) {
    if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

std::string verbatim(std::string_view text) {
  std::string body = literal(text);
  if (!body.empty() && body.back() != '\n') body += '\n';
  return ".nf\n" + body + ".fi\n";
}

bool fill(std::string& page, const std::map<std::string, std::string>& values, std::string& error) {
  std::string out;
  std::set<std::string> used;
  size_t position = 0;
  while (true) {
    const size_t open = page.find('@', position);
    if (open == std::string::npos) break;
    const size_t close = page.find('@', open + 1);
    if (close == std::string::npos) break;
    const std::string key = page.substr(open + 1, close - open - 1);
    const bool is_key = !key.empty() && key.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == std::string::npos;
    if (!is_key) {
      out += page.substr(position, close - position);
      position = close;
      continue;
    }
    const auto value = values.find(key);
    if (value == values.end()) {
      error = "the template uses @" + key + "@, which the generator does not provide";
      return false;
    }
    out += page.substr(position, open - position) + value->second;
    used.insert(key);
    position = close + 1;
  }
  out += page.substr(position);
  for (const auto& [key, value] : values) {
    if (!used.count(key)) {
      error = "the template never uses @" + key + "@";
      return false;
    }
  }
  page = std::move(out);
  return true;
}

int generate(int argc, char** argv, std::map<std::string, std::string> values) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s TEMPLATE OUTPUT DATE\n", argv[0]);
    return 2;
  }
  values["DATE"] = argv[3];
  std::ifstream input(argv[1]);
  if (!input) {
    std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[1]);
    return 1;
  }
  std::stringstream text;
  text << input.rdbuf();
  std::string page = text.str();
  std::string error;
  if (!fill(page, values, error)) {
    std::fprintf(stderr, "%s: %s: %s\n", argv[0], argv[1], error.c_str());
    return 1;
  }
  std::ofstream output(argv[2], std::ios::binary);
  output << page;
  if (!output) {
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[2]);
    return 1;
  }
  return 0;
}

}  // namespace pipette::man
