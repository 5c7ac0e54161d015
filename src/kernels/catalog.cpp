// The catalog and the parts of KernelDefinition that every kernel shares.

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "kernel_support.hpp"
#include "util/closest_match.hpp"
#include "util/try.hpp"
#include "wgsl_forge/hash.hpp"

namespace wgsl_forge::kernels {

const KernelDefinition& affine_f32_kernel();
const KernelDefinition& reduce_sum_f32_kernel();
const KernelDefinition& reduce_min_f32_kernel();
const KernelDefinition& reduce_max_f32_kernel();
const KernelDefinition& reduce_sum_u32_kernel();
const KernelDefinition& scan_exclusive_u32_kernel();
const KernelDefinition& compact_f32_kernel();
const KernelDefinition& histogram_u32_kernel();
const KernelDefinition& radix_sort_u32_kernel();
const KernelDefinition& radix_sort_pairs_u32_kernel();
const KernelDefinition& gather_f32_kernel();
const KernelDefinition& gemm_f32_kernel();
const KernelDefinition& hash_join_u32_kernel();
const KernelDefinition& group_by_sum_f32_kernel();
const KernelDefinition& segmented_reduce_sum_f32_kernel();
const KernelDefinition& radix_sort_pairs_u64_kernel();

std::string Problem::to_string() const {
  std::ostringstream text;
  if (m != 0 || n != 0 || k != 0) {
    text << "m=" << m << " n=" << n << " k=" << k;
  } else {
    text << "n=" << elements;
  }
  if (source_elements != 0) text << " source=" << source_elements;
  if (build_elements != 0) text << " build=" << build_elements;
  if (max_groups != 0) text << " max_groups=" << max_groups;
  if (segments != 0) text << " segments=" << segments;
  if (counts_scan_width != 0) text << " counts_scan_width=" << counts_scan_width;
  return text.str();
}

const char* buffer_role_name(BufferRole role) {
  switch (role) {
    case BufferRole::kInput:
      return "input";
    case BufferRole::kOutput:
      return "output";
    case BufferRole::kScratch:
      return "scratch";
  }
  return "unknown";
}

const char* element_type_name(ElementType type) {
  return type == ElementType::kF32 ? "f32" : "u32";
}

std::uint32_t knob(const Schedule& schedule, const KnobSpec& spec) {
  const std::optional<std::int64_t> value = schedule.get(spec.name);
  if (!value) {
    throw std::logic_error("Knob " + spec.name + " is read but absent from schedule " +
                           schedule.to_string() + ".");
  }
  return static_cast<std::uint32_t>(*value);
}

std::vector<BufferPlan> make_buffer_plans(const std::vector<BufferSpec>& specs,
                                          const std::map<std::string, std::uint64_t>& bytes) {
  std::vector<BufferPlan> plans;
  for (const BufferSpec& spec : specs) {
    auto size = bytes.find(spec.name);
    if (size == bytes.end()) {
      throw std::logic_error("The plan gives no size for buffer " + spec.name + ".");
    }
    plans.push_back({spec.name, size->second, spec.role});
  }
  if (plans.size() != bytes.size()) {
    throw std::logic_error("The plan sizes a buffer that the kernel's interface lacks.");
  }
  return plans;
}

Result<BufferSpec> KernelDefinition::find_buffer(std::string_view name) const {
  std::string known;
  for (const BufferSpec& spec : buffer_specs()) {
    if (spec.name == name) return spec;
    known += (known.empty() ? "" : ", ") + spec.name;
  }
  return Error(ErrorKind::kInvalidInput, "Kernel " + std::string(id()) + " has no buffer '" +
                                             std::string(name) + "' (its buffers: " + known + ").");
}

namespace {

std::vector<KernelBinding> runtime_bindings(const std::vector<WgslBinding>& table) {
  std::vector<KernelBinding> list;
  for (const WgslBinding& row : table) list.push_back({0, row.binding, row.kind, row.name});
  return list;
}

}  // namespace

std::vector<KernelBinding> KernelDefinition::bindings() const {
  return runtime_bindings(wgsl_bindings(default_schedule()));
}

Schedule KernelDefinition::default_schedule() const {
  Schedule schedule;
  for (const KnobSpec& knob : knobs()) schedule.set(knob.name, knob.default_value);
  return schedule;
}

namespace {

std::string join_values(const std::vector<std::int64_t>& values) {
  std::string text;
  for (std::int64_t value : values) text += (text.empty() ? "" : ", ") + std::to_string(value);
  return text;
}

Error knob_error(const KernelDefinition& kernel, const Schedule& schedule, std::string message) {
  return Error(ErrorKind::kInvalidInput, std::move(message))
      .with_context("checking schedule " + schedule.to_string() + " of " +
                    std::string(kernel.id()));
}

}  // namespace

Status KernelDefinition::check_knobs(const Schedule& schedule) const {
  const std::vector<KnobSpec> specs = knobs();
  for (const auto& [name, value] : schedule.knobs()) {
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const KnobSpec& knob) { return knob.name == name; });
    if (spec == specs.end()) {
      std::string known;
      for (const KnobSpec& knob : specs) known += (known.empty() ? "" : ", ") + knob.name;
      return knob_error(
          *this, schedule,
          "Unknown knob '" + name + "' for " + std::string(id()) + " (knobs: " + known + ").");
    }
    if (std::find(spec->values.begin(), spec->values.end(), value) == spec->values.end()) {
      return knob_error(*this, schedule,
                        "Knob " + name + " (" + std::to_string(value) + ") is not one of " +
                            join_values(spec->values) + ".");
    }
  }
  for (const KnobSpec& spec : specs) {
    if (!schedule.get(spec.name)) {
      return knob_error(*this, schedule, "Knob " + spec.name + " is missing.");
    }
  }
  return Ok{};
}

Status KernelDefinition::check_schedule(const Schedule& schedule,
                                        const DeviceCapabilities& device) const {
  WF_TRY(check_knobs(schedule));
  if (auto size = schedule.get("workgroup_size")) {
    if (*size > device.max_invocations_per_workgroup || *size > device.max_workgroup_size_x) {
      return knob_error(*this, schedule,
                        "Knob workgroup_size (" + std::to_string(*size) +
                            ") exceeds maxComputeInvocationsPerWorkgroup (" +
                            std::to_string(std::min(device.max_invocations_per_workgroup,
                                                    device.max_workgroup_size_x)) +
                            ").");
    }
  }
  if (schedule.get("use_subgroups").value_or(0) != 0 && !device.subgroups) {
    return knob_error(*this, schedule,
                      "Knob use_subgroups (1) needs the subgroups feature, which the adapter "
                      "does not have.");
  }
  WF_TRY_CONTEXT(check_resources(schedule, device),
                 "checking schedule " + schedule.to_string() + " of " + std::string(id()));
  return Ok{};
}

Status KernelDefinition::check_resources(const Schedule&, const DeviceCapabilities&) const {
  return Ok{};
}

Status KernelDefinition::check_problem(const Problem& problem) const {
  constexpr std::uint64_t kLargest = std::numeric_limits<std::uint32_t>::max();
  for (const auto& [field, value] :
       {std::pair{"n", problem.elements}, std::pair{"source_elements", problem.source_elements}}) {
    if (value > kLargest) {
      return Error(ErrorKind::kInvalidInput,
                   "Problem size " + std::string(field) + " (" + std::to_string(value) +
                       ") exceeds the largest that " + std::string(id()) + " indexes (" +
                       std::to_string(kLargest) + ": its WGSL indices are u32).");
    }
  }
  return Ok{};
}

std::vector<std::string> KernelDefinition::starting_points() const { return {}; }
std::vector<std::string> KernelDefinition::starting_points_for(const Problem&) const {
  return starting_points();
}

bool KernelDefinition::deterministic() const { return true; }

namespace {

std::string power_label(std::uint64_t n) {
  if (n != 0 && (n & (n - 1)) == 0) return "2^" + std::to_string(std::countr_zero(n));
  return std::to_string(n);
}

SizeBucket elements_bucket(Problem problem, std::uint64_t elements, bool main) {
  problem.elements = elements;
  return {power_label(elements), problem, main};
}

SizeBucket gemm_bucket(Problem problem, std::uint32_t divisor, bool main) {
  problem.m /= divisor;
  problem.n /= divisor;
  problem.k /= divisor;
  const std::string label = problem.m == problem.n && problem.n == problem.k
                                ? std::to_string(problem.m) + "^3"
                                : std::to_string(problem.m) + "x" + std::to_string(problem.n) +
                                      "x" + std::to_string(problem.k);
  return {label, problem, main};
}

}  // namespace

std::vector<SizeBucket> KernelDefinition::size_buckets(bool cpu_adapter) const {
  const Problem main = tuning_problem(cpu_adapter);
  std::vector<SizeBucket> buckets;
  if (main.m != 0) {
    for (std::uint32_t divisor :
         cpu_adapter ? std::vector<std::uint32_t>{2, 1} : std::vector<std::uint32_t>{4, 2, 1}) {
      buckets.push_back(gemm_bucket(main, divisor, divisor == 1));
    }
    return buckets;
  }
  const int smaller = cpu_adapter ? 1 : 3;
  for (int step = smaller; step >= 0; --step) {
    const std::uint64_t elements = main.elements >> (4 * step);
    if (elements == 0) continue;
    buckets.push_back(elements_bucket(main, elements, step == 0));
  }
  return buckets;
}

std::uint64_t bucket_measure(const Problem& problem) {
  if (problem.m != 0 || problem.n != 0 || problem.k != 0) {
    return std::uint64_t{problem.m} * problem.n * problem.k;
  }
  return problem.elements;
}

namespace {

// Where a problem lies among buckets: log2 of its measure, of its average segment length and of
// its bound on distinct keys.
struct BucketPosition {
  double log_measure = 0;
  double log_segment_length = 0;  // 0 without segments
  double log_groups = 0;          // max_groups, or the element count when it is not given
};

double log2_at_least_one(std::uint64_t value) {
  return std::log2(static_cast<double>(std::max<std::uint64_t>(1, value)));
}

BucketPosition position_of(const Problem& problem) {
  BucketPosition position;
  position.log_measure = log2_at_least_one(bucket_measure(problem));
  if (problem.segments != 0) {
    position.log_segment_length =
        log2_at_least_one(problem.elements) - std::log2(static_cast<double>(problem.segments));
  }
  position.log_groups =
      log2_at_least_one(problem.max_groups != 0 ? problem.max_groups : problem.elements);
  return position;
}

// The groups' term counts only for buckets that state max_groups: other kernels' buckets (and
// calls) leave it 0, and their distance is the measure's and the segment length's alone.
double distance(const BucketPosition& wanted, const Problem& bucket) {
  const BucketPosition at = position_of(bucket);
  const double groups = bucket.max_groups != 0 ? std::abs(at.log_groups - wanted.log_groups) : 0.0;
  return std::abs(at.log_measure - wanted.log_measure) +
         std::abs(at.log_segment_length - wanted.log_segment_length) + groups;
}

// Whether bucket `left` is nearer to a problem at `wanted` than bucket `right`.
bool nearer(const std::vector<SizeBucket>& buckets, const BucketPosition& wanted, std::size_t left,
            std::size_t right) {
  const double left_distance = distance(wanted, buckets[left].problem);
  const double right_distance = distance(wanted, buckets[right].problem);
  if (left_distance != right_distance) return left_distance < right_distance;
  const BucketPosition left_at = position_of(buckets[left].problem);
  const BucketPosition right_at = position_of(buckets[right].problem);
  if (left_at.log_measure != right_at.log_measure) {
    return left_at.log_measure > right_at.log_measure;
  }
  if (left_at.log_segment_length != right_at.log_segment_length) {
    return left_at.log_segment_length > right_at.log_segment_length;
  }
  return buckets[left].problem.max_groups > buckets[right].problem.max_groups;
}

}  // namespace

std::vector<std::size_t> nearest_buckets(const std::vector<SizeBucket>& buckets,
                                         const Problem& problem) {
  const BucketPosition wanted = position_of(problem);
  std::vector<std::size_t> order(buckets.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t left, std::size_t right) {
    return nearer(buckets, wanted, left, right);
  });
  return order;
}

std::size_t nearest_bucket(const std::vector<SizeBucket>& buckets, const Problem& problem) {
  const BucketPosition wanted = position_of(problem);
  std::size_t best = 0;
  for (std::size_t i = 1; i < buckets.size(); ++i) {
    if (nearer(buckets, wanted, i, best)) best = i;
  }
  return best;
}

std::vector<CaseSpec> KernelDefinition::schedule_cases(const Schedule&,
                                                       const DeviceCapabilities&) const {
  return {};
}

std::vector<Schedule> KernelDefinition::schedule_space(const DeviceCapabilities& device) const {
  const std::vector<KnobSpec> specs = knobs();
  std::vector<Schedule> space;
  const Schedule default_one = default_schedule();
  if (check_schedule(default_one, device)) space.push_back(default_one);
  std::vector<std::size_t> position(specs.size(), 0);
  while (true) {
    Schedule candidate;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      candidate.set(specs[i].name, specs[i].values[position[i]]);
    }
    if (candidate != default_one && check_schedule(candidate, device)) space.push_back(candidate);
    std::size_t digit = 0;
    while (digit < specs.size() && ++position[digit] == specs[digit].values.size()) {
      position[digit++] = 0;
    }
    if (digit == specs.size()) break;
  }
  return space;
}

const std::vector<const KernelDefinition*>& builtin_kernels() {
  static const std::vector<const KernelDefinition*> kCatalog = {&affine_f32_kernel(),
                                                                &reduce_sum_f32_kernel(),
                                                                &reduce_min_f32_kernel(),
                                                                &reduce_max_f32_kernel(),
                                                                &reduce_sum_u32_kernel(),
                                                                &scan_exclusive_u32_kernel(),
                                                                &compact_f32_kernel(),
                                                                &histogram_u32_kernel(),
                                                                &radix_sort_u32_kernel(),
                                                                &radix_sort_pairs_u32_kernel(),
                                                                &gather_f32_kernel(),
                                                                &gemm_f32_kernel(),
                                                                &hash_join_u32_kernel(),
                                                                &group_by_sum_f32_kernel(),
                                                                &segmented_reduce_sum_f32_kernel(),
                                                                &radix_sort_pairs_u64_kernel()};
  return kCatalog;
}

Result<const KernelDefinition*> find_kernel(std::string_view id) {
  std::string known;
  std::vector<std::string_view> ids;
  for (const KernelDefinition* kernel : builtin_kernels()) {
    if (kernel->id() == id) return kernel;
    known += (known.empty() ? "" : ", ") + std::string(kernel->id());
    ids.push_back(kernel->id());
  }
  const std::optional<std::string> meant = closest_match(id, ids);
  return Error(ErrorKind::kInvalidInput, "Unknown kernel '" + std::string(id) + "'" +
                                             (meant ? "; did you mean '" + *meant + "'?" : "") +
                                             " (known: " + known + ").");
}

Result<GeneratedKernel> generate_builtin(const KernelDefinition& kernel, const Schedule& schedule,
                                         TargetBackend backend, const DeviceCapabilities& device) {
  if (backend != TargetBackend::kWgsl) {
    return Error(ErrorKind::kInvalidInput, "Only the wgsl backend is supported.");
  }
  WF_TRY(kernel.check_schedule(schedule, device));
  GeneratedKernel generated;
  generated.kernel_id = std::string(kernel.id());
  generated.kernel_revision = kernel.revision();
  generated.backend = backend;
  generated.schedule = schedule;
  generated.source = kernel.generate_wgsl(schedule);
  generated.entry_points = kernel.entry_points(schedule);
  generated.bindings = runtime_bindings(kernel.wgsl_bindings(schedule));
  generated.seal();
  return generated;
}

Result<Schedule> parse_schedule_overrides(const KernelDefinition& kernel, std::string_view text) {
  Schedule schedule = kernel.default_schedule();
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view piece = text.substr(start, end - start);
    std::size_t equals = piece.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == piece.size()) {
      return Error(ErrorKind::kInvalidInput,
                   "Schedule piece '" + std::string(piece) +
                       "' is not knob=value (expected e.g. workgroup_size=128,vector_width=4).");
    }
    std::string name(piece.substr(0, equals));
    std::string value(piece.substr(equals + 1));
    std::int64_t number = 0;
    std::size_t used = 0;
    try {
      number = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size()) {
      return Error(ErrorKind::kInvalidInput,
                   "Schedule value '" + value + "' of knob " + name + " is not an integer.");
    }
    schedule.set(name, number);
    start = end + 1;
  }
  return schedule;
}

}  // namespace wgsl_forge::kernels
