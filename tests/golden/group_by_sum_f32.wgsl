
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, capacity: u32, max_groups: u32, local_probes: u32 }
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
const TILE: u32 = 256u;  // rows per tile
const LOCAL_SLOTS: u32 = 1024u;  // slots of the workgroup's table

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

fn add_global(key: u32, sum: f32, count: u32) {
  let slot = global_slot(key);
  if (slot == NO_SLOT) {
    atomicAdd(&groups[1], count);
    return;
  }
  // The count first: its result is not used, so it need not be waited for before the sum's
  // exchange loop starts.
  atomicAdd(&table[count_word(slot)], count);
  let word = sum_word(slot);
  var old = atomicLoad(&table[word]);
  loop {
    let swapped =
        atomicCompareExchangeWeak(&table[word], old, bitcast<u32>(bitcast<f32>(old) + sum));
    if (swapped.exchanged) { break; }
    old = swapped.old_value;
  }
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
// params.local_probes slots (the key 0xffffffff, the empty key, never does).
fn add_local(key: u32, value: f32) -> bool {
  if (key == EMPTY) { return false; }
  let mask = LOCAL_SLOTS - 1u;
  var slot = hash(key) & mask;
  for (var step = 1u; step <= params.local_probes; step++) {
    var found = atomicLoad(&local_table[key_word(slot)]);
    if (found == EMPTY) {
      let claimed = atomicCompareExchangeWeak(&local_table[key_word(slot)], EMPTY, key);
      found = select(claimed.old_value, key, claimed.exchanged);
    }
    if (found == key) {
      atomicAdd(&local_table[count_word(slot)], 1u);
      let word = sum_word(slot);
      var old = atomicLoad(&local_table[word]);
      loop {
        let swapped = atomicCompareExchangeWeak(&local_table[word], old,
                                                bitcast<u32>(bitcast<f32>(old) + value));
        if (swapped.exchanged) { break; }
        old = swapped.old_value;
      }
      return true;
    }
    if (found != EMPTY) { slot = (slot + step) & mask; }
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
  let workgroup = linear_workgroup(group, groups_grid);
  let tiles = tile_count();
  let stride = groups_grid.x * groups_grid.y;
  for (var tile = workgroup; tile < tiles; tile += stride) {
    // The tile's rows are loaded before any is added, so that their loads are in flight together
    // (loops of ROWS steps: unrolled, the arrays stay in registers).
    var row_keys = array<u32, ROWS>();
    var row_values = array<f32, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      let row = tile * TILE + r * WG + local;
      if (row < params.n) {
        row_keys[r] = keys[row];
        row_values[r] = values[row];
      }
    }
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n &&
          !add_local(row_keys[r], row_values[r])) {
        add_global(row_keys[r], row_values[r], 1u);
      }
    }
  }
  workgroupBarrier();
  let first_slot = hash(workgroup);
  for (var i = local; i < LOCAL_SLOTS; i += WG) {
    let slot = (first_slot + i) & (LOCAL_SLOTS - 1u);
    let count = atomicLoad(&local_table[count_word(slot)]);
    if (count != 0u) {
      add_global(atomicLoad(&local_table[key_word(slot)]),
                 bitcast<f32>(atomicLoad(&local_table[sum_word(slot)])), count);
    }
  }
}
