#!/usr/bin/env python3
"""Writes the run-record samples of tests/topology/run_records_test.cpp in the exact line formats of
the frameworks' own code (commits read: Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553,
torchtitan b5bcd76c66d0acb1a08b176d9639425bc55e0b2a):
 - megatron/training/arguments.py:1990 _print_args: '  {} {} {}'.format(arg, '.' * (48 - len(arg)), value),
   sorted case-insensitively between '---... arguments ---...' and '---... end of arguments ---...';
 - megatron/training/training.py:3567 training_log: ' [date] iteration {:8d}/{:8d} | consumed samples: {:12d} |
   elapsed time per iteration (ms): {:.1f} | ...';
 - megatron/training/utils/common_utils.py:313 report_memory: '[Rank {}] (after N iterations) memory (MB) |
   allocated: … | max allocated: … | reserved: … | max reserved: …', printed by data-parallel rank 0 of each
   tensor/pipeline rank;
 - torchtitan/components/metrics.py:527 MetricsProcessor.log: coloured 'step: {:2}  loss: …  grad_norm: …
   memory: {:5.2f}GiB({:.2f}%)  tps: {:,}  tflops: {:,.2f}  mfu: {:.2f}%'.
The numbers are made up but plausible for the layouts (a 2-node H100 job of Llama 3 8B)."""
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

megatron("megatron_llama3_8b_2nodes.log")
torchtitan("torchtitan_llama3_8b_1node.log")
