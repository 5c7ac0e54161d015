// The single-pass chained scan behind scan_exclusive_u32 and compact_f32.
//
// Each workgroup takes a tile (claimed from a counter, so that a tile's predecessors were all
// claimed by workgroups that already run, or its workgroup id), scans it in registers, publishes
// the tile's sum, and looks back over its predecessors' published sums until it meets one that
// published its inclusive prefix (decoupled look-back). The input is read once and the output
// written once: 8 bytes per element for a scan, against 12 for reduce-then-scan. The two paths,
// without and with subgroups, differ in the tile's layout, its scan and who looks back (the
// modules below say how); the chain they publish to is the same.
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
// The subgroup path keeps one sum per subgroup, sized for subgroups of at least this many lanes.
constexpr std::uint32_t kMinSubgroup = 4;
// look_back_window's default, the only value accepted where the knob has no effect (with
// subgroups, whose window is the first subgroup, and with three passes, which do not look back).
constexpr std::uint32_t kDefaultLookBackWindow = 32;

// The knobs of every kernel on the chained scan but its workgroup_size (chained_scan_knobs).
const KnobSpec kVectorsPerInvocation{
    "vectors_per_invocation", "vec4 per invocation", {1, 2, 4, 8, 16}, 1};
const KnobSpec kUseSubgroups{"use_subgroups", "scan within subgroups first", {0, 1}, 0};
const KnobSpec kLookBackWindow{"look_back_window",
                               "predecessors read at once by the look-back",
                               {kDefaultLookBackWindow, 256},
                               kDefaultLookBackWindow};
const KnobSpec kLookBackRows{"look_back_rows",
                             "predecessors per lane read at once by the subgroup's look-back",
                             {1, 2, 4},
                             1};
const KnobSpec kLookBackPublishes{
    "look_back_publishes",
    "1: the subgroup's look-back also publishes the prefixes of the tiles it passed",
    {0, 1},
    0};
const KnobSpec kBoundsPerTile{
    "bounds_per_tile",
    "1: tiles before the last store without a bounds test per vector (one uniform branch)",
    {0, 1},
    0};
const KnobSpec kPasses{
    "passes", "1: single pass, decoupled look-back; 3: reduce-then-scan", {1, 3}, 1};
const KnobSpec kClaimTiles{
    "claim_tiles",
    "single pass: 1 claims tiles from a counter, 0 takes the workgroup id (no atomic)",
    {1, 0},
    1};

// The entry points, written as such in the WGSL below and the same for every kernel built on the
// chained scan: the single pass clears the chain and scans the tiles; the three passes reduce the
// tiles, scan their sums (the spine) and apply the sums' prefixes to the tiles scanned again.
const char* const kClearEntry = "scan_clear";
const char* const kTilesEntry = "scan_tiles";
const char* const kReduceEntry = "scan_reduce";
const char* const kSpineEntry = "scan_spine";
const char* const kApplyEntry = "scan_apply";

// Only the first subgroup looks back, so its subgroup operations are not in workgroup-uniform
// control flow; they are uniform within that subgroup, which is what they need.
const char* const kSubgroupsEnableWgsl = R"(enable subgroups;
diagnostic(off, subgroup_uniformity);
)";

// The three passes are ordered by the queue, so their chain words are plain u32; the single
// pass's are read while other workgroups write them.
const char* const kPlainChainWordWgsl = R"(alias ChainWord = u32;
)";
const char* const kAtomicChainWordWgsl = R"(alias ChainWord = atomic<u32>;
)";

std::vector<WgslConstant> tile_constants(const ChainedScanShape& shape) {
  return {{"WG", shape.workgroup_size, ""}, {"VECTORS", shape.vectors, "vec4 per invocation"}};
}

const char* const kCommonWgsl = R"(const TILE_VECTORS: u32 = WG * VECTORS;

fn vector_count() -> u32 { return (params.n + 3u) / 4u; }

fn sum4(v: vec4u) -> u32 { return v.x + v.y + v.z + v.w; }

)";

const char* const kChainWgsl =
    R"(const FLAG_AGGREGATE: u32 = 0x10000u;  // the tile's own sum
const FLAG_PREFIX: u32 = 0x20000u;     // the sum of every tile up to this one
const FLAG_MASK: u32 = 0x30000u;
// chain[0]: the next tile to claim; chain[1 + 2 t] and chain[2 + 2 t]: the low and the high
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

// The walk stops at the nearest predecessor that is not an aggregate, coded as
// 2 * distance + (0 for a prefix, 1 for unpublished); LOOK_NONE: all were aggregates.
const LOOK_NONE: u32 = 0xffffffffu;
)";

// The tile's layout and scan. Both define tile_vector(tile, local, lane, lanes, k), the index of
// an invocation's k-th vector, and a body (scan_tile_wgsl) that scans the tile's vectors raw[k]
// (load_tile's) and sets offsets[k] (the exclusive prefix of vector k's first item among the
// invocation's group), before (the items of the groups before it) and tile_total. The items are
// computed again when stored rather than kept: registers are what limits resident tiles.
//
// Without subgroups the tile is blocked: an invocation's vectors are consecutive, so one
// workgroup scan of the invocations' sums serves them all (lane 0, lanes 1).
const char* const kBlockedTileWgsl =
    R"(fn tile_vector(tile: u32, local: u32, lane: u32, lanes: u32, k: u32) -> u32 {
  return tile * TILE_VECTORS + local * VECTORS + k;
}
)";

const char* const kBlockedScanWgsl = R"(  var offsets = array<u32, VECTORS>();
  var sum = 0u;
  for (var k = 0u; k < VECTORS; k++) {
    offsets[k] = sum;
    sum += sum4(scan_items(raw[k]));
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  let before = scanned.x;
  let tile_total = scanned.y;
)";

// With subgroups each subgroup owns a run of lanes * VECTORS consecutive vectors, row k of it
// being lanes consecutive vectors, one per lane (warp-striped): every load and store of a
// subgroup is contiguous, the rows are scanned by subgroup scans alone, and one barrier combines
// the subgroups' sums. Subgroups must be consecutive in local_invocation_index; an adapter where
// that does not hold fails certification, so such a schedule is never published.
const char* const kStripedTileWgsl = R"(var<workgroup> subgroup_sums: array<u32, MAX_SUBGROUPS>;
fn tile_vector(tile: u32, local: u32, lane: u32, lanes: u32, k: u32) -> u32 {
  return tile * TILE_VECTORS + (local - lane) * VECTORS + k * lanes + lane;
}
)";

// The most subgroups a workgroup has, sized for subgroups of kMinSubgroup lanes or more.
std::uint32_t max_subgroups(const ChainedScanShape& shape) {
  return std::max(1u, shape.workgroup_size / kMinSubgroup);
}

std::string striped_tile_wgsl(const ChainedScanShape& shape) {
  return constant_declarations({{"MAX_SUBGROUPS", max_subgroups(shape), "a sum per subgroup"}}) +
         kStripedTileWgsl;
}

const char* const kStripedScanWgsl = R"(  var offsets = array<u32, VECTORS>();
  var run_total = 0u;
  for (var k = 0u; k < VECTORS; k++) {
    let sum = sum4(scan_items(raw[k]));
    let inclusive = subgroupInclusiveAdd(sum);
    offsets[k] = run_total + inclusive - sum;
    run_total += subgroupShuffle(inclusive, lanes - 1u);
  }
  let group = local / lanes;
  let groups = WG / lanes;
  if (lane == 0u) { subgroup_sums[group] = run_total; }
  workgroupBarrier();
  var before = 0u;
  var tile_total = 0u;
  for (var base = 0u; base < groups; base += lanes) {
    let g = base + lane;
    let sum = select(0u, subgroup_sums[min(g, groups - 1u)], g < groups);  // no branch
    before += subgroupAdd(select(0u, sum, g < group));
    tile_total += subgroupAdd(sum);
  }
)";

std::string tile_wgsl(const ChainedScanShape& shape) {
  return shape.subgroups ? striped_tile_wgsl(shape) : std::string(kBlockedTileWgsl);
}

const char* scan_tile_wgsl(const ChainedScanShape& shape) {
  return shape.subgroups ? kStripedScanWgsl : kBlockedScanWgsl;
}

// Vector v of the input, its elements at or past n replaced by PAD, so that scan_items needs no
// bounds of its own (it runs twice per vector). The load is clamped and selected rather than
// guarded by a branch: subgroup scans follow, and the H200's driver scanned wrong sums after
// divergent control flow (compact_f32's keep() had an early return).
const char* const kLoadTileWgsl =
    R"(fn load_vector(v: u32) -> vec4u {
  let last = max(vector_count(), 1u) - 1u;  // x has at least one vector
  let inside = params.n - min(v * 4u, params.n);  // elements of vector v before n
  return select(vec4u(PAD), x[min(v, last)], vec4u(0u, 1u, 2u, 3u) < vec4u(inside));
}

// A tile's vectors, in the layout's order.
fn load_tile(tile: u32, local: u32, lane: u32, lanes: u32) -> array<vec4u, VECTORS> {
  var raw = array<vec4u, VECTORS>();
  for (var k = 0u; k < VECTORS; k++) { raw[k] = load_vector(tile_vector(tile, local, lane, lanes, k)); }
  return raw;
}
)";

// The entry points that scan tiles (scan_tiles, scan_reduce, scan_apply) open with one of these
// heads, whose signature the lanes module below completes.
const char* const kTilesHeadWgsl = R"(
@compute @workgroup_size(WG)
fn scan_tiles(@builtin(workgroup_id) workgroup: vec3u, @builtin(num_workgroups) workgroups: vec3u,
)";

const char* const kReduceHeadWgsl = R"(
@compute @workgroup_size(WG)
fn scan_reduce(@builtin(workgroup_id) workgroup: vec3u, @builtin(num_workgroups) workgroups: vec3u,
)";

const char* const kApplyHeadWgsl = R"(
@compute @workgroup_size(WG)
fn scan_apply(@builtin(workgroup_id) workgroup: vec3u, @builtin(num_workgroups) workgroups: vec3u,
)";

// The rest of a tile entry point's signature and the lanes it works in: one per invocation, or
// the subgroup's.
const char* const kInvocationLanesWgsl = R"(    @builtin(local_invocation_index) local: u32) {
  let lane = 0u;
  let lanes = 1u;
)";

const char* const kSubgroupLanesWgsl = R"(    @builtin(local_invocation_index) local: u32,
    @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) width: u32) {
  let lanes = min(width, WG);  // a wider subgroup is part empty
)";

const char* lanes_wgsl(const ChainedScanShape& shape) {
  return shape.subgroups ? kSubgroupLanesWgsl : kInvocationLanesWgsl;
}

const char* const kWorkgroupTileWgsl = R"(  let tile = linear_workgroup(workgroup, workgroups);
)";

const char* const kClaimedTileWgsl =
    R"(  if (local == 0u) { claimed_tile = atomicAdd(&chain[0], 1u); }
  let tile = workgroupUniformLoad(&claimed_tile);
)";

const char* const kLoadOwnTileWgsl =
    R"(  if (tile >= params.tiles) { return; }  // a grid rounded up past the tiles
  var raw = load_tile(tile, local, lane, lanes);
)";

// Each vector's items stored (scan_store) with the tile's prefix. A tile that stores before its
// look-back (shape stage_tile) knows only offsets within the tile, so its prefix is 0 there;
// scan_finish_tile, after the look-back, then moves the staged tile out.
const char* const kGuardedStoresWgsl = R"(  for (var k = 0u; k < VECTORS; k++) {
    let v = tile_vector(tile, local, lane, lanes, k);
    if (v < vector_count()) {
      scan_store(v, raw[k], scan_items(raw[k]), TILE_PREFIX, before + offsets[k]);
    }
  }
)";

// With bounds_per_tile the tiles before the last, whose vectors all lie inside x, store without
// a test per vector, behind one branch that is uniform in the workgroup: on the H200 a condition
// around each store cost compaction more than the stores (docs/performance.md, ninth session).
const char* const kTileBoundsStoresWgsl = R"(  if (tile + 1u < params.tiles) {
    for (var k = 0u; k < VECTORS; k++) {
      scan_store(tile_vector(tile, local, lane, lanes, k), raw[k], scan_items(raw[k]), TILE_PREFIX,
                 before + offsets[k]);
    }
  } else {
    for (var k = 0u; k < VECTORS; k++) {
      let v = tile_vector(tile, local, lane, lanes, k);
      if (v < vector_count()) {
        scan_store(v, raw[k], scan_items(raw[k]), TILE_PREFIX, before + offsets[k]);
      }
    }
  }
)";

std::string tile_stores_wgsl(const ChainedScanShape& shape, const std::string& tile_prefix) {
  std::string wgsl = shape.bounds_per_tile ? kTileBoundsStoresWgsl : kGuardedStoresWgsl;
  for (std::size_t at = wgsl.find("TILE_PREFIX"); at != std::string::npos;
       at = wgsl.find("TILE_PREFIX", at)) {
    wgsl.replace(at, std::string_view("TILE_PREFIX").size(), tile_prefix);
  }
  return wgsl;
}

// Ends an entry point that scans tiles, once `prefix` (the sum of the tiles before) is known.
const char* const kFinishTileWgsl = R"(  scan_finish_tile(prefix, tile_total, local);
}
)";

std::string stage_tile_wgsl(const ChainedScanShape& shape) {
  return shape.stage_tile ? tile_stores_wgsl(shape, "0u") : "";
}

std::string store_tile_wgsl(const ChainedScanShape& shape) {
  return (shape.stage_tile ? "" : tile_stores_wgsl(shape, "prefix")) + kFinishTileWgsl;
}

// Without subgroups the whole workgroup looks back, one predecessor per invocation of the
// window, combining the window with workgroup atomics.
const char* const kWorkgroupLookBackWgsl = R"(
// The sum of a tile's items, from the input.
fn reduce_tile(tile: u32, local: u32) -> u32 {
  var sum = 0u;
  for (var k = 0u; k < VECTORS; k++) {
    let v = tile_vector(tile, local, 0u, 1u, k);
    sum += sum4(scan_items(load_vector(v)));
  }
  return workgroup_exclusive_scan(sum, local).y;
}

// A predecessor's status, polled while it is unpublished (flag 0 after SPINS polls).
fn polled_status(tile: u32) -> vec2u {
  var status = tile_status(tile);
  for (var spin = 0u; spin < SPINS && status.x == 0u; spin++) { status = tile_status(tile); }
  return status;
}

var<workgroup> look_stop: atomic<u32>;
var<workgroup> look_sum: atomic<u32>;  // the values up to the stop
var<workgroup> look_step: vec2u;

// The sum of every tile before `tile` (> 0). Invocation l reads the l-th predecessor not yet
// accounted for; the window's values are added up to the nearest published prefix (done) or
// unpublished tile (read again, then reduced here).
fn look_back(tile: u32, local: u32) -> u32 {
  var prefix = 0u;
  var next = tile;  // tiles before `next` are not accounted for yet
  loop {
    var status = vec2u(FLAG_PREFIX, 0u);  // before tile 0: nothing
    if (local < LOOK_BACK && local < next) { status = polled_status(next - 1u - local); }
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
        prefix += reduce_tile(next - 1u, local);
        next -= 1u;
      }
    }
  }
  return prefix;
}
)";

std::string workgroup_look_back_wgsl(const ChainedScanShape& shape) {
  return constant_declarations(
             {{"LOOK_BACK", std::min(shape.look_back_window, shape.workgroup_size),
               "predecessors read at once"}}) +
         kWorkgroupLookBackWgsl;
}

// With subgroups the first subgroup alone looks back, LOOK_ROWS predecessors per lane at once
// (row r of lane l: the (r lanes + l)-th predecessor not yet accounted for), with no barrier in
// the walk. More rows reach a published prefix in fewer round trips to memory when the resident
// tiles' prefixes lag many tiles behind, at the cost of more polls.
const char* const kSubgroupLookBackWgsl = R"(var<workgroup> shared_prefix: u32;

// The sum of a predecessor's items, from the input, by one subgroup. A predecessor is a whole
// tile, a multiple of the subgroup's lanes, so every lane takes the same steps and the subgroup
// is converged at subgroupAdd.
fn reduce_tile(tile: u32, lane: u32, lanes: u32) -> u32 {
  var sum = 0u;
  for (var v = tile * TILE_VECTORS + lane; v < (tile + 1u) * TILE_VECTORS; v += lanes) {
    sum += sum4(scan_items(load_vector(v)));
  }
  return subgroupAdd(sum);
}

// The status of the predecessor `distance` tiles before next - 1 (none before tile 0: a prefix
// of 0).
fn status_at(next: u32, distance: u32) -> vec2u {
  let inside = distance < next;
  return select(vec2u(FLAG_PREFIX, 0u), tile_status(select(0u, next - 1u - distance, inside)),
                inside);
}
)";

// polled_statuses: each lane's LOOK_ROWS predecessors, polled until every lane's have published or
// SPINS polls passed. Every lane takes the same steps: subgroup operations follow, and the
// H200's driver computed wrong ones after divergent control flow.
const char* const kPollHeadWgsl =
    R"(fn polled_statuses(next: u32, lane: u32, lanes: u32) -> array<vec2u, LOOK_ROWS> {
  var statuses = array<vec2u, LOOK_ROWS>();
  var published = true;
)";
const char* const kPollFirstRowWgsl = R"(    statuses[r] = status_at(next, r * lanes + lane);
    published = published & (statuses[r].x != 0u);
)";
const char* const kPollSpinWgsl = R"(  for (var spin = 0u; spin < SPINS; spin++) {
    if (subgroupAll(published)) { break; }
    published = true;
)";
const char* const kPollRowAgainWgsl =
    R"(    statuses[r] = select(statuses[r], status_at(next, r * lanes + lane), statuses[r].x == 0u);
    published = published & (statuses[r].x != 0u);
)";
const char* const kPollTailWgsl = R"(  }
  return statuses;
}
)";

// look_back: the sum of every tile before `tile` (> 0), by one subgroup; the statuses' values are
// added up to the nearest published prefix (done) or unpublished tile (read again, then reduced
// here). A stop is coded as 2 * distance + (0 for a prefix, 1 for unpublished).
const char* const kLookBackHeadWgsl = R"(
fn look_back(tile: u32, lane: u32, lanes: u32) -> u32 {
  var prefix = 0u;
  var next = tile;  // tiles before `next` are not accounted for yet
  loop {
    let statuses = polled_statuses(next, lane, lanes);
    var own_stop = LOOK_NONE;
)";
const char* const kLookBackRowStopWgsl = R"(    let status = statuses[r];
    let stop_here = 2u * (r * lanes + lane) + select(1u, 0u, status.x == FLAG_PREFIX);
    own_stop = min(own_stop, select(LOOK_NONE, stop_here, status.x != FLAG_AGGREGATE));
)";
const char* const kLookBackMidWgsl = R"(    let stop = subgroupMin(own_stop);
    var own_sum = 0u;
)";
const char* const kLookBackRowSumWgsl =
    R"(    own_sum += select(0u, statuses[r].y, 2u * (r * lanes + lane) <= stop);
)";
const char* const kLookBackStepWgsl = R"(    prefix += subgroupAdd(own_sum);
    if (stop == LOOK_NONE) {
      next -= lanes * LOOK_ROWS;  // rows of aggregates
    } else if ((stop & 1u) == 0u) {
)";

// look_back_publishes: the step that reached a prefix also publishes the inclusive prefix of
// every aggregate it passed (the value at the stop plus the aggregates from that tile to the
// stop), so that the look-backs after it stop there instead of reading back to the same prefix.
// The tile's own workgroup publishes the same value (the words carry only that value and the
// prefix flag, so the two writers cannot mix), and only tiles read as aggregates are helped, so
// their own aggregate stores came first. The subgroup operations come before the stores' branch.
const char* const kHelpHeadWgsl = R"(      let window_sum = subgroupAdd(own_sum);
      var passed = 0u;  // the values before row r
      var helped = array<u32, LOOK_ROWS>();
)";
const char* const kHelpRowValueWgsl =
    R"(      let value = select(0u, statuses[r].y, 2u * (r * lanes + lane) <= stop);
      helped[r] = window_sum - passed - subgroupExclusiveAdd(value);
      passed += subgroupAdd(value);
)";
const char* const kHelpRowStoreWgsl = R"(      let distance = r * lanes + lane;
      if (2u * distance < stop) { publish(next - 1u - distance, FLAG_PREFIX, helped[r]); }
)";

const char* const kLookBackTailWgsl = R"(      break;  // reached a prefix
    } else {
      next -= stop / 2u;  // the aggregates before an unpublished tile
      if (stop == 1u) {
        // The nearest unaccounted tile published nothing: reduce it here instead of waiting.
        prefix += reduce_tile(next - 1u, lane, lanes);
        next -= 1u;
      }
    }
  }
  return prefix;
}
)";

// The rows' loops are unrolled, so that the statuses' indices are constants (no bounds clamps).
std::string subgroup_look_back_wgsl(const ChainedScanShape& shape) {
  const std::uint32_t rows = shape.look_back_rows;
  return constant_declarations({{"LOOK_ROWS", rows, "predecessors per lane read at once"}}) +
         kSubgroupLookBackWgsl + kPollHeadWgsl + unrolled_loop("r", rows, kPollFirstRowWgsl) +
         kPollSpinWgsl + unrolled_loop("r", rows, kPollRowAgainWgsl) + kPollTailWgsl +
         kLookBackHeadWgsl + unrolled_loop("r", rows, kLookBackRowStopWgsl) + kLookBackMidWgsl +
         unrolled_loop("r", rows, kLookBackRowSumWgsl) + kLookBackStepWgsl +
         (shape.look_back_publishes ? kHelpHeadWgsl + unrolled_loop("r", rows, kHelpRowValueWgsl) +
                                          unrolled_loop("r", rows, kHelpRowStoreWgsl)
                                    : "") +
         kLookBackTailWgsl;
}

std::string look_back_wgsl(const ChainedScanShape& shape) {
  return shape.subgroups ? subgroup_look_back_wgsl(shape) : workgroup_look_back_wgsl(shape);
}

// The pass that zeroes the chain before the single pass.
const char* const kClearEntryWgsl = R"(
@compute @workgroup_size(WG)
fn scan_clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
    @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < 1u + 2u * params.tiles) { atomicStore(&chain[i], 0u); }
}
)";

const char* const kClaimedTileDeclarationWgsl = R"(var<workgroup> claimed_tile: u32;
)";

// passes = 1: with claim_tiles the tile is claimed from a counter, so that a tile's predecessors
// were all claimed by workgroups that already run; otherwise it is the workgroup's id, which
// saves the claim's round trip to memory and relies on workgroups starting in order (as GPUs
// start them); a predecessor that has not started is reduced by the fallback.
const char* take_tile_wgsl(const ChainedScanShape& shape) {
  return shape.claim_tiles ? kClaimedTileWgsl : kWorkgroupTileWgsl;
}

// The workgroup's look-back keeps its state in workgroup memory, ready before the scan's
// barriers.
const char* const kResetWorkgroupLookBackWgsl = R"(  if (local == 0u) {
    atomicStore(&look_stop, LOOK_NONE);
    atomicStore(&look_sum, 0u);
  }
)";

const char* reset_look_back_wgsl(const ChainedScanShape& shape) {
  return shape.subgroups ? "" : kResetWorkgroupLookBackWgsl;
}

const char* const kPublishAggregateWgsl = R"(  if (local == 0u) {
    publish(tile, select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u), tile_total);
  }
)";

// After publishing its sum, a tile takes its prefix by look-back and publishes that too (the last
// tile also the scan's total); every invocation ends with the prefix.
const char* const kSubgroupLookBackAndPublishWgsl = R"(  if (local < lanes) {
    var prefix = 0u;
    if (tile != 0u) { prefix = look_back(tile, lane, lanes); }
    if (local == 0u) {
      if (tile != 0u) { publish(tile, FLAG_PREFIX, prefix + tile_total); }
      if (tile + 1u == params.tiles) { scan_total(prefix + tile_total); }
      shared_prefix = prefix;
    }
  }
  let prefix = workgroupUniformLoad(&shared_prefix);
)";

const char* const kWorkgroupLookBackAndPublishWgsl = R"(  var prefix = 0u;
  if (tile != 0u) { prefix = look_back(tile, local); }
  if (local == 0u) {
    if (tile != 0u) { publish(tile, FLAG_PREFIX, prefix + tile_total); }
    if (tile + 1u == params.tiles) { scan_total(prefix + tile_total); }
  }
)";

const char* look_back_and_publish_wgsl(const ChainedScanShape& shape) {
  return shape.subgroups ? kSubgroupLookBackAndPublishWgsl : kWorkgroupLookBackAndPublishWgsl;
}

// passes = 1: clear the chain, then one pass in which each workgroup takes a tile, publishes its
// sum and takes its prefix by look-back.
std::string single_pass_wgsl(const ChainedScanShape& shape) {
  return constant_declarations({{"SPINS", kSpins, ""}}) + kChainWgsl + look_back_wgsl(shape) +
         (shape.claim_tiles ? kClaimedTileDeclarationWgsl : "") + kClearEntryWgsl + kTilesHeadWgsl +
         lanes_wgsl(shape) + take_tile_wgsl(shape) + reset_look_back_wgsl(shape) +
         kLoadOwnTileWgsl + scan_tile_wgsl(shape) + stage_tile_wgsl(shape) + kPublishAggregateWgsl +
         look_back_and_publish_wgsl(shape) + store_tile_wgsl(shape);
}

const char* const kStoreTileSumWgsl = R"(  if (local == 0u) { chain[1u + tile] = tile_total; }
}
)";

// One workgroup scans the tiles' sums in place.
const char* const kSpineEntryWgsl = R"(
// One workgroup; invocation t owns a run of consecutive tiles.
@compute @workgroup_size(WG)
fn scan_spine(@builtin(local_invocation_index) local: u32) {
  let per = (params.tiles + WG - 1u) / WG;
  let begin = min(local * per, params.tiles);
  let end = min(begin + per, params.tiles);
  var sum = 0u;
  for (var t = begin; t < end; t++) { sum += chain[1u + t]; }
  let scanned = workgroup_exclusive_scan(sum, local);
  var running = scanned.x;
  for (var t = begin; t < end; t++) {
    let tile_sum = chain[1u + t];
    chain[1u + t] = running;
    running += tile_sum;
  }
  if (local == 0u) { scan_total(scanned.y); }
}
)";

const char* const kLoadTilePrefixWgsl = R"(  let prefix = chain[1u + tile];
)";

// passes = 3 (reduce-then-scan): each tile's sum to chain[1 + tile]; one workgroup scans the
// sums in place; each tile scans again and stores. The input is read twice, but no workgroup
// waits for another, so every resident workgroup keeps loads in flight.
std::string three_pass_wgsl(const ChainedScanShape& shape) {
  return std::string(kReduceHeadWgsl) + lanes_wgsl(shape) + kWorkgroupTileWgsl + kLoadOwnTileWgsl +
         scan_tile_wgsl(shape) + kStoreTileSumWgsl + kSpineEntryWgsl + kApplyHeadWgsl +
         lanes_wgsl(shape) + kWorkgroupTileWgsl + kLoadOwnTileWgsl + scan_tile_wgsl(shape) +
         stage_tile_wgsl(shape) + kLoadTilePrefixWgsl + store_tile_wgsl(shape);
}

}  // namespace

std::string chained_scan_wgsl(const ChainedScanShape& shape, const std::string& declarations) {
  // The workgroup scan serves the blocked tile and the three-pass spine.
  const bool workgroup_scan = !shape.subgroups || shape.passes == 3;
  return std::string(shape.subgroups ? kSubgroupsEnableWgsl : "") + kLinearWorkgroupWgsl + "\n" +
         (shape.passes == 3 ? kPlainChainWordWgsl : kAtomicChainWordWgsl) + declarations + "\n" +
         constant_declarations(tile_constants(shape)) + kCommonWgsl +
         (workgroup_scan ? std::string(kWorkgroupScanWgsl) + "\n" : "") + tile_wgsl(shape) +
         kLoadTileWgsl + (shape.passes == 3 ? three_pass_wgsl(shape) : single_pass_wgsl(shape));
}

Status check_chained_scan_resources(const ChainedScanShape& shape, std::uint64_t caller_bytes,
                                    const DeviceCapabilities& device) {
  if (shape.look_back_window != kDefaultLookBackWindow && (shape.passes == 3 || shape.subgroups)) {
    const std::string needs =
        shape.passes == 3 ? "passes (1): the three-pass scan does not look back"
                          : "use_subgroups (0): with subgroups the first subgroup looks back, one "
                            "predecessor per lane";
    return Error(ErrorKind::kInvalidInput, "Knob look_back_window (" +
                                               std::to_string(shape.look_back_window) + ") needs " +
                                               needs + ", and the knob keeps its default (" +
                                               std::to_string(kDefaultLookBackWindow) + ").");
  }
  // The subgroup's look-back knobs, each at its own value and default.
  const std::pair<const KnobSpec*, std::uint32_t> subgroup_look_back[] = {
      {&kLookBackRows, shape.look_back_rows},
      {&kLookBackPublishes, shape.look_back_publishes ? 1u : 0u}};
  for (const auto& [spec, value] : subgroup_look_back) {
    if (value == spec->default_value || (shape.passes == 1 && shape.subgroups)) continue;
    const std::string needs =
        shape.passes == 3 ? "passes (1): the three-pass scan does not look back"
                          : "use_subgroups (1): without subgroups the workgroup looks back, "
                            "look_back_window predecessors at once";
    return Error(ErrorKind::kInvalidInput, "Knob " + spec->name + " (" + std::to_string(value) +
                                               ") needs " + needs +
                                               ", and the knob keeps its default (" +
                                               std::to_string(spec->default_value) + ").");
  }
  if (!shape.claim_tiles && shape.passes == 3) {
    return Error(ErrorKind::kInvalidInput,
                 "Knob claim_tiles (0) needs passes (1): the three-pass scan claims no tiles, and "
                 "the knob keeps its default (1).");
  }
  if (shape.subgroups && device.subgroup_min_size != 0 && device.subgroup_min_size < kMinSubgroup) {
    return Error(ErrorKind::kInvalidInput, "Knob use_subgroups (1) needs subgroups of at least " +
                                               std::to_string(kMinSubgroup) +
                                               " invocations; the adapter's smallest has " +
                                               std::to_string(device.subgroup_min_size) + ".");
  }
  const std::uint64_t wg = shape.workgroup_size;
  // The tile's scan: a sum per subgroup, or the workgroup scan's scratch. The single pass adds
  // the claimed tile and the look-back's state; the three-pass spine needs the workgroup scan.
  const std::uint64_t tile_scan =
      shape.subgroups ? std::uint64_t{max_subgroups(shape)} * 4 : wg * 4;
  const std::uint64_t look_back = shape.passes == 3 ? 0 : (shape.subgroups ? 8 : 24);
  const std::uint64_t bytes = std::max(tile_scan + look_back + caller_bytes, wg * 4);
  if (bytes <= device.max_workgroup_storage_size) return Ok{};
  return Error(ErrorKind::kInvalidInput,
               "Knobs workgroup_size (" + std::to_string(wg) + "), vectors_per_invocation (" +
                   std::to_string(shape.vectors) + "), use_subgroups (" +
                   std::to_string(shape.subgroups ? 1 : 0) + ") and passes (" +
                   std::to_string(shape.passes) + ") need " + std::to_string(bytes) +
                   " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                   std::to_string(device.max_workgroup_storage_size) + ").");
}

std::uint64_t chained_scan_tiles(std::uint64_t n, const ChainedScanShape& shape) {
  const std::uint64_t tile_elements = std::uint64_t{shape.workgroup_size} * shape.vectors * 4;
  return std::max<std::uint64_t>(1, ceil_div(n, tile_elements));
}

std::vector<KnobSpec> chained_scan_knobs(const KnobSpec& workgroup_size) {
  return {workgroup_size, kVectorsPerInvocation, kUseSubgroups,  kLookBackWindow,   kPasses,
          kClaimTiles,    kLookBackRows,         kBoundsPerTile, kLookBackPublishes};
}

ChainedScanShape chained_scan_shape(const Schedule& schedule, const KnobSpec& workgroup_size) {
  return {knob(schedule, workgroup_size),
          knob(schedule, kVectorsPerInvocation),
          knob(schedule, kUseSubgroups) == 1,
          knob(schedule, kLookBackWindow),
          knob(schedule, kPasses),
          knob(schedule, kClaimTiles) == 1,
          false,
          knob(schedule, kLookBackRows),
          knob(schedule, kBoundsPerTile) == 1,
          knob(schedule, kLookBackPublishes) == 1};
}

std::vector<CaseSpec> chained_scan_level_cases(const ChainedScanShape& shape,
                                               const std::string& profile,
                                               const DeviceCapabilities& device) {
  const std::uint64_t tile_elements = std::uint64_t{shape.workgroup_size} * shape.vectors * 4;
  const bool spine = shape.passes == 3;
  const std::uint64_t window =
      spine ? shape.workgroup_size
            : (shape.subgroups ? 32 * shape.look_back_rows
                               : std::min(shape.look_back_window, shape.workgroup_size));
  // One element past window + 1 tiles, whose last tile's predecessors fill more than one window;
  // or past window tiles, of which the spine's first invocation then takes two.
  const std::uint64_t n = window * tile_elements + 1 + (spine ? 0 : tile_elements);
  if (vec4_buffer_bytes(n) > device.max_storage_binding_size) return {};
  return {{std::string(spine ? "spine" : "look-back") + " n=" + std::to_string(n) + " " + profile,
           elements_problem(n), profile}};
}

std::vector<PassPlan> chained_scan_passes(const ChainedScanShape& shape, std::uint64_t tiles,
                                          const std::map<std::uint32_t, std::string>& buffers,
                                          const std::vector<std::uint32_t>& params) {
  if (shape.passes == 3) {
    return {{kReduceEntry, tiles, buffers, params},
            {kSpineEntry, 1, buffers, params},
            {kApplyEntry, tiles, buffers, params}};
  }
  return {{kClearEntry, ceil_div(1 + 2 * tiles, shape.workgroup_size), buffers, params},
          {kTilesEntry, tiles, buffers, params}};
}

std::vector<std::string> chained_scan_entry_points(const ChainedScanShape& shape) {
  if (shape.passes == 3) return {kReduceEntry, kSpineEntry, kApplyEntry};
  return {kClearEntry, kTilesEntry};
}

}  // namespace wgsl_forge::kernels::support
