#pragma once
#include <string>
#include <vector>

#include "pipette/core/performance.hpp"
#include "pipette/core/plan.hpp"

namespace pipette {

enum class EventKind { forward, backward, send_activation, send_gradient, dp_reduce, optimizer };

struct ScheduleEvent {
  EventKind kind = EventKind::forward;
  int stage = 0;           // pipeline rank
  int dp_replica = 0;
  int microbatch = -1;     // -1 for dp_reduce / optimizer
  int chunk = 0;           // virtual stage index on this rank
  double start_seconds = 0;
  double end_seconds = 0;
};

struct SimulationResult {
  double iteration_seconds = 0;
  std::vector<ScheduleEvent> events;  // sorted by (start, stage, dp_replica, kind, microbatch)
};

// Discrete-event simulation of the exact 1F1B / interleaved 1F1B schedule of every DP replica on
// the given communication times, then DP reduction and the optimizer step.
SimulationResult simulate_schedule(const ParallelConfig& config, const WorkProfile& work,
                                   const CommunicationTimes& communication, const TrainingSpec& training);

}  // namespace pipette
