// gather_f32: y[i] = x[idx[i]] for i < n.
//
// An index at or past the length of x is defined: y[i] = +0.0 (its bits 0x00000000), so a
// database can gather through a sentinel index without a bounds pass. Values move as raw bits
// (NaN payloads, -0 and subnormals arrive unchanged). Knobs: workgroup_size, items_per_invocation
// (elements per invocation, `workgroup_size` apart).
//
// Oracle: the sequential gather with the same rule; exact. Bytes moved: 12 n (index, value, out).

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512, 1024}, 256};
const KnobSpec kItemsPerInvocation{
    "items_per_invocation", "elements per invocation", {1, 2, 4, 8}, 1};

const char* const kParamsWgsl = R"(
struct Params { n: u32, source_length: u32 }
)";

// Invocation `local` of a workgroup writes outputs first, first + WG, ...; an index past the
// source reads as 0.
const char* const kGatherWgsl = R"(
@compute @workgroup_size(WG)
fn gather(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
          @builtin(local_invocation_index) local: u32) {
  let first = linear_workgroup(group, groups) * (WG * ITEMS) + local;
  for (var item = 0u; item < ITEMS; item++) {
    let i = first + item * WG;
    if (i < params.n) {
      let j = idx[i];
      var value = 0u;
      if (j < params.source_length) { value = x[j]; }
      y[i] = value;
    }
  }
}
)";

class GatherF32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "gather_f32"; }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override {
    return "y[i] = x[idx[i]] (an index past the end of x gives +0.0)";
  }

  std::vector<KnobSpec> knobs() const override { return {kWorkgroupSize, kItemsPerInvocation}; }

  std::vector<WgslBinding> wgsl_bindings(const Schedule&) const override {
    return {params_binding("Params"), as_f32_bits(storage_read(1, "x", "u32")),
            storage_read(2, "idx", "u32"), as_f32_bits(storage_read_write(3, "y", "u32"))};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {{"x", ElementType::kF32, BufferRole::kInput,
             "the source's elements (Problem::source_elements, n when 0), at least 1"},
            {"idx", ElementType::kU32, BufferRole::kInput, "n elements, at least 1"},
            {"y", ElementType::kF32, BufferRole::kOutput, "n elements, at least 1"}};
  }

  std::vector<std::string> entry_points(const Schedule&) const override { return {"gather"}; }

  std::string generate_wgsl(const Schedule& schedule) const override {
    return std::string(kLinearWorkgroupWgsl) + kParamsWgsl +
           binding_declarations(wgsl_bindings(schedule)) + "\n" +
           constant_declarations(
               {{"WG", knob(schedule, kWorkgroupSize), "invocations per workgroup"},
                {"ITEMS", knob(schedule, kItemsPerInvocation), "outputs per invocation"}}) +
           kGatherWgsl;
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t n = problem.elements;
    const std::uint64_t source = source_length(problem);
    const std::uint64_t per_workgroup =
        std::uint64_t{knob(schedule, kWorkgroupSize)} * knob(schedule, kItemsPerInvocation);
    const std::map<std::uint32_t, std::string> buffers = {{1, "x"}, {2, "idx"}, {3, "y"}};
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(buffer_specs(), {{"x", std::max<std::uint64_t>(4, source * 4)},
                                                      {"idx", std::max<std::uint64_t>(4, n * 4)},
                                                      {"y", std::max<std::uint64_t>(4, n * 4)}});
    plan.passes = {{"gather",
                    ceil_div(n, per_workgroup),
                    buffers,
                    {static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(source)}}};
    return plan;
  }

  std::string tolerance() const override { return "exact (bits)"; }

  std::vector<CaseSpec> certification_cases() const override {
    return element_cases(256, 1024, {"random", "out-of-range", "sequential"}, 256);
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    const std::uint64_t n = spec.problem.elements;
    const std::uint64_t source = source_length(spec.problem);
    const bool sequential = spec.value_profile == "sequential";
    const bool out_of_range = spec.value_profile == "out-of-range";
    const std::vector<std::uint64_t> seeds = chunk_seeds(n, random);
    std::vector<std::uint32_t> idx(n);
    for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t chunk) {
      std::mt19937_64 draw(seeds[chunk]);
      for (std::size_t i = begin; i < end; ++i) {
        if (sequential) {
          idx[i] = static_cast<std::uint32_t>(i % source);
        } else if (out_of_range && draw() % 4 == 0) {
          const std::uint32_t past[] = {static_cast<std::uint32_t>(source),
                                        static_cast<std::uint32_t>(source + draw() % 1000),
                                        0xffffffffu};
          idx[i] = past[draw() % 3];
        } else {
          idx[i] = static_cast<std::uint32_t>(draw() % source);
        }
      }
    });
    inputs.buffers["x"] = random_float_bytes(source, "specials", random);
    inputs.buffers["idx"] = to_bytes(idx);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::uint64_t n = inputs.problem.elements;
    const std::uint64_t source = source_length(inputs.problem);
    const auto x = from_bytes<std::uint32_t>(inputs.buffers.at("x"), source);
    const auto idx = from_bytes<std::uint32_t>(inputs.buffers.at("idx"), n);
    std::vector<std::uint32_t> expected(n);
    for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t) {
      for (std::size_t i = begin; i < end; ++i) expected[i] = idx[i] < source ? x[idx[i]] : 0u;
    });
    CaseVerdict verdict;
    verdict.report = compare_exact(expected, from_bytes<std::uint32_t>(outputs.at("y"), n));
    return verdict;
  }

  // Gathers are compared in elements per second (a random gather is bound by its loads, not by
  // bytes streamed); bytes: 4 read of idx, 4 gathered from x, 4 written of y per element.
  WorkAmount work(const Problem& problem) const override {
    return {12 * problem.elements, 0, problem.elements, "elements"};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    return elements_problem(tuning_elements(cpu_adapter));
  }

 private:
  // The gathered-from array is as long as the output (at least one element).
  static std::uint64_t source_length(const Problem& problem) {
    return std::max<std::uint64_t>(
        1, problem.source_elements != 0 ? problem.source_elements : problem.elements);
  }
};

}  // namespace

const KernelDefinition& gather_f32_kernel() {
  static const GatherF32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
