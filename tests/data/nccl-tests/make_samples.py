#!/usr/bin/env python3
"""Writes the nccl-tests samples in this directory, character for character in the layouts that
NVIDIA/nccl-tests prints (see README.md for the source of each format string). The timings follow
latency + bytes / bandwidth with a little deterministic jitter, except the one-node H200 sample,
whose algbw/busbw are published measurements. Run it from this directory; it overwrites the files."""
import csv
import math
import os
import random

KIB, MIB, GIB = 1024, 1024**2, 1024**3


def float_str(value, width):  # util.cu getFloatStr (v2.14+)
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        text = fmt % (width, value)
        if len(text) <= width:
            return text
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def time_str_v213(usec):  # common.cu BenchTime (v2.13 and before)
    if usec >= 10000.0:
        return "%7.0f" % usec
    if usec >= 100.0:
        return "%7.1f" % usec
    return "%7.2f" % usec


def timings(size, latency_us, bus_bytes_per_s, bus_factor, jitter, rng):
    usec = (latency_us + size * bus_factor / bus_bytes_per_s * 1e6) * (1 + rng.uniform(-jitter, jitter))
    algbw = size / (usec * 1e-6) / 1e9
    return usec, algbw, algbw * bus_factor


def header_v214_and_v213(out):
    out.append("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
               % ("", "", "", "", ""))
    out.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"
               % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"))
    out.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
               % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""))


def all_reduce_two_nodes_h100():
    """v2.14+ layout: all_reduce_perf -b 1M -e 8G -f 2 -g 1, 16 ranks on two 8x H100 / 8x NDR nodes."""
    rng = random.Random(7)
    ranks, factor = 16, 2 * 15 / 16
    out = ["# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703",
           "# Collective test starting: all_reduce_perf",
           "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 1 graph: 0",
           "#", "# Using devices"]
    bus = ["0x18", "0x2a", "0x3a", "0x5d", "0x9a", "0xab", "0xba", "0xdb"]
    for rank in range(ranks):
        host = "gpu001" if rank < 8 else "gpu002"
        out.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s"
                   % (rank, 0, 48211 + rank % 8, host, rank % 8, bus[rank % 8], "NVIDIA H100 80GB HBM3"))
    out.append("#")
    header_v214_and_v213(out)
    bandwidths = []
    size = MIB
    while size <= 8 * GIB:
        line = "%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "%6i" % -1)
        for _ in range(2):
            usec, algbw, busbw = timings(size, 46.0, 468e9, factor, 0.012, rng)
            line += "  %7s  %6s  %6s  %6g" % (float_str(usec, 7), float_str(algbw, 6), float_str(busbw, 6), 0)
            bandwidths.append(busbw)
        out.append(line)
        size *= 2
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % (sum(bandwidths) / len(bandwidths)), "#", ""]
    return out


def sendrecv_two_nodes_one_rail():
    """v2.13 layout (no Group column in the device list, #wrong N/A with -c 0): sendrecv_perf
    -b 8 -e 1G -f 4 -c 0, one rank on each of two nodes, so one 400 Gb/s rail."""
    rng = random.Random(11)
    out = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 0 graph: 0",
           "#", "# Using devices"]
    for rank, host in enumerate(["dgx-a17", "dgx-b03"]):
        out.append("#  Rank %2d Pid %6d on %10s device %2d [0x%02x] %s" % (rank, 90310 + rank, host, 0, 0x18, "NVIDIA A100-SXM4-80GB"))
    out.append("#")
    header_v214_and_v213(out)
    bandwidths = []
    size = 8
    while size <= GIB:
        line = "%12li  %12li  %8s  %6s  %6i" % (size, size // 4, "float", "sum", -1)
        for _ in range(2):
            usec, algbw, busbw = timings(size, 9.2, 46.5e9, 1.0, 0.02, rng)
            line += "  %7s  %6.2f  %6.2f  %5s" % (time_str_v213(usec), algbw, busbw, "N/A")
            bandwidths.append(busbw)
        out.append(line)
        size *= 4
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % (sum(bandwidths) / len(bandwidths)), "#", ""]
    return out


def all_reduce_one_node_h200():
    """v2.13 layout, 8x H200 in one node: algbw/busbw are the published figures of
    ../../../../shared/ground_truth_data/h200_allreduce_size_sweep.csv (stas00/ml-engineering,
    network/benchmarks/results/all-reduce-8xH200.md); time = size / algbw. The source gives one
    figure per size, so in-place repeats out-of-place."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../shared/ground_truth_data/h200_allreduce_size_sweep.csv")
    units = {"KiB": KIB, "MiB": MIB, "GiB": GIB}
    out = ["# nThread 1 nGpus 8 minBytes 32768 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 1 graph: 0",
           "#", "# Using devices"]
    bus = ["0x19", "0x3b", "0x4c", "0x5d", "0x9b", "0xbb", "0xcb", "0xdb"]
    for rank in range(8):
        out.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s" % (rank, 0, 2117, "h200-n07", rank, bus[rank], "NVIDIA H200"))
    out.append("#")
    header_v214_and_v213(out)
    bandwidths = []
    with open(source) as f:
        for row in csv.DictReader(f):
            payload = row["payload"]
            unit = next(u for u in units if payload.endswith(u))
            size = int(payload[: -len(unit)]) * units[unit]
            algbw, busbw = float(row["algbw_GBps"]), float(row["busbw_GBps"])
            usec = size / (algbw * 1e9) * 1e6
            line = "%12li  %12li  %8s  %6s  %6i" % (size, size // 4, "float", "sum", -1)
            for _ in range(2):
                line += "  %7s  %6.2f  %6.2f  %5s" % (time_str_v213(usec), algbw, busbw, "0")
                bandwidths.append(busbw)
            out.append(line)
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % (sum(bandwidths) / len(bandwidths)), "#", ""]
    return out


def sendrecv_old_layout():
    """The 2019 layout (nccl-tests 2.0 sendrecv.cu print_header: no redop or root column, `error`
    instead of #wrong), preceded by the NCCL INFO lines NCCL_DEBUG=INFO interleaves, on two
    V100 nodes with 100 Gb/s EDR."""
    rng = random.Random(3)
    out = ["# nThread 1 nGpus 1 minBytes 1024 maxBytes 268435456 step: 8(factor) warmup iters: 5 iters: 20 validation: 1",
           "#", "# Using devices",
           "#   Rank  0 Pid  23007 on     node-a device  0 [0x1a] Tesla V100-SXM2-32GB",
           "#   Rank  1 Pid  19312 on     node-b device  0 [0x1a] Tesla V100-SXM2-32GB",
           "node-a:23007:23007 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.11<0>",
           "node-a:23007:23007 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.1.0.11<0>",
           "node-a:23007:23007 [0] NCCL INFO NCCL version 2.4.8+cuda10.1",
           "#",
           "# %10s  %12s  %6s            out-of-place                       in-place          " % ("", "", ""),
           "# %10s  %12s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
           % ("size", "count", "type", "time", "algbw", "busbw", "error", "time", "algbw", "busbw", "error"),
           "# %10s  %12s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
           % ("(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")]
    bandwidths = []
    size = KIB
    while size <= 256 * MIB:
        line = "%12li  %12li  %6s" % (size, size // 4, "float")
        for _ in range(2):
            usec, algbw, busbw = timings(size, 7.5, 11.8e9, 1.0, 0.02, rng)
            line += "  %7s  %6.2f  %6.2f  %5.0le" % (time_str_v213(usec), algbw, busbw, 0.0)
            bandwidths.append(busbw)
        out.append(line)
        size *= 8
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % (sum(bandwidths) / len(bandwidths)), "#"]
    return out


for name, lines in [("all_reduce_perf_2nodes_8xH100.txt", all_reduce_two_nodes_h100()),
                    ("sendrecv_perf_2nodes_1rail.txt", sendrecv_two_nodes_one_rail()),
                    ("all_reduce_perf_1node_8xH200.txt", all_reduce_one_node_h200()),
                    ("sendrecv_perf_2019_layout.txt", sendrecv_old_layout())]:
    with open(name, "w") as f:
        f.write("\n".join(lines) + "\n")
