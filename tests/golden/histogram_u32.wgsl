
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, bins: u32, bins_mask: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4u>;
@group(0) @binding(2) var<storage, read_write> counts: array<atomic<u32>>;

const WG: u32 = 256u;  // invocations per workgroup
const VECTORS: u32 = 1u;  // vec4u per invocation and chunk
const CHUNKS: u32 = 16u;  // chunks per workgroup
const COPIES: u32 = 1u;  // workgroup copies of the counters (0: none)
const MAX_BINS: u32 = 4096u;

// bins_mask is bins - 1 when bins is a power of two above 1, else 0.
fn bin_of(value: u32) -> u32 {
  if (params.bins_mask != 0u) { return value & params.bins_mask; }
  return value % params.bins;
}

@compute @workgroup_size(WG)
fn clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups) * WG + local;
  if (b < params.bins) { atomicStore(&counts[b], 0u); }
}

var<workgroup> local_counts: array<atomic<u32>, COPIES * MAX_BINS>;
fn start_counting(local: u32) {
  for (var b = local; b < COPIES * params.bins; b += WG) {
    atomicStore(&local_counts[b], 0u);
  }
  workgroupBarrier();
}
fn add(bin: u32, local: u32) {
  atomicAdd(&local_counts[(local % COPIES) * params.bins + bin], 1u);
}
fn finish_counting(local: u32) {
  workgroupBarrier();
  for (var b = local; b < params.bins; b += WG) {
    var total = 0u;
    for (var c = 0u; c < COPIES; c++) {
      total += atomicLoad(&local_counts[c * params.bins + b]);
    }
    if (total != 0u) { atomicAdd(&counts[b], total); }
  }
}

@compute @workgroup_size(WG)
fn count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         @builtin(local_invocation_index) local: u32) {
  start_counting(local);
  let vectors = (params.n + 3u) / 4u;
  let first_chunk = linear_workgroup(group, groups) * CHUNKS;
  for (var c = 0u; c < CHUNKS; c++) {
    let base = (first_chunk + c) * (WG * VECTORS) + local;
    for (var k = 0u; k < VECTORS; k++) {
      let v = base + k * WG;
      if (v < vectors) {
        let value = x[v];
        let first = v * 4u;
        add(bin_of(value.x), local);
        if (first + 1u < params.n) { add(bin_of(value.y), local); }
        if (first + 2u < params.n) { add(bin_of(value.z), local); }
        if (first + 3u < params.n) { add(bin_of(value.w), local); }
      }
    }
  }
  finish_counting(local);
}
