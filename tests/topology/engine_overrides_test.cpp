// The engine's switches: the --engine / --pipette-engine parser, the site file's defaults.engine,
// and the order stack default → site → job with its refusals (prepare_job).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "pipette/core/stack_profile.hpp"
#include "pipette/topology/hostlist.hpp"
#include "pipette/topology/job_planner.hpp"
#include "pipette/topology/site_config.hpp"

namespace pipette {
namespace {

TEST(EngineOverrides, EveryKeyAndValueParses) {
  auto all = parse_engine_overrides(
      " precision=fp8, attention=unfused,fp32-grads=off,dp-overlap=false,tp-overlap=1,tp-comm-overlap=on,"
      "tp-recompute-allgather=0,pp-schedule=afab,nvls=off ");
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all->precision, Precision::fp8);
  EXPECT_EQ(all->attention, AttentionKernel::unfused);
  EXPECT_EQ(all->fp32_gradients, false);
  EXPECT_EQ(all->dp_overlap, false);
  EXPECT_EQ(all->tp_overlap, true);
  EXPECT_EQ(all->tp_comm_overlap, true);
  EXPECT_EQ(all->tp_recompute_allgather, false);
  EXPECT_EQ(all->pipeline_schedule, PipelineSchedule::all_forward_all_backward);
  EXPECT_EQ(all->nvls, false);
  EXPECT_EQ(parse_engine_overrides("pp-schedule=1f1b")->pipeline_schedule, PipelineSchedule::one_forward_one_backward);
  for (const auto& [text, precision] : std::vector<std::pair<std::string, Precision>>{
           {"precision=fp32", Precision::fp32}, {"precision=fp16", Precision::fp16}, {"precision=bf16", Precision::bf16}})
    EXPECT_EQ(parse_engine_overrides(text)->precision, precision) << text;
  EXPECT_EQ(parse_engine_overrides("attention=flash")->attention, AttentionKernel::flash);
  EXPECT_EQ(*parse_engine_overrides(""), EngineOverrides{});
}

TEST(EngineOverrides, BadInputIsOneLineNamingTheKeyAndTheAcceptedValues) {
  const std::pair<const char*, const char*> cases[] = {
      {"precision=fp4", "engine: \"precision=fp4\": precision must be fp32, fp16, bf16 or fp8 (got \"fp4\")"},
      {"attention=paged", "attention must be flash or unfused (got \"paged\")"},
      {"fp32-grads=maybe", "\"fp32-grads=maybe\": fp32-grads must be on or off"},
      {"dp-overlap=", "dp-overlap must be on or off (got \"\")"},
      {"tp-overlap=yes", "tp-overlap must be on or off"},
      {"tp-comm-overlap=2", "tp-comm-overlap must be on or off"},
      {"tp-recompute-allgather=no", "tp-recompute-allgather must be on or off"},
      {"ce-fusion=fused", "ce-fusion must be on or off (got \"fused\")"},
      {"fused-norm=triton", "fused-norm must be on or off (got \"triton\")"},
      {"pp-schedule=gpipe", "pp-schedule must be 1f1b or afab (got \"gpipe\")"},
      {"nvls=2", "nvls must be on or off (got \"2\")"},
      {"overlap-grad-reduce=on", "unknown key \"overlap-grad-reduce\"; keys are precision, attention, fp8-params, fp32-grads, "
                                 "dp-overlap, tp-overlap, tp-comm-overlap, tp-recompute-allgather, ce-fusion, fused-norm, pp-schedule, "
                                 "nvls"},
      {"dp-overlap", "expected key=value"},
      {"dp-overlap=on,,tp-overlap=on", "empty item"},
      {"dp-overlap=on,dp-overlap=off", "dp-overlap is given twice; keep one"},
  };
  for (const auto& [text, expected] : cases) {
    auto parsed = parse_engine_overrides(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.error().message.find(expected), std::string::npos) << parsed.error().message;
    EXPECT_EQ(parsed.error().message.find('\n'), std::string::npos);
  }
}

TEST(EngineOverrides, SiteFileSetsTheEngineStrictly) {
  auto site = load_site_config(PIPETTE_SOURCE_DIR "/tests/data/site/engine.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  EngineOverrides expected;
  expected.precision = Precision::fp16;
  expected.dp_overlap = false;
  expected.tp_comm_overlap = true;
  EXPECT_EQ(site->defaults.engine, expected);
  // The older defaults.precision alone is the engine's precision.
  auto precision_only = parse_site_config("defaults:\n  precision: fp8\n", "s.yaml");
  ASSERT_TRUE(precision_only.ok());
  EXPECT_EQ(precision_only->defaults.engine.precision, Precision::fp8);
  EXPECT_EQ(parse_site_config("", "s.yaml")->defaults.engine, EngineOverrides{});

  const std::pair<const char*, const char*> refused[] = {
      {"engine-precision-conflict.yaml", "engine-precision-conflict.yaml:5: key 'defaults.precision' disagrees with "
                                         "defaults.engine.precision (bf16); keep one"},
      {"engine-bad-value.yaml", "engine-bad-value.yaml:4: key 'defaults.engine.dp-overlap' dp-overlap must be on or off "
                                "(got \"sometimes\")"},
      {"engine-unknown-key.yaml", "engine-unknown-key.yaml:4: key 'defaults.engine.overlap_grad_reduce' is not a known key; "
                                  "expected one of: precision, attention, fp8-params, fp32-grads"},
  };
  for (const auto& [file, expected] : refused) {
    auto bad = load_site_config(std::string(PIPETTE_SOURCE_DIR "/tests/data/site/") + file);
    ASSERT_FALSE(bad.ok()) << file;
    EXPECT_NE(bad.error().message.find(expected), std::string::npos) << bad.error().message;
    EXPECT_EQ(bad.error().message.find('\n'), std::string::npos);
  }
}

// The one rule both places that take a precision twice apply (the job's --precision beside
// --engine precision=, the site's defaults.precision beside defaults.engine.precision).
TEST(EngineOverrides, APrecisionGivenTwiceMustAgree) {
  EngineOverrides engine;
  EXPECT_EQ(merge_precision(engine, Precision::fp8), std::nullopt);
  EXPECT_EQ(engine.precision, Precision::fp8);
  EXPECT_EQ(merge_precision(engine, Precision::fp8), std::nullopt);
  // Disagreeing: the engine's precision comes back for the message, and stays.
  EXPECT_EQ(merge_precision(engine, Precision::bf16), Precision::fp8);
  EXPECT_EQ(engine.precision, Precision::fp8);
}

// The site file's defaults.precision and the engine's precision key (--engine, --precision,
// --pipette-precision, defaults.engine) accept the same spellings: each lists the same values in
// its error, and every listed value, or near miss, is accepted by both (as the same precision) or
// by neither.
TEST(EngineOverrides, SiteAndEngineAcceptTheSamePrecisionSpellings) {
  // The values between "must be " and " (got", split at any of `separators`.
  const auto listed = [](const std::string& message, const std::vector<std::string>& separators) {
    const std::size_t first = message.find("must be ") + 8;
    const std::string values = message.substr(first, message.find(" (got", first) - first);
    // Scanned rather than rewritten in place: GCC 12 at -O3 misreads std::string::replace in a
    // loop as an overlapping memcpy (-Wrestrict), which the Release CI build treats as an error.
    std::set<std::string> out;
    std::string value;
    for (std::size_t at = 0; at < values.size();) {
      const auto separator = std::find_if(separators.begin(), separators.end(), [&](const std::string& candidate) {
        return values.compare(at, candidate.size(), candidate) == 0;
      });
      if (separator == separators.end()) {
        value += values[at++];
        continue;
      }
      out.insert(value);
      value.clear();
      at += separator->size();
    }
    out.insert(value);
    return out;
  };
  EngineOverrides scratch;
  const std::optional<std::string> engine_error = set_engine_override(scratch, "precision", "fp4");
  ASSERT_TRUE(engine_error);
  const auto site_refusal = parse_site_config("defaults:\n  precision: fp4\n", "s.yaml");
  ASSERT_FALSE(site_refusal.ok());
  EXPECT_NE(site_refusal.error().message.find("s.yaml:2: key 'defaults.precision' must be "), std::string::npos)
      << site_refusal.error().message;
  const std::set<std::string> engine_values = listed(*engine_error, {", ", " or "});
  EXPECT_EQ(engine_values, listed(site_refusal.error().message, {" | "}));
  EXPECT_EQ(engine_values.size(), engine_precisions().size());

  std::vector<std::string> spellings(engine_values.begin(), engine_values.end());
  for (const char* near_miss : {"fp4", "tf32", "half", "float16", "bfloat16", "float32", "BF16", "fp8_e4m3", " fp8", ""})
    spellings.emplace_back(near_miss);
  for (const std::string& spelling : spellings) {
    EngineOverrides engine;
    const bool engine_accepts = !set_engine_override(engine, "precision", spelling);
    const auto site = parse_site_config("defaults:\n  precision: '" + spelling + "'\n", "s.yaml");
    EXPECT_EQ(engine_accepts, site.ok()) << "'" << spelling << "'";
    EXPECT_EQ(engine_accepts, engine_values.count(spelling) == 1) << "'" << spelling << "'";
    if (engine_accepts && site.ok()) {
      EXPECT_EQ(engine.precision, site->defaults.engine.precision) << spelling;
    }
  }
}

class EngineSources : public ::testing::Test {
 protected:
  void SetUp() override {
    request_.model = "llama2-7b";
    request_.global_batch = 256;
    request_.sequence_length = 4096;
    request_.node_names = *expand_hostlist("n[1-2]");
    request_.gpus_per_node = 8;
    request_.gpu = "H100-SXM";
    request_.inspection = NodeInspection{};
  }
  static std::string source_of(const PreparedJob& job, const std::string& key) {
    for (const EngineSetting& setting : job.engine)
      if (setting.key == key) return setting.value + " from " + to_string(setting.source);
    return "absent";
  }
  JobRequest request_;
};

TEST_F(EngineSources, StackThenSiteThenJob) {
  SiteConfig site = *load_site_config(PIPETTE_SOURCE_DIR "/tests/data/site/engine.yaml");
  auto job = prepare_job(request_, site);
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "precision"), "fp16 from site");
  EXPECT_EQ(source_of(*job, "dp-overlap"), "off from site");
  EXPECT_EQ(source_of(*job, "tp-comm-overlap"), "on from site");
  EXPECT_EQ(source_of(*job, "tp-overlap"), "on from stack default");
  EXPECT_EQ(source_of(*job, "attention"), "flash from stack default");
  EXPECT_EQ(job->training.precision, Precision::fp16);
  EXPECT_FALSE(job->training.overlap_gradient_reduce);
  EXPECT_TRUE(job->training.overlap_tensor_parallel_communication);
  EXPECT_EQ(job->engine.size(), engine_keys().size());

  request_.engine = "dp-overlap=on,tp-comm-overlap=off";
  request_.precision = "bf16";
  job = prepare_job(request_, site);
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "precision"), "bf16 from job");
  EXPECT_EQ(source_of(*job, "dp-overlap"), "on from job");
  EXPECT_EQ(source_of(*job, "tp-comm-overlap"), "off from job");
  EXPECT_TRUE(job->training.overlap_gradient_reduce);

  // Without any switch, the training is the stack's: every plan as before.
  TrainingSpec stack;
  stack.global_batch_sequences = 256;
  stack.sequence_length = 4096;
  request_ = {};
  SetUp();
  for (const char* framework : {"megatron-core", "nemo", "torchtitan", "megatron-deepspeed", "nanotron", "deepspeed"}) {
    request_.framework = framework;
    job = prepare_job(request_, SiteConfig{});
    ASSERT_TRUE(job.ok()) << framework << ": " << job.error().message;
    stack.target = job->training.target;
    apply_stack_profile(stack);
    EXPECT_EQ(job->training.precision, stack.precision) << framework;
    EXPECT_EQ(job->training.attention, stack.attention) << framework;
    EXPECT_EQ(job->training.gradients_in_fp32, stack.gradients_in_fp32) << framework;
    EXPECT_EQ(job->training.overlap_gradient_reduce, stack.overlap_gradient_reduce) << framework;
    EXPECT_EQ(job->training.overlap_tensor_parallel_backward, stack.overlap_tensor_parallel_backward) << framework;
    EXPECT_EQ(job->training.overlap_tensor_parallel_communication, stack.overlap_tensor_parallel_communication) << framework;
    EXPECT_EQ(job->training.tensor_parallel_recompute_allgather, stack.tensor_parallel_recompute_allgather) << framework;
    EXPECT_EQ(job->training.fp8_parameters, stack.fp8_parameters) << framework;
    EXPECT_EQ(job->training.nccl_nvls, stack.nccl_nvls) << framework;
    for (const EngineSetting& setting : job->engine) EXPECT_EQ(setting.source, EngineSource::stack) << setting.key;
  }
}

// nvls: NCCL's default is on; Megatron-Bridge's launch and performance scripts set NCCL_NVLS_ENABLE=0
// (scripts/performance/utils/executors.py l.43 @v0.4.0, scripts/training/launch_with_sbatch.sh l.82
// @067f987d), so nemo's default is off. Any stack runs either; nothing is exported.
TEST_F(EngineSources, NvlinkSharpFollowsTheStackSiteAndJob) {
  const auto planned = [&](const char* framework, const char* engine, const SiteConfig& site) {
    request_.framework = framework;
    request_.engine = engine;
    auto job = prepare_job(request_, site);
    EXPECT_TRUE(job.ok()) << framework << " " << engine << ": " << job.error().message;
    return job.ok() ? source_of(*job, "nvls") + (job->training.nccl_nvls ? " (priced on)" : " (priced off)") : "refused";
  };
  const SiteConfig none;
  EXPECT_EQ(planned("megatron-core", "", none), "on from stack default (priced on)");
  EXPECT_EQ(planned("nanotron", "", none), "on from stack default (priced on)");
  EXPECT_EQ(planned("torchtitan", "", none), "on from stack default (priced on)");
  EXPECT_EQ(planned("nemo", "", none), "off from stack default (priced off)");
  EXPECT_EQ(planned("nemo", "nvls=on", none), "on from job (priced on)");
  SiteConfig off = *parse_site_config("defaults:\n  engine:\n    nvls: off\n", "s.yaml");
  EXPECT_EQ(planned("megatron-core", "", off), "off from site (priced off)");
  EXPECT_EQ(planned("deepspeed", "nvls=on", off), "on from job (priced on)");
}

// fp8-params: Megatron-Bridge's fp8 presets keep fp8 weights (training/mixed_precision.py
// @067f987d l.231-302), Megatron-LM only with --fp8-param-gather; off under any other precision.
TEST_F(EngineSources, Fp8ParametersFollowTheStackAndThePrecision) {
  const auto planned = [&](const char* framework, const char* precision, const char* engine, const SiteConfig& site) {
    request_.framework = framework;
    request_.precision = precision;
    request_.engine = engine;
    return prepare_job(request_, site);
  };
  auto job = planned("nemo", "fp8", "", SiteConfig{});
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "fp8-params"), "on from stack default");
  EXPECT_TRUE(job->training.fp8_parameters);
  job = planned("nemo", "bf16", "", SiteConfig{});
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "fp8-params"), "off from stack default");
  EXPECT_FALSE(job->training.fp8_parameters);
  job = planned("nemo", "fp8", "fp8-params=off", SiteConfig{});
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "fp8-params"), "off from job");
  job = planned("megatron-core", "fp8", "", SiteConfig{});
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "fp8-params"), "off from stack default");
  job = planned("megatron-core", "fp8", "fp8-params=on", SiteConfig{});
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "fp8-params"), "on from job");
  EXPECT_TRUE(job->training.fp8_parameters);
  // A site that runs fp8 recipes says so once; its bf16 jobs are unaffected.
  SiteConfig site;
  site.defaults.engine.fp8_parameters = true;
  job = planned("megatron-core", "bf16", "", site);
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "fp8-params"), "off from site");
  // A job that asks for fp8 weights without fp8, or without the distributed optimizer Megatron-LM
  // asserts beside them, is told so.
  job = planned("megatron-core", "bf16", "fp8-params=on", SiteConfig{});
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.error().message.find("engine fp8-params=on (job) cannot run on megatron-core: it describes the "
                                     "weights of an fp8 recipe and the job trains in bf16"),
            std::string::npos)
      << job.error().message;
  request_.fixed = "distopt=off";
  job = planned("megatron-core", "fp8", "fp8-params=on", SiteConfig{});
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.error().message.find("training/arguments.py @d98e8a64 l.1095-1097"), std::string::npos)
      << job.error().message;
  // With distopt left to the search, every plan uses the distributed optimizer, one replica included.
  request_.fixed = "dp=1";
  request_.node_names = *expand_hostlist("n1");
  job = planned("megatron-core", "fp8", "fp8-params=on", SiteConfig{});
  ASSERT_TRUE(job.ok()) << job.error().message;
  const auto plans = plan_job(request_, SiteConfig{});
  ASSERT_TRUE(plans.ok()) << plans.error().message;
  ASSERT_FALSE(plans->search.plans.empty());
  for (const Plan& plan : plans->search.plans) EXPECT_TRUE(plan.config.distributed_optimizer) << plan.config.dp;
}

// DeepSpeed's gradient accumulation dtype defaults to the model's (deepspeed/runtime/engine.py
// @edaa7221 l.1485-1496), and Pipette's config names it only for bf16 (fp32): an fp16 job on a
// DeepSpeed stack is priced with the fp16 gradients it runs, a bf16 one with the fp32 buffer of the
// BF16_Optimizer; Megatron-core's fp16 keeps its fp32 main-grad buffer.
TEST_F(EngineSources, DeepSpeedFp16AccumulatesItsGradientsInFp16) {
  const auto planned = [&](const char* framework, const char* precision) {
    request_.framework = framework;
    request_.precision = precision;
    return prepare_job(request_, SiteConfig{});
  };
  for (const char* framework : {"megatron-deepspeed", "deepspeed"}) {
    auto job = planned(framework, "fp16");
    ASSERT_TRUE(job.ok()) << job.error().message;
    EXPECT_EQ(source_of(*job, "fp32-grads"), "off from stack default") << framework;
    EXPECT_FALSE(job->training.gradients_in_fp32) << framework;
    job = planned(framework, "bf16");
    ASSERT_TRUE(job.ok()) << job.error().message;
    EXPECT_EQ(source_of(*job, "fp32-grads"), "on from stack default") << framework;
  }
  const auto job = planned("megatron-core", "fp16");
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(source_of(*job, "fp32-grads"), "on from stack default");
}

TEST_F(EngineSources, WhatAStackCannotRunIsRefusedWithTheReason) {
  struct Case {
    const char* framework;
    const char* engine;
    const char* precision;
    const char* expected;
  };
  const Case cases[] = {
      {"megatron-core", "tp-recompute-allgather=on", "",
       "engine tp-recompute-allgather=on (job) cannot run on megatron-core: tp-recompute-allgather is nanotron's"},
      {"nemo", "tp-comm-overlap=on", "", "comm_overlap config"},
      {"torchtitan", "tp-comm-overlap=on", "", "Transformer Engine userbuffers"},
      {"megatron-core", "tp-comm-overlap=on", "", ""},
      {"megatron-core", "tp-comm-overlap=on,fp32-grads=off", "", ""},
      {"megatron-core", "fp32-grads=off", "fp16", "16-bit gradients need bf16 or fp8 training"},
      {"megatron-core", "tp-overlap=off", "", "Pipette exports no switch to change that"},
      {"megatron-core", "attention=unfused", "", "its flash attention would run"},
      {"megatron-deepspeed", "attention=flash", "", "its unfused attention would run"},
      {"deepspeed", "attention=unfused", "", ""},
      {"megatron-deepspeed", "tp-overlap=on", "", "megatron/arguments.py @4efb479d l.395-399"},
      {"megatron-deepspeed", "dp-overlap=on", "", "overlap_comm"},
      {"torchtitan", "dp-overlap=off", "", "has no switch"},
      // torchtitan's TP collectives overlap only under torch.compile's async TP, off by default.
      {"torchtitan", "tp-overlap=on", "", "compile.enable_async_tensor_parallel, config/configs.py @b5bcd76c"},
      {"torchtitan", "tp-overlap=off", "", ""},
      {"nanotron", "precision=fp8", "", "fp8 is priced as Transformer Engine's recipe"},
      {"nanotron", "", "fp8", "engine precision=fp8 (job) cannot run on nanotron"},
      {"nanotron", "tp-overlap=on,tp-recompute-allgather=off,fp32-grads=off", "", ""},
      // nanotron's own pp_engine; every other stack's pipeline is exported as 1F1B.
      {"nanotron", "pp-schedule=afab", "", ""},
      // Megatron-core's --cross-entropy-loss-fusion and Megatron-Bridge's model.cross_entropy_loss_fusion.
      {"megatron-core", "ce-fusion=on", "", ""},
      {"nemo", "ce-fusion=off", "", ""},
      {"nanotron", "ce-fusion=on", "",
       "engine ce-fusion=on (job) cannot run on nanotron: ce-fusion is Megatron-core's --cross-entropy-loss-fusion"},
      {"torchtitan", "ce-fusion=off", "", ""},
      // torchtitan's composite RMSNorm on an older PyTorch; every other stack's norms are fused kernels.
      {"torchtitan", "fused-norm=off", "", ""},
      {"megatron-core", "fused-norm=off", "", "megatron-core runs Transformer Engine's fused norms"},
      {"nanotron", "fused-norm=off", "", "nanotron runs TritonRMSNorm"},
      {"deepspeed", "fused-norm=off", "", ""},
      {"nanotron", "fused-norm=on", "", ""},
      {"torchtitan", "pp-schedule=afab", "",
       "engine pp-schedule=afab (job) cannot run on torchtitan: afab (all forward, then all backward) is nanotron's"},
      {"megatron-core", "pp-schedule=1f1b", "", ""},
      // The recipe's mixed_precision.grad_reduce_in_fp32, described like the precision.
      {"nemo", "fp32-grads=off", "", ""},
      {"torchtitan", "fp32-grads=off", "", "no gradient-precision switch for torchtitan"},
      // DeepSpeed keeps fp16 training's gradients in fp16; bf16's fp32 accumulation is its default.
      {"megatron-deepspeed", "fp32-grads=on", "fp16",
       "engine fp32-grads=on (job) cannot run on megatron-deepspeed: DeepSpeed accumulates fp16 training's gradients "
       "in fp16"},
      {"deepspeed", "fp32-grads=off", "fp16", ""},
      {"deepspeed", "fp32-grads=on", "bf16", ""},
      {"megatron-core", "precision=bf16", "fp8", "precision fp8 conflicts with the engine's precision=bf16"},
      {"megatron-core", "precision=fp8", "fp8", ""},
      {"megatron-core", "", "fp9", "precision must be fp32, fp16, bf16 or fp8 (got \"fp9\")"},
  };
  for (const Case& c : cases) {
    request_.framework = c.framework;
    request_.engine = c.engine;
    request_.precision = c.precision;
    auto job = prepare_job(request_, SiteConfig{});
    if (std::string(c.expected).empty()) {
      EXPECT_TRUE(job.ok()) << c.framework << " " << c.engine << ": " << job.error().message;
      continue;
    }
    ASSERT_FALSE(job.ok()) << c.framework << " " << c.engine;
    EXPECT_NE(job.error().message.find(c.expected), std::string::npos) << job.error().message;
    EXPECT_EQ(job.error().message.find('\n'), std::string::npos);
  }
  // Switches that need sequence parallelism refuse sp=off.
  request_.framework = "megatron-core";
  request_.engine = "tp-comm-overlap=on";
  request_.precision.clear();
  request_.fixed = "sp=off";
  auto job = prepare_job(request_, SiteConfig{});
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.error().message.find("needs sequence parallelism (training/arguments.py @d98e8a64 l.1441-1442)"),
            std::string::npos)
      << job.error().message;
  request_.framework = "nanotron";
  request_.engine = "tp-overlap=on";
  job = prepare_job(request_, SiteConfig{});
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.error().message.find("nn.py @2411b022 l.145-146"), std::string::npos) << job.error().message;
  // A site switch a job's stack cannot run names the site as its source.
  SiteConfig site;
  site.defaults.engine.tp_recompute_allgather = false;
  request_.framework = "torchtitan";
  request_.engine.clear();
  request_.fixed.clear();
  job = prepare_job(request_, site);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.error().message.find("tp-recompute-allgather=off (site) cannot run on torchtitan"), std::string::npos)
      << job.error().message;
}

}  // namespace
}  // namespace pipette
