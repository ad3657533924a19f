#include "pipette/core/simulator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace pipette {
namespace {

// A pipeline of `pp` stages whose per-micro-batch forward/backward times are given per stage,
// `dp` identical replicas unless the test edits the communication times.
struct Pipeline {
  ParallelConfig config;
  WorkProfile work;
  CommunicationTimes communication;
  TrainingSpec training;

  Pipeline(std::vector<double> forward_seconds, std::vector<double> backward_seconds, int microbatches,
           double p2p_seconds = 0, int dp = 1, int virtual_stages = 1) {
    const int pp = static_cast<int>(forward_seconds.size());
    config.pp = pp;
    config.dp = dp;
    config.virtual_stages = virtual_stages;
    work.num_microbatches = microbatches;
    work.virtual_stages = virtual_stages;
    for (int s = 0; s < pp; ++s) {
      StageWork stage;
      stage.forward_compute_seconds = forward_seconds[s];
      stage.backward_compute_seconds = backward_seconds[s];
      work.stages.push_back(stage);
    }
    communication.p2p_seconds.assign(pp - 1, std::vector<double>(dp, p2p_seconds));
    communication.tp_seconds.assign(pp, std::vector<double>(dp, 0.0));
    communication.dp_seconds.assign(pp, 0.0);
    if (virtual_stages > 1) communication.wraparound_p2p_seconds.assign(dp, p2p_seconds);
    training.overlap_gradient_reduce = false;
  }

  SimulationResult run() const { return simulate_schedule(config, work, communication, training); }
};

using Interval = std::tuple<EventKind, int, int, double, double>;  // kind, microbatch, chunk, start, end

std::vector<Interval> timeline(const SimulationResult& result, int stage, int replica, std::set<EventKind> kinds) {
  std::vector<Interval> intervals;
  for (const auto& event : result.events) {
    if (event.stage == stage && event.dp_replica == replica && kinds.count(event.kind)) {
      intervals.emplace_back(event.kind, event.microbatch, event.chunk, event.start_seconds, event.end_seconds);
    }
  }
  return intervals;
}

const std::set<EventKind> kCompute = {EventKind::forward, EventKind::backward};
constexpr EventKind F = EventKind::forward;
constexpr EventKind B = EventKind::backward;

void expect_timeline(const std::vector<Interval>& actual, const std::vector<Interval>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(std::get<0>(actual[i]), std::get<0>(expected[i])) << "op " << i;
    EXPECT_EQ(std::get<1>(actual[i]), std::get<1>(expected[i])) << "op " << i;
    EXPECT_EQ(std::get<2>(actual[i]), std::get<2>(expected[i])) << "op " << i;
    EXPECT_DOUBLE_EQ(std::get<3>(actual[i]), std::get<3>(expected[i])) << "op " << i;
    EXPECT_DOUBLE_EQ(std::get<4>(actual[i]), std::get<4>(expected[i])) << "op " << i;
  }
}

TEST(PipelineProgram, OneFOneBWarmupSteadyCooldown) {
  // Stage 0 of 4 with 6 micro-batches: 3 warm-up forwards, 3 pairs, 3 cool-down backwards.
  const auto program = pipeline_rank_program(4, 0, 6, 1);
  const std::vector<std::pair<bool, int>> expected = {{false, 0}, {false, 1}, {false, 2}, {false, 3}, {true, 0},
                                                      {false, 4}, {true, 1},  {false, 5}, {true, 2},  {true, 3},
                                                      {true, 4},  {true, 5}};
  ASSERT_EQ(program.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(program[i].backward, expected[i].first) << i;
    EXPECT_EQ(program[i].microbatch, expected[i].second) << i;
  }
  // The last stage has no warm-up; with fewer micro-batches than stages warm-up is capped at m.
  EXPECT_FALSE(pipeline_rank_program(4, 3, 6, 1)[0].backward);
  EXPECT_TRUE(pipeline_rank_program(4, 3, 6, 1)[1].backward);
  const auto short_program = pipeline_rank_program(4, 0, 2, 1);
  EXPECT_FALSE(short_program[1].backward);
  EXPECT_TRUE(short_program[2].backward);
}

TEST(PipelineProgram, EveryOpExactlyOnceForAnyShape) {
  for (int pp = 1; pp <= 6; ++pp) {
    for (int chunks = 1; chunks <= 3; ++chunks) {
      for (int m = 1; m <= 13; ++m) {
        if (chunks > 1 && pp > 1 && m < pp) continue;  // no interleaved schedule exists
        for (int rank = 0; rank < pp; ++rank) {
          const auto program = pipeline_rank_program(pp, rank, m, chunks);
          const int effective_chunks = pp > 1 ? chunks : 1;
          std::set<std::tuple<bool, int, int>> seen;
          for (const auto& op : program) seen.emplace(op.backward, op.microbatch, op.chunk);
          EXPECT_EQ(program.size(), 2u * m * effective_chunks);
          EXPECT_EQ(seen.size(), program.size()) << "pp=" << pp << " v=" << chunks << " m=" << m;
        }
      }
    }
  }
}

TEST(Simulator, TwoStagesThreeMicrobatchesEqualStagesFreeLinks) {
  // Hand-computed: F = 1, B = 2; the classic (m + p − 1)(F + B) = 12.
  const Pipeline pipeline({1, 1}, {2, 2}, 3);
  const auto result = pipeline.run();
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 12.0);
  expect_timeline(timeline(result, 0, 0, kCompute),
                  {{F, 0, 0, 0, 1}, {F, 1, 0, 1, 2}, {B, 0, 0, 4, 6}, {F, 2, 0, 6, 7}, {B, 1, 0, 7, 9}, {B, 2, 0, 10, 12}});
  expect_timeline(timeline(result, 1, 0, kCompute),
                  {{F, 0, 0, 1, 2}, {B, 0, 0, 2, 4}, {F, 1, 0, 4, 5}, {B, 1, 0, 5, 7}, {F, 2, 0, 7, 8}, {B, 2, 0, 8, 10}});
}

// nanotron's afab (parallel/pipeline_parallel/engine.py @2411b022 l.198-230): every forward, then
// the backwards in the order of their forwards.
TEST(PipelineProgram, AllForwardAllBackwardRunsEveryForwardFirst) {
  const auto program = pipeline_rank_program(3, 1, 4, 1, PipelineSchedule::all_forward_all_backward);
  ASSERT_EQ(program.size(), 8u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_FALSE(program[static_cast<size_t>(k)].backward);
    EXPECT_EQ(program[static_cast<size_t>(k)].microbatch, k);
    EXPECT_TRUE(program[static_cast<size_t>(4 + k)].backward);
    EXPECT_EQ(program[static_cast<size_t>(4 + k)].microbatch, k);
  }
  EXPECT_THROW(pipeline_rank_program(2, 0, 4, 2, PipelineSchedule::all_forward_all_backward), std::invalid_argument);
}

// Equal stages: the textbook (m + p − 1)(F + B), as 1F1B; the backwards start on the last rank after
// its last forward. Uneven stages with links: two flow shops, the ranks and links their machines,
// Σf + Σb + 2Σc + (m − 1)(max f + max b) = 4 + 6 + 1 + 4·(3 + 4) = 39 against 1F1B's 33 (its pace is
// the round trip's (5 + 5 + 2·0.5)/2 = 5.5 per micro-batch, not 3 + 4); the closed form prices both
// as the simulation runs them.
TEST(Simulator, AllForwardAllBackwardIsTwoFlowShops) {
  Pipeline equal({1, 1}, {2, 2}, 3);
  equal.work.pipeline_schedule = PipelineSchedule::all_forward_all_backward;
  const auto result = equal.run();
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 12.0);
  expect_timeline(timeline(result, 1, 0, kCompute),
                  {{F, 0, 0, 1, 2}, {F, 1, 0, 2, 3}, {F, 2, 0, 3, 4}, {B, 0, 0, 4, 6}, {B, 1, 0, 6, 8}, {B, 2, 0, 8, 10}});
  EXPECT_DOUBLE_EQ(critical_path(equal.config, equal.work, equal.communication, equal.training).iteration_seconds, 12.0);

  Pipeline uneven({1, 3}, {4, 2}, 5, 0.5);
  EXPECT_DOUBLE_EQ(uneven.run().iteration_seconds, 33.0);
  uneven.work.pipeline_schedule = PipelineSchedule::all_forward_all_backward;
  EXPECT_DOUBLE_EQ(uneven.run().iteration_seconds, 39.0);
  EXPECT_DOUBLE_EQ(critical_path(uneven.config, uneven.work, uneven.communication, uneven.training).iteration_seconds, 39.0);
}

// nanotron's blocking exchange (StackProfile::pipeline_exchange): both ranks of a boundary wait for
// it, the receiver before its forward and the sender before its backward, so it lengthens their
// ops and no link overlaps it. Two stages F 1, B 2, m 3, exchange 0.5: stage 0 runs F, then
// 0.5 + B for each micro-batch; stage 1 0.5 + F, then B. With the second stage the slower one
// (F 2, B 4), a link that only delays the receiver hides behind it (22 s); the blocking exchange
// lengthens every one of its forwards (23 s).
TEST(Simulator, ABlockingExchangeLengthensBothRanksOps) {
  Pipeline pipeline({1, 1}, {2, 2}, 3, 0.5);
  pipeline.work.boundary_exchange.blocks_both_ranks = true;
  const auto result = pipeline.run();
  // Stage 0's backwards and stage 1's forwards take 0.5 s more; nothing waits on a link.
  expect_timeline(timeline(result, 0, 0, kCompute),
                  {{F, 0, 0, 0, 1}, {F, 1, 0, 1, 2}, {B, 0, 0, 4.5, 7}, {F, 2, 0, 7, 8}, {B, 1, 0, 8, 10.5}, {B, 2, 0, 11.5, 14}});
  expect_timeline(timeline(result, 1, 0, kCompute),
                  {{F, 0, 0, 1, 2.5}, {B, 0, 0, 2.5, 4.5}, {F, 1, 0, 4.5, 6}, {B, 1, 0, 6, 8}, {F, 2, 0, 8, 9.5}, {B, 2, 0, 9.5, 11.5}});
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 14.0);
  EXPECT_NEAR(critical_path(pipeline.config, pipeline.work, pipeline.communication, pipeline.training).iteration_seconds,
              14.0, 0.03 * 14.0);

  Pipeline slower_second({1, 2}, {2, 4}, 3, 0.5);
  EXPECT_DOUBLE_EQ(slower_second.run().iteration_seconds, 22.0);
  slower_second.work.boundary_exchange.blocks_both_ranks = true;
  EXPECT_DOUBLE_EQ(slower_second.run().iteration_seconds, 23.0);
  EXPECT_NEAR(critical_path(slower_second.config, slower_second.work, slower_second.communication, slower_second.training)
                  .iteration_seconds,
              23.0, 0.03 * 23.0);
}

TEST(Simulator, TwoStagesThreeMicrobatchesWithLinkLatency) {
  // p2p = 0.5: stage 0 waits for each round trip; critical path 1+.5+1+2+.5+2+1+.5+1+2+.5+2 = 14.
  const Pipeline pipeline({1, 1}, {2, 2}, 3, 0.5);
  const auto result = pipeline.run();
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 14.0);
  expect_timeline(timeline(result, 0, 0, kCompute), {{F, 0, 0, 0, 1},
                                                      {F, 1, 0, 1, 2},
                                                      {B, 0, 0, 5, 7},
                                                      {F, 2, 0, 7, 8},
                                                      {B, 1, 0, 8, 10},
                                                      {B, 2, 0, 12, 14}});
  expect_timeline(timeline(result, 1, 0, kCompute), {{F, 0, 0, 1.5, 2.5},
                                                      {B, 0, 0, 2.5, 4.5},
                                                      {F, 1, 0, 4.5, 5.5},
                                                      {B, 1, 0, 5.5, 7.5},
                                                      {F, 2, 0, 8.5, 9.5},
                                                      {B, 2, 0, 9.5, 11.5}});
  const auto EA = EventKind::send_activation;
  const auto EG = EventKind::send_gradient;
  expect_timeline(timeline(result, 0, 0, {EA}), {{EA, 0, 0, 1, 1.5}, {EA, 1, 0, 2, 2.5}, {EA, 2, 0, 8, 8.5}});
  expect_timeline(timeline(result, 1, 0, {EG}), {{EG, 0, 0, 4.5, 5}, {EG, 1, 0, 7.5, 8}, {EG, 2, 0, 11.5, 12}});
}

TEST(Simulator, ALinkCarriesOneMessageAtATimePerDirection) {
  // p2p = 1.5 > F: activation 1 is ready at 2 but the link is busy with activation 0 until 2.5.
  const Pipeline pipeline({1, 1}, {2, 2}, 3, 1.5);
  const auto result = pipeline.run();
  const auto EA = EventKind::send_activation;
  expect_timeline(timeline(result, 0, 0, {EA}), {{EA, 0, 0, 1, 2.5}, {EA, 1, 0, 2.5, 4}, {EA, 2, 0, 10, 11.5}});
  expect_timeline(timeline(result, 1, 0, kCompute), {{F, 0, 0, 2.5, 3.5},
                                                      {B, 0, 0, 3.5, 5.5},
                                                      {F, 1, 0, 5.5, 6.5},
                                                      {B, 1, 0, 6.5, 8.5},
                                                      {F, 2, 0, 11.5, 12.5},
                                                      {B, 2, 0, 12.5, 14.5}});
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 18.0);
}

TEST(Simulator, UnevenStagesSlowestStageSetsTheSteadyState) {
  // Stage 1 twice as slow: F0 F1 on stage 0, stage 1 runs F0 B0 F1 B1 back to back from t=1.
  const Pipeline pipeline({1, 2}, {2, 4}, 2);
  const auto result = pipeline.run();
  expect_timeline(timeline(result, 0, 0, kCompute), {{F, 0, 0, 0, 1}, {F, 1, 0, 1, 2}, {B, 0, 0, 7, 9}, {B, 1, 0, 13, 15}});
  expect_timeline(timeline(result, 1, 0, kCompute), {{F, 0, 0, 1, 3}, {B, 0, 0, 3, 7}, {F, 1, 0, 7, 9}, {B, 1, 0, 9, 13}});
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 15.0);
}

TEST(PipelineProgram, InterleavedGroupSizeFollowsMegatronCore) {
  EXPECT_EQ(interleaved_group_size(4, 8), 4);
  EXPECT_EQ(interleaved_group_size(4, 5), 5);  // a last group of 1 < p is rejected by Megatron-core
  EXPECT_EQ(interleaved_group_size(3, 7), 4);  // 7 = 4 + 3, the last group has p micro-batches
  EXPECT_EQ(interleaved_group_size(4, 9), 5);
  EXPECT_EQ(interleaved_group_size(2, 3), 3);
  EXPECT_EQ(interleaved_group_size(4, 3), 0);
  EXPECT_THROW(pipeline_rank_program(4, 0, 3, 2), std::invalid_argument);
}

TEST(Simulator, InterleavedWithMicrobatchesNotAMultipleOfStages) {
  // p = 2, v = 2, m = 3: group size 3, forward order (0,c0)(1,c0)(2,c0)(0,c1)(1,c1)(2,c1);
  // warm-up 5 forwards on rank 0, 3 on rank 1. Per chunk F = 1, B = 2, free links.
  const Pipeline pipeline({2, 2}, {4, 4}, 3, 0.0, 1, 2);
  const auto result = pipeline.run();
  expect_timeline(timeline(result, 0, 0, kCompute), {{F, 0, 0, 0, 1},
                                                      {F, 1, 0, 1, 2},
                                                      {F, 2, 0, 2, 3},
                                                      {F, 0, 1, 3, 4},
                                                      {F, 1, 1, 4, 5},
                                                      {F, 2, 1, 5, 6},
                                                      {B, 0, 1, 7, 9},
                                                      {B, 1, 1, 10, 12},
                                                      {B, 2, 1, 13, 15},
                                                      {B, 0, 0, 15, 17},
                                                      {B, 1, 0, 17, 19},
                                                      {B, 2, 0, 19, 21}});
  expect_timeline(timeline(result, 1, 0, kCompute), {{F, 0, 0, 1, 2},
                                                      {F, 1, 0, 2, 3},
                                                      {F, 2, 0, 3, 4},
                                                      {F, 0, 1, 4, 5},
                                                      {B, 0, 1, 5, 7},
                                                      {F, 1, 1, 7, 8},
                                                      {B, 1, 1, 8, 10},
                                                      {F, 2, 1, 10, 11},
                                                      {B, 2, 1, 11, 13},
                                                      {B, 0, 0, 13, 15},
                                                      {B, 1, 0, 15, 17},
                                                      {B, 2, 0, 17, 19}});
  // (m·v + p − 1)(F + B) per chunk, as when p divides m.
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 21.0);
}

TEST(Simulator, InterleavedUsesTheWraparoundLink) {
  // p = 2, v = 2, m = 2: slow wrap-around hop (stage 1 → stage 0 for the next chunk) only.
  Pipeline fast({2, 2}, {4, 4}, 2, 0.0, 1, 2);
  Pipeline slow = fast;
  slow.communication.wraparound_p2p_seconds = {5.0};
  const auto fast_result = fast.run();
  const auto slow_result = slow.run();
  EXPECT_GT(slow_result.iteration_seconds, fast_result.iteration_seconds + 5.0);
  for (const auto& event : slow_result.events) {
    // Rank 1 chunk 0 → rank 0 chunk 1 activations and rank 0 chunk 1 → rank 1 chunk 0 gradients wrap.
    const bool wraps = (event.kind == EventKind::send_activation && event.stage == 1 && event.chunk == 0) ||
                       (event.kind == EventKind::send_gradient && event.stage == 0 && event.chunk == 1);
    if (event.kind == EventKind::send_activation || event.kind == EventKind::send_gradient) {
      EXPECT_DOUBLE_EQ(event.end_seconds - event.start_seconds, wraps ? 5.0 : 0.0);
    }
  }
}

TEST(Simulator, FreeLinksEqualStagesMatchTheTextbookFormulas) {
  // 1F1B: (m + p − 1)(F + B). Interleaved, any m ≥ p: (m + (p − 1)/v)(F + B) (Narayanan
  // et al. 2021, §2.2.2).
  for (int pp = 1; pp <= 5; ++pp) {
    for (int m = 1; m <= 12; ++m) {
      const Pipeline pipeline(std::vector<double>(pp, 1.0), std::vector<double>(pp, 2.0), m);
      EXPECT_DOUBLE_EQ(pipeline.run().iteration_seconds, (m + pp - 1) * 3.0) << "pp=" << pp << " m=" << m;
    }
  }
  for (int pp = 2; pp <= 4; ++pp) {
    for (int chunks = 2; chunks <= 4; ++chunks) {
      for (int m = pp; m <= 4 * pp; ++m) {
        const Pipeline pipeline(std::vector<double>(pp, 1.0 * chunks), std::vector<double>(pp, 2.0 * chunks), m, 0.0,
                                1, chunks);
        EXPECT_NEAR(pipeline.run().iteration_seconds, (m * chunks + pp - 1) * 3.0, 1e-9)
            << "pp=" << pp << " v=" << chunks << " m=" << m;
      }
    }
  }
}

TEST(Simulator, NeverDeadlocksAndRunsEveryOpOnce) {
  for (int pp = 1; pp <= 5; ++pp) {
    for (int chunks = 1; chunks <= 3; ++chunks) {
      for (int m = 1; m <= 11; ++m) {
        if (chunks > 1 && pp > 1 && m < pp) continue;  // rejected, see RejectsInputsSizedForAnotherPlan
        const Pipeline pipeline(std::vector<double>(pp, 1.0), std::vector<double>(pp, 2.0), m, 0.25, 2, chunks);
        SimulationResult result;
        ASSERT_NO_THROW(result = pipeline.run()) << "pp=" << pp << " v=" << chunks << " m=" << m;
        const int effective_chunks = pp > 1 ? chunks : 1;
        const auto computes = std::count_if(result.events.begin(), result.events.end(), [](const ScheduleEvent& e) {
          return e.kind == EventKind::forward || e.kind == EventKind::backward;
        });
        const auto sends = std::count_if(result.events.begin(), result.events.end(), [](const ScheduleEvent& e) {
          return e.kind == EventKind::send_activation;
        });
        EXPECT_EQ(computes, 2 * 2 * m * pp * effective_chunks);
        EXPECT_EQ(sends, 2 * m * (pp * effective_chunks - 1));
        // The search's event-free variant runs the same simulation.
        EXPECT_EQ(simulated_iteration_seconds(pipeline.config, pipeline.work, pipeline.communication, pipeline.training),
                  result.iteration_seconds);
      }
    }
  }
}

TEST(Simulator, TensorParallelTimeSplitsByForwardPasses) {
  Pipeline pipeline({1}, {2}, 2);
  pipeline.communication.tp_seconds = {{0.6}};
  auto result = pipeline.run();
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 2 * 3.6);
  expect_timeline(timeline(result, 0, 0, kCompute), {{F, 0, 0, 0, 1.3}, {B, 0, 0, 1.3, 3.6}, {F, 1, 0, 3.6, 4.9}, {B, 1, 0, 4.9, 7.2}});
  // Full recompute reruns the forward (and its collectives) inside the backward: profile_work says
  // 1 : 2 through the stage's forward share.
  pipeline.work.stages[0].tp_forward_share = 1.0 / 3;
  result = pipeline.run();
  expect_timeline(timeline(result, 0, 0, kCompute), {{F, 0, 0, 0, 1.2}, {B, 0, 0, 1.2, 3.6}, {F, 1, 0, 3.6, 4.8}, {B, 1, 0, 4.8, 7.2}});
  // Collectives the backward issues beside a GEMM leave its pass, up to the GEMMs' time.
  pipeline.work.stages[0].tp_forward_share = 0.5;
  pipeline.work.stages[0].tp_hideable_share = 0.5;
  pipeline.work.stages[0].tp_overlap_window_seconds = 0.2;
  result = pipeline.run();
  expect_timeline(timeline(result, 0, 0, kCompute), {{F, 0, 0, 0, 1.3}, {B, 0, 0, 1.3, 3.4}, {F, 1, 0, 3.4, 4.7}, {B, 1, 0, 4.7, 6.8}});
  EXPECT_DOUBLE_EQ(critical_path(pipeline.config, pipeline.work, pipeline.communication, pipeline.training).iteration_seconds,
                   result.iteration_seconds);
}

// Two replicas of the p = 2, m = 3 pipeline: replica 0 on free links (ends 12), replica 1 on
// 0.5 s links (ends 14). Stage 0 last backward: [10,12] and [12,14]; stage 1: [8,10] and [9.5,11.5].
Pipeline two_replicas() {
  Pipeline pipeline({1, 1}, {2, 2}, 3, 0.0, 2);
  pipeline.communication.p2p_seconds = {{0.0, 0.5}};
  pipeline.communication.dp_seconds = {3.0, 1.0};
  pipeline.work.stages[0].optimizer_seconds = 0.5;
  pipeline.work.stages[1].optimizer_seconds = 0.25;
  return pipeline;
}

TEST(Simulator, DataParallelReductionAfterTheSlowestReplica) {
  const auto result = two_replicas().run();
  const std::set<EventKind> reduce = {EventKind::dp_reduce};
  for (int replica = 0; replica < 2; ++replica) {
    expect_timeline(timeline(result, 0, replica, reduce), {{EventKind::dp_reduce, -1, 0, 14, 17}});
    expect_timeline(timeline(result, 1, replica, reduce), {{EventKind::dp_reduce, -1, 0, 11.5, 12.5}});
    // The step waits for every stage's reduction (global gradient norm).
    expect_timeline(timeline(result, 1, replica, {EventKind::optimizer}), {{EventKind::optimizer, -1, 0, 17, 17.25}});
  }
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 17.5);
}

// A tied word embedding over pipeline ranks: the first stage and the output layer's stage sum the
// embedding's gradients once both have reduced theirs over DP (Megatron-core's finalize_model_grads
// runs the DP sync, then _allreduce_word_embedding_grads), and the step waits for it. The closed
// form agrees, and attributes the wait to the tied embedding, not to DP.
TEST(Simulator, TiedEmbeddingGradientsAreSummedAfterBothStagesReduced) {
  Pipeline pipeline = two_replicas();
  pipeline.work.tied_embedding_head_stage = 1;
  pipeline.communication.tied_embedding_seconds = 0.75;
  const auto result = pipeline.run();
  for (int replica = 0; replica < 2; ++replica) {
    // Stage 0's reduction ends at 17, stage 1's at 12.5: the sum runs from 17 on both.
    for (int stage = 0; stage < 2; ++stage)
      expect_timeline(timeline(result, stage, replica, {EventKind::embedding_reduce}),
                      {{EventKind::embedding_reduce, -1, 0, 17, 17.75}});
    expect_timeline(timeline(result, 1, replica, {EventKind::optimizer}), {{EventKind::optimizer, -1, 0, 17.75, 18}});
  }
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 18.25);
  const TimeBreakdown time = critical_path(pipeline.config, pipeline.work, pipeline.communication, pipeline.training);
  EXPECT_DOUBLE_EQ(time.iteration_seconds, 18.25);
  EXPECT_DOUBLE_EQ(time.tied_embedding_seconds, 0.75);
  EXPECT_DOUBLE_EQ(time.dp_communication_seconds, 17 - 14);
  // Untied: no such event, the iteration as before.
  pipeline.work.tied_embedding_head_stage = -1;
  pipeline.communication.tied_embedding_seconds = 0;
  const auto untied = pipeline.run();
  EXPECT_TRUE(timeline(untied, 0, 0, {EventKind::embedding_reduce}).empty());
  EXPECT_DOUBLE_EQ(untied.iteration_seconds, 17.5);
}

TEST(Simulator, OverlappedReductionStreamsDuringTheLastBackward) {
  Pipeline pipeline = two_replicas();
  pipeline.training.overlap_gradient_reduce = true;
  const auto result = pipeline.run();
  const std::set<EventKind> reduce = {EventKind::dp_reduce};
  // Stage 0: from the later replica's last-backward start (12) for 3 s; stage 1: 1 s from 9.5 but
  // not before that backward ends (11.5).
  expect_timeline(timeline(result, 0, 1, reduce), {{EventKind::dp_reduce, -1, 0, 12, 15}});
  expect_timeline(timeline(result, 1, 1, reduce), {{EventKind::dp_reduce, -1, 0, 9.5, 11.5}});
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 15.5);
}

// The overlapped reduction starts with the last backward operation, exposed TP included: forward
// 1 s + 1 s TP, backward 2 s + 1 s TP, so the backward runs 2-5 s and a 2.5 s reduction from 2 s
// ends with it (a bucket's reduction cannot end before its last gradient). The closed form starts
// the stream at the same moment; from the backward's compute alone (3 s) it would end at 5.5 s.
TEST(Simulator, OverlappedReductionStartsWithTheBackwardsExposedTensorParallelTime) {
  Pipeline pipeline({1}, {2}, 1, 0, 2);
  pipeline.training.overlap_gradient_reduce = true;
  pipeline.communication.tp_seconds = {{2, 2}};
  pipeline.communication.dp_seconds = {2.5};
  const auto result = pipeline.run();
  expect_timeline(timeline(result, 0, 0, {B}), {{B, 0, 0, 2, 5}});
  expect_timeline(timeline(result, 0, 0, {EventKind::dp_reduce}), {{EventKind::dp_reduce, -1, 0, 2, 5}});
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 5.0);
  EXPECT_DOUBLE_EQ(critical_path(pipeline.config, pipeline.work, pipeline.communication, pipeline.training).iteration_seconds,
                   5.0);
}

// Compute beside an overlapped reduction runs slower (StageWork::overlapped_compute_slowdown;
// Lee et al. 2025 measured 18.9% on average): one stage, forward 0-1 s, its 2 s backward from 1 s.
// A 1.5 s reduction beside it holds it back 0.2 x 1.5 s: 3.3 s. A 4 s one runs past it (1-5 s) and
// sets the end itself. Without overlap the reduction follows the backward, which nothing slows.
// The closed form agrees each time.
TEST(Simulator, ComputeBesideAnOverlappedReductionRunsSlower) {
  Pipeline pipeline({1}, {2}, 1, 0, 2);
  pipeline.training.overlap_gradient_reduce = true;
  pipeline.work.stages[0].overlapped_compute_slowdown = 0.2;
  const auto expect_iteration = [&](double seconds) {
    EXPECT_DOUBLE_EQ(pipeline.run().iteration_seconds, seconds);
    EXPECT_DOUBLE_EQ(critical_path(pipeline.config, pipeline.work, pipeline.communication, pipeline.training).iteration_seconds,
                     seconds);
  };
  pipeline.communication.dp_seconds = {1.5};
  expect_iteration(3.3);
  pipeline.communication.dp_seconds = {4};
  expect_iteration(5.0);
  pipeline.work.stages[0].overlapped_compute_slowdown = 0;
  pipeline.communication.dp_seconds = {1.5};
  expect_iteration(3.0);
  pipeline.work.stages[0].overlapped_compute_slowdown = 0.2;
  pipeline.training.overlap_gradient_reduce = false;
  expect_iteration(4.5);
}

// The last bucket of an overlapped reduction holds the gradients the backward produces last (the
// word embedding's on the first stage): it is reduced after the backward ends. Forward 0-1 s,
// backward 1-3 s, a 1.5 s reduction of which the last bucket is a quarter: the rest (1.125 s) runs
// beside the backward and slows it by 0.2 x 1.125 s, then the last 0.375 s: 3.6 s. A stage that is
// one bucket (Megatron-core's later stages) reduces after its backward, as without overlap. The
// closed form agrees each time.
TEST(Simulator, TheLastGradientBucketIsReducedAfterTheBackward) {
  Pipeline pipeline({1}, {2}, 1, 0, 2);
  pipeline.training.overlap_gradient_reduce = true;
  pipeline.work.stages[0].overlapped_compute_slowdown = 0.2;
  pipeline.communication.dp_seconds = {1.5};
  const auto expect_iteration = [&](double seconds) {
    EXPECT_DOUBLE_EQ(pipeline.run().iteration_seconds, seconds);
    EXPECT_DOUBLE_EQ(critical_path(pipeline.config, pipeline.work, pipeline.communication, pipeline.training).iteration_seconds,
                     seconds);
  };
  pipeline.work.stages[0].first_chunk_gradient_tail_share = 0.25;
  expect_iteration(3.0 + 0.2 * 1.125 + 0.375);
  pipeline.work.stages[0].first_chunk_gradient_tail_share = 1;
  expect_iteration(4.5);
  // A reduction longer than the backward still sets the end itself: 1 + 4 s.
  pipeline.work.stages[0].first_chunk_gradient_tail_share = 0.25;
  pipeline.communication.dp_seconds = {4};
  expect_iteration(5.0);
}

TEST(Simulator, ParameterGatherHoldsBackOnlyTheFirstForward) {
  Pipeline pipeline({1, 1}, {2, 2}, 3, 0, 2);
  pipeline.config.distributed_optimizer = true;
  pipeline.training.overlap_gradient_reduce = true;
  pipeline.communication.dp_seconds = {8, 0};  // fp32 gradients, 16-bit parameters: a 2 s gather
  const auto forwards = timeline(pipeline.run(), 0, 0, {F});
  ASSERT_EQ(forwards.size(), 3u);
  EXPECT_DOUBLE_EQ(std::get<4>(forwards[0]), 2.0);  // micro-batch 0 waits for its parameters
  EXPECT_DOUBLE_EQ(std::get<3>(forwards[1]), 2.0);  // micro-batch 1 runs at once
  EXPECT_DOUBLE_EQ(std::get<4>(forwards[1]), 3.0);
  // fp8 weights are gathered as one byte each (--fp8-param-gather): half the 16-bit gather.
  pipeline.training.precision = Precision::fp8;
  EXPECT_DOUBLE_EQ(parameter_gather_share(pipeline.config, pipeline.training), 0.25);
  pipeline.training.fp8_parameters = true;
  EXPECT_DOUBLE_EQ(parameter_gather_share(pipeline.config, pipeline.training), 0.125);
  EXPECT_DOUBLE_EQ(std::get<4>(timeline(pipeline.run(), 0, 0, {F})[0]), 1.0);
}

// nanotron's and DeepSpeed's ZeRO-1 (stack_profile.cpp cites their code): the gradients are
// all-reduced whole after the last backward even where the stack overlaps its DDP reduction
// otherwise, and each stage's step ends with its parameters' all-gather, a quarter of dp_seconds
// (16-bit parameters, fp32 gradients), before the next iteration. The closed form agrees exactly.
TEST(Simulator, ParameterGatherAfterTheStepEndsTheIteration) {
  Pipeline pipeline = two_replicas();
  pipeline.config.distributed_optimizer = true;
  pipeline.training.overlap_gradient_reduce = true;
  pipeline.training.sharded_optimizer = ShardedOptimizerCollectives::all_reduce_and_gather_after_step;
  const auto result = pipeline.run();
  for (int replica = 0; replica < 2; ++replica) {
    expect_timeline(timeline(result, 0, replica, {EventKind::dp_reduce}), {{EventKind::dp_reduce, -1, 0, 14, 17}});
    expect_timeline(timeline(result, 1, replica, {EventKind::dp_reduce}), {{EventKind::dp_reduce, -1, 0, 11.5, 12.5}});
    expect_timeline(timeline(result, 0, replica, {EventKind::dp_gather}), {{EventKind::dp_gather, -1, 0, 17.5, 18.25}});
    expect_timeline(timeline(result, 1, replica, {EventKind::dp_gather}), {{EventKind::dp_gather, -1, 0, 17.25, 17.5}});
  }
  EXPECT_DOUBLE_EQ(result.iteration_seconds, 18.25);
  const TimeBreakdown time = critical_path(pipeline.config, pipeline.work, pipeline.communication, pipeline.training);
  EXPECT_DOUBLE_EQ(time.iteration_seconds, 18.25);
  EXPECT_DOUBLE_EQ(time.optimizer_seconds, 0.5);
  EXPECT_DOUBLE_EQ(time.dp_communication_seconds, 18.25 - 0.5 - 14);  // the reduction's 3 s and the gather's 0.75 s
  // Without the distributed optimizer the stack's DDP reduction overlaps as before, with no gather.
  pipeline.config.distributed_optimizer = false;
  const auto unsharded = pipeline.run();
  EXPECT_TRUE(timeline(unsharded, 0, 0, {EventKind::dp_gather}).empty());
  EXPECT_DOUBLE_EQ(unsharded.iteration_seconds, 15.5);
}

TEST(Simulator, EventsAreSortedAndDeterministic) {
  Pipeline pipeline({1, 1.5, 1, 2}, {2, 3, 2, 4.5}, 7, 0.3, 3, 1);
  pipeline.communication.p2p_seconds[1][2] = 1.1;
  pipeline.communication.dp_seconds = {1, 2, 1, 2};
  pipeline.training.overlap_gradient_reduce = true;
  const auto first = pipeline.run();
  const auto second = pipeline.run();
  ASSERT_EQ(first.events.size(), second.events.size());
  for (size_t i = 0; i < first.events.size(); ++i) {
    EXPECT_EQ(first.events[i].start_seconds, second.events[i].start_seconds);
    EXPECT_EQ(first.events[i].kind, second.events[i].kind);
  }
  EXPECT_EQ(first.iteration_seconds, second.iteration_seconds);
  EXPECT_TRUE(std::is_sorted(first.events.begin(), first.events.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start_seconds, a.stage, a.dp_replica, a.kind, a.microbatch) <
           std::tie(b.start_seconds, b.stage, b.dp_replica, b.kind, b.microbatch);
  }));
  for (const auto& event : first.events) EXPECT_LE(event.end_seconds, first.iteration_seconds);
}

TEST(Simulator, RejectsInputsSizedForAnotherPlan) {
  Pipeline pipeline({1, 1}, {2, 2}, 3);
  pipeline.communication.tp_seconds.pop_back();
  EXPECT_THROW(pipeline.run(), std::invalid_argument);
  Pipeline interleaved({1, 1}, {2, 2}, 4, 0.0, 1, 2);
  interleaved.communication.wraparound_p2p_seconds.clear();
  EXPECT_THROW(interleaved.run(), std::invalid_argument);
  const Pipeline too_few_microbatches({1, 1, 1}, {2, 2, 2}, 2, 0.0, 1, 2);
  EXPECT_THROW(too_few_microbatches.run(), std::invalid_argument);
}


// ---------------------------------------------------------------------------------------------
// The closed-form critical_path against the simulation, on a varied set of pipelines.

struct AgreementCase {
  std::string name;
  Pipeline pipeline;
};

// Deterministic pseudo-random factors in [1 − spread, 1 + spread] (a 64-bit LCG; no <random>
// distribution, whose output differs between standard libraries).
class Jitter {
 public:
  explicit Jitter(std::uint64_t seed) : state_(seed) {}
  double operator()(double spread) {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    const double unit = static_cast<double>(state_ >> 11) / 9007199254740992.0;  // [0, 1)
    return 1 - spread + 2 * spread * unit;
  }

 private:
  std::uint64_t state_;
};

// A pipeline shaped like a real plan: per-micro-batch forward F, backward 2F (3F with full
// recompute), end stages heavier (embedding, LM head), TP a share of compute, p2p a share of F,
// DP reduction and optimizer per stage.
Pipeline realistic(int pp, int m, int chunks, int dp, double link_share, std::uint64_t seed, bool overlap,
                   RecomputeMode recompute = RecomputeMode::selective) {
  Jitter jitter(seed);
  std::vector<double> forward, backward;
  for (int s = 0; s < pp; ++s) {
    double f = 0.010 * jitter(0.05);
    if (s == 0) f *= 1.04;
    if (s == pp - 1) f *= 1.15;
    forward.push_back(f);
    backward.push_back(f * (recompute == RecomputeMode::full ? 3.0 : 2.0));
  }
  Pipeline pipeline(forward, backward, m, 0.0, dp, chunks);
  pipeline.config.recompute = recompute;
  pipeline.training.overlap_gradient_reduce = overlap;
  for (int s = 0; s < pp; ++s) {
    for (int d = 0; d < dp; ++d) {
      pipeline.communication.tp_seconds[s][d] = 0.15 * (forward[s] + backward[s]) * jitter(0.1);
      if (s + 1 < pp) pipeline.communication.p2p_seconds[s][d] = link_share * 0.010 * jitter(0.3);
    }
    pipeline.communication.dp_seconds[s] = dp > 1 ? 0.05 * jitter(0.2) : 0.0;
    pipeline.work.stages[s].optimizer_seconds = 0.004 * jitter(0.1);
  }
  for (int d = 0; d < static_cast<int>(pipeline.communication.wraparound_p2p_seconds.size()); ++d) {
    pipeline.communication.wraparound_p2p_seconds[d] = link_share * 0.010 * jitter(0.3);
  }
  return pipeline;
}

std::vector<AgreementCase> agreement_cases() {
  std::vector<AgreementCase> cases;
  std::uint64_t seed = 1;
  for (int pp : {2, 4, 8}) {
    for (int chunks : {1, 2, 4}) {
      for (int m : {pp, pp + 1, 2 * pp + 3, 4 * pp, 64}) {
        for (int dp : {1, 3}) {
          for (double link_share : {0.02, 0.1, 0.4}) {
            const bool overlap = (seed % 2) == 0;
            const std::string name = "pp=" + std::to_string(pp) + " v=" + std::to_string(chunks) + " m=" +
                                     std::to_string(m) + " dp=" + std::to_string(dp) + " links=" +
                                     std::to_string(link_share) + (overlap ? " overlap" : "");
            cases.push_back({name, realistic(pp, m, chunks, dp, link_share, seed++, overlap)});
          }
        }
      }
    }
  }
  // Uneven stages: one stage 40% slower than the rest; one slow link (a degraded node pair).
  Pipeline uneven = realistic(4, 16, 1, 2, 0.1, 99, true);
  uneven.work.stages[2].forward_compute_seconds *= 1.4;
  uneven.work.stages[2].backward_compute_seconds *= 1.4;
  cases.push_back({"uneven stage", uneven});
  Pipeline slow_link = realistic(8, 32, 1, 2, 0.1, 100, false);
  slow_link.communication.p2p_seconds[3][1] *= 8;
  cases.push_back({"one slow link in one replica", slow_link});
  Pipeline slow_interleaved = realistic(8, 32, 2, 2, 0.1, 102, false);
  slow_interleaved.communication.p2p_seconds[3][1] *= 3;
  cases.push_back({"a link at a third of its speed in one replica, interleaved", slow_interleaved});
  Pipeline full = realistic(4, 12, 2, 2, 0.1, 101, true, RecomputeMode::full);
  cases.push_back({"full recompute interleaved", full});
  // Distributed optimizer: a parameter gather (a quarter of dp_seconds) of several first forwards.
  for (int chunks : {1, 2}) {
    Pipeline gather = realistic(4, 8, chunks, 3, 0.1, 102 + static_cast<std::uint64_t>(chunks), true);
    gather.config.distributed_optimizer = true;
    for (double& seconds : gather.communication.dp_seconds) seconds *= 4;
    cases.push_back({"distributed optimizer, parameter gather exposed, v=" + std::to_string(chunks), gather});
    Pipeline after_step = gather;
    after_step.training.sharded_optimizer = ShardedOptimizerCollectives::all_reduce_and_gather_after_step;
    cases.push_back({"distributed optimizer, all-reduce and parameter gather after the step, v=" + std::to_string(chunks),
                     after_step});
  }
  // nanotron's all forward, all backward and its blocking boundary exchange, each and both,
  // wherever there is no interleaving.
  const size_t one_f_one_b_cases = cases.size();
  for (size_t index = 0; index < one_f_one_b_cases; ++index) {
    if (cases[index].pipeline.config.virtual_stages > 1) continue;
    for (const auto& [schedule, blocking, suffix] :
         {std::tuple{PipelineSchedule::all_forward_all_backward, false, " afab"},
          std::tuple{PipelineSchedule::one_forward_one_backward, true, " blocking exchange"},
          std::tuple{PipelineSchedule::all_forward_all_backward, true, " afab, blocking exchange"}}) {
      AgreementCase variant = cases[index];
      variant.name += suffix;
      variant.pipeline.work.pipeline_schedule = schedule;
      variant.pipeline.work.boundary_exchange.blocks_both_ranks = blocking;
      cases.push_back(variant);
    }
  }
  return cases;
}

// The slowest hop against the shortest chunk forward: above 1, a message takes longer than the
// compute it follows (a pathological plan: a tiny chunk on a very slow link).
double hop_to_chunk_forward(const Pipeline& pipeline) {
  double slowest_hop = 0, shortest_forward = 1e300;
  for (const auto& row : pipeline.communication.p2p_seconds) {
    for (const double seconds : row) slowest_hop = std::max(slowest_hop, seconds);
  }
  for (const double seconds : pipeline.communication.wraparound_p2p_seconds) slowest_hop = std::max(slowest_hop, seconds);
  for (const auto& stage : pipeline.work.stages) {
    shortest_forward = std::min(shortest_forward, stage.forward_compute_seconds / pipeline.config.virtual_stages);
  }
  return slowest_hop / shortest_forward;
}

TEST(ClosedFormAgreement, WithinThreePercentOfTheSimulationOnAVariedSetOfPlans) {
  double worst = 0, worst_pathological = 0;
  std::string worst_case, worst_pathological_case;
  int cases = 0, pathological = 0;
  for (const auto& [name, pipeline] : agreement_cases()) {
    const double simulated = pipeline.run().iteration_seconds;
    const double closed_form =
        critical_path(pipeline.config, pipeline.work, pipeline.communication, pipeline.training).iteration_seconds;
    const double error = std::abs(closed_form / simulated - 1);
    const bool slow_hops = hop_to_chunk_forward(pipeline) > 1;
    EXPECT_LE(error, slow_hops ? 0.05 : 0.03)
        << name << ": simulated " << simulated << " s, closed form " << closed_form << " s";
    ++(slow_hops ? pathological : cases);
    double& worst_so_far = slow_hops ? worst_pathological : worst;
    if (error > worst_so_far) {
      worst_so_far = error;
      (slow_hops ? worst_pathological_case : worst_case) = name;
    }
  }
  std::cout << "closed form vs simulation: " << cases << " plans, worst " << 100 * worst << "% (" << worst_case
            << "); " << pathological << " plans with a hop slower than a chunk's forward, worst "
            << 100 * worst_pathological << "% (" << worst_pathological_case << ")\n";
}

}  // namespace
}  // namespace pipette
