#include "pipette/core/stack_profile.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace pipette {

// FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608) on H100 80GB SXM5 at sequence length 4k,
// TFLOP/s. "Attention forward speed": cuDNN 363, 609, 483 and flash-attn 2 284, 368, 293 at head
// dims 64, 128, 256. "Attention backward speed" (charted at 64 and 128 only): cuDNN 417, 499 and
// flash-attn 2 279, 310; the backward of 256-wide heads keeps 128's backward-to-forward ratio. The
// attention fraction was fitted on rows whose heads are 128 wide (the NeMo DGX-H100 dense rows'
// Llama 3, GPT-3, Nemotron-4 15B and Mixtral), so speeds are relative to cuDNN's forward at 128;
// between the measured widths they are interpolated linearly in the head width, beyond them held.
FlashAttentionSpeed flash_attention_speed_vs_reference(FlashKernel kernel, double head_dim) {
  struct Point {
    double head_dim;
    FlashAttentionSpeed cudnn, flash_attn_2;  // TFLOP/s
  };
  static constexpr Point measured[] = {{64, {363, 417}, {284, 279}},
                                       {128, {609, 499}, {368, 310}},
                                       {256, {483, 483 * 499.0 / 609}, {293, 293 * 310.0 / 368}}};
  constexpr double reference = 609;  // cuDNN's forward at 128
  const auto speed = [&](const Point& p) {
    const FlashAttentionSpeed& tflops = kernel == FlashKernel::cudnn_fused ? p.cudnn : p.flash_attn_2;
    return FlashAttentionSpeed{tflops.forward / reference, tflops.backward / reference};
  };
  if (head_dim <= measured[0].head_dim) return speed(measured[0]);
  for (size_t i = 1; i < std::size(measured); ++i) {
    if (head_dim <= measured[i].head_dim) {
      const double position = (head_dim - measured[i - 1].head_dim) / (measured[i].head_dim - measured[i - 1].head_dim);
      const FlashAttentionSpeed low = speed(measured[i - 1]), high = speed(measured[i]);
      return {low.forward + position * (high.forward - low.forward), low.backward + position * (high.backward - low.backward)};
    }
  }
  return speed(std::end(measured)[-1]);
}

namespace {

// Megatron-LM's vocab-parallel cross entropy, unfused, as Megatron-core, Megatron-DeepSpeed and
// nanotron run it, each on an fp32 copy of the 16-bit logits made by a cast of its own: a max, a
// shift by it, an in-place exp, a sum and an in-place divide in the forward (4 + 4 + 4 + 4 + 4 + 4 +
// 4 + 4 bytes per logit), an in-place multiply by the loss's gradient in the backward (4 + 4). Each
// profile cites its lines.
constexpr LossKernels kUnfusedFp32Loss{32, 8, true};

// Megatron-core with Transformer Engine, the stack the constants were fitted on (NeMo is priced
// the same way: its differences are the launch rules in launch.cpp, its fp8 weights, NVLink SHARP
// and its fused loss).
StackProfile reference_profile(Framework framework) {
  StackProfile profile;
  profile.framework = framework;
  // The loss. Unless --cross-entropy-loss-fusion (cross_entropy_loss_fusion defaults False,
  // core/model_parallel_config.py @d98e8a64 l.320) Megatron-core runs the unfused
  // tensor_parallel.vocab_parallel_cross_entropy (models/common/language_module/language_module.py
  // l.173, 200; tensor_parallel/cross_entropy.py l.25 the cast, 27 max, 42 the in-place shift, 62-63
  // exp and sum, 77 divide, 114 the multiply), as the A100 fit rows' Megatron-LM of 2021-22 did.
  // Fused (l.198), its default "native" implementation runs each step as one compiled kernel
  // (fusions/fused_cross_entropy.py l.12-82 under jit_fuser): the cast with the max, the shift with
  // exp and sum (4 + 4), the divide (4 + 4), and in the backward the multiply with the cast back to
  // bf16 (read 4, write 2, l.82), no more than the cast itself moves. Megatron-Bridge's GPT providers
  // fuse it by default (models/gpt_provider.py @067f987d l.205); its performance scripts pick
  // Transformer Engine's Triton kernels instead (scripts/performance/utils/overrides.py l.83-84),
  // which move 22 bytes per logit where the native ones move 28: priced as the native ones, since
  // Pipette's export leaves the implementation to the recipe.
  profile.loss = kUnfusedFp32Loss;
  profile.fused_loss = LossKernels{16, 0, true};
  profile.cross_entropy_fusion = framework == Framework::nemo;
  // Megatron-Bridge's fp8 mixed-precision presets (delayed and current scaling, MXFP8) set
  // fp8_param_gather = True (training/mixed_precision.py @067f987d l.231-302); only its blockwise
  // presets keep 16-bit weights (l.384, 400). Megatron-LM's --fp8-param-gather is off unless given.
  if (framework == Framework::nemo) profile.fp8_parameters = true;
  // Megatron-Bridge's launch and performance scripts turn NVLink SHARP off ("NCCL_NVLS_ENABLE": "0",
  // "Disable NVLink SHARP to save memory": scripts/performance/utils/executors.py l.42 @v0.2.0, l.43
  // @v0.4.0; its recipes' env_vars, e.g. perf_recipes/gpt_oss/h100/gpt_oss.py @067f987d;
  // scripts/training/launch_with_sbatch.sh l.82 @067f987d), except with NCCL user buffers
  // (setup_experiment.py l.339-340 @v0.4.0), which Pipette does not price. The engine's nvls switch
  // says otherwise for a job that runs it.
  if (framework == Framework::nemo) profile.nccl_nvls = false;
  // Megatron-core's DDP with --overlap-grad-reduce: buckets of max(40M, 1M · dp·cp) parameters
  // (training/training.py @d98e8a64 l.2179-2194 resolve_ddp_bucket_size), filled in backward order
  // (core/distributed/param_and_grad_buffer.py l.955-997), on the first pipeline stage's first model
  // chunk only: later chunks and pipeline ranks > 0 are one bucket each (training.py l.2504-2515;
  // core/distributed/distributed_data_parallel.py l.160-171). Megatron-Bridge wraps its chunks the
  // same way (tests/unit_tests/models/test_model_instantiation.py l.242-246 @067f987d); its
  // CommOverlapConfig raises the bucket to 128 Mi parameters where a recipe sets one
  // (training/comm_overlap.py l.576-577), which only changes how many latencies the buckets pay.
  profile.gradient_buckets = {40e6, 1e6, true};
  return profile;
}

// What nanotron and torchtitan share as PyTorch stacks on their own layers (each profile cites its
// code): flash attention at flash-attn 2's rate, an unfused SwiGLU (keeps the SiLU output too, two
// elementwise passes), TP backward collectives that wait for their GEMMs.
StackProfile pytorch_layers_profile(Framework framework, std::string code) {
  StackProfile profile;
  profile.framework = framework;
  profile.code = std::move(code);
  profile.attention = AttentionKernel::flash;
  profile.flash_kernel = FlashKernel::flash_attn_2;
  profile.overlap_tensor_parallel_backward = false;
  profile.swiglu_saved_ffn_tensors = 4;
  profile.swiglu_forward_ffn_accesses = 5;
  return profile;
}

// torchtitan's Llama 3 in eager mode, as its llama3 configs run it (compile.enable defaults off).
// Citations: github.com/pytorch/torchtitan @b5bcd76c (torchtitan/...).
StackProfile torchtitan_profile() {
  StackProfile profile = pytorch_layers_profile(Framework::torchtitan, "github.com/pytorch/torchtitan @b5bcd76c, torchtitan/");
  profile.rotary_extra_accesses = 8;
  // An assumption (below): about what a fused cross entropy moves.
  profile.loss = LossKernels{20, 10, false};
  // torchtitan's optimizer (torch.optim over FSDP2 / DDP) was not read for 16-bit gradients, which
  // Pipette does not export for it (engine.cpp): the fp32 copy is counted for the whole iteration.
  profile.main_gradient_copy = MainGradientCopy::whole_iteration;
  // Replication (fsdp=off) runs through FSDP2's units too (distributed/fsdp.py l.92: ReplicateModule
  // is an FSDPModule), one per transformer block (l.240-266): a reduction per block.
  profile.gradient_buckets.per_block = true;
  profile.selective_recompute = SelectiveRecompute::every_other_linear;
  profile.evidence = {
      "eager by default: compile.enable defaults off (config/configs.py l.295), so nothing below is fused by "
      "torch.compile",
      "selective recompute (activation-checkpoint:selective, the trainer's default: trainer.py l.108-109) is "
      "per operator: each block's checkpoint saves the outputs of the attention kernel, of reduce-scatters and of "
      "every other linear, counting from the first (distributed/activation_checkpoint.py l.31-94 save ops, l.243-274 "
      "the policy: wq, wv, w1, w2 in a SwiGLU block), and re-runs the block's forward in its backward for the "
      "rest (early_stop=False, l.278-287): wk, wo, w3, the norms, RoPE, the SwiGLU and, with tensor parallelism, "
      "the all-gathers",
      "SwiGLU: w2(F.silu(w1(x)) * w3(x)) (models/common/feed_forward.py l.53-54) keeps w1's output, the SiLU "
      "output, w3's output and the product, and makes two elementwise passes",
      "RoPE: ComplexRoPE in every llama3 flavour (models/llama3/__init__.py l.136, 180, 224, 265, 306, 347) casts Q "
      "and K to fp32, multiplies them as complex numbers and casts back (models/common/rope.py l.260-264): three "
      "passes where a fused kernel makes one",
      "TP backward collectives: not overlapped with the GEMMs; only async TP pipelines them, which is off by default "
      "and needs torch.compile (config/configs.py l.298-299, 307-313)",
      "attention: the llama3 flavours default to FlexAttention (models/llama3/__init__.py l.371 attn_backend "
      "\"flex\"), a compiled Triton kernel, not cuDNN's fused attention",
      "data parallelism: FSDP2 over every data-parallel rank by default (data_parallel_shard_degree -1, "
      "config/configs.py l.133-144), one fully_shard unit per block plus the embedding and [norm, output] "
      "(distributed/fsdp.py l.240-266); fp32 shards of parameters, gradients and AdamW's moments, 16-bit "
      "gathers (mixed_precision_param), fp32 reduce-scatters (mixed_precision_reduce, l.94-102) after every "
      "micro-batch (trainer.py train_step keeps gradient sync on); Pipette prices it as fsdp=on on dense models "
      "without a pipeline (with pp > 1 torchtitan keeps the stage gathered, fsdp.py l.112-136: fsdp=off prices "
      "replication there)",
  };
  profile.assumptions = {
      "FlexAttention is priced at flash-attn 2's measured H100 rate: the FlashAttention-3 paper (arXiv 2407.08608) "
      "measures a Triton flash attention at 389 and flash-attn 2 at 368 TFLOP/s (head dim 128, 4k tokens), within 6%",
      "nn.RMSNorm (models/common/nn_modules.py l.134) is priced as a fused norm that keeps only its input, as "
      "PyTorch's CUDA aten::_fused_rms_norm (pytorch/pytorch#153666) runs it; on an older PyTorch (or torchtitan's "
      "own RMSNorm before 2025, models/norms.py @9dec370) it runs as composite ops over an fp32 copy, which it "
      "keeps: say fused-norm=off",
      "FSDP's gathers and reduce-scatters are priced as hidden beside the blocks' compute wherever they are "
      "shorter than it; the SMs and HBM bandwidth NCCL's kernels take from the GEMMs they overlap are not priced",
      "the loss is priced as Megatron-core's (fp32 logits, softmax in place); the llama3 configs' ChunkedLossWrapper "
      "(models/llama3/config_registry.py l.197) runs the LM head and loss a chunk of tokens at a time "
      "(components/loss.py l.501-507), so it keeps less and the count errs on the safe side; its time is 20 + "
      "10 bytes per logit, about what a fused cross entropy moves, though F.cross_entropy on an fp32 copy of the logits "
      "(components/loss.py l.57-62) adds the cast's 2 + 4 and 4 + 2 and PyTorch's own softmax passes, not read",
  };
  return profile;
}

// Citations: github.com/huggingface/nanotron @2411b022 (src/nanotron/...), github.com/deepspeedai/
// Megatron-DeepSpeed @4efb479d, github.com/deepspeedai/DeepSpeed @edaa7221.
StackProfile nanotron_profile() {
  StackProfile profile = pytorch_layers_profile(Framework::nanotron, "github.com/huggingface/nanotron @2411b022, src/nanotron/");
  profile.overlap_gradient_reduce = true;
  // PyTorch DDP's buckets of bucket_cap_mb (nanotron's ddp_bucket_cap_mb, 25: config/config.py
  // l.313, trainer.py l.1156-1161) count the 16-bit .grad bytes: 25 MiB / 2 bytes.
  profile.gradient_buckets = {25.0 * 1024 * 1024 / 2, 0, false};
  profile.sharded_optimizer = ShardedOptimizerCollectives::all_reduce_and_gather_after_step;
  // The activation and its gradient (2), each after its two metadata messages (4), and the
  // sequence mask's two metadata messages and data (3).
  profile.pipeline_exchange = {2, 7, true};
  profile.rotary = RotaryCopies::packed_key_value_copy;
  profile.qkv_copy_passes = 1;
  profile.kv_copy_passes = 2;
  profile.attention_output_folded_copy = true;
  profile.ddp_gradient_buckets = true;
  profile.sixteen_bit_gradients = SixteenBitGradients::dropped_after_each_backward;
  // The add after each backward reads the 16-bit .grad and the fp32 buffer and writes the buffer
  // (2 + 4 + 4 bytes), and the wgrad GEMM wrote that .grad (2): 12 bytes per parameter against the
  // 4 the reference's GEMMs spend accumulating into the fp32 buffer themselves.
  profile.fp32_gradient_accumulation_bytes_per_parameter = 8;
  profile.extra_logits_bytes_per_element = 2;
  profile.loss = kUnfusedFp32Loss;
  profile.main_gradient_copy = MainGradientCopy::whole_iteration;
  profile.interleaved_pipeline = false;
  profile.evidence = {
      "attention: flash-attn 2, no s x s scores kept (models/llama.py l.21-22, 290 flash_attn_varlen_func from "
      "flash_attn.flash_attn_interface); on H100 it runs at 0.78 (head dim 64) to 0.60 (head dim 128) of cuDNN's "
      "fused attention at the same head width (Shah et al. 2024, FlashAttention-3, arXiv 2407.08608, forward speed on "
      "H100 SXM5 at 4k tokens)",
      "norms: fused Triton RMSNorm, nothing beyond its input kept (models/llama.py l.729, 737 TritonRMSNorm)",
      "SwiGLU: unfused act(gate) * up keeps the SiLU output too and makes two elementwise passes "
      "(models/llama.py l.198-205 GLUActivation)",
      "rotary: flash-attn rotary in place on a permuted QKV copy plus a cat/permute K/V copy "
      "(models/llama.py l.466-472, 680-683)",
      "attention output: o_proj's input is flash-attn's output transposed to [s, b, h] (models/llama.py "
      "l.668-671); F.linear on it reaches matmul, which folds it by a reshape copy and saves that copy (pytorch "
      "aten/src/ATen/native/LinearAlgebra.cpp should_fold): with more than one sequence per micro-batch the "
      "attention output is kept twice, unless tp_linear_async_communication's Function saves the view itself "
      "(parallel/tensor_parallel/functional.py l.375-380 @a27e8fe8)",
      "TP backward collectives: synchronous, tp_linear_async_communication defaults to false "
      "(config/parallelism_config.py l.47-48; bench_cluster's template sets false)",
      "DP reduction without ZeRO: async bucketed all-reduce under the backward from the DDP fp32-accumulation "
      "hook (optim/gradient_accumulator.py l.383-386; helpers.py l.446 registers it), one all_reduce_coalesced of "
      "the fp32 buffers per DDP bucket of 25 MB of 16-bit gradients (ddp_bucket_cap_mb, config/config.py l.313; "
      "trainer.py l.1156-1161): every bucket pays a collective's latency, and the last, which holds the word "
      "embedding, is reduced after the backward has ended",
      "DP reduction with ZeRO-1 and fp32 accumulation: no DDP (trainer.py l.1084-1086 @c737f00f, 2025-04), so "
      "the whole fp32 gradient buffer is all-reduced after the last backward (trainer.py l.643-654 @2411b022, "
      "reduce_scatter=False; optim/gradient_accumulator.py l.155-156); nanotron issue #261 (2024-12-10): "
      "'Zero1 (DDP broken)' makes ZeRO-1 slower",
      "ZeRO-1 parameters: the updated 16-bit shards are all-gathered synchronously at the end of the optimizer "
      "step (optim/zero.py l.95-120, _all_gather_params l.217-252), before the next forward",
      "gradients: one fp32 buffer for every parameter (accumulate_grad_in_fp32, optim/gradient_accumulator.py "
      "l.78-80); FP32GradientAccumulator.backward runs the whole backward before it adds each 16-bit .grad into "
      "that buffer and drops it (l.206-226; at the sync step of DDP the hook has added them, l.345-346, and the "
      "loop only drops them): every parameter's 16-bit gradient is allocated at each backward's end, beside the "
      "other in-flight micro-batches' activations, and the add reads and writes 10 bytes per parameter and "
      "micro-batch (DDP's copy of each .grad into its bucket at the sync step, 4 bytes per parameter once per "
      "iteration, is not priced)",
      "DDP gradient buckets: with dp > 1 and no ZeRO-1 (or 16-bit gradients) the model is wrapped in PyTorch's "
      "DistributedDataParallel with gradient_as_bucket_view left off (trainer.py l.1093-1095, 1156-1161; the "
      "bench_cluster branch l.743-745, 804-809), whose Reducer allocates a flat 16-bit buffer per 25 MB bucket "
      "at construction and keeps it (torch/csrc/distributed/c10d/reducer.cpp initialize_buckets, "
      "bucket.gradients = at::empty): 2 bytes per parameter beside the fp32 buffer",
      "optimizer: ZeRO-1 shards the fp32 master weights (the accumulator is built per ZeRO shard, helpers.py "
      "l.392-397, 411-414) and Adam's moments",
      "loss: 16-bit logits cast to fp32 (models/llama.py l.899-903, 934), shifted out of place and kept as the "
      "softmax (parallel/tensor_parallel/functional.py l.43, 73-85): 8 bytes per logit at the peak; its kernels "
      "move 38 bytes per logit forward (the cast 2 + 4, max 4, the shift 4 + 4, exp 4 + 4, sum 4, the divide "
      "4 + 4: l.40, 43, 74-75, 82) and 14 backward (mul_ 4 + 4, l.105, and the cast back 4 + 2), as Megatron-core's "
      "unfused loss does; nanotron has no fused one",
      "pipeline: no interleaved schedule (parallel/pipeline_parallel/engine.py l.175 afab and l.235 1f1b only)",
      "pipeline messages: each boundary's exchange runs in series and blocks both ranks, the activation then its "
      "gradient, each after two metadata messages the receiver reads on the host, and the sequence mask beside the "
      "activation (parallel/pipeline_parallel/p2p.py l.207-288, 345-353; state.py run_communication): two messages "
      "of the boundary's bytes and seven latencies, in the receiver's forward and the sender's backward",
  };
  profile.assumptions = {
      "flash-attn 2's speed was measured on H100 (forward, 4k tokens); the same share is used for its backward "
      "and on other GPUs",
      "ZeRO-1 beside DP is priced as nanotron ran it in every release (v0.1-v0.5), the bench_cluster branch and "
      "main until 7bc99232 (2025-06): since then trainer.py l.1093-1095 builds DDP whenever dp > 1 ('or' binds "
      "looser than 'and'), whose fp32 hook raises NotImplementedError for ZeRO-1 (optim/gradient_accumulator.py "
      "l.354-355), so @2411b022 zero_stage=1 with dp > 1 does not start: the search keeps it off unless distopt "
      "is fixed on",
      "sequence parallelism re-gathers each column-parallel input in the backward, keeping the sequence shard, as "
      "nanotron does by default since 9cc81bb6 (2024-07-17, config/parallelism_config.py l.36) and as the Ultra-Scale "
      "Playbook's runs did; the export writes tp_recompute_allgather, a key only nanotron since 1e02a9ce "
      "(2024-07-17) reads: the releases v0.1-v0.5 and the bench_cluster branch lack it and keep the gathered input "
      "(parallel/tensor_parallel/functional.py l.352-358 @a27e8fe8), which --engine tp-recompute-allgather=off prices",
      "16-bit gradients (optimizer.accumulate_grad_in_fp32 false): priced as fp32 master weights, moments and an "
      "fp32 gradient copy held through the whole iteration, not read from that path's code (helpers.py l.390-407 "
      "builds no FP32GradientAccumulator there)",
      "nanotron's default pp_engine is afab (config/parallelism_config.py l.43-44), which keeps every micro-batch's "
      "activations; Pipette prices and exports pp_engine 1f1b unless --engine pp-schedule=afab asks for afab",
  };
  return profile;
}

// DeepSpeed's pipeline exchange, which Megatron-DeepSpeed runs too.
const char* const deepspeed_pipeline_exchange_evidence =
    "pipeline exchange: blocking sends and receives in series, the gradient and then the activation at the "
    "backward step, the gradient and then the activation at the forward step (deepspeed/runtime/pipe/schedule.py "
    "l.213-223; p2p.py l.48, 69 assert async_op False): both ranks of a boundary wait for both messages, in the "
    "receiver's forward and the sender's backward";

// DeepSpeed's ZeRO-1 collectives, which Megatron-DeepSpeed runs too.
const char* const deepspeed_zero_one_evidence =
    "ZeRO-1 (stage_1_and_2.py): overlap_comm defaults off below stage 3 (deepspeed/runtime/zero/config.py "
    "l.383-385), so the gradients are reduced at the accumulation boundary after the backward (deepspeed/runtime/engine.py "
    "l.2906-2910 → stage_1_and_2.py l.861-881 reduce_gradients); "
    "use_multi_rank_bucket_allreduce defaults on (zero/config.py l.119) and makes that an all-reduce of each "
    "bucket (stage_1_and_2.py l.1443-1460); the step ends with a synchronous all-gather of the updated 16-bit "
    "partitions (stage_1_and_2.py l.2393-2400); with bf16 and fp32 gradient accumulation ZeRO-1 is the "
    "BF16_Optimizer (engine.py l.1994-1996), whose step ends in the same all-gather (bf16_optimizer.py l.344, "
    "454-460)";

// DeepSpeed's BF16_Optimizer accumulates each micro-batch's 16-bit gradients into its fp32 buffer
// after the backward, which Megatron-DeepSpeed runs too.
const char* const deepspeed_bf16_accumulation_evidence =
    "gradient accumulation (bf16 with fp32 accumulation, the BF16_Optimizer): every micro-batch's backward "
    "leaves fresh 16-bit .grads (the pipeline engine clears them first, deepspeed/runtime/pipe/engine.py "
    "l.861-863; the last stage through the optimizer's backward_prologue, bf16_optimizer.py l.348-349), "
    "then hp_grad.add_(lp.grad.to(fp32)) for every parameter (bf16_optimizer.py l.351-353, 356-377, "
    "pipe/engine.py l.883-885): a cast kernel (read 2, write 4 bytes) and an add (read 4 + 4, write 4), "
    "18 bytes per parameter and micro-batch, 16 beyond the 4-byte gradient write the reference's fused "
    "wgrad accumulation is priced at (the 16-bit wgrad GEMM writes 2); the same at @77b649d1, the "
    "2022-03 olruwase/bf16-updates commit BLOOM-176B ran (bf16_optimizer.py l.259-291, pipe/engine.py "
    "l.748-762)";

// What DeepSpeed's BF16_Optimizer keeps in memory beside its gradient buffer.
const char* const deepspeed_bf16_gradient_memory_evidence =
    "16-bit gradients (bf16, the BF16_Optimizer): a backward's .grads stay allocated through the next forward, "
    "cleared only at the next backward's start (pipe/engine.py l.861-863, bf16_optimizer.py l.348-349, 473-489; "
    "@77b649d1 l.330-333) and freed by the step's zero_grad(set_to_none=True) (bf16_optimizer.py l.491-492, "
    "engine.py l.3359-3363): 2 bytes per parameter beside the fp32 buffer at both peaks; the add casts each "
    "gradient whole, lp.grad.to(fp32) (l.371; @77b649d1 l.284), a transient of 4 bytes per element of the "
    "rank's largest parameter (the vocabulary shard on the embedding and head ranks) beside the other "
    "in-flight micro-batches";

// Since 2025-11 DeepSpeed zeroes the kept 16-bit gradients instead of dropping them.
const char* const deepspeed_zeroed_gradients_assumption =
    "the backward prologue's zeroing of the kept 16-bit .grads (DeepSpeed 53e91a09, 2025-11; also before "
    "c66bc426, 2024-04), after which autograd adds each new gradient into them in place, about 8 bytes per "
    "parameter and micro-batch, is not priced: BLOOM's 2022 code and the releases between drop them instead";

StackProfile megatron_deepspeed_profile() {
  StackProfile profile;
  profile.framework = Framework::megatron_deepspeed;
  profile.code = "github.com/deepspeedai/Megatron-DeepSpeed @4efb479d and github.com/deepspeedai/DeepSpeed @edaa7221";
  profile.attention = AttentionKernel::unfused;
  profile.overlap_tensor_parallel_backward = false;
  profile.overlap_gradient_reduce = false;
  profile.sharded_optimizer = ShardedOptimizerCollectives::all_reduce_and_gather_after_step;
  profile.swiglu_saved_ffn_tensors = 4;
  profile.swiglu_forward_ffn_accesses = 5;
  profile.rotary_extra_accesses = 8;
  profile.extra_logits_bytes_per_element = 4;
  profile.loss = kUnfusedFp32Loss;
  profile.fp32_gradient_accumulation_bytes_per_parameter = 16;
  profile.sixteen_bit_gradients = SixteenBitGradients::kept_through_the_next_forward;
  profile.partitioned_pipeline_messages = true;
  // DeepSpeed's TrainSchedule runs a boundary as blocking sends and receives in series: the
  // backward step receives the gradient, then sends the previous forward's output; the forward step
  // sends the previous gradient, then receives (deepspeed/runtime/pipe/schedule.py l.213-223;
  // p2p.py l.48, 69: send and recv assert async_op False; the metadata goes once, pipe/engine.py
  // first_output_send).
  profile.pipeline_exchange = {2, 0, true};
  profile.main_gradient_copy = MainGradientCopy::whole_iteration;
  profile.interleaved_pipeline = false;
  profile.evidence = {
      "attention: unfused QK^T, FusedScaleMaskSoftmax and dropout, s x s scores kept, unless --use-flash-attn-v2 "
      "(megatron/model/transformer.py l.237-327; megatron/arguments.py l.927-933, off by default)",
      "norms: apex MixedFusedLayerNorm / MixedFusedRMSNorm on CUDA (megatron/model/__init__.py l.8-10)",
      "SwiGLU: unfused F.silu(x[0]) * x[1] (megatron/model/transformer.py l.138-140)",
      "rotary: out-of-place t * cos + rotate_half(t) * sin, about 10 accesses of q and k against a fused "
      "kernel's 2 (megatron/model/rotary_pos_embedding.py l.43-77)",
      "TP backward collectives: synchronous, DeepSpeed turns async_tensor_model_parallel_allreduce off "
      "(megatron/arguments.py l.395-399)",
      "DP reduction: after all micro-batches, DeepSpeed's TrainSchedule issues ReduceGrads at its last step "
      "(deepspeed/runtime/pipe/schedule.py l.238-241, pipe/engine.py l.296-304) and without a pipeline the "
      "engine reduces in backward's epilogue (deepspeed/runtime/engine.py l.2970-2982)",
      deepspeed_zero_one_evidence,
      deepspeed_bf16_accumulation_evidence,
      deepspeed_bf16_gradient_memory_evidence,
      "wgrad: a plain 16-bit GEMM, gradient-accumulation fusion commented out "
      "(megatron/core/tensor_parallel/layers.py l.360-374; BLOOM's @87a9dba0: F.linear, megatron/mpu/layers.py "
      "l.337, 435)",
      "loss: 16-bit logits kept by the caller, an fp32 copy, shifted out of place and kept as the softmax "
      "(megatron/model/gpt_model.py l.68; megatron/core/tensor_parallel/cross_entropy.py l.25, 57-58, 92): "
      "10 bytes per logit at the peak; with the pipeline module the cast is a layer of its own "
      "(gpt_model.py l.438-439, float16_to_fp32 in megatron/model/module.py l.147-159), and the kernels move 38 "
      "bytes per logit forward (the cast 2 + 4, max 4, the out-of-place shift 4 + 4, exp 4 + 4, sum 4, the "
      "divide 4 + 4: cross_entropy.py l.20, 25, 58-59, 68) and 14 backward (mul_ 4 + 4, l.124, and the cast "
      "back 4 + 2), as Megatron-core's unfused loss does; no fused one is priced or exported for this stack",
      "pipeline: DeepSpeed's TrainSchedule, 1F1B with min(stages - stage, micro-batches) buffers and no "
      "interleaving (deepspeed/runtime/pipe/schedule.py l.189-257)",
      deepspeed_pipeline_exchange_evidence,
      "pipeline messages with tp > 1: pipe_partitioned and grad_partitioned default on (deepspeed/runtime/"
      "config.py l.435-436; pipe/engine.py l.143-144; at @77b649d1 always, l.131-132): each TP rank sends its "
      "1/tp slice of the output (l.755-766) and of the input gradient (l.1090-1101); the receiver all-gathers "
      "the activation before the forward (l.731-738), and in the backward a stage all-gathers its own output, "
      "freed after the send, and the received gradient (l.835-842, 850-857; PartitionedTensor.full, "
      "runtime/utils.py l.724)",
  };
  profile.assumptions = {
      "gradients and optimizer: the step priced as Megatron's (fp32 gradient buffer, ZeRO-1 shards the fp32 "
      "master weights and Adam's moments; with 16-bit gradients an fp32 copy counted through the whole iteration, "
      "not only at the step); the BF16_Optimizer's norm, clipping and zeroing run over the whole unsharded fp32 "
      "buffer (bf16_optimizer.py l.233-256 @77b649d1), about 16 bytes per parameter once per iteration (0.03 s on "
      "a BLOOM-176B stage), not priced",
      deepspeed_zeroed_gradients_assumption,
  };
  return profile;
}

StackProfile deepspeed_profile() {
  StackProfile profile = megatron_deepspeed_profile();
  profile.framework = Framework::deepspeed;
  profile.code = "github.com/deepspeedai/DeepSpeed @edaa7221";
  profile.attention = AttentionKernel::flash;
  profile.rotary_extra_accesses = 0;
  profile.tensor_parallel = false;
  profile.evidence = {
      "DP reduction: after the backward (deepspeed/runtime/engine.py l.2970-2982 _backward_epilogue → "
      "allreduce_gradients); with a PipelineModule after all micro-batches (deepspeed/runtime/pipe/schedule.py "
      "l.238-241)",
      "pipeline: TrainSchedule, 1F1B without interleaving (deepspeed/runtime/pipe/schedule.py l.189-257)",
      deepspeed_pipeline_exchange_evidence,
      deepspeed_zero_one_evidence,
      deepspeed_bf16_accumulation_evidence,
      deepspeed_bf16_gradient_memory_evidence,
  };
  profile.assumptions = {
      "no tensor parallelism: the plans keep tp = 1 (a model of the user's own brings none of Megatron's layers)",
      "the model is the user's own: its attention kernel is assumed flash (PyTorch SDPA), its SwiGLU unfused, "
      "its RoPE fused and its loss 10 bytes per logit at the peak (16-bit logits, an fp32 copy and its softmax), "
      "38 moved forward and 14 backward, as in Megatron-DeepSpeed; none of this is read from code",
      "gradients and optimizer: priced as Megatron's (fp32 gradient buffer, ZeRO-1 shards the fp32 master "
      "weights and Adam's moments; with 16-bit gradients an fp32 copy counted through the whole iteration)",
      deepspeed_zeroed_gradients_assumption,
  };
  return profile;
}

}  // namespace

const StackProfile& stack_profile(Framework framework) {
  static const StackProfile megatron_core = reference_profile(Framework::megatron_core);
  static const StackProfile nemo = reference_profile(Framework::nemo);
  static const StackProfile torchtitan = torchtitan_profile();
  static const StackProfile megatron_deepspeed = megatron_deepspeed_profile();
  static const StackProfile nanotron = nanotron_profile();
  static const StackProfile deepspeed = deepspeed_profile();
  switch (framework) {
    case Framework::megatron_core: return megatron_core;
    case Framework::nemo: return nemo;
    case Framework::torchtitan: return torchtitan;
    case Framework::megatron_deepspeed: return megatron_deepspeed;
    case Framework::nanotron: return nanotron;
    case Framework::deepspeed: return deepspeed;
  }
  return megatron_core;
}

std::string unfused_attention_fallback(const ModelSpec& model, Framework framework) {
  if (framework != Framework::megatron_core && framework != Framework::nemo) return {};
  // Transformer Engine runs flash-attn 2 where the wider of the Q·K and V head widths is a multiple
  // of 8, at most 256 (transformer_engine/pytorch/attention/dot_product_attention/utils.py @d0067d0d
  // l.926-950); cuDNN's fused attention takes no head flash-attn 2 refuses (both widths multiples of
  // 8, at most 128, or 256 on Hopper: common/fused_attn/fused_attn.cpp l.310-319).
  const int qk = model.query_key_head_width(), v = model.value_head_width();
  const int wider = std::max(qk, v);
  if (wider % 8 == 0 && wider <= 256) return {};
  const std::string widths = qk == v ? std::to_string(qk) : std::to_string(qk) + " (Q, K) and " + std::to_string(v) + " (V)";
  return "Transformer Engine has no flash-attn 2 or cuDNN fused attention kernel for heads " + widths +
         " wide (both need multiples of 8, at most 256: transformer_engine/pytorch/attention/dot_product_attention/"
         "utils.py @d0067d0d l.926-950, common/fused_attn/fused_attn.cpp l.310-319), so it runs its unfused attention";
}

void apply_stack_profile(TrainingSpec& training) {
  const StackProfile& profile = stack_profile(training.target.framework);
  training.attention = profile.attention;
  training.overlap_tensor_parallel_backward = profile.overlap_tensor_parallel_backward;
  training.overlap_gradient_reduce = profile.overlap_gradient_reduce;
  training.sharded_optimizer = profile.sharded_optimizer;
  training.tensor_parallel_recompute_allgather = profile.tensor_parallel_recompute_allgather;
  training.nccl_nvls = profile.nccl_nvls;
  training.fp8_parameters = profile.fp8_parameters && training.precision == Precision::fp8;
  training.cross_entropy_fusion = profile.cross_entropy_fusion;
  // Every stack's norms are fused kernels by default; the engine's fused-norm describes an older
  // torchtitan's composite RMSNorm.
  training.fused_norm = true;
}

bool composite_rms_norms(const ModelSpec& model, const TrainingSpec& training) {
  return !training.fused_norm && model.norm_kind == NormKind::rmsnorm;
}

}  // namespace pipette
