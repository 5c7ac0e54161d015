#pragma once
// The primitives a database calls on its own GPU buffers: one call per operation, each with the
// schedule tuned for this adapter's topology at the size bucket nearest to the call's size
// (kernels::nearest_buckets; with buckets 2^16, 2^20, 2^24 and 2^28, a sort of 300,000 keys takes
// the 2^20 bucket's schedule), or the default schedule, with the reason in origin(). The first
// call of a kernel (or load) compiles the pipelines of every bucket's schedule. A call either
// runs and waits, or records into a Batch, so that several calls (a filter, then a gather, then
// a sort) go to the GPU in one submission with no host round trip.
//
//   forge::Primitives primitives(device, ManifestCache(root));
//   auto keys = device.wrap_buffer(my_wgpu_buffer, "keys");        // or device.create_buffer
//   primitives.sort_u32(forge::U32Column{&*keys}, n);              // ascending, in place
//
// Buffers. A column is a storage buffer of the device from a byte offset (a multiple of the
// device's minStorageBufferOffsetAlignment, 256 on most GPUs). Each call checks that every column
// holds what the kernel needs and names the kernel, the buffer and both sizes when it does not;
// kernels::KernelDefinition::buffer_specs() gives each kernel's rule ("n rounded up to a multiple
// of 4 elements, at least 4" for the vectorised inputs and outputs). A call reads its input
// columns and writes its output columns, within the planned bytes only: the columns named x,
// idx, a, b are read; y, out, counts, c, result and count are written; the sorts read and write
// keys (and values) in place. Scratch buffers are the library's, allocated on first use and
// reused by every later call; no call fills or poisons a caller's column (certification does
// that, on its own buffers).
//
// Recording. In a Batch, a call's reads and writes happen when the batch's encoder is
// submitted, in the order the calls were recorded; the host sees no result until then, so
// results (a sum, a kept count) go to a column of the caller's instead of a return value. The
// Batch holds the uniforms and scratch its commands use: keep it until the submitted work has
// finished. Two recorded calls may share scratch: WebGPU orders the passes of a submission.
//
// Threads: a Primitives object is used by one thread at a time (it keeps per-kernel state);
// independent objects on one device may be used from different threads only if the program
// serialises its use of the device's queue, as webgpu.h requires.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/gpu.hpp"
#include "wgsl_forge/kernel_runner.hpp"

namespace wgsl_forge::forge {

template <typename T>
struct Column {
  static_assert(std::is_same_v<T, std::uint32_t> || std::is_same_v<T, float>,
                "columns hold u32 or f32 elements");
  const gpu::Buffer* buffer = nullptr;
  std::uint64_t offset = 0;  // bytes
};
using U32Column = Column<std::uint32_t>;
using F32Column = Column<float>;

class Primitives;

// Calls recorded into one command encoder: the device's own (Primitives::begin_batch; submit()
// runs it and waits) or the program's (Primitives::record_into; the program submits it).
class Batch {
 public:
  Batch(Batch&&) noexcept = default;
  Batch& operator=(Batch&&) noexcept = default;
  ~Batch() = default;

  // Submits the device's own encoder and waits for the GPU; an error for a program's encoder.
  Status submit_and_wait();
  const gpu::CommandEncoder& encoder() const { return encoder_; }

 private:
  friend class Primitives;
  Batch(gpu::Device& device, gpu::CommandEncoder encoder)
      : device_(&device), encoder_(std::move(encoder)) {}

  gpu::Device* device_;
  gpu::CommandEncoder encoder_;
  std::vector<std::shared_ptr<const BoundPlan>> plans_;  // what the recorded commands use
};

class Primitives {
 public:
  Primitives(gpu::Device& device, ManifestCache cache);
  ~Primitives();
  Primitives(const Primitives&) = delete;
  Primitives& operator=(const Primitives&) = delete;

  gpu::Device& device() { return *device_; }

  // Compiles `kernel_id` with its tuned schedules now, rather than at its first call: what a
  // database does at start-up. Returns where the schedules came from (see origin()).
  Result<std::string> load(std::string_view kernel_id);
  // Every builtin kernel not loaded yet, with all their pipelines compiled at once; the first
  // kernel that fails gives the error, and then none of them is kept.
  Status load_all();
  // For a loaded kernel, one line per size bucket: "<bucket>: tuned for bucket ...", or why
  // that bucket uses another bucket's schedule or the default; an error for another kernel.
  Result<std::string> origin(std::string_view kernel_id) const;

  Result<Batch> begin_batch();
  // Records into the program's WGPUCommandEncoder, which the program finishes and submits.
  Batch record_into(void* wgpu_command_encoder);

  // Each operation runs and waits when `batch` is null, and is recorded into it otherwise.

  // Ascending sort of keys[0, n), in place (the kernel's last round writes back into keys).
  Status sort_u32(U32Column keys, std::uint64_t n, Batch* batch = nullptr);
  // Stable ascending sort of keys[0, n) carrying values[0, n) along, in place.
  Status sort_pairs_u32(U32Column keys, U32Column values, std::uint64_t n, Batch* batch = nullptr);
  // Stable ascending sort of n u64 keys carrying values, out of place: keys and sorted_keys hold
  // 2 n u32 words, key i in words 2i (low) and 2i + 1 (high), a little-endian u64 array. The
  // outputs must not overlap the inputs (an error says which).
  Status sort_pairs_u64(U32Column keys, U32Column values, std::uint64_t n, U32Column sorted_keys,
                        U32Column sorted_values, Batch* batch = nullptr);
  // sums[s] = x[offsets[s]] + ... + x[offsets[s + 1] - 1] for s < segments (0 for an empty
  // segment); offsets holds segments + 1 words, ascending, at most n. Offsets on the device are
  // not checked here (reading them back would cost a round trip): a bad one gives wrong sums,
  // never an access outside the columns. The overload with host offsets checks them
  // (kernels::check_segment_offsets names the first bad one), copies them to the device, runs
  // and waits.
  Status segmented_sum_f32(F32Column x, std::uint64_t n, U32Column offsets, std::uint64_t segments,
                           F32Column sums, Batch* batch = nullptr);
  Status segmented_sum_f32(F32Column x, std::uint64_t n, std::span<const std::uint32_t> offsets,
                           F32Column sums);
  // y[i] = sum of x[0, i); y needs n rounded up to 4 elements.
  Status exclusive_scan_u32(U32Column x, std::uint64_t n, U32Column y, Batch* batch = nullptr);
  // counts[b] = how many of x[0, n) have x % bins == b (bins in 1..4096).
  Status histogram_u32(U32Column x, std::uint64_t n, std::uint32_t bins, U32Column counts,
                       Batch* batch = nullptr);
  // y[i] = x[idx[i]] for i < n; an index at or past x_length gives +0.0.
  Status gather_f32(F32Column x, std::uint64_t x_length, U32Column idx, std::uint64_t n,
                    F32Column y, Batch* batch = nullptr);
  // C (m x n) = A (m x k) B (k x n), row-major.
  Status gemm_f32(F32Column a, F32Column b, F32Column c, std::uint32_t m, std::uint32_t n,
                  std::uint32_t k, Batch* batch = nullptr);
  // y[i] = a x[i] + b for i < n.
  Status affine_f32(F32Column x, std::uint64_t n, float a, float b, F32Column y,
                    Batch* batch = nullptr);
  // The elements of x[0, n) greater than threshold, in order, to out; returns how many.
  Result<std::uint64_t> compact_f32(F32Column x, std::uint64_t n, float threshold, F32Column out);
  Status compact_f32(Batch& batch, F32Column x, std::uint64_t n, float threshold, F32Column out,
                     U32Column count);
  // Reductions of x[0, n): the value, or (recorded) into result[0]. min/max of n = 0 is an error.
  Result<float> sum_f32(F32Column x, std::uint64_t n);
  Status sum_f32(Batch& batch, F32Column x, std::uint64_t n, F32Column result);
  Result<float> min_f32(F32Column x, std::uint64_t n);
  Status min_f32(Batch& batch, F32Column x, std::uint64_t n, F32Column result);
  Result<float> max_f32(F32Column x, std::uint64_t n);
  Status max_f32(Batch& batch, F32Column x, std::uint64_t n, F32Column result);
  Result<std::uint32_t> sum_u32(U32Column x, std::uint64_t n);  // wrapping
  Status sum_u32(Batch& batch, U32Column x, std::uint64_t n, U32Column result);

  // Inner equi-join of a build side (build_n keys, unique, with payloads) and a probe side
  // (probe_n keys with payloads): for each probe row whose key is a build key, its payload to
  // pairs_probe and the build row's payload to pairs_build (room for probe_n each), in no
  // particular order; returns the number of pairs. A build key that occurs twice is an error
  // naming the key.
  Result<std::uint64_t> hash_join_u32(U32Column build_keys, U32Column build_payloads,
                                      std::uint64_t build_n, U32Column probe_keys,
                                      U32Column probe_payloads, std::uint64_t probe_n,
                                      U32Column pairs_probe, U32Column pairs_build);
  // Recorded: status[0] = the pairs, status[1] = build rows whose key repeats an earlier one
  // (not 0: the pairs are unspecified), status[2] = one such key.
  Status hash_join_u32(Batch& batch, U32Column build_keys, U32Column build_payloads,
                       std::uint64_t build_n, U32Column probe_keys, U32Column probe_payloads,
                       std::uint64_t probe_n, U32Column pairs_probe, U32Column pairs_build,
                       U32Column status);
  // GROUP BY keys[i], SUM(values[i]), COUNT(*) over rows [0, n): each distinct key once in
  // group_keys, with its sum and row count (room for max_groups each; max_groups 0: n), in no
  // particular order; returns the number of groups. More than max_groups distinct keys is an
  // error. Sums are exact sums of the values rounded to a fixed point chosen from the largest
  // |value|, rounded once to f32: the same bits in every run (the error bound and NaN/infinity
  // rules are in src/kernels/group_by_sum_f32.cpp).
  Result<std::uint64_t> group_by_sum_f32(U32Column keys, F32Column values, std::uint64_t n,
                                         std::uint64_t max_groups, U32Column group_keys,
                                         F32Column group_sums, U32Column group_counts);
  // Recorded: groups[0] = the distinct keys found, groups[1] = rows that found no room; more
  // than max_groups when groups[0] > max_groups or groups[1] != 0.
  Status group_by_sum_f32(Batch& batch, U32Column keys, F32Column values, std::uint64_t n,
                          std::uint64_t max_groups, U32Column group_keys, F32Column group_sums,
                          U32Column group_counts, U32Column groups);

 private:
  struct LoadedSchedule;
  struct LoadedKernel;
  using Buffers = std::map<std::string, BufferSlice>;

  Result<LoadedKernel*> loaded(std::string_view kernel_id);
  // The bound plan of a schedule for `problem` on `buffers`, bound once and reused.
  Result<std::shared_ptr<const BoundPlan>> bound(LoadedSchedule& kernel,
                                                 const kernels::Problem& problem,
                                                 const Buffers& buffers);
  // Binds, then runs and waits (null batch) or records.
  Status dispatch(std::string_view kernel_id, const kernels::Problem& problem,
                  const Buffers& buffers, Batch* batch);
  // A reduction of x[0, n) by `kernel_id`, run and waited for, its f32 result read back.
  Result<float> reduce_f32(std::string_view kernel_id, F32Column x, std::uint64_t n);
  // Runs and waits, then reads one 4-byte word of output `name`.
  Result<std::uint32_t> dispatch_and_read(std::string_view kernel_id,
                                          const kernels::Problem& problem, Buffers buffers,
                                          const std::string& name);
  // Runs and waits, then reads the first `words` 4-byte words of output `name`.
  Result<std::vector<std::uint32_t>> dispatch_and_read_words(std::string_view kernel_id,
                                                             const kernels::Problem& problem,
                                                             Buffers buffers,
                                                             const std::string& name,
                                                             std::size_t words);

  gpu::Device* device_;
  KernelLibrary library_;
  std::map<std::string, std::unique_ptr<LoadedKernel>, std::less<>> kernels_;
};

}  // namespace wgsl_forge::forge
