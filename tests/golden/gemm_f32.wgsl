
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { m: u32, n: u32, k: u32, tiles_n: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

var<workgroup> tile_a: array<f32, 256>;  // [row][depth]
var<workgroup> tile_b: array<f32, 256>;  // [depth][column]

@compute @workgroup_size(256)
fn gemm(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
        @builtin(local_invocation_index) local: u32) {
  let tile = linear_workgroup(group, groups);
  let row0 = (tile / params.tiles_n) * 16u;
  let col0 = (tile % params.tiles_n) * 16u;
  let my_row = (local / 16u) * 1u;
  let my_col = (local % 16u) * 1u;
  var acc = array<array<f32, 1>, 1>();
  for (var k0 = 0u; k0 < params.k; k0 += 16u) {
    for (var e = local; e < 256u; e += 256u) {
      let r = row0 + e / 16u;
      let d = k0 + e % 16u;
      var value = 0.0;
      if (r < params.m && d < params.k) { value = a[r * params.k + d]; }
      tile_a[e] = value;
    }
    for (var e = local; e < 256u; e += 256u) {
      let d = k0 + e / 16u;
      let col = col0 + e % 16u;
      var value = 0.0;
      if (d < params.k && col < params.n) { value = b[d * params.n + col]; }
      tile_b[e] = value;
    }
    workgroupBarrier();
    for (var d = 0u; d < 16u; d++) {
      var b_values = array<f32, 1>();
      for (var j = 0u; j < 1u; j++) { b_values[j] = tile_b[d * 16u + my_col + j]; }
      for (var i = 0u; i < 1u; i++) {
        let a_value = tile_a[(my_row + i) * 16u + d];
        for (var j = 0u; j < 1u; j++) { acc[i][j] = fma(a_value, b_values[j], acc[i][j]); }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 1u; i++) {
    for (var j = 0u; j < 1u; j++) {
      let r = row0 + my_row + i;
      let col = col0 + my_col + j;
      if (r < params.m && col < params.n) { c[r * params.n + col] = acc[i][j]; }
    }
  }
}
