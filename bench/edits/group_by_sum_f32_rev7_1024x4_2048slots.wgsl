// group_by_sum_f32 revision 7, schedule {interleave_rows=0, key_partitions=1, local_slots=2048, persistent_workgroups=1024, probe_window=4, rows_per_invocation=4, table_factor=2, workgroup_size=256}
// source BLAKE3 of what follows: 4a0699a35b69bfb436183195aceb48d966a2ce280f18298504d9bc2d4f6068cf

fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, capacity: u32, max_groups: u32, local_probes: u32, key_part: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> keys: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<u32>;
@group(0) @binding(3) var<storage, read_write> table: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> group_keys: array<u32>;
@group(0) @binding(5) var<storage, read_write> group_sums: array<u32>;
@group(0) @binding(6) var<storage, read_write> group_counts: array<u32>;
@group(0) @binding(7) var<storage, read_write> groups: array<atomic<u32>>;

const WG: u32 = 256u;  // invocations per workgroup
const ROWS: u32 = 4u;  // rows per invocation
const TILE: u32 = 1024u;  // rows per tile
const KEY_PARTS: u32 = 1u;  // parts of the keys, an aggregate pass each
const LOCAL_SLOTS: u32 = 2048u;  // slots of the workgroup's table
const PROBE_WINDOW: u32 = 4u;  // slots a row's search loads at once

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

// Whether this aggregate pass adds the rows of `key`: those whose hash's top 16 bits, scaled to
// [0, KEY_PARTS), are params.key_part (bits that the workgroup table's slots do not use, so each
// part fills the whole workgroup table).
fn in_this_key_part(key: u32) -> bool {
  return KEY_PARTS == 1u || (((hash(key) >> 16u) * KEY_PARTS) >> 16u) == params.key_part;
}

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
  for (var tile = workgroup; tile < tiles; tile += stride) {
    // The tile's rows are loaded before any is added, so that their loads are in flight together
    // (loops of ROWS steps: unrolled, the arrays stay in registers).
    var row_keys = array<u32, ROWS>();
    var row_values = array<u32, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      let row = tile * TILE + r * WG + local;
      if (row < params.n) {
        row_keys[r] = keys[row];
        row_values[r] = values[row];
      }
    }

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
