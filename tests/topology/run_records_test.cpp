// Run-record readers against the frameworks' own line formats. Samples in tests/data/run-records/
// are written by make_samples.py from (commits read):
//  - Megatron-LM d98e8a64: megatron/training/arguments.py:1990 _print_args (the arguments block),
//    megatron/training/training.py:3567-3575 training_log ("iteration N/M | … | elapsed time per
//    iteration (ms): X |"), megatron/training/utils/common_utils.py:313-334 report_memory
//    ("[Rank R] (after N iterations) memory (MB) | allocated: … | max allocated: … | reserved: … |
//    max reserved: …");
//  - torchtitan b5bcd76c: torchtitan/components/metrics.py:527-535 (the coloured "step: … memory:
//    X GiB(P%)  tps: T …" line; tps per GPU, memory = max reserved);
//  - nanotron 2411b022: src/nanotron/trainer.py:283-287 (the "Config:" record and pformat of the
//    Config), logging/base.py:314-318 ("iteration: N / M | … | time_per_iteration_ms: X | …", values
//    in human_format, base.py:268) and base.py:282-292 log_memory (" Memory usage: …MiB. Peak
//    allocated …MiB. Peak reserved: …MiB"), with the coloured prefix of base.py:378;
//  - DeepSpeed edaa7221: deepspeed/runtime/pipe/engine.py:404-409 ("steps: N loss: … iter time (s):
//    T samples/sec: S"), deepspeed/utils/timer.py:265-272 (ThroughputTimer), deepspeed/runtime/
//    utils.py:826-829 see_memory_usage ("MA … GB Max_MA … GB CA … GB Max_CA … GB");
//  - Megatron-DeepSpeed 4efb479d: megatron/arguments.py:463-475 _print_args, megatron/training.py:
//    1146-1182 training_log, and DeepSpeed's see_memory_usage lines.
#include "pipette/topology/run_records.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "pipette/core/pipeline_blocks.hpp"
#include "pipette/core/plan.hpp"
#include "pipette/core/units.hpp"
#include "pipette/topology/plan_record.hpp"

namespace pipette {
namespace {

std::string sample(const char* name) {
  std::ifstream in(std::string(PIPETTE_SOURCE_DIR "/tests/data/run-records/") + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Rewrites the first `from` in a sample's text; a sample without it fails the test.
void replace_once(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "the sample has no \"" << from << "\"";
    return;
  }
  text.replace(at, from.size(), to);
}

SiteConfig h100_site() {
  SiteConfig site;
  site.gpu = "H100-SXM";
  return site;
}

TEST(MegatronLog, ReadsLayoutSteadyStateAndPeakMemory) {
  const auto run = parse_megatron_log(sample("megatron_llama3_8b_2nodes.log"), "m.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->framework, "megatron-core");
  EXPECT_EQ(run->tp, 2);
  EXPECT_EQ(run->pp, 2);
  EXPECT_EQ(run->dp, 4);
  EXPECT_EQ(run->vpp, std::nullopt);  // "None": no interleaving
  EXPECT_EQ(run->global_batch, 128);
  EXPECT_EQ(run->sequence_length, 4096);
  EXPECT_EQ(run->recompute, RecomputeMode::selective);
  EXPECT_EQ(run->sequence_parallel, true);
  EXPECT_EQ(run->distributed_optimizer, true);
  EXPECT_EQ(run->precision, Precision::bf16);
  EXPECT_EQ(run->num_layers, 32);
  // 12 logged intervals: the first (9854 ms, start-up) and a tenth of the rest (one) are skipped.
  EXPECT_EQ(run->steady_iterations, 10);
  ASSERT_TRUE(run->iteration_seconds);
  EXPECT_NEAR(*run->iteration_seconds, 3.79, 0.04);
  EXPECT_DOUBLE_EQ(*run->peak_reserved_bytes, 28930.0 * units::mebibyte);
  EXPECT_DOUBLE_EQ(*run->peak_allocated_bytes, 26105.3 * units::mebibyte);
  EXPECT_EQ(run->name, "m.log:2");  // the arguments block
}

// A run with context parallelism (Megatron logs context_parallel_size) is priced with its cp:
// world = tp x cp x pp x dp.
TEST(MegatronLog, AContextParallelRunResolvesWithItsCp) {
  auto run = parse_megatron_log(sample("megatron_llama3_8b_2nodes.log"), "m.log");
  ASSERT_TRUE(run.ok());
  run->cp = 2;
  run->dp = 2;  // the same 16 GPUs: tp 2 x cp 2 x pp 2 x dp 2
  RunDescription flags;
  flags.model = "llama3-8b";
  flags.nodes = 2;
  auto record = resolve_run(*complete_run(*run, flags), h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->cluster.num_gpus(), 16);
  EXPECT_EQ(record->config.cp, 2);
  EXPECT_EQ(record->config.dp, 2);
  run->dp = 4;  // 32 GPUs' layout on 16
  EXPECT_FALSE(resolve_run(*complete_run(*run, flags), h100_site(), {}).ok());
}

TEST(MegatronLog, ResolvesAgainstItsModelAndRejectsAnotherModel) {
  auto run = parse_megatron_log(sample("megatron_llama3_8b_2nodes.log"), "m.log");
  ASSERT_TRUE(run.ok());
  RunDescription flags;
  flags.name = "the command line";
  flags.model = "llama3-8b";
  flags.nodes = 2;
  auto completed = complete_run(*run, flags);
  ASSERT_TRUE(completed.ok()) << completed.error().message;
  auto record = resolve_run(*completed, h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->cluster.num_gpus(), 16);
  EXPECT_EQ(record->config.dp, 4);
  EXPECT_EQ(record->cluster.gpu.name, "H100-SXM");

  flags.model = "llama3-70b";
  auto wrong = resolve_run(*complete_run(*run, flags), h100_site(), {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("m.log:2: the log's num_layers is 32 but model llama3-70b has 80"), std::string::npos)
      << wrong.error().message;
}

// What Megatron's _print_args lists of the engine is priced as it ran: cross_entropy_loss_fusion
// (core/model_parallel_config.py @d98e8a64 l.320, False unless --cross-entropy-loss-fusion),
// overlap_grad_reduce (training/arguments.py l.3121, False unless given) and attention_backend
// (core/transformer/enums.py l.51-58, printed as the enum). The sample's arguments block predates
// them: the stack's defaults.
TEST(MegatronLog, TheArgumentsSayWhichLossReductionAndAttentionRan) {
  const std::string sample_log = sample("megatron_llama3_8b_2nodes.log");
  RunDescription flags;
  flags.name = "the command line";
  flags.model = "llama3-8b";
  flags.nodes = 2;
  const auto priced = [&](const std::string& arguments) {
    std::string log = sample_log;
    const std::string context = "  context_parallel_size ........................... 1\n";
    replace_once(log, context, context + arguments);
    const auto run = parse_megatron_log(log, "m.log");
    EXPECT_TRUE(run.ok()) << run.error().message;
    auto record = resolve_run(*complete_run(*run, flags), h100_site(), {});
    EXPECT_TRUE(record.ok()) << record.error().message;
    return std::pair{*run, *record};
  };
  const auto [plain_run, plain] = priced("");
  EXPECT_EQ(plain_run.cross_entropy_fusion, std::nullopt);
  EXPECT_EQ(plain_run.overlap_gradient_reduce, std::nullopt);
  EXPECT_EQ(plain_run.attention, std::nullopt);
  EXPECT_FALSE(plain.training.cross_entropy_fusion);
  EXPECT_TRUE(plain.training.overlap_gradient_reduce);
  EXPECT_EQ(plain.training.attention, AttentionKernel::flash);

  const auto [run, record] = priced("  cross_entropy_loss_fusion ....................... True\n"
                                    "  overlap_grad_reduce ............................. False\n");
  EXPECT_TRUE(record.training.cross_entropy_fusion);
  EXPECT_FALSE(record.training.overlap_gradient_reduce);
  EXPECT_EQ(priced("  attention_backend ............................... AttnBackend.unfused\n").second.training.attention, AttentionKernel::unfused);
  EXPECT_EQ(priced("  attention_backend ............................... AttnBackend.local\n").second.training.attention, AttentionKernel::unfused);
  EXPECT_EQ(priced("  attention_backend ............................... AttnBackend.auto\n").second.training.attention, AttentionKernel::flash);
}

// --recompute-method block --recompute-num-layers N (Megatron's _print_args lists both): full
// recompute of the first N layers of each chunk, which the record prices as such.
TEST(MegatronLog, BlockRecomputeKeepsItsLayerCount) {
  std::string log = sample("megatron_llama3_8b_2nodes.log");
  replace_once(log, "  recompute_granularity ........................... selective\n",
               "  recompute_granularity ........................... full\n"
               "  recompute_method ................................ block\n"
               "  recompute_num_layers ............................ 5\n");
  const auto run = parse_megatron_log(log, "m.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->recompute, RecomputeMode::full);
  EXPECT_EQ(run->recomputed_layers_per_chunk, 5);
  RunDescription flags;
  flags.name = "the command line";
  flags.model = "llama3-8b";
  flags.nodes = 2;
  const auto record = resolve_run(*complete_run(*run, flags), h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->config.recomputed_layers_per_chunk, 5);
  // The uniform method is Pipette's full recompute of every layer.
  std::string uniform = log;
  uniform.replace(uniform.find("block"), 5, "uniform");
  EXPECT_EQ(parse_megatron_log(uniform, "m.log")->recomputed_layers_per_chunk, 0);
}

TEST(MegatronLog, ATruncatedLastLineIsAWarning) {
  std::string text = sample("megatron_llama3_8b_2nodes.log");
  text.resize(text.rfind("elapsed time per iteration") + 5);
  const auto run = parse_megatron_log(text, "cut.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_EQ(run->warnings.size(), 1u);
  EXPECT_NE(run->warnings.front().find("cut.log:49: the log ends mid-line (truncated?)"), std::string::npos)
      << run->warnings.front();
  EXPECT_EQ(run->steady_iterations, 9);
}

TEST(MegatronLog, ATruncatedArgumentsBlockIsAnError) {
  std::string text = sample("megatron_llama3_8b_2nodes.log");
  text.resize(text.find("micro_batch_size"));
  const auto run = parse_megatron_log(text, "cut.log");
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().message, "cut.log:2: the arguments block never ends: the log is truncated");
}

TEST(MegatronLog, InterleavedRunsAreAnError) {
  const std::string text = sample("megatron_llama3_8b_2nodes.log");
  const std::string line_ten = text.substr(text.rfind('\n', text.find("iteration       10/")) + 1,
                                           text.find('\n', text.find("iteration       10/")) - text.rfind('\n', text.find("iteration       10/")));
  const auto run = parse_megatron_log(text + line_ten, "two.log");
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("iteration 10 after iteration 60 with no arguments block between"), std::string::npos)
      << run.error().message;
}

TEST(MegatronLog, ASecondArgumentsBlockMustDescribeTheSameRun) {
  const std::string text = sample("megatron_llama3_8b_2nodes.log");
  std::string other = text.substr(0, text.find("> building"));
  const std::string tp = "tensor_model_parallel_size ...................... 2";
  other.replace(other.find(tp), tp.size(), "tensor_model_parallel_size ...................... 4");
  const auto run = parse_megatron_log(text + other, "two.log");
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("a second arguments block says tensor_model_parallel_size 4"), std::string::npos)
      << run.error().message;
}

TEST(MegatronLog, ARestartOfTheSameRunSkipsItsWarmUpAgain) {
  const std::string text = sample("megatron_llama3_8b_2nodes.log");
  const auto run = parse_megatron_log(text + text.substr(text.find("------------------------ arguments")), "resumed.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->steady_iterations, 20);
}

TEST(MegatronLog, OutOfMemoryIsRecorded) {
  const auto run = parse_megatron_log(
      "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.19 GiB\n",
      "oom.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_TRUE(run->out_of_memory);
  EXPECT_FALSE(run->iteration_seconds);
}

TEST(TorchtitanLog, ReadsTokensPerSecondAndMemory) {
  const auto run = parse_torchtitan_log(sample("torchtitan_llama3_8b_1node.log"), "t.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->framework, "torchtitan");
  EXPECT_EQ(run->steady_iterations, 5);  // steps 10..50; step 1 is start-up
  ASSERT_TRUE(run->tokens_per_second_per_gpu);
  EXPECT_NEAR(*run->tokens_per_second_per_gpu, 5210, 25);
  EXPECT_DOUBLE_EQ(*run->peak_reserved_bytes, 61.73 * units::gibibyte);

  // The layout torchtitan does not log, as the plan record of its job states it.
  const auto plan = parse_plan_record(
      "pipette_plan_record=1\nmodel=llama3-8b\nnodes=1\ngpus_per_node=8\ntp=1\npp=1\nmbs=1\nglobal_batch=64\n"
      "sequence_length=8192\n",
      "plan");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  auto record = resolve_run(*complete_run(*run, *plan), h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_NEAR(*record->iteration_seconds, 64.0 * 8192 / (*run->tokens_per_second_per_gpu * 8), 1e-9);
}

SiteConfig a100_site() {
  SiteConfig site;
  site.gpu = "A100-80GB";
  return site;
}

TEST(NanotronLog, ReadsConfigSteadyStateAndPeakMemory) {
  const auto run = parse_nanotron_log(sample("nanotron_llama_1b_dp8.log"), "n.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->framework, "nanotron");
  EXPECT_EQ(run->dp, 8);
  EXPECT_EQ(run->tp, 1);
  EXPECT_EQ(run->pp, 1);
  EXPECT_EQ(run->micro_batch, 2);
  EXPECT_EQ(run->global_batch, 16);  // dp 8 × micro-batch 2 × accumulation 1
  EXPECT_EQ(run->sequence_length, 4096);
  EXPECT_EQ(run->num_layers, 24);
  EXPECT_EQ(run->hidden_size, 2048);
  EXPECT_EQ(run->num_attention_heads, 32);
  EXPECT_EQ(run->recompute, RecomputeMode::none);
  EXPECT_EQ(run->sequence_parallel, true);  // tp_mode REDUCE_SCATTER
  EXPECT_EQ(run->distributed_optimizer, true);  // zero_stage 1
  EXPECT_EQ(run->gradients_in_fp32, true);
  EXPECT_EQ(run->precision, Precision::bf16);
  // 20 steps: the first (start-up) and a tenth of the rest (one) are skipped. time_per_iteration_ms
  // is printed to three significant digits ("1.63K").
  EXPECT_EQ(run->steady_iterations, 18);
  ASSERT_TRUE(run->iteration_seconds);
  EXPECT_NEAR(*run->iteration_seconds, 1.63, 0.02);
  EXPECT_DOUBLE_EQ(*run->peak_allocated_bytes, 33150.42 * units::mebibyte);
  EXPECT_DOUBLE_EQ(*run->peak_reserved_bytes, 34960.00 * units::mebibyte);
  EXPECT_EQ(run->name, "n.log:1");  // the Config record
}

TEST(NanotronLog, ReadRecordsPickTheReaderAndPriceTheStack) {
  const auto runs = read_run_records(PIPETTE_SOURCE_DIR "/tests/data/run-records/nanotron_llama_1b_dp8.log");
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().framework, "nanotron");
  // Resolved against a model of the log's shape, the record is priced as nanotron runs.
  RunDescription flags;
  flags.name = "flags";
  flags.model = "llama2-7b";
  flags.nodes = 1;
  RunDescription run = runs->front();
  run.num_layers.reset();
  run.hidden_size.reset();
  auto record = resolve_run(*complete_run(run, flags), h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->framework, "nanotron");
  EXPECT_EQ(record->training.target.framework, Framework::nanotron);
  EXPECT_FALSE(record->training.overlap_tensor_parallel_backward);
}

// The engine switches nanotron's Config record states (ParallelismArgs, config/parallelism_config.py
// @2411b022 l.30-36: pp_engine printed as the engine object's repr, tp_linear_async_communication,
// tp_recompute_allgather) are priced as the run had them, whatever the stack's defaults are.
TEST(NanotronLog, TheConfigSaysWhichPipelineEngineAndTpSwitchesRan) {
  std::string text = sample("nanotron_llama_1b_dp8.log");
  replace_once(text, "OneForwardOneBackwardPipelineEngine", "AllForwardAllBackwardPipelineEngine");
  replace_once(text, "tp_linear_async_communication=False", "tp_linear_async_communication=True");
  replace_once(text, "tp_recompute_allgather=True", "tp_recompute_allgather=False");
  const auto run = parse_nanotron_log(text, "n.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->pipeline_schedule, PipelineSchedule::all_forward_all_backward);
  EXPECT_EQ(run->tp_backward_overlap, true);
  EXPECT_EQ(run->tp_recompute_allgather, false);
  RunDescription flags;
  flags.name = "flags";
  flags.model = "llama2-7b";
  flags.nodes = 1;
  RunDescription described = *run;
  described.num_layers.reset();
  described.hidden_size.reset();
  auto record = resolve_run(*complete_run(described, flags), h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->training.pipeline_schedule, PipelineSchedule::all_forward_all_backward);
  EXPECT_TRUE(record->training.overlap_tensor_parallel_backward);
  EXPECT_FALSE(record->training.tensor_parallel_recompute_allgather);
  // The sample as written: 1f1b, synchronous, re-gathered.
  const auto plain = parse_nanotron_log(sample("nanotron_llama_1b_dp8.log"), "n.log");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->pipeline_schedule, PipelineSchedule::one_forward_one_backward);
  EXPECT_EQ(plain->tp_backward_overlap, false);
  EXPECT_EQ(plain->tp_recompute_allgather, true);
}

// nanotron of the Ultra-Scale Playbook's runs printed elapsed_time_per_iteration_ms (the label
// huggingface/bench_cluster's report.py @24952781 parses); the reader takes both spellings.
TEST(NanotronLog, ReadsTheEarlierElapsedTimeLabel) {
  std::string text = sample("nanotron_llama_1b_dp8.log");
  for (size_t at = text.find("| time_per_iteration_ms:"); at != std::string::npos; at = text.find("| time_per_iteration_ms:", at))
    text.replace(at, 2, "| elapsed_");
  const auto run = parse_nanotron_log(text, "old.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->steady_iterations, 18);
  EXPECT_NEAR(*run->iteration_seconds, 1.63, 0.02);
}

TEST(NanotronLog, ATruncatedLastLineIsAWarning) {
  std::string text = sample("nanotron_llama_1b_dp8.log");
  text.resize(text.rfind("time_per_iteration_ms") + 5);
  const auto run = parse_nanotron_log(text, "cut.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_EQ(run->warnings.size(), 1u);
  EXPECT_NE(run->warnings.front().find("the log ends mid-line (truncated?)"), std::string::npos) << run->warnings.front();
  EXPECT_EQ(run->steady_iterations, 17);
}

TEST(NanotronLog, InterleavedRunsAreAnErrorAndARestartIsNot) {
  const std::string text = sample("nanotron_llama_1b_dp8.log");
  const size_t step_three = text.find("iteration: 3 / 20");
  const std::string line = text.substr(text.rfind('\n', step_three) + 1, text.find('\n', step_three) - text.rfind('\n', step_three));
  const auto interleaved = parse_nanotron_log(text + line, "two.log");
  ASSERT_FALSE(interleaved.ok());
  EXPECT_NE(interleaved.error().message.find("two.log:" ), std::string::npos);
  EXPECT_NE(interleaved.error().message.find("iteration 3 after iteration 20 with no Config record between"), std::string::npos)
      << interleaved.error().message;
  const auto resumed = parse_nanotron_log(text + text, "resumed.log");
  ASSERT_TRUE(resumed.ok()) << resumed.error().message;
  EXPECT_EQ(resumed->steady_iterations, 36);
  ASSERT_EQ(resumed->warnings.size(), 1u);
  EXPECT_NE(resumed->warnings.front().find("a second Config record"), std::string::npos);
}

TEST(NanotronLog, ABadConfigFieldNamesItsLine) {
  std::string text = sample("nanotron_llama_1b_dp8.log");
  text.replace(text.find("tp=1,"), 5, "tp=x,");
  const auto run = parse_nanotron_log(text, "bad.log");
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().message, "bad.log:1: config field tp is 'x', not a positive integer");
}

TEST(DeepSpeedLog, ReadsPipelineStepsAndMemory) {
  const auto run = parse_deepspeed_log(sample("deepspeed_pipe_7b.log"), "d.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->framework, "deepspeed");
  EXPECT_EQ(run->steady_iterations, 5);  // steps 10..60; the first logged is start-up
  ASSERT_TRUE(run->iteration_seconds);
  EXPECT_NEAR(*run->iteration_seconds, 5.812, 0.06);
  EXPECT_DOUBLE_EQ(*run->peak_allocated_bytes, 41.87 * units::gibibyte);
  EXPECT_DOUBLE_EQ(*run->peak_reserved_bytes, 44 * units::gibibyte);
  EXPECT_EQ(run->name, "d.log:4");
}

TEST(DeepSpeedLog, ThroughputTimerLinesGiveSamplesPerSecond) {
  std::string text;
  for (int step = 1; step <= 6; ++step) {
    // deepspeed/utils/timer.py:265-272.
    text += "[2026-12-01 15:00:0" + std::to_string(step) + ",000] [INFO] [timer.py:264:stop] epoch=0/micro_step=" +
            std::to_string(step * 4) + "/global_step=" + std::to_string(step) +
            ", RunningAvgSamplesPerSec=30.1, CurrSamplesPerSec=" + (step == 1 ? "9.5" : "32.0") +
            ", MemAllocated=20.5GB, MaxMemAllocated=51.25GB\n";
  }
  const auto run = parse_deepspeed_log(text, "t.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_TRUE(run->samples_per_second);
  EXPECT_DOUBLE_EQ(*run->samples_per_second, 32.0);
  EXPECT_DOUBLE_EQ(*run->peak_allocated_bytes, 51.25 * units::gibibyte);
  RunDescription layout;
  layout.name = "flags";
  layout.model = "llama2-7b";
  layout.nodes = 1;
  layout.gpus_per_node = 8;
  layout.tp = 1;
  layout.pp = 1;
  layout.micro_batch = 4;
  layout.global_batch = 64;
  layout.sequence_length = 4096;
  auto record = resolve_run(*complete_run(*run, layout), a100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_DOUBLE_EQ(*record->iteration_seconds, 64 / 32.0);
}

TEST(DeepSpeedLog, ADamagedStepLineNamesItsLine) {
  const auto run = parse_deepspeed_log("steps: 10 loss: 9.0000 iter time (s): -1 samples/sec: 1\n", "bad.log");
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().message,
            "bad.log:1: a DeepSpeed steps line without its step or a positive value; is the log damaged?");
}

TEST(DeepSpeedLog, ATruncatedLogKeepsWhatItHas) {
  std::string text = sample("deepspeed_pipe_7b.log");
  text.resize(text.rfind("iter time") + 3);
  const auto run = parse_deepspeed_log(text, "cut.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_EQ(run->warnings.size(), 1u);
  EXPECT_EQ(run->steady_iterations, 4);
}

// DeepSpeed prints no run header to tell two runs apart: a step counter that goes back is a restart
// (a resumed run starts again below its last logged step), each one's warm-up is skipped and the
// count is a warning, so lines of two runs interleaved show up as many restarts.
TEST(DeepSpeedLog, StepsGoingBackAreRestartsAndSaySo) {
  const std::string text = sample("deepspeed_pipe_7b.log");
  const auto resumed = parse_deepspeed_log(text + text, "resumed.log");
  ASSERT_TRUE(resumed.ok()) << resumed.error().message;
  EXPECT_EQ(resumed->steady_iterations, 10);
  ASSERT_EQ(resumed->warnings.size(), 1u);
  EXPECT_EQ(resumed->warnings.front(), "resumed.log: the step counter restarted 1 time(s); each restart's warm-up is skipped");
  std::string interleaved;
  for (int step = 10; step <= 60; step += 10) {
    interleaved += "steps: " + std::to_string(step) + " loss: 9.0000 iter time (s): 5.800 samples/sec: 11.034\n";
    interleaved += "steps: " + std::to_string(step) + " loss: 7.0000 iter time (s): 2.100 samples/sec: 30.476\n";
  }
  const auto mixed = parse_deepspeed_log(interleaved, "mixed.log");
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  ASSERT_EQ(mixed->warnings.size(), 1u);
  EXPECT_EQ(mixed->warnings.front(), "mixed.log: the step counter restarted 6 time(s); each restart's warm-up is skipped");
}

TEST(MegatronDeepSpeedLog, ReadsTheArgumentsAndDeepSpeedMemory) {
  const auto runs = read_run_records(PIPETTE_SOURCE_DIR "/tests/data/run-records/megatron_deepspeed_llama2_7b_4nodes.log");
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  const RunDescription& run = runs->front();
  EXPECT_EQ(run.framework, "megatron-deepspeed");
  EXPECT_EQ(run.distributed_optimizer, true);  // zero_stage 1
  EXPECT_EQ(run.attention, AttentionKernel::flash);  // use_flash_attn_v2 True
  EXPECT_EQ(run.tp, 2);
  EXPECT_EQ(run.pp, 2);
  EXPECT_EQ(run.steady_iterations, 7);
  EXPECT_NEAR(*run.iteration_seconds, 14.25, 0.15);
  EXPECT_DOUBLE_EQ(*run.peak_allocated_bytes, 58.64 * units::gibibyte);
  EXPECT_DOUBLE_EQ(*run.peak_reserved_bytes, 62 * units::gibibyte);
  RunDescription flags;
  flags.name = "flags";
  flags.model = "llama2-7b";
  flags.nodes = 4;
  auto record = resolve_run(*complete_run(run, flags), a100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->training.target.framework, Framework::megatron_deepspeed);
  EXPECT_EQ(record->training.attention, AttentionKernel::flash);
  EXPECT_FALSE(record->training.overlap_gradient_reduce);
  EXPECT_TRUE(record->config.distributed_optimizer);
}

TEST(RunTable, ReadsRowsAndNamesEach) {
  const auto runs = parse_run_table(sample("runs.csv"), "runs.csv");
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].name, "runs.csv:2");
  EXPECT_DOUBLE_EQ(*(*runs)[0].iteration_seconds, 3.78);
  EXPECT_DOUBLE_EQ(*(*runs)[0].peak_reserved_bytes, 28.25 * units::gibibyte);
  EXPECT_TRUE((*runs)[1].out_of_memory);
  EXPECT_FALSE((*runs)[1].peak_reserved_bytes);
  EXPECT_EQ((*runs)[2].recompute, RecomputeMode::selective);
}

TEST(RunTable, BadCellsNameTheirLine) {
  const std::string header = "model,nodes,gpu,framework,tp,pp,dp,mbs,global_batch,seq,iteration_seconds,status\n";
  EXPECT_EQ(parse_run_table(header + "llama3-8b,1,H100-SXM,megatron,x,1,8,1,128,4096,3.1,ok\n", "r.csv").error().message,
            "r.csv:2: tp is 'x', not a positive integer");
  EXPECT_EQ(parse_run_table(header + "llama3-8b,1,H100-SXM,megatron,1,1,8,1,128,4096,3.1,crashed\n", "r.csv").error().message,
            "r.csv:2: status is 'crashed'; write ok or oom");
  EXPECT_EQ(parse_run_table(header + "llama3-8b,1,H100-SXM,megatron,1,1,8,1,128,4096,,ok\n", "r.csv").error().message,
            "r.csv:2: status ok but no iteration_seconds, peak_gib or device_gib; give what the run measured");
  EXPECT_EQ(parse_run_table(header + "llama3-8b,1,H100-SXM,megatron,1,1", "r.csv").error().message,
            "r.csv:2: 6 cells but the header has 12 (a truncated last line?)");
  EXPECT_NE(parse_run_table("model,speed\n", "r.csv").error().message.find("r.csv:1: column 'speed' is not known"),
            std::string::npos);
  const std::string with_recompute = "model,nodes,gpu,framework,tp,pp,dp,mbs,global_batch,seq,recompute,iteration_seconds,status\n";
  EXPECT_EQ(parse_run_table(with_recompute + "llama3-8b,1,H100-SXM,megatron,1,1,8,1,128,4096,block:0,3.1,ok\n", "r.csv")
                .error()
                .message,
            "r.csv:2: recompute is 'block:0': recompute=block:N needs N, the layers recomputed per model chunk, to be a "
            "positive integer (e.g. block:5; recompute=full recomputes every layer)");
  const auto device = parse_run_table(
      "model,nodes,gpu,framework,tp,pp,dp,mbs,global_batch,seq,device_gib,status\nllama3-8b,1,H100-SXM,megatron,1,1,8,1,128,4096,71.5,ok\n",
      "r.csv");
  ASSERT_TRUE(device.ok()) << device.error().message;
  EXPECT_DOUBLE_EQ(*device->front().peak_device_bytes, 71.5 * units::gibibyte);
  const auto block = parse_run_table(with_recompute + "llama3-8b,1,H100-SXM,megatron,1,1,8,1,128,4096,block:5,3.1,ok\n", "r.csv");
  ASSERT_TRUE(block.ok()) << block.error().message;
  EXPECT_EQ((*block)[0].recompute, RecomputeMode::full);
  EXPECT_EQ((*block)[0].recomputed_layers_per_chunk, 5);
}

TEST(RunTable, ALayoutThatDoesNotMakeTheJobIsAnError) {
  const auto runs = parse_run_table(
      "model,nodes,gpu,framework,tp,pp,dp,mbs,global_batch,seq,iteration_seconds,status\n"
      "llama3-8b,2,H100-SXM,megatron,2,2,2,1,128,4096,3.1,ok\n",
      "r.csv");
  ASSERT_TRUE(runs.ok());
  RunDescription run = runs->front();
  run.gpus_per_node = 8;
  const auto record = resolve_run(run, h100_site(), {});
  ASSERT_FALSE(record.ok());
  EXPECT_EQ(record.error().message, "r.csv:2: 8 GPUs do not split evenly over 2 nodes of 8 GPUs");
}

// An MoE run's expert groups, as Megatron prints them: expert_model_parallel_size, and
// expert_tensor_parallel_size resolved to tp when unset (arguments.py @d98e8a64 l.587-588); a dense
// run's log prints the same arguments, which say nothing of it.
TEST(MegatronLog, AnMoeRunKeepsItsExpertGroups) {
  std::string log = sample("megatron_llama3_8b_2nodes.log");
  const auto replace = [&](const std::string& from, const std::string& to) { replace_once(log, from, to); };
  replace("  num_layers ...................................... 32", "  num_layers ...................................... 48");
  replace("  hidden_size ..................................... 4096", "  hidden_size ..................................... 2048");
  replace("  ffn_hidden_size ................................. 14336",
          "  expert_model_parallel_size ...................... 4\n"
          "  expert_tensor_parallel_size ..................... None\n"
          "  ffn_hidden_size ................................. 6144");
  const auto dense = parse_megatron_log(log, "m.log");
  ASSERT_TRUE(dense.ok()) << dense.error().message;
  EXPECT_EQ(dense->ep, std::nullopt);  // no num_experts: the expert arguments describe nothing
  replace("  num_layers ......", "  num_experts ..................................... 128\n  num_layers ......");
  const auto run = parse_megatron_log(log, "m.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->ep, 4);
  EXPECT_EQ(run->etp, 2);  // None: tp
  RunDescription flags;
  flags.name = "the command line";
  flags.model = "qwen3-30b-a3b";
  flags.nodes = 2;
  const auto record = resolve_run(*complete_run(*run, flags), h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->config.ep, 4);
  EXPECT_EQ(record->config.etp, 2);
}

// An MoE record priced without its expert groups would teach the calibration another job's times;
// a dense one with them names what is wrong.
TEST(RunTable, AnMoeRunNeedsItsExpertGroups) {
  const std::string header = "model,nodes,gpu,framework,precision,tp,pp,dp,mbs,global_batch,seq,distopt,iteration_seconds,status";
  const auto without = parse_run_table(header + "\nqwen3-30b-a3b,2,H100-SXM,megatron-core,fp8,1,1,16,1,1024,4096,on,29.7,ok\n", "moe.csv");
  ASSERT_TRUE(without.ok()) << without.error().message;
  const auto refused = resolve_run(without->front(), h100_site(), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "moe.csv:2: qwen3-30b-a3b has experts but the record does not say its expert groups: give ep and etp (a table's "
            "ep and etp columns; for a log, --layout ep=N,etp=M)");

  const auto with = parse_run_table(header + ",ep,etp\nqwen3-30b-a3b,2,H100-SXM,megatron-core,fp8,1,1,16,1,1024,4096,on,29.7,ok,16,1\n",
                                    "moe.csv");
  ASSERT_TRUE(with.ok()) << with.error().message;
  EXPECT_EQ(with->front().ep, 16);
  const auto record = resolve_run(with->front(), h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->config.ep, 16);
  EXPECT_EQ(record->config.etp, 1);
  EXPECT_EQ(record->training.precision, Precision::fp8);

  const auto odd = parse_run_table(header + ",ep,etp\nqwen3-30b-a3b,2,H100-SXM,megatron-core,fp8,1,1,16,1,1024,4096,on,29.7,ok,3,1\n",
                                   "moe.csv");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(resolve_run(odd->front(), h100_site(), {}).error().message, "moe.csv:2: ep=3 does not divide the 128 experts");
  const auto dense = parse_run_table(header + ",ep,etp\nllama3-8b,2,H100-SXM,megatron-core,bf16,1,1,16,1,128,4096,on,3.1,ok,2,1\n",
                                     "dense.csv");
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(resolve_run(dense->front(), h100_site(), {}).error().message,
            "dense.csv:2: ep and etp need a model with experts (num_experts)");
}

// A record is priced as the stack ran it: its own layer split (DeepSpeed's type:transformer
// partition, not Megatron's [a, b x (p-2), c]) and the precision's own defaults (DeepSpeed keeps
// fp16 training's gradients in fp16, engine.cpp), not a split or a gradient buffer of another stack.
TEST(RunTable, ARecordIsPricedAsItsStackRunsIt) {
  const auto runs = parse_run_table(
      "model,nodes,gpu,framework,precision,tp,pp,dp,mbs,global_batch,seq,recompute,distopt,iteration_seconds,status\n"
      "llama2-7b,5,A100-80GB,megatron-deepspeed,fp16,8,5,1,1,64,4096,full,on,20.0,ok\n",
      "ds.csv");
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  const auto record = resolve_run(runs->front(), a100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->config.layers_per_stage, megatron_deepspeed_layer_split(32, 5));
  EXPECT_EQ(record->config.layers_per_stage, (std::vector<int>{7, 7, 6, 6, 6}));
  EXPECT_NE(record->config.layers_per_stage, balanced_layers_per_stage(32, 5));
  EXPECT_EQ(record->training.precision, Precision::fp16);
  EXPECT_FALSE(record->training.gradients_in_fp32);
}

// `pipette calibrate --slurm-job` prices the job as the plugin planned it: the plan record's split,
// framework and engine switches; what the log states still wins.
TEST(PlanRecordRun, ThePlansSplitFrameworkAndEngineArePriced) {
  const auto plan = parse_plan_record(
      "pipette_plan_record=2\nmodel=llama3-8b\nnodes=2\ngpus_per_node=8\nglobal_batch=128\nsequence_length=4096\n"
      "tp=2\npp=2\ndp=4\ncp=1\nep=1\netp=1\nvpp=1\nmbs=1\nrecompute=selective\nsp=1\ndistopt=1\nfsdp=0\n"
      "layers_per_stage=15,17\nframework=nemo\nengine=precision=fp8,dp-overlap=off\n",
      "job.plan");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  auto record = resolve_run(*plan, h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->config.layers_per_stage, (std::vector<int>{15, 17}));
  EXPECT_EQ(record->framework, "nemo");
  EXPECT_EQ(record->training.precision, Precision::fp8);
  EXPECT_FALSE(record->training.overlap_gradient_reduce);
  EXPECT_TRUE(record->training.fp8_parameters);  // NeMo's fp8 recipes gather fp8 weights (stack_profile.cpp)

  auto log = parse_megatron_log(sample("megatron_llama3_8b_2nodes.log"), "m.log");  // bf16, as the job ran
  ASSERT_TRUE(log.ok());
  auto completed = complete_run(*log, *plan);
  ASSERT_TRUE(completed.ok()) << completed.error().message;
  record = resolve_run(*completed, h100_site(), {});
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record->training.precision, Precision::bf16);
  EXPECT_FALSE(record->training.overlap_gradient_reduce);

  auto uneven = *plan;
  uneven.layers_per_stage = {15, 16};
  EXPECT_NE(resolve_run(uneven, h100_site(), {}).error().message.find("layers_per_stage must give each of the 2 stages"),
            std::string::npos);
}

TEST(CompleteRun, ConflictsNameBothSources) {
  RunDescription log;
  log.name = "job.log:2";
  log.tp = 2;
  RunDescription plan;
  plan.name = "plan 42";
  plan.tp = 4;
  const auto run = complete_run(log, plan);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().message, "job.log:2: the log says tp 2 but plan 42 says 4");
}

}  // namespace
}  // namespace pipette
