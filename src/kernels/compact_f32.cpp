// compact_f32: the x[i] with x[i] > threshold, in input order, and their count.
//
// Stream compaction as a chained scan over keep-flags (chained_scan.cpp, whose knobs it shares:
// one pass or three, with or without subgroups): each workgroup counts its tile's kept elements,
// takes its offset (by decoupled look-back, or from the scanned tile sums) and stores
// them; the scan's total is the count. With stage_kept 1 the tile's kept values gather in
// workgroup memory before the look-back, in order, and go out in coalesced stores after it.
// Values move as raw bits, and the comparison uses order-preserving integer keys (kept_keys),
// so results are exact whatever the adapter does with subnormals.
// Semantics: IEEE `>` (so -0 > +0 is false); NaN is never kept; a NaN threshold keeps nothing.
// Knobs: workgroup_size, vectors_per_invocation (vec4 each), use_subgroups, look_back_window,
// passes, claim_tiles, look_back_rows, look_back_publishes, bounds_per_tile, stage_kept (staging
// costs workgroup memory, hence resident tiles, and a barrier, and frees the tile's registers
// during the look-back; the tuner decides).
//
// Oracle: the sequential filter; the count and the first `count` outputs must match bit for bit
// (the rest of y is unspecified). Bytes moved: 6 n (4 n read, 4 bytes per kept element, counted
// with half of them kept).

#include <cmath>
#include <cstring>
#include <limits>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

std::uint32_t order_key(float value) {
  std::uint32_t bits = float_bits(value);
  if (bits == 0x80000000u) bits = 0;  // -0 compares equal to +0
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

bool kept(float value, float threshold) { return value > threshold; }

// The kernel keeps x when key - low < span (unsigned), key being x's bits with the sign bit
// flipped, or all bits flipped when it is set: the keys above the threshold's, up to +inf's.
// -0's key is one below +0's; a -0 threshold takes +0's, so that -0 and +0 compare alike. NaN
// keys lie beyond the infinities, so a NaN is never kept, and a NaN threshold keeps nothing.
struct KeptKeys {
  std::uint32_t low;
  std::uint32_t span;
};
KeptKeys kept_keys(float threshold) {
  constexpr std::uint32_t kInfinityKey = 0xff800000u;
  if (std::isnan(threshold)) return {0, 0};
  const std::uint32_t key = order_key(threshold);
  return {key + 1, key < kInfinityKey ? kInfinityKey - key : 0};
}

const char* const kParamsWgsl =
    R"(struct Params { n: u32, tiles: u32, keep_low: u32, keep_span: u32 }
)";

// The chained scan's items: 1 for a kept value (see kept_keys), computed without a branch.
const char* const kKeepWgsl = R"(
const PAD: u32 = 0x7fffffffu;  // a NaN, never kept
fn scan_items(raw: vec4u) -> vec4u {
  let key = raw ^ (bitcast<vec4u>(bitcast<vec4i>(raw) >> vec4u(31u)) | vec4u(0x80000000u));
  return select(vec4u(0u), vec4u(1u), key - vec4u(params.keep_low) < vec4u(params.keep_span));
}
)";

const char* const kCountWgsl = R"(fn scan_total(total: u32) { count[0] = total; }
)";

// The tile's kept values gather in workgroup memory before the look-back (offsets within the
// tile), so that they go out in coalesced stores after it.
const char* const kStagedStoreWgsl =
    R"(var<workgroup> staged: array<u32, TILE_VECTORS * 4u>;
fn scan_store(v: u32, raw: vec4u, items: vec4u, tile_prefix: u32, offset: u32) {
  var at = offset;
  for (var c = 0u; c < 4u; c++) {
    if (items[c] != 0u) { staged[at] = raw[c]; }
    at += items[c];
  }
}
fn scan_finish_tile(tile_prefix: u32, tile_total: u32, local: u32) {
  workgroupBarrier();
  for (var i = local; i < tile_total; i += WG) { y[tile_prefix + i] = staged[i]; }
}
)";

// Each invocation stores its kept values where they belong, and stores every element of a
// vector that keeps any: on the H200, revision 6's stores, each under a condition, took the
// kernel 1.04-1.06 ms, revision 7's 0.80 ms (512 x 4 by id; docs/performance.md, ninth session,
// has the other store forms timed). An element not kept is stored where the vector's next kept
// element goes, which this invocation overwrites after it, or, past the last kept element, as
// that element again: never where another invocation stores, so no two invocations race.
const char* const kDirectStoreWgsl =
    R"(fn scan_store(v: u32, raw: vec4u, items: vec4u, tile_prefix: u32, offset: u32) {
  let kept = sum4(items);
  if (kept == 0u) { return; }
  let at = tile_prefix + offset;
  let last = select(select(select(raw.x, raw.y, items.y != 0u), raw.z, items.z != 0u), raw.w,
                    items.w != 0u);
  var kept_before = 0u;  // of the vector's elements before element c
  for (var c = 0u; c < 4u; c++) {
    y[at + min(kept_before, kept - 1u)] = select(raw[c], last, kept_before == kept);
    kept_before += items[c];
  }
}
fn scan_finish_tile(tile_prefix: u32, tile_total: u32, local: u32) {}
)";

// No workgroups of 1024: on the H200 (driver 580.159.04) those with subgroups and 2 or more
// vectors per invocation took over 33 s to certify or gave wrong counts for single tiles, by
// workgroup id or claimed (docs/measurements/2026-12-01-h200-s16-call6-1024.txt), while the
// scan's kernel of the same shape certified in 3 s; 1024 never timed fastest.
const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512}, 256};
const KnobSpec kStageKept{
    "stage_kept", "gather kept values in workgroup memory before storing", {0, 1}, 1};

class CompactF32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "compact_f32"; }
  std::uint32_t revision() const override { return 8; }
  std::string_view summary() const override {
    return "the x[i] > threshold, in input order, and their count";
  }

  std::vector<KnobSpec> knobs() const override {
    std::vector<KnobSpec> knobs = chained_scan_knobs(kWorkgroupSize);
    knobs.push_back(kStageKept);
    return knobs;
  }

  // The staged tile (16 bytes per vector) must fit next to the scan's own workgroup memory.
  Status check_resources(const Schedule& schedule,
                         const DeviceCapabilities& device) const override {
    const ChainedScanShape scan = shape(schedule);
    const std::uint64_t staged = knob(schedule, kStageKept) == 1
                                     ? std::uint64_t{scan.workgroup_size} * scan.vectors * 16
                                     : 0;
    return check_chained_scan_resources(scan, staged, device);
  }

  std::vector<WgslBinding> wgsl_bindings(const Schedule&) const override {
    return {params_binding("Params"), as_f32_bits(storage_read(1, "x", "vec4u")),
            as_f32_bits(storage_read_write(2, "y", "u32")),
            storage_read_write(3, "chain", "ChainWord"), storage_read_write(4, "count", "u32")};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {{"x", ElementType::kF32, BufferRole::kInput, kVec4SizeRule},
            {"y", ElementType::kF32, BufferRole::kOutput, "n elements, at least 1"},
            {"count", ElementType::kU32, BufferRole::kOutput, "1 element"},
            {"chain", ElementType::kU32, BufferRole::kScratch, "1 + 2 tiles elements"}};
  }

  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    return chained_scan_entry_points(shape(schedule));
  }

  std::string generate_wgsl(const Schedule& schedule) const override {
    return chained_scan_wgsl(
        shape(schedule),
        std::string(kParamsWgsl) + binding_declarations(wgsl_bindings(schedule)) + kKeepWgsl +
            (knob(schedule, kStageKept) == 1 ? kStagedStoreWgsl : kDirectStoreWgsl) + kCountWgsl);
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t n = problem.elements;
    const std::uint64_t tiles = chained_scan_tiles(n, shape(schedule));
    const KeptKeys keys = kept_keys(problem.threshold);
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(buffer_specs(), {{"x", vec4_buffer_bytes(n)},
                                                      {"y", std::max<std::uint64_t>(4, n * 4)},
                                                      {"count", 4},
                                                      {"chain", (1 + 2 * tiles) * 4}});
    plan.passes = chained_scan_passes(
        shape(schedule), tiles, {{1, "x"}, {2, "y"}, {3, "chain"}, {4, "count"}},
        {static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(tiles), keys.low, keys.span});
    return plan;
  }

  std::string tolerance() const override { return "exact (count and kept bits)"; }

  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities& device) const override {
    return chained_scan_level_cases(shape(schedule), "uniform", device);
  }

  std::vector<CaseSpec> certification_cases() const override {
    return element_cases(256, 1024, {"uniform", "specials"}, 1024);
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    // Thresholds that keep about half, almost all, almost none, the signed zeros, and the ends
    // of the order (all but NaN and -inf, nothing, nothing).
    const float thresholds[] = {0.0f,
                                -0.0f,
                                -999.0f,
                                999.0f,
                                std::uniform_real_distribution<float>(-1000, 1000)(random),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN()};
    inputs.problem.threshold = thresholds[random() % std::size(thresholds)];
    std::vector<std::byte> x =
        random_float_bytes(spec.problem.elements, spec.value_profile, random);
    // The NaNs nearest the infinities, whose keys border +inf's and -inf's (kept_keys), as raw
    // bits: float arithmetic could quiet them.
    if (spec.value_profile == "specials" && !x.empty()) {
      for (const std::uint32_t bits : {0x7f800001u, 0xff800001u}) {
        std::memcpy(&x[(random() % spec.problem.elements) * 4], &bits, 4);
      }
    }
    inputs.buffers["x"] = std::move(x);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::uint64_t n = inputs.problem.elements;
    const std::vector<float> x = from_bytes<float>(inputs.buffers.at("x"), n);
    std::vector<std::uint32_t> expected;
    for (float value : x) {
      if (kept(value, inputs.problem.threshold)) expected.push_back(float_bits(value));
    }
    const std::uint32_t count = from_bytes<std::uint32_t>(outputs.at("count"), 1)[0];
    CaseVerdict verdict;
    if (count != expected.size()) {
      verdict.failed_checks.push_back("count is " + std::to_string(count) + ", expected " +
                                      std::to_string(expected.size()));
    }
    verdict.report = compare_exact(
        expected, from_bytes<std::uint32_t>(outputs.at("y"), std::min<std::uint64_t>(count, n)));
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override { return {6 * problem.elements, 0}; }

  // The H200's (driver 580.159.04) fastest, 2.0 TB/s with revision 7 (docs/performance.md).
  std::vector<std::string> starting_points() const override {
    return {
        "workgroup_size=512,vectors_per_invocation=4,use_subgroups=1,claim_tiles=0,stage_kept=0"};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    return elements_problem(tuning_elements(cpu_adapter));
  }

 private:
  static ChainedScanShape shape(const Schedule& schedule) {
    ChainedScanShape scan = chained_scan_shape(schedule, kWorkgroupSize);
    scan.stage_tile = knob(schedule, kStageKept) == 1;
    return scan;
  }
};

}  // namespace

const KernelDefinition& compact_f32_kernel() {
  static const CompactF32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
