#pragma once
// The builtin kernel catalog. Each kernel is one unit (one file in src/kernels): its knobs and
// their legal values, the WGSL it generates for a schedule, the dispatch plan for a problem, the
// inputs that exercise it, and the CPU oracle with the tolerance that judges it.
//
// Conventions shared by every kernel:
//   - one WGSL module per (kernel, schedule), all bindings in group 0; binding 0 is the pass's
//     own uniform `params` block (u32 words, f32 arguments bit-cast), filled from PassPlan::params;
//   - grids are linear workgroup counts; the runtime lays large ones out in two dimensions and
//     every kernel recovers its linear workgroup index as id.x + id.y * num_workgroups.x;
//   - no kernel waits on another workgroup without bound (WGSL promises no forward progress
//     between them): what crosses workgroups is split into passes of one submission, or, in the
//     chained scan, a workgroup polls its predecessors a bounded number of times and then
//     computes what it needs from the input itself.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wgsl_forge/error.hpp"
#include "wgsl_forge/model.hpp"

namespace wgsl_forge::kernels {

// What an adapter allows, as far as kernel schedules care. The forge fills it from the device.
struct DeviceCapabilities {
  std::uint32_t max_invocations_per_workgroup = 256;
  std::uint32_t max_workgroup_size_x = 256;
  std::uint32_t max_workgroup_storage_size = 16384;
  std::uint32_t max_workgroups_per_dimension = 65535;
  std::uint64_t max_storage_binding_size = 134217728;
  bool subgroups = false;
  std::uint32_t subgroup_min_size = 0;  // the smallest subgroup the adapter runs; 0: unknown
};

struct KnobSpec {
  std::string name;
  std::string description;
  std::vector<std::int64_t> values;  // legal values, ascending
  std::int64_t default_value = 0;
};

// The value of the knob `spec` in `schedule`. Each kernel declares its knobs once, as KnobSpec
// constants that both knobs() lists and its code reads through, and check_schedule() admits only
// schedules holding every declared knob; so a knob absent at read time is a bug in a kernel file
// (it reads a knob it does not declare), and this throws std::logic_error naming the knob rather
// than reading 0. KernelCatalogTest generates and plans every schedule of every space to keep it
// so.
std::uint32_t knob(const Schedule& schedule, const KnobSpec& spec);

// The size of a problem and its run-time arguments; each kernel reads the fields it needs.
struct Problem {
  std::uint64_t elements = 0;  // n
  std::uint32_t bins = 256;    // histogram_u32
  float a = 2.0f;              // affine_f32: y = a x + b
  float b = 1.0f;
  float threshold = 0.0f;  // compact_f32 keeps x > threshold
  // gather_f32: the length of the source x; 0: n, as in the certification cases.
  std::uint64_t source_elements = 0;
  std::uint32_t m = 0;  // gemm_f32: C (m x n) = A (m x k) B (k x n)
  std::uint32_t n = 0;
  std::uint32_t k = 0;
  // hash_join_u32: the build side's rows (n is the probe side's).
  std::uint64_t build_elements = 0;
  // group_by_sum_f32: the most distinct keys a call may find, which sizes its table and outputs
  // (0: n); more is an error the call reports.
  std::uint64_t max_groups = 0;
  // segmented_reduce_sum_f32: the number of segments (its offsets hold segments + 1 words).
  std::uint64_t segments = 0;
  // The five-pass radix sorts: counts per block of their counts' reduce-then-scan, and blocks
  // per step of its spine (0: the most one workgroup takes, workgroup_size * 4, as every call
  // uses). Certification sets it small, so that a few tiles' counts take the spine through
  // several steps, which the full width reaches only past millions of keys.
  std::uint32_t counts_scan_width = 0;

  std::string to_string() const;
};

// One size a kernel is tuned at. A database runs each primitive at many sizes, and the fastest
// schedule at 2^16 elements is often not the one at 2^28, so each kernel is tuned at a few sizes
// that span what a database runs (KernelDefinition::size_buckets), and a call of any size uses
// the schedule of the nearest bucket (nearest_buckets).
struct SizeBucket {
  // Names the bucket in cache keys, `--sizes` and reports: "2^20" (elements), "1024^3" (GEMM),
  // "2^28x32" (segmented_reduce_sum_f32: 2^28 values in segments of 32), "2^28g2^20"
  // (group_by_sum_f32: 2^28 rows of at most 2^20 distinct keys).
  std::string label;
  Problem problem;
  // The kernel's main tuning size (tuning_problem): its entry stays at the seed's
  // topology_key(topology_hash, kernel_id); the other buckets' keys are derived from it
  // (ManifestCache::bucket_key).
  bool main = false;

  // The label the bucket's cache entry is keyed by: empty for the main bucket, whose entry is at
  // the seed's topology key (ManifestCache::bucket_key).
  std::string_view key_label() const { return main ? std::string_view() : label; }
};

// What a bucket is chosen by: the element count, or m * n * k for GEMM (0 for an empty problem).
std::uint64_t bucket_measure(const Problem& problem);

// The buckets' indices, nearest to `problem` first: by the distance of log2(bucket_measure)
// between the problem and each bucket, plus that of log2 of the average segment length
// (elements / segments; no term for problems without segments), plus, for a bucket that states
// max_groups (group_by_sum_f32), that of log2 of the bound on distinct keys (the problem's
// max_groups, or its element count when 0), and between equally near buckets the larger first
// (measure, then segment length, then max_groups). So a call of n elements uses the
// bucket tuned at the size closest to n by ratio (with buckets 2^16, 2^20, 2^24, 2^28: n < 2^18
// takes 2^16, 2^18 <= n < 2^22 takes 2^20, ...), a segmented call the bucket whose segments are
// closest to its average length by ratio, and when that bucket has no usable tuning, the next
// one in this order. An empty problem counts as one element.
std::vector<std::size_t> nearest_buckets(const std::vector<SizeBucket>& buckets,
                                         const Problem& problem);
// The first of nearest_buckets (`buckets` must not be empty), without allocating: what a typed
// call does on every call.
std::size_t nearest_bucket(const std::vector<SizeBucket>& buckets, const Problem& problem);

enum class BufferRole { kInput, kOutput, kScratch };
const char* buffer_role_name(BufferRole role);

// What one element of a buffer is, as the caller's columns hold it.
enum class ElementType { kU32, kF32 };
const char* element_type_name(ElementType type);
inline constexpr std::uint64_t kElementBytes = 4;  // both types are 32-bit

// One row of a kernel's buffer interface, declared once per kernel (buffer_specs()): the
// buffers a caller binds by name (inputs and outputs) or that the library owns (scratch). The
// plan's buffers are made from these rows (make_buffer_plans), binding checks them, and the
// typed primitives and the documentation read them; `size_rule` says in words what plan()
// computes, so that an error about a short buffer can name the rule.
struct BufferSpec {
  std::string name;
  ElementType element = ElementType::kU32;
  BufferRole role = BufferRole::kInput;
  std::string size_rule;
};

// A second name for a binding's buffer, declared as `array<type>` (see WgslBinding::views).
struct WgslBindingView {
  std::string name;
  std::string type;  // the WGSL element type, e.g. `vec4f` or `vec2u`
};

// One binding of a kernel's WGSL module (all in group 0), declared once per kernel
// (wgsl_bindings()): the module's declarations and bindings() are both made from these rows.
struct WgslBinding {
  std::uint32_t binding = 0;
  BindingKind kind = BindingKind::kStorageRead;
  std::string name;
  // The uniform's struct, or the WGSL element type of the storage array (`vec4u`, `f32`,
  // `atomic<u32>`, `ChainWord`).
  std::string type;
  // A u32-word binding of a buffer whose BufferSpec says f32: the values move or compare as raw
  // bits, so that NaN payloads, -0 and subnormals come through whatever the adapter's float
  // arithmetic does with them.
  bool f32_bits = false;
  std::string comment;  // appended to the declaration as a WGSL comment, when not empty
  // Further declarations of the same binding as arrays of other element types, for entry points
  // that move the buffer in other units (gemm_f32's gemm_vec4 whole vectors, hash_join_u32's
  // probe 8-byte slots). WGSL lets two variables share a binding when no entry point uses both.
  std::vector<WgslBindingView> views;
};

struct BufferPlan {
  std::string name;
  std::uint64_t bytes = 0;
  BufferRole role = BufferRole::kScratch;
};

struct PassPlan {
  std::string entry_point;
  std::uint64_t workgroups = 0;
  std::map<std::uint32_t, std::string> buffers;  // binding -> buffer name (params is implicit)
  std::vector<std::uint32_t> params;             // this pass's uniform words
};

struct DispatchPlan {
  std::vector<BufferPlan> buffers;
  std::vector<PassPlan> passes;
};

// The plan's buffers for `specs`, in their order, each sized by `bytes` (by name). A row without
// a size, or a size without a row, is a bug in a kernel file, not an input error: it throws
// std::logic_error, and KernelCatalogTest plans every kernel so that none ships.
std::vector<BufferPlan> make_buffer_plans(const std::vector<BufferSpec>& specs,
                                          const std::map<std::string, std::uint64_t>& bytes);

// Inputs of one certification case, by buffer name (bytes), and the problem they belong to.
struct CaseInputs {
  Problem problem;
  std::map<std::string, std::vector<std::byte>> buffers;
};

// A case to certify: a problem size, a value profile and the seed that draws the values.
struct CaseSpec {
  std::string name;
  Problem problem;
  std::string value_profile;
};

struct CaseVerdict {
  ComparisonReport report;
  std::vector<std::string> failed_checks;
  double allowed_absolute_error = 0;
  double allowed_relative_error = 0;
};

// How much work a problem is, for throughput figures.
struct WorkAmount {
  std::uint64_t bytes = 0;  // bytes that must move (documented per kernel)
  std::uint64_t flops = 0;  // for GEMM
  // What users of such a kernel count instead of bytes, when they do (a sort's keys or pairs):
  // its rate is then reported as G <items_name>/s.
  std::uint64_t items = 0;
  const char* items_name = nullptr;
};

class KernelDefinition {
 public:
  virtual ~KernelDefinition() = default;

  virtual std::string_view id() const = 0;
  // Changes whenever the generated code changes, so that cached results are tuned again.
  virtual std::uint32_t revision() const = 0;
  virtual std::string_view summary() const = 0;
  virtual std::vector<KnobSpec> knobs() const = 0;
  // The WGSL bindings for `schedule`: their element types may depend on it, their numbers, names
  // and access do not.
  virtual std::vector<WgslBinding> wgsl_bindings(const Schedule& schedule) const = 0;
  // The default schedule's wgsl_bindings, as the runtime binds them (the same for every schedule).
  std::vector<KernelBinding> bindings() const;
  // The buffer interface (see BufferSpec): every buffer plan() sizes, and no other.
  virtual std::vector<BufferSpec> buffer_specs() const = 0;
  // The row named `name`, or an error naming the kernel and listing its buffers.
  Result<BufferSpec> find_buffer(std::string_view name) const;
  // The entry points the schedule's plan dispatches (each is compiled into a pipeline).
  virtual std::vector<std::string> entry_points(const Schedule& schedule) const = 0;
  virtual std::string generate_wgsl(const Schedule& schedule) const = 0;
  // Buffers and passes for `problem`; an error when the problem is not defined (min of nothing).
  virtual Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                                    const DeviceCapabilities& device) const = 0;
  // The tolerance policy in words, recorded in certification manifests.
  virtual std::string tolerance() const = 0;
  virtual std::vector<CaseSpec> certification_cases() const = 0;
  // The cases only the schedule can name, certified after certification_cases(): a size just
  // past each point where a second level of the schedule's plan comes into play (more partial
  // sums than one workgroup adds up, more tiles than one look-back window or one spine
  // invocation takes) that the fixed sizes do not reach for every schedule. A level the device
  // cannot reach (its input would pass the binding limit) has no case. Default: none.
  virtual std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                               const DeviceCapabilities& device) const;
  virtual CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const = 0;
  // Compares the outputs (by buffer name) with the oracle's.
  virtual CaseVerdict check(const CaseInputs& inputs,
                            const std::map<std::string, std::vector<std::byte>>& outputs) const = 0;
  virtual WorkAmount work(const Problem& problem) const = 0;
  // Whether two runs of a schedule on the same inputs write the same bytes: true unless the
  // result depends on the order in which workgroups finish (f32 sums merged in arrival order,
  // say). Certification runs a winner's cases twice and requires the same bytes when it is.
  virtual bool deterministic() const;
  // The problem tuned at by default, scaled for CPU adapters (lavapipe) vs GPUs.
  virtual Problem tuning_problem(bool cpu_adapter) const = 0;
  // The sizes tuned at, smallest first (by bucket_measure, then average segment length), one of
  // them the main bucket (tuning_problem), whose measure is the largest. Default:
  // the main problem and smaller ones by factors of 16 in elements (on a GPU 2^16, 2^20, 2^24
  // and 2^28; on a CPU adapter two buckets, main / 16 and main, so that lavapipe tunes in
  // minutes), or for GEMM the cubes of a quarter, a half and the whole main side (1024^3,
  // 2048^3, 4096^3; on a CPU adapter half and whole: 64^3, 128^3). Labels are unique.
  virtual std::vector<SizeBucket> size_buckets(bool cpu_adapter) const;
  // Schedules, as knob overrides (`k=v,...`, the syntax of --schedule), that timed fastest on an
  // adapter where they were measured. The tuner times those that fit the adapter right after
  // the default, before its random sample, so that a small budget starts from them; they are
  // still measured and compared like any candidate. Default: none.
  virtual std::vector<std::string> starting_points() const;
  // starting_points() in the order a tune at `problem` times them (a small budget times only the
  // first few): for a kernel whose fastest path depends on the problem's shape. A permutation of
  // starting_points() (the catalog test checks it at every size bucket). Default: as listed.
  virtual std::vector<std::string> starting_points_for(const Problem& problem) const;

  Schedule default_schedule() const;
  // Every knob present with one of its legal values and no unknown knob: what a schedule must
  // be on any device (generate_wgsl may assume it); the error names the knob and value.
  Status check_knobs(const Schedule& schedule) const;
  // check_knobs, and the schedule fits the device (workgroup size, workgroup memory, features);
  // the error names the knob, value and limit.
  Status check_schedule(const Schedule& schedule, const DeviceCapabilities& device) const;
  // Schedule-specific limits beyond the knob lists (default: none).
  virtual Status check_resources(const Schedule& schedule, const DeviceCapabilities& device) const;
  // The kernel's own limits on a problem, checked before anything is planned or allocated (plan()
  // may assume them: its sizes then fit 64 bits). Default: n and the gathered-from length fit
  // the u32 indices and parameters of the WGSL. The error names the field, its value and the
  // limit.
  virtual Status check_problem(const Problem& problem) const;
  // Every legal schedule for `device`, in a stable order (default schedule first).
  std::vector<Schedule> schedule_space(const DeviceCapabilities& device) const;
};

// The catalog, in a stable order.
const std::vector<const KernelDefinition*>& builtin_kernels();
// The kernel with this id, or an error listing the known ids.
Result<const KernelDefinition*> find_kernel(std::string_view id);

// generate_builtin(kernel, schedule, backend) of the original module: validates the schedule
// against `device`, generates the WGSL and seals its hash.
Result<GeneratedKernel> generate_builtin(const KernelDefinition& kernel, const Schedule& schedule,
                                         TargetBackend backend, const DeviceCapabilities& device);

// segmented_reduce_sum_f32's rule for host offsets of n values: at least one, ascending, none
// past n; the error names the first offset that breaks it.
Status check_segment_offsets(std::span<const std::uint32_t> offsets, std::uint64_t n);

// Parses "k=v,k=v" onto the kernel's default schedule; errors name the bad piece.
Result<Schedule> parse_schedule_overrides(const KernelDefinition& kernel, std::string_view text);

}  // namespace wgsl_forge::kernels
