// The typed primitives: each call names its kernel's buffers for the caller, binds them once per
// (problem, buffers) and reuses that binding on every later call with the same arguments.

#include "wgsl_forge/primitives.hpp"
#include "util/try.hpp"

#include <algorithm>
#include <cstring>
#include <list>
#include <sstream>

namespace wgsl_forge::forge {

namespace {

// Bound plans kept per kernel: a database calls each primitive with a few shapes again and
// again; beyond this the least recently used binding is dropped (a Batch keeps what it uses).
constexpr std::size_t kBoundPlansPerKernel = 16;

template <typename T>
BufferSlice slice(Column<T> column) {
  constexpr kernels::ElementType kType =
      std::is_same_v<T, float> ? kernels::ElementType::kF32 : kernels::ElementType::kU32;
  return BufferSlice(column.buffer, column.offset, kType);
}

kernels::Problem elements(std::uint64_t n) {
  kernels::Problem problem;
  problem.elements = n;
  return problem;
}

// What identifies a binding: the problem and each buffer's handle and offset.
std::string binding_key(const kernels::Problem& problem,
                        const std::map<std::string, BufferSlice>& buffers) {
  std::ostringstream key;
  key << problem.to_string() << ' ' << problem.bins << ' ' << problem.a << ' ' << problem.b << ' '
      << problem.threshold;
  for (const auto& [name, slice] : buffers) {
    key << ' ' << name << '@' << (slice.buffer ? slice.buffer->handle() : nullptr) << '+'
        << slice.offset;
  }
  return key.str();
}

}  // namespace

// One schedule's pipelines, with its scratch and bindings (buckets that chose the same schedule
// share them).
struct Primitives::LoadedSchedule {
  std::shared_ptr<KernelLibrary::ReadyKernel> ready;
  ScratchPool scratch;
  // Most recently used first.
  std::list<std::pair<std::string, std::shared_ptr<const BoundPlan>>> plans;
};

// A kernel at every size bucket: a call takes the schedule of the bucket nearest to its size.
struct Primitives::LoadedKernel {
  std::vector<kernels::SizeBucket> buckets;
  std::vector<LoadedSchedule*> schedule_of_bucket;
  std::vector<std::unique_ptr<LoadedSchedule>> schedules;
  std::string origins;  // KernelLibrary::BucketedKernel::origins()

  explicit LoadedKernel(KernelLibrary::BucketedKernel loaded) : origins(loaded.origins()) {
    buckets = std::move(loaded.buckets);
    for (std::shared_ptr<KernelLibrary::ReadyKernel>& ready : loaded.ready) {
      auto same = std::find_if(schedules.begin(), schedules.end(),
                               [&](const auto& one) { return one->ready == ready; });
      if (same == schedules.end()) {
        schedules.push_back(std::make_unique<LoadedSchedule>());
        schedules.back()->ready = std::move(ready);
        same = schedules.end() - 1;
      }
      schedule_of_bucket.push_back(same->get());
    }
  }

  LoadedSchedule& for_problem(const kernels::Problem& problem) {
    return *schedule_of_bucket[kernels::nearest_bucket(buckets, problem)];
  }
};

Status Batch::submit_and_wait() {
  if (encoder_.borrowed()) {
    return Error(ErrorKind::kInvalidInput,
                 "This batch records into the program's command encoder; the program submits it.");
  }
  Status done = device_->submit_and_wait(std::move(encoder_), "a batch of primitives");
  plans_.clear();
  return done;
}

Primitives::Primitives(gpu::Device& device, ManifestCache cache)
    : device_(&device), library_(device, std::move(cache)) {}

Primitives::~Primitives() = default;

Result<Primitives::LoadedKernel*> Primitives::loaded(std::string_view kernel_id) {
  if (auto it = kernels_.find(kernel_id); it != kernels_.end()) return it->second.get();
  WF_TRY_ASSIGN(std::vector<KernelLibrary::BucketedKernel> ready,
                library_.load_bucketed(std::span(&kernel_id, 1)));
  auto kernel = std::make_unique<LoadedKernel>(std::move(ready.front()));
  LoadedKernel* raw = kernel.get();
  kernels_.emplace(std::string(kernel_id), std::move(kernel));
  return raw;
}

Result<std::string> Primitives::load(std::string_view kernel_id) {
  WF_TRY_ASSIGN(LoadedKernel * kernel, loaded(kernel_id));
  return kernel->origins;
}

Status Primitives::load_all() {
  std::vector<std::string_view> not_loaded;
  for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels()) {
    if (!kernels_.contains(kernel->id())) not_loaded.push_back(kernel->id());
  }
  if (not_loaded.empty()) return Ok{};
  WF_TRY_ASSIGN(std::vector<KernelLibrary::BucketedKernel> ready,
                library_.load_bucketed(not_loaded));
  for (KernelLibrary::BucketedKernel& one : ready) {
    std::string kernel_id(one.definition->id());
    kernels_.emplace(std::move(kernel_id), std::make_unique<LoadedKernel>(std::move(one)));
  }
  return Ok{};
}

Result<std::string> Primitives::origin(std::string_view kernel_id) const {
  auto it = kernels_.find(kernel_id);
  if (it == kernels_.end()) {
    return Error(ErrorKind::kInvalidInput,
                 "Kernel " + std::string(kernel_id) + " is not loaded (Primitives::load).");
  }
  return it->second->origins;
}

Result<Batch> Primitives::begin_batch() {
  WF_TRY_ASSIGN(gpu::CommandEncoder encoder, device_->create_command_encoder());
  return Batch(*device_, std::move(encoder));
}

Batch Primitives::record_into(void* wgpu_command_encoder) {
  return Batch(*device_, device_->borrow_command_encoder(wgpu_command_encoder));
}

Result<std::shared_ptr<const BoundPlan>> Primitives::bound(LoadedSchedule& kernel,
                                                           const kernels::Problem& problem,
                                                           const Buffers& buffers) {
  const std::string key = binding_key(problem, buffers);
  for (auto it = kernel.plans.begin(); it != kernel.plans.end(); ++it) {
    if (it->first == key) {
      kernel.plans.splice(kernel.plans.begin(), kernel.plans, it);
      return kernel.plans.front().second;
    }
  }
  WF_TRY_ASSIGN(std::unique_ptr<BoundPlan> fresh,
                kernel.ready->prepared.bind(problem, buffers, &kernel.scratch));
  kernel.plans.emplace_front(key, std::shared_ptr<const BoundPlan>(std::move(fresh)));
  if (kernel.plans.size() > kBoundPlansPerKernel) kernel.plans.pop_back();
  return kernel.plans.front().second;
}

Status Primitives::dispatch(std::string_view kernel_id, const kernels::Problem& problem,
                            const Buffers& buffers, Batch* batch) {
  WF_TRY_ASSIGN(LoadedKernel * kernel, loaded(kernel_id));
  LoadedSchedule& schedule = kernel->for_problem(problem);
  WF_TRY_ASSIGN(std::shared_ptr<const BoundPlan> plan, bound(schedule, problem, buffers));
  PreparedKernel& prepared = schedule.ready->prepared;
  if (batch == nullptr) return prepared.execute(*plan);
  WF_TRY(prepared.record(*plan, batch->encoder_));
  batch->plans_.push_back(plan);
  return Ok{};
}

Result<std::uint32_t> Primitives::dispatch_and_read(std::string_view kernel_id,
                                                    const kernels::Problem& problem,
                                                    Buffers buffers, const std::string& name) {
  WF_TRY_ASSIGN(std::vector<std::uint32_t> words,
                dispatch_and_read_words(kernel_id, problem, std::move(buffers), name, 1));
  return words.front();
}

Result<std::vector<std::uint32_t>> Primitives::dispatch_and_read_words(
    std::string_view kernel_id, const kernels::Problem& problem, Buffers buffers,
    const std::string& name, std::size_t words) {
  WF_TRY_ASSIGN(LoadedKernel * kernel, loaded(kernel_id));
  LoadedSchedule& schedule = kernel->for_problem(problem);
  WF_TRY_ASSIGN(std::shared_ptr<const BoundPlan> plan, bound(schedule, problem, buffers));
  WF_TRY(schedule.ready->prepared.execute(*plan));
  WF_TRY_ASSIGN(std::vector<std::byte> bytes,
                device_->read_buffer(plan->buffer(name), plan->offset(name), 4 * words));
  std::vector<std::uint32_t> values(words);
  std::memcpy(values.data(), bytes.data(), 4 * words);
  return values;
}

Status Primitives::sort_u32(U32Column keys, std::uint64_t n, Batch* batch) {
  // The plan reads "keys" only in its first round and writes "sorted" in its last, never both
  // in one pass, so one column can be both.
  return dispatch("radix_sort_u32", elements(n), {{"keys", slice(keys)}, {"sorted", slice(keys)}},
                  batch);
}

Status Primitives::sort_pairs_u32(U32Column keys, U32Column values, std::uint64_t n, Batch* batch) {
  return dispatch("radix_sort_pairs_u32", elements(n),
                  {{"keys", slice(keys)},
                   {"sorted", slice(keys)},
                   {"values", slice(values)},
                   {"sorted_values", slice(values)}},
                  batch);
}

namespace {

// An error when column `b` (b_bytes from its offset) shares bytes with column `a` (a_bytes).
Status check_apart(const char* kernel_id, const char* a_name, U32Column a, std::uint64_t a_bytes,
                   const char* b_name, U32Column b, std::uint64_t b_bytes) {
  if (a.buffer == nullptr || b.buffer == nullptr || a.buffer->handle() != b.buffer->handle() ||
      a_bytes == 0 || b_bytes == 0 || a.offset + a_bytes <= b.offset ||
      b.offset + b_bytes <= a.offset) {
    return Ok{};
  }
  return Error(ErrorKind::kInvalidInput,
               std::string(kernel_id) + " sorts out of place: column " + b_name + " (offset " +
                   std::to_string(b.offset) + ", " + std::to_string(b_bytes) +
                   " bytes) overlaps column " + a_name + " (offset " + std::to_string(a.offset) +
                   ", " + std::to_string(a_bytes) + " bytes) of the same buffer.");
}

}  // namespace

Status Primitives::sort_pairs_u64(U32Column keys, U32Column values, std::uint64_t n,
                                  U32Column sorted_keys, U32Column sorted_values, Batch* batch) {
  constexpr const char* kKernel = "radix_sort_pairs_u64";
  WF_TRY(check_apart(kKernel, "keys", keys, 8 * n, "sorted_keys", sorted_keys, 8 * n));
  WF_TRY(check_apart(kKernel, "keys", keys, 8 * n, "sorted_values", sorted_values, 4 * n));
  WF_TRY(check_apart(kKernel, "values", values, 4 * n, "sorted_keys", sorted_keys, 8 * n));
  WF_TRY(check_apart(kKernel, "values", values, 4 * n, "sorted_values", sorted_values, 4 * n));
  return dispatch(kKernel, elements(n),
                  {{"keys", slice(keys)},
                   {"values", slice(values)},
                   {"sorted", slice(sorted_keys)},
                   {"sorted_values", slice(sorted_values)}},
                  batch);
}

Status Primitives::segmented_sum_f32(F32Column x, std::uint64_t n, U32Column offsets,
                                     std::uint64_t segments, F32Column sums, Batch* batch) {
  kernels::Problem problem = elements(n);
  problem.segments = segments;
  return dispatch("segmented_reduce_sum_f32", problem,
                  {{"x", slice(x)}, {"offsets", slice(offsets)}, {"sums", slice(sums)}}, batch);
}

Status Primitives::segmented_sum_f32(F32Column x, std::uint64_t n,
                                     std::span<const std::uint32_t> offsets, F32Column sums) {
  WF_TRY_CONTEXT(kernels::check_segment_offsets(offsets, n), "calling segmented_reduce_sum_f32");
  WF_TRY_ASSIGN(
      gpu::Buffer device_offsets,
      device_->create_buffer(std::max<std::uint64_t>(16, (offsets.size_bytes() + 15) / 16 * 16),
                             gpu::BufferUsage::kStorage, "segment offsets"));
  WF_TRY(device_->write_buffer(device_offsets, 0, std::as_bytes(offsets)));
  return segmented_sum_f32(x, n, U32Column{&device_offsets, 0}, offsets.size() - 1, sums);
}

Status Primitives::exclusive_scan_u32(U32Column x, std::uint64_t n, U32Column y, Batch* batch) {
  return dispatch("scan_exclusive_u32", elements(n), {{"x", slice(x)}, {"y", slice(y)}}, batch);
}

Status Primitives::histogram_u32(U32Column x, std::uint64_t n, std::uint32_t bins, U32Column counts,
                                 Batch* batch) {
  kernels::Problem problem = elements(n);
  problem.bins = bins;
  return dispatch("histogram_u32", problem, {{"x", slice(x)}, {"counts", slice(counts)}}, batch);
}

Status Primitives::gather_f32(F32Column x, std::uint64_t x_length, U32Column idx, std::uint64_t n,
                              F32Column y, Batch* batch) {
  kernels::Problem problem = elements(n);
  problem.source_elements = std::max<std::uint64_t>(1, x_length);
  return dispatch("gather_f32", problem, {{"x", slice(x)}, {"idx", slice(idx)}, {"y", slice(y)}},
                  batch);
}

Status Primitives::gemm_f32(F32Column a, F32Column b, F32Column c, std::uint32_t m, std::uint32_t n,
                            std::uint32_t k, Batch* batch) {
  kernels::Problem problem;
  problem.m = m;
  problem.n = n;
  problem.k = k;
  return dispatch("gemm_f32", problem, {{"a", slice(a)}, {"b", slice(b)}, {"c", slice(c)}}, batch);
}

Status Primitives::affine_f32(F32Column x, std::uint64_t n, float a, float b, F32Column y,
                              Batch* batch) {
  kernels::Problem problem = elements(n);
  problem.a = a;
  problem.b = b;
  return dispatch("affine_f32", problem, {{"x", slice(x)}, {"y", slice(y)}}, batch);
}

Result<std::uint64_t> Primitives::compact_f32(F32Column x, std::uint64_t n, float threshold,
                                              F32Column out) {
  kernels::Problem problem = elements(n);
  problem.threshold = threshold;
  WF_TRY_ASSIGN(
      std::uint32_t count,
      dispatch_and_read("compact_f32", problem, {{"x", slice(x)}, {"y", slice(out)}}, "count"));
  return std::uint64_t{count};
}

Status Primitives::compact_f32(Batch& batch, F32Column x, std::uint64_t n, float threshold,
                               F32Column out, U32Column count) {
  kernels::Problem problem = elements(n);
  problem.threshold = threshold;
  return dispatch("compact_f32", problem,
                  {{"x", slice(x)}, {"y", slice(out)}, {"count", slice(count)}}, &batch);
}

namespace {

float as_float(std::uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, 4);
  return value;
}

}  // namespace

Result<float> Primitives::reduce_f32(std::string_view kernel_id, F32Column x, std::uint64_t n) {
  WF_TRY_ASSIGN(std::uint32_t bits,
                dispatch_and_read(kernel_id, elements(n), {{"x", slice(x)}}, "result"));
  return as_float(bits);
}

Result<float> Primitives::sum_f32(F32Column x, std::uint64_t n) {
  return reduce_f32("reduce_sum_f32", x, n);
}

Status Primitives::sum_f32(Batch& batch, F32Column x, std::uint64_t n, F32Column result) {
  return dispatch("reduce_sum_f32", elements(n), {{"x", slice(x)}, {"result", slice(result)}},
                  &batch);
}

Result<float> Primitives::min_f32(F32Column x, std::uint64_t n) {
  return reduce_f32("reduce_min_f32", x, n);
}

Status Primitives::min_f32(Batch& batch, F32Column x, std::uint64_t n, F32Column result) {
  return dispatch("reduce_min_f32", elements(n), {{"x", slice(x)}, {"result", slice(result)}},
                  &batch);
}

Result<float> Primitives::max_f32(F32Column x, std::uint64_t n) {
  return reduce_f32("reduce_max_f32", x, n);
}

Status Primitives::max_f32(Batch& batch, F32Column x, std::uint64_t n, F32Column result) {
  return dispatch("reduce_max_f32", elements(n), {{"x", slice(x)}, {"result", slice(result)}},
                  &batch);
}

Result<std::uint32_t> Primitives::sum_u32(U32Column x, std::uint64_t n) {
  return dispatch_and_read("reduce_sum_u32", elements(n), {{"x", slice(x)}}, "result");
}

Status Primitives::sum_u32(Batch& batch, U32Column x, std::uint64_t n, U32Column result) {
  return dispatch("reduce_sum_u32", elements(n), {{"x", slice(x)}, {"result", slice(result)}},
                  &batch);
}

// --- Joins and aggregation --------------------------------------------------------------

namespace {

kernels::Problem join_problem(std::uint64_t build_n, std::uint64_t probe_n) {
  kernels::Problem problem = elements(probe_n);
  problem.build_elements = build_n;
  return problem;
}

kernels::Problem group_problem(std::uint64_t n, std::uint64_t max_groups) {
  kernels::Problem problem = elements(n);
  problem.max_groups = max_groups;
  return problem;
}

}  // namespace

Result<std::uint64_t> Primitives::hash_join_u32(U32Column build_keys, U32Column build_payloads,
                                                std::uint64_t build_n, U32Column probe_keys,
                                                U32Column probe_payloads, std::uint64_t probe_n,
                                                U32Column pairs_probe, U32Column pairs_build) {
  WF_TRY_ASSIGN(std::vector<std::uint32_t> status,
                dispatch_and_read_words("hash_join_u32", join_problem(build_n, probe_n),
                                        {{"build_keys", slice(build_keys)},
                                         {"build_payloads", slice(build_payloads)},
                                         {"probe_keys", slice(probe_keys)},
                                         {"probe_payloads", slice(probe_payloads)},
                                         {"pairs_probe", slice(pairs_probe)},
                                         {"pairs_build", slice(pairs_build)}},
                                        "status", 3));
  if (status[1] != 0) {
    return Error(ErrorKind::kInvalidInput,
                 "Build key " + std::to_string(status[2]) +
                     " occurs more than once on the build side of hash_join_u32 (repeated "
                     "build rows: " +
                     std::to_string(status[1]) + "); build keys must be unique.");
  }
  return std::uint64_t{status[0]};
}

Status Primitives::hash_join_u32(Batch& batch, U32Column build_keys, U32Column build_payloads,
                                 std::uint64_t build_n, U32Column probe_keys,
                                 U32Column probe_payloads, std::uint64_t probe_n,
                                 U32Column pairs_probe, U32Column pairs_build, U32Column status) {
  return dispatch("hash_join_u32", join_problem(build_n, probe_n),
                  {{"build_keys", slice(build_keys)},
                   {"build_payloads", slice(build_payloads)},
                   {"probe_keys", slice(probe_keys)},
                   {"probe_payloads", slice(probe_payloads)},
                   {"pairs_probe", slice(pairs_probe)},
                   {"pairs_build", slice(pairs_build)},
                   {"status", slice(status)}},
                  &batch);
}

Result<std::uint64_t> Primitives::group_by_sum_f32(U32Column keys, F32Column values,
                                                   std::uint64_t n, std::uint64_t max_groups,
                                                   U32Column group_keys, F32Column group_sums,
                                                   U32Column group_counts) {
  WF_TRY_ASSIGN(std::vector<std::uint32_t> groups,
                dispatch_and_read_words("group_by_sum_f32", group_problem(n, max_groups),
                                        {{"keys", slice(keys)},
                                         {"values", slice(values)},
                                         {"group_keys", slice(group_keys)},
                                         {"group_sums", slice(group_sums)},
                                         {"group_counts", slice(group_counts)}},
                                        "groups", 2));
  const std::uint64_t allowed = max_groups != 0 ? max_groups : std::max<std::uint64_t>(1, n);
  if (groups[0] > allowed || groups[1] != 0) {
    return Error(ErrorKind::kInvalidInput,
                 "The keys of group_by_sum_f32 hold more distinct values than max_groups (" +
                     std::to_string(allowed) + "): " + std::to_string(groups[0]) + " found" +
                     (groups[1] != 0 ? ", and " + std::to_string(groups[1]) +
                                           " rows found no room in the table"
                                     : std::string()) +
                     ".");
  }
  return std::uint64_t{groups[0]};
}

Status Primitives::group_by_sum_f32(Batch& batch, U32Column keys, F32Column values, std::uint64_t n,
                                    std::uint64_t max_groups, U32Column group_keys,
                                    F32Column group_sums, U32Column group_counts,
                                    U32Column groups) {
  return dispatch("group_by_sum_f32", group_problem(n, max_groups),
                  {{"keys", slice(keys)},
                   {"values", slice(values)},
                   {"group_keys", slice(group_keys)},
                   {"group_sums", slice(group_sums)},
                   {"group_counts", slice(group_counts)},
                   {"groups", slice(groups)}},
                  &batch);
}

}  // namespace wgsl_forge::forge
