
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, segments: u32, chunks: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read_write> sums: array<f32>;
@group(0) @binding(4) var<storage, read_write> partials: array<f32>;
@group(0) @binding(5) var<storage, read_write> ranges: array<atomic<u32>>;

const WG: u32 = 256u;  // invocations per workgroup
const TEAM: u32 = 8u;  // invocations per short segment
const TEAMS: u32 = 32u;  // teams per workgroup
const TEAM_SEGMENTS: u32 = 1u;  // segments per team, one a round
const TEAM_ITEMS: u32 = 4u;  // values per invocation of a team
const SHORT: u32 = 32u;  // the longest short segment
const BLOCK: u32 = 64u;  // segments per workgroup of large_segments
const CHUNK: u32 = 4096u;  // values per chunk; longer segments are long

struct Invocation {
  @builtin(local_invocation_index) local: u32,
}

var<workgroup> sum_scratch: array<f32, WG>;
fn team_sum(value: f32, id: Invocation) -> f32 {
  sum_scratch[id.local] = value;
  workgroupBarrier();
  for (var stride = TEAM / 2u; stride > 0u; stride /= 2u) {
    if (id.local % TEAM < stride) { sum_scratch[id.local] += sum_scratch[id.local + stride]; }
    workgroupBarrier();
  }
  return sum_scratch[id.local - id.local % TEAM];
}
fn workgroup_sum(value: f32, id: Invocation) -> f32 {
  sum_scratch[id.local] = value;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (id.local < stride) { sum_scratch[id.local] += sum_scratch[id.local + stride]; }
    workgroupBarrier();
  }
  let total = sum_scratch[0];
  workgroupBarrier();  // the scratch is written again by the next call
  return total;
}

// ranges[RANGE_LARGE], ranges[RANGE_LARGE + 1]: the first and one past the last segment longer
// than SHORT (medium or long); ranges[RANGE_LONG], ranges[RANGE_LONG + 1]: those longer than
// CHUNK. Empty (NO_SEGMENT, 0) after reset_ranges.
const RANGE_LARGE = 0u;
const RANGE_LONG = 2u;
const NO_SEGMENT = 0xffffffffu;

// Segment s's values [start, end), clamped to the input.
fn segment_range(s: u32) -> vec2u {
  let end = min(offsets[s + 1u], params.n);
  return vec2u(min(offsets[s], end), end);
}

// The last segment of [first, last) whose first offset is at most p, or params.segments when
// there is none.
fn segment_of(p: u32, first: u32, last: u32) -> u32 {
  if (first >= last || offsets[first] > p) { return params.segments; }
  var low = first;   // offsets[low] <= p
  var high = last;   // offsets[high] > p, or the end of the range
  while (high - low > 1u) {
    let middle = low + (high - low) / 2u;
    if (offsets[middle] <= p) { low = middle; } else { high = middle; }
  }
  return low;
}

// The sum of x[i] for i = first, first + WG, ... below end, four loads in flight at a time.
fn strided_sum(first: u32, end: u32) -> f32 {
  var acc = 0.0;
  if (first >= end) { return acc; }
  let last = end - 1u;
  for (var i = first; i < end; i += 4u * WG) {
    let a = x[i];
    let b = select(0.0, x[min(i + WG, last)], i + WG < end);
    let c = select(0.0, x[min(i + 2u * WG, last)], i + 2u * WG < end);
    let d = select(0.0, x[min(i + 3u * WG, last)], i + 3u * WG < end);
    acc += ((a + b) + c) + d;
  }
  return acc;
}

// The first chunk that starts at or after value p.
fn chunk_at_or_after(p: u32) -> u32 { return p / CHUNK + select(0u, 1u, p % CHUNK != 0u); }

fn team_share(range: vec2u, lane: u32) -> f32 {
  var sum = 0.0;
  if (range.y - range.x <= SHORT) {
    for (var k = 0u; k < TEAM_ITEMS; k++) {
      let i = range.x + k * TEAM + lane;
      if (i < range.y) { sum += x[i]; }
    }
  }
  return sum;
}

@compute @workgroup_size(1)
fn reset_ranges() {
  atomicStore(&ranges[RANGE_LARGE], NO_SEGMENT);
  atomicStore(&ranges[RANGE_LARGE + 1u], 0u);
  atomicStore(&ranges[RANGE_LONG], NO_SEGMENT);
  atomicStore(&ranges[RANGE_LONG + 1u], 0u);
}

// The workgroup's part of `ranges`, merged into the global words once.
var<workgroup> workgroup_ranges: array<atomic<u32>, 4>;

@compute @workgroup_size(WG)
fn short_segments(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                   id: Invocation) {
  if (id.local < 4u) {
    atomicStore(&workgroup_ranges[id.local], select(0u, NO_SEGMENT, id.local % 2u == 0u));
  }
  workgroupBarrier();
  // Round j's segment of this team is first + j * TEAMS.
  let first = linear_workgroup(group, groups) * TEAMS * TEAM_SEGMENTS + id.local / TEAM;
  let lane = id.local % TEAM;
  var round_ranges: array<vec2u, TEAM_SEGMENTS>;
  var acc: array<f32, TEAM_SEGMENTS>;
  for (var j = 0u; j < TEAM_SEGMENTS; j++) {
    let s = first + j * TEAMS;
    var range = vec2u(0u);
    if (s < params.segments) { range = segment_range(s); }
    round_ranges[j] = range;
    acc[j] = team_share(range, lane);
  }
  for (var j = 0u; j < TEAM_SEGMENTS; j++) {
    let s = first + j * TEAMS;
    let range = round_ranges[j];
    let total = team_sum(acc[j], id);
    if (lane == 0u && s < params.segments) {
      if (range.y - range.x <= SHORT) {
        sums[s] = total;
      } else {
        atomicMin(&workgroup_ranges[RANGE_LARGE], s);
        atomicMax(&workgroup_ranges[RANGE_LARGE + 1u], s + 1u);
        if (range.y - range.x > CHUNK) {
          atomicMin(&workgroup_ranges[RANGE_LONG], s);
          atomicMax(&workgroup_ranges[RANGE_LONG + 1u], s + 1u);
        }
      }
    }
  }
  workgroupBarrier();
  // The global words only move one way until the next reset, so a bound they already pass is
  // left out: most workgroups then add no contended atomic to the first segment's word. A bound
  // still at its reset value (every segment of the workgroup short) cannot move them and reads
  // none: the global words are atomics in one line of L2, so with short segments every
  // workgroup ended with a round trip to that one line.
  if (id.local < 4u) {
    let bound = atomicLoad(&workgroup_ranges[id.local]);
    let minimum = id.local % 2u == 0u;
    if (bound != select(0u, NO_SEGMENT, minimum)) {
      if (minimum && bound < atomicLoad(&ranges[id.local])) {
        atomicMin(&ranges[id.local], bound);
      }
      if (!minimum && bound > atomicLoad(&ranges[id.local])) {
        atomicMax(&ranges[id.local], bound);
      }
    }
  }
}

// The chunks that can start inside a long segment (from the one that holds the first long
// segment's first value to the last long segment's end; none when no segment is long), found
// once per workgroup. The grid strides over them: one chunk per workgroup with pass_grid 0, else
// at most pass_grid workgroups, so that a layout without long segments launches few.
var<workgroup> chunk_span: vec2u;
// Where the chunk's values of a long segment end, or 0 when its first value lies in no long
// segment (the others' values are the other passes'). Found by one invocation and shared: loads
// of offsets do not count as uniform, and the workgroup's sum needs uniform control flow.
var<workgroup> chunk_end: u32;

@compute @workgroup_size(WG)
fn chunk_partials(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                   id: Invocation) {
  if (id.local == 0u) {
    let first = atomicLoad(&ranges[RANGE_LONG]);
    let last = min(atomicLoad(&ranges[RANGE_LONG + 1u]), params.segments);
    var span = vec2u(0u);
    if (first < last) {
      span = vec2u(min(offsets[first], params.n) / CHUNK,
                   min(params.chunks, chunk_at_or_after(min(offsets[last], params.n))));
    }
    chunk_span = span;
  }
  let span = workgroupUniformLoad(&chunk_span);
  let grid = groups.x * groups.y;
  for (var c = span.x + linear_workgroup(group, groups); c < span.y; c += grid) {
    let p = c * CHUNK;
    if (id.local == 0u) {
      var end = 0u;
      let last = min(atomicLoad(&ranges[RANGE_LONG + 1u]), params.segments);
      let s = segment_of(p, atomicLoad(&ranges[RANGE_LONG]), last);
      if (s < params.segments) {
        let range = segment_range(s);
        if (range.y - range.x > CHUNK && p < range.y) { end = min(p + CHUNK, range.y); }
      }
      chunk_end = end;
    }
    let end = workgroupUniformLoad(&chunk_end);
    if (end != 0u) {
      let total = workgroup_sum(strided_sum(p + id.local, end), id);
      if (id.local == 0u) { partials[c] = total; }
    }
    workgroupBarrier();  // chunk_end is written again
  }
}

var<workgroup> large_list: array<u32, BLOCK>;
var<workgroup> large_count: atomic<u32>;
var<workgroup> large_total: u32;  // large_count, for workgroupUniformLoad
// The blocks that meet the range of segments longer than short (none when there is none),
// strided over by the grid as chunk_partials' chunks are.
var<workgroup> block_span: vec2u;

@compute @workgroup_size(WG)
fn large_segments(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                   id: Invocation) {
  if (id.local == 0u) {
    let first = atomicLoad(&ranges[RANGE_LARGE]);
    let last = min(atomicLoad(&ranges[RANGE_LARGE + 1u]), params.segments);
    let blocks_end = last / BLOCK + select(0u, 1u, last % BLOCK != 0u);
    block_span = select(vec2u(0u), vec2u(first / BLOCK, blocks_end), first < last);
  }
  let span = workgroupUniformLoad(&block_span);
  let grid = groups.x * groups.y;
  for (var block = span.x + linear_workgroup(group, groups); block < span.y; block += grid) {
    if (id.local == 0u) { atomicStore(&large_count, 0u); }
    workgroupBarrier();
    let s = block * BLOCK + id.local;
    if (id.local < BLOCK && s < params.segments) {
      let range = segment_range(s);
      if (range.y - range.x > SHORT) { large_list[atomicAdd(&large_count, 1u)] = s; }
    }
    workgroupBarrier();
    if (id.local == 0u) { large_total = atomicLoad(&large_count); }
    let count = workgroupUniformLoad(&large_total);
    for (var k = 0u; k < count; k++) {
      let segment = large_list[k];
      let range = segment_range(segment);
      var acc = 0.0;
      if (range.y - range.x <= CHUNK) {
        acc = strided_sum(range.x + id.local, range.y);
      } else {
        // The head, then the partial of every chunk that starts inside the segment.
        let first_chunk = chunk_at_or_after(range.x);
        acc = strided_sum(range.x + id.local, first_chunk * CHUNK);
        for (var c = first_chunk + id.local; c < chunk_at_or_after(range.y); c += WG) {
          acc += partials[c];
        }
      }
      let total = workgroup_sum(acc, id);
      if (id.local == 0u) { sums[segment] = total; }
    }
    workgroupBarrier();  // large_list, large_count and large_total are written again
  }
}
