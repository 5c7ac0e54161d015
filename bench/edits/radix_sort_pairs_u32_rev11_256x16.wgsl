// radix_sort_pairs_u32 revision 11, schedule {digit_bits=8, keys_per_invocation=16, one_sweep=0, use_subgroups=1, workgroup_size=256}
// revision 12 (f7efa2a) generated, with its tile starts put back in tile_start: revision 11 (the same inverse edit gives 1e4d00f's keys WGSL exactly)
enable subgroups;

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

const WG: u32 = 256u;  // invocations of the scan and scatter passes
const KPI: u32 = 16u;  // keys per invocation of a tile
const DIGITS: u32 = 256u;
const SCAN_ITEMS: u32 = 4u;  // counts per invocation of the counts' scan
const COUNT_WG: u32 = 64u;  // invocations of digit_count
const COUNT_KEYS: u32 = 64u;  // keys per invocation of digit_count
const COUNT_CHUNK: u32 = 16u;  // keys loaded before they are counted
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

const BITS: u32 = 8u;
const MIN_SUBGROUP: u32 = 8u;  // the smallest subgroup the counters have room for
const WORDS: u32 = 128u;  // counter words per subgroup
const RANKED_WORDS: u32 = 4096u;  // the counters, then the ranked tile
const PER: u32 = 1u;  // digits per invocation in the scan over digits

var<workgroup> ranked: array<atomic<u32>, RANKED_WORDS>;
var<workgroup> digit_base: array<u32, DIGITS>;
var<workgroup> digit_group_sums: array<u32, WG / MIN_SUBGROUP>;  // the digits' sums per subgroup
var<workgroup> tile_start: array<u32, DIGITS>;  // the tile's first output place per digit

// The lanes of a vec4u ballot below `lane`.
fn lanes_below(lane: u32) -> vec4u {
  var below = vec4u(0u);
  for (var c = 0u; c < 4u; c++) {
    if (lane >= c * 32u + 32u) {
      below[c] = 0xffffffffu;
    } else if (lane > c * 32u) {
      below[c] = (1u << (lane - c * 32u)) - 1u;
    }
  }
  return below;
}
fn lanes_in(mask: vec4u) -> u32 {
  let c = countOneBits(mask);
  return c.x + c.y + c.z + c.w;
}
fn first_lane(mask: vec4u) -> u32 {
  for (var c = 0u; c < 4u; c++) {
    if (mask[c] != 0u) { return c * 32u + firstTrailingBit(mask[c]); }
  }
  return 0u;
}
// The lanes holding digit d: one ballot per bit. Most GPUs' subgroups have at most 32
// lanes, whose ballots are the first word alone (a quarter of the work).
fn same_digit_narrow(d: u32) -> u32 {
  var same = subgroupBallot(true).x;
  for (var bit = 0u; bit < BITS; bit++) {
    let is_set = ((d >> bit) & 1u) == 1u;
    let vote = subgroupBallot(is_set).x;
    same &= select(~vote, vote, is_set);
  }
  return same;
}
fn same_digit_wide(d: u32) -> vec4u {
  var same = subgroupBallot(true);
  for (var bit = 0u; bit < BITS; bit++) {
    let is_set = ((d >> bit) & 1u) == 1u;
    let vote = subgroupBallot(is_set);
    same &= select(~vote, vote, is_set);
  }
  return same;
}

@compute @workgroup_size(WG)
fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) local: u32,
           @builtin(subgroup_invocation_id) lane: u32,
           @builtin(subgroup_size) sg: u32) {
  let tile = linear_workgroup(group, groups);
  if (tile >= params.tiles) { return; }  // a grid rounded up past the tiles
  let subgroup = local / sg;
  // The tile's output bases are read now, so that their latency passes during the ranking.
  for (var d = local; d < DIGITS; d += WG) { tile_start[d] = counts[d * params.tiles + tile]; }
  let run = tile * (WG * KPI) + subgroup * sg * KPI;
  let below = lanes_below(lane);
  // Every key is loaded before the ranking, clamped and selected rather than guarded by a
  // branch: ballots follow.
  let last = params.n - 1u;  // a tile exists, so n > 0
  var keys = array<u32, KPI>();
  {
    const j = 0u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 1u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 2u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 3u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 4u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 5u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 6u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 7u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 8u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 9u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 10u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 11u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 12u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 13u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 14u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  {
    const j = 15u;
    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
  }
  var places = array<u32, KPI>();  // rank among the subgroup's keys of the same digit
  {
    const j = 0u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 1u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 2u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 3u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 4u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 5u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 6u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 7u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 8u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 9u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 10u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 11u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 12u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 13u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 14u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  {
    const j = 15u;
    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
  }
  workgroupBarrier();
  // Exclusive scan over the subgroups, two digits per word: each half stays below 2^16.
  let subgroups = WG / sg;
  for (var q = local; q < WORDS; q += WG) {
    var running = 0u;
    for (var w = 0u; w < subgroups; w++) {
      let count = atomicLoad(&ranked[w * WORDS + q]);
      atomicStore(&ranked[w * WORDS + q], running);
      running += count;
    }
    digit_base[2u * q] = running & 0xffffu;
    digit_base[2u * q + 1u] = running >> 16u;
  }
  workgroupBarrier();
  // Exclusive scan over the digits: invocation t owns digits [t PER, t PER + PER). A subgroup
  // scan and one barrier, where a workgroup scan takes 2 log2(WG) + 2; the sums are read by
  // a select, not a branch, since a subgroup scan follows.
  var owned = 0u;
  for (var q = 0u; q < PER; q++) {
    let d = local * PER + q;
    owned += select(0u, digit_base[min(d, DIGITS - 1u)], d < DIGITS);
  }
  var start = subgroupExclusiveAdd(owned);
  let subgroup_total = subgroupAdd(owned);
  if (lane == 0u) { digit_group_sums[subgroup] = subgroup_total; }
  workgroupBarrier();
  for (var w = 0u; w < subgroup; w++) { start += digit_group_sums[w]; }
  if (local * PER < DIGITS) {
    for (var q = 0u; q < PER; q++) {
      let total = digit_base[local * PER + q];
      digit_base[local * PER + q] = start;
      start += total;
    }
  }
  workgroupBarrier();
  {
    const j = 0u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 1u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 2u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 3u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 4u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 5u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 6u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 7u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 8u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 9u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 10u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 11u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 12u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 13u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 14u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  {
    const j = 15u;
    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
  }
  workgroupBarrier();
  {
    const j = 0u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 1u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 2u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 3u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 4u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 5u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 6u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 7u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 8u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 9u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 10u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 11u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 12u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 13u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 14u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  {
    const j = 15u;
    atomicStore(&ranked[places[j]], keys[j]);
  }
  for (var d = local; d < DIGITS; d += WG) {
    digit_base[d] = tile_start[d] - digit_base[d];
  }
  workgroupBarrier();
  let valid = min(WG * KPI, params.n - tile * (WG * KPI));
  var targets = array<u32, KPI>();  // the output place of the staged key local + s WG
  {
    const s = 0u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 1u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 2u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 3u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 4u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 5u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 6u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 7u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 8u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 9u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 10u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 11u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 12u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 13u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 14u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  {
    const s = 15u;
    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
  }
  workgroupBarrier();  // every key has left `ranked`
  {
    const j = 0u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 1u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 2u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 3u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 4u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 5u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 6u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 7u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 8u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 9u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 10u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 11u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 12u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 13u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 14u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  {
    const j = 15u;
    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
  }
  workgroupBarrier();
  {
    const s = 0u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 1u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 2u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 3u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 4u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 5u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 6u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 7u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 8u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 9u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 10u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 11u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 12u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 13u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 14u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
  {
    const s = 15u;
    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
  }
}
