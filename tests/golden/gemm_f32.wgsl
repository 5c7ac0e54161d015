
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { m: u32, n: u32, k: u32, tiles_n: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

const TILE_M: u32 = 64u;
const TILE_N: u32 = 64u;
const TILE_K: u32 = 16u;
const STAGES: u32 = 1u;  // workgroup tiles of A and B
const GROUP: u32 = 1u;  // tile rows per group
const RT: u32 = 16u;  // rows of invocations
const CT: u32 = 16u;  // columns of invocations
const INVOCATIONS: u32 = 256u;
const ACCUMULATORS: u32 = 4u;  // vec4f per invocation
const A_LOADS: u32 = 4u;  // A's values each invocation stages
const B_LOADS: u32 = 4u;  // B's values each invocation stages

var<workgroup> tile_a: array<array<array<vec4f, TILE_M / 4u>, TILE_K>, STAGES>;
var<workgroup> tile_b: array<array<array<vec4f, TILE_N / 4u>, TILE_K>, STAGES>;

fn load_a(row0: u32, k0: u32, e: u32) -> f32 {
  let r = row0 + e / TILE_K;
  let d = k0 + e % TILE_K;
  if (r < params.m && d < params.k) { return a[r * params.k + d]; }
  return 0.0;
}
fn load_b(col0: u32, k0: u32, e: u32) -> f32 {
  let d = k0 + e / TILE_N;
  let col = col0 + e % TILE_N;
  if (d < params.k && col < params.n) { return b[d * params.n + col]; }
  return 0.0;
}
fn stage_a(stage: u32, e: u32, value: f32) {
  let r = e / TILE_K;
  tile_a[stage][e % TILE_K][r / 4u][r % 4u] = value;
}
fn stage_b(stage: u32, e: u32, value: f32) {
  let col = e % TILE_N;
  tile_b[stage][e / TILE_N][col / 4u][col % 4u] = value;
}
fn store_row(r: u32, col: u32, values: vec4f) {
  if (r >= params.m) { return; }
  for (var j = 0u; j < 4u; j++) {
    if (col + j < params.n) { c[r * params.n + col + j] = values[j]; }
  }
}

@compute @workgroup_size(INVOCATIONS)
fn gemm(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
        @builtin(local_invocation_index) local: u32) {
  let tile = linear_workgroup(group, groups);
  let row0 = (tile / params.tiles_n) * TILE_M;
  let col0 = (tile % params.tiles_n) * TILE_N;
  let ty = local / CT;
  let tx = local % CT;
  var acc = array<vec4f, ACCUMULATORS>();
  var next_a = array<f32, A_LOADS>();
  var next_b = array<f32, B_LOADS>();
  {
    let kl = 0u;
    for (var s = 0u; s < A_LOADS; s++) { next_a[s] = load_a(row0, kl, local + s * INVOCATIONS); }
    for (var s = 0u; s < B_LOADS; s++) { next_b[s] = load_b(col0, kl, local + s * INVOCATIONS); }
  }
  for (var k0 = 0u; k0 < params.k; k0 += TILE_K) {
    const st = 0u;
    const fill = 0u;
    for (var s = 0u; s < A_LOADS; s++) { stage_a(fill, local + s * INVOCATIONS, next_a[s]); }
    for (var s = 0u; s < B_LOADS; s++) { stage_b(fill, local + s * INVOCATIONS, next_b[s]); }
    workgroupBarrier();
    let kl = k0 + TILE_K;
    if (kl < params.k) {
      for (var s = 0u; s < A_LOADS; s++) { next_a[s] = load_a(row0, kl, local + s * INVOCATIONS); }
      for (var s = 0u; s < B_LOADS; s++) { next_b[s] = load_b(col0, kl, local + s * INVOCATIONS); }
    }
    for (var d = 0u; d < TILE_K; d++) {
      let a0 = tile_a[st][d][0u + ty];
      let b0 = tile_b[st][d][0u + tx];
      acc[0] = fma(vec4f(a0.x), b0, acc[0]);
      acc[1] = fma(vec4f(a0.y), b0, acc[1]);
      acc[2] = fma(vec4f(a0.z), b0, acc[2]);
      acc[3] = fma(vec4f(a0.w), b0, acc[3]);
    }
    workgroupBarrier();
  }
  store_row(row0 + 0u + 4u * ty, col0 + 0u + 4u * tx, acc[0]);
  store_row(row0 + 1u + 4u * ty, col0 + 0u + 4u * tx, acc[1]);
  store_row(row0 + 2u + 4u * ty, col0 + 0u + 4u * tx, acc[2]);
  store_row(row0 + 3u + 4u * ty, col0 + 0u + 4u * tx, acc[3]);
}
