
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, build_n: u32, capacity: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> build_keys: array<u32>;
@group(0) @binding(2) var<storage, read> build_payloads: array<u32>;
@group(0) @binding(3) var<storage, read> probe_keys: array<u32>;
@group(0) @binding(4) var<storage, read> probe_payloads: array<u32>;
@group(0) @binding(5) var<storage, read_write> table: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> pairs_probe: array<u32>;
@group(0) @binding(7) var<storage, read_write> pairs_build: array<u32>;
@group(0) @binding(8) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(9) var<storage, read> table_view: array<vec2u>;
@group(0) @binding(5) var<storage, read_write> table_slots: array<vec2u>;  // table as vec2u

const WG: u32 = 256u;  // invocations per workgroup
const ROWS: u32 = 1u;  // rows per invocation
const TRIANGULAR: u32 = 0u;  // 1: triangular probing, 0: linear
const PROBE_WINDOW: u32 = 1u;  // table slots the probe reads at once
const NONE: u32 = 4294967295u;  // no match

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

fn load_slot(slot: u32) -> vec2u { return table_slots[slot]; }
fn slot_payload(slot: u32, held: vec2u) -> u32 { return held.y; }

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

struct Invocation {
  @builtin(local_invocation_index) local: u32,
}

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
