#!/usr/bin/env python3
"""Joins `wgsl-forge bench --json`, bench/peers.py (PyTorch) and, when given, bench/cub_peers
(CUB and cuBLAS) output into one Markdown table: kernel | forge tuned | forge default |
PyTorch | CUB | forge / best peer | fraction of copy ceiling.

Rates use wgsl-forge's byte counts (the bytes a kernel must move, documented per kernel in
src/kernels) for the peers too, so a ratio above 1 means the forge is faster. Sorts are given in
G keys/s (G pairs/s): keys (pairs) per nanosecond of the median.

  compare.py forge-bench.json peers.json [cub-peers.json]

With `bench --passes` output it adds a second table: each kernel's time per entry point.
"""
import json
import sys


def rate(kernel, median_ns):
    if kernel.get("flops"):
        return kernel["flops"] / median_ns, "GFLOP/s"
    if kernel["kernel"].startswith("radix_sort"):
        unit = "G pairs/s" if "pairs" in kernel["kernel"] else "G keys/s"
        return int(kernel["problem"].removeprefix("n=")) / median_ns, unit
    return kernel["bytes_moved"] / median_ns, "GB/s"


def number(value):
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def main():
    forge = json.load(open(sys.argv[1]))
    torch_peers = json.load(open(sys.argv[2]))
    cub_peers = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else {"kernels": {}}
    peers = [("PyTorch", torch_peers), ("CUB", cub_peers)]
    print(f"Adapter: {forge['adapter']} (driver {forge['driver']}); peers: PyTorch "
          f"{torch_peers['torch']} on {torch_peers['device']}"
          + (f", {cub_peers['cub']} on {cub_peers['device']}" if "cub" in cub_peers else "")
          + f"; Dawn library BLAKE3 {forge['library_blake3'][:16]}...\n")
    print("| kernel | problem | forge tuned | forge default | PyTorch | CUB | forge / best peer "
          "| of copy ceiling | peer ops |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kernel in forge["kernels"]:
        name = kernel["kernel"]
        best_ns = kernel.get("tuned_median_ns", kernel["default_median_ns"])
        tuned, unit = rate(kernel, best_ns)
        default, _ = rate(kernel, kernel["default_median_ns"])
        rates = {}
        for label, table in peers:
            if name in table["kernels"]:
                rates[label] = rate(kernel, table["kernels"][name]["median_ns"])[0]
        best = max(rates.values()) if rates else None
        ratio = f"{tuned / best:.2f}" if best else "-"
        tuned_text = f"{number(tuned)} {unit}" if "tuned_median_ns" in kernel else "(not tuned)"
        cells = [f"{number(rates[label])} {unit}" if label in rates else "-" for label, _ in peers]
        ops = "; ".join(table["kernels"][name]["op"] for _, table in peers if name in table["kernels"])
        print(f"| {name} | {kernel['problem']} | {tuned_text} | {number(default)} {unit} | "
              f"{cells[0]} | {cells[1]} | {ratio} | {100 * kernel['fraction_of_copy_ceiling']:.0f} % "
              f"| {ops or '-'} |")
    ceilings = sorted({(k["copy_ceiling_gbps"], k["copy_ceiling_kernel"]) for k in forge["kernels"]})
    print()
    for gbps, how in ceilings:
        print(f"- forge copy ceiling: {gbps:.0f} GB/s ({how})")
    for label, table in peers:
        copy = table["kernels"].get("copy")
        if copy:
            n = table["size"]
            print(f"- {label} copy of {n} floats: {8 * n / copy['median_ns']:.0f} GB/s ({copy['op']})")
    print_passes(forge["kernels"])


def print_passes(kernels):
    """Per-pass times (`bench --passes`), summed per entry point in plan order."""
    timed = [k for k in kernels if k.get("passes")]
    if not timed:
        return
    print("\n| kernel | schedule | entry point | passes | time | share of the plan |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kernel in timed:
        totals = {}
        for one in kernel["passes"]:
            count, ns = totals.get(one["entry_point"], (0, 0.0))
            totals[one["entry_point"]] = (count + 1, ns + one["median_ns"])
        whole = sum(ns for _, ns in totals.values()) or 1.0
        for entry, (count, ns) in totals.items():
            print(f"| {kernel['kernel']} | {kernel['passes_schedule']} | {entry} | {count} | "
                  f"{ns / 1e3:.1f} us | {100 * ns / whole:.1f} % |")


if __name__ == "__main__":
    main()
