
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, source_length: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;

const WG: u32 = 256u;  // invocations per workgroup
const ITEMS: u32 = 1u;  // outputs per invocation

@compute @workgroup_size(WG)
fn gather(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
          @builtin(local_invocation_index) local: u32) {
  let first = linear_workgroup(group, groups) * (WG * ITEMS) + local;
  for (var item = 0u; item < ITEMS; item++) {
    let i = first + item * WG;
    if (i < params.n) {
      let j = idx[i];
      var value = 0u;
      if (j < params.source_length) { value = x[j]; }
      y[i] = value;
    }
  }
}
