
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, tiles: u32, shift: u32, count_length: u32, count_blocks: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> keys_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> keys_out: array<u32>;
@group(0) @binding(3) var<storage, read_write> counts: array<u32>;
@group(0) @binding(4) var<storage, read_write> block_sums: array<u32>;
@group(0) @binding(5) var<storage, read> values_in: array<u32>;
@group(0) @binding(6) var<storage, read_write> values_out: array<u32>;

const WG: u32 = 128u;
const KPI: u32 = 4u;
const DIGITS: u32 = 16u;
fn digit(key: u32) -> u32 { return (key >> params.shift) & 15u; }
fn scan_length() -> u32 { return params.count_length; }
fn scan_blocks() -> u32 { return params.count_blocks; }
fn scan_value(i: u32) -> u32 { return counts[i]; }
fn scan_store(i: u32, prefix: u32) { counts[i] = prefix; }
fn scan_total(total: u32) {}

var<workgroup> scan_scratch: array<u32, 128>;
fn workgroup_exclusive_scan(value: u32, local: u32) -> vec2u {
  scan_scratch[local] = value;
  workgroupBarrier();
  for (var offset = 1u; offset < 128u; offset *= 2u) {
    var add = 0u;
    if (local >= offset) { add = scan_scratch[local - offset]; }
    workgroupBarrier();
    scan_scratch[local] += add;
    workgroupBarrier();
  }
  let inclusive = scan_scratch[local];
  let total = scan_scratch[128u - 1u];
  workgroupBarrier();
  return vec2u(inclusive - value, total);
}

@compute @workgroup_size(128)
fn counts_reduce(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
    @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let first = b * (128u * 4u) + local * 4u;
  var sum = 0u;
  for (var j = 0u; j < 4u; j++) {
    let i = first + j;
    if (i < scan_length()) { sum += scan_value(i); }
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (local == 0u && b < scan_blocks()) { block_sums[b] = scanned.y; }
}

@compute @workgroup_size(128)
fn counts_spine(@builtin(local_invocation_index) local: u32) {
  var carry = 0u;
  let blocks = scan_blocks();
  for (var start = 0u; start < blocks; start += (128u * 4u)) {
    var values = array<u32, 4>();
    var sum = 0u;
    for (var j = 0u; j < 4u; j++) {
      let i = start + local * 4u + j;
      if (i < blocks) { values[j] = block_sums[i]; }
      sum += values[j];
    }
    let scanned = workgroup_exclusive_scan(sum, local);
    var running = carry + scanned.x;
    for (var j = 0u; j < 4u; j++) {
      let i = start + local * 4u + j;
      if (i < blocks) { block_sums[i] = running; }
      running += values[j];
    }
    carry += scanned.y;
  }
  if (local == 0u) { scan_total(carry); }
}

@compute @workgroup_size(128)
fn counts_apply(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
    @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let first = b * (128u * 4u) + local * 4u;
  var values = array<u32, 4>();
  var sum = 0u;
  for (var j = 0u; j < 4u; j++) {
    let i = first + j;
    if (i < scan_length()) { values[j] = scan_value(i); }
    sum += values[j];
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (b >= scan_blocks()) { return; }
  var running = block_sums[b] + scanned.x;
  for (var j = 0u; j < 4u; j++) {
    let i = first + j;
    if (i < scan_length()) { scan_store(i, running); }
    running += values[j];
  }
}

var<workgroup> tile_counts: array<atomic<u32>, DIGITS>;
const COUNT_WG: u32 = 64u;
const COUNT_KEYS: u32 = 8u;  // keys per invocation
const COUNT_CHUNK: u32 = 8u;  // keys loaded before they are counted
// COUNT_CHUNK keys, COUNT_WG apart from `first` (clamped loads: no branch).
fn load_count_chunk(first: u32) -> array<u32, COUNT_CHUNK> {
  let last = max(params.n, 1u) - 1u;
  var keys = array<u32, COUNT_CHUNK>();
  for (var item = 0u; item < COUNT_CHUNK; item++) {
    keys[item] = keys_in[min(first + item * COUNT_WG, last)];
  }
  return keys;
}
@compute @workgroup_size(COUNT_WG)
fn digit_count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let tile = linear_workgroup(group, groups);
  for (var d = local; d < DIGITS; d += COUNT_WG) { atomicStore(&tile_counts[d], 0u); }
  let first = tile * (WG * KPI) + local;
  workgroupBarrier();
  for (var chunk = 0u; chunk < COUNT_KEYS; chunk += COUNT_CHUNK) {
    let keys = load_count_chunk(first + chunk * COUNT_WG);
    for (var item = 0u; item < COUNT_CHUNK; item++) {
      if (first + (chunk + item) * COUNT_WG < params.n) {
        atomicAdd(&tile_counts[digit(keys[item])], 1u);
      }
    }
  }
  workgroupBarrier();
  if (tile >= params.tiles) { return; }
  for (var d = local; d < DIGITS; d += COUNT_WG) {
    counts[d * params.tiles + tile] = atomicLoad(&tile_counts[d]);
  }
}

var<workgroup> digit_prefix: array<u32, 2048>;
@compute @workgroup_size(WG)
fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) local: u32) {
  let tile = linear_workgroup(group, groups);
  let first = tile * (WG * KPI) + local * KPI;
  var keys = array<u32, KPI>();
  var values = array<u32, KPI>();
  var mine = array<u32, DIGITS>();
  for (var j = 0u; j < KPI; j++) {
    let i = first + j;
    if (i < params.n) {
      keys[j] = keys_in[i];
      values[j] = values_in[i];
      mine[digit(keys[j])] += 1u;
    }
  }
  for (var d = 0u; d < DIGITS; d++) { digit_prefix[d * WG + local] = mine[d]; }
  workgroupBarrier();
  for (var offset = 1u; offset < WG; offset *= 2u) {
    var adds = array<u32, DIGITS>();
    if (local >= offset) {
      for (var d = 0u; d < DIGITS; d++) { adds[d] = digit_prefix[d * WG + local - offset]; }
    }
    workgroupBarrier();
    for (var d = 0u; d < DIGITS; d++) { digit_prefix[d * WG + local] += adds[d]; }
    workgroupBarrier();
  }
  if (tile >= params.tiles) { return; }
  var next = array<u32, DIGITS>();
  for (var d = 0u; d < DIGITS; d++) {
    next[d] = counts[d * params.tiles + tile] + digit_prefix[d * WG + local] - mine[d];
  }
  for (var j = 0u; j < KPI; j++) {
    if (first + j < params.n) {
      let d = digit(keys[j]);
      keys_out[next[d]] = keys[j];
      values_out[next[d]] = values[j];
      next[d] += 1u;
    }
  }
}
