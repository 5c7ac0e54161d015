
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

alias ChainWord = atomic<u32>;
struct Params { n: u32, tiles: u32, keep_low: u32, keep_span: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4u>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@group(0) @binding(3) var<storage, read_write> chain: array<ChainWord>;
@group(0) @binding(4) var<storage, read_write> count: array<u32>;

const PAD: u32 = 0x7fffffffu;  // a NaN, never kept
fn scan_items(raw: vec4u) -> vec4u {
  let key = raw ^ (bitcast<vec4u>(bitcast<vec4i>(raw) >> vec4u(31u)) | vec4u(0x80000000u));
  return select(vec4u(0u), vec4u(1u), key - vec4u(params.keep_low) < vec4u(params.keep_span));
}
var<workgroup> staged: array<u32, TILE_VECTORS * 4u>;
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
fn scan_total(total: u32) { count[0] = total; }

const WG: u32 = 256u;
const VECTORS: u32 = 1u;  // vec4 per invocation
const TILE_VECTORS: u32 = WG * VECTORS;

fn vector_count() -> u32 { return (params.n + 3u) / 4u; }

fn sum4(v: vec4u) -> u32 { return v.x + v.y + v.z + v.w; }

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

fn tile_vector(tile: u32, local: u32, lane: u32, lanes: u32, k: u32) -> u32 {
  return tile * TILE_VECTORS + local * VECTORS + k;
}
fn load_vector(v: u32) -> vec4u {
  let last = max(vector_count(), 1u) - 1u;  // x has at least one vector
  let inside = params.n - min(v * 4u, params.n);  // elements of vector v before n
  return select(vec4u(PAD), x[min(v, last)], vec4u(0u, 1u, 2u, 3u) < vec4u(inside));
}

// A tile's vectors, in the layout's order.
fn load_tile(tile: u32, local: u32, lane: u32, lanes: u32) -> array<vec4u, VECTORS> {
  var raw = array<vec4u, VECTORS>();
  for (var k = 0u; k < VECTORS; k++) { raw[k] = load_vector(tile_vector(tile, local, lane, lanes, k)); }
  return raw;
}
const SPINS: u32 = 64u;
const FLAG_AGGREGATE: u32 = 0x10000u;  // the tile's own sum
const FLAG_PREFIX: u32 = 0x20000u;     // the sum of every tile up to this one
const FLAG_MASK: u32 = 0x30000u;
// chain[0]: the next tile to claim; chain[1 + 2 t] and chain[2 + 2 t]: the low and the high
// 16 bits of tile t's published value, each with the flag (0 while nothing is published).
fn publish(tile: u32, flag: u32, value: u32) {
  atomicStore(&chain[1u + 2u * tile], flag | (value & 0xffffu));
  atomicStore(&chain[2u + 2u * tile], flag | (value >> 16u));
}

// (flag, value) of a tile; flag 0 while it is unpublished or the halves disagree.
fn tile_status(tile: u32) -> vec2u {
  let low = atomicLoad(&chain[1u + 2u * tile]);
  let high = atomicLoad(&chain[2u + 2u * tile]);
  let flag = low & FLAG_MASK;
  if (flag != (high & FLAG_MASK)) { return vec2u(0u, 0u); }
  return vec2u(flag, (low & 0xffffu) | (high << 16u));
}

// The walk stops at the nearest predecessor that is not an aggregate, coded as
// 2 * distance + (0 for a prefix, 1 for unpublished); LOOK_NONE: all were aggregates.
const LOOK_NONE: u32 = 0xffffffffu;
const LOOK_BACK: u32 = 32u;  // predecessors read at once

// The sum of a tile's items, from the input.
fn reduce_tile(tile: u32, local: u32) -> u32 {
  var sum = 0u;
  for (var k = 0u; k < VECTORS; k++) {
    let v = tile_vector(tile, local, 0u, 1u, k);
    sum += sum4(scan_items(load_vector(v)));
  }
  return workgroup_exclusive_scan(sum, local).y;
}

// A predecessor's status, polled while it is unpublished (flag 0 after SPINS polls).
fn polled_status(tile: u32) -> vec2u {
  var status = tile_status(tile);
  for (var spin = 0u; spin < SPINS && status.x == 0u; spin++) { status = tile_status(tile); }
  return status;
}

var<workgroup> look_stop: atomic<u32>;
var<workgroup> look_sum: atomic<u32>;  // the values up to the stop
var<workgroup> look_step: vec2u;

// The sum of every tile before `tile` (> 0). Invocation l reads the l-th predecessor not yet
// accounted for; the window's values are added up to the nearest published prefix (done) or
// unpublished tile (read again, then reduced here).
fn look_back(tile: u32, local: u32) -> u32 {
  var prefix = 0u;
  var next = tile;  // tiles before `next` are not accounted for yet
  loop {
    var status = vec2u(FLAG_PREFIX, 0u);  // before tile 0: nothing
    if (local < LOOK_BACK && local < next) { status = polled_status(next - 1u - local); }
    if (local < LOOK_BACK && status.x != FLAG_AGGREGATE) {
      atomicMin(&look_stop, 2u * local + select(1u, 0u, status.x == FLAG_PREFIX));
    }
    workgroupBarrier();
    let stop = atomicLoad(&look_stop);
    if (local < LOOK_BACK && 2u * local <= stop) {
      atomicAdd(&look_sum, status.y);
    }
    workgroupBarrier();
    if (local == 0u) {
      look_step = vec2u(stop, atomicLoad(&look_sum));
      atomicStore(&look_stop, LOOK_NONE);
      atomicStore(&look_sum, 0u);
    }
    let step = workgroupUniformLoad(&look_step);
    prefix += step.y;
    if (step.x == LOOK_NONE) {
      next -= LOOK_BACK;  // a window of aggregates
    } else if ((step.x & 1u) == 0u) {
      break;  // reached a prefix
    } else {
      next -= step.x / 2u;  // the aggregates before an unpublished tile
      if (step.x == 1u) {
        // The nearest unaccounted tile published nothing: reduce it here instead of waiting.
        prefix += reduce_tile(next - 1u, local);
        next -= 1u;
      }
    }
  }
  return prefix;
}
var<workgroup> claimed_tile: u32;

@compute @workgroup_size(WG)
fn scan_clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
    @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < 1u + 2u * params.tiles) { atomicStore(&chain[i], 0u); }
}

@compute @workgroup_size(WG)
fn scan_tiles(@builtin(workgroup_id) workgroup: vec3u, @builtin(num_workgroups) workgroups: vec3u,
    @builtin(local_invocation_index) local: u32) {
  let lane = 0u;
  let lanes = 1u;
  if (local == 0u) { claimed_tile = atomicAdd(&chain[0], 1u); }
  let tile = workgroupUniformLoad(&claimed_tile);
  if (local == 0u) {
    atomicStore(&look_stop, LOOK_NONE);
    atomicStore(&look_sum, 0u);
  }
  if (tile >= params.tiles) { return; }  // a grid rounded up past the tiles
  var raw = load_tile(tile, local, lane, lanes);
  var offsets = array<u32, VECTORS>();
  var sum = 0u;
  for (var k = 0u; k < VECTORS; k++) {
    offsets[k] = sum;
    sum += sum4(scan_items(raw[k]));
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  let before = scanned.x;
  let tile_total = scanned.y;
  for (var k = 0u; k < VECTORS; k++) {
    let v = tile_vector(tile, local, lane, lanes, k);
    if (v < vector_count()) {
      scan_store(v, raw[k], scan_items(raw[k]), 0u, before + offsets[k]);
    }
  }
  if (local == 0u) {
    publish(tile, select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u), tile_total);
  }
  var prefix = 0u;
  if (tile != 0u) { prefix = look_back(tile, local); }
  if (local == 0u) {
    if (tile != 0u) { publish(tile, FLAG_PREFIX, prefix + tile_total); }
    if (tile + 1u == params.tiles) { scan_total(prefix + tile_total); }
  }
  scan_finish_tile(prefix, tile_total, local);
}
