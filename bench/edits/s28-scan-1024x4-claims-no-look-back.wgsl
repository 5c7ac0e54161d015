// Timing only (wrong output): the scan of session 28 H200_REQUEST.txt without its look-back;
// every tile takes prefix 0 (each vector is still stored at its own place). It shows how much
// of the kernel's time the look-back holds.
enable subgroups;
diagnostic(off, subgroup_uniformity);

fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

alias ChainWord = atomic<u32>;
struct Params { n: u32, tiles: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4u>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4u>;
@group(0) @binding(3) var<storage, read_write> chain: array<ChainWord>;

const PAD: u32 = 0u;
fn scan_items(raw: vec4u) -> vec4u { return raw; }
fn scan_store(v: u32, raw: vec4u, items: vec4u, tile_prefix: u32, offset: u32) {
  y[v] = tile_prefix + offset +
         vec4u(0u, items.x, items.x + items.y, items.x + items.y + items.z);
}
fn scan_finish_tile(tile_prefix: u32, tile_total: u32, local: u32) {}
fn scan_total(total: u32) {}

const WG: u32 = 1024u;
const VECTORS: u32 = 4u;  // vec4 per invocation
const TILE_VECTORS: u32 = WG * VECTORS;

fn vector_count() -> u32 { return (params.n + 3u) / 4u; }

fn sum4(v: vec4u) -> u32 { return v.x + v.y + v.z + v.w; }

const MAX_SUBGROUPS: u32 = 256u;  // a sum per subgroup
var<workgroup> subgroup_sums: array<u32, MAX_SUBGROUPS>;
fn tile_vector(tile: u32, local: u32, lane: u32, lanes: u32, k: u32) -> u32 {
  return tile * TILE_VECTORS + (local - lane) * VECTORS + k * lanes + lane;
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
const LOOK_ROWS: u32 = 1u;  // predecessors per lane read at once
var<workgroup> shared_prefix: u32;

// The sum of a predecessor's items, from the input, by one subgroup. A predecessor is a whole
// tile, a multiple of the subgroup's lanes, so every lane takes the same steps and the subgroup
// is converged at subgroupAdd.
fn reduce_tile(tile: u32, lane: u32, lanes: u32) -> u32 {
  var sum = 0u;
  for (var v = tile * TILE_VECTORS + lane; v < (tile + 1u) * TILE_VECTORS; v += lanes) {
    sum += sum4(scan_items(load_vector(v)));
  }
  return subgroupAdd(sum);
}

// The status of the predecessor `distance` tiles before next - 1 (none before tile 0: a prefix
// of 0).
fn status_at(next: u32, distance: u32) -> vec2u {
  let inside = distance < next;
  return select(vec2u(FLAG_PREFIX, 0u), tile_status(select(0u, next - 1u - distance, inside)),
                inside);
}
fn polled_statuses(next: u32, lane: u32, lanes: u32) -> array<vec2u, LOOK_ROWS> {
  var statuses = array<vec2u, LOOK_ROWS>();
  var published = true;
  {
    const r = 0u;
    statuses[r] = status_at(next, r * lanes + lane);
    published = published & (statuses[r].x != 0u);
  }
  for (var spin = 0u; spin < SPINS; spin++) {
    if (subgroupAll(published)) { break; }
    published = true;
  {
    const r = 0u;
    statuses[r] = select(statuses[r], status_at(next, r * lanes + lane), statuses[r].x == 0u);
    published = published & (statuses[r].x != 0u);
  }
  }
  return statuses;
}

fn look_back(tile: u32, lane: u32, lanes: u32) -> u32 {
  var prefix = 0u;
  var next = tile;  // tiles before `next` are not accounted for yet
  loop {
    let statuses = polled_statuses(next, lane, lanes);
    var own_stop = LOOK_NONE;
  {
    const r = 0u;
    let status = statuses[r];
    let stop_here = 2u * (r * lanes + lane) + select(1u, 0u, status.x == FLAG_PREFIX);
    own_stop = min(own_stop, select(LOOK_NONE, stop_here, status.x != FLAG_AGGREGATE));
  }
    let stop = subgroupMin(own_stop);
    var own_sum = 0u;
  {
    const r = 0u;
    own_sum += select(0u, statuses[r].y, 2u * (r * lanes + lane) <= stop);
  }
    prefix += subgroupAdd(own_sum);
    if (stop == LOOK_NONE) {
      next -= lanes * LOOK_ROWS;  // rows of aggregates
    } else if ((stop & 1u) == 0u) {
      break;  // reached a prefix
    } else {
      next -= stop / 2u;  // the aggregates before an unpublished tile
      if (stop == 1u) {
        // The nearest unaccounted tile published nothing: reduce it here instead of waiting.
        prefix += reduce_tile(next - 1u, lane, lanes);
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
    @builtin(local_invocation_index) local: u32,
    @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) width: u32) {
  let lanes = min(width, WG);  // a wider subgroup is part empty
  if (local == 0u) { claimed_tile = atomicAdd(&chain[0], 1u); }
  let tile = workgroupUniformLoad(&claimed_tile);
  if (tile >= params.tiles) { return; }  // a grid rounded up past the tiles
  var raw = load_tile(tile, local, lane, lanes);
  var offsets = array<u32, VECTORS>();
  var run_total = 0u;
  for (var k = 0u; k < VECTORS; k++) {
    let sum = sum4(scan_items(raw[k]));
    let inclusive = subgroupInclusiveAdd(sum);
    offsets[k] = run_total + inclusive - sum;
    run_total += subgroupShuffle(inclusive, lanes - 1u);
  }
  let group = local / lanes;
  let groups = WG / lanes;
  if (lane == 0u) { subgroup_sums[group] = run_total; }
  workgroupBarrier();
  var before = 0u;
  var tile_total = 0u;
  for (var base = 0u; base < groups; base += lanes) {
    let g = base + lane;
    let sum = select(0u, subgroup_sums[min(g, groups - 1u)], g < groups);  // no branch
    before += subgroupAdd(select(0u, sum, g < group));
    tile_total += subgroupAdd(sum);
  }
  if (local == 0u) {
    publish(tile, select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u), tile_total);
  }
  if (local < lanes) {
    var prefix = 0u;
    if (tile != 0u) {}
    if (local == 0u) {
      if (tile != 0u) { publish(tile, FLAG_PREFIX, prefix + tile_total); }
      if (tile + 1u == params.tiles) { scan_total(prefix + tile_total); }
      shared_prefix = prefix;
    }
  }
  let prefix = workgroupUniformLoad(&shared_prefix);
  for (var k = 0u; k < VECTORS; k++) {
    let v = tile_vector(tile, local, lane, lanes, k);
    if (v < vector_count()) {
      scan_store(v, raw[k], scan_items(raw[k]), prefix, before + offsets[k]);
    }
  }
  scan_finish_tile(prefix, tile_total, local);
}
