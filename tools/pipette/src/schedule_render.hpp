#pragma once
#include <string>

#include "pipette/core/simulator.hpp"

namespace pipette::cli {

// The DP replica whose pipeline finishes its compute last (ties: the lowest index).
int slowest_replica(const SimulationResult& simulation);

// A Gantt chart of one DP replica: one row (<g class="stage" data-stage="s">) per pipeline stage,
// forward / backward / optimizer bars on the compute lane, activation / gradient transfers and the
// DP reduction on a thin communication lane beneath, idle time as the row's tinted background.
std::string render_gantt_svg(const SimulationResult& simulation, int pp, int replica, const std::string& title);

// Chrome trace-event JSON (chrome://tracing, https://ui.perfetto.dev): one process per DP replica,
// two threads per stage (compute, communication), complete ("X") events in microseconds.
std::string render_chrome_trace(const SimulationResult& simulation, int pp, int dp, const std::string& title);

}  // namespace pipette::cli
