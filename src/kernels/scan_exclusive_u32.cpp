// scan_exclusive_u32: y[i] = x[0] + ... + x[i-1], wrapping (y[0] = 0).
//
// A chained scan (chained_scan.cpp): by default a single pass in which each workgroup scans a
// tile of workgroup_size * vectors_per_invocation * 4 elements in registers and takes its offset
// from its predecessors by decoupled look-back, so x is read once and y written once. Knobs:
// workgroup_size, vectors_per_invocation (vec4 each), use_subgroups (warp-striped tiles scanned
// by subgroup operations, the first subgroup looking back; otherwise blocked tiles and a scan in
// workgroup memory), look_back_window (without subgroups), passes (1, or 3 for reduce-then-scan,
// which reads x twice but never waits for another workgroup), claim_tiles (single pass: a tile
// claimed from a counter, or the workgroup's id), look_back_rows (with subgroups: predecessors
// per lane read at once by the look-back), look_back_publishes (with subgroups: the look-back
// also publishes the prefixes of the tiles it passed), bounds_per_tile (the tiles before the
// last store without a bounds test per vector).
//
// Oracle: the sequential wrapping scan; exact. Bytes moved: 8 n (read x, write y).

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512, 1024}, 256};

const char* const kParamsWgsl = R"(struct Params { n: u32, tiles: u32 }
)";

// The chained scan's items are the values; each output vector is its prefix plus the
// exclusive scan within the vector.
const char* const kScanWgsl = R"(
const PAD: u32 = 0u;
fn scan_items(raw: vec4u) -> vec4u { return raw; }
fn scan_store(v: u32, raw: vec4u, items: vec4u, tile_prefix: u32, offset: u32) {
  y[v] = tile_prefix + offset +
         vec4u(0u, items.x, items.x + items.y, items.x + items.y + items.z);
}
fn scan_finish_tile(tile_prefix: u32, tile_total: u32, local: u32) {}
fn scan_total(total: u32) {}
)";

class ScanExclusiveU32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "scan_exclusive_u32"; }
  std::uint32_t revision() const override { return 5; }
  std::string_view summary() const override {
    return "y[i] = x[0] + ... + x[i-1] (exclusive prefix sum, wrapping u32)";
  }

  std::vector<KnobSpec> knobs() const override { return chained_scan_knobs(kWorkgroupSize); }

  Status check_resources(const Schedule& schedule,
                         const DeviceCapabilities& device) const override {
    return check_chained_scan_resources(shape(schedule), 0, device);
  }

  std::vector<WgslBinding> wgsl_bindings(const Schedule&) const override {
    return {params_binding("Params"), storage_read(1, "x", "vec4u"),
            storage_read_write(2, "y", "vec4u"), storage_read_write(3, "chain", "ChainWord")};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {{"x", ElementType::kU32, BufferRole::kInput, kVec4SizeRule},
            {"y", ElementType::kU32, BufferRole::kOutput, kVec4SizeRule},
            {"chain", ElementType::kU32, BufferRole::kScratch, "1 + 2 tiles elements"}};
  }

  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    return chained_scan_entry_points(shape(schedule));
  }

  std::string generate_wgsl(const Schedule& schedule) const override {
    return chained_scan_wgsl(
        shape(schedule),
        std::string(kParamsWgsl) + binding_declarations(wgsl_bindings(schedule)) + kScanWgsl);
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t n = problem.elements;
    const std::uint64_t tiles = chained_scan_tiles(n, shape(schedule));
    // Whole vectors: the last one's elements past n are read as 0 and written past y[n - 1].
    const std::uint64_t vector_bytes = vec4_buffer_bytes(n);
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(
        buffer_specs(), {{"x", vector_bytes}, {"y", vector_bytes}, {"chain", (1 + 2 * tiles) * 4}});
    plan.passes =
        chained_scan_passes(shape(schedule), tiles, {{1, "x"}, {2, "y"}, {3, "chain"}},
                            {static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(tiles)});
    return plan;
  }

  std::string tolerance() const override { return "exact"; }

  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities& device) const override {
    return chained_scan_level_cases(shape(schedule), "small", device);
  }

  std::vector<CaseSpec> certification_cases() const override {
    return element_cases(256, 1024, {"uniform", "small"}, 1024);
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    return random_u32_column_inputs(spec, seed);
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

  // The H200's (driver 580.159.04) fastest in docs/performance.md: 1024 x 4 with claims (2.81 TB/s,
  // the table's row) and 512 x 4 by workgroup id (2.91 TB/s in the s14 calls 2 and 3).
  std::vector<std::string> starting_points() const override {
    return {"workgroup_size=1024,vectors_per_invocation=4,use_subgroups=1,claim_tiles=1",
            "workgroup_size=512,vectors_per_invocation=4,use_subgroups=1,claim_tiles=0"};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    return elements_problem(tuning_elements(cpu_adapter));
  }

 private:
  static ChainedScanShape shape(const Schedule& schedule) {
    return chained_scan_shape(schedule, kWorkgroupSize);
  }
};

}  // namespace

const KernelDefinition& scan_exclusive_u32_kernel() {
  static const ScanExclusiveU32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
