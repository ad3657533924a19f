#!/usr/bin/env python3
"""Writes the run-record samples of tests/topology/run_records_test.cpp in the exact line formats of
the frameworks' own code (commits read: Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553,
torchtitan b5bcd76c66d0acb1a08b176d9639425bc55e0b2a, nanotron 2411b022, DeepSpeed edaa7221, Megatron-DeepSpeed
4efb479d):
 - megatron/training/arguments.py:1990 _print_args: '  {} {} {}'.format(arg, '.' * (48 - len(arg)), value),
   sorted case-insensitively between '---... arguments ---...' and '---... end of arguments ---...';
 - megatron/training/training.py:3567 training_log: ' [date] iteration {:8d}/{:8d} | consumed samples: {:12d} |
   elapsed time per iteration (ms): {:.1f} | ...';
 - megatron/training/utils/common_utils.py:313 report_memory: '[Rank {}] (after N iterations) memory (MB) |
   allocated: … | max allocated: … | reserved: … | max reserved: …', printed by data-parallel rank 0 of each
   tensor/pipeline rank;
 - torchtitan/components/metrics.py:527 MetricsProcessor.log: coloured 'step: {:2}  loss: …  grad_norm: …
   memory: {:5.2f}GiB({:.2f}%)  tps: {:,}  tflops: {:,.2f}  mfu: {:.2f}%'.
 - nanotron src/nanotron/logging/base.py:378 SafeFormatter '\\033[2;3m%(asctime)s [%(levelname)s|DP=..]\\033[0m:
   %(message)s' (datefmt '%m/%d %H:%M:%S'); trainer.py:283-287 'Config:' then pformat(self.config) (dataclass reprs,
   'parallelism=ParallelismArgs(dp=…, pp=…, tp=…, …)'); logging/base.py:314-318 LoggerWriter.add_scalars_from_list
   'iteration: {step} / {total} | consumed_tokens: … | time_per_iteration_ms: … | tokens_per_sec: … |
   tokens_per_sec_per_gpu: … | …' with human_format (base.py:268, 3 significant digits and K/M/B/T); base.py:282-292
   log_memory ' Memory usage: {:.2f}MiB. Peak allocated {:.2f}MiB. Peak reserved: {:.2f}MiB' (trainer.py:611-626,
   the first five steps);
 - DeepSpeed deepspeed/runtime/pipe/engine.py:404-409 'steps: {} loss: {:0.4f} iter time (s): {:0.3f} samples/sec:
   {:0.3f}'; deepspeed/utils/timer.py:265-272 ThroughputTimer 'epoch={}/micro_step={}/global_step={},
   RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, MemAllocated={}GB, MaxMemAllocated={}GB';
   deepspeed/runtime/utils.py:826-829 see_memory_usage 'MA {} GB         Max_MA {} GB         CA {} GB
   Max_CA {} GB ' (Max_CA rounded to a whole GB);
 - Megatron-DeepSpeed megatron/arguments.py:463-475 _print_args (as Megatron's) and megatron/training.py:1146-1182
   training_log ' iteration {:8d}/{:8d} | consumed samples: … | consumed tokens: … | elapsed time per iteration
   (ms): {:.1f} | …'.
The numbers are made up but plausible for the layouts (a 2-node H100 job of Llama 3 8B; the Ultra-Scale
Playbook's nanotron 1B on one node; an A100 Llama 2 7B under Megatron-DeepSpeed)."""
import random

random.seed(7)

def megatron(path, iterations=60, interval=5, base_ms=3790.0):
    args = {
        "accumulate_allreduce_grads_in_fp32": "False", "bf16": "True", "context_parallel_size": "1",
        "data_parallel_size": "4", "ffn_hidden_size": "14336", "fp16": "False", "fp8": "None",
        "global_batch_size": "128", "hidden_size": "4096", "log_interval": str(interval), "micro_batch_size": "1",
        "num_attention_heads": "32", "num_layers": "32", "num_query_groups": "8", "padded_vocab_size": "128256",
        "pipeline_model_parallel_size": "2", "recompute_granularity": "selective", "seq_length": "4096",
        "sequence_parallel": "True", "swiglu": "True", "tensor_model_parallel_size": "2", "tp_comm_overlap": "False",
        "train_iters": str(iterations), "use_distributed_optimizer": "True", "virtual_pipeline_model_parallel_size": "None",
        "world_size": "16",
    }
    out = ["using world size: 16, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 2, "
           "pipeline-model-parallel size: 2",
           "------------------------ arguments ------------------------"]
    lines = ["  {} {} {}".format(k, "." * (48 - len(k)), v) for k, v in args.items()]
    out += sorted(lines, key=lambda x: x.lower())
    out += ["-------------------- end of arguments ---------------------",
            "> building GPT2BPETokenizer tokenizer ...",
            "[after dataloaders are built] datetime: 2026-11-30 09:12:41 ",
            "done with setup ...",
            "training ..."]
    for it in range(interval, iterations + 1, interval):
        ms = base_ms * (2.6 if it == interval else 1 + random.uniform(-0.01, 0.01))
        out.append(" [2026-11-30 09:{:02d}:{:02d}.{:06d}] iteration {:8d}/{:8d} | consumed samples: {:12d} | "
                   "elapsed time per iteration (ms): {:.1f} | learning rate: {:.6E} | global batch size: {:5d} | "
                   "lm loss: {:.6E} | loss scale: 1.0 | grad norm: {:.3f} | number of skipped iterations:   0 | "
                   "number of nan iterations:   0 |".format(13 + it // 16, (it * 4) % 60, 123456, it, iterations, it * 128,
                                                              ms, 3e-4 * it / iterations, 128, 10.5 - it * 0.05, 1.2))
        if it == interval:
            for rank, (alloc, reserved) in {0: (26105.3, 28930.0), 1: (26090.8, 28930.0), 8: (23310.2, 25120.0),
                                            9: (23302.6, 25120.0)}.items():
                out.append("[Rank {}] (after {} iterations) memory (MB) | allocated: {:.2f} | max allocated: {:.2f} | "
                           "reserved: {:.2f} | max reserved: {:.2f}".format(rank, it, alloc * 0.61, alloc, reserved,
                                                                             reserved))
    open(path, "w").write("\n".join(out) + "\n")

def torchtitan(path, steps=50, interval=10):
    out = ["[rank0]:[titan] 2026-11-30 10:01:02,345 - root - INFO - Starting job: Llama 3 8B training",
           "[rank0]:[titan] 2026-11-30 10:01:40,001 - root - INFO - Training starts at step 1"]
    for step in [1] + list(range(interval, steps + 1, interval)):
        tps = 1650 if step == 1 else 5210 + random.randint(-20, 20)
        out.append("[rank0]:[titan] 2026-11-30 10:02:{:02d},000 - root - INFO - \x1b[31mstep: {:2}  \x1b[32mloss: {:8.5f}  "
                   "\x1b[33mgrad_norm: {:7.4f}  \x1b[36mmemory: {:5.2f}GiB({:.2f}%)  \x1b[34mtps: {:,}  "
                   "\x1b[36mtflops: {:,.2f}  \x1b[35mmfu: {:.2f}%\x1b[39m".format(step % 60, step, 8.0 - step * 0.01,
                                                                                    1.5, 61.73, 77.96, tps, 291.4, 29.46))
    open(path, "w").write("\n".join(out) + "\n")

def human(num):
    """nanotron's human_format (src/nanotron/logging/base.py:268)."""
    if abs(num) < 1:
        return "{:.3g}".format(num)
    sizes = ["", "K", "M", "B", "T", "P", "E"]
    num = float("{:.3g}".format(num))
    magnitude = 0
    while abs(num) >= 1000 and magnitude < len(sizes) - 1:
        magnitude += 1
        num /= 1000.0
    return "{}{}".format("{:f}".format(num).rstrip("0").rstrip("."), sizes[magnitude])

def nanotron(path, steps=20):
    prefix = "\x1b[2;3m12/01 14:{:02d}:{:02d} [INFO|DP=0|ip-26-0-160-225]\x1b[0m: "
    out = [prefix.format(0, 1) + "\x1b[1mConfig:\x1b[0m",
           prefix.format(0, 1) + "Config(general=GeneralArgs(project='bench_cluster', run='%date_%jobid', seed=42),",
           "       parallelism=ParallelismArgs(dp=8,",
           "                                   pp=1,",
           "                                   tp=1,",
           "                                   pp_engine=<nanotron.parallel.pipeline_parallel.engine.OneForwardOneBackward"
           "PipelineEngine object at 0x7f0c1c2d3e50>,",
           "                                   tp_mode=<TensorParallelLinearMode.REDUCE_SCATTER: 2>,",
           "                                   tp_linear_async_communication=False,",
           "                                   recompute_layer=False,",
           "                                   tp_recompute_allgather=True,",
           "                                   expert_parallel_size=1,",
           "                                   context_parallel_size=1),",
           "       model=ModelArgs(model_config=LlamaConfig(bos_token_id=1,",
           "                                                hidden_size=2048,",
           "                                                intermediate_size=8192,",
           "                                                num_attention_heads=32,",
           "                                                num_hidden_layers=24,",
           "                                                num_key_value_heads=32,",
           "                                                vocab_size=50272),",
           "                       dtype=torch.bfloat16),",
           "       optimizer=OptimizerArgs(zero_stage=1,",
           "                               accumulate_grad_in_fp32=True),",
           "       tokens=TokensArgs(sequence_length=4096,",
           "                         train_steps={},".format(steps),
           "                         micro_batch_size=2,",
           "                         batch_accumulation_per_replica=1,",
           "                         val_check_interval=-1))",
           prefix.format(0, 2) + "\x1b[1mModel Config:\x1b[0m"]
    for step in range(1, steps + 1):
        ms = 1630.0 * (5.5 if step == 1 else 1 + random.uniform(-0.01, 0.01))
        if step <= 5:
            out.append(prefix.format(1, step) + "Before train_batch_iter")
            out.append(" Memory usage: 20480.55MiB. Peak allocated 20480.55MiB. Peak reserved: 21002.00MiB")
            out.append(prefix.format(1, step) + "After train_batch_iter")
            out.append(" Memory usage: 20570.10MiB. Peak allocated {:.2f}MiB. Peak reserved: {:.2f}MiB".format(
                33150.42 if step > 1 else 31210.08, 34960.00))
        tokens = 8 * 2 * 4096
        out.append(prefix.format(1, step) + "iteration: {} / {} | consumed_tokens: {} | time_per_iteration_ms: {} | "
                   "tokens_per_sec: {} | tokens_per_sec_per_gpu: {} | global_batch_size: {} | grad_norm: {} | "
                   "lm_loss: {} | lr: {} | model_tflops_per_gpu: {} | eta: 0:00:{:02d}".format(
                       step, steps, human(tokens * step), human(ms), human(tokens / ms * 1000),
                       human(tokens / ms * 1000 / 8), human(tokens), human(1.02), human(10.8 - 0.1 * step),
                       human(1e-4), human(281.7), steps - step))
    open(path, "w").write("\n".join(out) + "\n")

def deepspeed_pipe(path, steps=60, interval=10):
    out = ["[2026-12-01 15:00:01,000] [INFO] [config.py:1000:print] DeepSpeedEngine configuration:",
           "[2026-12-01 15:00:01,000] [INFO] [engine.py:150:__init__] CONFIG: micro_batches=16 micro_batch_size=1",
           "MA 6.95 GB         Max_MA 6.95 GB         CA 7.22 GB         Max_CA 7 GB "]
    for step in range(interval, steps + 1, interval):
        seconds = 5.812 * (1.9 if step == interval else 1 + random.uniform(-0.01, 0.01))
        out.append("steps: {} loss: {:0.4f} iter time (s): {:0.3f} samples/sec: {:0.3f}".format(
            step, 9.1 - 0.01 * step, seconds, 64 / seconds))
        if step == interval:
            out.append("MA 14.32 GB         Max_MA 41.87 GB         CA 43.10 GB         Max_CA 44 GB ")
    open(path, "w").write("\n".join(out) + "\n")

def megatron_deepspeed(path, iterations=40, interval=5):
    args = {
        "bf16": "True", "data_parallel_size": "8", "deepspeed": "True", "ffn_hidden_size": "11008", "fp16": "False",
        "global_batch_size": "256", "hidden_size": "4096", "micro_batch_size": "2", "num_attention_heads": "32",
        "num_layers": "32", "pipeline_model_parallel_size": "2", "recompute_granularity": "None",
        "seq_length": "4096", "sequence_parallel": "False", "swiglu": "True", "tensor_model_parallel_size": "2",
        "train_iters": str(iterations), "use_distributed_optimizer": "False", "use_flash_attn_v2": "True",
        "world_size": "32", "zero_stage": "1",
    }
    out = ["------------------------ arguments ------------------------"]
    out += sorted(["  {} {} {}".format(k, "." * (48 - len(k)), v) for k, v in args.items()], key=lambda x: x.lower())
    out += ["-------------------- end of arguments ---------------------",
            "MA 3.48 GB         Max_MA 3.48 GB         CA 3.61 GB         Max_CA 4 GB "]
    for it in range(interval, iterations + 1, interval):
        ms = 14250.0 * (1.7 if it == interval else 1 + random.uniform(-0.01, 0.01))
        out.append(" iteration {:8d}/{:8d} | consumed samples: {:12d} | consumed tokens: {:12d} | elapsed time per "
                   "iteration (ms): {:.1f} | learning rate: {:.3E} | global batch size: {:5d} | lm loss: {:.6E} | "
                   "loss scale: 1.0 | actual seqlen:  4096 | number of skipped iterations:   0 | number of nan "
                   "iterations:   0 | samples per second: {:.3f} | tokens per gpu per second (tgs): {:.3f} | "
                   "TFLOPs: {:.2f} |".format(it, iterations, it * 256, it * 256 * 4096, ms, 3e-4, 256,
                                              9.0 - 0.02 * it, 256 / ms * 1000, 256 * 4096 / ms * 1000 / 32, 151.2))
        if it == interval:
            out.append("MA 21.05 GB         Max_MA 58.64 GB         CA 61.92 GB         Max_CA 62 GB ")
    open(path, "w").write("\n".join(out) + "\n")

megatron("megatron_llama3_8b_2nodes.log")
torchtitan("torchtitan_llama3_8b_1node.log")
nanotron("nanotron_llama_1b_dp8.log")
deepspeed_pipe("deepspeed_pipe_7b.log")
megatron_deepspeed("megatron_deepspeed_llama2_7b_4nodes.log")
