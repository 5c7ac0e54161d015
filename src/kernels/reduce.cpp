// The reductions: reduce_sum_f32, reduce_min_f32, reduce_max_f32, reduce_sum_u32.
//
// Knobs: workgroup_size; items_per_invocation (vectors per invocation, `workgroup_size` apart);
// vector_width (1 or 4 elements per load); use_subgroups (reduce within subgroups first, where
// the adapter has them; otherwise a tree in workgroup memory).
//
// Passes, none of which waits on another workgroup:
//   reduce_sum_f32: "partials" (one sum per workgroup), then "total" (one workgroup sums them);
//     WGSL has no f32 atomics, and this keeps the order of additions independent of scheduling.
//   reduce_sum_u32: "init" (result = 0), then "reduce" (each workgroup adds its sum atomically;
//     wrapping, like the oracle).
//   reduce_min_f32 / reduce_max_f32: "init", "reduce" on order-preserving u32 keys with atomicMin /
//     atomicMax, then "finish" (key back to f32).
//
// Semantics of min/max: the IEEE order with -0 < +0; any NaN in the input makes the result NaN
// (0x7fc00000); an empty input is an error the caller sees. Values are compared as keys of their
// bits, so subnormals are never flushed. Bytes moved: 4 n.
//
// Oracle and tolerance: u32 sum, min and max are exact. The f32 sum is compared with the exact
// sum (long double): |s - exact| <= n 2^-24 sum|x| + n FLT_MIN (any order of additions, subnormals
// may flush); NaN, and infinities of either sign, must come out exactly as IEEE says.

#include <cmath>
#include <limits>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

enum class ReduceOp { kSumF32, kMinF32, kMaxF32, kSumU32 };

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512, 1024}, 256};
const KnobSpec kItemsPerInvocation{
    "items_per_invocation", "vectors per invocation", {1, 2, 4, 8, 16}, 1};
const KnobSpec kVectorWidth{"vector_width", "elements per load", {1, 4}, 1};
const KnobSpec kUseSubgroups{"use_subgroups", "reduce within subgroups first", {0, 1}, 0};

const char* const kParamsWgsl = R"(
struct Params { n: u32, workgroups: u32 }
)";

class Reduce final : public KernelDefinition {
 public:
  explicit Reduce(ReduceOp op) : op_(op) {}

  std::string_view id() const override {
    switch (op_) {
      case ReduceOp::kSumF32:
        return "reduce_sum_f32";
      case ReduceOp::kMinF32:
        return "reduce_min_f32";
      case ReduceOp::kMaxF32:
        return "reduce_max_f32";
      case ReduceOp::kSumU32:
        return "reduce_sum_u32";
    }
    return "";
  }
  // 2: subgroup totals combined in a fixed order (1 combined them as they arrived).
  std::uint32_t revision() const override { return 2; }
  std::string_view summary() const override {
    switch (op_) {
      case ReduceOp::kSumF32:
        return "sum of n f32";
      case ReduceOp::kMinF32:
        return "minimum of n f32 (NaN propagates, -0 < +0; empty input is an error)";
      case ReduceOp::kMaxF32:
        return "maximum of n f32 (NaN propagates, -0 < +0; empty input is an error)";
      case ReduceOp::kSumU32:
        return "wrapping sum of n u32";
    }
    return "";
  }

  std::vector<KnobSpec> knobs() const override {
    return {kWorkgroupSize, kItemsPerInvocation, kVectorWidth, kUseSubgroups};
  }

  // min and max read their f32 input as raw bits and order it by integer keys (lift()), so that
  // subnormals are never flushed.
  std::vector<WgslBinding> wgsl_bindings(const Schedule& schedule) const override {
    const bool vec4 = knob(schedule, kVectorWidth) == 4;
    if (op_ == ReduceOp::kSumF32) {
      return {params_binding("Params"), storage_read(1, "x", vec4 ? "vec4<f32>" : "f32"),
              storage_read_write(2, "partials", "f32"), storage_read_write(3, "result", "f32")};
    }
    WgslBinding x = storage_read(1, "x", vec4 ? "vec4<u32>" : "u32");
    if (op_ == ReduceOp::kSumU32) {
      return {params_binding("Params"), x, storage_read_write(3, "result", "atomic<u32>")};
    }
    WgslBinding result = as_f32_bits(storage_read_write(3, "result", "u32"));
    result.comment = "f32 bits";
    return {params_binding("Params"), as_f32_bits(x), storage_read_write(2, "key", "atomic<u32>"),
            result};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    const ElementType element = op_ == ReduceOp::kSumU32 ? ElementType::kU32 : ElementType::kF32;
    std::vector<BufferSpec> specs = {{"x", element, BufferRole::kInput, kVec4SizeRule},
                                     {"result", element, BufferRole::kOutput, "1 element"}};
    if (op_ == ReduceOp::kSumF32) {
      specs.push_back(
          {"partials", ElementType::kF32, BufferRole::kScratch, "one element per workgroup"});
    } else if (op_ != ReduceOp::kSumU32) {
      specs.push_back({"key", ElementType::kU32, BufferRole::kScratch, "1 element"});
    }
    return specs;
  }

  std::vector<std::string> entry_points(const Schedule&) const override {
    switch (op_) {
      case ReduceOp::kSumF32:
        return {"partial_sums", "total_sum"};
      case ReduceOp::kSumU32:
        return {"init", "reduce"};
      default:
        return {"init", "reduce", "finish"};
    }
  }

  std::string generate_wgsl(const Schedule& schedule) const override;

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t n = problem.elements;
    if (n == 0 && (op_ == ReduceOp::kMinF32 || op_ == ReduceOp::kMaxF32)) {
      return Error(ErrorKind::kInvalidInput,
                   std::string(op_ == ReduceOp::kMinF32 ? "The minimum" : "The maximum") +
                       " of an empty input is undefined (n = 0).");
    }
    const std::uint64_t workgroups = ceil_div(n, tile_elements(schedule));
    const std::uint64_t input_bytes = vec4_buffer_bytes(n);
    const std::vector<std::uint32_t> params = {static_cast<std::uint32_t>(n),
                                               static_cast<std::uint32_t>(workgroups)};
    DispatchPlan plan;
    std::map<std::string, std::uint64_t> sizes = {{"x", input_bytes}, {"result", 4}};
    switch (op_) {
      case ReduceOp::kSumF32:
        sizes["partials"] = std::max<std::uint64_t>(1, workgroups) * 4;
        plan.passes = {
            {"partial_sums", workgroups, {{1, "x"}, {2, "partials"}, {3, "result"}}, params},
            {"total_sum", 1, {{1, "x"}, {2, "partials"}, {3, "result"}}, params}};
        break;
      case ReduceOp::kSumU32:
        plan.passes = {{"init", 1, {{1, "x"}, {3, "result"}}, params},
                       {"reduce", workgroups, {{1, "x"}, {3, "result"}}, params}};
        break;
      default:
        sizes["key"] = 4;
        plan.passes = {{"init", 1, {{1, "x"}, {2, "key"}, {3, "result"}}, params},
                       {"reduce", workgroups, {{1, "x"}, {2, "key"}, {3, "result"}}, params},
                       {"finish", 1, {{1, "x"}, {2, "key"}, {3, "result"}}, params}};
    }
    plan.buffers = make_buffer_plans(buffer_specs(), sizes);
    return plan;
  }

  std::string tolerance() const override {
    if (op_ == ReduceOp::kSumF32) {
      return "|s - exact| <= n 2^-24 sum|x| + n FLT_MIN; NaN and infinities exact";
    }
    return "exact";
  }

  std::vector<CaseSpec> certification_cases() const override {
    std::vector<const char*> profiles;
    switch (op_) {
      case ReduceOp::kSumF32:
        profiles = {"uniform", "small", "subnormals", "nonfinite"};
        break;
      case ReduceOp::kSumU32:
        profiles = {"uniform", "small"};
        break;
      default:
        profiles = {"uniform", "specials", "constant", "nan"};
    }
    std::vector<CaseSpec> cases =
        element_cases(256, 1024, std::vector<std::string>(profiles.begin(), profiles.end()), 256);
    if (op_ == ReduceOp::kMinF32 || op_ == ReduceOp::kMaxF32) {
      std::erase_if(cases, [](const CaseSpec& spec) { return spec.problem.elements == 0; });
    }
    return cases;
  }

  // reduce_sum_f32's second pass adds up the partial sums WG apart: n one past WG tiles gives
  // it WG + 1, the last holding only the last element. The profile "heavy-last" makes that
  // element 2^24 among values in [-1, 1], so that the tolerance (n 2^-24 sum|x|) cannot hide a
  // second pass that skips it, or adds it twice; from 2^23 elements on it could (the tolerance
  // then exceeds any element), so there the last element is an infinity ("infinite-last"),
  // which the sum must keep exactly. The other reductions publish each workgroup's total with
  // one atomic: a single level.
  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities& device) const override {
    if (op_ != ReduceOp::kSumF32) return {};
    const std::uint64_t n = knob(schedule, kWorkgroupSize) * tile_elements(schedule) + 1;
    if (vec4_buffer_bytes(n) > device.max_storage_binding_size) return {};
    const std::string profile = n < (1u << 23) ? "heavy-last" : "infinite-last";
    return {{"second-pass n=" + std::to_string(n) + " " + profile, elements_problem(n), profile}};
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    const std::uint64_t n = spec.problem.elements;
    if (spec.value_profile == "heavy-last" || spec.value_profile == "infinite-last") {
      std::vector<float> x = random_floats(n, "small", random);
      const float infinity = std::numeric_limits<float>::infinity();
      if (!x.empty()) {
        x.back() = spec.value_profile == "heavy-last" ? 0x1p24f
                                                      : (random() % 2 == 0 ? infinity : -infinity);
      }
      inputs.buffers["x"] = to_bytes(x);
      return inputs;
    }
    if (op_ == ReduceOp::kSumU32) {
      inputs.buffers["x"] = random_u32_bytes(n, spec.value_profile, random);
      return inputs;
    }
    std::vector<float> x;
    if (spec.value_profile == "subnormals" || spec.value_profile == "nonfinite" ||
        spec.value_profile == "nan") {
      x = random_floats(n, "uniform", random);
      for (float& value : x) {
        if (random() % 8 != 0) continue;
        if (spec.value_profile == "subnormals") {
          const float tiny[] = {std::numeric_limits<float>::denorm_min(), -0.0f,
                                -std::numeric_limits<float>::denorm_min() * 5.0f,
                                std::numeric_limits<float>::min()};
          value = tiny[random() % 4];
        } else if (spec.value_profile == "nonfinite") {
          value = random() % 2 ? std::numeric_limits<float>::infinity() : value;
        } else {
          value = random() % 64 == 0 ? std::numeric_limits<float>::quiet_NaN() : value;
        }
      }
    } else {
      x = random_floats(n, spec.value_profile, random);
    }
    inputs.buffers["x"] = to_bytes(x);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::uint64_t n = inputs.problem.elements;
    CaseVerdict verdict;
    if (op_ == ReduceOp::kSumU32) {
      std::vector<std::uint32_t> x = from_bytes<std::uint32_t>(inputs.buffers.at("x"), n);
      std::uint32_t sum = 0;
      for (std::uint32_t value : x) sum += value;
      std::vector<std::uint32_t> expected = {sum};
      verdict.report = compare_exact(expected, from_bytes<std::uint32_t>(outputs.at("result"), 1));
      return verdict;
    }
    std::vector<float> x = from_bytes<float>(inputs.buffers.at("x"), n);
    std::vector<float> result = from_bytes<float>(outputs.at("result"), 1);
    if (op_ == ReduceOp::kSumF32) {
      long double exact = 0;
      long double magnitude = 0;
      for (float value : x) {
        exact += value;
        magnitude += std::abs(static_cast<long double>(value));
      }
      const double allowed =
          static_cast<double>(n) * std::ldexp(1.0, -24) * static_cast<double>(magnitude) +
          static_cast<double>(n) * std::numeric_limits<float>::min();
      std::vector<double> expected = {static_cast<double>(exact)};
      std::vector<double> bound = {allowed};
      verdict.report = compare_within(expected, result, bound);
      verdict.allowed_absolute_error = allowed;
      verdict.allowed_relative_error = static_cast<double>(n) * std::ldexp(1.0, -24);
      return verdict;
    }
    const bool is_min = op_ == ReduceOp::kMinF32;
    float best = x.front();
    bool saw_nan = false;
    auto key = [](float value) {
      std::uint32_t bits = float_bits(value);
      return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
    };
    for (float value : x) {
      if (std::isnan(value))
        saw_nan = true;
      else if (std::isnan(best) || (is_min ? key(value) < key(best) : key(value) > key(best)))
        best = value;
    }
    std::vector<float> expected = {saw_nan ? bits_float(0x7fc00000u) : best};
    verdict.report = compare_bitwise(expected, result);
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override { return {4 * problem.elements, 0}; }

  // reduce_sum_f32's budget-12 winner on the H200 (driver 580.159.04), the read ceiling
  // (docs/performance.md); the other three ops reached 97-101 % of it with budget-3 winners.
  std::vector<std::string> starting_points() const override {
    return {"workgroup_size=512,items_per_invocation=16,vector_width=4,use_subgroups=1"};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    return elements_problem(tuning_elements(cpu_adapter));
  }

 private:
  // Elements per workgroup.
  static std::uint64_t tile_elements(const Schedule& schedule) {
    return std::uint64_t{knob(schedule, kWorkgroupSize)} * knob(schedule, kItemsPerInvocation) *
           knob(schedule, kVectorWidth);
  }

  ReduceOp op_;
};

// --- WGSL -----------------------------------------------------------------------------------
// The shader is: the op's module (its accumulator type Acc, IDENTITY, combine, lift and how a
// workgroup's total is published), the load of one vector, the workgroup reduction, the
// invocation's ids, the tile's total and the op's entry points. The schedule's values enter as
// constants (WG, ITEMS).

const char* const kSumF32Wgsl = R"(
alias Acc = f32;
const IDENTITY: Acc = 0.0;
fn combine(a: Acc, b: Acc) -> Acc { return a + b; }
fn lift(value: f32) -> Acc { return value; }
)";

const char* const kSumU32Wgsl = R"(
alias Acc = u32;
const IDENTITY: Acc = 0u;
fn combine(a: Acc, b: Acc) -> Acc { return a + b; }
fn lift(value: u32) -> Acc { return value; }
fn clear_result() { atomicStore(&result[0], IDENTITY); }
fn publish(total: Acc) { atomicAdd(&result[0], total); }
)";

// min and max combine order-preserving u32 keys of the f32 bits (negative values flipped), so
// that subnormals are never flushed; NAN_KEY, the key a NaN gets, wins every comparison.
const char* const kMinF32Wgsl = R"(
alias Acc = u32;
const IDENTITY: Acc = 0xffffffffu;
const NAN_KEY: u32 = 0u;
fn combine(a: Acc, b: Acc) -> Acc { return min(a, b); }
fn clear_result() { atomicStore(&key[0], IDENTITY); }
fn publish(total: Acc) { atomicMin(&key[0], total); }
)";

const char* const kMaxF32Wgsl = R"(
alias Acc = u32;
const IDENTITY: Acc = 0u;
const NAN_KEY: u32 = 0xffffffffu;
fn combine(a: Acc, b: Acc) -> Acc { return max(a, b); }
fn clear_result() { atomicStore(&key[0], IDENTITY); }
fn publish(total: Acc) { atomicMax(&key[0], total); }
)";

const char* const kKeyLiftWgsl = R"(
fn lift(bits: u32) -> u32 {
  if ((bits & 0x7fffffffu) > 0x7f800000u) { return NAN_KEY; }
  return select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
}
)";

const char* const kSubgroupAddWgsl = R"(
fn subgroup_combine(value: Acc) -> Acc { return subgroupAdd(value); }
)";
const char* const kSubgroupMinWgsl = R"(
fn subgroup_combine(value: Acc) -> Acc { return subgroupMin(value); }
)";
const char* const kSubgroupMaxWgsl = R"(
fn subgroup_combine(value: Acc) -> Acc { return subgroupMax(value); }
)";

const char* const kScalarLoadWgsl = R"(
fn vector_count() -> u32 { return params.n; }
fn load(i: u32) -> Acc { return lift(x[i]); }
)";

const char* const kVec4LoadWgsl = R"(
fn vector_count() -> u32 { return (params.n + 3u) / 4u; }
// Vector i, its lanes past n left out.
fn load(i: u32) -> Acc {
  let v = x[i];
  let first = i * 4u;
  var acc = lift(v.x);
  if (first + 1u < params.n) { acc = combine(acc, lift(v.y)); }
  if (first + 2u < params.n) { acc = combine(acc, lift(v.z)); }
  if (first + 3u < params.n) { acc = combine(acc, lift(v.w)); }
  return acc;
}
)";

// The workgroup's reduction; its result is valid in every invocation. A tree in workgroup memory,
// whose order is fixed by the invocations' indices; with subgroups, each subgroup's total enters
// the tree in the slot of its first lane (the identity elsewhere). Slots taken in the order the
// subgroups arrive made f32 sums differ from run to run on the H200 (the winner's certification
// runs every case twice), so no combination here depends on timing.
const char* const kTreeReduceWgsl = R"(
var<workgroup> scratch: array<Acc, WG>;
fn tree_reduce(value: Acc, local: u32) -> Acc {
  scratch[local] = value;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (local < stride) { scratch[local] = combine(scratch[local], scratch[local + stride]); }
    workgroupBarrier();
  }
  return scratch[0];
}
)";

const char* const kPlainWorkgroupReduceWgsl = R"(
fn workgroup_reduce(value: Acc, local: u32, lane: u32) -> Acc { return tree_reduce(value, local); }
)";

const char* const kSubgroupWorkgroupReduceWgsl = R"(
fn workgroup_reduce(value: Acc, local: u32, lane: u32) -> Acc {
  let partial = subgroup_combine(value);
  return tree_reduce(select(IDENTITY, partial, lane == 0u), local);
}
)";

const char* const kInvocationWgsl = R"(
struct Invocation {
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32,
}
fn lane_of(id: Invocation) -> u32 { return 0u; }
)";

const char* const kSubgroupInvocationWgsl = R"(
struct Invocation {
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32,
  @builtin(subgroup_invocation_id) lane: u32,
}
fn lane_of(id: Invocation) -> u32 { return id.lane; }
)";

// The combined value of the workgroup's share (WG * ITEMS vectors, each invocation's WG apart),
// valid in invocation 0.
const char* const kTileTotalWgsl = R"(
fn tile_total(id: Invocation) -> Acc {
  let vectors = vector_count();
  let first = linear_workgroup(id.group, id.groups) * (WG * ITEMS) + id.local;
  var acc = IDENTITY;
  for (var item = 0u; item < ITEMS; item++) {
    let i = first + item * WG;
    if (i < vectors) { acc = combine(acc, load(i)); }
  }
  return workgroup_reduce(acc, id.local, lane_of(id));
}
)";

const char* const kTwoPassSumWgsl = R"(
@compute @workgroup_size(WG)
fn partial_sums(id: Invocation) {
  let total = tile_total(id);
  let index = linear_workgroup(id.group, id.groups);
  if (id.local == 0u && index < params.workgroups) { partials[index] = total; }
}

@compute @workgroup_size(WG)
fn total_sum(id: Invocation) {
  var acc = 0.0;
  for (var i = id.local; i < params.workgroups; i += WG) { acc += partials[i]; }
  let sum = workgroup_reduce(acc, id.local, lane_of(id));
  if (id.local == 0u) { result[0] = sum; }
}
)";

const char* const kAtomicReduceWgsl = R"(
@compute @workgroup_size(1)
fn init() { clear_result(); }

@compute @workgroup_size(WG)
fn reduce(id: Invocation) {
  let total = tile_total(id);
  let index = linear_workgroup(id.group, id.groups);
  if (id.local == 0u && index < params.workgroups) { publish(total); }
}
)";

// The winning key back to f32 bits (NaN as the quiet NaN 0x7fc00000).
const char* const kKeyFinishWgsl = R"(
@compute @workgroup_size(1)
fn finish() {
  let k = atomicLoad(&key[0]);
  if (k == NAN_KEY) { result[0] = 0x7fc00000u; return; }
  result[0] = select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u);
}
)";

// The op's own modules: accumulator and publishing, subgroup combine, entry points.
struct OpWgsl {
  std::string accumulator;
  const char* subgroup_combine;
  std::string entry_points;
};

OpWgsl op_wgsl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSumF32:
      return {kSumF32Wgsl, kSubgroupAddWgsl, kTwoPassSumWgsl};
    case ReduceOp::kSumU32:
      return {kSumU32Wgsl, kSubgroupAddWgsl, kAtomicReduceWgsl};
    case ReduceOp::kMinF32:
      return {std::string(kMinF32Wgsl) + kKeyLiftWgsl, kSubgroupMinWgsl,
              std::string(kAtomicReduceWgsl) + kKeyFinishWgsl};
    case ReduceOp::kMaxF32:
      return {std::string(kMaxF32Wgsl) + kKeyLiftWgsl, kSubgroupMaxWgsl,
              std::string(kAtomicReduceWgsl) + kKeyFinishWgsl};
  }
  return {};
}

std::string Reduce::generate_wgsl(const Schedule& schedule) const {
  const bool subgroups = knob(schedule, kUseSubgroups) == 1;
  const OpWgsl op = op_wgsl(op_);
  return std::string(subgroups ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl + kParamsWgsl +
         binding_declarations(wgsl_bindings(schedule)) + "\n" +
         constant_declarations(
             {{"WG", knob(schedule, kWorkgroupSize), "invocations per workgroup"},
              {"ITEMS", knob(schedule, kItemsPerInvocation), "vectors per invocation"}}) +
         op.accumulator + (subgroups ? op.subgroup_combine : "") +
         (knob(schedule, kVectorWidth) == 4 ? kVec4LoadWgsl : kScalarLoadWgsl) + kTreeReduceWgsl +
         (subgroups ? kSubgroupWorkgroupReduceWgsl : kPlainWorkgroupReduceWgsl) +
         (subgroups ? kSubgroupInvocationWgsl : kInvocationWgsl) + kTileTotalWgsl + op.entry_points;
}

}  // namespace

const KernelDefinition& reduce_sum_f32_kernel() {
  static const Reduce kKernel(ReduceOp::kSumF32);
  return kKernel;
}
const KernelDefinition& reduce_min_f32_kernel() {
  static const Reduce kKernel(ReduceOp::kMinF32);
  return kKernel;
}
const KernelDefinition& reduce_max_f32_kernel() {
  static const Reduce kKernel(ReduceOp::kMaxF32);
  return kKernel;
}
const KernelDefinition& reduce_sum_u32_kernel() {
  static const Reduce kKernel(ReduceOp::kSumU32);
  return kKernel;
}

}  // namespace wgsl_forge::kernels
