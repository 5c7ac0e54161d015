#!/usr/bin/env python3
"""Joins `wgsl-forge bench --json` and bench/peers.py output into one Markdown table:
kernel | forge tuned | forge default | peer | ratio forge/peer | fraction of copy ceiling.

Rates use wgsl-forge's byte counts (the bytes a kernel must move, documented per kernel in
src/kernels) for the peer too, so a ratio above 1 means the forge is faster.

  compare.py forge-bench.json peers.json

With `bench --passes` output it adds a second table: each kernel's time per entry point.
"""
import json
import sys


def rate(kernel, median_ns):
    if kernel.get("flops"):
        return kernel["flops"] / median_ns, "GFLOP/s"
    return kernel["bytes_moved"] / median_ns, "GB/s"


def main():
    forge = json.load(open(sys.argv[1]))
    peers = json.load(open(sys.argv[2]))
    copy_peer = peers["kernels"].get("copy")
    print(f"Adapter: {forge['adapter']} (driver {forge['driver']}); peer: PyTorch {peers['torch']} "
          f"on {peers['device']}; Dawn library BLAKE3 {forge['library_blake3'][:16]}...\n")
    print("| kernel | problem | forge tuned | forge default | peer | forge / peer | of copy ceiling | peer op |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kernel in forge["kernels"]:
        name = kernel["kernel"]
        best_ns = kernel.get("tuned_median_ns", kernel["default_median_ns"])
        tuned, unit = rate(kernel, best_ns)
        default, _ = rate(kernel, kernel["default_median_ns"])
        peer = peers["kernels"].get(name)
        peer_rate = rate(kernel, peer["median_ns"])[0] if peer else None
        ratio = f"{tuned / peer_rate:.2f}" if peer_rate else "-"
        tuned_text = f"{tuned:.0f} {unit}" if "tuned_median_ns" in kernel else "(not tuned)"
        peer_text = f"{peer_rate:.0f} {unit}" if peer_rate else "-"
        print(f"| {name} | {kernel['problem']} | {tuned_text} | {default:.0f} {unit} | {peer_text} | "
              f"{ratio} | {100 * kernel['fraction_of_copy_ceiling']:.0f} % | {peer['op'] if peer else '-'} |")
    ceilings = sorted({(k["copy_ceiling_gbps"], k["copy_ceiling_kernel"]) for k in forge["kernels"]})
    print()
    for gbps, how in ceilings:
        print(f"- forge copy ceiling: {gbps:.0f} GB/s ({how})")
    if copy_peer:
        n = peers["size"]
        print(f"- PyTorch copy of {n} floats: {8 * n / copy_peer['median_ns']:.0f} GB/s")
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
