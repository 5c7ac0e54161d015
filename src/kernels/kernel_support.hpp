#pragma once
// Helpers shared by the kernel files: byte views, seeded value profiles, oracle comparisons and
// WGSL snippets. Internal to the kernels layer.

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge::kernels::support {

std::uint32_t float_bits(float value);
float bits_float(std::uint32_t bits);

// Large certification cases (tens of millions of elements) are drawn and checked on every core:
// [0, count) is cut into chunks of kChunkElements, run on up to hardware_concurrency threads.
inline constexpr std::size_t kChunkElements = std::size_t{1} << 20;
// Calls `work(begin, end, chunk)` for each chunk of [0, count), chunk = its index, on several
// threads at once; returns when all are done.
void for_each_chunk(std::size_t count,
                    const std::function<void(std::size_t, std::size_t, std::size_t)>& work);
// Seeds for `count` elements' chunks, drawn from `random` in order: what each chunk draws then
// depends on `random` alone, however the chunks are spread over threads.
std::vector<std::uint64_t> chunk_seeds(std::size_t count, std::mt19937_64& random);

// Copies `bytes` bytes from `from` to `to`, in chunks on every core: a tuning input is a gigabyte.
void copy_bytes(void* to, const void* from, std::size_t bytes);

template <typename T>
std::vector<std::byte> to_bytes(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  copy_bytes(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> from_bytes(const std::vector<std::byte>& bytes, std::size_t count) {
  std::vector<T> values(count);
  copy_bytes(values.data(), bytes.data(), std::min(bytes.size(), count * sizeof(T)));
  return values;
}

// Sorts ascending. Above a few ten thousand values, an LSD radix sort (four passes of 16 bits),
// several times faster than std::sort at the millions of values an oracle sorts.
void sort_u64(std::vector<std::uint64_t>& values);

// Rounds up to a multiple of `multiple` (> 0).
std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple);
std::uint64_t ceil_div(std::uint64_t value, std::uint64_t divisor);
// Bytes of a buffer read or written as array<vec4u> (or vec4<f32>) for n 4-byte elements: whole
// vectors, at least one.
std::uint64_t vec4_buffer_bytes(std::uint64_t n);
// vec4_buffer_bytes in words, for BufferSpec::size_rule.
inline constexpr const char* kVec4SizeRule = "n rounded up to a multiple of 4 elements, at least 4";

// f32 value profiles: "uniform" in [-1000, 1000], "small" in [-1, 1], "specials" (NaN, +-Inf,
// -0, subnormals, huge magnitudes mixed into uniform values), "positive" in [0, 1e6),
// "constant" (one value repeated).
std::vector<float> random_floats(std::size_t count, const std::string& profile,
                                 std::mt19937_64& random);
// u32 profiles: "uniform" (all 32 bits), "small" (< 1000), "equal" (one value), "sorted",
// "reversed", "top-bits" (only the high byte varies).
std::vector<std::uint32_t> random_u32(std::size_t count, const std::string& profile,
                                      std::mt19937_64& random);
// The same values as to_bytes(random_floats(...)) and to_bytes(random_u32(...)) from the same
// `random`, drawn straight into the bytes (on every core; a tuning input is a gigabyte).
std::vector<std::byte> random_float_bytes(std::size_t count, const std::string& profile,
                                          std::mt19937_64& random);
std::vector<std::byte> random_u32_bytes(std::size_t count, const std::string& profile,
                                        std::mt19937_64& random);
// random_u32's values of an unordered profile (not "sorted" nor "reversed") stored into the
// 4-byte words at `out`, `out + stride`, ... (`stride` in bytes): one word of wider elements.
void draw_u32_words(std::byte* out, std::size_t stride, std::size_t count,
                    const std::string& profile, std::mt19937_64& random);
// The bytes of u32 values 0, 1, ..., count - 1 (values that carry each element's position).
std::vector<std::byte> position_bytes(std::size_t count);
// The inputs of a kernel whose one input is u32 column "x" of the case's n elements, drawn with
// the case's profile from `seed`.
CaseInputs random_u32_column_inputs(const CaseSpec& spec, std::uint64_t seed);

// Element-by-element exact comparison of u32 outputs.
ComparisonReport compare_exact(std::span<const std::uint32_t> expected,
                               std::span<const std::uint32_t> actual);
// Bitwise comparison of f32 outputs (NaN matches NaN of any payload).
ComparisonReport compare_bitwise(std::span<const float> expected, std::span<const float> actual);
// |actual - expected| <= allowed_absolute[i] (NaN and infinities must match exactly).
ComparisonReport compare_within(std::span<const double> expected, std::span<const float> actual,
                                std::span<const double> allowed_absolute);

// The sizes every element-wise kernel is certified at, around `tile` (elements per workgroup)
// and `workgroup` (invocations), plus primes.
std::vector<std::uint64_t> edge_sizes(std::uint64_t workgroup, std::uint64_t tile);

// The smallest size that needs more than 65535 workgroups at `tile` elements each, capped so that
// one buffer of `element_bytes` elements fits `max_binding` bytes.
std::uint64_t many_workgroups_size(std::uint64_t tile, std::uint64_t element_bytes,
                                   std::uint64_t max_binding);

// Certification cases of an element-wise kernel: every edge size around `workgroup` and `tile`
// with every profile, then "many-workgroups": a size needing more than 65535 workgroups of
// `many_tile` elements (first profile).
std::vector<CaseSpec> element_cases(std::uint64_t workgroup, std::uint64_t tile,
                                    const std::vector<std::string>& profiles,
                                    std::uint64_t many_tile);

// A problem of n elements; `tuning_elements` gives the default tuning size of element-wise
// kernels (2^20 on a CPU adapter, 2^28 on a GPU).
Problem elements_problem(std::uint64_t n);
std::uint64_t tuning_elements(bool cpu_adapter);

// WGSL: `fn linear_workgroup(id, count) -> u32`, the linear index of a (possibly 2-D) grid.
extern const char* const kLinearWorkgroupWgsl;

// Note for all WGSL here: function-scope arrays are always given an explicit initializer
// (`var a = array<u32, 4>();`). A `var a: array<u32, 4>;` declared inside a loop was seen to keep
// the previous iteration's values on lavapipe instead of being zeroed at each iteration.

// Rows of a kernel's binding table (WgslBinding): binding 0 is always the uniform `params`.
WgslBinding params_binding(std::string struct_name);
WgslBinding storage_read(std::uint32_t binding, std::string name, std::string type);
WgslBinding storage_read_write(std::uint32_t binding, std::string name, std::string type);
// `row` marked as carrying the f32 values of its buffer as raw u32 bits (WgslBinding::f32_bits).
WgslBinding as_f32_bits(WgslBinding row);
// `row` also declared as `array<type>` under `name` (WgslBinding::views).
WgslBinding with_view(WgslBinding row, std::string name, std::string type);
// WGSL: one `@group(0) @binding(i) var<...> name: ...;` line per row, in the table's order.
std::string binding_declarations(const std::vector<WgslBinding>& table);

// How a schedule's values enter a kernel's WGSL: as named constants that the kernel's WGSL modules
// (raw strings) refer to, never spliced into a line of them.
struct WgslConstant {
  std::string name;
  std::uint32_t value = 0;
  std::string comment;  // optional, written after the declaration
};
// WGSL: one `const NAME: u32 = VALUEu;` line per constant, in order.
std::string constant_declarations(const std::vector<WgslConstant>& constants);

// The lines of WGSL a generator unrolls (what no module can say: one statement per register),
// each indented by `depth` levels of two spaces.
class WgslLines {
 public:
  explicit WgslLines(std::size_t depth) : indent_(2 * depth, ' ') {}
  void line(const std::string& statement) { text_ += indent_ + statement + "\n"; }
  const std::string& text() const { return text_; }

 private:
  std::string indent_;
  std::string text_;
};

// WGSL: `body` (statements, indented for a loop body) once for each `index` in [0, count), each
// copy a block that declares `const index = i` first. Dawn clamps every array index it cannot
// prove in bounds; a constant index needs no clamp. Unrolling the radix scatter's loops over its
// per-invocation key arrays this way took its 4 rounds of 2^28 keys on the H200 from 11.87 to
// 9.92 ms (docs/performance.md, eighth session).
std::string unrolled_loop(const std::string& index, std::uint32_t count, const std::string& body);
// `wgsl` with each line indented by `depth` levels of two spaces more.
std::string indented(const std::string& wgsl, std::size_t depth);

}  // namespace wgsl_forge::kernels::support

namespace wgsl_forge::kernels::support {

// WGSL: `fn workgroup_exclusive_scan(value: u32, local: u32) -> vec2u` (exclusive prefix, total)
// over a workgroup of `WG` invocations (a `const WG: u32` the caller declares), in workgroup
// memory.
extern const char* const kWorkgroupScanWgsl;

// A chained scan over u32 items, four per vec4 of input, `vectors` vec4 per invocation: one pass
// with decoupled look-back (and its fallback) or three passes (chained_scan.cpp says how).
struct ChainedScanShape {
  std::uint32_t workgroup_size = 256;
  std::uint32_t vectors = 1;
  bool subgroups = false;
  // Predecessors read at once by the workgroup's look-back (at most one per invocation): a wide
  // window reaches a published prefix in fewer steps, a narrow one polls the L2 cache less. With
  // subgroups the first subgroup looks back, one predecessor per lane, and this stays 32.
  std::uint32_t look_back_window = 32;
  // 1: the single pass with decoupled look-back; 3: reduce-then-scan (tile sums, their scan by
  // one workgroup, then each tile again), which reads the input twice but never waits.
  std::uint32_t passes = 1;
  // The single pass's tile order: claimed from a counter (a round trip to memory before the
  // tile's loads), or the workgroup's id (relying on workgroups starting in order, else on the
  // look-back's fallback).
  bool claim_tiles = true;
  // Whether the tile's items are stored (scan_store, tile_prefix 0) before its look-back, into
  // workgroup memory that scan_finish_tile moves out after it: the tile's values then need no
  // registers while the tile waits for its prefix.
  bool stage_tile = false;
  // With subgroups: predecessors per lane that the look-back's subgroup reads at once (its window
  // is lanes * look_back_rows). More rows reach a published prefix in fewer round trips to memory.
  std::uint32_t look_back_rows = 1;
  // Whether the tiles before the last store without a bounds test per vector, behind one
  // workgroup-uniform branch on the tile (the last tile keeps the tests).
  bool bounds_per_tile = false;
  // With subgroups: whether the look-back step that reaches a prefix also publishes the
  // prefixes of the tiles it passed, so that later look-backs stop nearer.
  bool look_back_publishes = false;
};

// The knobs of a kernel on the chained scan, in order: its own `workgroup_size` (compaction
// leaves out 1024), then vectors_per_invocation, use_subgroups, look_back_window, passes,
// claim_tiles, look_back_rows, bounds_per_tile and look_back_publishes, the same in every such
// kernel.
std::vector<KnobSpec> chained_scan_knobs(const KnobSpec& workgroup_size);
// The shape those knobs of `schedule` give (stage_tile false: staging is the kernel's own knob).
ChainedScanShape chained_scan_shape(const Schedule& schedule, const KnobSpec& workgroup_size);

// The whole WGSL module. `declarations` must define the uniform `params` with fields n (elements)
// and tiles (chained_scan_tiles), `x: array<vec4u>` (raw input, at least ceil(n / 4) vectors),
// `chain: array<ChainWord>` (1 + 2 tiles words of scratch; ChainWord is defined here), and
//   const PAD: u32                                    the raw value of elements at or past n,
//                                                     whose item must be 0;
//   fn scan_items(raw: vec4u) -> vec4u                the items of four elements, without
//                                                     branches: subgroup scans follow it, and
//                                                     after a divergent early return in it the
//                                                     H200's driver scanned wrong sums;
//   fn scan_store(v: u32, raw: vec4u, items: vec4u, tile_prefix: u32, offset: u32)
//                                                     vector v, whose first element's exclusive
//                                                     prefix is tile_prefix + offset (offset:
//                                                     within the tile; tile_prefix is 0 when
//                                                     the shape stages the tile);
//   fn scan_finish_tile(tile_prefix: u32, tile_total: u32, local: u32)
//                                                     called by every invocation after its
//                                                     stores, in uniform control flow (it may
//                                                     use barriers);
//   fn scan_total(total: u32)                         the sum of all items (called once).
std::string chained_scan_wgsl(const ChainedScanShape& shape, const std::string& declarations);
// An error naming the knobs when the scan's workgroup memory plus the caller's `caller_bytes`
// exceed the device's limit.
Status check_chained_scan_resources(const ChainedScanShape& shape, std::uint64_t caller_bytes,
                                    const DeviceCapabilities& device);
// Tiles of a problem of n elements (at least one, so that scan_total is always called).
std::uint64_t chained_scan_tiles(std::uint64_t n, const ChainedScanShape& shape);
// Certification cases (KernelDefinition::schedule_cases) of `profile` just past the shape's
// second level: more tiles than one look-back window takes (one pass; with subgroups the window
// is look_back_rows subgroups, at most 32 lanes each), or than the spine's workgroup has
// invocations (three passes). None
// when the input would pass the device's binding limit.
std::vector<CaseSpec> chained_scan_level_cases(const ChainedScanShape& shape,
                                               const std::string& profile,
                                               const DeviceCapabilities& device);
// The entry points the shape's passes dispatch, in order: scan_clear and scan_tiles, or
// scan_reduce, scan_spine and scan_apply (the same names for every kernel on the chained scan).
std::vector<std::string> chained_scan_entry_points(const ChainedScanShape& shape);
// The passes: clear the chain and scan the tiles, or reduce, spine and apply.
std::vector<PassPlan> chained_scan_passes(const ChainedScanShape& shape, std::uint64_t tiles,
                                          const std::map<std::uint32_t, std::string>& buffers,
                                          const std::vector<std::uint32_t>& params);

}  // namespace wgsl_forge::kernels::support
