// group_by_sum_f32: GROUP BY key, SUM(value), COUNT(*) over n rows of u32 keys and f32 values:
// each distinct key once, with the sum of its values and its row count, in no particular order,
// and the number of distinct keys.
//
// WebGPU has no f32 atomics, and a compare-exchange loop on an f32 sum's bits costs about 100
// compute-unit cycles a row on the H200 (revision 2). So sums are fixed point, added by u32
// atomicAdd alone: every finite value is rounded to an integer multiple of 2^-k, a scale chosen
// from the data, and the integers are summed exactly in 64 bits; "emit" rounds each sum to f32
// once. Integer addition is associative, so a group's sum does not depend on the order of its
// rows, the schedule or the adapter: only the order of the output rows varies between runs.
//
// Passes: "clear" empties an open-addressing table of `capacity` slots (the smallest power of two
// at least table_factor * max_groups, at least 2; max_groups is the caller's bound on distinct
// keys, n when not given) and its largest-value word, "scale" finds the largest finite |value|
// (u32 atomicMax on the bits of |value|, which order as the values do), "aggregate" adds every
// row to its key's slot, "emit" appends every occupied slot to the outputs (each workgroup's
// occupied slots in one range, taken by one atomic). A global slot is four words: key, count,
// and the sum's low and high words; the empty key is 0xffffffff, so the key 0xffffffff has one
// extra slot (index capacity), and a slot is occupied when its count is not 0. Keys claim slots
// by compare-exchange on the key word, searched from fmix32(key) in triangular steps (1, 2, 3,
// ...: every slot of a power-of-two table); only a load that finds the empty key tries the
// exchange.
//
// The scale: with e the biased exponent of the largest finite |value| (0 when there is none) and
// top = max(e, 1), k = 150 - top, so every |value| 2^k < 2^24 (2^k from 2^-104, for values near
// 2^128, to 2^149, where subnormals are exact). A row adds round(value 2^k) + 2^24, an integer in
// [0, 2^25], so sums only grow and a sum's high word changes only on a carry out of its low word
// (about one row in 256): the low word's atomicAdd returns the old word, old + x < old is the
// carry, and only then is the high word added to. The count word tells how many 2^24 to take
// away at the end; n < 2^32 rows keep a sum below 2^57. The integer comes from the value's bits
// (no float arithmetic, so an adapter that flushes subnormals to zero rounds the same), rounded
// half away from zero.
//
// "aggregate" cuts the rows into tiles of workgroup_size * rows_per_invocation rows. With
// persistent_workgroups 0 it runs one workgroup per tile; with P > 0 it runs at most P workgroups,
// each taking tiles P apart (a grid-stride loop), so that each workgroup's table is cleared and
// added to the global one once for many tiles rather than once per tile. "scale" runs the same
// grid over the same rows.
//
// With local_slots > 0 each workgroup first aggregates its rows in a table of that many slots in
// workgroup memory (the histogram's workgroup-private path: with a few thousand groups most rows
// never touch global memory). A local slot is three words, key, counts and the sum's low word, so
// that 4096 slots fit 48 KiB; the carries out of a local low word are counted beside the slot's
// rows, and added to the key's global high word every 256 and at the end. A row searches at most
// params.local_probes slots there: every slot when max_groups <= local_slots / 2 (each key then
// finds room in every workgroup, so no row goes to the contended global slots of few groups, and
// the table's load stays at most 1/2; only with more keys than max_groups, the error, does a row
// search all local_slots slots in vain), else LOCAL_PROBES (so that with many groups a row whose
// key finds no room wastes few steps; a whole-table search at load 1, 4096 groups in 4096 slots,
// ran at 2.2 G rows/s on the H200, searches of hundreds of slots with a warp waiting for its
// longest); a row whose key finds no room goes to the global table at once. At the end the
// workgroup adds each occupied local slot to the global table, starting at a slot drawn from its
// workgroup index so that workgroups that finish together add to different global slots. The key
// 0xffffffff has no local slot (it is the empty key there too): its rows add up in registers and
// then in the workgroup, and reach the global table once per workgroup. With local_slots 0 every
// row goes to the global table. probe_window W > 1 searches the workgroup table W consecutive slots
// at a time (their key words loaded together) instead of slot by slot. interleave_rows 1 searches,
// adds and carries an invocation's ROWS rows of a tile together, in the workgroup table or
// (local_slots 0) the global one, so that their loads and atomics are in flight at once.
//
// With key_partitions P > 1 the aggregate pass runs P times, pass p adding only the rows whose
// key's hash (its top 16 bits scaled to [0, P)) is p, so that each workgroup table holds about
// max_groups / P keys: the whole-table search (above) applies while max_groups <= P local_slots
// / 2. Without workgroup tables (local_slots 0) pass p adds the keys whose home slot lies in
// the p-th part of the global table instead, so that a pass works in one part of it (revision
// 6; revision 5 split by the hash's top bits there too). Each row is still added once; the rows
// are read P times.
//
// Values that are not finite: a NaN, +infinity or -infinity row counts in its group and sets a
// flag in the top three bits of its global high word (a sum's high word stays below 2^25)
// instead of adding to the sum; a group with a NaN, or with both infinities, sums to NaN, one
// with only +infinity (-infinity) to +infinity (-infinity), as f32 additions would give. They do
// not take part in the scale.
//
// More distinct keys than max_groups is an error the caller sees: groups[0] then exceeds
// max_groups (only the first max_groups are written), or groups[1] counts the rows that found no
// room in the table. The output rows' order depends on which key claimed a slot first, so
// deterministic() is false; the sums themselves are reproducible bit for bit (a test compares
// schedules).
//
// Error bound: each value is off by at most 2^-(k+1) (at most 2^-24 of the largest |value|) from
// its integer, and the sum of a group's m finite values is then rounded once to f32 (ties to even:
// at most 2^-24 of its magnitude, or 2^-150 where the result is subnormal), so |sum - exact| <= m
// 2^-(k+1) + 2^-24 (|exact| + m 2^-(k+1)) + 2^-150; a sum beyond f32's range is +-infinity. The
// oracle sums in double precision (adding its own error, m 2^-52 sum(|value|)) and checks that
// bound per group, with k computed from the inputs; keys and counts exact, compared after sorting
// by key. Bytes moved: 8 n (the scale pass reads the values once more); rate: rows.

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "kernel_support.hpp"
#include "util/try.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

constexpr std::uint32_t kEmptyKey = 0xffffffffu;
// Slots a row searches in its workgroup's table before it goes to the global one, when there may
// be more groups than the table has slots.
constexpr std::uint32_t kLocalProbes = 8;
// Words of a slot of the global table (key, count, sum low, sum high) and of a workgroup's table
// (key, counts: rows and carries, sum low).
constexpr std::uint64_t kGlobalSlotWords = 4;
constexpr std::uint64_t kLocalSlotWords = 3;
// Rows a workgroup table's slot counts, exclusive: the low 24 bits of its counts word (the
// carries out of its low word take the top 8).
constexpr std::uint64_t kLocalRowsLimit = std::uint64_t{1} << 24;
// The groups of the tuning problem, and of the bucket with many groups (size_buckets).
constexpr std::uint64_t kTuningGroups = 4096;
constexpr std::uint64_t kGpuManyGroups = std::uint64_t{1} << 20;
constexpr std::uint64_t kCpuManyGroups = std::uint64_t{1} << 16;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512}, 256};
const KnobSpec kRowsPerInvocation{
    "rows_per_invocation", "rows per invocation, workgroup_size apart", {1, 4, 16}, 1};
const KnobSpec kLocalSlots{"local_slots",
                           "slots of each workgroup's table in workgroup memory (0: none)",
                           {0, 1024, 2048, 4096},
                           1024};
const KnobSpec kTableFactor{
    "table_factor", "global table slots per group, at least (load at most 1/factor)", {2, 4}, 2};
// WebGPU does not tell how many compute units an adapter has, so the grid is a knob: a few
// workgroups per unit of a large GPU (the H200 has 132).
const KnobSpec kPersistentWorkgroups{
    "persistent_workgroups",
    "most workgroups of the aggregate pass, each looping over tiles (0: one per tile)",
    {0, 256, 512, 1024, 2048},
    0};

// With key_partitions P the aggregate pass runs P times over all rows, each time adding only the
// rows whose key's hash falls in one part of P: each workgroup table then holds about max_groups
// / P keys (4096 groups in two halves fit 4096-slot tables at load 1/2), for P reads of the rows.
const KnobSpec kKeyPartitions{
    "key_partitions",
    "aggregate passes, each adding the rows of one part of the keys (by hash)",
    {1, 2, 4},
    1};
// Whether an invocation's rows of a tile are searched, added and carried together (their loads
// and atomics in flight at once) or one row after the other, in the workgroup table or (with
// local_slots 0) the global one; searched slot by slot (probe_window 1).
const KnobSpec kInterleaveRows{
    "interleave_rows",
    "1: an invocation's rows of a tile searched, then added, then carried together",
    {0, 1},
    0};
// Slots of the workgroup table whose keys a row loads together (independent loads) before it
// compares them: 1 searches slot by slot in triangular steps, a chain of dependent loads whose
// longest in a warp its warp waits for; 4 and 8 search windows of consecutive slots.
const KnobSpec kProbeWindow{
    "probe_window", "workgroup-table slots whose keys a row loads at once", {1, 4, 8}, 1};

// Which aggregate pass adds a key's rows: with workgroup tables, by bits of the hash that their
// slots do not use; with the global table alone, by the part of it that holds the key's home slot.
const char* const kKeyPartByHashWgsl = R"(
// Whether this aggregate pass adds the rows of `key`: those whose hash's top 16 bits, scaled to
// [0, KEY_PARTS), are params.key_part (bits that the workgroup table's slots do not use, so each
// part fills the whole workgroup table).
fn in_this_key_part(key: u32) -> bool {
  return KEY_PARTS == 1u || (((hash(key) >> 16u) * KEY_PARTS) >> 16u) == params.key_part;
}
)";
const char* const kKeyPartBySlotWgsl = R"(
// Whether this aggregate pass adds the rows of `key`: those whose home slot lies in the
// params.key_part-th of KEY_PARTS parts of the table, so that a pass reads and writes one part of
// it (a part of 2^20 groups' 32 MiB table stays in the H200's L2 cache). A table of fewer than
// KEY_PARTS slots leaves the last passes without rows.
fn in_this_key_part(key: u32) -> bool {
  let part_slots = max(params.capacity / KEY_PARTS, 1u);
  return KEY_PARTS == 1u || (hash(key) & (params.capacity - 1u)) / part_slots == params.key_part;
}
)";

const char* const kParamsWgsl = R"(
struct Params { n: u32, capacity: u32, max_groups: u32, local_probes: u32, key_part: u32 }
)";

// The global table, its clearing and emitting, the scale, the fixed-point conversions and the
// adding of a partial sum to a key's slot.
const char* const kTableWgsl = R"(
const EMPTY: u32 = 0xffffffffu;
const NO_SLOT: u32 = 0xffffffffu;
// Added to every row's integer, so that none is negative (2^24).
const BIAS: u32 = 0x1000000u;
// Flags of the rows that are not finite, in the top bits of a global sum's high word.
const NAN_SEEN: u32 = 0x80000000u;
const POSITIVE_INFINITY_SEEN: u32 = 0x40000000u;
const NEGATIVE_INFINITY_SEEN: u32 = 0x20000000u;
const HIGH_SUM_BITS: u32 = 0x1fffffffu;
// MurmurHash3's 32-bit finaliser: every input bit moves every output bit.
fn hash(key: u32) -> u32 {
  var h = key;
  h ^= h >> 16u;
  h *= 0x85ebca6bu;
  h ^= h >> 13u;
  h *= 0xc2b2ae35u;
  h ^= h >> 16u;
  return h;
}
fn key_word(slot: u32) -> u32 { return 4u * slot; }
fn count_word(slot: u32) -> u32 { return 4u * slot + 1u; }
fn low_word(slot: u32) -> u32 { return 4u * slot + 2u; }
fn high_word(slot: u32) -> u32 { return 4u * slot + 3u; }
// The bits of the largest finite |value|, after the capacity + 1 slots.
fn largest_word() -> u32 { return 4u * params.capacity + 4u; }

// The slot of `key`, claimed when the key is new; NO_SLOT when the table has no room. A failed
// exchange that leaves the slot empty (a spurious failure of the weak exchange) tries the same
// slot again; it counts as a step, so the search stays bounded.
fn global_slot(key: u32) -> u32 {
  if (key == EMPTY) { return params.capacity; }
  let mask = params.capacity - 1u;
  var slot = hash(key) & mask;
  for (var step = 1u; step <= params.capacity; step++) {
    var found = atomicLoad(&table[key_word(slot)]);
    if (found == EMPTY) {
      let claimed = atomicCompareExchangeWeak(&table[key_word(slot)], EMPTY, key);
      if (claimed.exchanged) { return slot; }
      found = claimed.old_value;
    }
    if (found == key) { return slot; }
    if (found != EMPTY) { slot = (slot + step) & mask; }
  }
  return NO_SLOT;
}

// Tiles of TILE rows, the last one partial (written so that n + TILE cannot overflow).
fn tile_count() -> u32 {
  return params.n / TILE + select(0u, 1u, params.n % TILE != 0u);
}

// top = max(e, 1), e the biased exponent of the largest finite |value|: the scale is 2^(150 - top).
fn scale_top() -> u32 { return max(atomicLoad(&table[largest_word()]) >> 23u, 1u); }

// The flag of a value's bits that are not a finite value; 0 for a finite one.
fn non_finite_flag(bits: u32) -> u32 {
  let magnitude = bits & 0x7fffffffu;
  if (magnitude < 0x7f800000u) { return 0u; }
  if (magnitude > 0x7f800000u) { return NAN_SEEN; }
  return select(POSITIVE_INFINITY_SEEN, NEGATIVE_INFINITY_SEEN, (bits >> 31u) != 0u);
}

// round(value 2^k) + BIAS of a finite value's bits, k = 150 - top, rounded half away from zero.
// value 2^k = significand 2^-shift, shift >= 0 because no finite |value| has an exponent above
// top; from shift 25 on the integer is 0.
fn fixed_point(bits: u32, top: u32) -> u32 {
  let magnitude = bits & 0x7fffffffu;
  let exponent = magnitude >> 23u;
  let significand = select((magnitude & 0x7fffffu) | 0x800000u, magnitude, exponent == 0u);
  let shift = min(top - max(exponent, 1u), 31u);
  let scaled = (significand + ((1u << shift) >> 1u)) >> shift;
  return select(BIAS + scaled, BIAS - scaled, (bits >> 31u) != 0u);
}

// The bits of the f32 nearest to the 64-bit two's-complement integer (high, low) times 2^-k,
// k = 150 - top, ties to even: one rounding, from integers alone.
fn fixed_to_f32_bits(low: u32, high: u32, top: u32) -> u32 {
  let negative = (high >> 31u) != 0u;
  let magnitude_low = select(low, ~low + 1u, negative);
  let magnitude_high = select(high, ~high + select(0u, 1u, low == 0u), negative);
  // The magnitude in 32 bits: the `dropped` bits below its 32 highest (at most 25 of them,
  // the magnitude being below 2^57) leave a sticky bit, which the rounding below (at least 8
  // bits then) sees as "more than nothing dropped".
  let dropped = select(0u, 32u - countLeadingZeros(magnitude_high), magnitude_high != 0u);
  var folded = magnitude_low;
  if (dropped != 0u) {
    folded = (magnitude_high << (32u - dropped)) | (magnitude_low >> dropped) |
             select(0u, 1u, (magnitude_low << (32u - dropped)) != 0u);
  }
  if (folded == 0u) { return 0u; }
  // value = folded 2^(dropped - k): keep 24 significant bits, or fewer where the value is
  // subnormal (its last bit then weighs 2^-149); shift is at most 8.
  let k = 150 - i32(top);
  let leading = 31 - i32(countLeadingZeros(folded));
  let shift = max(leading - 23, k - i32(dropped) - 149);
  var significand = folded << u32(max(-shift, 0));
  if (shift > 0) {
    let s = u32(shift);
    significand = folded >> s;
    let rest = folded & ((1u << s) - 1u);
    let half = 1u << (s - 1u);
    if (rest > half || (rest == half && (significand & 1u) != 0u)) { significand += 1u; }
  }
  // significand 2^(shift + dropped - k) with its leading bit as the exponent field's lowest:
  // a significand rounded up to 2^24 carries into the exponent, and past the largest finite
  // exponent the bits are infinity's.
  let exponent_field = shift + i32(dropped) - k + 149;
  var bits = 0x7f800000u;
  if (exponent_field < 254) { bits = (u32(exponent_field) << 23u) + significand; }
  return bits | select(0u, 0x80000000u, negative);
}

// Adds `sum` (a partial sum's low word) to the slot's 64-bit sum: the high word only on a carry.
fn add_to_sum(slot: u32, sum: u32) {
  let old = atomicAdd(&table[low_word(slot)], sum);
  if (old + sum < old) { atomicAdd(&table[high_word(slot)], 1u); }
}

fn add_global(key: u32, count: u32, sum: u32) {
  let slot = global_slot(key);
  if (slot == NO_SLOT) {
    atomicAdd(&groups[1], count);
    return;
  }
  atomicAdd(&table[count_word(slot)], count);
  add_to_sum(slot, sum);
}

// Carries out of a workgroup's low word, added to the key's global high word. A key that finds
// no room here finds none when its workgroup's partial sum is added either, which reports it.
fn add_global_carries(key: u32, carries: u32) {
  let slot = global_slot(key);
  if (slot != NO_SLOT) { atomicAdd(&table[high_word(slot)], carries); }
}

// A row whose value is not finite: counted, and its flag set.
fn add_non_finite(key: u32, flag: u32) {
  let slot = global_slot(key);
  if (slot == NO_SLOT) {
    atomicAdd(&groups[1], 1u);
    return;
  }
  atomicAdd(&table[count_word(slot)], 1u);
  atomicOr(&table[high_word(slot)], flag);
}

@compute @workgroup_size(WG)
fn clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
         @builtin(local_invocation_index) local: u32) {
  let slot = linear_workgroup(group, groups_grid) * WG + local;
  if (slot <= params.capacity) {
    atomicStore(&table[key_word(slot)], EMPTY);  // slot capacity: the key 0xffffffff's own
    atomicStore(&table[count_word(slot)], 0u);
    atomicStore(&table[low_word(slot)], 0u);
    atomicStore(&table[high_word(slot)], 0u);
  }
  if (slot == 0u) {
    atomicStore(&table[largest_word()], 0u);
    atomicStore(&groups[0], 0u);
    atomicStore(&groups[1], 0u);
  }
}

var<workgroup> workgroup_largest: atomic<u32>;

// The largest finite |value|'s bits, over the rows of the aggregate pass's grid.
@compute @workgroup_size(WG)
fn scale(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
         @builtin(local_invocation_index) local: u32) {
  if (local == 0u) { atomicStore(&workgroup_largest, 0u); }
  workgroupBarrier();
  var largest = 0u;
  let tiles = tile_count();
  let stride = groups_grid.x * groups_grid.y;
  for (var tile = linear_workgroup(group, groups_grid); tile < tiles; tile += stride) {
    for (var r = 0u; r < ROWS; r++) {
      let row = tile * TILE + r * WG + local;
      if (row < params.n) {
        let magnitude = values[row] & 0x7fffffffu;
        if (magnitude < 0x7f800000u) { largest = max(largest, magnitude); }
      }
    }
  }
  atomicMax(&workgroup_largest, largest);
  workgroupBarrier();
  // Only a workgroup that has something larger than the word holds writes it: with one
  // workgroup per tile (a million of them at 2^28 rows) most find theirs there already.
  let workgroup_value = atomicLoad(&workgroup_largest);
  if (local == 0u && workgroup_value > atomicLoad(&table[largest_word()])) {
    atomicMax(&table[largest_word()], workgroup_value);
  }
}

// The f32 bits of an occupied slot's sum.
fn sum_bits(slot: u32, count: u32) -> u32 {
  let high = atomicLoad(&table[high_word(slot)]);
  let infinities = high & (POSITIVE_INFINITY_SEEN | NEGATIVE_INFINITY_SEEN);
  if ((high & NAN_SEEN) != 0u || infinities == (POSITIVE_INFINITY_SEEN | NEGATIVE_INFINITY_SEEN)) {
    return 0x7fc00000u;  // NaN
  }
  if (infinities == POSITIVE_INFINITY_SEEN) { return 0x7f800000u; }
  if (infinities == NEGATIVE_INFINITY_SEEN) { return 0xff800000u; }
  // The 64-bit sum less count * BIAS (count 2^24 is (count >> 8, count << 24)).
  let low = atomicLoad(&table[low_word(slot)]);
  let bias_low = count << 24u;
  let exact_low = low - bias_low;
  let exact_high = (high & HIGH_SUM_BITS) - (count >> 8u) - select(0u, 1u, low < bias_low);
  return fixed_to_f32_bits(exact_low, exact_high, scale_top());
}

var<workgroup> workgroup_groups: atomic<u32>;
var<workgroup> workgroup_first_output: u32;

// Each occupied slot takes a place among its workgroup's, and the workgroup one range of the
// outputs: one atomic on groups[0] per workgroup rather than per group (a million groups would
// queue on that one word).
@compute @workgroup_size(WG)
fn emit(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
        @builtin(local_invocation_index) local: u32) {
  if (local == 0u) { atomicStore(&workgroup_groups, 0u); }
  workgroupBarrier();
  let slot = linear_workgroup(group, groups_grid) * WG + local;
  var count = 0u;
  if (slot <= params.capacity) { count = atomicLoad(&table[count_word(slot)]); }
  var place = 0u;
  if (count != 0u) { place = atomicAdd(&workgroup_groups, 1u); }
  workgroupBarrier();
  if (local == 0u) {
    let occupied = atomicLoad(&workgroup_groups);
    if (occupied != 0u) { workgroup_first_output = atomicAdd(&groups[0], occupied); }
  }
  let at = workgroupUniformLoad(&workgroup_first_output) + place;
  if (count != 0u && at < params.max_groups) {
    group_keys[at] = atomicLoad(&table[key_word(slot)]);
    group_sums[at] = sum_bits(slot, count);
    group_counts[at] = count;
  }
}
)";

// An invocation's ROWS rows of a tile, workgroup_size apart (so that a subgroup's loads are
// consecutive); the rows past n keep what the arrays held.
const char* const kLoadRowsWgsl = R"(
fn load_rows(tile: u32, local: u32, row_keys: ptr<function, array<u32, ROWS>>,
             row_values: ptr<function, array<u32, ROWS>>) {
  for (var r = 0u; r < ROWS; r++) {
    let row = tile * TILE + r * WG + local;
    if (row < params.n) {
      (*row_keys)[r] = keys[row];
      (*row_values)[r] = values[row];
    }
  }
}
)";

// The global aggregate pass, up to the adding of a tile's rows, which kGlobalRows*Wgsl do.
const char* const kGlobalAggregateBeginWgsl = R"(
@compute @workgroup_size(WG)
fn aggregate(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
             @builtin(local_invocation_index) local: u32) {
  let top = scale_top();
  let tiles = tile_count();
  let stride = groups_grid.x * groups_grid.y;
  for (var tile = linear_workgroup(group, groups_grid); tile < tiles; tile += stride) {
    // The tile's rows are loaded before any is added, so that their loads are in flight together
    // (loops of ROWS steps: unrolled, the arrays stay in registers).
    var row_keys = array<u32, ROWS>();
    var row_values = array<u32, ROWS>();
    load_rows(tile, local, &row_keys, &row_values);
)";

// The tile's rows of an invocation added to the global table one after the other
// (interleave_rows 0).
const char* const kGlobalRowsOneAtATimeWgsl = R"(
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n && in_this_key_part(row_keys[r])) {
        let flag = non_finite_flag(row_values[r]);
        if (flag != 0u) {
          add_non_finite(row_keys[r], flag);
        } else {
          add_global(row_keys[r], 1u, fixed_point(row_values[r], top));
        }
      }
    }
  }
}
)";

// The tile's rows of an invocation added to the global table together (interleave_rows 1), as
// kAddRowsTogetherWgsl does in the workgroup table: search steps of all rows with their key
// loads issued first, then every found row's two adds, then carries. The key 0xffffffff has its
// own slot (index capacity), found without a search; a row whose key finds no room counts in
// groups[1].
const char* const kGlobalRowsTogetherWgsl = R"(
    var slots = array<u32, ROWS>();
    var sums = array<u32, ROWS>();
    var searching = array<bool, ROWS>();
    var found_slot = array<bool, ROWS>();
    let mask = params.capacity - 1u;
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n && in_this_key_part(row_keys[r])) {
        let flag = non_finite_flag(row_values[r]);
        if (flag != 0u) {
          add_non_finite(row_keys[r], flag);
        } else {
          sums[r] = fixed_point(row_values[r], top);
          if (row_keys[r] == EMPTY) {
            found_slot[r] = true;
            slots[r] = params.capacity;
          } else {
            searching[r] = true;
            slots[r] = hash(row_keys[r]) & mask;
          }
        }
      }
    }
    for (var step = 1u; step <= params.capacity; step++) {
      var seen = array<u32, ROWS>();
      for (var r = 0u; r < ROWS; r++) {
        if (searching[r]) { seen[r] = atomicLoad(&table[key_word(slots[r])]); }
      }
      var still_searching = false;
      for (var r = 0u; r < ROWS; r++) {
        if (searching[r]) {
          var found = seen[r];
          if (found == EMPTY) {
            let claimed = atomicCompareExchangeWeak(&table[key_word(slots[r])], EMPTY, row_keys[r]);
            found = select(claimed.old_value, row_keys[r], claimed.exchanged);
          }
          if (found == row_keys[r]) {
            searching[r] = false;
            found_slot[r] = true;
          } else {
            if (found != EMPTY) { slots[r] = (slots[r] + step) & mask; }
            still_searching = true;
          }
        }
      }
      if (!still_searching) { break; }
    }
    var olds = array<u32, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      if (found_slot[r]) {
        atomicAdd(&table[count_word(slots[r])], 1u);
        olds[r] = atomicAdd(&table[low_word(slots[r])], sums[r]);
      }
    }
    for (var r = 0u; r < ROWS; r++) {
      if (found_slot[r]) {
        if (olds[r] + sums[r] < olds[r]) { atomicAdd(&table[high_word(slots[r])], 1u); }
      } else if (searching[r]) {
        atomicAdd(&groups[1], 1u);
      }
    }
  }
}
)";

// The workgroup's own table: LOCAL_SLOTS slots of three words, key, counts and the sum's low
// word. The counts word holds the slot's rows in its low 24 bits and the carries out of its low
// word in the top 8 (a workgroup adds fewer than 2^24 rows: plan() checks); a carry that wraps
// those 8 bits adds 256 carries to the key's global high word at once. Revision 6 added every
// carry there at once, searching the global table for the key first (global_slot: loads from L2
// that the whole subgroup waits for) in about one row of 256, and the aggregate pass took about
// 3 ms at 2^28 rows on an H100 whatever the table's load (session 38, docs/performance.md);
// revision 7 took 3.06 ms against revision 6's 3.11 at 1024 groups (session 39).
const char* const kLocalTableWgsl = R"(
var<workgroup> local_table: array<atomic<u32>, 3u * LOCAL_SLOTS>;
fn local_key_word(slot: u32) -> u32 { return 3u * slot; }
fn local_counts_word(slot: u32) -> u32 { return 3u * slot + 1u; }
fn local_low_word(slot: u32) -> u32 { return 3u * slot + 2u; }
const CARRY_SHIFT: u32 = 24u;
const CARRY_WRAP: u32 = 256u;  // carries that the counts word holds, exclusive
fn local_rows(counts: u32) -> u32 { return counts & ((1u << CARRY_SHIFT) - 1u); }
fn local_carries(counts: u32) -> u32 { return counts >> CARRY_SHIFT; }

// Counts a row added to a workgroup slot, `carried` when its add carried out of the slot's low
// word. Only then does the row wait for the counts word's old value (a row in about 256).
fn count_local_row(slot: u32, key: u32, carried: bool) {
  if (!carried) {
    atomicAdd(&local_table[local_counts_word(slot)], 1u);
    return;
  }
  let old = atomicAdd(&local_table[local_counts_word(slot)], 1u + (1u << CARRY_SHIFT));
  if (local_carries(old) == CARRY_WRAP - 1u) { add_global_carries(key, CARRY_WRAP); }
}

// Adds a row's integer to its key's workgroup slot.
fn add_to_local_slot(slot: u32, key: u32, sum: u32) {
  let old = atomicAdd(&local_table[local_low_word(slot)], sum);
  count_local_row(slot, key, old + sum < old);
}
)";

// A row's search in the workgroup table slot by slot (probe_window 1).
const char* const kLocalSearchBySlotWgsl = R"(

// Adds a row's integer to the workgroup's table; false when its key finds no room there within
// params.local_probes slots. The key is not the empty key.
fn add_local(key: u32, sum: u32) -> bool {
  let mask = LOCAL_SLOTS - 1u;
  var slot = hash(key) & mask;
  for (var step = 1u; step <= params.local_probes; step++) {
    var found = atomicLoad(&local_table[local_key_word(slot)]);
    if (found == EMPTY) {
      let claimed = atomicCompareExchangeWeak(&local_table[local_key_word(slot)], EMPTY, key);
      found = select(claimed.old_value, key, claimed.exchanged);
    }
    if (found == key) {
      add_to_local_slot(slot, key, sum);
      return true;
    }
    if (found != EMPTY) { slot = (slot + step) & mask; }
  }
  return false;
}
)";

// A row's search in the workgroup table by windows of PROBE_WINDOW consecutive slots (linear
// probing a window at a time): the window's keys are loaded before any is compared, so a row
// waits for one load where a chain of triangular steps waits for each. Keys never move and slots
// never empty, so a key seen in the window is the key's slot even when an empty slot is seen
// before it (filled since); with no match the row claims the window's first empty slot, and
// after a failed claim (another key took the slot, or the weak exchange failed spuriously) loads
// the same window again. Each window loaded is a step of params.local_probes / PROBE_WINDOW (at
// least 1), so the search stays bounded.
const char* const kLocalSearchByWindowWgsl = R"(
fn add_local(key: u32, sum: u32) -> bool {
  let mask = LOCAL_SLOTS - 1u;
  var first = hash(key) & mask;
  let windows = max(params.local_probes / PROBE_WINDOW, 1u);
  for (var step = 0u; step < windows; step++) {
    var found = array<u32, PROBE_WINDOW>();
    for (var i = 0u; i < PROBE_WINDOW; i++) {
      found[i] = atomicLoad(&local_table[local_key_word((first + i) & mask)]);
    }
    var match_at = PROBE_WINDOW;
    var empty_at = PROBE_WINDOW;
    for (var i = PROBE_WINDOW; i > 0u; i--) {
      if (found[i - 1u] == key) { match_at = i - 1u; }
      if (found[i - 1u] == EMPTY) { empty_at = i - 1u; }
    }
    if (match_at == PROBE_WINDOW && empty_at != PROBE_WINDOW) {
      let claimed =
          atomicCompareExchangeWeak(&local_table[local_key_word((first + empty_at) & mask)], EMPTY, key);
      if (claimed.exchanged || claimed.old_value == key) { match_at = empty_at; }
    }
    if (match_at != PROBE_WINDOW) {
      add_to_local_slot((first + match_at) & mask, key, sum);
      return true;
    }
    if (empty_at == PROBE_WINDOW) { first = (first + PROBE_WINDOW) & mask; }
  }
  return false;
}
)";

// The local aggregate pass, up to the adding of a tile's rows, which kAddRows*Wgsl do, and
// kLocalAggregateEndWgsl, the workgroup table's flush, ends. A workgroup loads its next tile's
// rows before it adds this tile's (revision 8): loaded after the adds, each tile's loads were
// waited for with nothing else in flight, and the aggregate pass took 3.06 ms at 1024 groups on
// an H100, 2.75 ms with them ahead (session 39; 4096 groups in two parts 6.02 and 5.32 ms).
const char* const kLocalAggregateBeginWgsl = R"(
@compute @workgroup_size(WG)
fn aggregate(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
             @builtin(local_invocation_index) local: u32) {
  for (var slot = local; slot < LOCAL_SLOTS; slot += WG) {
    atomicStore(&local_table[local_key_word(slot)], EMPTY);
    atomicStore(&local_table[local_counts_word(slot)], 0u);
    atomicStore(&local_table[local_low_word(slot)], 0u);
  }
  workgroupBarrier();
  let top = scale_top();
  // The key 0xffffffff, the empty key, has no local slot: its rows add up in each invocation's
  // registers, then in the workgroup's, and reach its global slot once per workgroup rather than
  // once per row (it is a key like any other: a NULL stand-in, say).
  var empty_count = 0u;
  var empty_low = 0u;
  var empty_carries = 0u;
  let workgroup = linear_workgroup(group, groups_grid);
  let tiles = tile_count();
  let stride = groups_grid.x * groups_grid.y;
  // Each tile's rows are loaded one iteration ahead: the next tile's loads are in flight while
  // this tile's rows search and add in the workgroup table (loops of ROWS steps: unrolled, the
  // arrays stay in registers).
  var next_keys = array<u32, ROWS>();
  var next_values = array<u32, ROWS>();
  if (workgroup < tiles) { load_rows(workgroup, local, &next_keys, &next_values); }
  for (var tile = workgroup; tile < tiles; tile += stride) {
    let row_keys = next_keys;
    let row_values = next_values;
    if (tile + stride < tiles) { load_rows(tile + stride, local, &next_keys, &next_values); }
)";

// The tile's rows of an invocation added one after the other (interleave_rows 0).
const char* const kAddRowsOneAtATimeWgsl = R"(
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n && in_this_key_part(row_keys[r])) {
        let flag = non_finite_flag(row_values[r]);
        if (flag != 0u) {
          add_non_finite(row_keys[r], flag);
        } else {
          let sum = fixed_point(row_values[r], top);
          if (row_keys[r] == EMPTY) {
            empty_count += 1u;
            empty_carries += select(0u, 1u, empty_low + sum < empty_low);
            empty_low += sum;
          } else if (!add_local(row_keys[r], sum)) {
            add_global(row_keys[r], 1u, sum);
          }
        }
      }
    }
)";

// The tile's rows of an invocation added together (interleave_rows 1): the searches take a step
// of every row still searching per iteration, the steps' key loads issued before any is
// compared; then every found row's add to its low word, and only then their counts and carries.
// So a row's loads and atomics are in flight with the others' rather than after them (a compiler
// keeps the order of atomics, and a search step's exchange is one). Rows whose key finds no room
// within params.local_probes steps go to the global table.
const char* const kAddRowsTogetherWgsl = R"(
    var slots = array<u32, ROWS>();
    var sums = array<u32, ROWS>();
    var searching = array<bool, ROWS>();
    var found_slot = array<bool, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n && in_this_key_part(row_keys[r])) {
        let flag = non_finite_flag(row_values[r]);
        if (flag != 0u) {
          add_non_finite(row_keys[r], flag);
        } else {
          sums[r] = fixed_point(row_values[r], top);
          if (row_keys[r] == EMPTY) {
            empty_count += 1u;
            empty_carries += select(0u, 1u, empty_low + sums[r] < empty_low);
            empty_low += sums[r];
          } else {
            searching[r] = true;
            slots[r] = hash(row_keys[r]) & (LOCAL_SLOTS - 1u);
          }
        }
      }
    }
    for (var step = 1u; step <= params.local_probes; step++) {
      var seen = array<u32, ROWS>();
      for (var r = 0u; r < ROWS; r++) {
        if (searching[r]) { seen[r] = atomicLoad(&local_table[local_key_word(slots[r])]); }
      }
      var still_searching = false;
      for (var r = 0u; r < ROWS; r++) {
        if (searching[r]) {
          var found = seen[r];
          if (found == EMPTY) {
            let claimed =
                atomicCompareExchangeWeak(&local_table[local_key_word(slots[r])], EMPTY, row_keys[r]);
            found = select(claimed.old_value, row_keys[r], claimed.exchanged);
          }
          if (found == row_keys[r]) {
            searching[r] = false;
            found_slot[r] = true;
          } else {
            if (found != EMPTY) { slots[r] = (slots[r] + step) & (LOCAL_SLOTS - 1u); }
            still_searching = true;
          }
        }
      }
      if (!still_searching) { break; }
    }
    var olds = array<u32, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      if (found_slot[r]) { olds[r] = atomicAdd(&local_table[local_low_word(slots[r])], sums[r]); }
    }
    for (var r = 0u; r < ROWS; r++) {
      if (found_slot[r]) {
        count_local_row(slots[r], row_keys[r], olds[r] + sums[r] < olds[r]);
      } else if (searching[r]) {
        add_global(row_keys[r], 1u, sums[r]);
      }
    }
)";

const char* const kLocalAggregateEndWgsl = R"(
  }
  workgroupBarrier();
  let first_slot = hash(workgroup);
  for (var i = local; i < LOCAL_SLOTS; i += WG) {
    let slot = (first_slot + i) & (LOCAL_SLOTS - 1u);
    let counts = atomicLoad(&local_table[local_counts_word(slot)]);
    if (counts != 0u) {
      let key = atomicLoad(&local_table[local_key_word(slot)]);
      add_global(key, local_rows(counts), atomicLoad(&local_table[local_low_word(slot)]));
      if (local_carries(counts) != 0u) { add_global_carries(key, local_carries(counts)); }
    }
  }
  // The empty key's partial sums, added up in the table's first three words (read above).
  workgroupBarrier();
  if (local == 0u) {
    atomicStore(&local_table[0], 0u);
    atomicStore(&local_table[1], 0u);
    atomicStore(&local_table[2], 0u);
  }
  workgroupBarrier();
  if (empty_count != 0u) {
    atomicAdd(&local_table[0], empty_count);
    let old = atomicAdd(&local_table[1], empty_low);
    atomicAdd(&local_table[2], empty_carries + select(0u, 1u, old + empty_low < old));
  }
  workgroupBarrier();
  let count = atomicLoad(&local_table[0]);
  if (local == 0u && count != 0u) {
    add_global(EMPTY, count, atomicLoad(&local_table[1]));
    let carries = atomicLoad(&local_table[2]);
    if (carries != 0u) { add_global_carries(EMPTY, carries); }
  }
}
)";

std::uint64_t effective_max_groups(const Problem& problem) {
  return problem.max_groups != 0 ? problem.max_groups
                                 : std::max<std::uint64_t>(1, problem.elements);
}

std::uint64_t table_capacity(std::uint64_t max_groups, std::uint64_t factor) {
  return std::max<std::uint64_t>(2, std::bit_ceil(max_groups * factor));
}

std::uint64_t tile_rows(const Schedule& schedule) {
  return std::uint64_t{knob(schedule, kWorkgroupSize)} * knob(schedule, kRowsPerInvocation);
}

// One per tile, at most persistent_workgroups when that is not 0.
std::uint64_t aggregate_workgroups(const Schedule& schedule, std::uint64_t n) {
  const std::uint64_t tiles = ceil_div(n, tile_rows(schedule));
  const std::uint64_t most = knob(schedule, kPersistentWorkgroups);
  return most == 0 ? tiles : std::min(tiles, most);
}

// The most rows one workgroup of the aggregate pass adds (its tiles are aggregate_workgroups
// apart).
std::uint64_t aggregate_workgroup_rows(const Schedule& schedule, std::uint64_t n) {
  const std::uint64_t tiles = ceil_div(n, tile_rows(schedule));
  return ceil_div(tiles, std::max<std::uint64_t>(1, aggregate_workgroups(schedule, n))) *
         tile_rows(schedule);
}

// `count` distinct keys, 0 and 0xffffffff (the empty slot's key) among them when count >= 2.
std::vector<std::uint32_t> distinct_keys(std::size_t count, std::mt19937_64& random) {
  std::unordered_set<std::uint32_t> seen;
  std::vector<std::uint32_t> keys;
  if (count >= 2) keys = {0u, kEmptyKey};
  seen.insert(keys.begin(), keys.end());
  while (keys.size() < count) {
    const auto key = static_cast<std::uint32_t>(random());
    if (seen.insert(key).second) keys.push_back(key);
  }
  std::shuffle(keys.begin(), keys.end(), random);
  return keys;
}

// What the oracle knows of one group.
struct ExactGroup {
  double sum = 0;        // of the finite values
  double magnitude = 0;  // the sum of their |value|
  std::uint32_t count = 0;
  std::uint32_t finite = 0;  // rows with a finite value
  bool nan = false;
  bool positive_infinity = false;
  bool negative_infinity = false;
};

// top = max(e, 1), e the biased exponent of the largest finite |value| (0 with none): each
// value is rounded to a multiple of 2^-k, k = 150 - top (see the header).
std::uint32_t scale_top(const std::vector<float>& values) {
  std::uint32_t largest = 0;
  for (float value : values) {
    const std::uint32_t magnitude = float_bits(value) & 0x7fffffffu;
    if (magnitude < 0x7f800000u) largest = std::max(largest, magnitude);
  }
  return std::max<std::uint32_t>(largest >> 23, 1);
}

// The bound of the header for a group of `finite` finite values summing to `exact` (in double
// precision, over `magnitude` = sum(|value|)) at scale top.
double allowed_error(double exact, double magnitude, std::uint32_t finite, std::uint32_t top) {
  const double m = finite;
  const double rounding = m * std::ldexp(1.0, static_cast<int>(top) - 151);  // m 2^-(k+1)
  return rounding + 0x1p-24 * (std::abs(exact) + rounding) + 0x1p-150 + m * 0x1p-52 * magnitude;
}

class GroupBySumF32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "group_by_sum_f32"; }
  // Revision 8: the workgroup-table path loads a tile's rows one iteration ahead.
  std::uint32_t revision() const override { return 8; }
  std::string_view summary() const override {
    return "distinct u32 keys with the f32 sum and count of their rows";
  }

  std::vector<KnobSpec> knobs() const override {
    return {kWorkgroupSize,        kRowsPerInvocation, kLocalSlots,  kTableFactor,
            kPersistentWorkgroups, kKeyPartitions,     kProbeWindow, kInterleaveRows};
  }

  Status check_resources(const Schedule& schedule,
                         const DeviceCapabilities& device) const override {
    const std::uint64_t bytes = std::uint64_t{knob(schedule, kLocalSlots)} * 4 * kLocalSlotWords;
    if (bytes > device.max_workgroup_storage_size) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob local_slots (" + std::to_string(knob(schedule, kLocalSlots)) + ") needs " +
                       std::to_string(bytes) +
                       " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                       std::to_string(device.max_workgroup_storage_size) + ").");
    }
    // Knobs of the workgroup table's search keep their defaults where they have no effect.
    const std::uint32_t window = knob(schedule, kProbeWindow);
    const bool interleave = knob(schedule, kInterleaveRows) != 0;
    if (window != 1 && knob(schedule, kLocalSlots) == 0) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob probe_window (" + std::to_string(window) +
                       ") needs local_slots (not 0): without a workgroup table no row searches "
                       "one, and the knob keeps its default.");
    }
    if (window != 1 && interleave) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob probe_window (" + std::to_string(window) +
                       ") needs interleave_rows (0): rows searched together search slot by slot.");
    }
    return Ok{};
  }

  std::vector<WgslBinding> wgsl_bindings(const Schedule&) const override {
    return {params_binding("Params"),
            storage_read(1, "keys", "u32"),
            as_f32_bits(storage_read(2, "values", "u32")),
            storage_read_write(3, "table", "atomic<u32>"),
            storage_read_write(4, "group_keys", "u32"),
            as_f32_bits(storage_read_write(5, "group_sums", "u32")),
            storage_read_write(6, "group_counts", "u32"),
            storage_read_write(7, "groups", "atomic<u32>")};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {{"keys", ElementType::kU32, BufferRole::kInput, "n elements, at least 1"},
            {"values", ElementType::kF32, BufferRole::kInput, "n elements, at least 1"},
            {"group_keys", ElementType::kU32, BufferRole::kOutput,
             "max_groups elements (n when not given)"},
            {"group_sums", ElementType::kF32, BufferRole::kOutput,
             "max_groups elements (n when not given)"},
            {"group_counts", ElementType::kU32, BufferRole::kOutput,
             "max_groups elements (n when not given)"},
            {"groups", ElementType::kU32, BufferRole::kOutput,
             "2 elements: distinct keys, rows without room"},
            {"table", ElementType::kU32, BufferRole::kScratch,
             "4 (capacity + 1) + 1 elements, capacity the power of two at least table_factor "
             "max_groups"}};
  }

  std::vector<std::string> entry_points(const Schedule&) const override {
    return {"clear", "scale", "aggregate", "emit"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override {
    const std::uint32_t local_slots = knob(schedule, kLocalSlots);
    const std::uint32_t wg = knob(schedule, kWorkgroupSize);
    const std::uint32_t rows = knob(schedule, kRowsPerInvocation);
    const std::uint32_t window = knob(schedule, kProbeWindow);
    std::vector<WgslConstant> constants = {
        {"WG", wg, "invocations per workgroup"},
        {"ROWS", rows, "rows per invocation"},
        {"TILE", wg * rows, "rows per tile"},
        {"KEY_PARTS", knob(schedule, kKeyPartitions), "parts of the keys, an aggregate pass each"}};
    if (local_slots != 0) {
      constants.push_back({"LOCAL_SLOTS", local_slots, "slots of the workgroup's table"});
      if (window != 1) {
        constants.push_back({"PROBE_WINDOW", window, "slots a row's search loads at once"});
      }
    }
    std::string wgsl = std::string(kLinearWorkgroupWgsl) + kParamsWgsl +
                       binding_declarations(wgsl_bindings(schedule)) + "\n" +
                       constant_declarations(constants) + kTableWgsl;
    const bool interleave = knob(schedule, kInterleaveRows) != 0;
    if (local_slots == 0) {
      return wgsl + kKeyPartBySlotWgsl + kLoadRowsWgsl + kGlobalAggregateBeginWgsl +
             (interleave ? kGlobalRowsTogetherWgsl : kGlobalRowsOneAtATimeWgsl);
    }
    wgsl += kKeyPartByHashWgsl;
    // Rows added together search in their own loop, without add_local.
    if (interleave) {
      return wgsl + kLocalTableWgsl + kLoadRowsWgsl + kLocalAggregateBeginWgsl +
             kAddRowsTogetherWgsl + kLocalAggregateEndWgsl;
    }
    return wgsl + kLocalTableWgsl +
           (window == 1 ? kLocalSearchBySlotWgsl : kLocalSearchByWindowWgsl) + kLoadRowsWgsl +
           kLocalAggregateBeginWgsl + kAddRowsOneAtATimeWgsl + kLocalAggregateEndWgsl;
  }

  Status check_problem(const Problem& problem) const override {
    WF_TRY(KernelDefinition::check_problem(problem));
    // The table's word indices, up to 4 capacity + 4, stay u32 at either factor.
    constexpr std::uint64_t kLargestGroups = std::uint64_t{1} << 27;
    if (problem.max_groups > kLargestGroups) {
      return Error(ErrorKind::kInvalidInput,
                   "Problem size max_groups (" + std::to_string(problem.max_groups) +
                       ") exceeds the most groups of group_by_sum_f32 (" +
                       std::to_string(kLargestGroups) + ": its table's word indices are u32).");
    }
    return Ok{};
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities& device) const override {
    const std::uint64_t n = problem.elements;
    const std::uint64_t max_groups = effective_max_groups(problem);
    const std::uint64_t capacity = table_capacity(max_groups, knob(schedule, kTableFactor));
    const std::uint64_t table_bytes = 4 * (kGlobalSlotWords * (capacity + 1) + 1);
    if (table_bytes > device.max_storage_binding_size) {
      return Error(ErrorKind::kInvalidInput, "The hash table of " + std::to_string(max_groups) +
                                                 " groups (" + std::to_string(table_bytes) +
                                                 " bytes) exceeds maxStorageBufferBindingSize (" +
                                                 std::to_string(device.max_storage_binding_size) +
                                                 ").");
    }
    const std::uint64_t wg = knob(schedule, kWorkgroupSize);
    const std::uint64_t local_slots = knob(schedule, kLocalSlots);
    const std::uint64_t rows_per_workgroup = aggregate_workgroup_rows(schedule, n);
    // (Unreachable while a buffer holds at most 4 GiB: 2^30 keys over 256 workgroups are 2^22.)
    if (local_slots != 0 && rows_per_workgroup >= kLocalRowsLimit) {
      return Error(ErrorKind::kInvalidInput,
                   "Problem size " + std::to_string(n) + " gives each aggregate workgroup up to " +
                       std::to_string(rows_per_workgroup) +
                       " rows, more than a workgroup table's slot counts (2^24 - 1): raise "
                       "persistent_workgroups or set it to 0.");
    }
    const std::map<std::uint32_t, std::string> buffers = {
        {1, "keys"},       {2, "values"},       {3, "table"}, {4, "group_keys"},
        {5, "group_sums"}, {6, "group_counts"}, {7, "groups"}};
    const std::uint64_t partitions = knob(schedule, kKeyPartitions);
    // Each part's keys searched in the whole table while they fill at most half of it, counting
    // max_groups / partitions keys to a part (the hash spreads distinct keys evenly; a part
    // with more searches longer, or sends rows to the global table, with the same sums).
    const std::uint32_t local_probes =
        local_slots != 0 && 2 * max_groups <= partitions * local_slots
            ? static_cast<std::uint32_t>(local_slots)
            : kLocalProbes;
    std::vector<std::uint32_t> params = {static_cast<std::uint32_t>(n),
                                         static_cast<std::uint32_t>(capacity),
                                         static_cast<std::uint32_t>(max_groups), local_probes, 0};
    const std::uint64_t row_bytes = std::max<std::uint64_t>(4, 4 * n);
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(buffer_specs(), {{"keys", row_bytes},
                                                      {"values", row_bytes},
                                                      {"group_keys", 4 * max_groups},
                                                      {"group_sums", 4 * max_groups},
                                                      {"group_counts", 4 * max_groups},
                                                      {"groups", 8},
                                                      {"table", table_bytes}});
    plan.passes = {{"clear", ceil_div(capacity + 1, wg), buffers, params},
                   {"scale", aggregate_workgroups(schedule, n), buffers, params}};
    for (std::uint32_t part = 0; part < partitions; ++part) {
      params.back() = part;
      plan.passes.push_back({"aggregate", aggregate_workgroups(schedule, n), buffers, params});
    }
    params.back() = 0;
    plan.passes.push_back({"emit", ceil_div(capacity + 1, wg), buffers, params});
    return plan;
  }

  std::string tolerance() const override {
    return "keys and counts exact (as a set); each sum within m 2^-(k+1) + 2^-24 (|exact| + m "
           "2^-(k+1)) + 2^-150 of the exact sum, m the group's finite values, k = 150 - max(e, "
           "1), e the biased exponent of the largest finite |value|; a group with a NaN or both "
           "infinities NaN, with one infinity that infinity";
  }

  std::vector<CaseSpec> certification_cases() const override {
    std::vector<CaseSpec> cases;
    auto add = [&](std::uint64_t n, std::uint64_t max_groups, const std::string& profile) {
      Problem problem;
      problem.elements = n;
      problem.max_groups = max_groups;
      cases.push_back(
          {"n=" + std::to_string(n) + " max_groups=" + std::to_string(max_groups) + " " + profile,
           problem, profile});
    };
    // The first profile is what the tuner and bench draw their inputs from.
    for (std::uint64_t n : edge_sizes(256, 1024)) add(n, 100, "groups");
    add(104729, 4096, "groups");
    add(104729, 5000, "groups");  // more groups than any workgroup table holds
    add(1, 1, "one-group");
    add(104729, 1, "one-group");
    add(7919, 0, "unique");
    add(104729, 0, "unique");
    add(1000, 10, "too-many-groups");
    add(104729, 4096, "too-many-groups");
    add(104729, 100, "non-finite");
    add(7919, 100, "tiny");
    add(7919, 16, "huge");
    Problem many;
    many.elements = many_workgroups_size(256, 4, 128u << 20);
    many.max_groups = 4096;
    cases.push_back(
        {"many-workgroups max_groups=4096 n=" + std::to_string(many.elements), many, "groups"});
    return cases;
  }

  // With persistent_workgroups P the aggregate pass's loop over tiles comes into play past P
  // tiles: at n = P * TILE + 1 workgroup 0 takes tile P, its last row alone. The keys come from
  // local_slots / 2 groups (4096 without a local table): rows then may search the whole
  // workgroup table (local_probes = local_slots), and the tables fill as far as P * TILE + 1
  // rows fill them. None when the input would pass the binding limit.
  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities& device) const override {
    const std::uint64_t persistent = knob(schedule, kPersistentWorkgroups);
    if (persistent == 0) return {};
    const std::uint64_t n = persistent * tile_rows(schedule) + 1;
    if (4 * n > device.max_storage_binding_size) return {};
    const std::uint64_t local_slots = knob(schedule, kLocalSlots);
    Problem problem = elements_problem(n);
    problem.max_groups = local_slots != 0 ? local_slots / 2 : 4096;
    return {{"second tile n=" + std::to_string(n) +
                 " max_groups=" + std::to_string(problem.max_groups) + " groups",
             problem, "groups"}};
  }

  // Profiles: "groups" (keys drawn from max_groups distinct keys, 0 and 0xffffffff among them),
  // "unique" (every key distinct), "one-group" (one key), "too-many-groups" (max_groups + 1
  // distinct keys, each at least once: the error); values uniform in [-1000, 1000]. Keys as
  // "groups" with other values: "non-finite" (a NaN, +infinity or -infinity in 1 row of 4000, so
  // that some groups get one kind, some two and most none), "tiny" (uniform values times 2^-140:
  // subnormals and the smallest normals, exact at the finest scale), "huge" (times 2^117: the
  // coarsest scale, and sums past f32's range).
  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    const std::size_t n = spec.problem.elements;
    const std::string& profile = spec.value_profile;
    std::size_t distinct = effective_max_groups(spec.problem);
    if (profile == "one-group") distinct = 1;
    if (profile == "unique") distinct = n;
    if (profile == "too-many-groups") distinct = effective_max_groups(spec.problem) + 1;
    const std::vector<std::uint32_t> pool =
        distinct_keys(std::max<std::size_t>(1, distinct), random);
    std::vector<std::uint32_t> keys(n);
    if (profile == "unique" || profile == "too-many-groups") {
      for (std::size_t i = 0; i < n; ++i) {
        keys[i] = i < pool.size() ? pool[i] : pool[random() % pool.size()];
      }
      std::shuffle(keys.begin(), keys.end(), random);
    } else {
      const std::vector<std::uint64_t> seeds = chunk_seeds(n, random);
      for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t chunk) {
        std::mt19937_64 draw(seeds[chunk]);
        for (std::size_t i = begin; i < end; ++i) keys[i] = pool[draw() % pool.size()];
      });
    }
    CaseInputs inputs;
    inputs.problem = spec.problem;
    inputs.buffers["keys"] = to_bytes(keys);
    std::vector<float> values = random_floats(n, "uniform", random);
    if (profile == "tiny" || profile == "huge") {
      const int exponent = profile == "tiny" ? -140 : 117;
      for (float& value : values) value = std::ldexp(value, exponent);
    }
    if (profile == "non-finite") {
      const float kNonFinite[] = {std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity()};
      for (std::size_t i = 0; i < n / 4000; ++i) values[random() % n] = kNonFinite[random() % 3];
    }
    inputs.buffers["values"] = to_bytes(values);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::size_t n = inputs.problem.elements;
    const std::uint64_t max_groups = effective_max_groups(inputs.problem);
    const auto keys = from_bytes<std::uint32_t>(inputs.buffers.at("keys"), n);
    const auto values = from_bytes<float>(inputs.buffers.at("values"), n);
    std::unordered_map<std::uint32_t, ExactGroup> exact;
    for (std::size_t i = 0; i < n; ++i) {
      ExactGroup& group = exact[keys[i]];
      ++group.count;
      if (std::isnan(values[i])) {
        group.nan = true;
      } else if (std::isinf(values[i])) {
        (values[i] > 0 ? group.positive_infinity : group.negative_infinity) = true;
      } else {
        group.sum += values[i];
        group.magnitude += std::abs(static_cast<double>(values[i]));
        ++group.finite;
      }
    }
    const std::uint32_t top = scale_top(values);
    const auto groups = from_bytes<std::uint32_t>(outputs.at("groups"), 2);
    CaseVerdict verdict;
    if (exact.size() > max_groups) {
      // More distinct keys than the call allows: the outputs must say so.
      if (groups[0] <= max_groups && groups[1] == 0) {
        verdict.failed_checks.push_back(std::to_string(exact.size()) +
                                        " distinct keys exceed max_groups (" +
                                        std::to_string(max_groups) + ") but groups[0] is " +
                                        std::to_string(groups[0]) + " and groups[1] is 0");
      }
      verdict.report.compared = 1;
      return verdict;
    }
    if (groups[0] != exact.size() || groups[1] != 0) {
      verdict.failed_checks.push_back("groups is {" + std::to_string(groups[0]) + ", " +
                                      std::to_string(groups[1]) + "}, expected {" +
                                      std::to_string(exact.size()) + ", 0}");
    }
    // Both sides in key order: keys and counts exact, then each sum within its bound.
    const std::size_t got = std::min<std::size_t>(groups[0], max_groups);
    const auto group_keys = from_bytes<std::uint32_t>(outputs.at("group_keys"), got);
    const auto group_sums = from_bytes<float>(outputs.at("group_sums"), got);
    const auto group_counts = from_bytes<std::uint32_t>(outputs.at("group_counts"), got);
    std::vector<std::size_t> order(got);
    for (std::size_t i = 0; i < got; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return group_keys[a] < group_keys[b]; });
    std::vector<std::uint32_t> expected_keys;
    for (const auto& [key, group] : exact) expected_keys.push_back(key);
    std::sort(expected_keys.begin(), expected_keys.end());
    std::vector<std::uint32_t> expected_words, actual_words;
    std::vector<double> expected_sums, allowed;
    std::vector<float> actual_sums;
    for (std::size_t i : order) {
      actual_words.insert(actual_words.end(), {group_keys[i], group_counts[i]});
      actual_sums.push_back(group_sums[i]);
    }
    // f32 rounds to infinity from 2^128 - 2^103 (the largest finite value and half its ulp) on.
    constexpr double kOverflow = 0x1p128 - 0x1p103;
    constexpr double kInfinity = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < expected_keys.size(); ++i) {
      const ExactGroup& group = exact.at(expected_keys[i]);
      expected_words.insert(expected_words.end(), {expected_keys[i], group.count});
      double expected = group.sum;
      if (group.nan || (group.positive_infinity && group.negative_infinity)) {
        expected = std::numeric_limits<double>::quiet_NaN();
      } else if (group.positive_infinity || group.negative_infinity) {
        expected = group.positive_infinity ? kInfinity : -kInfinity;
      }
      const double bound = allowed_error(group.sum, group.magnitude, group.finite, top);
      // A sum whose bound reaches past f32's range may be that infinity, and must be it when
      // all of its range is past.
      if (std::isfinite(expected) && std::abs(expected) + bound >= kOverflow) {
        const double infinity = std::copysign(kInfinity, expected);
        const bool got_it = i < actual_sums.size() && actual_sums[i] == infinity;
        if (got_it || std::abs(expected) - bound >= kOverflow) expected = infinity;
      }
      expected_sums.push_back(expected);
      allowed.push_back(bound);
    }
    verdict.report = compare_exact(expected_words, actual_words);
    if (verdict.report.mismatch_count == 0 && actual_sums.size() == expected_sums.size()) {
      verdict.report = compare_within(expected_sums, actual_sums, allowed);
      for (std::size_t i = 0; i < allowed.size(); ++i) {
        if (std::isfinite(expected_sums[i])) {
          verdict.allowed_absolute_error = std::max(verdict.allowed_absolute_error, allowed[i]);
        }
      }
    }
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override {
    WorkAmount amount;
    amount.bytes = 8 * problem.elements;
    amount.items = problem.elements;
    amount.items_name = "rows";
    return amount;
  }

  bool deterministic() const override { return false; }

  // Revision 3 on the H200 at 2^28 rows and 1024 groups (build 09fd9b1): 1024 workgroups with
  // tables of 2048 slots (24 KiB: about 8 per compute unit of 132 at once) 54.5 G rows/s, 512
  // with 4096 slots (48 KiB) 40.5. At 4096 groups, the tuning problem, neither was timed with the
  // short search they now get (revision 3 first searched 4096 slots at load 1 there: 2.2).
  std::vector<std::string> starting_points() const override {
    // H200, session 27 call 2, 4096 groups: 2048 slots in 1024 workgroups of 256 14.5 ms, 4096
    // slots in 512 workgroups of 512 11.3 ms (of 256: 21.3 ms). Session 28 call 2: the latter
    // with the keys in two parts 8.80 ms (certified there, seed 2801); probe_window=4 took 1024
    // groups from 4.94 to 3.37 ms. Session 29: with two parts and probe_window=4 6.24-6.36 ms at
    // 4096 groups (the main job's winner, against 8.89 ms without the window), and at 2^20 groups
    // no workgroup table with the keys in four parts of the global table 11.55 ms (certified
    // with seeds 2901 and 2902). A budget of 3 times the default and the first two: the
    // winners of the 4096-group buckets and of the bucket with many groups.
    return {
        "workgroup_size=512,rows_per_invocation=4,local_slots=4096,persistent_workgroups=512,"
        "key_partitions=2,probe_window=4",
        "local_slots=0,rows_per_invocation=4,key_partitions=4",
        "workgroup_size=512,rows_per_invocation=4,local_slots=4096,persistent_workgroups=512,"
        "key_partitions=2",
        "workgroup_size=512,rows_per_invocation=4,local_slots=4096,persistent_workgroups=512",
        "workgroup_size=256,rows_per_invocation=4,local_slots=2048,persistent_workgroups=1024"};
  }

  // 4096 groups, the most the workgroup tables hold on the H200; bench --groups times others.
  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem = elements_problem(tuning_elements(cpu_adapter));
    problem.max_groups = kTuningGroups;
    return problem;
  }

  // The row counts' buckets at 4096 groups, then one at the main row count with many groups
  // (2^20 on a GPU, 2^16 on a CPU adapter), labelled "2^28g2^20": past what the workgroup tables
  // hold the fastest schedules are others (no workgroup table, keys in parts by the global
  // table's slot: session 29), and a call takes the bucket nearest in rows and groups.
  std::vector<SizeBucket> size_buckets(bool cpu_adapter) const override {
    std::vector<SizeBucket> buckets = KernelDefinition::size_buckets(cpu_adapter);
    Problem many_groups = tuning_problem(cpu_adapter);
    many_groups.max_groups = cpu_adapter ? kCpuManyGroups : kGpuManyGroups;
    buckets.push_back({"2^" + std::to_string(std::countr_zero(many_groups.elements)) + "g2^" +
                           std::to_string(std::countr_zero(many_groups.max_groups)),
                       many_groups, false});
    return buckets;
  }
};

}  // namespace

const KernelDefinition& group_by_sum_f32_kernel() {
  static const GroupBySumF32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
