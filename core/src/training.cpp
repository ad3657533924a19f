#include "pipette/core/training.hpp"

namespace pipette {

namespace {

std::string positive_fixed(const std::optional<int>& value, const char* knob) {
  if (value && *value < 1) return "fixed " + std::string(knob) + "=" + std::to_string(*value) + " must be at least 1";
  return {};
}

}  // namespace

std::string validate(const TrainingSpec& training) {
  if (training.global_batch_sequences < 1) {
    return "global_batch_sequences must be a positive number of sequences (got " +
           std::to_string(training.global_batch_sequences) + ")";
  }
  if (training.global_batch_sequences > kMaxGlobalBatchSequences) {
    return "global batch of " + std::to_string(training.global_batch_sequences) + " sequences is more than " +
           std::to_string(kMaxGlobalBatchSequences) + "; give the global batch in sequences, not tokens";
  }
  if (training.sequence_length < 1) {
    return "sequence_length must be a positive number of tokens (got " + std::to_string(training.sequence_length) + ")";
  }
  const FixedKnobs& fixed = training.fixed;
  for (const auto& message :
       {positive_fixed(fixed.tp, "tp"), positive_fixed(fixed.pp, "pp"), positive_fixed(fixed.dp, "dp"), positive_fixed(fixed.cp, "cp"),
        positive_fixed(fixed.micro_batch, "mbs"), positive_fixed(fixed.virtual_stages, "vpp"),
        positive_fixed(fixed.recomputed_layers_per_chunk, "recompute=block:N")}) {
    if (!message.empty()) return message;
  }
  if (fixed.recomputed_layers_per_chunk && fixed.recompute != RecomputeMode::full) {
    return "a fixed count of recomputed layers (recompute=block:N) is full recompute of N layers per chunk; it needs "
           "recompute fixed to full";
  }
  if (fixed.micro_batch && *fixed.micro_batch > training.global_batch_sequences) {
    return "fixed mbs=" + std::to_string(*fixed.micro_batch) + " exceeds the global batch of " +
           std::to_string(training.global_batch_sequences) + " sequences";
  }
  if (fixed.cp && *fixed.cp > 1 && training.sequence_length % (2 * *fixed.cp) != 0) {
    // Load-balanced causal ring attention cuts every sequence into 2·cp chunks (Megatron-LM
    // arguments.py @d98e8a64 l.1335-1338 asserts it).
    return "fixed cp=" + std::to_string(*fixed.cp) + " needs the sequence length (" +
           std::to_string(training.sequence_length) + ") to be a multiple of 2*cp=" + std::to_string(2 * *fixed.cp);
  }
  if (fixed.cp && *fixed.cp > 1 && training.attention != AttentionKernel::flash) {
    return "fixed cp=" + std::to_string(*fixed.cp) +
           " needs flash attention (context parallelism runs inside Transformer Engine's fused attention)";
  }
  return {};
}

bool runs_on_deepspeed(Framework framework) {
  return framework == Framework::megatron_deepspeed || framework == Framework::deepspeed;
}

bool sixteen_bit_gradients_accumulated_in_fp32(const TrainingSpec& training) {
  return (training.precision == Precision::bf16 || training.precision == Precision::fp16) && training.gradients_in_fp32;
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
    case Precision::fp8: return "fp8";
  }
  return "?";
}

const char* to_string(RecomputeMode mode) {
  switch (mode) {
    case RecomputeMode::none: return "none";
    case RecomputeMode::selective: return "selective";
    case RecomputeMode::full: return "full";
  }
  return "?";
}

std::string recompute_knob(RecomputeMode mode, int recomputed_layers_per_chunk) {
  if (mode == RecomputeMode::full && recomputed_layers_per_chunk > 0) return "block:" + std::to_string(recomputed_layers_per_chunk);
  return to_string(mode);
}

const char* to_string(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::unfused: return "unfused";
    case AttentionKernel::flash: return "flash";
  }
  return "?";
}

const char* to_string(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::one_forward_one_backward: return "1f1b";
    case PipelineSchedule::all_forward_all_backward: return "afab";
  }
  return "?";
}

const char* to_string(Framework framework) {
  switch (framework) {
    case Framework::megatron_core: return "megatron-core";
    case Framework::nemo: return "nemo";
    case Framework::torchtitan: return "torchtitan";
    case Framework::megatron_deepspeed: return "megatron-deepspeed";
    case Framework::nanotron: return "nanotron";
    case Framework::deepspeed: return "deepspeed";
  }
  return "?";
}

const char* framework_spellings() { return "megatron-core, nemo, torchtitan, megatron-deepspeed, nanotron or deepspeed"; }

bool parse_framework(std::string_view text, Framework& framework) {
  for (const Framework candidate : {Framework::megatron_core, Framework::nemo, Framework::torchtitan,
                                    Framework::megatron_deepspeed, Framework::nanotron, Framework::deepspeed}) {
    if (text == to_string(candidate)) {
      framework = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace pipette
