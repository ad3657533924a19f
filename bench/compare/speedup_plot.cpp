#include "speedup_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace pipette::bench {

namespace {

std::string number(double value, const char* format = "%.1f") {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

}  // namespace

std::string speedup_svg(const std::string& title, const std::vector<SpeedupSeries>& series,
                        const std::vector<int>& node_counts) {
  constexpr double width = 800, height = 440, left = 70, right = 240, top = 40, bottom = 60;
  const double plot_width = width - left - right, plot_height = height - top - bottom;

  double highest = 1.1, lowest = 0.9;
  for (const SpeedupSeries& one : series) {
    for (const SpeedupPoint& point : one.points) {
      highest = std::max(highest, point.speedup);
      lowest = std::min(lowest, point.speedup);
    }
  }
  // Round ends: multiples of a step that gives 4–12 grid lines.
  const double span = highest - lowest;
  const double step = span <= 0.8 ? 0.1 : span <= 2.5 ? 0.25 : span <= 5 ? 0.5 : 1.0;
  highest = std::ceil(highest / step - 1e-9) * step;
  lowest = std::floor(lowest / step + 1e-9) * step;

  const double first_log = std::log2(node_counts.front()), last_log = std::log2(node_counts.back());
  const auto x_of = [&](double nodes) {
    const double span = std::max(1.0, last_log - first_log);
    return left + plot_width * (0.08 + 0.84 * (std::log2(nodes) - first_log) / span);
  };
  const auto y_of = [&](double speedup) {
    return top + plot_height * (1 - (std::clamp(speedup, lowest, highest) - lowest) / (highest - lowest));
  };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(width, "%.0f") + "\" height=\"" +
                    number(height, "%.0f") + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + number(width / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" + title + "</text>\n";
  // Grid and axes.
  for (double tick = lowest; tick <= highest + 1e-9; tick += step) {
    const std::string y = number(y_of(tick));
    const bool unity = std::abs(tick - 1.0) < 1e-9;
    svg += "<line x1=\"" + number(left) + "\" x2=\"" + number(left + plot_width) + "\" y1=\"" + y + "\" y2=\"" + y +
           "\" stroke=\"" + (unity ? "#444" : "#ddd") + "\"" + (unity ? " stroke-dasharray=\"5,3\"" : "") + "/>\n";
    svg += "<text x=\"" + number(left - 8) + "\" y=\"" + number(y_of(tick) + 4) + "\" text-anchor=\"end\">" +
           number(tick, step < 0.25 ? "%.1f" : "%.2f") + "</text>\n";
  }
  for (const int nodes : node_counts) {
    svg += "<text x=\"" + number(x_of(nodes)) + "\" y=\"" + number(top + plot_height + 18) +
           "\" text-anchor=\"middle\">" + std::to_string(nodes) + "</text>\n";
  }
  svg += "<rect x=\"" + number(left) + "\" y=\"" + number(top) + "\" width=\"" + number(plot_width) + "\" height=\"" +
         number(plot_height) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  svg += "<text x=\"" + number(left + plot_width / 2) + "\" y=\"" + number(height - 18) +
         "\" text-anchor=\"middle\">nodes (8 GPUs each)</text>\n";
  svg += "<text transform=\"translate(20," + number(top + plot_height / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">speedup of Pipette's plan (simulated)</text>\n";

  // Points, slightly offset per series so that they do not hide each other, and median lines.
  for (size_t index = 0; index < series.size(); ++index) {
    const SpeedupSeries& one = series[index];
    const double offset = (static_cast<double>(index) - (series.size() - 1) / 2.0) * 10;
    std::map<int, std::vector<double>> by_nodes;
    for (const SpeedupPoint& point : one.points) {
      by_nodes[point.nodes].push_back(point.speedup);
      svg += "<circle cx=\"" + number(x_of(point.nodes) + offset) + "\" cy=\"" + number(y_of(point.speedup)) +
             "\" r=\"3\" fill=\"" + one.colour + "\" fill-opacity=\"0.45\"/>\n";
    }
    std::string path;
    for (const auto& [nodes, speedups] : by_nodes) {
      path += (path.empty() ? "M" : " L") + number(x_of(nodes) + offset) + "," + number(y_of(median(speedups)));
    }
    if (!path.empty()) {
      svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + one.colour + "\" stroke-width=\"2\"/>\n";
    }
    const double legend_y = top + 14 + 20 * static_cast<double>(index);
    svg += "<line x1=\"" + number(left + plot_width + 14) + "\" x2=\"" + number(left + plot_width + 34) + "\" y1=\"" +
           number(legend_y - 4) + "\" y2=\"" + number(legend_y - 4) + "\" stroke=\"" + one.colour +
           "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + number(left + plot_width + 40) + "\" y=\"" + number(legend_y) + "\">" + one.label + "</text>\n";
  }
  svg += "<text x=\"" + number(left + plot_width + 14) + "\" y=\"" + number(top + 24 + 20 * series.size()) +
         "\" fill=\"#555\">dots: cases; lines: medians</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace pipette::bench
