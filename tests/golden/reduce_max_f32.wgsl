
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, workgroups: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> key: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> result: array<u32>;  // f32 bits

const WG: u32 = 256u;  // invocations per workgroup
const ITEMS: u32 = 1u;  // vectors per invocation

alias Acc = u32;
const IDENTITY: Acc = 0u;
const NAN_KEY: u32 = 0xffffffffu;
fn combine(a: Acc, b: Acc) -> Acc { return max(a, b); }
fn clear_result() { atomicStore(&key[0], IDENTITY); }
fn publish(total: Acc) { atomicMax(&key[0], total); }

fn lift(bits: u32) -> u32 {
  if ((bits & 0x7fffffffu) > 0x7f800000u) { return NAN_KEY; }
  return select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
}

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

@compute @workgroup_size(1)
fn init() { clear_result(); }

@compute @workgroup_size(WG)
fn reduce(id: Invocation) {
  let total = tile_total(id);
  let index = linear_workgroup(id.group, id.groups);
  if (id.local == 0u && index < params.workgroups) { publish(total); }
}

@compute @workgroup_size(1)
fn finish() {
  let k = atomicLoad(&key[0]);
  if (k == NAN_KEY) { result[0] = 0x7fc00000u; return; }
  result[0] = select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u);
}
