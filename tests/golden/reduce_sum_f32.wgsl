
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, workgroups: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<f32>;

fn combine(a: f32, b: f32) -> f32 { return a + b; }
fn lift(value: f32) -> f32 { return value; }
fn load(i: u32) -> f32 {
  return lift(x[i]);
}

var<workgroup> scratch: array<f32, 256>;
fn workgroup_reduce(value: f32, local: u32, lane: u32) -> f32 {
  scratch[local] = value;
  workgroupBarrier();
  for (var stride = 256u / 2u; stride > 0u; stride /= 2u) {
    if (local < stride) { scratch[local] = combine(scratch[local], scratch[local + stride]); }
    workgroupBarrier();
  }
  return scratch[0];
}

@compute @workgroup_size(256)
fn partial_sums(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32) {
  let index = linear_workgroup(group, groups);
  let vectors = params.n;
  let first = index * (256u * 1u) + local;
  var acc = 0.0;
  for (var item = 0u; item < 1u; item++) {
    let i = first + item * 256u;
    if (i < vectors) { acc = combine(acc, load(i)); }
  }
  let total = workgroup_reduce(acc, local, 0u);
  if (local == 0u && index < params.workgroups) { partials[index] = total; }
}

@compute @workgroup_size(256)
fn total_sum(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32) {
  var acc = 0.0;
  for (var i = local; i < params.workgroups; i += 256u) { acc += partials[i]; }
  let sum = workgroup_reduce(acc, local, 0u);
  if (local == 0u) { result[0] = sum; }
}
