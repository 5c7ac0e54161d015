/* wgsl-forge's C API: the tuned primitives for engines written in C, Rust, Python or Go.
 *
 * Conventions:
 *   - Every function that can fail returns an int status: WF_OK (0) on success, otherwise one
 *     of the WF_ERROR_* codes below; wf_context_error() then gives the message (one line, in
 *     English, naming what was wrong). Pointers returned by the API stay valid until the next
 *     call on the same context (messages) or for the life of the process (wf_version).
 *   - Handles are opaque. A context owns its device (or a reference to the program's), its
 *     kernels and their scratch buffers; destroy it with wf_context_destroy.
 *   - A NULL data pointer with n > 0 is WF_ERROR_INVALID_INPUT; n = 0 succeeds and does nothing
 *     (a sum of nothing is 0; a minimum of nothing is an error).
 *   - Threads: a context may be used from several threads; its calls are serialised by a lock
 *     inside it. wf_context_error returns the message of the context's latest failure, so read
 *     it before another call on the same context. Different contexts are independent, but two
 *     contexts on one program-owned device share its queue, which the program must not use at
 *     the same time from another thread (webgpu.h's rule).
 *   - Device columns (wf_column) are WGPUBuffers of the context's device with Storage usage,
 *     from a byte offset that is a multiple of the device's minStorageBufferOffsetAlignment;
 *     each must hold what its kernel needs (for vectorised kernels n rounded up to a multiple of
 *     4 elements); a short or misused buffer is an error naming the kernel, buffer and sizes.
 */
#ifndef WGSL_FORGE_WGSL_FORGE_H
#define WGSL_FORGE_WGSL_FORGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WF_OK 0
#define WF_ERROR_INVALID_INPUT 2 /* a bad argument: NULL pointer, unknown kernel, short buffer */
#define WF_ERROR_CACHE 4         /* the manifest cache cannot be read or written */
#define WF_ERROR_GPU 5           /* the WebGPU library, adapter or a pipeline failed */
#define WF_ERROR_REJECTED 6      /* a kernel failed to tune or certify */
#define WF_ERROR_TIMEOUT 7       /* the GPU did not finish within the watchdog (a kernel hangs) */
#define WF_ERROR_DEVICE_LOST 8   /* the device is lost: destroy the context and open a new one */

typedef struct wf_context wf_context;
typedef struct wf_batch wf_batch;

/* A device buffer: a WGPUBuffer of the context's device, from `offset` bytes. */
typedef struct wf_column {
  void* buffer;
  uint64_t offset;
} wf_column;

/* A program's own WebGPU objects (WGPUInstance, WGPUAdapter, WGPUDevice), created through the
 * same webgpu.h library that `webgpu_library` names (NULL: as for wf_context_create). The
 * context takes a reference to each and never destroys the device. bounds_checks is 0 when the
 * device was created with Dawn's disable_robustness toggle, else 1. */
typedef struct wf_device_desc {
  const char* webgpu_library;
  void* instance;
  void* adapter;
  void* device;
  int bounds_checks;
} wf_device_desc;

/* "0.1.0". */
const char* wf_version(void);

/* Opens the default adapter (Vulkan) and the manifest cache in `cache_dir` (NULL: the default,
 * $WGSL_FORGE_CACHE, else $XDG_CACHE_HOME/wgsl-forge, else ~/.cache/wgsl-forge), with the
 * fleet's shared store $WGSL_FORGE_REMOTE (redis://HOST[:PORT][/DB]) behind it when that is set
 * (remote_store.hpp: a malformed URL fails, an unreachable server costs a warning). On failure
 * *out is a context that holds only the error message (read it, then destroy it), or NULL when
 * out itself is NULL. */
int wf_context_create(const char* cache_dir /* NULL: default */, wf_context** out);
/* The same on the program's own device. */
int wf_context_create_with_device(const wf_device_desc* device, const char* cache_dir,
                                  wf_context** out);
void wf_context_destroy(wf_context* context);
/* The last failure's message ("" when none). */
const char* wf_context_error(const wf_context* context);
/* The adapter's name and its topology hash (64 hex characters), which keys the cache. */
const char* wf_context_adapter_name(const wf_context* context);
const char* wf_context_topology_hash(const wf_context* context);

/* Compiles every builtin kernel with its tuned schedule (or the default one): a database's
 * start-up. */
int wf_load_all(wf_context* context);
/* Where a loaded kernel's schedules came from, one line per size bucket (a call uses the bucket
 * nearest to its size): "<bucket>: tuned for bucket ..." or why it runs another bucket's
 * schedule or the default one. */
int wf_kernel_origin(wf_context* context, const char* kernel_id, const char** origin);
/* Tunes every size bucket of every builtin kernel not yet tuned for this adapter (at most
 * `budget` candidates each) and stores the evidence in the cache; *tuned and *cached (either may
 * be NULL) count (kernel, bucket) entries. One that fails is WF_ERROR_REJECTED with its message;
 * the others are still tuned. */
int wf_auto_tune_all(wf_context* context, uint32_t budget, size_t* tuned, size_t* cached);
/* The same for one kernel's buckets; *tuned_now (may be NULL) is 1 when any was tuned now, 0 when
 * the cache already had them all. A context loads a kernel once: open a new context to run what was tuned. */
int wf_tune_kernel(wf_context* context, const char* kernel_id, uint32_t budget, int* tuned_now);

/* Batches: calls recorded into one command encoder. `wgpu_command_encoder` NULL: the context's
 * own, run by wf_batch_submit; otherwise the program's WGPUCommandEncoder, which the program
 * finishes and submits, keeping the batch until that work has completed. */
int wf_batch_begin(wf_context* context, void* wgpu_command_encoder, wf_batch** out);
int wf_batch_submit(wf_batch* batch); /* runs and waits; the batch can then only be destroyed */
/* Destroy every batch of a context before the context itself. */
void wf_batch_destroy(wf_batch* batch);

/* Primitives on device columns: `batch` NULL runs and waits; otherwise the call is recorded. */
int wf_sort_u32(wf_context* context, wf_batch* batch, wf_column keys, uint64_t n);
int wf_sort_pairs_u32(wf_context* context, wf_batch* batch, wf_column keys, wf_column values,
                      uint64_t n);
int wf_exclusive_scan_u32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                          wf_column y);
int wf_histogram_u32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                     uint32_t bins, wf_column counts);
int wf_gather_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t x_length,
                  wf_column idx, uint64_t n, wf_column y);
int wf_affine_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n, float a,
                  float b, wf_column y);
int wf_gemm_f32(wf_context* context, wf_batch* batch, wf_column a, wf_column b, wf_column c,
                uint32_t m, uint32_t n, uint32_t k);
/* Stable ascending sort of n u64 keys (2 n u32 words: key i is words 2i, the low half, and
 * 2i + 1, a little-endian uint64_t array) carrying u32 values, into sorted_keys and
 * sorted_values, which must not overlap the inputs. */
int wf_sort_pairs_u64(wf_context* context, wf_batch* batch, wf_column keys, wf_column values,
                      uint64_t n, wf_column sorted_keys, wf_column sorted_values);
/* sums[s] = x[offsets[s]] + ... + x[offsets[s + 1] - 1] for s < segments (0 when empty);
 * offsets holds segments + 1 u32 words, ascending, at most n. Device offsets are not checked (a
 * bad one gives wrong sums, never an access outside the columns); the _host call checks them. */
int wf_segmented_reduce_sum_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                                wf_column offsets, uint64_t segments, wf_column sums);
/* Results into result[0] (or count[0]); with batch NULL they are also readable by the host
 * through the program's own read-back. */
int wf_reduce_sum_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                      wf_column result);
int wf_reduce_min_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                      wf_column result);
int wf_reduce_max_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n,
                      wf_column result);
int wf_compact_f32(wf_context* context, wf_batch* batch, wf_column x, uint64_t n, float threshold,
                   wf_column out, wf_column count);

/* Inner equi-join on unique u32 build keys: for each probe row whose key is a build key, its
 * payload to pairs_probe and the build row's payload to pairs_build (room for probe_n each), in
 * no particular order. status (3 elements): [0] the pairs, [1] build rows whose key repeats an
 * earlier one (not 0: the build keys are not unique and the pairs are unspecified), [2] one
 * such key. */
int wf_hash_join_u32(wf_context* context, wf_batch* batch, wf_column build_keys,
                     wf_column build_payloads, uint64_t build_n, wf_column probe_keys,
                     wf_column probe_payloads, uint64_t probe_n, wf_column pairs_probe,
                     wf_column pairs_build, wf_column status);
/* GROUP BY key, SUM(value), COUNT(*): each distinct key of keys[0, n) once, with the f32 sum
 * and the count of its rows (room for max_groups each; 0: n), in no particular order. groups
 * (2 elements): [0] the distinct keys found, [1] rows that found no room; more distinct keys
 * than max_groups when [0] > max_groups or [1] != 0. */
int wf_group_by_sum_f32(wf_context* context, wf_batch* batch, wf_column keys, wf_column values,
                        uint64_t n, uint64_t max_groups, wf_column group_keys,
                        wf_column group_sums, wf_column group_counts, wf_column groups);

/* Host-memory conveniences for scripting languages: copy in, run, copy out. */
int wf_sort_u32_host(wf_context* context, uint32_t* keys, size_t n); /* ascending, in place */
int wf_sort_pairs_u32_host(wf_context* context, uint32_t* keys, uint32_t* values, size_t n);
int wf_reduce_sum_f32_host(wf_context* context, const float* x, size_t n, float* sum);
/* The elements of x greater than threshold, in order, to out (room for n); *kept of them. */
int wf_compact_f32_host(wf_context* context, const float* x, size_t n, float threshold,
                        float* out, size_t* kept);
/* Sorts keys (ascending, stable) with their values, in place in host memory. */
int wf_sort_pairs_u64_host(wf_context* context, uint64_t* keys, uint32_t* values, size_t n);
/* sums[s] for s < segments (room for segments); offsets (segments + 1 of them) must ascend and
 * stay within n, else WF_ERROR_INVALID_INPUT names the first that does not. */
int wf_segmented_reduce_sum_f32_host(wf_context* context, const float* x, size_t n,
                                     const uint32_t* offsets, size_t segments, float* sums);
/* counts[b] = how many x % bins == b (bins in 1..4096). */
int wf_histogram_u32_host(wf_context* context, const uint32_t* x, size_t n, uint32_t bins,
                          uint32_t* counts);

/* The join above on host arrays; *pairs of them written. A repeated build key is
 * WF_ERROR_INVALID_INPUT naming the key. */
int wf_hash_join_u32_host(wf_context* context, const uint32_t* build_keys,
                          const uint32_t* build_payloads, size_t build_n,
                          const uint32_t* probe_keys, const uint32_t* probe_payloads,
                          size_t probe_n, uint32_t* pairs_probe, uint32_t* pairs_build,
                          size_t* pairs);
/* The group-by above on host arrays (room for max_groups each, 0: n); *groups of them written.
 * More distinct keys than max_groups is WF_ERROR_INVALID_INPUT. */
int wf_group_by_sum_f32_host(wf_context* context, const uint32_t* keys, const float* values,
                             size_t n, size_t max_groups, uint32_t* group_keys, float* group_sums,
                             uint32_t* group_counts, size_t* groups);

#ifdef __cplusplus
}
#endif

#endif /* WGSL_FORGE_WGSL_FORGE_H */
