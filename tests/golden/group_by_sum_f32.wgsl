
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, capacity: u32, max_groups: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> keys: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<f32>;
@group(0) @binding(3) var<storage, read_write> table: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> group_keys: array<u32>;
@group(0) @binding(5) var<storage, read_write> group_sums: array<f32>;
@group(0) @binding(6) var<storage, read_write> group_counts: array<u32>;
@group(0) @binding(7) var<storage, read_write> groups: array<atomic<u32>>;

const WG: u32 = 256u;  // invocations per workgroup
const ROWS: u32 = 1u;  // rows per invocation
const LOCAL_SLOTS: u32 = 1024u;  // slots of the workgroup's table
const LOCAL_PROBES: u32 = 8u;  // slots a row searches there

const EMPTY: u32 = 0xffffffffu;
const NO_SLOT: u32 = 0xffffffffu;
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
fn key_word(slot: u32) -> u32 { return 3u * slot; }
fn sum_word(slot: u32) -> u32 { return 3u * slot + 1u; }
fn count_word(slot: u32) -> u32 { return 3u * slot + 2u; }

// The slot of `key`, claimed when the key is new; NO_SLOT when the table has no room. A failed
// exchange that leaves the slot empty (a spurious failure of the weak exchange) tries the same
// slot again; it counts as a step, so the search stays bounded.
fn global_slot(key: u32) -> u32 {
  if (key == EMPTY) { return params.capacity; }
  let mask = params.capacity - 1u;
  var slot = hash(key) & mask;
  for (var step = 1u; step <= params.capacity; step++) {
    let claimed = atomicCompareExchangeWeak(&table[key_word(slot)], EMPTY, key);
    if (claimed.exchanged || claimed.old_value == key) { return slot; }
    if (claimed.old_value != EMPTY) { slot = (slot + step) & mask; }
  }
  return NO_SLOT;
}

fn add_global(key: u32, sum: f32, count: u32) {
  let slot = global_slot(key);
  if (slot == NO_SLOT) {
    atomicAdd(&groups[1], count);
    return;
  }
  let word = sum_word(slot);
  var old = atomicLoad(&table[word]);
  loop {
    let swapped =
        atomicCompareExchangeWeak(&table[word], old, bitcast<u32>(bitcast<f32>(old) + sum));
    if (swapped.exchanged) { break; }
    old = swapped.old_value;
  }
  atomicAdd(&table[count_word(slot)], count);
}

@compute @workgroup_size(WG)
fn clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
         @builtin(local_invocation_index) local: u32) {
  let slot = linear_workgroup(group, groups_grid) * WG + local;
  if (slot <= params.capacity) {
    atomicStore(&table[key_word(slot)], EMPTY);  // slot capacity: the key 0xffffffff's own
    atomicStore(&table[sum_word(slot)], 0u);
    atomicStore(&table[count_word(slot)], 0u);
  }
  if (slot == 0u) {
    atomicStore(&groups[0], 0u);
    atomicStore(&groups[1], 0u);
  }
}

@compute @workgroup_size(WG)
fn emit(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
        @builtin(local_invocation_index) local: u32) {
  let slot = linear_workgroup(group, groups_grid) * WG + local;
  if (slot > params.capacity) { return; }
  let count = atomicLoad(&table[count_word(slot)]);
  if (count == 0u) { return; }
  let at = atomicAdd(&groups[0], 1u);
  if (at < params.max_groups) {
    group_keys[at] = atomicLoad(&table[key_word(slot)]);
    group_sums[at] = bitcast<f32>(atomicLoad(&table[sum_word(slot)]));
    group_counts[at] = count;
  }
}

var<workgroup> local_table: array<atomic<u32>, 3u * LOCAL_SLOTS>;

// Adds a row to the workgroup's table; false when its key finds no room there within
// LOCAL_PROBES slots (the key 0xffffffff, the empty key, never does).
fn add_local(key: u32, value: f32) -> bool {
  if (key == EMPTY) { return false; }
  let mask = LOCAL_SLOTS - 1u;
  var slot = hash(key) & mask;
  for (var step = 1u; step <= LOCAL_PROBES; step++) {
    let claimed = atomicCompareExchangeWeak(&local_table[key_word(slot)], EMPTY, key);
    if (claimed.exchanged || claimed.old_value == key) {
      let word = sum_word(slot);
      var old = atomicLoad(&local_table[word]);
      loop {
        let swapped = atomicCompareExchangeWeak(&local_table[word], old,
                                                bitcast<u32>(bitcast<f32>(old) + value));
        if (swapped.exchanged) { break; }
        old = swapped.old_value;
      }
      atomicAdd(&local_table[count_word(slot)], 1u);
      return true;
    }
    if (claimed.old_value != EMPTY) { slot = (slot + step) & mask; }
  }
  return false;
}

@compute @workgroup_size(WG)
fn aggregate(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups_grid: vec3u,
             @builtin(local_invocation_index) local: u32) {
  for (var slot = local; slot < LOCAL_SLOTS; slot += WG) {
    atomicStore(&local_table[key_word(slot)], EMPTY);
    atomicStore(&local_table[sum_word(slot)], 0u);
    atomicStore(&local_table[count_word(slot)], 0u);
  }
  workgroupBarrier();
  let first = linear_workgroup(group, groups_grid) * (WG * ROWS) + local;
  for (var r = 0u; r < ROWS; r++) {
    let row = first + r * WG;
    if (row < params.n) {
      let key = keys[row];
      let value = values[row];
      if (!add_local(key, value)) { add_global(key, value, 1u); }
    }
  }
  workgroupBarrier();
  for (var slot = local; slot < LOCAL_SLOTS; slot += WG) {
    let count = atomicLoad(&local_table[count_word(slot)]);
    if (count != 0u) {
      add_global(atomicLoad(&local_table[key_word(slot)]),
                 bitcast<f32>(atomicLoad(&local_table[sum_word(slot)])), count);
    }
  }
}
