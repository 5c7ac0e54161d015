// affine_f32: y[i] = a * x[i] + b, with a and b given at run time.
//
// Knobs: workgroup_size; vector_width (f32, vec2f or vec4f loads and stores); items_per_invocation
// (vectors per invocation, `workgroup_size` apart so that neighbouring invocations touch
// neighbouring memory). Buffers hold n rounded up to 4 floats: with vector_width > 1 the kernel
// writes whole vectors, so the padding lanes of y receive a * 0 + b.
//
// Oracle: a * x + b in double. Tolerance: the GPU may fuse the multiply and the add, and WGSL lets
// it flush subnormals, so |y - exact| <= 2^-23 (|a x| + |a x + b|) + (|a| + 1) FLT_MIN; a result
// beyond FLT_MAX must be the infinity of its sign, and NaN must stay NaN.
// Bytes moved: 8 n (read x, write y).

#include <cmath>
#include <limits>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512, 1024}, 256};
const KnobSpec kVectorWidth{"vector_width", "floats per load and store", {1, 2, 4}, 1};
const KnobSpec kItemsPerInvocation{
    "items_per_invocation", "vectors per invocation", {1, 2, 4, 8}, 1};

const char* const kParamsWgsl = R"(
struct Params { vectors: u32, a: f32, b: f32 }
)";

// Invocation `local` of a workgroup takes vectors first, first + WG, ..., so that consecutive
// invocations touch consecutive vectors.
const char* const kAffineWgsl = R"(
@compute @workgroup_size(WG)
fn affine(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
          @builtin(local_invocation_index) local: u32) {
  let first = linear_workgroup(group, groups) * (WG * ITEMS) + local;
  for (var item = 0u; item < ITEMS; item++) {
    let i = first + item * WG;
    if (i < params.vectors) {
      y[i] = params.a * x[i] + params.b;
    }
  }
}
)";

class AffineF32 final : public KernelDefinition {
  // Whole vec4s: a schedule of vector_width 4 reads and writes the padding lanes.
  static constexpr const char* kSizeRule = kVec4SizeRule;

 public:
  std::string_view id() const override { return "affine_f32"; }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override { return "y[i] = a * x[i] + b"; }

  std::vector<KnobSpec> knobs() const override {
    return {kWorkgroupSize, kVectorWidth, kItemsPerInvocation};
  }

  std::vector<WgslBinding> wgsl_bindings(const Schedule& schedule) const override {
    const std::uint32_t width = knob(schedule, kVectorWidth);
    const std::string type = width == 1 ? "f32" : "vec" + std::to_string(width) + "f";
    return {params_binding("Params"), storage_read(1, "x", type), storage_read_write(2, "y", type)};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {{"x", ElementType::kF32, BufferRole::kInput, kSizeRule},
            {"y", ElementType::kF32, BufferRole::kOutput, kSizeRule}};
  }

  std::vector<std::string> entry_points(const Schedule&) const override { return {"affine"}; }

  std::string generate_wgsl(const Schedule& schedule) const override {
    return std::string(kLinearWorkgroupWgsl) + kParamsWgsl +
           binding_declarations(wgsl_bindings(schedule)) + "\n" +
           constant_declarations(
               {{"WG", knob(schedule, kWorkgroupSize), "invocations per workgroup"},
                {"ITEMS", knob(schedule, kItemsPerInvocation), "vectors per invocation"}}) +
           kAffineWgsl;
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t width = knob(schedule, kVectorWidth);
    const std::uint64_t per_workgroup =
        std::uint64_t{knob(schedule, kWorkgroupSize)} * knob(schedule, kItemsPerInvocation);
    const std::uint64_t vectors = ceil_div(problem.elements, width);
    const std::uint64_t bytes = std::max<std::uint64_t>(16, round_up(problem.elements, 4) * 4);
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(buffer_specs(), {{"x", bytes}, {"y", bytes}});
    plan.passes = {
        {"affine",
         ceil_div(vectors, per_workgroup),
         {{1, "x"}, {2, "y"}},
         {static_cast<std::uint32_t>(vectors), float_bits(problem.a), float_bits(problem.b)}}};
    return plan;
  }

  std::string tolerance() const override {
    return "|y - (a x + b)| <= 2^-23 (|a x| + |a x + b|) + (|a| + 1) FLT_MIN (fused multiply-add "
           "and subnormal flushing allowed); overflow must give the infinity of its sign; NaN "
           "stays NaN";
  }

  std::vector<CaseSpec> certification_cases() const override {
    return element_cases(256, 1024, {"uniform", "specials"}, 256);
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    inputs.problem.a = std::uniform_real_distribution<float>(-4.0f, 4.0f)(random);
    inputs.problem.b = std::uniform_real_distribution<float>(-100.0f, 100.0f)(random);
    inputs.buffers["x"] = random_float_bytes(spec.problem.elements, spec.value_profile, random);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::uint64_t n = inputs.problem.elements;
    const double a = inputs.problem.a;
    const double b = inputs.problem.b;
    const std::vector<float> x = from_bytes<float>(inputs.buffers.at("x"), n);
    const std::vector<float> y = from_bytes<float>(outputs.at("y"), n);
    std::vector<double> expected(n);
    std::vector<double> allowed(n);
    constexpr double kFlushFloor = std::numeric_limits<float>::min();
    for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t) {
      for (std::size_t i = begin; i < end; ++i) {
        const double product = a * x[i];
        double exact = product + b;
        if (std::abs(exact) > std::numeric_limits<float>::max() && std::isfinite(exact)) {
          exact = std::copysign(std::numeric_limits<double>::infinity(), exact);
        }
        expected[i] = exact;
        allowed[i] =
            std::ldexp(std::abs(product) + std::abs(exact), -23) + (std::abs(a) + 1) * kFlushFloor;
      }
    });
    CaseVerdict verdict;
    verdict.report = compare_within(expected, y, allowed);
    verdict.allowed_relative_error = std::ldexp(1.0, -22);
    verdict.allowed_absolute_error = (std::abs(a) + 1) * kFlushFloor;
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override { return {8 * problem.elements, 0}; }

  // The H200's (driver 580.159.04) budget-3 winner, 96 % of the copy ceiling (docs/performance.md).
  std::vector<std::string> starting_points() const override {
    return {"workgroup_size=256,vector_width=2,items_per_invocation=4"};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    return elements_problem(tuning_elements(cpu_adapter));
  }
};

}  // namespace

const KernelDefinition& affine_f32_kernel() {
  static const AffineF32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
