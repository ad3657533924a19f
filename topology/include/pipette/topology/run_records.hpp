#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/calibration.hpp"
#include "pipette/core/result.hpp"
#include "pipette/core/training.hpp"
#include "pipette/topology/site_config.hpp"

namespace pipette {

// A finished run as its log or table states it; what the source does not state stays empty and
// may be completed from the command line or the plan Pipette gave the job (complete_run).
struct RunDescription {
  std::string name;                  // "FILE:LINE" of what it was read from, for every message
  std::string framework;             // a --pipette-framework spelling (framework_spellings())
  std::string model;                 // preset or model file
  std::string gpu;
  std::optional<int> nodes;
  std::vector<std::string> node_names;    // the job's nodes when known (a plan record): the link cache applies
  std::optional<int> gpus_per_node;
  std::optional<int> tp, pp, dp, vpp, micro_batch;
  std::optional<int> cp;  // context parallel (absent: 1)
  // Expert parallelism (Megatron's --expert-model-parallel-size, --expert-tensor-parallel-size): a
  // model with experts needs both, a dense one neither.
  std::optional<int> ep, etp;
  std::vector<int> layers_per_stage;  // the split that ran (a plan's); empty: the stack's own split
  std::optional<std::int64_t> global_batch;
  std::optional<int> sequence_length;
  std::optional<RecomputeMode> recompute;
  int recomputed_layers_per_chunk = 0;  // with recompute full: block recompute of N layers per chunk (0: all)
  std::optional<bool> sequence_parallel, distributed_optimizer;
  std::optional<bool> fully_sharded;  // FSDP (absent: the framework's default, default_fully_sharded)
  std::optional<Precision> precision;
  std::optional<bool> tp_comm_overlap;          // Megatron-core --tp-comm-overlap (userbuffers)
  std::optional<bool> gradients_in_fp32;        // --accumulate-allreduce-grads-in-fp32
  std::optional<AttentionKernel> attention;     // Megatron's --attention-backend, Megatron-DeepSpeed's --use-flash-attn-*
  std::optional<bool> cross_entropy_fusion;     // Megatron-core --cross-entropy-loss-fusion
  std::optional<bool> overlap_gradient_reduce;  // Megatron-core --overlap-grad-reduce
  // nanotron's parallelism: tp_linear_async_communication, tp_recompute_allgather, pp_engine.
  std::optional<bool> tp_backward_overlap;
  std::optional<bool> tp_recompute_allgather;
  std::optional<PipelineSchedule> pipeline_schedule;
  // The engine's switches in --engine syntax (a plan's, or --engine): the base the switches a log
  // states (precision, attention, fp32 gradients, TP communication and DP reduction overlap, the
  // fused loss) override.
  std::string engine;
  // The model's dimensions as the log states them, checked against the model file.
  std::optional<int> num_layers, hidden_size, num_attention_heads;
  std::optional<int> world_size;
  std::optional<double> iteration_seconds;     // median steady-state iteration
  std::optional<double> tokens_per_second_per_gpu;  // torchtitan's tps, turned into seconds once the layout is known
  std::optional<double> samples_per_second;         // DeepSpeed's throughput timer, likewise
  int steady_iterations = 0;                   // logged iterations the median is over
  std::optional<double> peak_reserved_bytes;
  std::optional<double> peak_allocated_bytes;
  std::optional<double> peak_device_bytes;     // nvidia-smi's or DCGM's, the whole GPU
  bool out_of_memory = false;
  std::vector<std::string> warnings;           // each names the record and line
};

// Megatron-LM / NeMo (Megatron-core) stdout: the arguments block (megatron/training/arguments.py
// _print_args), the per-interval line "iteration N/M | ... | elapsed time per iteration (ms): X |"
// (megatron/training/training.py training_log) and "[Rank R] (after N iterations) memory (MB) |
// allocated: … | max allocated: … | reserved: … | max reserved: …" (megatron/training/utils
// report_memory). The first logged interval (start-up) and the first tenth of the rest are
// warm-up; the median of the others is the iteration time. Errors name FILE:LINE: an iteration
// counter that goes back without a new arguments block (two runs interleaved in one file), an
// arguments block that contradicts an earlier one, or fewer than two steady-state iterations.
Result<RunDescription> parse_megatron_log(std::string_view text, const std::string& source_name);

// torchtitan stdout (torchtitan/components/metrics.py MetricsProcessor.log): "step: N  loss: …
// memory: X GiB(P%)  tps: T  tflops: …  mfu: …%" with ANSI colours. tps is tokens per second per
// GPU; memory is torch's max reserved. Layout comes from the command line or the plan.
Result<RunDescription> parse_torchtitan_log(std::string_view text, const std::string& source_name);

// nanotron stdout: the "Config:" record, pformat of the run's Config (trainer.py @2411b022
// l.283-287: parallelism=ParallelismArgs(dp=…, pp=…, tp=…, tp_mode=…, recompute_layer=…),
// tokens=TokensArgs(sequence_length=…, micro_batch_size=…, batch_accumulation_per_replica=…),
// optimizer zero_stage, the model's num_hidden_layers / hidden_size / num_attention_heads); the
// per-step line "iteration: N / M | consumed_tokens: … | time_per_iteration_ms: X | …" (logging/
// base.py l.314-318; values in human_format, l.268: three significant digits and K/M/B/T); and
// log_memory's " Memory usage: …MiB. Peak allocated …MiB. Peak reserved: …MiB" (l.282-292, the first
// five steps, trainer.py l.611-626). Earlier nanotron printed elapsed_time_per_iteration_ms (the
// label huggingface/bench_cluster's report.py parses); both are read. Warm-up as for Megatron; a step counter that goes back without
// a new Config record is two runs interleaved: an error naming FILE:LINE.
Result<RunDescription> parse_nanotron_log(std::string_view text, const std::string& source_name);

// DeepSpeed stdout: the pipeline engine's "steps: N loss: … iter time (s): T samples/sec: S"
// (deepspeed/runtime/pipe/engine.py @edaa7221 l.404-409), or without a pipeline the throughput
// timer's "epoch=…/micro_step=…/global_step=G, RunningAvgSamplesPerSec=…, CurrSamplesPerSec=S, …,
// MaxMemAllocated=XGB" (deepspeed/utils/timer.py l.265-272), and see_memory_usage's "MA … GB Max_MA …
// GB CA … GB Max_CA … GB" (deepspeed/runtime/utils.py l.826-829; Max_CA is rounded to a whole GiB).
// Layout comes from the command line or the plan. Megatron-DeepSpeed logs are Megatron's
// (parse_megatron_log: its arguments block says deepspeed True and the ZeRO stage) with DeepSpeed's
// memory lines.
Result<RunDescription> parse_deepspeed_log(std::string_view text, const std::string& source_name);

// A table of runs, one per row, header first (any column order; names as below):
//   model,nodes,gpu,framework,tp,pp,dp,vpp,mbs,global_batch,seq,recompute,sp,distopt,iteration_seconds,peak_gib,status
// and optionally precision (bf16, fp16, fp8, fp32), ep and etp (a model with experts needs both) and
// device_gib. status: ok | oom; an ok row needs iteration_seconds, peak_gib or device_gib; peak_gib is
// the framework's max reserved (GiB), device_gib the GPU's peak use as nvidia-smi or DCGM shows it.
// recompute: none (or empty), selective, full or block:N (parse_recompute_knob).
Result<std::vector<RunDescription>> parse_run_table(std::string_view text, const std::string& source_name);

// Reads FILE and picks the reader: a .csv is a table; otherwise the first line that only one of
// the Megatron, torchtitan, nanotron or DeepSpeed readers knows decides.
Result<std::vector<RunDescription>> read_run_records(const std::string& path);

// Fills what `run` leaves empty from `fallback` (flags or a plan); conflicting values are an error
// naming the record.
Result<RunDescription> complete_run(RunDescription run, const RunDescription& fallback);

// Resolves a description against the site as `pipette plan --fix` would price that layout: the
// model (its dimensions must match what the log states), the framework and its engine switches,
// the layout as complete_configuration completes and checks it (tp·cp·pp·dp must be the job's
// GPUs; the stack's own layer split unless the record gives one; a knob the framework refuses is
// an error), the cluster as the planner assembles it (uncalibrated) for `nodes` synthetic nodes.
Result<RunRecord> resolve_run(const RunDescription& run, const SiteConfig& site, const std::vector<std::string>& model_dirs);

}  // namespace pipette
