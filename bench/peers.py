#!/usr/bin/env python3
"""The same operations as `wgsl-forge bench`, with PyTorch on the same GPU, at the same sizes.

Times each with CUDA events (3 warm-up runs, then the median of --repeats), and prints JSON:
{"device": ..., "torch": ..., "kernels": {kernel_id: {"op": ..., "median_ns": ...}}}.
Bytes and FLOPs are counted by wgsl-forge's rules (see bench/compare.py), so rates compare.
"""
import argparse
import json
import statistics

import torch


def time_op(fn, repeats):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e6)  # ms -> ns
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1 << 28)
    parser.add_argument("--gemm", type=int, default=4096)
    parser.add_argument("--bins", type=int, default=256, help="histogram bins")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("kernels", nargs="*", help="only these kernel ids (default: all); the copy always runs")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n = args.size
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1)
    x = torch.rand(n, device=dev, generator=gen) * 2000 - 1000
    y = torch.empty_like(x)
    b = torch.tensor(1.0, device=dev)
    ints = torch.randint(0, 2**31 - 1, (n,), device=dev, dtype=torch.int32, generator=gen)
    idx = torch.randint(0, n, (n,), device=dev, dtype=torch.int64, generator=gen)
    values = torch.arange(n, device=dev, dtype=torch.int32)
    bins = args.bins
    hist_in = torch.rand(n, device=dev, generator=gen) * bins
    a = torch.rand(args.gemm, args.gemm, device=dev, generator=gen) * 2 - 1
    bm = torch.rand(args.gemm, args.gemm, device=dev, generator=gen) * 2 - 1

    def sort_pairs():
        keys, order = torch.sort(ints, stable=True)
        return keys, values[order]

    ops = {
        "copy": ("y.copy_(x)", lambda: y.copy_(x)),
        "affine_f32": ("torch.add(b, x, alpha=2.0)", lambda: torch.add(b, x, alpha=2.0, out=y)),
        "reduce_sum_f32": ("x.sum()", lambda: x.sum()),
        "reduce_min_f32": ("x.min()", lambda: x.min()),
        "reduce_max_f32": ("x.max()", lambda: x.max()),
        "reduce_sum_u32": ("int32 sum", lambda: ints.sum(dtype=torch.int32)),
        "scan_exclusive_u32": ("torch.cumsum int32", lambda: torch.cumsum(ints, 0, dtype=torch.int32)),
        "compact_f32": ("torch.masked_select(x, x > 0)", lambda: torch.masked_select(x, x > 0)),
        "histogram_u32": (f"torch.histc {bins} bins", lambda: torch.histc(hist_in, bins=bins, min=0, max=bins)),
        "radix_sort_u32": ("torch.sort int32", lambda: torch.sort(ints)),
        "radix_sort_pairs_u32": ("torch.sort stable + gather values", sort_pairs),
        "gather_f32": ("torch.index_select (int64 indices)", lambda: torch.index_select(x, 0, idx, out=y)),
        "gemm_f32": ("torch.mm fp32, no TF32", lambda: torch.mm(a, bm)),
    }
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "size": n, "gemm": args.gemm, "bins": bins, "kernels": {}}
    for name, (op, fn) in ops.items():
        if args.kernels and name != "copy" and name not in args.kernels:
            continue
        result["kernels"][name] = {"op": op, "median_ns": time_op(fn, args.repeats)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
