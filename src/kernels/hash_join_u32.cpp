// hash_join_u32: the inner equi-join of a build side (build_n unique u32 keys with u32 payloads: a
// primary key) and a probe side (n u32 keys with u32 payloads): for every probe row whose key is
// a build key, the pair (probe payload, build payload), in no particular order, and their count.
//
// Passes: "clear" empties an open-addressing table of `capacity` slots (the smallest power of two
// at least table_factor * build_n, at least 2: a load of at most 1/2 or 1/4), "build" inserts
// every build row by compare-exchange on its slot's key word, "probe" looks every probe row up
// and appends its pair. A slot is two words, key then payload, side by side so that a probe that
// finds its key reads the payload from the same cache line; the empty key is 0xffffffff, so a
// build key 0xffffffff lives in one extra slot (index capacity) whose key word counts the build
// rows that carry it. Slots are visited from fmix32(key) (MurmurHash3's finaliser: dense primary
// keys 0, 1, 2, ... spread over the table) in steps of 1 (probing 0, linear) or 1, 2, 3, ...
// (probing 1, triangular), which on a power-of-two table both visit every slot; the table is never
// full, so each search ends within capacity steps. A build invocation issues all its rows' first
// compare-exchanges before it finishes any insert. A probe invocation loads all its rows' keys,
// then all their home slots, before it finishes any search (memory-level parallelism), and reads
// a slot by one 8-byte load (slot_loads 1; 2 through a read-only binding of the table) or by
// atomic loads of its words (slot_loads 0). The matches' places: a workgroup atomic per match
// (match_places 0), or ranks by subgroup prefix sums with one atomic per subgroup in workgroup
// memory (1) or in global memory (2); either way the room is reserved from status[0] by atomics,
// so the pairs' order depends on the order in which workgroups finish: the pairs are promised as
// a multiset, and deterministic() is false.
//
// A build key that occurs twice is an error, detected on the GPU: status[1] counts the build rows
// whose key was already in the table (then dropped) and status[2] holds one such key; the pairs
// are then unspecified. status[0] is the number of pairs. Knobs: workgroup_size,
// rows_per_invocation (rows per invocation in build and probe, workgroup_size apart),
// table_factor, probing, slot_loads, match_places (1 and 2 need subgroups), probe_window. Revision
// 2 added slot_loads and match_places, with revision 1's probe as slot_loads=0, match_places=0;
// revision 3 only moved table_slots' declaration into the binding table's; revision 4 added
// slot_loads=2 and the table's read-only binding; revision 5 added probe_window (the probe reads
// the aligned run of W slots that holds the slot it needs, W = 4 a 32-byte sector, so that a
// search past its home slot mostly costs no further round trip) and one slot of padding after
// the extra slot, so that 16-byte loads reach it.
//
// Oracle: the join through a CPU hash table, probed on every core; the pairs compared as a multiset
// (order-free digests on every core; both sides sorted to name a difference), the count exact,
// status[1] the build rows minus the distinct build keys and status[2] one of the repeated keys.
// Bytes moved: 8 (build_n + n), the keys and payloads read; rate: probe keys.

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

#include "kernel_support.hpp"
#include "util/try.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

constexpr std::uint32_t kEmptyKey = 0xffffffffu;
// The table's read-only view (slot_loads=2).
constexpr std::uint32_t kTableViewBinding = 9;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512}, 256};
const KnobSpec kRowsPerInvocation{
    "rows_per_invocation", "build and probe rows per invocation", {1, 2, 4, 8}, 1};
const KnobSpec kTableFactor{
    "table_factor", "table slots per build row, at least (load at most 1/factor)", {2, 4}, 2};
const KnobSpec kProbing{"probing", "0: linear probing, 1: triangular (quadratic)", {0, 1}, 0};
const KnobSpec kSlotLoads{
    "slot_loads",
    "probe reads 0: key, then payload by atomics, 1: the 8-byte slot at once, "
    "2: the 8-byte slot through a read-only binding of the table",
    {0, 1, 2},
    1};
const KnobSpec kMatchPlaces{
    "match_places",
    "0: a workgroup atomic per match, 1: subgroup ranks and a workgroup "
    "atomic per subgroup, 2: subgroup ranks and a global atomic per subgroup",
    {0, 1, 2},
    0};
// Linear probing at load 1/2 visits 1.5 slots on a hit and 2.5 on a miss on average, and a warp
// waits for its longest search (29-44 slots at 2^20 build rows): slot by slot, each step is a
// dependent round trip to L2 or memory.
const KnobSpec kProbeWindow{
    "probe_window",
    "table slots the probe reads at once: the aligned run that holds the slot it needs "
    "(4: one 32-byte sector; more than 1 needs slot_loads 1 or 2 and linear probing)",
    {1, 2, 4},
    1};

const char* const kParamsWgsl = R"(
struct Params { n: u32, build_n: u32, capacity: u32 }
)";

// Shared by every pass: the table's layout, the hash and the probing sequence.
const char* const kTableWgsl = R"(
const EMPTY: u32 = 0xffffffffu;
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
fn first_slot(key: u32) -> u32 { return hash(key) & (params.capacity - 1u); }
// The slot after `slot` at the `step`th step (1, 2, ...) of a search.
fn next_slot(slot: u32, step: u32) -> u32 {
  return (slot + select(1u, step, TRIANGULAR == 1u)) & (params.capacity - 1u);
}
fn key_word(slot: u32) -> u32 { return 2u * slot; }
fn payload_word(slot: u32) -> u32 { return 2u * slot + 1u; }

@compute @workgroup_size(WG)
fn clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         @builtin(local_invocation_index) local: u32) {
  let slot = linear_workgroup(group, groups) * WG + local;
  if (slot < params.capacity) {
    atomicStore(&table[key_word(slot)], EMPTY);
    atomicStore(&table[payload_word(slot)], 0u);
  }
  if (slot == params.capacity) {  // the slot of key 0xffffffff: its key word counts its rows
    atomicStore(&table[key_word(slot)], 0u);
    atomicStore(&table[payload_word(slot)], 0u);
    for (var s = 0u; s < 3u; s++) { atomicStore(&status[s], 0u); }
  }
}
)";

// WGSL's weak compare-exchange is Vulkan's strong one, but a spurious failure (the slot still
// empty) would only retry the same slot: it counts as a step, so the loop stays bounded. Every
// row's first claim is issued before any row's insert finishes, so that an invocation has
// rows_per_invocation atomics in flight (as the probe has its table reads).
const char* const kBuildWgsl = R"(
fn report_duplicate(key: u32) {
  atomicAdd(&status[1], 1u);
  atomicStore(&status[2], key);
}

// A build row's first claim: key 0xffffffff counts its row in the extra slot (x = the count
// before it); another key compare-exchanges its home slot (x = the key word it held, y = 1 when
// this row claimed it).
fn first_claim(key: u32) -> vec2u {
  if (key == EMPTY) { return vec2u(atomicAdd(&table[key_word(params.capacity)], 1u), 0u); }
  let claimed = atomicCompareExchangeWeak(&table[key_word(first_slot(key))], EMPTY, key);
  return vec2u(claimed.old_value, select(0u, 1u, claimed.exchanged));
}

fn finish_insert(key: u32, payload: u32, first: vec2u) {
  if (key == EMPTY) {
    if (first.x == 0u) {
      atomicStore(&table[payload_word(params.capacity)], payload);
    } else {
      report_duplicate(key);
    }
    return;
  }
  var slot = first_slot(key);
  var held = first.x;
  var exchanged = first.y == 1u;
  for (var step = 1u; step <= params.capacity; step++) {
    if (exchanged) {
      atomicStore(&table[payload_word(slot)], payload);
      return;
    }
    if (held == key) {
      report_duplicate(key);
      return;
    }
    if (step == params.capacity) { break; }
    if (held != EMPTY) { slot = next_slot(slot, step); }
    let claimed = atomicCompareExchangeWeak(&table[key_word(slot)], EMPTY, key);
    held = claimed.old_value;
    exchanged = claimed.exchanged;
  }
}

@compute @workgroup_size(WG)
fn build(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         @builtin(local_invocation_index) local: u32) {
  let first = linear_workgroup(group, groups) * (WG * ROWS) + local;
  var key = array<u32, ROWS>();
  var payload = array<u32, ROWS>();
  for (var r = 0u; r < ROWS; r++) {
    let row = first + r * WG;
    if (row < params.build_n) {
      key[r] = build_keys[row];
      payload[r] = build_payloads[row];
    }
  }
  var claim = array<vec2u, ROWS>();
  for (var r = 0u; r < ROWS; r++) {
    if (first + r * WG < params.build_n) { claim[r] = first_claim(key[r]); }
  }
  for (var r = 0u; r < ROWS; r++) {
    if (first + r * WG < params.build_n) { finish_insert(key[r], payload[r], claim[r]); }
  }
}
)";

// The probe's reads of the table. SLOT_LOADS 0: the key word by an atomic load, and on a match
// the payload word by a second, dependent one (revision 1). SLOT_LOADS 1: the whole slot by one
// 8-byte load through `table_slots`, a plain view of `table`'s binding (wgsl_bindings): the probe
// never writes the table, so it needs no atomics once the build pass has ended.
const char* const kAtomicSlotLoadsWgsl = R"(
fn load_slot(slot: u32) -> vec2u { return vec2u(atomicLoad(&table[key_word(slot)]), 0u); }
fn slot_payload(slot: u32, held: vec2u) -> u32 { return atomicLoad(&table[payload_word(slot)]); }
)";

const char* const kWholeSlotLoadsWgsl = R"(
fn load_slot(slot: u32) -> vec2u { return table_slots[slot]; }
fn slot_payload(slot: u32, held: vec2u) -> u32 { return held.y; }
)";

// SLOT_LOADS 2: the same 8-byte loads through `table_view`, binding 9, declared read-only, so
// that the driver may read the table through its read-only (non-coherent) cache path. WebGPU
// forbids one buffer bound writable and read-only in one dispatch, and a bind group must fill
// every binding of the layout: the probe pass binds the table at 9 and a 16-byte stand-in at
// 5, which it does not use; the clear and build passes (and every pass of the other
// schedules) bind the stand-in at 9.
const char* const kReadOnlySlotLoadsWgsl = R"(
fn load_slot(slot: u32) -> vec2u { return table_view[slot]; }
fn slot_payload(slot: u32, held: vec2u) -> u32 { return held.y; }
)";

// A probe row's search: from its home slot (the extra slot for key 0xffffffff, whose key word
// counts the build rows that carry it), whose contents `held` are already loaded, so that a
// probe invocation issues the first load of every row before it waits for any. Found: x = 1 and
// y = the build payload; not found: x = 0.
const char* const kLookupWgsl = R"(
fn home_slot(key: u32) -> u32 { return select(first_slot(key), params.capacity, key == EMPTY); }

// What a search reads first, and where: its home slot.
alias Held = vec2u;
fn search_start(key: u32) -> u32 { return home_slot(key); }
fn read_first(slot: u32) -> Held { return load_slot(slot); }

fn finish_lookup(key: u32, home: u32, home_held: vec2u) -> vec2u {
  if (key == EMPTY) {
    return vec2u(select(0u, 1u, home_held.x != 0u), slot_payload(home, home_held));
  }
  var slot = home;
  var held = home_held;
  for (var step = 1u; step <= params.capacity; step++) {
    if (held.x == key) { return vec2u(1u, slot_payload(slot, held)); }
    if (held.x == EMPTY) { break; }
    slot = next_slot(slot, step);
    held = load_slot(slot);
  }
  return vec2u(0u, 0u);
}
)";

// PROBE_WINDOW W > 1 (slot_loads 1 or 2, linear probing): the probe reads the table W slots at a
// time, the aligned run that holds the slot it needs, through `table_windows`, a vec4 view of the
// table's binding (5, or the read-only 9 with slot_loads 2; the probe reads no other view of it).
// Linear probing visits the same slots in the same order as slot by slot (the slots of the
// first run before the home slot are passed over), so the build pass is unchanged. Every run is
// in the table: capacity is a multiple of W, and the wrap goes back to run 0. Key 0xffffffff's
// extra slot (index capacity, even) is the first half of the vec4 after the table's last run
// (the table has one slot of padding after it).
// The run's loads and its slots' tests are unrolled (unrolled_loop: each sees its index as a
// `const`), so that the run stays in registers, with no bounds clamps on its indices.
const char* const kRunLoadHeadWgsl = R"(
alias Held = array<vec2u, PROBE_WINDOW>;

fn load_run(slot: u32) -> Held {
  let first = (slot & ~(PROBE_WINDOW - 1u)) / 2u;
  var run: Held;
)";

const char* const kRunLoadPairWgsl = R"(    let two = table_windows[first + i];
    run[2u * i] = two.xy;
    run[2u * i + 1u] = two.zw;
)";

const char* const kRunSearchHeadWgsl = R"(  return run;
}

fn search_start(key: u32) -> u32 { return first_slot(key); }
fn read_first(slot: u32) -> Held { return load_run(slot); }

fn finish_lookup(key: u32, home: u32, home_run: Held) -> vec2u {
  if (key == EMPTY) {
    let extra = table_windows[params.capacity / 2u].xy;
    return vec2u(select(0u, 1u, extra.x != 0u), extra.y);
  }
  var skipped = home & (PROBE_WINDOW - 1u);
  var start = home - skipped;
  var run = home_run;
  for (var runs = 0u; runs <= params.capacity / PROBE_WINDOW; runs++) {
)";

const char* const kRunSlotWgsl = R"(    if (i >= skipped) {
      if (run[i].x == key) { return vec2u(1u, run[i].y); }
      if (run[i].x == EMPTY) { return vec2u(0u, 0u); }
    }
)";

const char* const kRunSearchTailWgsl = R"(    skipped = 0u;
    start = (start + PROBE_WINDOW) & (params.capacity - 1u);
    run = load_run(start);
  }
  return vec2u(0u, 0u);
}
)";

std::string window_lookup_wgsl(std::uint32_t window) {
  return std::string(kRunLoadHeadWgsl) + unrolled_loop("i", window / 2, kRunLoadPairWgsl) +
         kRunSearchHeadWgsl + indented(unrolled_loop("i", window, kRunSlotWgsl), 1) +
         kRunSearchTailWgsl;
}

// write_pairs places the invocation's matches (found[r].x == 1) and stores their pairs; every
// invocation of the workgroup calls it, in uniform control flow. MATCH_PLACES 0 (revision 1):
// one workgroup-memory atomic per match and one global atomic per workgroup, so a workgroup's
// pairs are contiguous but in no order within it.
const char* const kWorkgroupMatchPlacesWgsl = R"(
var<workgroup> workgroup_matches: atomic<u32>;
var<workgroup> workgroup_base: u32;

fn write_pairs(found: array<vec2u, ROWS>, probe_payload: array<u32, ROWS>, id: Invocation) {
  if (id.local == 0u) { atomicStore(&workgroup_matches, 0u); }
  workgroupBarrier();
  var place = array<u32, ROWS>();
  for (var r = 0u; r < ROWS; r++) {
    place[r] = NONE;
    if (found[r].x == 1u) { place[r] = atomicAdd(&workgroup_matches, 1u); }
  }
  workgroupBarrier();
  if (id.local == 0u) { workgroup_base = atomicAdd(&status[0], atomicLoad(&workgroup_matches)); }
  let base = workgroupUniformLoad(&workgroup_base);
  for (var r = 0u; r < ROWS; r++) {
    if (place[r] != NONE) {
      pairs_probe[base + place[r]] = probe_payload[r];
      pairs_build[base + place[r]] = found[r].y;
    }
  }
}
)";

// MATCH_PLACES 1 and 2: a subgroup numbers its matches by prefix sums, round by round (so each
// round's stores are consecutive words), and reserves their room with one atomic: 1 in
// workgroup memory, then one global atomic per workgroup; 2 a global atomic per subgroup, with
// no barrier and no workgroup memory.
const char* const kSubgroupMatchRanksWgsl = R"(
// Each match's place among the subgroup's, and (returned) the subgroup's matches.
fn subgroup_ranks(found: array<vec2u, ROWS>, place: ptr<function, array<u32, ROWS>>) -> u32 {
  var total = 0u;
  for (var r = 0u; r < ROWS; r++) {
    let hit = found[r].x;
    (*place)[r] = total + subgroupExclusiveAdd(hit);
    total += subgroupAdd(hit);
  }
  return total;
}

fn store_pairs(found: array<vec2u, ROWS>, probe_payload: array<u32, ROWS>,
               place: array<u32, ROWS>, base: u32) {
  for (var r = 0u; r < ROWS; r++) {
    if (found[r].x == 1u) {
      pairs_probe[base + place[r]] = probe_payload[r];
      pairs_build[base + place[r]] = found[r].y;
    }
  }
}
)";

const char* const kSubgroupWorkgroupPlacesWgsl = R"(
var<workgroup> workgroup_matches: atomic<u32>;
var<workgroup> workgroup_base: u32;

fn write_pairs(found: array<vec2u, ROWS>, probe_payload: array<u32, ROWS>, id: Invocation) {
  if (id.local == 0u) { atomicStore(&workgroup_matches, 0u); }
  workgroupBarrier();
  var place = array<u32, ROWS>();
  let total = subgroup_ranks(found, &place);
  var subgroup_base = 0u;
  if (id.lane == 0u) { subgroup_base = atomicAdd(&workgroup_matches, total); }
  subgroup_base = subgroupBroadcast(subgroup_base, 0u);
  workgroupBarrier();
  if (id.local == 0u) { workgroup_base = atomicAdd(&status[0], atomicLoad(&workgroup_matches)); }
  store_pairs(found, probe_payload, place, workgroupUniformLoad(&workgroup_base) + subgroup_base);
}
)";

const char* const kSubgroupGlobalPlacesWgsl = R"(
fn write_pairs(found: array<vec2u, ROWS>, probe_payload: array<u32, ROWS>, id: Invocation) {
  var place = array<u32, ROWS>();
  let total = subgroup_ranks(found, &place);
  var base = 0u;
  if (id.lane == 0u && total != 0u) { base = atomicAdd(&status[0], total); }
  store_pairs(found, probe_payload, place, subgroupBroadcast(base, 0u));
}
)";

const char* const kInvocationWgsl = R"(
struct Invocation {
  @builtin(local_invocation_index) local: u32,
}
)";

const char* const kSubgroupInvocationWgsl = R"(
struct Invocation {
  @builtin(local_invocation_index) local: u32,
  @builtin(subgroup_invocation_id) lane: u32,
}
)";

// Every row's probe key and payload are loaded first, then every row's home slot, then the
// searches finish one by one: ROWS table reads in flight per invocation (memory-level
// parallelism), not one row's chain of dependent loads after another's.
const char* const kProbeWgsl = R"(
@compute @workgroup_size(WG)
fn probe(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         id: Invocation) {
  let first = linear_workgroup(group, groups) * (WG * ROWS) + id.local;
  var key = array<u32, ROWS>();
  var probe_payload = array<u32, ROWS>();
  for (var r = 0u; r < ROWS; r++) {
    let row = first + r * WG;
    if (row < params.n) {
      key[r] = probe_keys[row];
      probe_payload[r] = probe_payloads[row];
    }
  }
  var home = array<u32, ROWS>();
  var held = array<Held, ROWS>();
  for (var r = 0u; r < ROWS; r++) {
    if (first + r * WG < params.n) {
      home[r] = search_start(key[r]);
      held[r] = read_first(home[r]);
    }
  }
  var found = array<vec2u, ROWS>();
  for (var r = 0u; r < ROWS; r++) {
    if (first + r * WG < params.n) { found[r] = finish_lookup(key[r], home[r], held[r]); }
  }
  write_pairs(found, probe_payload, id);
}
)";

// A seeded permutation of the u32 values, leaving out 0 and 0xffffffff: the keys at distinct
// indices are distinct, so a side of 2^20 unique keys needs no set of them, is drawn on every
// core, and keys at indices past the build side's are absent from it. Each step of the
// permutation (adding a constant, xor with the value shifted right by 16, multiplying by an odd
// constant) is invertible, which finds the indices whose keys are left out.
class KeyPermutation {
 public:
  explicit KeyPermutation(std::mt19937_64& random)
      : offset_(static_cast<std::uint32_t>(random())),
        first_(static_cast<std::uint32_t>(random()) | 1u),
        second_(static_cast<std::uint32_t>(random()) | 1u),
        skipped_{std::min(inverse(0u), inverse(kEmptyKey)),
                 std::max(inverse(0u), inverse(kEmptyKey))} {}

  // The key at `index` (below 2^32 - 2): never 0 nor 0xffffffff.
  std::uint32_t key(std::uint64_t index) const {
    for (std::uint32_t skipped : skipped_) {
      if (index >= skipped) ++index;
    }
    return permute(static_cast<std::uint32_t>(index));
  }

 private:
  std::uint32_t permute(std::uint32_t x) const {
    x += offset_;
    x ^= x >> 16;
    x *= first_;
    x ^= x >> 16;
    x *= second_;
    return x ^ (x >> 16);
  }
  std::uint32_t inverse(std::uint32_t x) const {
    x ^= x >> 16;
    x *= inverse_of(second_);
    x ^= x >> 16;
    x *= inverse_of(first_);
    x ^= x >> 16;
    return x - offset_;
  }
  // The multiplicative inverse of an odd number modulo 2^32 (Newton's iteration: each step
  // doubles the correct low bits, from 3).
  static std::uint32_t inverse_of(std::uint32_t odd) {
    std::uint32_t inverse = odd;
    for (int step = 0; step < 4; ++step) inverse *= 2u - odd * inverse;
    return inverse;
  }

  std::uint32_t offset_, first_, second_;
  std::array<std::uint32_t, 2> skipped_;  // ascending
};

std::uint64_t table_capacity(std::uint64_t build_n, std::uint64_t factor) {
  return std::max<std::uint64_t>(2, std::bit_ceil(std::max<std::uint64_t>(1, build_n * factor)));
}

// The u32 at word `i` of an input or output's bytes.
std::uint32_t word_at(const std::vector<std::byte>& bytes, std::size_t i) {
  std::uint32_t word = 0;
  std::memcpy(&word, bytes.data() + 4 * i, 4);
  return word;
}

// An order-free digest of a multiset of (probe payload, build payload) pairs: how many, and two
// sums of a bijective 64-bit mix of each. One pair changed, added or lost always changes it;
// several changes cancel out only by a chance of about 2^-128.
struct PairDigest {
  std::uint64_t count = 0;
  std::uint64_t sum = 0;
  std::uint64_t other_sum = 0;

  bool operator==(const PairDigest&) const = default;

  // The digest of pair_of(i) for i in [0, rows), skipping rows without one, on every core.
  template <typename PairOf>
  static PairDigest of(std::size_t rows, PairOf pair_of) {
    std::vector<PairDigest> chunks((rows + kChunkElements - 1) / kChunkElements);
    for_each_chunk(rows, [&](std::size_t begin, std::size_t end, std::size_t chunk) {
      for (std::size_t i = begin; i < end; ++i) {
        if (std::optional<std::uint64_t> pair = pair_of(i)) chunks[chunk].add(*pair);
      }
    });
    PairDigest total;
    for (const PairDigest& chunk : chunks) {
      total.count += chunk.count;
      total.sum += chunk.sum;
      total.other_sum += chunk.other_sum;
    }
    return total;
  }

 private:
  // SplitMix64's finalizer (a bijection), with two constants for the two sums.
  static std::uint64_t mix(std::uint64_t x, std::uint64_t multiplier) {
    x ^= x >> 30;
    x *= multiplier;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  void add(std::uint64_t pair) {
    ++count;
    sum += mix(pair, 0xbf58476d1ce4e5b9ull);
    other_sum += mix(pair ^ 0x5851f42d4c957f2dull, 0xd6e8feb86659fd93ull);
  }
};

std::vector<std::uint32_t> as_words(const std::vector<std::uint64_t>& pairs) {
  std::vector<std::uint32_t> words;
  words.reserve(2 * pairs.size());
  for (std::uint64_t pair : pairs) {
    words.push_back(static_cast<std::uint32_t>(pair >> 32));
    words.push_back(static_cast<std::uint32_t>(pair));
  }
  return words;
}

// The oracle's build side: an open-addressing table (linear probing, at most half full) in flat
// arrays, which a probe side of 2^24 rows looks up on every core; node-based maps were the
// oracle's whole cost at that size.
class BuildTable {
 public:
  BuildTable(const std::vector<std::uint32_t>& keys, const std::vector<std::uint32_t>& payloads)
      : mask_(table_capacity(keys.size(), 2) - 1), keys_(mask_ + 1, kNoKey), payloads_(mask_ + 1) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      std::uint64_t slot = first_slot(keys[i]);
      while (keys_[slot] != kNoKey && keys_[slot] != keys[i]) slot = (slot + 1) & mask_;
      if (keys_[slot] == keys[i]) {
        ++repeated_rows_;
        repeated_keys_.push_back(keys[i]);
        continue;
      }
      keys_[slot] = keys[i];
      payloads_[slot] = payloads[i];
    }
    std::sort(repeated_keys_.begin(), repeated_keys_.end());
  }

  // The payload of the build row with `key`, the first one when it is repeated.
  std::optional<std::uint32_t> find(std::uint32_t key) const {
    for (std::uint64_t slot = first_slot(key); keys_[slot] != kNoKey; slot = (slot + 1) & mask_) {
      if (keys_[slot] == key) return payloads_[slot];
    }
    return std::nullopt;
  }
  // Build rows whose key an earlier row had.
  std::uint64_t repeated_rows() const { return repeated_rows_; }
  bool repeated(std::uint32_t key) const {
    return std::binary_search(repeated_keys_.begin(), repeated_keys_.end(), key);
  }

 private:
  // Past every u32 key, so that any key, 0xffffffff too, can be stored.
  static constexpr std::uint64_t kNoKey = std::uint64_t{1} << 32;
  std::uint64_t first_slot(std::uint32_t key) const {
    return ((key * 0x9e3779b97f4a7c15ull) >> 32) & mask_;
  }

  std::uint64_t mask_;
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> payloads_;
  std::uint64_t repeated_rows_ = 0;
  std::vector<std::uint32_t> repeated_keys_;
};

class HashJoinU32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "hash_join_u32"; }
  std::uint32_t revision() const override { return 5; }
  std::string_view summary() const override {
    return "inner equi-join on unique u32 build keys: (probe payload, build payload) pairs";
  }

  std::vector<KnobSpec> knobs() const override {
    return {kWorkgroupSize, kRowsPerInvocation, kTableFactor, kProbing,
            kSlotLoads,     kMatchPlaces,       kProbeWindow};
  }

  Status check_resources(const Schedule& schedule, const DeviceCapabilities&) const override {
    const std::uint32_t window = knob(schedule, kProbeWindow);
    if (window == 1) return Ok{};
    if (knob(schedule, kSlotLoads) == 0) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob probe_window (" + std::to_string(window) +
                       ") needs slot_loads 1 or 2: runs of slots are read by 16-byte loads, not by "
                       "atomic loads of their words.");
    }
    if (knob(schedule, kProbing) != 0) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob probe_window (" + std::to_string(window) +
                       ") needs probing 0: triangular probing leaves a run after its first slot.");
    }
    return Ok{};
  }

  // Binding 9, the table's read-only view, is declared (and bound) in every schedule, so that
  // the bindings do not depend on the schedule; only slot_loads=2 reads it.
  std::vector<WgslBinding> wgsl_bindings(const Schedule& schedule) const override {
    const std::uint32_t slot_loads = knob(schedule, kSlotLoads);
    const bool runs = knob(schedule, kProbeWindow) != 1;
    WgslBinding table = storage_read_write(5, "table", "atomic<u32>");
    WgslBinding table_view = storage_read(kTableViewBinding, "table_view", "vec2u");
    if (slot_loads == 1) {
      table = with_view(table, runs ? "table_windows" : "table_slots", runs ? "vec4u" : "vec2u");
    }
    if (slot_loads == 2 && runs) table_view = with_view(table_view, "table_windows", "vec4u");
    return {params_binding("Params"),
            storage_read(1, "build_keys", "u32"),
            storage_read(2, "build_payloads", "u32"),
            storage_read(3, "probe_keys", "u32"),
            storage_read(4, "probe_payloads", "u32"),
            table,
            storage_read_write(6, "pairs_probe", "u32"),
            storage_read_write(7, "pairs_build", "u32"),
            storage_read_write(8, "status", "atomic<u32>"),
            table_view};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {
        {"build_keys", ElementType::kU32, BufferRole::kInput, "build_n elements, at least 1"},
        {"build_payloads", ElementType::kU32, BufferRole::kInput, "build_n elements, at least 1"},
        {"probe_keys", ElementType::kU32, BufferRole::kInput, "n elements, at least 1"},
        {"probe_payloads", ElementType::kU32, BufferRole::kInput, "n elements, at least 1"},
        {"pairs_probe", ElementType::kU32, BufferRole::kOutput, "n elements, at least 1"},
        {"pairs_build", ElementType::kU32, BufferRole::kOutput, "n elements, at least 1"},
        {"status", ElementType::kU32, BufferRole::kOutput,
         "3 elements: pairs, repeated build rows, a repeated key"},
        {"table", ElementType::kU32, BufferRole::kScratch,
         "2 (capacity + 2) elements, capacity the power of two at least table_factor "
         "build_n and probe_window: the slots, key 0xffffffff's slot and one of padding"},
        {"table_stand_in", ElementType::kU32, BufferRole::kScratch,
         "4 elements, bound at the one of the table's bindings (5, 9) that a pass leaves "
         "unread"}};
  }

  std::vector<std::string> entry_points(const Schedule&) const override {
    return {"clear", "build", "probe"};
  }

  // The table read through a read-only binding first: on the H200 (session 28 call 2) the probe
  // pass took 5.16 ms instead of 7.9 at build 2^20 (51.3 G probe keys/s; 19.9 at 2^26), certified
  // there with seed 2801. Then the same with runs of two slots read at once in a table of load
  // 1/4: on an H100 (session 33 call 2) 4.90 ms against 5.27 at build 2^20 and 14.00 against
  // 15.20 ms at 2^26. Then four rows in flight per invocation with the pairs placed by subgroup
  // ranks, the table at either load (sessions 27 and 29: no gain over one row).
  std::vector<std::string> starting_points() const override {
    return {"slot_loads=2",
            "probe_window=2,slot_loads=2,table_factor=4",
            "rows_per_invocation=4,slot_loads=2,match_places=1",
            "rows_per_invocation=4,match_places=1",
            "rows_per_invocation=4,match_places=2",
            "rows_per_invocation=4,match_places=1,table_factor=4",
            "rows_per_invocation=8,match_places=2,workgroup_size=128"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override {
    const std::uint32_t places = knob(schedule, kMatchPlaces);
    const std::uint32_t window = knob(schedule, kProbeWindow);
    const char* const places_wgsl[] = {kWorkgroupMatchPlacesWgsl, kSubgroupWorkgroupPlacesWgsl,
                                       kSubgroupGlobalPlacesWgsl};
    const char* const slot_loads_wgsl[] = {kAtomicSlotLoadsWgsl, kWholeSlotLoadsWgsl,
                                           kReadOnlySlotLoadsWgsl};
    return std::string(places != 0 ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl +
           kParamsWgsl + binding_declarations(wgsl_bindings(schedule)) + "\n" +
           constant_declarations(
               {{"WG", knob(schedule, kWorkgroupSize), "invocations per workgroup"},
                {"ROWS", knob(schedule, kRowsPerInvocation), "rows per invocation"},
                {"TRIANGULAR", knob(schedule, kProbing), "1: triangular probing, 0: linear"},
                {"PROBE_WINDOW", window, "table slots the probe reads at once"},
                {"NONE", 0xffffffffu, "no match"}}) +
           kTableWgsl + kBuildWgsl +
           (window == 1 ? std::string(slot_loads_wgsl[knob(schedule, kSlotLoads)]) + kLookupWgsl
                        : window_lookup_wgsl(window)) +
           (places != 0 ? kSubgroupInvocationWgsl : kInvocationWgsl) +
           (places != 0 ? kSubgroupMatchRanksWgsl : "") + places_wgsl[places] + kProbeWgsl;
  }

  Status check_problem(const Problem& problem) const override {
    WF_TRY(KernelDefinition::check_problem(problem));
    // The table's word indices, below 2 capacity + 4, stay u32 at either factor.
    constexpr std::uint64_t kLargestBuild = std::uint64_t{1} << 28;
    if (problem.build_elements > kLargestBuild) {
      return Error(ErrorKind::kInvalidInput,
                   "Problem size build_elements (" + std::to_string(problem.build_elements) +
                       ") exceeds the largest build side of hash_join_u32 (" +
                       std::to_string(kLargestBuild) + ": its table's word indices are u32).");
    }
    return Ok{};
  }

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities& device) const override {
    const std::uint64_t n = problem.elements;
    const std::uint64_t build_n = problem.build_elements;
    const std::uint64_t capacity = std::max<std::uint64_t>(
        table_capacity(build_n, knob(schedule, kTableFactor)), knob(schedule, kProbeWindow));
    const std::uint64_t table_bytes = 8 * (capacity + 2);
    if (table_bytes > device.max_storage_binding_size) {
      return Error(ErrorKind::kInvalidInput, "The hash table of " + std::to_string(build_n) +
                                                 " build rows (" + std::to_string(table_bytes) +
                                                 " bytes) exceeds maxStorageBufferBindingSize (" +
                                                 std::to_string(device.max_storage_binding_size) +
                                                 ").");
    }
    const std::uint64_t wg = knob(schedule, kWorkgroupSize);
    const std::uint64_t rows = wg * knob(schedule, kRowsPerInvocation);
    const std::map<std::uint32_t, std::string> buffers = {
        {1, "build_keys"},     {2, "build_payloads"}, {3, "probe_keys"},
        {4, "probe_payloads"}, {5, "table"},          {6, "pairs_probe"},
        {7, "pairs_build"},    {8, "status"},         {kTableViewBinding, "table_stand_in"}};
    std::map<std::uint32_t, std::string> probe_buffers = buffers;
    if (knob(schedule, kSlotLoads) == 2) {
      probe_buffers[5] = "table_stand_in";
      probe_buffers[kTableViewBinding] = "table";
    }
    const std::vector<std::uint32_t> params = {static_cast<std::uint32_t>(n),
                                               static_cast<std::uint32_t>(build_n),
                                               static_cast<std::uint32_t>(capacity)};
    const std::uint64_t build_bytes = std::max<std::uint64_t>(4, 4 * build_n);
    const std::uint64_t probe_bytes = std::max<std::uint64_t>(4, 4 * n);
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(buffer_specs(), {{"build_keys", build_bytes},
                                                      {"build_payloads", build_bytes},
                                                      {"probe_keys", probe_bytes},
                                                      {"probe_payloads", probe_bytes},
                                                      {"pairs_probe", probe_bytes},
                                                      {"pairs_build", probe_bytes},
                                                      {"status", 12},
                                                      {"table", table_bytes},
                                                      {"table_stand_in", 16}});
    plan.passes = {{"clear", ceil_div(capacity + 1, wg), buffers, params},
                   {"build", ceil_div(build_n, rows), buffers, params},
                   {"probe", ceil_div(n, rows), probe_buffers, params}};
    return plan;
  }

  std::string tolerance() const override {
    return "exact: the pairs as a multiset, their count, and the repeated build rows and key";
  }

  std::vector<CaseSpec> certification_cases() const override {
    std::vector<CaseSpec> cases;
    auto add = [&](std::uint64_t build_n, std::uint64_t n, const std::string& profile) {
      Problem problem;
      problem.elements = n;
      problem.build_elements = build_n;
      cases.push_back(
          {"build=" + std::to_string(build_n) + " n=" + std::to_string(n) + " " + profile, problem,
           profile});
    };
    // The first profile is what the tuner and bench draw their inputs from.
    for (std::uint64_t n : edge_sizes(256, 1024)) add(1000, n, "half-match");
    add(0, 1000, "half-match");
    add(1, 1, "all-match");
    add(1, 257, "all-match");
    add(4099, 7919, "all-match");
    add(4099, 7919, "no-match");
    add(2, 64, "extreme-keys");
    add(4099, 104729, "extreme-keys");
    add(65537, 104729, "half-match");
    add(2, 5, "duplicate-build");
    add(1000, 1000, "duplicate-build");
    Problem many;
    many.elements = many_workgroups_size(256, 4, 128u << 20);
    many.build_elements = 1024;
    cases.push_back(
        {"many-workgroups build=1024 n=" + std::to_string(many.elements), many, "half-match"});
    return cases;
  }

  // Profiles: "half-match" (random unique build keys; probe keys half drawn from them, half
  // random), "all-match" (dense primary keys 0 .. build_n - 1, shuffled; every probe key one of
  // them), "no-match" (every probe key absent from the build side), "extreme-keys" (0 and
  // 0xffffffff, the empty slot's key, on both sides), "duplicate-build" (one build key twice).
  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    const std::size_t build_n = spec.problem.build_elements;
    const std::size_t n = spec.problem.elements;
    const std::string& profile = spec.value_profile;
    const bool all_match = profile == "all-match";
    const bool no_match = profile == "no-match";
    const bool extreme_keys = profile == "extreme-keys";
    const KeyPermutation permutation(random);
    std::vector<std::uint32_t> build_keys(build_n);
    if (all_match) {
      for (std::size_t i = 0; i < build_n; ++i) build_keys[i] = static_cast<std::uint32_t>(i);
      std::shuffle(build_keys.begin(), build_keys.end(), random);
    } else {
      for_each_chunk(build_n, [&](std::size_t begin, std::size_t end, std::size_t) {
        for (std::size_t i = begin; i < end; ++i) build_keys[i] = permutation.key(i);
      });
      if (extreme_keys && build_n >= 2) {
        build_keys[0] = 0;
        build_keys[1] = kEmptyKey;
        std::shuffle(build_keys.begin(), build_keys.end(), random);
      }
      if (profile == "duplicate-build" && build_n >= 2) {
        const std::size_t copy = random() % build_n;
        const std::size_t original = (copy + 1 + random() % (build_n - 1)) % build_n;
        build_keys[copy] = build_keys[original];
      }
    }
    std::vector<std::byte> build_payloads = random_u32_bytes(build_n, "uniform", random);
    std::vector<std::byte> probe_payloads = random_u32_bytes(n, "uniform", random);
    // Keys absent from the build side: past its dense keys, or past its indices in the
    // permutation (never 0 nor 0xffffffff, which "extreme-keys" probes on purpose).
    std::vector<std::uint32_t> absent(std::min<std::size_t>(n, 4096));
    for (std::size_t j = 0; j < absent.size(); ++j) {
      absent[j] =
          all_match ? static_cast<std::uint32_t>(build_n + j) : permutation.key(build_n + j);
    }
    // Drawn straight into the bytes that are uploaded: at 2^28 rows a vector copied into them
    // cost a serial gigabyte allocation and copy.
    std::vector<std::byte> probe_keys(4 * n);
    const std::vector<std::uint64_t> seeds = chunk_seeds(n, random);
    for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t chunk) {
      std::mt19937_64 draw(seeds[chunk]);
      for (std::size_t i = begin; i < end; ++i) {
        // One draw a row: bit 0 picks the side, bits 1-2 the extreme keys, the high half which.
        const std::uint64_t bits = draw();
        const std::uint64_t which = bits >> 32;
        const bool from_build = build_n != 0 && (all_match || (!no_match && (bits & 1) != 0));
        std::uint32_t key = 0;
        if (from_build) {
          key = build_keys[which % build_n];
        } else if (extreme_keys && (bits & 2) != 0) {
          key = (bits & 4) != 0 ? 0u : kEmptyKey;
        } else {
          key = absent[which % absent.size()];
        }
        std::memcpy(probe_keys.data() + 4 * i, &key, 4);
      }
    });
    CaseInputs inputs;
    inputs.problem = spec.problem;
    inputs.buffers["build_keys"] = to_bytes(build_keys);
    inputs.buffers["build_payloads"] = std::move(build_payloads);
    inputs.buffers["probe_keys"] = std::move(probe_keys);
    inputs.buffers["probe_payloads"] = std::move(probe_payloads);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::size_t build_n = inputs.problem.build_elements;
    const std::size_t n = inputs.problem.elements;
    const auto build_keys = from_bytes<std::uint32_t>(inputs.buffers.at("build_keys"), build_n);
    const auto build_payloads =
        from_bytes<std::uint32_t>(inputs.buffers.at("build_payloads"), build_n);
    // The probe side is read where it lies: at 16 M rows a copy cost more than the join.
    const std::vector<std::byte>& probe_keys = inputs.buffers.at("probe_keys");
    const std::vector<std::byte>& probe_payloads = inputs.buffers.at("probe_payloads");
    const auto status = from_bytes<std::uint32_t>(outputs.at("status"), 3);

    const BuildTable table(build_keys, build_payloads);
    CaseVerdict verdict;
    if (status[1] != table.repeated_rows()) {
      verdict.failed_checks.push_back("status[1] (repeated build rows) is " +
                                      std::to_string(status[1]) + ", expected " +
                                      std::to_string(table.repeated_rows()));
    }
    if (table.repeated_rows() != 0) {
      // The pairs are unspecified; the error must name a repeated key.
      if (!table.repeated(status[2])) {
        verdict.failed_checks.push_back("status[2] (" + std::to_string(status[2]) +
                                        ") is not a repeated build key");
      }
      verdict.report.compared = 1;
      return verdict;
    }
    const std::vector<std::byte>& probe_pairs = outputs.at("pairs_probe");
    const std::vector<std::byte>& build_pairs = outputs.at("pairs_build");
    const std::uint32_t count = status[0];
    const std::size_t got = std::min<std::size_t>(count, n);
    // What the join should give and what it gave, as order-free digests made on every core:
    // when they agree, the pairs are the same multiset, and nothing needs sorting.
    auto expected_pair = [&](std::size_t j) -> std::optional<std::uint64_t> {
      const std::optional<std::uint32_t> payload = table.find(word_at(probe_keys, j));
      if (!payload) return std::nullopt;
      return std::uint64_t{word_at(probe_payloads, j)} << 32 | *payload;
    };
    auto actual_pair = [&](std::size_t i) -> std::optional<std::uint64_t> {
      return std::uint64_t{word_at(probe_pairs, i)} << 32 | word_at(build_pairs, i);
    };
    const PairDigest expected_digest = PairDigest::of(n, expected_pair);
    if (count != expected_digest.count) {
      verdict.failed_checks.push_back("status[0] (pairs) is " + std::to_string(count) +
                                      ", expected " + std::to_string(expected_digest.count));
    }
    if (count == expected_digest.count && PairDigest::of(got, actual_pair) == expected_digest) {
      verdict.report.compared = 2 * std::uint64_t{count};
      return verdict;
    }
    // They differ: which pair first, in sorted order.
    std::vector<std::uint64_t> expected;
    for (std::size_t j = 0; j < n; ++j) {
      if (std::optional<std::uint64_t> pair = expected_pair(j)) expected.push_back(*pair);
    }
    sort_u64(expected);
    std::vector<std::uint64_t> actual(got);
    for (std::size_t i = 0; i < got; ++i) actual[i] = *actual_pair(i);
    sort_u64(actual);
    verdict.report = compare_exact(as_words(expected), as_words(actual));
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override {
    WorkAmount amount;
    amount.bytes = 8 * (problem.build_elements + problem.elements);
    amount.items = problem.elements;
    amount.items_name = "probe keys";
    return amount;
  }

  bool deterministic() const override { return false; }

  // 2^28 probe rows against 2^20 build rows: a table of 2^21 slots (16 MiB) that fits the H200's
  // L2 cache; bench --build-size times other tables.
  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem = elements_problem(tuning_elements(cpu_adapter));
    problem.build_elements = problem.elements >> 8;
    return problem;
  }
};

}  // namespace

const KernelDefinition& hash_join_u32_kernel() {
  static const HashJoinU32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
