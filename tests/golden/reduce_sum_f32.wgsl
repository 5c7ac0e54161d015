
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, workgroups: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<f32>;

const WG: u32 = 256u;  // invocations per workgroup
const ITEMS: u32 = 1u;  // vectors per invocation

alias Acc = f32;
const IDENTITY: Acc = 0.0;
fn combine(a: Acc, b: Acc) -> Acc { return a + b; }
fn lift(value: f32) -> Acc { return value; }

fn vector_count() -> u32 { return params.n; }
fn load(i: u32) -> Acc { return lift(x[i]); }

var<workgroup> scratch: array<Acc, WG>;
fn tree_reduce(value: Acc, local: u32) -> Acc {
  scratch[local] = value;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (local < stride) { scratch[local] = combine(scratch[local], scratch[local + stride]); }
    workgroupBarrier();
  }
  return scratch[0];
}

fn workgroup_reduce(value: Acc, local: u32, lane: u32) -> Acc { return tree_reduce(value, local); }

struct Invocation {
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32,
}
fn lane_of(id: Invocation) -> u32 { return 0u; }

fn tile_total(id: Invocation) -> Acc {
  let vectors = vector_count();
  let first = linear_workgroup(id.group, id.groups) * (WG * ITEMS) + id.local;
  var acc = IDENTITY;
  for (var item = 0u; item < ITEMS; item++) {
    let i = first + item * WG;
    if (i < vectors) { acc = combine(acc, load(i)); }
  }
  return workgroup_reduce(acc, id.local, lane_of(id));
}

@compute @workgroup_size(WG)
fn partial_sums(id: Invocation) {
  let total = tile_total(id);
  let index = linear_workgroup(id.group, id.groups);
  if (id.local == 0u && index < params.workgroups) { partials[index] = total; }
}

@compute @workgroup_size(WG)
fn total_sum(id: Invocation) {
  var acc = 0.0;
  for (var i = id.local; i < params.workgroups; i += WG) { acc += partials[i]; }
  let sum = workgroup_reduce(acc, id.local, lane_of(id));
  if (id.local == 0u) { result[0] = sum; }
}
