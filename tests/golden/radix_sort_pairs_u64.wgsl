
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, tiles: u32, shift: u32, count_length: u32, count_blocks: u32, scan_width: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> keys_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> keys_out: array<u32>;
@group(0) @binding(3) var<storage, read_write> counts: array<u32>;
@group(0) @binding(4) var<storage, read_write> block_sums: array<u32>;
@group(0) @binding(5) var<storage, read> values_in: array<u32>;
@group(0) @binding(6) var<storage, read_write> values_out: array<u32>;
@group(0) @binding(7) var<storage, read> keys64: array<vec2u>;
@group(0) @binding(8) var<storage, read_write> sorted64: array<vec2u>;

const WG: u32 = 128u;  // invocations of the scan and scatter passes
const KPI: u32 = 4u;  // keys per invocation of a tile
const DIGITS: u32 = 16u;
const SCAN_ITEMS: u32 = 4u;  // counts per invocation of the counts' scan
const COUNT_WG: u32 = 64u;  // invocations of digit_count
const COUNT_KEYS: u32 = 8u;  // keys per invocation of digit_count
const COUNT_CHUNK: u32 = 8u;  // keys loaded before they are counted
const COUNT_GROUP: u32 = 4u;  // tiles per workgroup of digit_count

var<workgroup> scan_scratch: array<u32, WG>;
fn workgroup_exclusive_scan(value: u32, local: u32) -> vec2u {
  scan_scratch[local] = value;
  workgroupBarrier();
  for (var offset = 1u; offset < WG; offset *= 2u) {
    var add = 0u;
    if (local >= offset) { add = scan_scratch[local - offset]; }
    workgroupBarrier();
    scan_scratch[local] += add;
    workgroupBarrier();
  }
  let inclusive = scan_scratch[local];
  let total = scan_scratch[WG - 1u];
  workgroupBarrier();
  return vec2u(inclusive - value, total);
}

fn digit(key: u32) -> u32 { return (key >> params.shift) & (DIGITS - 1u); }

@compute @workgroup_size(WG)
fn counts_reduce(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                 @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let width = params.scan_width;
  let end = min(b * width + width, params.count_length);
  let first = b * width + local * SCAN_ITEMS;
  var sum = 0u;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < end) { sum += counts[i]; }
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (local == 0u && b < params.count_blocks) { block_sums[b] = scanned.y; }
}

@compute @workgroup_size(WG)
fn counts_spine(@builtin(local_invocation_index) local: u32) {
  var carry = 0u;
  let blocks = params.count_blocks;
  let width = params.scan_width;
  for (var start = 0u; start < blocks; start += width) {
    let end = min(start + width, blocks);
    var values = array<u32, SCAN_ITEMS>();
    var sum = 0u;
    for (var j = 0u; j < SCAN_ITEMS; j++) {
      let i = start + local * SCAN_ITEMS + j;
      if (i < end) { values[j] = block_sums[i]; }
      sum += values[j];
    }
    let scanned = workgroup_exclusive_scan(sum, local);
    var running = carry + scanned.x;
    for (var j = 0u; j < SCAN_ITEMS; j++) {
      let i = start + local * SCAN_ITEMS + j;
      if (i < end) { block_sums[i] = running; }
      running += values[j];
    }
    carry += scanned.y;
  }
}

@compute @workgroup_size(WG)
fn counts_apply(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let width = params.scan_width;
  let end = min(b * width + width, params.count_length);
  let first = b * width + local * SCAN_ITEMS;
  var values = array<u32, SCAN_ITEMS>();
  var sum = 0u;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < end) { values[j] = counts[i]; }
    sum += values[j];
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (b >= params.count_blocks) { return; }
  var running = block_sums[b] + scanned.x;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < end) { counts[i] = running; }
    running += values[j];
  }
}

// COUNT_CHUNK keys, COUNT_WG apart from `first` (clamped loads: no branch).
fn load_count_chunk(first: u32) -> array<u32, COUNT_CHUNK> {
  let last = max(params.n, 1u) - 1u;
  var keys = array<u32, COUNT_CHUNK>();
  for (var item = 0u; item < COUNT_CHUNK; item++) {
    keys[item] = keys_in[min(first + item * COUNT_WG, last)];
  }
  return keys;
}

var<workgroup> group_counts: array<atomic<u32>, DIGITS * COUNT_GROUP>;

@compute @workgroup_size(COUNT_WG)
fn digit_count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let first_tile = linear_workgroup(group, groups) * COUNT_GROUP;
  let tiles = min(COUNT_GROUP, params.tiles - min(first_tile, params.tiles));
  for (var w = local; w < DIGITS * COUNT_GROUP; w += COUNT_WG) {
    atomicStore(&group_counts[w], 0u);
  }
  workgroupBarrier();
  for (var t = 0u; t < tiles; t++) {
    let first = (first_tile + t) * (WG * KPI) + local;
    for (var chunk = 0u; chunk < COUNT_KEYS; chunk += COUNT_CHUNK) {
      let keys = load_count_chunk(first + chunk * COUNT_WG);
      for (var item = 0u; item < COUNT_CHUNK; item++) {
        if (first + (chunk + item) * COUNT_WG < params.n) {
          atomicAdd(&group_counts[digit(keys[item]) * COUNT_GROUP + t], 1u);
        }
      }
    }
  }
  workgroupBarrier();
  for (var w = local; w < DIGITS * COUNT_GROUP; w += COUNT_WG) {
    let t = w % COUNT_GROUP;
    if (t < tiles) {
      counts[(w / COUNT_GROUP) * params.tiles + first_tile + t] = atomicLoad(&group_counts[w]);
    }
  }
}

fn load_value(i: u32) -> u32 { return values_in[i]; }
fn store_value(place: u32, value: u32) { values_out[place] = value; }

var<workgroup> digit_prefix: array<u32, DIGITS * WG>;

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
      values[j] = load_value(i);
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
      store_value(next[d], values[j]);
      next[d] += 1u;
    }
  }
}

@compute @workgroup_size(WG)
fn split_keys(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
              @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.n) {
    keys_out[i] = keys64[i].x;
    values_out[i] = i;
  }
}

@compute @workgroup_size(WG)
fn gather_high(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.n) { keys_out[i] = keys64[values_in[i]].y; }
}

@compute @workgroup_size(WG)
fn finish_keys(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.n) { sorted64[i] = vec2u(keys64[keys_in[i]].x, keys_out[i]); }
}

@compute @workgroup_size(WG)
fn finish_values(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                 @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.n) { values_out[i] = values_in[keys_in[i]]; }
}
