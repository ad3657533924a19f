#include "pipette/core/simulator.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

#include "performance_internal.hpp"

namespace pipette {

namespace {

// Megatron-core's schedule table: groups of `group_size` micro-batches walk through every chunk
// before the next group starts; the last group takes whatever micro-batches are left.
std::vector<ScheduledOp> forward_order(int num_microbatches, int virtual_stages, int group_size) {
  std::vector<ScheduledOp> order;
  order.reserve(static_cast<size_t>(num_microbatches) * virtual_stages);
  for (int group_start = 0; group_start < num_microbatches; group_start += group_size) {
    const int group_end = std::min(group_start + group_size, num_microbatches);
    for (int chunk = 0; chunk < virtual_stages; ++chunk) {
      for (int microbatch = group_start; microbatch < group_end; ++microbatch) {
        order.push_back({false, microbatch, chunk});
      }
    }
  }
  return order;
}

void require(bool condition, const std::string& what) {
  if (!condition) throw std::invalid_argument("simulate_schedule: " + what);
}

void check_inputs(const ParallelConfig& config, const WorkProfile& work, const CommunicationTimes& communication) {
  const auto pp = static_cast<size_t>(config.pp);
  const auto dp = static_cast<size_t>(config.dp_cp());  // one pipeline per lane
  require(config.pp >= 1 && config.dp >= 1 && config.virtual_stages >= 1, "pp, dp and virtual_stages must be positive");
  require(work.num_microbatches >= 1, "the work profile has no micro-batches");
  require(work.stages.size() == pp, "work profile has " + std::to_string(work.stages.size()) + " stages, pp is " +
                                        std::to_string(config.pp));
  require(communication.p2p_seconds.size() == pp - 1, "p2p_seconds must have pp - 1 rows");
  for (const auto& row : communication.p2p_seconds) require(row.size() == dp, "p2p_seconds rows must have dp entries");
  require(communication.tp_seconds.size() == pp, "tp_seconds must have pp rows");
  for (const auto& row : communication.tp_seconds) require(row.size() == dp, "tp_seconds rows must have dp entries");
  require(communication.dp_seconds.size() == pp, "dp_seconds must have pp entries");
  require(communication.tied_embedding_seconds <= 0 ||
              (work.tied_embedding_head_stage > 0 && work.tied_embedding_head_stage < config.pp),
          "a tied embedding's all-reduce needs the output layer's stage, after the first");
  if (effective_virtual_stages(config) > 1) {
    require(work.pipeline_schedule == PipelineSchedule::one_forward_one_backward,
            "all forward, all backward has no interleaved form (vpp must be 1)");
    require(!work.boundary_exchange.blocks_both_ranks, "a blocking boundary exchange has no interleaved form (vpp must be 1)");
    require(work.num_microbatches >= config.pp, "the interleaved schedule needs at least pp micro-batches (Megatron "
                                                "rejects fewer)");
    require(communication.wraparound_p2p_seconds.size() == dp,
            "the interleaved schedule needs wraparound_p2p_seconds for every replica");
  }
}

constexpr double kUnknown = -1.0;  // an arrival time not yet known (real times are >= 0)

// One DP replica's pipeline. Each directed link has a single sender whose messages become ready
// in its program order, so per-link FIFO equals program order and the simulation can advance
// each rank as far as its inputs are known (a worklist), with no global event queue.
class ReplicaSimulation {
 public:
  ReplicaSimulation(const ParallelConfig& config, const WorkProfile& work, const CommunicationTimes& communication,
                    const TrainingSpec& training, int replica, std::vector<ScheduleEvent>* events)
      : pp_(config.pp),
        chunks_(effective_virtual_stages(config)),
        microbatches_(work.num_microbatches),
        replica_(replica),
        events_(events),
        rank_free_seconds_(pp_, 0.0),
        next_op_(pp_, 0),
        link_free_seconds_(static_cast<size_t>(pp_) * pp_, 0.0),
        activation_arrival_(slots(), kUnknown),
        gradient_arrival_(slots(), kUnknown),
        last_backward_start_(static_cast<size_t>(pp_) * chunks_, 0.0),
        last_backward_end_(static_cast<size_t>(pp_) * chunks_, 0.0) {
    // Each rank's chunk passes (compute with its exposed TP, MoE all-to-all and cp ring shares) and
    // the links, as critical_path takes them.
    detail::fill_replica_pipeline(config, work, communication, replica, true, true, pipe_);
    for (int rank = 0; rank < pp_; ++rank) {
      programs_.push_back(pipeline_rank_program(pp_, rank, microbatches_, chunks_, work.pipeline_schedule));
      parameter_gather_seconds_.push_back(parameter_gather_share(config, training) * communication.dp_seconds[rank]);
    }
  }

  void run() {
    std::vector<int> worklist(pp_);
    for (int rank = 0; rank < pp_; ++rank) worklist[rank] = pp_ - 1 - rank;
    while (!worklist.empty()) {
      const int rank = worklist.back();
      worklist.pop_back();
      advance(rank, worklist);
    }
    for (int rank = 0; rank < pp_; ++rank) {
      if (next_op_[rank] != programs_[rank].size()) {
        throw std::logic_error("simulate_schedule: the schedule deadlocked at pipeline rank " + std::to_string(rank));
      }
    }
  }

  double finish_seconds(int rank) const { return rank_free_seconds_[rank]; }
  double last_backward_start(int rank, int chunk) const { return last_backward_start_[rank * chunks_ + chunk]; }
  double last_backward_end(int rank, int chunk) const { return last_backward_end_[rank * chunks_ + chunk]; }

 private:
  size_t slots() const { return static_cast<size_t>(pp_) * chunks_ * microbatches_; }
  size_t slot(int rank, int chunk, int microbatch) const {
    return (static_cast<size_t>(rank) * chunks_ + chunk) * microbatches_ + microbatch;
  }
  int virtual_stage(int rank, int chunk) const { return chunk * pp_ + rank; }
  int last_virtual_stage() const { return pp_ * chunks_ - 1; }

  // When the op's input is available, or kUnknown.
  double input_ready(int rank, const ScheduledOp& op) const {
    const int stage = virtual_stage(rank, op.chunk);
    if (!op.backward) return stage == 0 ? 0.0 : activation_arrival_[slot(rank, op.chunk, op.microbatch)];
    // The last virtual stage starts backward from its own loss; its forward ran earlier on this rank.
    return stage == last_virtual_stage() ? 0.0 : gradient_arrival_[slot(rank, op.chunk, op.microbatch)];
  }

  void send(EventKind kind, int from_rank, int from_chunk, int microbatch, double ready_seconds, int to_rank,
            double seconds, std::vector<double>& arrivals, size_t arrival_slot) {
    double& link_free = link_free_seconds_[static_cast<size_t>(from_rank) * pp_ + to_rank];
    const double start = std::max(ready_seconds, link_free);
    link_free = start + seconds;
    if (events_ != nullptr) events_->push_back({kind, from_rank, replica_, microbatch, from_chunk, start, link_free});
    arrivals[arrival_slot] = link_free;
  }

  void advance(int rank, std::vector<int>& worklist) {
    const auto& program = programs_[rank];
    while (next_op_[rank] < program.size()) {
      const ScheduledOp& op = program[next_op_[rank]];
      const double ready = input_ready(rank, op);
      if (ready == kUnknown) return;
      const double start = std::max(rank_free_seconds_[rank], ready);
      double end = start + (op.backward ? pipe_.backward[rank] : pipe_.forward[rank]);
      if (!op.backward && op.microbatch == 0) {
        end = std::max(end, (op.chunk + 1) * parameter_gather_seconds_[rank] / chunks_);
      }
      rank_free_seconds_[rank] = end;
      if (events_ != nullptr) {
        events_->push_back({op.backward ? EventKind::backward : EventKind::forward, rank, replica_, op.microbatch,
                            op.chunk, start, end});
      }
      ++next_op_[rank];

      const int stage = virtual_stage(rank, op.chunk);
      if (op.backward) {
        last_backward_start_[rank * chunks_ + op.chunk] = start;
        last_backward_end_[rank * chunks_ + op.chunk] = end;
        if (stage > 0) {
          const int to_rank = (stage - 1) % pp_;
          const int to_chunk = (stage - 1) / pp_;
          const bool wraps = to_chunk != op.chunk;
          const double seconds = wraps ? pipe_.wraparound : pipe_.link[to_rank];
          send(EventKind::send_gradient, rank, op.chunk, op.microbatch, end, to_rank, seconds, gradient_arrival_,
               slot(to_rank, to_chunk, op.microbatch));
          if (to_rank != rank) worklist.push_back(to_rank);
        }
      } else if (stage < last_virtual_stage()) {
        const int to_rank = (stage + 1) % pp_;
        const int to_chunk = (stage + 1) / pp_;
        const bool wraps = to_chunk != op.chunk;
        const double seconds = wraps ? pipe_.wraparound : pipe_.link[rank];
        send(EventKind::send_activation, rank, op.chunk, op.microbatch, end, to_rank, seconds, activation_arrival_,
             slot(to_rank, to_chunk, op.microbatch));
        if (to_rank != rank) worklist.push_back(to_rank);
      }
    }
  }

  int pp_;
  int chunks_;
  int microbatches_;
  int replica_;
  std::vector<ScheduleEvent>* events_;  // nullptr: nothing recorded
  detail::ReplicaPipeline pipe_;         // per-chunk forward and backward of each rank, the links
  std::vector<double> parameter_gather_seconds_;  // of the rank's stage, from the iteration's start
  std::vector<std::vector<ScheduledOp>> programs_;
  std::vector<double> rank_free_seconds_;
  std::vector<size_t> next_op_;
  std::vector<double> link_free_seconds_;  // [from * pp + to]
  std::vector<double> activation_arrival_;
  std::vector<double> gradient_arrival_;
  std::vector<double> last_backward_start_;  // [rank * chunks + chunk]
  std::vector<double> last_backward_end_;
};

}  // namespace

int effective_virtual_stages(const ParallelConfig& config) { return config.pp > 1 ? config.virtual_stages : 1; }

double parameter_all_gather_share(const TrainingSpec& training) {
  const bool fp32 = training.precision == Precision::fp32;
  const bool fp8_weights = training.precision == Precision::fp8 && training.fp8_parameters;
  const double parameter_bytes = fp32 ? 4.0 : fp8_weights ? 1.0 : 2.0;
  const double gradient_bytes = fp32 || training.gradients_in_fp32 ? 4.0 : 2.0;
  return 0.5 * parameter_bytes / gradient_bytes;
}

namespace {

bool sharded_over_replicas(const ParallelConfig& config, const TrainingSpec& training,
                           ShardedOptimizerCollectives collectives) {
  return config.distributed_optimizer && config.dp_cp() > 1 && training.sharded_optimizer == collectives;
}

}  // namespace

double parameter_gather_share(const ParallelConfig& config, const TrainingSpec& training) {
  if (!sharded_over_replicas(config, training, ShardedOptimizerCollectives::reduce_scatter_and_overlapped_gather) ||
      !training.overlap_gradient_reduce)
    return 0.0;
  return parameter_all_gather_share(training);
}

double parameter_gather_after_step_share(const ParallelConfig& config, const TrainingSpec& training) {
  if (!sharded_over_replicas(config, training, ShardedOptimizerCollectives::all_reduce_and_gather_after_step)) return 0.0;
  return parameter_all_gather_share(training);
}

bool gradient_reduction_overlapped(const ParallelConfig& config, const TrainingSpec& training) {
  return training.overlap_gradient_reduce &&
         !sharded_over_replicas(config, training, ShardedOptimizerCollectives::all_reduce_and_gather_after_step);
}

double overlapped_reduction_end(double start, double seconds, double backward_end, const StageWork& stage, int chunk,
                                int chunks) {
  const double tail =
      (chunk == 0 ? stage.first_chunk_gradient_tail_share : stage.later_chunk_gradient_tail_share) * seconds;
  const double beside_backward = std::min(seconds - tail, stage.backward_compute_seconds / chunks);
  return std::max(start + seconds, backward_end + stage.overlapped_compute_slowdown * beside_backward + tail);
}

double gradient_reduction_share(const ParallelConfig& config, const TrainingSpec& training) {
  if (config.fully_sharded) return 0.0;  // reduce-scattered with each micro-batch (exposed_fsdp_seconds)
  return parameter_gather_share(config, training) > 0 ? 0.5 : 1.0;
}

int interleaved_group_size(int pp, int num_microbatches) {
  for (int group_size = pp; group_size <= num_microbatches; ++group_size) {
    const int remainder = num_microbatches % group_size;
    if (remainder == 0 || remainder >= pp) return group_size;
  }
  return 0;
}

std::vector<ScheduledOp> pipeline_rank_program(int pp, int rank, int num_microbatches, int virtual_stages,
                                               PipelineSchedule schedule) {
  const int chunks = pp > 1 ? virtual_stages : 1;
  if (schedule == PipelineSchedule::all_forward_all_backward && chunks > 1) {
    throw std::invalid_argument("pipeline_rank_program: all forward, all backward has no interleaved form");
  }
  const int total = num_microbatches * chunks;
  const int group_size = chunks == 1 ? num_microbatches : interleaved_group_size(pp, num_microbatches);
  if (group_size == 0) {
    throw std::invalid_argument("pipeline_rank_program: the interleaved schedule needs at least pp micro-batches");
  }
  // All forward, all backward is a warm-up of every forward.
  const int warmup = schedule == PipelineSchedule::all_forward_all_backward ? total
                     : chunks == 1 ? std::min(pp - rank - 1, num_microbatches)
                                   : std::min(2 * (pp - rank - 1) + (chunks - 1) * group_size, total);
  const std::vector<ScheduledOp> forwards = forward_order(num_microbatches, chunks, group_size);
  const auto backward_at = [&](int k) {
    ScheduledOp op = forwards[k];
    op.backward = true;
    op.chunk = chunks - 1 - op.chunk;
    return op;
  };

  std::vector<ScheduledOp> program;
  program.reserve(2 * static_cast<size_t>(total));
  for (int k = 0; k < warmup; ++k) program.push_back(forwards[k]);
  for (int k = 0; k < total - warmup; ++k) {
    program.push_back(forwards[warmup + k]);
    program.push_back(backward_at(k));
  }
  for (int k = total - warmup; k < total; ++k) program.push_back(backward_at(k));
  return program;
}

namespace {

// The simulation; records every event into `events` unless it is nullptr. Returns the iteration time.
double simulate(const ParallelConfig& config, const WorkProfile& work, const CommunicationTimes& communication,
                const TrainingSpec& training, std::vector<ScheduleEvent>* events) {
  check_inputs(config, work, communication);
  const int pp = config.pp;
  const int dp = config.dp_cp();  // lanes
  const int chunks = effective_virtual_stages(config);

  std::vector<ReplicaSimulation> replicas;
  replicas.reserve(dp);
  for (int replica = 0; replica < dp; ++replica) {
    replicas.emplace_back(config, work, communication, training, replica, events);
    replicas.back().run();
  }

  const auto emit_for_every_replica = [&](EventKind kind, int stage, int chunk, double start, double end) {
    if (events == nullptr) return;
    for (int replica = 0; replica < dp; ++replica) events->push_back({kind, stage, replica, -1, chunk, start, end});
  };

  // Each stage's gradients are reduced across replicas; the step waits for every stage.
  double reductions_done_seconds = 0;
  double embedding_stages_done_seconds = 0;  // the later of the first stage's and the output layer's
  for (int stage = 0; stage < pp; ++stage) {
    const double reduction_seconds = gradient_reduction_share(config, training) * communication.dp_seconds[stage];
    double stage_done = 0;
    for (const auto& replica : replicas) stage_done = std::max(stage_done, replica.finish_seconds(stage));
    const double fsdp_seconds = work.num_microbatches * exposed_fsdp_seconds(work.stages[stage], communication.dp_seconds[stage]);
    if (fsdp_seconds > 0) {
      emit_for_every_replica(EventKind::dp_reduce, stage, 0, stage_done, stage_done + fsdp_seconds);
      stage_done += fsdp_seconds;
    }
    if (reduction_seconds > 0 && !gradient_reduction_overlapped(config, training)) {
      emit_for_every_replica(EventKind::dp_reduce, stage, 0, stage_done, stage_done + reduction_seconds);
      stage_done += reduction_seconds;
    } else if (reduction_seconds > 0) {
      // Chunks finish their last backward in the order v−1, ..., 0 (the backward walks chunks down).
      double stream_free = 0;
      for (int chunk = chunks - 1; chunk >= 0; --chunk) {
        double available = 0;
        double backward_end = 0;
        for (const auto& replica : replicas) {
          available = std::max(available, replica.last_backward_start(stage, chunk));
          backward_end = std::max(backward_end, replica.last_backward_end(stage, chunk));
        }
        const double start = std::max(available, stream_free);
        stream_free = overlapped_reduction_end(start, reduction_seconds / chunks, backward_end, work.stages[stage], chunk, chunks);
        emit_for_every_replica(EventKind::dp_reduce, stage, chunk, start, stream_free);
      }
      stage_done = std::max(stage_done, stream_free);
    }
    reductions_done_seconds = std::max(reductions_done_seconds, stage_done);
    if (stage == 0 || stage == work.tied_embedding_head_stage)
      embedding_stages_done_seconds = std::max(embedding_stages_done_seconds, stage_done);
  }
  if (communication.tied_embedding_seconds > 0) {
    const double end = embedding_stages_done_seconds + communication.tied_embedding_seconds;
    for (const int stage : {0, work.tied_embedding_head_stage})
      emit_for_every_replica(EventKind::embedding_reduce, stage, 0, embedding_stages_done_seconds, end);
    reductions_done_seconds = std::max(reductions_done_seconds, end);
  }

  double iteration_seconds = reductions_done_seconds;
  for (int stage = 0; stage < pp; ++stage) {
    const double optimizer_seconds = work.stages[stage].optimizer_seconds;
    const double gather_seconds = parameter_gather_after_step_share(config, training) * communication.dp_seconds[stage];
    if (optimizer_seconds > 0) {
      emit_for_every_replica(EventKind::optimizer, stage, 0, reductions_done_seconds,
                             reductions_done_seconds + optimizer_seconds);
    }
    if (gather_seconds > 0) {
      emit_for_every_replica(EventKind::dp_gather, stage, 0, reductions_done_seconds + optimizer_seconds,
                             reductions_done_seconds + optimizer_seconds + gather_seconds);
    }
    iteration_seconds = std::max(iteration_seconds, reductions_done_seconds + optimizer_seconds + gather_seconds);
  }
  return iteration_seconds;
}

}  // namespace

SimulationResult simulate_schedule(const ParallelConfig& config, const WorkProfile& work,
                                   const CommunicationTimes& communication, const TrainingSpec& training) {
  SimulationResult result;
  result.iteration_seconds = simulate(config, work, communication, training, &result.events);
  std::stable_sort(result.events.begin(), result.events.end(), [](const ScheduleEvent& a, const ScheduleEvent& b) {
    return std::tie(a.start_seconds, a.stage, a.dp_replica, a.kind, a.microbatch, a.chunk) <
           std::tie(b.start_seconds, b.stage, b.dp_replica, b.kind, b.microbatch, b.chunk);
  });
  return result;
}

double simulated_iteration_seconds(const ParallelConfig& config, const WorkProfile& work,
                                   const CommunicationTimes& communication, const TrainingSpec& training) {
  return simulate(config, work, communication, training, nullptr);
}

}  // namespace pipette
