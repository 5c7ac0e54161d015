"""The C API from Python through ctypes, as a scripting engine would use it: the shared library
libwgsl_forge.so, on the real adapter, with seeded random data checked against Python.

    python3 tests/capi/test_capi.py LIBRARY CACHE_DIR [SEED]      exit 0 when every check passes
"""
import ctypes
import random
import struct
import sys
import time

WF_OK, WF_ERROR_INVALID_INPUT = 0, 2


def load(path):
    lib = ctypes.CDLL(path)
    context_p = ctypes.c_void_p
    lib.wf_version.restype = ctypes.c_char_p
    lib.wf_context_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(context_p)]
    lib.wf_context_destroy.argtypes = [context_p]
    lib.wf_context_error.argtypes = [context_p]
    lib.wf_context_error.restype = ctypes.c_char_p
    lib.wf_context_adapter_name.argtypes = [context_p]
    lib.wf_context_adapter_name.restype = ctypes.c_char_p
    u32_p, f32_p, size_p = (ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_float),
                            ctypes.POINTER(ctypes.c_size_t))
    lib.wf_sort_u32_host.argtypes = [context_p, u32_p, ctypes.c_size_t]
    lib.wf_reduce_sum_f32_host.argtypes = [context_p, f32_p, ctypes.c_size_t, f32_p]
    lib.wf_compact_f32_host.argtypes = [context_p, f32_p, ctypes.c_size_t, ctypes.c_float, f32_p,
                                        size_p]
    lib.wf_sort_pairs_u64_host.argtypes = [context_p, ctypes.POINTER(ctypes.c_uint64), u32_p,
                                           ctypes.c_size_t]
    lib.wf_segmented_reduce_sum_f32_host.argtypes = [context_p, f32_p, ctypes.c_size_t, u32_p,
                                                     ctypes.c_size_t, f32_p]
    return lib


def main():
    library, cache_dir = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else time.time_ns() % 2**32
    rng = random.Random(seed)
    lib = load(library)
    print(f"test_capi.py: seed {seed}, wgsl-forge {lib.wf_version().decode()}")
    failures = []
    checks = []

    def check(condition, what):
        checks.append(what)
        if not condition:
            failures.append(what)
            print(f"test_capi.py: FAILED: {what} (seed {seed})", file=sys.stderr)

    context = ctypes.c_void_p()
    status = lib.wf_context_create(cache_dir.encode(), ctypes.byref(context))
    if status != WF_OK:
        print(f"test_capi.py: {lib.wf_context_error(context).decode()}", file=sys.stderr)
        return 3
    print(f"test_capi.py: adapter {lib.wf_context_adapter_name(context).decode()}")

    n = rng.randrange(3000, 6000)
    keys = [rng.getrandbits(32) for _ in range(n)]
    array = (ctypes.c_uint32 * n)(*keys)
    check(lib.wf_sort_u32_host(context, array, n) == WF_OK, "sort ran")
    check(list(array) == sorted(keys), "sorted keys")

    # Values that float32 holds exactly, so that Python's sum is the exact reference.
    values = [struct.unpack("f", struct.pack("f", rng.uniform(-100, 100)))[0] for _ in range(n)]
    floats = (ctypes.c_float * n)(*values)
    total = ctypes.c_float()
    check(lib.wf_reduce_sum_f32_host(context, floats, n, ctypes.byref(total)) == WF_OK, "sum ran")
    bound = n * sum(abs(v) for v in values) * 2.0**-24
    check(abs(total.value - sum(values)) <= bound, f"sum {total.value} vs {sum(values)}")

    out = (ctypes.c_float * n)()
    kept = ctypes.c_size_t()
    check(lib.wf_compact_f32_host(context, floats, n, 10.0, out, ctypes.byref(kept)) == WF_OK,
          "compact ran")
    expected = [v for v in values if v > 10.0]
    check(kept.value == len(expected) and list(out)[:kept.value] == expected, "compacted values")

    # u64 keys, many equal and many differing only in their high half: Python's sort is stable.
    wide = [rng.randrange(4) << 40 | rng.randrange(3) for _ in range(n)]
    wide_keys = (ctypes.c_uint64 * n)(*wide)
    positions = (ctypes.c_uint32 * n)(*range(n))
    check(lib.wf_sort_pairs_u64_host(context, wide_keys, positions, n) == WF_OK, "u64 sort ran")
    order = sorted(range(n), key=lambda i: wide[i])
    check(list(wide_keys) == [wide[i] for i in order] and list(positions) == order,
          "u64 pairs sorted stably")

    # Segments of 0 to 40 values over the floats, each sum within its bound.
    offsets = [0]
    while offsets[-1] < n - 40:
        offsets.append(offsets[-1] + rng.randrange(41))
    segments = len(offsets) - 1
    sums = (ctypes.c_float * segments)()
    check(lib.wf_segmented_reduce_sum_f32_host(context, floats, n, (ctypes.c_uint32 * (segments + 1))(
        *offsets), segments, sums) == WF_OK, "segmented sum ran")
    pieces = [values[offsets[s]:offsets[s + 1]] for s in range(segments)]
    check(all(abs(sums[s] - sum(piece)) <= len(piece) * sum(map(abs, piece)) * 2.0**-24
              for s, piece in enumerate(pieces)), "segment sums")
    offsets[1] = n + 1
    check(lib.wf_segmented_reduce_sum_f32_host(context, floats, n, (ctypes.c_uint32 * (segments + 1))(
        *offsets), segments, sums) == WF_ERROR_INVALID_INPUT, "offset past n refused")
    check(b"Segment offset 1 (" in lib.wf_context_error(context), "offset past n message")

    check(lib.wf_sort_u32_host(context, None, 7) == WF_ERROR_INVALID_INPUT, "NULL keys refused")
    check(b"keys is NULL" in lib.wf_context_error(context), "NULL keys message")
    check(lib.wf_sort_u32_host(context, None, 0) == WF_OK, "n = 0 succeeds")

    lib.wf_context_destroy(context)
    print(f"test_capi.py: {len(checks) - len(failures)} of {len(checks)} checks passed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
