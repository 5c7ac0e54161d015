// radix_sort_pairs_u64 revision 7, schedule {digit_bits=8, direct_rounds=1, keys_per_invocation=16, one_sweep=1, use_subgroups=1, workgroup_size=256}
// source BLAKE3 of what follows: 806ed8004156f187dfa3031b0b3b3c46474a1793f46e1e18fb98a12a09dc0d77
enable subgroups;

fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, tiles: u32, shift: u32, count_length: u32, count_blocks: u32, scan_width: u32, round: u32, histogram_groups: u32, route: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> keys_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> keys_out: array<vec2u>;
@group(0) @binding(3) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> block_sums: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> values_in: array<u32>;
@group(0) @binding(6) var<storage, read_write> values_out: array<u32>;
@group(0) @binding(7) var<storage, read> keys64: array<vec2u>;
@group(0) @binding(8) var<storage, read_write> sorted64: array<vec2u>;

const WG: u32 = 256u;  // invocations of the scan and scatter passes
const KPI: u32 = 16u;  // keys per invocation of a tile
const DIGITS: u32 = 256u;
const ROUNDS: u32 = 8u;
const HIST_WG: u32 = 256u;  // invocations of sweep_clear and digit_histograms
const HIST_CHUNK: u32 = 8u;  // keys loaded at once by digit_histograms
const HIST_BLOCK: u32 = 2048u;  // keys of a digit_histograms block
const SPINS: u32 = 128u;  // polls of a predecessor before it is counted from the input


fn digit(key: u32) -> u32 { return (key >> params.shift) & (DIGITS - 1u); }

fn load_pair(i: u32) -> vec2u {
  let source = round_route() & 3u;
  if (source == 0u) { return keys64[i]; }
  if (source == 1u) { return keys_out[i]; }
  return sorted64[i];
}
fn load_value(i: u32) -> u32 {
  let source = round_route() & 3u;
  if (source == 0u) { return values_in[i]; }
  if (source == 1u) { return keys_out[params.n + i / 2u][i & 1u]; }
  return values_out[i];
}
fn store_pair(place: u32, pair: vec2u) {
  if ((round_route() >> 2u) == 1u) { keys_out[place] = pair; } else { sorted64[place] = pair; }
}
fn store_value(place: u32, value: u32) {
  if ((round_route() >> 2u) == 1u) {
    keys_out[params.n + place / 2u][place & 1u] = value;
  } else {
    values_out[place] = value;
  }
}
fn high_round() -> bool { return params.round >= 32u / BITS; }
fn digit_word(pair: vec2u) -> u32 { return select(pair.x, pair.y, high_round()); }
fn other_word(pair: vec2u) -> u32 { return select(pair.y, pair.x, high_round()); }
fn join_words(word: u32, other: u32) -> vec2u {
  return select(vec2u(word, other), vec2u(other, word), high_round());
}

var<private> sweep_route: u32;
var<workgroup> route_copy: u32;
fn round_route() -> u32 { return sweep_route; }

@compute @workgroup_size(HIST_WG)
fn sweep_clear(@builtin(local_invocation_index) local: u32) {
  for (var w = local; w < ROUNDS * DIGITS; w += HIST_WG) {
    atomicStore(&counts[w], 0u);
  }
}

var<workgroup> round_counts: array<atomic<u32>, ROUNDS * DIGITS>;

fn pair_digit(pair: vec2u, r: u32) -> u32 {
  let half = ROUNDS / 2u;
  let word = select(pair.x, pair.y, r >= half);
  return (word >> ((r % half) * BITS)) & (DIGITS - 1u);
}

@compute @workgroup_size(HIST_WG)
fn digit_histograms(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                    @builtin(local_invocation_index) local: u32) {
  let g = linear_workgroup(group, groups);
  for (var w = local; w < ROUNDS * DIGITS; w += HIST_WG) { atomicStore(&round_counts[w], 0u); }
  let invocations = params.histogram_groups * HIST_WG;
  for (var i = g * HIST_WG + local; i < params.tiles * DIGITS; i += invocations) {
    atomicStore(&block_sums[i], 0u);
  }
  workgroupBarrier();
  let last = max(params.n, 1u) - 1u;
  for (var block = g * HIST_BLOCK; block < params.n; block += params.histogram_groups * HIST_BLOCK) {
    var keys = array<vec2u, HIST_CHUNK>();
    for (var item = 0u; item < HIST_CHUNK; item++) {
      keys[item] = keys64[min(block + item * HIST_WG + local, last)];
    }
    for (var item = 0u; item < HIST_CHUNK; item++) {
      if (block + item * HIST_WG + local < params.n) {
        for (var r = 0u; r < ROUNDS; r++) {
          atomicAdd(&round_counts[r * DIGITS + pair_digit(keys[item], r)], 1u);
        }
      }
    }
  }
  workgroupBarrier();
  for (var w = local; w < ROUNDS * DIGITS; w += HIST_WG) {
    let count = atomicLoad(&round_counts[w]);
    if (count != 0u) { atomicAdd(&counts[w], count); }
  }
}

var<workgroup> round_kept: array<u32, ROUNDS>;

@compute @workgroup_size(HIST_WG)
fn plan_rounds(@builtin(local_invocation_index) local: u32) {
  if (local < ROUNDS) {
    var kept = 1u;
    for (var d = 0u; d < DIGITS; d++) {
      if (atomicLoad(&counts[local * DIGITS + d]) == params.n) { kept = 0u; }
    }
    round_kept[local] = kept;
  }
  workgroupBarrier();
  if (local == 0u) {
    var kept_rounds = 0u;
    for (var r = 0u; r < ROUNDS; r++) { kept_rounds += round_kept[r]; }
    if (kept_rounds == 0u) {
      round_kept[ROUNDS - 1u] = 1u;
      kept_rounds = 1u;
    }
    var source = 0u;
    var done = 0u;
    for (var r = 0u; r < ROUNDS; r++) {
      var route = 0u;
      if (round_kept[r] == 1u) {
        let destination = select(1u, 2u, (kept_rounds - 1u - done) % 2u == 0u);
        route = source | (destination << 2u);
        source = destination;
        done += 1u;
      }
      atomicStore(&counts[ROUNDS * DIGITS + r], route);
    }
  }
}

const FLAG_AGGREGATE: u32 = 0x40000000u;  // the tile's own count of the digit
const FLAG_PREFIX: u32 = 0x80000000u;     // the count of the digit in every tile up to this one
const FLAG_MASK: u32 = 0xc0000000u;
const COUNT_MASK: u32 = 0x3fffffffu;

// 1 + the nearest predecessor some digit gave up waiting for (0: none), and that predecessor's
// count of each digit, from the input.
var<workgroup> stuck_tile: atomic<u32>;
var<workgroup> stuck_counts: array<atomic<u32>, DIGITS>;
var<workgroup> stuck_copy: u32;  // stuck_tile, for workgroupUniformLoad

fn chain_word(round: u32, tile: u32, d: u32) -> u32 {
  return (round % 2u) * params.tiles * DIGITS + tile * DIGITS + d;
}

// The round's count of digit `local` (0 past the digits).
fn round_total(local: u32) -> u32 {
  let d = min(local, DIGITS - 1u);
  return select(0u, atomicLoad(&counts[params.round * DIGITS + d]), local < DIGITS);
}

// Call in uniform control flow, before the ranking, with `start` the exclusive scan of the
// round's totals: tile_start[d] becomes the round's first output place of digit d; the tile's
// words of the next round are zeroed (that region's last readers ran in the previous round),
// and so is the look-back's state.
fn start_tile(tile: u32, local: u32, start: u32) {
  if (local < DIGITS) {
    tile_start[local] = start;
    atomicStore(&stuck_counts[local], 0u);
    if (params.round + 1u < ROUNDS) { atomicStore(&block_sums[chain_word(params.round + 1u, tile, local)], 0u); }
  }
  if (local == 0u) { atomicStore(&stuck_tile, 0u); }
}

fn publish(tile: u32, d: u32, flag: u32, count: u32) {
  atomicStore(&block_sums[chain_word(params.round, tile, d)], flag | (count & COUNT_MASK));
}

// Invocation d < DIGITS publishes the tile's count of digit d (tile 0: already its prefix).
fn publish_aggregate(tile: u32, local: u32, total: u32) {
  if (local < DIGITS) { publish(tile, local, select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u), total); }
}

// stuck_counts += the digits of a tile's keys, counted by the whole workgroup from the input,
// which no workgroup writes during the pass: the same keys the tile's own workgroup ranks.
fn count_from_input(tile: u32, local: u32) {
  for (var k = local; k < WG * KPI; k += WG) {
    let i = tile * (WG * KPI) + k;
    if (i < params.n) { atomicAdd(&stuck_counts[digit(digit_word(load_pair(i)))], 1u); }
  }
}

// Call in uniform control flow: invocation d < DIGITS returns the count of digit d in every tile
// before `tile`. It walks back over its predecessors' words, adding aggregates, until a prefix
// (or tile 0); a predecessor that published nothing after SPINS polls is given up on. Then, as
// long as some digit gave up, the workgroup counts the nearest such predecessor from the input,
// and the digits waiting for it take its count and walk on. No invocation waits without bound:
// each walk step is at most SPINS polls, and each round of the loop accounts for at least one
// tile of some digit.
fn look_back(tile: u32, local: u32) -> u32 {
  var prefix = 0u;
  var next = tile;  // tiles before `next` are not accounted for yet
  var done = local >= DIGITS || tile == 0u;
  loop {
    var spins = 0u;
    while (!done && spins < SPINS) {
      let word = atomicLoad(&block_sums[chain_word(params.round, next - 1u, local)]);
      if ((word & FLAG_MASK) == 0u) {
        spins += 1u;
        continue;
      }
      prefix += word & COUNT_MASK;
      next -= 1u;
      spins = 0u;
      done = (word & FLAG_MASK) == FLAG_PREFIX || next == 0u;
    }
    if (!done) { atomicMax(&stuck_tile, next); }
    workgroupBarrier();
    if (local == 0u) { stuck_copy = atomicLoad(&stuck_tile); }
    let stuck = workgroupUniformLoad(&stuck_copy);
    if (stuck == 0u) { break; }
    count_from_input(stuck - 1u, local);
    workgroupBarrier();
    if (!done && next == stuck) {
      prefix += atomicLoad(&stuck_counts[local]);
      next -= 1u;
      done = next == 0u;
    }
    workgroupBarrier();
    if (local < DIGITS) { atomicStore(&stuck_counts[local], 0u); }
    if (local == 0u) { atomicStore(&stuck_tile, 0u); }
    workgroupBarrier();
  }
  return prefix;
}

// Call in uniform control flow after publish_aggregate: publishes the tile's inclusive prefix of
// each digit and adds the exclusive one to tile_start.
fn finish_tile(tile: u32, local: u32, total: u32) {
  let prefix = look_back(tile, local);
  if (local < DIGITS) {
    if (tile != 0u) { publish(tile, local, FLAG_PREFIX, prefix + total); }
    tile_start[local] += prefix;
  }
  workgroupBarrier();
}

const BITS: u32 = 8u;
const MIN_SUBGROUP: u32 = 8u;  // the smallest subgroup the counters have room for
const WORDS: u32 = 128u;  // counter words per subgroup
const COUNTER_WORDS: u32 = 4096u;
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

fn scan_round_totals(local: u32, lane: u32, sg: u32) -> u32 {
  let total = round_total(local);
  let subgroup_total = subgroupAdd(total);
  var start = subgroupExclusiveAdd(total);
  if (lane == 0u) { digit_group_sums[local / sg] = subgroup_total; }
  workgroupBarrier();
  for (var w = 0u; w < local / sg; w++) { start += digit_group_sums[w]; }
  return start;
}

@compute @workgroup_size(WG)
fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) local: u32,
           @builtin(subgroup_invocation_id) lane: u32,
           @builtin(subgroup_size) sg: u32) {
  let tile = linear_workgroup(group, groups);
  if (tile >= params.tiles) { return; }  // a grid rounded up past the tiles
  if (local == 0u) { route_copy = atomicLoad(&counts[ROUNDS * DIGITS + params.round]); }
  let route = workgroupUniformLoad(&route_copy);
  sweep_route = route;
  if (route == 0u) {
    // A skipped round: the keys stay where they are, where plan_rounds routes the next kept
    // round. The tile's look-back words of the next round are zeroed all the same (start_tile).
    if (local < DIGITS && params.round + 1u < ROUNDS) {
      atomicStore(&block_sums[chain_word(params.round + 1u, tile, local)], 0u);
    }
    return;
  }
  let subgroup = local / sg;
  for (var w = local; w < COUNTER_WORDS; w += WG) { atomicStore(&ranked[w], 0u); }
  workgroupBarrier();
  let run = tile * (WG * KPI) + subgroup * sg * KPI;
  let below = lanes_below(lane);
  // Every key is loaded before the ranking, clamped and selected rather than guarded by a
  // branch: ballots follow.
  let last = params.n - 1u;  // a tile exists, so n > 0
  var keys = array<u32, KPI>();
  var values = array<u32, KPI>();
  var others = array<u32, KPI>();  // each key's other word
  let load_source = round_route() & 3u;  // uniform: one branch for the tile's loads
  if (load_source == 0u) {
    {
      const j = 0u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 1u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 2u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 3u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 4u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 5u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 6u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 7u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 8u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 9u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 10u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 11u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 12u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 13u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 14u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
    {
      const j = 15u;
      let i = run + j * sg + lane;
      let pair = keys64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_in[min(i, last)];
    }
  } else if (load_source == 1u) {
    {
      const j = 0u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 1u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 2u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 3u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 4u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 5u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 6u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 7u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 8u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 9u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 10u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 11u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 12u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 13u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 14u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
    {
      const j = 15u;
      let i = run + j * sg + lane;
      let pair = keys_out[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u];
    }
  } else {
    {
      const j = 0u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 1u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 2u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 3u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 4u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 5u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 6u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 7u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 8u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 9u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 10u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 11u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 12u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 13u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 14u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
    {
      const j = 15u;
      let i = run + j * sg + lane;
      let pair = sorted64[min(i, last)];
      keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
      others[j] = other_word(pair);
      values[j] = values_out[min(i, last)];
    }
  }
  start_tile(tile, local, scan_round_totals(local, lane, sg));
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
  let digit_total = select(0u, digit_base[min(local, DIGITS - 1u)], local < DIGITS);
  publish_aggregate(tile, local, digit_total);
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
  finish_tile(tile, local, digit_total);
  for (var d = local; d < DIGITS; d += WG) {
    digit_base[d] = tile_start[d] - digit_base[d];
  }
  workgroupBarrier();
  let valid = min(WG * KPI, params.n - tile * (WG * KPI));
  var targets = array<u32, KPI>();  // the output place of the staged key local + s WG
  var words = array<u32, KPI>();    // its digit word
  {
    const s = 0u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 1u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 2u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 3u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 4u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 5u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 6u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 7u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 8u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 9u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 10u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 11u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 12u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 13u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 14u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  {
    const s = 15u;
    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
  }
  workgroupBarrier();
  {
    const j = 0u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 1u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 2u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 3u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 4u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 5u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 6u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 7u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 8u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 9u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 10u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 11u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 12u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 13u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 14u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  {
    const j = 15u;
    atomicStore(&ranked[places[j]], others[j]);
  }
  workgroupBarrier();
  {
    const s = 0u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 1u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 2u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 3u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 4u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 5u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 6u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 7u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 8u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 9u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 10u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 11u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 12u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 13u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 14u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  {
    const s = 15u;
    let p = local + s * WG;
    if (p < valid) { store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
  }
  workgroupBarrier();
  {
    const j = 0u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 1u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 2u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 3u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 4u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 5u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 6u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 7u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 8u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 9u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 10u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 11u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 12u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 13u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 14u;
    atomicStore(&ranked[places[j]], values[j]);
  }
  {
    const j = 15u;
    atomicStore(&ranked[places[j]], values[j]);
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
