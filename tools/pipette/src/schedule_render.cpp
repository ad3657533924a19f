#include "schedule_render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "json_writer.hpp"
#include "pipette/core/units.hpp"

namespace pipette::cli {

namespace {

struct Style {
  const char* css_class;
  const char* fill;
  const char* legend;
};

Style style_of(EventKind kind) {
  switch (kind) {
    case EventKind::forward: return {"forward", "#4c78a8", "forward"};
    case EventKind::backward: return {"backward", "#f58518", "backward"};
    case EventKind::send_activation: return {"send-activation", "#54a24b", "activation transfer"};
    case EventKind::send_gradient: return {"send-gradient", "#b279a2", "gradient transfer"};
    case EventKind::dp_reduce: return {"dp-reduce", "#e45756", "DP gradient reduction"};
    case EventKind::embedding_reduce: return {"embedding-reduce", "#9d755d", "tied embedding gradient all-reduce"};
    case EventKind::optimizer: return {"optimizer", "#72b7b2", "optimizer step"};
    case EventKind::dp_gather: return {"dp-gather", "#ff9da6", "DP parameter all-gather"};
  }
  return {"unknown", "#000000", "?"};
}

const char* short_name(EventKind kind) {
  switch (kind) {
    case EventKind::forward: return "F";
    case EventKind::backward: return "B";
    case EventKind::send_activation: return "send act";
    case EventKind::send_gradient: return "send grad";
    case EventKind::dp_reduce: return "DP reduce";
    case EventKind::embedding_reduce: return "embedding reduce";
    case EventKind::optimizer: return "optimizer";
    case EventKind::dp_gather: return "DP gather";
  }
  return "?";
}

bool on_compute_lane(EventKind kind) {
  return kind == EventKind::forward || kind == EventKind::backward || kind == EventKind::optimizer;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format(const char* pattern, double a, double b = 0, double c = 0, double d = 0) {
  char buffer[160];
  std::snprintf(buffer, sizeof buffer, pattern, a, b, c, d);
  return buffer;
}

// A 1-2-5 step that puts 5 to 10 ticks on the axis.
double tick_step(double span) {
  const double raw = span / 8;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (factor * magnitude >= raw) return factor * magnitude;
  }
  return 10 * magnitude;
}

std::string event_label(const ScheduleEvent& event) {
  std::string label = short_name(event.kind);
  if (event.microbatch >= 0) label += " micro-batch " + std::to_string(event.microbatch);
  if (event.kind != EventKind::optimizer && event.kind != EventKind::dp_gather && event.kind != EventKind::embedding_reduce)
    label += " chunk " + std::to_string(event.chunk);
  return label;
}

}  // namespace

int slowest_replica(const SimulationResult& simulation) {
  int slowest = 0;
  double latest = -1;
  for (const auto& event : simulation.events) {
    if (event.kind != EventKind::forward && event.kind != EventKind::backward) continue;
    if (event.end_seconds > latest || (event.end_seconds == latest && event.dp_replica < slowest)) {
      latest = event.end_seconds;
      slowest = event.dp_replica;
    }
  }
  return slowest;
}

std::string render_gantt_svg(const SimulationResult& simulation, int pp, int replica, const std::string& title) {
  constexpr double kLeft = 78, kRight = 24, kTop = 44, kPlotWidth = 1100;
  constexpr double kComputeHeight = 22, kCommunicationHeight = 9, kRowGap = 9;
  constexpr double kRowHeight = kComputeHeight + kCommunicationHeight + kRowGap;
  const double span_seconds = std::max(simulation.iteration_seconds, 1e-12);
  const double axis_y = kTop + pp * kRowHeight + 4;
  const double width = kLeft + kPlotWidth + kRight;
  const double height = axis_y + 62;
  const auto x_of = [&](double seconds) { return kLeft + kPlotWidth * seconds / span_seconds; };
  // A tooltip per bar helps on small schedules; on big ones it would only bloat the file.
  constexpr size_t kMaxEventsWithTooltips = 20000;
  const auto drawn = std::count_if(simulation.events.begin(), simulation.events.end(),
                                   [&](const ScheduleEvent& event) { return event.dp_replica == replica; });
  const bool tooltips = static_cast<size_t>(drawn) <= kMaxEventsWithTooltips;

  std::string svg;
  svg += format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" ", width, height);
  svg += format("viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n", width, height);
  svg += "<title>" + xml_escape(title) + "</title>\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  svg += "<text x=\"" + format("%.0f", kLeft) + "\" y=\"22\" font-size=\"14\" font-weight=\"bold\">" + xml_escape(title) +
         "</text>\n";
  svg += "<text x=\"" + format("%.0f", kLeft) + "\" y=\"37\" fill=\"#555555\">DP replica " + std::to_string(replica) +
         "; idle time shows as the tinted row background</text>\n";

  for (int stage = 0; stage < pp; ++stage) {
    const double row_y = kTop + stage * kRowHeight;
    const double lane_y = row_y + kComputeHeight + 1;
    svg += "<g class=\"stage\" data-stage=\"" + std::to_string(stage) + "\">\n";
    svg += format("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">stage ", kLeft - 8, row_y + 15) +
           std::to_string(stage) + "</text>\n";
    svg += format("<rect class=\"idle\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#f6dede\"/>\n", kLeft,
                  row_y, kPlotWidth, kComputeHeight);
    svg += format("<rect class=\"link-lane\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#f2f2f2\"/>\n",
                  kLeft, lane_y, kPlotWidth, kCommunicationHeight);
    for (const auto& event : simulation.events) {
      if (event.stage != stage || event.dp_replica != replica) continue;
      const Style style = style_of(event.kind);
      const double x = x_of(event.start_seconds);
      const double w = std::max(x_of(event.end_seconds) - x, 0.5);
      double y = row_y, h = kComputeHeight;
      if (!on_compute_lane(event.kind)) {
        // Activations on the upper half of the link lane, gradients on the lower, reductions across.
        y = lane_y + (event.kind == EventKind::send_gradient ? kCommunicationHeight / 2 : 0);
        h = event.kind == EventKind::dp_reduce || event.kind == EventKind::dp_gather || event.kind == EventKind::embedding_reduce
                ? kCommunicationHeight
                : kCommunicationHeight / 2;
      }
      // Later chunks of the interleaved schedule are drawn lighter.
      const double opacity = event.chunk % 2 == 1 ? 0.65 : 1.0;
      svg += format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"", x, y, w, h);
      svg += std::string(" class=\"") + style.css_class + "\" fill=\"" + style.fill + "\"" +
             format(" fill-opacity=\"%.2f\" stroke=\"#ffffff\" stroke-width=\"0.4\">", opacity);
      if (tooltips) {
        svg += "<title>" + event_label(event) +
               format(": %.3f to %.3f ms</title>", event.start_seconds / units::millisecond,
                      event.end_seconds / units::millisecond);
      }
      svg += "</rect>\n";
      if (on_compute_lane(event.kind) && event.microbatch >= 0 && w >= 11) {
        svg += format("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" fill=\"#ffffff\" font-size=\"9\">", x + w / 2,
                      row_y + 14.5) +
               std::to_string(event.microbatch) + "</text>\n";
      }
    }
    svg += "</g>\n";
  }

  // Time axis in milliseconds.
  const double span_ms = span_seconds / units::millisecond;
  const double step_ms = tick_step(span_ms);
  svg += "<g class=\"axis\">\n";
  svg += format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#333333\"/>\n", kLeft, axis_y,
                kLeft + kPlotWidth, axis_y);
  for (double tick = 0; tick <= span_ms * (1 + 1e-9); tick += step_ms) {
    const double x = x_of(tick * units::millisecond);
    svg += format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#333333\"/>", x, axis_y, x, axis_y + 4);
    svg += format("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%g</text>\n", x, axis_y + 15, tick);
  }
  svg += format("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">time (ms)</text>\n", kLeft + kPlotWidth / 2,
                axis_y + 29);
  svg += "</g>\n";

  // Legend.
  svg += "<g class=\"legend\">\n";
  double legend_x = kLeft;
  const double legend_y = axis_y + 42;
  const auto happens = [&](EventKind kind) {
    return std::any_of(simulation.events.begin(), simulation.events.end(), [kind](const ScheduleEvent& e) { return e.kind == kind; });
  };
  const EventKind kinds[] = {EventKind::forward,       EventKind::backward,  EventKind::send_activation,
                             EventKind::send_gradient, EventKind::dp_reduce, EventKind::embedding_reduce,
                             EventKind::optimizer,     EventKind::dp_gather};
  for (const EventKind kind : kinds) {
    // The after-step gather and the tied embedding's reduction only where the plan has them.
    if ((kind == EventKind::dp_gather || kind == EventKind::embedding_reduce) && !happens(kind)) continue;
    const Style style = style_of(kind);
    svg += format("<rect x=\"%.2f\" y=\"%.2f\" width=\"12\" height=\"10\"", legend_x, legend_y) + " fill=\"" +
           style.fill + "\"/>";
    svg += format("<text x=\"%.2f\" y=\"%.2f\">", legend_x + 16, legend_y + 9) + style.legend + "</text>\n";
    legend_x += 16 + 7.0 * std::string(style.legend).size() + 18;
  }
  svg += format("<rect x=\"%.2f\" y=\"%.2f\" width=\"12\" height=\"10\" fill=\"#f6dede\"/>", legend_x, legend_y);
  svg += format("<text x=\"%.2f\" y=\"%.2f\">idle</text>\n", legend_x + 16, legend_y + 9);
  svg += "</g>\n</svg>\n";
  return svg;
}

std::string render_chrome_trace(const SimulationResult& simulation, int pp, int dp, const std::string& title) {
  JsonWriter json(false);
  json.begin_object();
  json.value("displayTimeUnit", "ms");
  json.begin_object("otherData").value("title", title).end_object();
  json.begin_array("traceEvents");
  for (int replica = 0; replica < dp; ++replica) {
    json.begin_object()
        .value("ph", "M")
        .value("name", "process_name")
        .value("pid", replica)
        .begin_object("args")
        .value("name", "DP replica " + std::to_string(replica))
        .end_object()
        .end_object();
    for (int stage = 0; stage < pp; ++stage) {
      for (int lane = 0; lane < 2; ++lane) {
        const int thread = 2 * stage + lane;
        const std::string name = "stage " + std::to_string(stage) + (lane == 0 ? " compute" : " communication");
        json.begin_object()
            .value("ph", "M")
            .value("name", "thread_name")
            .value("pid", replica)
            .value("tid", thread)
            .begin_object("args")
            .value("name", name)
            .end_object()
            .end_object();
        json.begin_object()
            .value("ph", "M")
            .value("name", "thread_sort_index")
            .value("pid", replica)
            .value("tid", thread)
            .begin_object("args")
            .value("sort_index", thread)
            .end_object()
            .end_object();
      }
    }
  }
  for (const auto& event : simulation.events) {
    std::string name = short_name(event.kind);
    if (event.microbatch >= 0) name += ' ' + std::to_string(event.microbatch);
    if (event.chunk > 0) name += '.' + std::to_string(event.chunk);
    json.begin_object()
        .value("ph", "X")
        .value("name", name)
        .value("cat", style_of(event.kind).css_class)
        .value("pid", event.dp_replica)
        .value("tid", 2 * event.stage + (on_compute_lane(event.kind) ? 0 : 1))
        .value("ts", event.start_seconds / units::microsecond)
        .value("dur", (event.end_seconds - event.start_seconds) / units::microsecond)
        .begin_object("args")
        .value("microbatch", event.microbatch)
        .value("chunk", event.chunk)
        .end_object()
        .end_object();
  }
  json.end_array();
  json.end_object();
  return json.str() + "\n";
}

}  // namespace pipette::cli
