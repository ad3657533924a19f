#include "pipette/core/engine.hpp"

#include "pipette/core/stack_profile.hpp"

namespace pipette {

namespace {

const char* on_off(bool value) { return value ? "on" : "off"; }

bool megatron_stack(Framework framework) { return framework == Framework::megatron_core || framework == Framework::nemo; }

// Why `framework` cannot run the switch `key` at `value`, or "" when it can (and the export
// carries it, or nothing needs to: launch.cpp). Only values that differ from the stack's own are
// asked about, so every stack runs its defaults.
std::string refusal(const std::string& key, bool value, Framework framework) {
  const std::string name = to_string(framework);
  if (key == "fp32-grads") {
    // Megatron-LM: with bf16, --grad-reduce-in-bf16 turns accumulate_allreduce_grads_in_fp32 off
    // (training/arguments.py @d98e8a64 l.1213-1214, the flag l.3053), so the DDP gradient buffer
    // and its reduction are 16-bit (training/training.py l.2635 grad_reduce_in_fp32); nanotron:
    // optimizer.accumulate_grad_in_fp32 (config/config.py @2411b022 l.405 OptimizerArgs). NeMo: the
    // recipe's mixed_precision.grad_reduce_in_fp32 (Megatron-Bridge training/mixed_precision.py
    // @067f987d l.47, on by default; its perf recipes turn it off, e.g. perf_recipes/gpt_oss/
    // common.py l.81), which like the precision the job's recipe sets: described, not exported.
    // Pipette exports no such switch for the other stacks.
    if (framework == Framework::megatron_core || framework == Framework::nanotron || framework == Framework::nemo)
      return {};
    // Only fp16 training makes 16-bit gradients the DeepSpeed stacks' own (apply_engine_overrides).
    if (value && runs_on_deepspeed(framework))
      return "DeepSpeed accumulates fp16 training's gradients in fp16, in the parameters' .grad (its ZeRO and FP16 "
             "optimizers: deepspeed/runtime/engine.py @edaa7221 l.1978-2021), and Pipette's DeepSpeed config asks "
             "for nothing else; train in bf16 for fp32 accumulation";
    return "Pipette exports no gradient-precision switch for " + name + " (megatron-core: --grad-reduce-in-bf16, "
           "nanotron: optimizer.accumulate_grad_in_fp32; nemo: the recipe's mixed_precision.grad_reduce_in_fp32)";
  }
  if (key == "dp-overlap") {
    // Megatron-core's --overlap-grad-reduce / Megatron-Bridge's ddp.overlap_grad_reduce.
    if (megatron_stack(framework)) return {};
    if (value)
      return name + " reduces gradients after the backward here (stack_profile.cpp); DeepSpeed's overlap_comm is "
             "neither priced nor exported";
    return name + " has no switch that stops its gradient reduction from overlapping the backward (torchtitan: "
           "DDP/FSDP hooks; nanotron: the DDP hook, optim/gradient_accumulator.py l.383-386)";
  }
  if (key == "tp-overlap") {
    // nanotron's parallelism.tp_linear_async_communication (config/parallelism_config.py l.34).
    if (framework == Framework::nanotron) return {};
    if (framework == Framework::torchtitan)
      return "torchtitan overlaps TP collectives with its GEMMs only under torch.compile's async TP "
             "(compile.enable_async_tensor_parallel, config/configs.py @b5bcd76c l.298-313), which Pipette neither "
             "prices nor exports";
    if (value)
      return name + " runs the TP backward collectives synchronously (Megatron-DeepSpeed: megatron/arguments.py "
             "@4efb479d l.395-399; DeepSpeed has no tensor parallelism)";
    return name + " is priced with the TP backward collectives asynchronous, as Transformer Engine issues them "
           "(layernorm_linear.py @d0067d0d l.780-800, async_op=True), and Pipette exports no switch to change that";
  }
  if (key == "tp-comm-overlap") {
    // Megatron-core's --tp-comm-overlap: Transformer Engine's userbuffers (core/model_parallel_config.py
    // @d98e8a64 l.265, a flag through training/arguments.py l.2373). Megatron-Bridge sets it from its
    // own comm_overlap config, which Pipette does not export.
    if (framework == Framework::megatron_core) return {};
    if (framework == Framework::nemo)
      return "Megatron-Bridge takes it from its comm_overlap config (CommOverlapConfig), which Pipette does not export";
    return "tp-comm-overlap is Megatron-core's --tp-comm-overlap (Transformer Engine userbuffers, "
           "core/model_parallel_config.py @d98e8a64 l.265), which " + name + " does not have";
  }
  if (key == "ce-fusion") {
    // Megatron-core's --cross-entropy-loss-fusion (core/model_parallel_config.py @d98e8a64 l.320),
    // Megatron-Bridge's model.cross_entropy_loss_fusion (models/gpt_provider.py @067f987d l.205).
    if (megatron_stack(framework)) return {};
    return "ce-fusion is Megatron-core's --cross-entropy-loss-fusion (Megatron-Bridge: model.cross_entropy_loss_fusion); " +
           name + " runs its own cross entropy, which Pipette neither switches nor exports";
  }
  if (key == "fused-norm") {
    // What the job's PyTorch and torchtitan run (described like the precision, not exported):
    // torchtitan's own composite RMSNorm until 2025 (torchtitan/models/norms.py @9dec370 l.77-102,
    // the llama configs' norm_type "rmsnorm"), nn.RMSNorm's composite rms_norm on a PyTorch without
    // the fused aten::_fused_rms_norm (pytorch/pytorch#153666).
    // A model of the user's own under DeepSpeed runs whatever norm it has.
    if (framework == Framework::torchtitan || framework == Framework::deepspeed) return {};
    const char* kernel = megatron_stack(framework)            ? "Transformer Engine's fused norms"
                         : framework == Framework::nanotron ? "TritonRMSNorm (models/llama.py @2411b022 l.729, 737)"
                                                            : "apex's fused norms (megatron/model/__init__.py @4efb479d l.8-10)";
    return name + " runs " + kernel + "; fused-norm=off describes an eager composite RMSNorm (torchtitan's on an older "
           "PyTorch, or a DeepSpeed user's model)";
  }
  if (key == "tp-recompute-allgather") {
    if (framework == Framework::nanotron) return {};
    return "tp-recompute-allgather is nanotron's parallelism.tp_recompute_allgather (config/parallelism_config.py "
           "@2411b022 l.36); " + name + " has no such switch";
  }
  return {};
}

std::string precision_refusal(Precision precision, Framework framework) {
  if (precision != Precision::fp8 || megatron_stack(framework)) return {};
  return "fp8 is priced as Transformer Engine's recipe (fp8 GEMM inputs, memory.cpp), which " +
         std::string(to_string(framework)) + " does not run";
}

std::string attention_refusal(AttentionKernel attention, Framework framework) {
  // A model of the user's own under DeepSpeed runs whatever kernel it has, and nothing is exported.
  const AttentionKernel own = stack_profile(framework).attention;
  if (framework == Framework::deepspeed || attention == own) return {};
  return std::string("Pipette exports no attention-kernel switch for ") + to_string(framework) + ": its " +
         to_string(own) + " attention would run";
}

}  // namespace

const char* to_string(EngineSource source) {
  switch (source) {
    case EngineSource::stack: return "stack default";
    case EngineSource::site: return "site";
    case EngineSource::job: return "job";
  }
  return "?";
}

const std::vector<std::string>& engine_keys() {
  static const std::vector<std::string> keys = {"precision",       "attention",       "fp8-params",
                                                "fp32-grads",      "dp-overlap",      "tp-overlap",
                                                "tp-comm-overlap", "tp-recompute-allgather", "ce-fusion",
                                                "fused-norm",      "pp-schedule",     "nvls"};
  return keys;
}

ResolvedEngine apply_engine_overrides(TrainingSpec& training, const EngineOverrides& site, const EngineOverrides& job) {
  ResolvedEngine resolved;
  const Framework framework = training.target.framework;
  const auto fail = [&](const std::string& key, const std::string& value, EngineSource source, const std::string& why) {
    if (resolved.problem.empty())
      resolved.problem = "engine " + key + "=" + value + " (" + to_string(source) + ") cannot run on " +
                         to_string(framework) + ": " + why;
  };
  // The job's value, else the site's, else the stack's; its source.
  const auto pick = [](auto& slot, const auto& from_site, const auto& from_job) {
    if (from_job) {
      slot = *from_job;
      return EngineSource::job;
    }
    if (from_site) {
      slot = *from_site;
      return EngineSource::site;
    }
    return EngineSource::stack;
  };

  EngineSource source = pick(training.precision, site.precision, job.precision);
  resolved.settings.push_back({"precision", to_string(training.precision), source});
  if (source != EngineSource::stack)
    if (const std::string why = precision_refusal(training.precision, framework); !why.empty())
      fail("precision", to_string(training.precision), source, why);

  source = pick(training.attention, site.attention, job.attention);
  resolved.settings.push_back({"attention", to_string(training.attention), source});
  if (source != EngineSource::stack)
    if (const std::string why = attention_refusal(training.attention, framework); !why.empty())
      fail("attention", to_string(training.attention), source, why);

  // How an fp8 recipe keeps its weights, which the job's script decides as it decides the precision
  // (neither is exported). The stack's default now that the precision is known; under another
  // precision it is off whatever the site says, and a job that asks for it there is told so.
  training.fp8_parameters = stack_profile(framework).fp8_parameters;
  source = pick(training.fp8_parameters, site.fp8_parameters, job.fp8_parameters);
  if (training.precision != Precision::fp8) {
    if (source == EngineSource::job && training.fp8_parameters)
      fail("fp8-params", "on", source,
           std::string("it describes the weights of an fp8 recipe and the job trains in ") +
               to_string(training.precision) + "; set precision=fp8 or drop fp8-params");
    training.fp8_parameters = false;
  }
  resolved.settings.push_back({"fp8-params", on_off(training.fp8_parameters), source});
  if (framework == Framework::megatron_core && training.fp8_parameters && training.fixed.distributed_optimizer &&
      !*training.fixed.distributed_optimizer) {
    fail("fp8-params", "on", source,
         "--fp8-param-gather needs the distributed optimizer (training/arguments.py @d98e8a64 l.1095-1097); "
         "drop distopt=off from the fixed knobs");
  }

  const auto switch_setting = [&](const char* key, bool& slot, const std::optional<bool>& from_site,
                                  const std::optional<bool>& from_job, bool always_asked) {
    const bool before = slot;
    const EngineSource from = pick(slot, from_site, from_job);
    resolved.settings.push_back({key, on_off(slot), from});
    if (from != EngineSource::stack && (always_asked || slot != before))
      if (const std::string why = refusal(key, slot, framework); !why.empty()) fail(key, on_off(slot), from, why);
  };
  // DeepSpeed's data_types.grad_accum_dtype defaults to the model's dtype (deepspeed/runtime/engine.py
  // @edaa7221 l.1485-1496) and Pipette's config sets it for bf16 only (launch.cpp): fp16 training
  // accumulates its gradients in fp16, which is the stack's default once the precision is known.
  if (runs_on_deepspeed(framework) && training.precision == Precision::fp16) training.gradients_in_fp32 = false;
  switch_setting("fp32-grads", training.gradients_in_fp32, site.fp32_gradients, job.fp32_gradients, false);
  switch_setting("dp-overlap", training.overlap_gradient_reduce, site.dp_overlap, job.dp_overlap, false);
  switch_setting("tp-overlap", training.overlap_tensor_parallel_backward, site.tp_overlap, job.tp_overlap, false);
  switch_setting("tp-comm-overlap", training.overlap_tensor_parallel_communication, site.tp_comm_overlap,
                 job.tp_comm_overlap, false);
  // nanotron's own switch: refused for any other stack even at the value they all behave as.
  switch_setting("tp-recompute-allgather", training.tensor_parallel_recompute_allgather, site.tp_recompute_allgather,
                 job.tp_recompute_allgather, true);
  switch_setting("ce-fusion", training.cross_entropy_fusion, site.cross_entropy_fusion, job.cross_entropy_fusion, false);
  switch_setting("fused-norm", training.fused_norm, site.fused_norm, job.fused_norm, false);
  // nanotron's parallelism.pp_engine; every other stack's pipeline runs 1F1B (interleaved with vpp).
  source = pick(training.pipeline_schedule, site.pipeline_schedule, job.pipeline_schedule);
  resolved.settings.push_back({"pp-schedule", to_string(training.pipeline_schedule), source});
  if (training.pipeline_schedule == PipelineSchedule::all_forward_all_backward && framework != Framework::nanotron) {
    fail("pp-schedule", to_string(training.pipeline_schedule), source,
         "afab (all forward, then all backward) is nanotron's parallelism.pp_engine (parallel/pipeline_parallel/"
         "engine.py @2411b022 l.175-232); Pipette prices and exports " + std::string(to_string(framework)) +
             "'s pipeline as 1F1B");
  }
  // NCCL_NVLS_ENABLE, which the job's environment (or the site's) sets and every stack runs as set:
  // described, not exported.
  switch_setting("nvls", training.nccl_nvls, site.nvls, job.nvls, false);
  // Switches that need another setting.
  const auto source_of = [&](const char* key) {
    for (const EngineSetting& setting : resolved.settings)
      if (setting.key == key) return setting.source;
    return EngineSource::stack;
  };
  if (framework == Framework::megatron_core && !training.gradients_in_fp32 && training.precision != Precision::bf16 &&
      training.precision != Precision::fp8) {
    // --grad-reduce-in-bf16 acts in the bf16 branch of validate_args (training/arguments.py @d98e8a64
    // l.1204-1217); fp16 and fp32 training are not priced with it.
    fail("fp32-grads", "off", source_of("fp32-grads"), "16-bit gradients need bf16 or fp8 training (--grad-reduce-in-bf16)");
  }
  const bool sequence_parallel_off = training.fixed.sequence_parallel && !*training.fixed.sequence_parallel;
  if (training.overlap_tensor_parallel_communication && sequence_parallel_off) {
    fail("tp-comm-overlap", "on", source_of("tp-comm-overlap"),
         "it needs sequence parallelism (training/arguments.py @d98e8a64 l.1441-1442); drop sp=off from the fixed knobs");
  }
  if (framework == Framework::nanotron && training.overlap_tensor_parallel_backward && sequence_parallel_off) {
    fail("tp-overlap", "on", source_of("tp-overlap"),
         "nanotron's async TP communication needs tp_mode REDUCE_SCATTER, i.e. sequence parallelism "
         "(parallel/tensor_parallel/nn.py @2411b022 l.145-146); drop sp=off from the fixed knobs");
  }
  return resolved;
}

}  // namespace pipette
