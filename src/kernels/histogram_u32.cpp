// histogram_u32: counts[b] = number of i with x[i] % bins == b, for bins from 1 to 4096.
//
// Passes: "clear" zeroes the counts, "count" adds every element. The input is read as vec4 in
// chunks of workgroup_size * vectors_per_invocation vectors (each invocation's vectors
// `workgroup_size` apart, so that loads are coalesced); each workgroup takes
// chunks_per_workgroup consecutive chunks, which divides the cost of clearing and flushing its
// private histograms (and the contention of the flush's global atomics on the same few bins) by
// that many. private_copies: 0 adds straight to the global counts with atomics; 1 or 2 count into
// that many copies of the histogram in workgroup memory (the invocations spread over them to cut
// contention; up to 4096 bins, 16 KiB per copy), then add the non-zero bins to the global counts.
// A power-of-two bin count takes a mask instead of the modulo. The default (one private copy, 16
// chunks per workgroup) needs 16 KiB of workgroup memory, WebGPU's guaranteed minimum: global
// atomics alone run 250 times slower on the H200 (docs/performance.md).
//
// Oracle: the sequential count; exact, and the counts must sum to n. Bytes moved: 4 n.

#include <numeric>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

constexpr std::uint32_t kMaxBins = 4096;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512, 1024}, 256};
const KnobSpec kVectorsPerInvocation{
    "vectors_per_invocation", "vec4 per invocation and chunk", {1, 2, 4}, 1};
const KnobSpec kChunksPerWorkgroup{
    "chunks_per_workgroup", "consecutive chunks per workgroup", {1, 4, 16, 64}, 16};
const KnobSpec kPrivateCopies{"private_copies",
                              "histogram copies in workgroup memory (0: global atomics only)",
                              {0, 1, 2},
                              1};

const char* const kParamsWgsl = R"(
struct Params { n: u32, bins: u32, bins_mask: u32 }
)";

const char* const kHistogramWgsl = R"(
// bins_mask is bins - 1 when bins is a power of two above 1, else 0.
fn bin_of(value: u32) -> u32 {
  if (params.bins_mask != 0u) { return value & params.bins_mask; }
  return value % params.bins;
}

@compute @workgroup_size(WG)
fn clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups) * WG + local;
  if (b < params.bins) { atomicStore(&counts[b], 0u); }
}
)";

// The counters `count` adds to: start_counting and finish_counting are called in uniform
// control flow before and after the workgroup's keys. Without copies, every key is an atomic on
// the output's counters.
const char* const kGlobalCountersWgsl = R"(
fn start_counting(local: u32) {}
fn add(bin: u32, local: u32) { atomicAdd(&counts[bin], 1u); }
fn finish_counting(local: u32) {}
)";

// With COPIES copies in workgroup memory (invocation `local` adds to copy local % COPIES), each
// workgroup adds its totals to the output's counters at the end, one atomic per non-zero bin.
const char* const kWorkgroupCountersWgsl = R"(
var<workgroup> local_counts: array<atomic<u32>, COPIES * MAX_BINS>;
fn start_counting(local: u32) {
  for (var b = local; b < COPIES * params.bins; b += WG) {
    atomicStore(&local_counts[b], 0u);
  }
  workgroupBarrier();
}
fn add(bin: u32, local: u32) {
  atomicAdd(&local_counts[(local % COPIES) * params.bins + bin], 1u);
}
fn finish_counting(local: u32) {
  workgroupBarrier();
  for (var b = local; b < params.bins; b += WG) {
    var total = 0u;
    for (var c = 0u; c < COPIES; c++) {
      total += atomicLoad(&local_counts[c * params.bins + b]);
    }
    if (total != 0u) { atomicAdd(&counts[b], total); }
  }
}
)";

const char* const kCountWgsl = R"(
@compute @workgroup_size(WG)
fn count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         @builtin(local_invocation_index) local: u32) {
  start_counting(local);
  let vectors = (params.n + 3u) / 4u;
  let first_chunk = linear_workgroup(group, groups) * CHUNKS;
  for (var c = 0u; c < CHUNKS; c++) {
    let base = (first_chunk + c) * (WG * VECTORS) + local;
    for (var k = 0u; k < VECTORS; k++) {
      let v = base + k * WG;
      if (v < vectors) {
        let value = x[v];
        let first = v * 4u;
        add(bin_of(value.x), local);
        if (first + 1u < params.n) { add(bin_of(value.y), local); }
        if (first + 2u < params.n) { add(bin_of(value.z), local); }
        if (first + 3u < params.n) { add(bin_of(value.w), local); }
      }
    }
  }
  finish_counting(local);
}
)";

class HistogramU32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "histogram_u32"; }
  std::uint32_t revision() const override { return 2; }
  std::string_view summary() const override { return "counts of x[i] % bins, bins from 1 to 4096"; }

  std::vector<KnobSpec> knobs() const override {
    return {kWorkgroupSize, kVectorsPerInvocation, kChunksPerWorkgroup, kPrivateCopies};
  }

  Status check_resources(const Schedule& schedule,
                         const DeviceCapabilities& device) const override {
    const std::uint32_t copies = knob(schedule, kPrivateCopies);
    const std::uint64_t bytes = std::uint64_t{copies} * kMaxBins * 4;
    if (bytes > device.max_workgroup_storage_size) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob private_copies (" + std::to_string(copies) + ") needs " +
                       std::to_string(bytes) +
                       " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                       std::to_string(device.max_workgroup_storage_size) + ").");
    }
    return Ok{};
  }

  std::vector<WgslBinding> wgsl_bindings(const Schedule&) const override {
    return {params_binding("Params"), storage_read(1, "x", "vec4u"),
            storage_read_write(2, "counts", "atomic<u32>")};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {{"x", ElementType::kU32, BufferRole::kInput, kVec4SizeRule},
            {"counts", ElementType::kU32, BufferRole::kOutput, "bins elements"}};
  }

  std::vector<std::string> entry_points(const Schedule&) const override {
    return {"clear", "count"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override {
    const std::uint32_t copies = knob(schedule, kPrivateCopies);
    return std::string(kLinearWorkgroupWgsl) + kParamsWgsl +
           binding_declarations(wgsl_bindings(schedule)) + "\n" +
           constant_declarations(
               {{"WG", knob(schedule, kWorkgroupSize), "invocations per workgroup"},
                {"VECTORS", knob(schedule, kVectorsPerInvocation),
                 "vec4u per invocation and chunk"},
                {"CHUNKS", knob(schedule, kChunksPerWorkgroup), "chunks per workgroup"},
                {"COPIES", copies, "workgroup copies of the counters (0: none)"},
                {"MAX_BINS", kMaxBins, ""}}) +
           kHistogramWgsl + (copies == 0 ? kGlobalCountersWgsl : kWorkgroupCountersWgsl) +
           kCountWgsl;
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    if (problem.bins < 1 || problem.bins > kMaxBins) {
      return Error(ErrorKind::kInvalidInput,
                   "Bin count (" + std::to_string(problem.bins) + ") is outside 1..4096.");
    }
    const std::uint64_t n = problem.elements;
    const std::uint64_t wg = knob(schedule, kWorkgroupSize);
    const std::uint64_t per_workgroup =
        wg * knob(schedule, kVectorsPerInvocation) * 4 * knob(schedule, kChunksPerWorkgroup);
    const bool power_of_two = problem.bins > 1 && (problem.bins & (problem.bins - 1)) == 0;
    const std::vector<std::uint32_t> params = {static_cast<std::uint32_t>(n), problem.bins,
                                               power_of_two ? problem.bins - 1 : 0};
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(
        buffer_specs(), {{"x", vec4_buffer_bytes(n)}, {"counts", std::uint64_t{problem.bins} * 4}});
    plan.passes = {{"clear", ceil_div(problem.bins, wg), {{1, "x"}, {2, "counts"}}, params},
                   {"count", ceil_div(n, per_workgroup), {{1, "x"}, {2, "counts"}}, params}};
    return plan;
  }

  std::string tolerance() const override { return "exact; counts sum to n"; }

  std::vector<CaseSpec> certification_cases() const override {
    std::vector<CaseSpec> cases;
    for (std::uint32_t bins : {1u, 7u, 256u, 4096u}) {
      for (std::uint64_t n : edge_sizes(256, 1024)) {
        Problem problem;
        problem.elements = n;
        problem.bins = bins;
        const char* profile = n % 2 == 0 ? "uniform" : "equal";
        cases.push_back({"bins=" + std::to_string(bins) + " n=" + std::to_string(n) + " " + profile,
                         problem, profile});
      }
    }
    Problem many;
    many.elements = many_workgroups_size(256, 4, 128u << 20);
    many.bins = 256;
    cases.push_back(
        {"many-workgroups bins=256 n=" + std::to_string(many.elements), many, "uniform"});
    return cases;
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    return random_u32_column_inputs(spec, seed);
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::uint64_t n = inputs.problem.elements;
    const std::uint32_t bins = inputs.problem.bins;
    const std::vector<std::uint32_t> x = from_bytes<std::uint32_t>(inputs.buffers.at("x"), n);
    std::vector<std::uint32_t> expected(bins, 0);
    for (std::uint32_t value : x) ++expected[value % bins];
    const std::vector<std::uint32_t> counts = from_bytes<std::uint32_t>(outputs.at("counts"), bins);
    CaseVerdict verdict;
    verdict.report = compare_exact(expected, counts);
    const std::uint64_t total = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
    if (total != n) {
      verdict.failed_checks.push_back("counts sum to " + std::to_string(total) +
                                      ", not n = " + std::to_string(n));
    }
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override { return {4 * problem.elements, 0}; }

  // The H200's (driver 580.159.04) budget-8 winner, 3.9 TB/s at 256 bins (docs/performance.md).
  std::vector<std::string> starting_points() const override {
    return {
        "workgroup_size=1024,vectors_per_invocation=1,chunks_per_workgroup=16,private_copies=1"};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem = elements_problem(tuning_elements(cpu_adapter));
    problem.bins = 256;
    return problem;
  }
};

}  // namespace

const KernelDefinition& histogram_u32_kernel() {
  static const HistogramU32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
