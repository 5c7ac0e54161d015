
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, tiles: u32, shift: u32, status_length: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> keys_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> keys_out: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> digit_offsets: array<atomic<u32>>;

const WG: u32 = 128u;
const KPI: u32 = 4u;
const TILE: u32 = WG * KPI;
const BITS: u32 = 4u;
const DIGITS: u32 = 16u;
const ROUNDS: u32 = 8u;
const SPINS: u32 = 64u;
const WINDOW: u32 = 16u;  // predecessors read at once
fn digit(key: u32) -> u32 { return (key >> params.shift) & (DIGITS - 1u); }

const HISTOGRAM_KEYS: u32 = 4u;  // keys loaded before they are counted
var<workgroup> histogram: array<atomic<u32>, ROUNDS * DIGITS>;

@compute @workgroup_size(WG)
fn offsets_clear(@builtin(local_invocation_index) local: u32) {
  for (var i = local; i < ROUNDS * DIGITS; i += WG) { atomicStore(&digit_offsets[i], 0u); }
}

@compute @workgroup_size(WG)
fn digit_histogram(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                   @builtin(local_invocation_index) local: u32) {
  for (var i = local; i < ROUNDS * DIGITS; i += WG) { atomicStore(&histogram[i], 0u); }
  workgroupBarrier();
  let stride = groups.x * groups.y * WG;
  let last = max(params.n, 1u) - 1u;
  for (var first = linear_workgroup(group, groups) * WG + local; first < params.n;
       first += stride * HISTOGRAM_KEYS) {
    var keys = array<u32, HISTOGRAM_KEYS>();
    for (var k = 0u; k < HISTOGRAM_KEYS; k++) { keys[k] = keys_in[min(first + k * stride, last)]; }
    for (var k = 0u; k < HISTOGRAM_KEYS; k++) {
      if (first + k * stride < params.n) {
        for (var r = 0u; r < ROUNDS; r++) {
          atomicAdd(&histogram[r * DIGITS + ((keys[k] >> (r * BITS)) & (DIGITS - 1u))], 1u);
        }
      }
    }
  }
  workgroupBarrier();
  for (var i = local; i < ROUNDS * DIGITS; i += WG) {
    let count = atomicLoad(&histogram[i]);
    if (count != 0u) { atomicAdd(&digit_offsets[i], count); }
  }
}

// One workgroup; invocation r scans round r's digits.
@compute @workgroup_size(WG)
fn digit_offsets_scan(@builtin(local_invocation_index) local: u32) {
  for (var r = local; r < ROUNDS; r += WG) {
    var running = 0u;
    for (var d = 0u; d < DIGITS; d++) {
      let count = atomicLoad(&digit_offsets[r * DIGITS + d]);
      atomicStore(&digit_offsets[r * DIGITS + d], running);
      running += count;
    }
  }
}

@compute @workgroup_size(WG)
fn status_clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.status_length) { atomicStore(&status[i], 0u); }
}

const FLAG_AGGREGATE: u32 = 0x40000000u;
const FLAG_PREFIX: u32 = 0x80000000u;
const VALUE_MASK: u32 = 0x3fffffffu;
var<workgroup> claimed_tile: u32;
var<workgroup> tile_start: array<u32, DIGITS>;  // the tile's first output index per digit

// The next tile in claim order, so that every predecessor of a tile is claimed by a workgroup
// that already runs.
fn claim_tile(local: u32) -> u32 {
  if (local == 0u) { claimed_tile = atomicAdd(&status[0], 1u); }
  return workgroupUniformLoad(&claimed_tile);
}

// Tile t's keys of digit d, counted from the input.
fn count_in_tile(t: u32, d: u32) -> u32 {
  var count = 0u;
  for (var i = t * TILE; i < min(t * TILE + TILE, params.n); i++) {
    count += select(0u, 1u, digit(keys_in[i]) == d);
  }
  return count;
}

// Publishes the tile's count of digit d and returns the output index of its first digit-d key:
// the round's start of digit d plus the digit-d keys of every earlier tile, summed back over the
// predecessors' words to the nearest prefix, WINDOW words per round trip (tiles are claimed
// faster than a word travels, so the nearest prefix is often many tiles back). A predecessor that
// publishes nothing in SPINS polls is counted from the input.
fn tile_digit_start(tile: u32, d: u32, count: u32) -> u32 {
  let word = 1u + tile * DIGITS + d;
  let round_start = atomicLoad(&digit_offsets[params.shift / BITS * DIGITS + d]);
  if (tile == 0u) {
    atomicStore(&status[word], FLAG_PREFIX | (round_start + count));
    return round_start;
  }
  atomicStore(&status[word], FLAG_AGGREGATE | count);
  var start = 0u;
  var next = tile;  // the tiles before `next` are not accounted for yet
  loop {
    // The window's loads are independent, so they are in flight together. Tile 0 always ends
    // the walk (it publishes a prefix), so reads clamped to it are never used.
    var aggregates = 0u;  // the window's leading aggregates, added to start
    var published = 0u;  // the first word that is not an aggregate
    var stopped = false;
    for (var w = 0u; w < WINDOW; w++) {
      let read = atomicLoad(&status[1u + (next - 1u - min(w, next - 1u)) * DIGITS + d]);
      if (!stopped && (read & FLAG_AGGREGATE) != 0u) {
        start += read & VALUE_MASK;
        aggregates++;
      } else if (!stopped) {
        published = read;
        stopped = true;
      }
    }
    next -= aggregates;
    if (!stopped) { continue; }
    for (var spin = 0u; spin < SPINS && published == 0u; spin++) {
      published = atomicLoad(&status[1u + (next - 1u) * DIGITS + d]);
    }
    if (published == 0u) {
      start += count_in_tile(next - 1u, d);
      if (next == 1u) {
        start += round_start;
        break;
      }
    } else {
      start += published & VALUE_MASK;
      if ((published & FLAG_PREFIX) != 0u) { break; }
    }
    next -= 1u;
  }
  atomicStore(&status[word], FLAG_PREFIX | (start + count));
  return start;
}

var<workgroup> digit_prefix: array<u32, 2048>;
@compute @workgroup_size(WG)
fn scatter(@builtin(local_invocation_index) local: u32) {
  let tile = claim_tile(local);
  if (tile >= params.tiles) { return; }
  let first = tile * TILE + local * KPI;
  var keys = array<u32, KPI>();
  var mine = array<u32, DIGITS>();
  for (var j = 0u; j < KPI; j++) {
    let i = first + j;
    if (i < params.n) {
      keys[j] = keys_in[i];
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
  for (var d = local; d < DIGITS; d += WG) {
    tile_start[d] = tile_digit_start(tile, d, digit_prefix[d * WG + WG - 1u]);
  }
  workgroupBarrier();
  var next = array<u32, DIGITS>();
  for (var d = 0u; d < DIGITS; d++) {
    next[d] = tile_start[d] + digit_prefix[d * WG + local] - mine[d];
  }
  for (var j = 0u; j < KPI; j++) {
    if (first + j < params.n) {
      let d = digit(keys[j]);
      keys_out[next[d]] = keys[j];
      next[d] += 1u;
    }
  }
}
