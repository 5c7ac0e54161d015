
fn linear_workgroup(id: vec3u, count: vec3u) -> u32 {
  return id.x + id.y * count.x;
}

struct Params { n: u32, blocks: u32, threshold_key: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@group(0) @binding(3) var<storage, read_write> block_sums: array<u32>;
@group(0) @binding(4) var<storage, read_write> count: array<u32>;

fn keep(bits: u32) -> bool {
  if ((bits & 0x7fffffffu) > 0x7f800000u) { return false; }
  let b = select(bits, 0u, bits == 0x80000000u);
  let key = select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
  return key > params.threshold_key;
}
fn scan_length() -> u32 { return params.n; }
fn scan_blocks() -> u32 { return params.blocks; }
fn scan_value(i: u32) -> u32 { return select(0u, 1u, keep(x[i])); }
fn scan_store(i: u32, prefix: u32) { if (keep(x[i])) { y[prefix] = x[i]; } }
fn scan_total(total: u32) { count[0] = total; }

var<workgroup> scan_scratch: array<u32, 256>;
fn workgroup_exclusive_scan(value: u32, local: u32) -> vec2u {
  scan_scratch[local] = value;
  workgroupBarrier();
  for (var offset = 1u; offset < 256u; offset *= 2u) {
    var add = 0u;
    if (local >= offset) { add = scan_scratch[local - offset]; }
    workgroupBarrier();
    scan_scratch[local] += add;
    workgroupBarrier();
  }
  let inclusive = scan_scratch[local];
  let total = scan_scratch[256u - 1u];
  workgroupBarrier();
  return vec2u(inclusive - value, total);
}

@compute @workgroup_size(256)
fn compact_reduce(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
    @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let first = b * (256u * 4u) + local * 4u;
  var sum = 0u;
  for (var j = 0u; j < 4u; j++) {
    let i = first + j;
    if (i < scan_length()) { sum += scan_value(i); }
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (local == 0u && b < scan_blocks()) { block_sums[b] = scanned.y; }
}

@compute @workgroup_size(256)
fn compact_spine(@builtin(local_invocation_index) local: u32) {
  var carry = 0u;
  let blocks = scan_blocks();
  for (var start = 0u; start < blocks; start += (256u * 4u)) {
    var values = array<u32, 4>();
    var sum = 0u;
    for (var j = 0u; j < 4u; j++) {
      let i = start + local * 4u + j;
      if (i < blocks) { values[j] = block_sums[i]; }
      sum += values[j];
    }
    let scanned = workgroup_exclusive_scan(sum, local);
    var running = carry + scanned.x;
    for (var j = 0u; j < 4u; j++) {
      let i = start + local * 4u + j;
      if (i < blocks) { block_sums[i] = running; }
      running += values[j];
    }
    carry += scanned.y;
  }
  if (local == 0u) { scan_total(carry); }
}

@compute @workgroup_size(256)
fn compact_apply(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
    @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let first = b * (256u * 4u) + local * 4u;
  var values = array<u32, 4>();
  var sum = 0u;
  for (var j = 0u; j < 4u; j++) {
    let i = first + j;
    if (i < scan_length()) { values[j] = scan_value(i); }
    sum += values[j];
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (b >= scan_blocks()) { return; }
  var running = block_sums[b] + scanned.x;
  for (var j = 0u; j < 4u; j++) {
    let i = first + j;
    if (i < scan_length()) { scan_store(i, running); }
    running += values[j];
  }
}
