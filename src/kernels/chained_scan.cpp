// The single-pass chained scan behind scan_exclusive_u32 and compact_f32.
//
// Each workgroup claims the next tile from a counter (so a tile's predecessors were all claimed
// by workgroups that already run), scans it in registers, publishes the tile's sum, and looks
// back over its predecessors' published sums until it meets one that published its inclusive
// prefix (decoupled look-back). The input is read once and the output written once: 8 bytes per
// element for a scan, against 12 for reduce-then-scan. Without subgroups an invocation's vectors
// are consecutive (blocked); with them, each row of the tile holds one vector per invocation
// (striped), so that a subgroup's loads and stores are contiguous.
//
// WGSL promises no forward progress between workgroups, so no workgroup waits without bound: a
// predecessor that has published nothing after kSpins polls is reduced from the input by the
// waiting workgroup itself (the fallback of decoupled look-back), which is correct because the
// input does not change while the kernel runs.
//
// WGSL has no 64-bit atomics, so a tile's 32-bit value and its 2-bit flag cannot be published in
// one store: each tile publishes two words, the low and the high 16 bits, each carrying the flag.
// A reader accepts them only when both words carry the same flag; each flag is published once
// per tile, so equal flags mean both halves belong to the same value.

#include <algorithm>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels::support {
namespace {

// Polls of one predecessor before reducing it from the input instead.
constexpr std::uint32_t kSpins = 64;

std::string constants(const ChainedScanShape& shape) {
  return "const WG: u32 = " + std::to_string(shape.workgroup_size) +
         "u;\n"
         "const VECTORS: u32 = " +
         std::to_string(shape.vectors) +
         "u;  // vec4 per invocation\n"
         "const TILE_VECTORS: u32 = WG * VECTORS;\n"
         "const LOOK_BACK: u32 = " +
         std::to_string(std::min(shape.look_back_window, shape.workgroup_size)) +
         "u;\n"
         "const SPINS: u32 = " +
         std::to_string(kSpins) +
         "u;\n"
         "const FLAG_AGGREGATE: u32 = 0x10000u;  // the tile's own sum\n"
         "const FLAG_PREFIX: u32 = 0x20000u;     // the sum of every tile up to this one\n"
         "const FLAG_MASK: u32 = 0x30000u;\n\n";
}

// Exclusive scan across the workgroup: (prefix of this invocation, workgroup total).
std::string tile_scan(const ChainedScanShape& shape) {
  if (!shape.subgroups) {
    return workgroup_scan_wgsl(shape.workgroup_size) +
           "fn tile_scan(value: u32, local: u32, lane: u32, width: u32) -> vec2u {\n"
           "  return workgroup_exclusive_scan(value, local);\n"
           "}\n\n";
  }
  // Subgroups of `width` invocations, consecutive in local_invocation_index; an adapter where
  // that does not hold fails certification, so such a schedule is never published.
  return "var<workgroup> subgroup_sums: array<u32, " +
         std::to_string(std::max(1u, shape.workgroup_size / 4)) +
         ">;\n"
         "fn tile_scan(value: u32, local: u32, lane: u32, width: u32) -> vec2u {\n"
         "  let inclusive = subgroupInclusiveAdd(value);\n"
         "  let group = local / width;\n"
         "  if (lane == width - 1u) { subgroup_sums[group] = inclusive; }\n"
         "  workgroupBarrier();\n"
         "  var before = 0u;\n"
         "  var total = 0u;\n"
         "  for (var g = 0u; g < max(1u, WG / width); g++) {\n"
         "    let sum = subgroup_sums[g];\n"
         "    before += select(0u, sum, g < group);\n"
         "    total += sum;\n"
         "  }\n"
         "  workgroupBarrier();\n"
         "  return vec2u(before + inclusive - value, total);\n"
         "}\n\n";
}

const char* const kChainWgsl =
    R"(// chain[0]: the next tile to claim; chain[1 + 2 t] and chain[2 + 2 t]: the low and the high
// 16 bits of tile t's published value, each with the flag (0 while nothing is published).
fn publish(tile: u32, flag: u32, value: u32) {
  atomicStore(&chain[1u + 2u * tile], flag | (value & 0xffffu));
  atomicStore(&chain[2u + 2u * tile], flag | (value >> 16u));
}

// (flag, value) of a tile; flag 0 while it is unpublished or the halves disagree.
fn tile_status(tile: u32) -> vec2u {
  let low = atomicLoad(&chain[1u + 2u * tile]);
  let high = atomicLoad(&chain[2u + 2u * tile]);
  let flag = low & FLAG_MASK;
  if (flag != (high & FLAG_MASK)) { return vec2u(0u, 0u); }
  return vec2u(flag, (low & 0xffffu) | (high << 16u));
}

fn vector_count() -> u32 { return (params.n + 3u) / 4u; }

fn sum4(v: vec4u) -> u32 { return v.x + v.y + v.z + v.w; }

// The sum of a tile's items, from the input.
fn reduce_tile(tile: u32, local: u32, lane: u32, width: u32) -> u32 {
  var sum = 0u;
  for (var k = 0u; k < VECTORS; k++) {
    let v = tile * TILE_VECTORS + local * VECTORS + k;
    if (v < vector_count()) { sum += sum4(scan_items(x[v], v * 4u)); }
  }
  return tile_scan(sum, local, lane, width).y;
}

var<workgroup> claimed_tile: u32;
// The walk's shared state: the nearest predecessor in the window that is not an aggregate, as
// 2 * distance + (0 for a prefix, 1 for unpublished), or LOOK_NONE; and the sum of the values
// up to it.
const LOOK_NONE: u32 = 0xffffffffu;
var<workgroup> look_stop: atomic<u32>;
var<workgroup> look_sum: atomic<u32>;
var<workgroup> look_step: vec2u;

// The sum of every tile before `tile` (> 0). Invocation l reads the l-th predecessor not yet
// accounted for, polling it while it is unpublished; the window's values are added up to the
// nearest published prefix (done) or unpublished tile (read again, then reduced here).
fn look_back(tile: u32, local: u32, lane: u32, width: u32) -> u32 {
  var prefix = 0u;
  var next = tile;  // tiles before `next` are not accounted for yet
  loop {
    var status = vec2u(FLAG_PREFIX, 0u);  // before tile 0: nothing
    if (local < LOOK_BACK && local < next) {
      let t = next - 1u - local;
      status = tile_status(t);
      for (var spin = 0u; spin < SPINS && status.x == 0u; spin++) { status = tile_status(t); }
    }
    if (local < LOOK_BACK && status.x != FLAG_AGGREGATE) {
      atomicMin(&look_stop, 2u * local + select(1u, 0u, status.x == FLAG_PREFIX));
    }
    workgroupBarrier();
    let stop = atomicLoad(&look_stop);
    if (local < LOOK_BACK && 2u * local <= stop) {
      atomicAdd(&look_sum, status.y);
    }
    workgroupBarrier();
    if (local == 0u) {
      look_step = vec2u(stop, atomicLoad(&look_sum));
      atomicStore(&look_stop, LOOK_NONE);
      atomicStore(&look_sum, 0u);
    }
    let step = workgroupUniformLoad(&look_step);
    prefix += step.y;
    if (step.x == LOOK_NONE) {
      next -= LOOK_BACK;  // a window of aggregates
    } else if ((step.x & 1u) == 0u) {
      break;  // reached a prefix
    } else {
      next -= step.x / 2u;  // the aggregates before an unpublished tile
      if (step.x == 1u) {
        // The nearest unaccounted tile published nothing: reduce it here instead of waiting.
        prefix += reduce_tile(next - 1u, local, lane, width);
        next -= 1u;
      }
    }
  }
  return prefix;
}
)";

// WGSL that loads the tile's vectors into raw[k] and items[k] and sets offsets[k] (the exclusive
// prefix of vector k's first element within the tile) and tile_total.
std::string load_and_scan_tile(const ChainedScanShape& shape) {
  const std::string load =
      "    let v = vector_index(tile, local, k);\n"
      "    if (v < vector_count()) {\n"
      "      raw[k] = x[v];\n"
      "      items[k] = scan_items(raw[k], v * 4u);\n"
      "    }\n";
  const std::string arrays =
      "  var raw = array<vec4u, VECTORS>();\n"
      "  var items = array<vec4u, VECTORS>();\n"
      "  var offsets = array<u32, VECTORS>();\n";
  if (!shape.subgroups) {
    // Blocked: an invocation's vectors are consecutive, so one workgroup scan of the
    // invocations' sums serves them all.
    return arrays +
           "  var sum = 0u;\n"
           "  for (var k = 0u; k < VECTORS; k++) {\n" +
           load +
           "    offsets[k] = sum;\n"
           "    sum += sum4(items[k]);\n"
           "  }\n"
           "  let scanned = tile_scan(sum, local, lane, width);\n"
           "  for (var k = 0u; k < VECTORS; k++) { offsets[k] += scanned.x; }\n"
           "  let tile_total = scanned.y;\n";
  }
  // Striped: row k of the tile is WG consecutive vectors, one per invocation, so every load and
  // store of a subgroup is contiguous. Each row is scanned within subgroups, then the subgroup
  // sums of all rows are combined after one barrier.
  return arrays +
         "  let group = local / width;\n"
         "  for (var k = 0u; k < VECTORS; k++) {\n" +
         load +
         "    let sum = sum4(items[k]);\n"
         "    let inclusive = subgroupInclusiveAdd(sum);\n"
         "    offsets[k] = inclusive - sum;\n"
         "    if (lane == width - 1u) { row_sums[k * ROW_GROUPS + group] = inclusive; }\n"
         "  }\n"
         "  workgroupBarrier();\n"
         "  var tile_total = 0u;\n"
         "  for (var k = 0u; k < VECTORS; k++) {\n"
         "    var before = 0u;\n"
         "    var row = 0u;\n"
         "    for (var g = 0u; g < max(1u, WG / width); g++) {\n"
         "      let sum = row_sums[k * ROW_GROUPS + g];\n"
         "      before += select(0u, sum, g < group);\n"
         "      row += sum;\n"
         "    }\n"
         "    offsets[k] += tile_total + before;\n"
         "    tile_total += row;\n"
         "  }\n";
}

std::string entry_points(const ChainedScanShape& shape) {
  const std::string name = shape.name;
  const std::string subgroup_builtins =
      shape.subgroups
          ? ",\n    @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) width: u32"
          : "";
  const std::string lanes = shape.subgroups ? "" : "  let lane = 0u;\n  let width = 1u;\n";
  const std::string vector_index = shape.subgroups ? "tile * TILE_VECTORS + k * WG + local"
                                                   : "tile * TILE_VECTORS + local * VECTORS + k";
  const std::string row_sums =
      shape.subgroups
          ? "const ROW_GROUPS: u32 = " + std::to_string(std::max(1u, shape.workgroup_size / 4)) +
                "u;  // subgroups of at least 4\n"
                "var<workgroup> row_sums: array<u32, VECTORS * ROW_GROUPS>;\n"
          : "";
  return "\n" + row_sums + "fn vector_index(tile: u32, local: u32, k: u32) -> u32 { return " +
         vector_index +
         "; }\n"
         "\n@compute @workgroup_size(WG)\n"
         "fn " +
         name +
         "_clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,\n"
         "    @builtin(local_invocation_index) local: u32) {\n"
         "  let i = linear_workgroup(group, groups) * WG + local;\n"
         "  if (i < 1u + 2u * params.tiles) { atomicStore(&chain[i], 0u); }\n"
         "}\n"
         "\n@compute @workgroup_size(WG)\n"
         "fn " +
         name + "_tiles(@builtin(local_invocation_index) local: u32" + subgroup_builtins + ") {\n" +
         lanes +
         "  if (local == 0u) {\n"
         "    claimed_tile = atomicAdd(&chain[0], 1u);\n"
         "    atomicStore(&look_stop, LOOK_NONE);\n"
         "    atomicStore(&look_sum, 0u);\n"
         "  }\n"
         "  let tile = workgroupUniformLoad(&claimed_tile);\n" +
         load_and_scan_tile(shape) +
         "  if (local == 0u) {\n"
         "    publish(tile, select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u), tile_total);\n"
         "  }\n"
         "  var prefix = 0u;\n"
         "  if (tile != 0u) { prefix = look_back(tile, local, lane, width); }\n"
         "  if (local == 0u) {\n"
         "    if (tile != 0u) { publish(tile, FLAG_PREFIX, prefix + tile_total); }\n"
         "    if (tile + 1u == params.tiles) { scan_total(prefix + tile_total); }\n"
         "  }\n"
         "  for (var k = 0u; k < VECTORS; k++) {\n"
         "    let v = vector_index(tile, local, k);\n"
         "    if (v < vector_count()) { scan_store(v, raw[k], items[k], prefix, offsets[k]); }\n"
         "  }\n"
         "  scan_finish_tile(prefix, tile_total, local);\n"
         "}\n";
}

}  // namespace

std::string chained_scan_wgsl(const ChainedScanShape& shape, const std::string& declarations) {
  return std::string(shape.subgroups ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl + "\n" +
         declarations + "\n" + constants(shape) + tile_scan(shape) + kChainWgsl +
         entry_points(shape);
}

Status check_chained_scan_resources(const ChainedScanShape& shape, std::uint64_t caller_bytes,
                                    const DeviceCapabilities& device) {
  const std::uint64_t wg = shape.workgroup_size;
  const std::uint64_t scan_bytes =
      shape.subgroups ? (std::max<std::uint64_t>(1, wg / 4) * (1 + shape.vectors)) * 4 : wg * 4;
  const std::uint64_t bytes = scan_bytes + 32 + caller_bytes;
  if (bytes <= device.max_workgroup_storage_size) return Ok{};
  return Error(ErrorKind::kInvalidInput,
               "Knobs workgroup_size (" + std::to_string(wg) + "), vectors_per_invocation (" +
                   std::to_string(shape.vectors) + ") and use_subgroups (" +
                   std::to_string(shape.subgroups ? 1 : 0) + ") need " + std::to_string(bytes) +
                   " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                   std::to_string(device.max_workgroup_storage_size) + ").");
}

std::uint64_t chained_scan_tiles(std::uint64_t n, const ChainedScanShape& shape) {
  const std::uint64_t tile_elements = std::uint64_t{shape.workgroup_size} * shape.vectors * 4;
  return std::max<std::uint64_t>(1, ceil_div(n, tile_elements));
}

std::vector<PassPlan> chained_scan_passes(const ChainedScanShape& shape, std::uint64_t tiles,
                                          const std::map<std::uint32_t, std::string>& buffers,
                                          const std::vector<std::uint32_t>& params) {
  return {{shape.name + "_clear", ceil_div(1 + 2 * tiles, shape.workgroup_size), buffers, params},
          {shape.name + "_tiles", tiles, buffers, params}};
}

}  // namespace wgsl_forge::kernels::support
