
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, workgroups: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> key: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> result: array<u32>;  // f32 bits

fn combine(a: u32, b: u32) -> u32 { return max(a, b); }
fn lift(bits: u32) -> u32 {
  if ((bits & 0x7fffffffu) > 0x7f800000u) { return 0xffffffffu; }
  return select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
}
fn load(i: u32) -> u32 {
  return lift(x[i]);
}

var<workgroup> scratch: array<u32, 256>;
fn workgroup_reduce(value: u32, local: u32, lane: u32) -> u32 {
  scratch[local] = value;
  workgroupBarrier();
  for (var stride = 256u / 2u; stride > 0u; stride /= 2u) {
    if (local < stride) { scratch[local] = combine(scratch[local], scratch[local + stride]); }
    workgroupBarrier();
  }
  return scratch[0];
}

@compute @workgroup_size(1)
fn init() { atomicStore(&key[0], 0u); }

@compute @workgroup_size(256)
fn reduce(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32) {
  let index = linear_workgroup(group, groups);
  let vectors = params.n;
  let first = index * (256u * 1u) + local;
  var acc = 0u;
  for (var item = 0u; item < 1u; item++) {
    let i = first + item * 256u;
    if (i < vectors) { acc = combine(acc, load(i)); }
  }
  let total = workgroup_reduce(acc, local, 0u);
  if (local == 0u && index < params.workgroups) { atomicMax(&key[0], total); }
}

@compute @workgroup_size(1)
fn finish() {
  let k = atomicLoad(&key[0]);
  if (k == 0xffffffffu) { result[0] = 0x7fc00000u; return; }
  result[0] = select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u);
}
