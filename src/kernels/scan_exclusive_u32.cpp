// scan_exclusive_u32: y[i] = x[0] + ... + x[i-1], wrapping (y[0] = 0).
//
// Reduce-then-scan in three passes of one submission (no workgroup waits on another, so it is
// safe on adapters without forward-progress guarantees): block sums, one workgroup scans the
// block sums, then each block scans itself from its offset. Knobs: workgroup_size and
// items_per_invocation (consecutive elements per invocation; a block is their product).
// Workgroup memory: 4 * workgroup_size bytes.
//
// Oracle: the sequential wrapping scan; exact. Bytes moved: 8 n (read x, write y).

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

class ScanExclusiveU32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "scan_exclusive_u32"; }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override {
    return "y[i] = x[0] + ... + x[i-1] (exclusive prefix sum, wrapping u32)";
  }

  std::vector<KnobSpec> knobs() const override {
    return {{"workgroup_size", "invocations per workgroup", {64, 128, 256, 512, 1024}, 256},
            {"items_per_invocation", "consecutive elements per invocation", {1, 2, 4, 8, 16}, 4}};
  }

  std::vector<KernelBinding> bindings() const override {
    return {{0, 0, BindingKind::kUniform, "params"},
            {0, 1, BindingKind::kStorageRead, "x"},
            {0, 2, BindingKind::kStorageReadWrite, "y"},
            {0, 3, BindingKind::kStorageReadWrite, "block_sums"}};
  }

  std::vector<std::string> entry_points() const override {
    return {"scan_reduce", "scan_spine", "scan_apply"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override {
    const std::uint32_t wg = knob(schedule, "workgroup_size");
    return std::string(kLinearWorkgroupWgsl) +
           "\nstruct Params { n: u32, blocks: u32 }\n"
           "@group(0) @binding(0) var<uniform> params: Params;\n"
           "@group(0) @binding(1) var<storage, read> x: array<u32>;\n"
           "@group(0) @binding(2) var<storage, read_write> y: array<u32>;\n"
           "@group(0) @binding(3) var<storage, read_write> block_sums: array<u32>;\n\n"
           "fn scan_length() -> u32 { return params.n; }\n"
           "fn scan_blocks() -> u32 { return params.blocks; }\n"
           "fn scan_value(i: u32) -> u32 { return x[i]; }\n"
           "fn scan_store(i: u32, prefix: u32) { y[i] = prefix; }\n"
           "fn scan_total(total: u32) {}\n\n" +
           workgroup_scan_wgsl(wg) +
           reduce_then_scan_wgsl("scan", wg, knob(schedule, "items_per_invocation"));
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t n = problem.elements;
    const std::uint64_t block =
        std::uint64_t{knob(schedule, "workgroup_size")} * knob(schedule, "items_per_invocation");
    const std::uint64_t blocks = ceil_div(n, block);
    const std::vector<std::uint32_t> params = {static_cast<std::uint32_t>(n),
                                               static_cast<std::uint32_t>(blocks)};
    const std::map<std::uint32_t, std::string> buffers = {{1, "x"}, {2, "y"}, {3, "block_sums"}};
    DispatchPlan plan;
    plan.buffers = {{"x", std::max<std::uint64_t>(4, n * 4), BufferRole::kInput},
                    {"y", std::max<std::uint64_t>(4, n * 4), BufferRole::kOutput},
                    {"block_sums", std::max<std::uint64_t>(1, blocks) * 4, BufferRole::kScratch}};
    plan.passes = {{"scan_reduce", blocks, buffers, params},
                   {"scan_spine", 1, buffers, params},
                   {"scan_apply", blocks, buffers, params}};
    return plan;
  }

  std::string tolerance() const override { return "exact"; }

  std::vector<CaseSpec> certification_cases() const override {
    return element_cases(256, 1024, {"uniform", "small"}, 1024);
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    inputs.buffers["x"] = to_bytes(random_u32(spec.problem.elements, spec.value_profile, random));
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::uint64_t n = inputs.problem.elements;
    const std::vector<std::uint32_t> x = from_bytes<std::uint32_t>(inputs.buffers.at("x"), n);
    std::vector<std::uint32_t> expected(n);
    std::uint32_t running = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      expected[i] = running;
      running += x[i];
    }
    CaseVerdict verdict;
    verdict.report = compare_exact(expected, from_bytes<std::uint32_t>(outputs.at("y"), n));
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override { return {8 * problem.elements, 0}; }

  Problem tuning_problem(bool cpu_adapter) const override {
    return elements_problem(tuning_elements(cpu_adapter));
  }
};

}  // namespace

const KernelDefinition& scan_exclusive_u32_kernel() {
  static const ScanExclusiveU32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
