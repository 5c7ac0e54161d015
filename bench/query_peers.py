#!/usr/bin/env python3
"""PyTorch peers of the query operators (issue 26), on the same GPU, at the sizes of
`wgsl-forge bench`: a hash-join probe, a group-by sum, a segmented sum and a u64 pair sort.

PyTorch has no hash join and no hash group-by, so the peers are what a PyTorch user writes:
the probe is a sort-merge lookup (`searchsorted` into the sorted build keys, timed without the
build's sort), the group-by is `unique(return_inverse)` plus `index_add_` (and, as a lower bound,
`index_add_` alone on dense group ids), the segmented sum `segment_reduce`, the pair sort a stable
`sort` of int64 keys and a gather of the values. Times with CUDA events (3 warm-up runs, then the
median of --repeats); prints JSON {"device", "torch", "rows", "ops": {name: {"op", "median_ns"}}}.
"""
import argparse
import json
import sys
import time

import torch

from peers import time_op


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1 << 28)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    n = args.rows
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1)
    ops = {}

    def record(name, text, fn):
        started = time.monotonic()
        ops[name] = {"op": text, "median_ns": time_op(fn, args.repeats)}
        torch.cuda.empty_cache()
        # One line per operation as it finishes, so that a run cut short keeps what it measured.
        print(json.dumps({name: ops[name], "wall_s": round(time.monotonic() - started, 1)}),
              file=sys.stderr, flush=True)

    probe = torch.randint(0, 2**31 - 1, (n,), device=dev, dtype=torch.int64, generator=gen)
    for build_rows in (1 << 20, 1 << 26):
        # Unique keys without a permutation of 2^31 values: an odd multiplier is a bijection
        # modulo 2^31, applied to distinct indices from a random start.
        start = int(torch.randint(0, 2**31, (1,), generator=gen, device=dev))
        build = (torch.arange(build_rows, device=dev, dtype=torch.int64) + start) \
            * 2654435761 % (2**31)
        build_sorted, build_order = torch.sort(build)
        probe_hits = build[torch.randint(0, build_rows, (n,), device=dev, generator=gen)]

        def lookup(keys=probe_hits, sorted_keys=build_sorted, order=build_order):
            at = torch.searchsorted(sorted_keys, keys).clamp_(max=sorted_keys.numel() - 1)
            found = sorted_keys[at] == keys
            return order[at], found

        record(f"probe_build_{build_rows}", "searchsorted into sorted build keys + gather", lookup)
        del build, build_sorted, build_order, probe_hits
    del probe

    values = torch.rand(n, device=dev, generator=gen) * 2 - 1
    for groups in (1024, 4096, 1 << 20):
        group_ids = torch.randint(0, groups, (n,), device=dev, generator=gen)
        keys = group_ids * 2654435761 % (2**32)  # arbitrary u32 keys, one per group

        def unique_sum(keys=keys):
            distinct, inverse = torch.unique(keys, return_inverse=True)
            sums = torch.zeros(distinct.numel(), device=dev).index_add_(0, inverse, values)
            return distinct, sums

        def dense_sum(ids=group_ids, groups=groups):
            return torch.zeros(groups, device=dev).index_add_(0, ids, values)

        record(f"group_by_{groups}", "unique(return_inverse) + index_add_", unique_sum)
        record(f"group_by_dense_{groups}", "index_add_ on dense ids (lower bound)", dense_sum)
        del group_ids, keys

    for length in (32, 1024):
        segments = n // length
        lengths = torch.full((segments,), length, device=dev, dtype=torch.int64)
        data = values[: segments * length]
        record(f"segmented_sum_{length}", "segment_reduce(sum, lengths)",
               lambda data=data, lengths=lengths: torch.segment_reduce(data, "sum",
                                                                       lengths=lengths))
    del values

    keys64 = torch.randint(-(2**62), 2**62, (n,), device=dev, dtype=torch.int64, generator=gen)
    payload = torch.arange(n, device=dev, dtype=torch.int32)

    def sort_pairs_u64():
        sorted_keys, order = torch.sort(keys64, stable=True)
        return sorted_keys, payload[order]

    record("radix_sort_pairs_u64", "sort(int64, stable) + gather of u32 values", sort_pairs_u64)
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "rows": n, "ops": ops}, indent=1))


if __name__ == "__main__":
    main()
