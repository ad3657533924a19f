// Run-record readers against the frameworks' own line formats. Samples in tests/data/run-records/
// are written by make_samples.py from (commits read):
//  - Megatron-LM d98e8a64: megatron/training/arguments.py:1990 _print_args (the arguments block),
//    megatron/training/training.py:3567-3575 training_log ("iteration N/M | … | elapsed time per
//    iteration (ms): X |"), megatron/training/utils/common_utils.py:313-334 report_memory
//    ("[Rank R] (after N iterations) memory (MB) | allocated: … | max allocated: … | reserved: … |
//    max reserved: …");
//  - torchtitan b5bcd76c: torchtitan/components/metrics.py:527-535 (the coloured "step: … memory:
//    X GiB(P%)  tps: T …" line; tps per GPU, memory = max reserved).
#include "pipette/topology/run_records.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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
            "r.csv:2: status ok but neither iteration_seconds nor peak_gib; give what the run measured");
  EXPECT_EQ(parse_run_table(header + "llama3-8b,1,H100-SXM,megatron,1,1", "r.csv").error().message,
            "r.csv:2: 6 cells but the header has 12 (a truncated last line?)");
  EXPECT_NE(parse_run_table("model,speed\n", "r.csv").error().message.find("r.csv:1: column 'speed' is not known"),
            std::string::npos);
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
