#pragma once
// Each training framework's own start-up checks, re-stated from its source, applied to the
// strings Pipette exports. Independent of core/src/launch.cpp on purpose: these parse what a job
// script receives and refuse it where the framework would.
//
// Versions read (clone of the upstream default branch):
//   Megatron-LM       NVIDIA/Megatron-LM              d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22)
//   Megatron-Bridge   NVIDIA-NeMo/Megatron-Bridge     067f987df03b8355b03192d88d70f1709fedf51a (2026-08-22)
//   torchtitan        pytorch/torchtitan              b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21)
//   PyTorch           pytorch/pytorch                 00722e648b740f91d0e71494baa17891749fd291
//     (torch/distributed/pipelining/schedules.py only, read as stored text without line numbers:
//     cited by class and method; torchtitan builds against PyTorch nightly)
//   nanotron          huggingface/nanotron            2411b022 (2026-04-07)
//   DeepSpeed         deepspeedai/DeepSpeed           edaa7221 (2026-08-22)
//   Megatron-DeepSpeed deepspeedai/Megatron-DeepSpeed 4efb479d
// --pipeline-model-parallel-layout entered Megatron-LM in 77732c36 (2025-06-13), first released in
// core_v0.13.0; --microbatch-group-size-per-virtual-pipeline-stage in 4295be1a (2024-11-01).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pipette::conformance {

// What the checks need to know that the exported strings do not say.
struct JobFacts {
  int num_layers = 0;
  int num_attention_heads = 0;
  int num_kv_heads = 0;
  int world_size = 0;
  std::vector<std::pair<std::string, std::string>> environment;  // everything the plugin exports
  // Mixture of experts (0: a dense model): what the model file says, to hold the string to.
  int num_experts = 0;
  int router_topk = 0;
  int moe_ffn_hidden_size = 0;
  // Multi-latent attention (kv_lora_rank 0: standard attention).
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_head_dim = 0;
  int qk_pos_emb_head_dim = 0;
  int v_head_dim = 0;
};

// What the framework will build, read back from the string (for the tie to the plan).
struct BuiltLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;  // context parallel
  int micro_batch = 1;
  std::int64_t global_batch = 0;
  int virtual_stages = 1;
  int microbatch_group_size = 0;  // interleaved only
  std::vector<int> layers_per_stage;
  std::string recompute = "none";
  // Full recompute of the first N layers of each chunk (--recompute-method block); 0: every layer.
  int recomputed_layers_per_chunk = 0;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  bool fully_sharded = false;  // FSDP (torchtitan's dp_shard x cp > 1)
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // The engine's switches the strings carry (Megatron-LM: --tp-comm-overlap, --grad-reduce-in-bf16;
  // nanotron: tp_linear_async_communication, tp_recompute_allgather, accumulate_grad_in_fp32).
  bool tp_comm_overlap = false;
  bool tp_backward_overlap = false;
  bool fp32_gradients = true;
  bool tp_recompute_allgather = true;
  bool cross_entropy_fusion = false;  // Megatron-core's and Megatron-Bridge's fused loss
  std::string pipeline_schedule = "1f1b";  // nanotron's pp_engine: "1f1b" or "afab"
  // The training precision where the string sets it (DeepSpeed's JSON: "bf16", "fp16" or "fp32");
  // empty where the job's own arguments do.
  std::string precision;
  int sequence_length = 0;
  int max_position_embeddings = 0;
  int ep = 1;   // expert model parallel
  int etp = 1;  // expert tensor parallel (1 for dense models)
};

struct Verdict {
  std::string refusal;  // what the framework would say; empty: it starts
  BuiltLayout built;
};

Verdict check_megatron(const std::string& arguments, const JobFacts& facts);
Verdict check_nemo(const std::string& overrides, const JobFacts& facts);
Verdict check_torchtitan(const std::string& arguments, const JobFacts& facts);
// The profiled stacks (core/src/stack_profile.cpp). nanotron: PIPETTE_NANOTRON_OVERRIDES over its
// Config dataclasses and trainer; deepspeed: the JSON config, with PIPETTE_PP from the environment;
// megatron-deepspeed: its arguments and the JSON config beside them (PIPETTE_DEEPSPEED_CONFIG).
// Each reads back only what its strings carry (nanotron's layer split is its own partition, the
// user's model under DeepSpeed says its own: launch_problem checks those).
Verdict check_nanotron(const std::string& overrides, const JobFacts& facts);
Verdict check_deepspeed(const std::string& config, const JobFacts& facts);
Verdict check_megatron_deepspeed(const std::string& arguments, const JobFacts& facts);

}  // namespace pipette::conformance
