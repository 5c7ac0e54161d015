// gemm_f32: C = A x B, row-major, A is m x k, B is k x n, C is m x n; any m, n, k.
//
// Each workgroup computes a tile_m x tile_n block of C, walking k in steps of tile_k through
// tiles of A and B staged in workgroup memory as vec4: A transposed ([depth][row]) and B as is
// ([depth][column]), so that the inner loop reads each invocation's rows and columns as whole
// vec4s (thread_m = 8: its 8 rows as two vec4). Each invocation computes thread_m x thread_n
// outputs in registers: thread_m / 4 groups of 4 rows and thread_n / 4 groups of 4 columns, the
// groups spread tile_m / (thread_m / 4) rows (and columns) apart, so that neighbouring
// invocations read neighbouring vec4s (no bank conflicts) and the rows of one subgroup are
// broadcasts. The next tiles' global loads are issued into registers before the current tiles
// are multiplied, which hides their latency behind the arithmetic (register double buffering).
// The inner product is unrolled here, in the generator: the accumulators must be registers,
// whatever the driver's unrolling. The tiles are arrays of depth steps, so that the bounds clamp
// Dawn puts on an index into a step (the invocation's row or column) is the same for every step,
// computed once, rather than one clamp per read of a flat array (revision 3: 28.1 -> 29.8
// TFLOP/s on the H200; unrolling the depth loop too reached 30.0 but made lavapipe compile the
// kernel 2-3 times slower, so that is a knob, unroll_depth).
// Revision 4 adds, as knobs, so that revision 3 stays the schedule stages=1, vector_loads=0,
// unroll_depth=0, tile_rows_per_group=1: two stages of workgroup tiles (the next tiles are
// staged into the other stage after the multiplication: one barrier per k-tile instead of two);
// a second entry point, gemm_vec4, that the plan takes where k and n are multiples of 4: A and B
// loaded and C stored as vec4 through vec4 views of the same buffers, and no bounds tests on the
// loads of whole k-tiles of a workgroup inside C; tiles taken column by column within groups of
// tile rows (tile_rows_per_group), for the L2's sake; and 256-column tiles (thread 8 x 8 at
// 128 x 256: 512 invocations, 64 accumulators each). Revision 5 is revision 4 with its vec4
// views declared from the binding table (the same code under another declaration comment).
// thread_n = 16 (four groups of 4 columns, 128 accumulators at thread_m = 8) reads six vec4s of
// workgroup memory per 128 multiply-adds instead of four per 64: at 128 x 256 x 16 with two
// stages (256 invocations) it ran 3.89 ms against 3.94 for thread 8 x 8 on an H100 (session 40,
// 4096^3, twice each); the same generator, so the same revision.
// Edges are handled by loading zeros past m, n or k and not storing past m or n. Knobs: tile_m,
// tile_n, tile_k, thread_m, thread_n, stages, vector_loads, unroll_depth, tile_rows_per_group.
// Workgroup size is (tile_m / thread_m) (tile_n / thread_n); workgroup memory is
// 4 (tile_m + tile_n) tile_k stages bytes (the H200 offers 48 KiB through Dawn, which the device
// requests whole).
//
// Oracle: the product in double. Tolerance (accumulation in any order, subnormals may flush):
// |c - exact| <= k 2^-23 sum_l |a_il b_lj| + k FLT_MIN. FLOPs: 2 m n k.

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

const KnobSpec kTileM{"tile_m", "rows of C per workgroup", {32, 64, 128}, 64};
const KnobSpec kTileN{"tile_n", "columns of C per workgroup", {32, 64, 128, 256}, 64};
const KnobSpec kTileK{"tile_k", "depth of the staged tiles", {8, 16, 32}, 16};
const KnobSpec kThreadM{"thread_m", "rows of C per invocation (groups of 4)", {4, 8}, 4};
const KnobSpec kThreadN{"thread_n", "columns of C per invocation (groups of 4)", {4, 8, 16}, 4};
const KnobSpec kStages{
    "stages", "workgroup tiles of A and B: 1 (two barriers per k-tile) or 2 (one)", {1, 2}, 1};
const KnobSpec kVectorLoads{"vector_loads",
                            "1: where k and n are multiples of 4, A and B loaded and C stored as "
                            "vec4, whole k-tiles inside C without bounds tests",
                            {0, 1},
                            0};
const KnobSpec kTileRowsPerGroup{
    "tile_rows_per_group",
    "workgroups take C's tiles in groups of this many tile rows, column by column (1: row by "
    "row), so that the workgroups running at once share A's rows and B's columns in L2",
    {1, 8},
    1};
const KnobSpec kUnrollDepth{"unroll_depth",
                            "1: the loop over a tile's depth unrolled into constant steps (up to "
                            "512 multiply-adds: tile_k x thread_m x thread_n)",
                            {0, 1},
                            0};

class GemmF32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "gemm_f32"; }
  std::uint32_t revision() const override { return 5; }
  std::string_view summary() const override { return "C = A x B, row-major f32, any m, n, k"; }

  std::vector<KnobSpec> knobs() const override {
    return {kTileM,  kTileN,       kTileK,       kThreadM,         kThreadN,
            kStages, kVectorLoads, kUnrollDepth, kTileRowsPerGroup};
  }

  // Elements of A, B and C are indexed row * columns + column in u32.
  Status check_problem(const Problem& problem) const override {
    constexpr std::uint64_t kLargest = std::numeric_limits<std::uint32_t>::max();
    const struct {
      const char* name;
      std::uint64_t elements;
    } matrices[] = {{"A (m * k)", std::uint64_t{problem.m} * problem.k},
                    {"B (k * n)", std::uint64_t{problem.k} * problem.n},
                    {"C (m * n)", std::uint64_t{problem.m} * problem.n}};
    for (const auto& matrix : matrices) {
      if (matrix.elements > kLargest) {
        return Error(ErrorKind::kInvalidInput, "Matrix " + std::string(matrix.name) +
                                                   " of gemm_f32 has " +
                                                   std::to_string(matrix.elements) +
                                                   " elements, more than its u32 indices "
                                                   "reach (" +
                                                   std::to_string(kLargest) + ").");
      }
    }
    return Ok{};
  }

  Status check_resources(const Schedule& schedule,
                         const DeviceCapabilities& device) const override {
    const std::uint32_t tile_m = knob(schedule, kTileM);
    const std::uint32_t tile_n = knob(schedule, kTileN);
    const std::uint32_t tile_k = knob(schedule, kTileK);
    const std::uint32_t thread_m = knob(schedule, kThreadM);
    const std::uint32_t thread_n = knob(schedule, kThreadN);
    const std::uint32_t invocations = (tile_m / thread_m) * (tile_n / thread_n);
    if (invocations > device.max_invocations_per_workgroup || invocations < 32) {
      return Error(
          ErrorKind::kInvalidInput,
          "Knobs tile_m/thread_m x tile_n/thread_n give " + std::to_string(invocations) +
              " invocations per workgroup, outside 32..maxComputeInvocationsPerWorkgroup (" +
              std::to_string(device.max_invocations_per_workgroup) + ").");
    }
    // Each invocation stages tile_k thread_m thread_n / tile_n values of A (and / tile_m of B),
    // a quarter as many vectors with vector_loads: at least one.
    const std::uint32_t per_vector = knob(schedule, kVectorLoads) == 1 ? 4 : 1;
    if (tile_k * thread_m * thread_n < per_vector * std::max(tile_m, tile_n)) {
      return Error(ErrorKind::kInvalidInput,
                   "Knobs tile_k x thread_m x thread_n (" +
                       std::to_string(tile_k * thread_m * thread_n) + ") are fewer than " +
                       (per_vector == 4 ? "4 x " : "") + "the larger of tile_m and tile_n (" +
                       std::to_string(std::max(tile_m, tile_n)) +
                       "): some invocations would stage no " +
                       (per_vector == 4 ? "vector" : "value") + " of A or B.");
    }
    // Unrolled, the depth loop is tile_k x thread_m x thread_n multiply-adds of straight code:
    // 512 took lavapipe 4-5 s of CPU to compile with the rest of the module, 1024 (8 x 8 x 16)
    // 21 s, which every tune on lavapipe that drew it would pay.
    constexpr std::uint32_t kLargestUnrolledDepth = 512;
    if (knob(schedule, kUnrollDepth) == 1 && tile_k * thread_m * thread_n > kLargestUnrolledDepth) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob unroll_depth (1) unrolls tile_k x thread_m x thread_n (" +
                       std::to_string(tile_k * thread_m * thread_n) +
                       ") multiply-adds per k-tile, more than " +
                       std::to_string(kLargestUnrolledDepth) + ".");
    }
    const std::uint64_t bytes = 4ull * (tile_m + tile_n) * tile_k * knob(schedule, kStages);
    if (bytes > device.max_workgroup_storage_size) {
      return Error(ErrorKind::kInvalidInput,
                   "Knobs tile_m, tile_n, tile_k and stages need " + std::to_string(bytes) +
                       " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                       std::to_string(device.max_workgroup_storage_size) + ").");
    }
    return Ok{};
  }

  // With vector_loads, gemm_vec4 moves A, B and C as vec4 through views a4, b4 and c4.
  std::vector<WgslBinding> wgsl_bindings(const Schedule& schedule) const override {
    std::vector<WgslBinding> table = {params_binding("Params"), storage_read(1, "a", "f32"),
                                      storage_read(2, "b", "f32"),
                                      storage_read_write(3, "c", "f32")};
    if (knob(schedule, kVectorLoads) == 1) {
      for (std::size_t i = 1; i < table.size(); ++i) {
        table[i] = with_view(table[i], table[i].name + "4", "vec4<" + table[i].type + ">");
      }
    }
    return table;
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {
        {"a", ElementType::kF32, BufferRole::kInput, "m * k elements (row-major), at least 1"},
        {"b", ElementType::kF32, BufferRole::kInput, "k * n elements (row-major), at least 1"},
        {"c", ElementType::kF32, BufferRole::kOutput, "m * n elements (row-major), at least 1"}};
  }

  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    if (knob(schedule, kVectorLoads) == 1) return {"gemm", "gemm_vec4"};
    return {"gemm"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override;

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t tiles_n = ceil_div(problem.n, knob(schedule, kTileN));
    const std::uint64_t tiles_m = ceil_div(problem.m, knob(schedule, kTileM));
    const std::map<std::uint32_t, std::string> buffers = {{1, "a"}, {2, "b"}, {3, "c"}};
    DispatchPlan plan;
    plan.buffers = make_buffer_plans(
        buffer_specs(), {{"a", std::max<std::uint64_t>(4, 4ull * problem.m * problem.k)},
                         {"b", std::max<std::uint64_t>(4, 4ull * problem.k * problem.n)},
                         {"c", std::max<std::uint64_t>(4, 4ull * problem.m * problem.n)}});
    // gemm_vec4 needs rows of A and B that start on whole vectors, and bindings of at least one.
    const bool vectors = knob(schedule, kVectorLoads) == 1 && problem.k % 4 == 0 &&
                         problem.n % 4 == 0 && problem.m > 0 && problem.n > 0 && problem.k > 0;
    plan.passes = {{vectors ? "gemm_vec4" : "gemm",
                    tiles_m * tiles_n,
                    buffers,
                    {problem.m, problem.n, problem.k, static_cast<std::uint32_t>(tiles_n)}}};
    return plan;
  }

  std::string tolerance() const override {
    return "|c - exact| <= k 2^-23 sum_l |a_il b_lj| + k FLT_MIN (any accumulation order, "
           "subnormals may flush)";
  }

  std::vector<CaseSpec> certification_cases() const override {
    const std::uint32_t shapes[][3] = {{1, 1, 1},      {17, 33, 9}, {64, 64, 64}, {65, 63, 129},
                                       {128, 96, 200}, {1, 300, 7}, {300, 1, 7},  {5, 7, 0}};
    std::vector<CaseSpec> cases;
    for (const auto& shape : shapes) {
      Problem problem;
      problem.m = shape[0];
      problem.n = shape[1];
      problem.k = shape[2];
      cases.push_back({"m=" + std::to_string(shape[0]) + " n=" + std::to_string(shape[1]) +
                           " k=" + std::to_string(shape[2]),
                       problem, shape[0] == 64 ? "uniform" : "small"});
    }
    return cases;
  }

  // The fixed shapes pass every schedule's tile in m (300), n (300) and k (129, 200), but not in
  // m and n at once for 128-wide tiles: one element past two tiles of m, one tile of n and two
  // of k gives 3 x 2 workgroups (unequal, so that rows and columns of the grid cannot be
  // swapped) and three k-tiles, the last partial. With vector_loads, the same shape again with
  // n and k one vector (4) past them, for gemm_vec4: two workgroups inside C, whose first two
  // k-tiles take the loads without bounds tests, the others at its edges.
  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities&) const override {
    std::vector<CaseSpec> cases;
    for (std::uint32_t past : {1u, 4u}) {
      if (past == 4 && knob(schedule, kVectorLoads) == 0) break;
      Problem problem;
      problem.m = 2 * knob(schedule, kTileM) + 1;
      problem.n = knob(schedule, kTileN) + past;
      problem.k = 2 * knob(schedule, kTileK) + past;
      cases.push_back({"tiles m=" + std::to_string(problem.m) + " n=" + std::to_string(problem.n) +
                           " k=" + std::to_string(problem.k),
                       problem, "small"});
    }
    return cases;
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    const Problem& p = spec.problem;
    inputs.buffers["a"] = random_float_bytes(std::uint64_t{p.m} * p.k, spec.value_profile, random);
    inputs.buffers["b"] = random_float_bytes(std::uint64_t{p.k} * p.n, spec.value_profile, random);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const Problem& p = inputs.problem;
    const auto a = from_bytes<float>(inputs.buffers.at("a"), std::uint64_t{p.m} * p.k);
    const auto b = from_bytes<float>(inputs.buffers.at("b"), std::uint64_t{p.k} * p.n);
    const auto c = from_bytes<float>(outputs.at("c"), std::uint64_t{p.m} * p.n);
    std::vector<double> expected(std::uint64_t{p.m} * p.n);
    std::vector<double> allowed(expected.size());
    for (std::uint32_t i = 0; i < p.m; ++i) {
      for (std::uint32_t j = 0; j < p.n; ++j) {
        double sum = 0;
        double magnitude = 0;
        for (std::uint32_t l = 0; l < p.k; ++l) {
          double term =
              static_cast<double>(a[std::uint64_t{i} * p.k + l]) * b[std::uint64_t{l} * p.n + j];
          sum += term;
          magnitude += std::abs(term);
        }
        expected[std::uint64_t{i} * p.n + j] = sum;
        allowed[std::uint64_t{i} * p.n + j] =
            p.k * std::ldexp(magnitude, -23) +
            p.k * static_cast<double>(std::numeric_limits<float>::min());
      }
    }
    CaseVerdict verdict;
    verdict.report = compare_within(expected, c, allowed);
    verdict.allowed_relative_error = p.k * std::ldexp(1.0, -23);
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override {
    return {4ull * (std::uint64_t{problem.m} * problem.k + std::uint64_t{problem.k} * problem.n +
                    std::uint64_t{problem.m} * problem.n),
            2ull * problem.m * problem.n * problem.k};
  }

  // The H200's (driver 580.159.04) budget-16 winner, 31.0 TFLOP/s with revision 3
  // (docs/performance.md).
  std::vector<std::string> starting_points() const override {
    // The first needs 48 KiB of workgroup memory (the H200's; lavapipe skips it): 35.0 TFLOP/s
    // on the H200 at 4096^3, certified there with seeds 501-503 (session 27 call 2), against
    // 31.0 for the second, revision 3's winner.
    return {"tile_m=128,tile_n=256,tile_k=16,thread_m=8,thread_n=8,stages=2,vector_loads=1",
            "tile_m=128,tile_n=128,tile_k=16,thread_m=4,thread_n=8"};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem;
    problem.m = problem.n = problem.k = cpu_adapter ? 128 : 4096;
    return problem;
  }
};

const char* const kParamsWgsl = R"(
struct Params { m: u32, n: u32, k: u32, tiles_n: u32 }
)";

// The staged tiles (per stage: [depth][row / 4] of A, [depth][column / 4] of B), the scalar
// loads, their staging and the scalar stores of C. Tile element e is row e / TILE_K, depth
// e % TILE_K of A's tile and depth e / TILE_N, column e % TILE_N of B's: A is read along its rows
// (consecutive depths), B along its rows (consecutive columns), both coalesced.
const char* const kTilesWgsl = R"(
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
)";

// gemm_vec4's loads, staging and stores, for k and n multiples of 4: A's rows and B's rows then
// start on whole vec4s, and each vector lies wholly inside the matrix or wholly outside it.
// Vector e of A's tile holds row e / KV, depths 4 (e % KV) + [0, 4); of B's tile, depth e / NV,
// columns 4 (e % NV) + [0, 4). The a_vector and b_vector loads have no bounds tests: the entry
// point uses them for whole k-tiles of workgroups inside m and n only.
const char* const kVectorTilesWgsl = R"(
fn a_vector(row0: u32, k0: u32, e: u32) -> vec4f {
  return a4[(row0 + e / KV) * (params.k / 4u) + k0 / 4u + e % KV];
}
fn b_vector(col0: u32, k0: u32, e: u32) -> vec4f {
  return b4[(k0 + e / NV) * (params.n / 4u) + col0 / 4u + e % NV];
}
fn load_a4(row0: u32, k0: u32, e: u32) -> vec4f {
  if (row0 + e / KV < params.m && k0 + 4u * (e % KV) < params.k) { return a_vector(row0, k0, e); }
  return vec4f();
}
fn load_b4(col0: u32, k0: u32, e: u32) -> vec4f {
  if (k0 + e / NV < params.k && col0 + 4u * (e % NV) < params.n) { return b_vector(col0, k0, e); }
  return vec4f();
}
fn stage_a4(stage: u32, e: u32, value: vec4f) {
  let r = e / KV;
  let d = 4u * (e % KV);
  tile_a[stage][d][r / 4u][r % 4u] = value.x;
  tile_a[stage][d + 1u][r / 4u][r % 4u] = value.y;
  tile_a[stage][d + 2u][r / 4u][r % 4u] = value.z;
  tile_a[stage][d + 3u][r / 4u][r % 4u] = value.w;
}
fn stage_b4(stage: u32, e: u32, value: vec4f) {
  tile_b[stage][e / NV][e % NV] = value;
}
fn store_vector(r: u32, col: u32, values: vec4f) {
  if (r < params.m && col < params.n) { c4[(r * params.n + col) / 4u] = values; }
}
)";

// An entry point's parameters and its linear workgroup index, after `fn <name>`.
const char* const kEntryHeadWgsl =
    R"((@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
        @builtin(local_invocation_index) local: u32) {
  let tile = linear_workgroup(group, groups);
)";
// After the workgroup's row0 and col0: the invocation's place and its accumulators.
const char* const kEntryRegistersWgsl = R"(  let ty = local / CT;
  let tx = local % CT;
  var acc = array<vec4f, ACCUMULATORS>();
)";

// The first row and column of the workgroup's block of C: its tile row by row, or, with
// GROUP tile rows per group, column by column within each group of GROUP rows (the last group
// may have fewer). There are at least as many tile rows as workgroups need: none runs when m = 0.
const char* const kRowByRowWgsl = R"(  let row0 = (tile / params.tiles_n) * TILE_M;
  let col0 = (tile % params.tiles_n) * TILE_N;
)";
const char* const kGroupedTilesWgsl = R"(  let tiles_m = (params.m - 1u) / TILE_M + 1u;
  let first_row = (tile / (GROUP * params.tiles_n)) * GROUP;
  let rows = min(tiles_m - first_row, GROUP);
  let in_group = tile % (GROUP * params.tiles_n);
  let row0 = (first_row + in_group % rows) * TILE_M;
  let col0 = (in_group / rows) * TILE_N;
)";

// The scalar entry point's registers for the next tiles, their loads at depth `kl` and their
// staging into stage `fill`.
const char* const kScalarNextWgsl = R"(  var next_a = array<f32, A_LOADS>();
  var next_b = array<f32, B_LOADS>();
)";
const char* const kScalarLoadsWgsl =
    R"(for (var s = 0u; s < A_LOADS; s++) { next_a[s] = load_a(row0, kl, local + s * INVOCATIONS); }
for (var s = 0u; s < B_LOADS; s++) { next_b[s] = load_b(col0, kl, local + s * INVOCATIONS); }
)";
const char* const kScalarStagingWgsl =
    R"(for (var s = 0u; s < A_LOADS; s++) { stage_a(fill, local + s * INVOCATIONS, next_a[s]); }
for (var s = 0u; s < B_LOADS; s++) { stage_b(fill, local + s * INVOCATIONS, next_b[s]); }
)";

const char* const kVectorNextWgsl =
    R"(  // Whether the workgroup's block lies inside C: its whole k-tiles need no bounds tests.
  let inside = row0 + TILE_M <= params.m && col0 + TILE_N <= params.n;
  var next_a = array<vec4f, A_VECTORS>();
  var next_b = array<vec4f, B_VECTORS>();
)";

// Names: RT x CT invocations (ty, tx); invocation (ty, tx) owns rows gi * 4 RT + 4 ty + [0, 4)
// and columns gj * 4 CT + 4 tx + [0, 4) of the tile, for gi < thread_m / 4, gj < thread_n / 4;
// accumulator (gi * 4 + i) * column_groups + gj holds row gi * 4 RT + 4 ty + i of group gj.
struct RegisterBlock {
  std::uint32_t row_groups;
  std::uint32_t column_groups;
  std::uint32_t thread_rows;     // RT
  std::uint32_t thread_columns;  // CT

  std::uint32_t accumulator(std::uint32_t gi, std::uint32_t i, std::uint32_t gj) const {
    return (gi * 4 + i) * column_groups + gj;
  }
  std::uint32_t invocations() const { return thread_rows * thread_columns; }
};

RegisterBlock register_block(const Schedule& schedule) {
  const std::uint32_t row_groups = knob(schedule, kThreadM) / 4;
  const std::uint32_t column_groups = knob(schedule, kThreadN) / 4;
  return {row_groups, column_groups, knob(schedule, kTileM) / (4 * row_groups),
          knob(schedule, kTileN) / (4 * column_groups)};
}

std::string u32_literal(std::uint32_t value) { return std::to_string(value) + "u"; }

// gemm_vec4's loads of the next tiles at depth `kl` and their staging into stage `fill`, one
// statement per register (constant indices need no clamps): without bounds tests for whole
// k-tiles of a workgroup inside C.
std::string vector_loads_wgsl(std::uint32_t a_vectors, std::uint32_t b_vectors) {
  const auto element = [](std::uint32_t s) {
    return "local + " + u32_literal(s) + " * INVOCATIONS";
  };
  WgslLines inside(1);
  WgslLines edge(1);
  for (std::uint32_t s = 0; s < a_vectors; ++s) {
    const std::string target = "next_a[" + u32_literal(s) + "] = ";
    inside.line(target + "a_vector(row0, kl, " + element(s) + ");");
    edge.line(target + "load_a4(row0, kl, " + element(s) + ");");
  }
  for (std::uint32_t s = 0; s < b_vectors; ++s) {
    const std::string target = "next_b[" + u32_literal(s) + "] = ";
    inside.line(target + "b_vector(col0, kl, " + element(s) + ");");
    edge.line(target + "load_b4(col0, kl, " + element(s) + ");");
  }
  return "if (inside && kl + TILE_K <= params.k) {\n" + inside.text() + "} else {\n" + edge.text() +
         "}\n";
}

std::string vector_staging_wgsl(std::uint32_t a_vectors, std::uint32_t b_vectors) {
  WgslLines lines(0);
  for (std::uint32_t s = 0; s < a_vectors; ++s) {
    lines.line("stage_a4(fill, local + " + u32_literal(s) + " * INVOCATIONS, next_a[" +
               u32_literal(s) + "]);");
  }
  for (std::uint32_t s = 0; s < b_vectors; ++s) {
    lines.line("stage_b4(fill, local + " + u32_literal(s) + " * INVOCATIONS, next_b[" +
               u32_literal(s) + "]);");
  }
  return lines.text();
}

// Depth step d of the inner product from stage `st`: each invocation's vec4s of A and B, then
// one fma per accumulator.
std::string inner_product_wgsl(const RegisterBlock& block) {
  static constexpr const char* kLane[] = {"x", "y", "z", "w"};
  WgslLines lines(0);
  for (std::uint32_t gi = 0; gi < block.row_groups; ++gi) {
    lines.line("let a" + std::to_string(gi) + " = tile_a[st][d][" +
               u32_literal(gi * block.thread_rows) + " + ty];");
  }
  for (std::uint32_t gj = 0; gj < block.column_groups; ++gj) {
    lines.line("let b" + std::to_string(gj) + " = tile_b[st][d][" +
               u32_literal(gj * block.thread_columns) + " + tx];");
  }
  for (std::uint32_t gi = 0; gi < block.row_groups; ++gi) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      for (std::uint32_t gj = 0; gj < block.column_groups; ++gj) {
        const std::string slot = "acc[" + std::to_string(block.accumulator(gi, i, gj)) + "]";
        lines.line(slot + " = fma(vec4f(a" + std::to_string(gi) + "." + kLane[i] + "), b" +
                   std::to_string(gj) + ", " + slot + ");");
      }
    }
  }
  return lines.text();
}

// The stores of C, each vec4 of the accumulators through `store` (store_row or store_vector).
std::string stores_wgsl(const RegisterBlock& block, const std::string& store) {
  WgslLines lines(1);
  for (std::uint32_t gi = 0; gi < block.row_groups; ++gi) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      for (std::uint32_t gj = 0; gj < block.column_groups; ++gj) {
        lines.line(store + "(row0 + " + u32_literal(gi * 4 * block.thread_rows + i) +
                   " + 4u * ty, col0 + " + u32_literal(gj * 4 * block.thread_columns) +
                   " + 4u * tx, acc[" + std::to_string(block.accumulator(gi, i, gj)) + "]);");
      }
    }
  }
  return lines.text() + "}\n";
}

// One entry point: `next` declares the registers of the next tiles, `loads` fills them from
// depth `kl`, `staging` moves them into stage `fill`. One stage: stage, barrier, load the next
// tiles, multiply, barrier (revision 3). Two stages: the next tiles are staged into the other
// stage after the multiplication, so that one barrier per k-tile separates both the staging
// from the reads of that stage and the reads from the next staging.
std::string entry_wgsl(const std::string& name, const Schedule& schedule, const std::string& next,
                       const std::string& loads, const std::string& staging,
                       const std::string& store) {
  const RegisterBlock block = register_block(schedule);
  const std::string product = inner_product_wgsl(block);
  const std::string depth_loop =
      knob(schedule, kUnrollDepth) == 1
          ? indented(unrolled_loop("d", knob(schedule, kTileK), indented(product, 2)), 1)
          : "    for (var d = 0u; d < TILE_K; d++) {\n" + indented(product, 3) + "    }\n";
  std::string wgsl = "\n@compute @workgroup_size(INVOCATIONS)\nfn " + name + kEntryHeadWgsl +
                     (knob(schedule, kTileRowsPerGroup) == 1 ? kRowByRowWgsl : kGroupedTilesWgsl) +
                     kEntryRegistersWgsl + next;
  if (knob(schedule, kStages) == 1) {
    wgsl += "  {\n    let kl = 0u;\n" + indented(loads, 2) + "  }\n" +
            "  for (var k0 = 0u; k0 < params.k; k0 += TILE_K) {\n" +
            "    const st = 0u;\n    const fill = 0u;\n" + indented(staging, 2) +
            "    workgroupBarrier();\n    let kl = k0 + TILE_K;\n    if (kl < params.k) {\n" +
            indented(loads, 3) + "    }\n" + depth_loop + "    workgroupBarrier();\n  }\n";
  } else {
    wgsl += "  {\n    let kl = 0u;\n    const fill = 0u;\n" + indented(loads, 2) +
            indented(staging, 2) + "  }\n  workgroupBarrier();\n" +
            "  for (var k0 = 0u; k0 < params.k; k0 += TILE_K) {\n" +
            "    let st = (k0 / TILE_K) % 2u;\n    let kl = k0 + TILE_K;\n" +
            "    if (kl < params.k) {\n" + indented(loads, 3) + "    }\n" + depth_loop +
            "    if (kl < params.k) {\n      let fill = 1u - st;\n" + indented(staging, 3) +
            "    }\n    workgroupBarrier();\n  }\n";
  }
  return wgsl + stores_wgsl(block, store);
}

std::string GemmF32::generate_wgsl(const Schedule& schedule) const {
  const RegisterBlock block = register_block(schedule);
  const std::uint32_t tile_m = knob(schedule, kTileM);
  const std::uint32_t tile_n = knob(schedule, kTileN);
  const std::uint32_t tile_k = knob(schedule, kTileK);
  const std::uint32_t invocations = block.invocations();
  const bool vectors = knob(schedule, kVectorLoads) == 1;
  std::vector<WgslConstant> constants = {
      {"TILE_M", tile_m, ""},
      {"TILE_N", tile_n, ""},
      {"TILE_K", tile_k, ""},
      {"STAGES", knob(schedule, kStages), "workgroup tiles of A and B"},
      {"GROUP", knob(schedule, kTileRowsPerGroup), "tile rows per group"},
      {"RT", block.thread_rows, "rows of invocations"},
      {"CT", block.thread_columns, "columns of invocations"},
      {"INVOCATIONS", invocations, ""},
      {"ACCUMULATORS", 4 * block.row_groups * block.column_groups, "vec4f per invocation"},
      // Whole numbers: every knob is a power of two, and check_resources admits only schedules
      // whose tiles have at least as many values (vectors) as there are invocations.
      {"A_LOADS", tile_m * tile_k / invocations, "A's values each invocation stages"},
      {"B_LOADS", tile_k * tile_n / invocations, "B's values each invocation stages"}};
  std::string wgsl = std::string(kLinearWorkgroupWgsl) + kParamsWgsl +
                     binding_declarations(wgsl_bindings(schedule));
  if (vectors) {
    constants.push_back({"KV", tile_k / 4, "vectors of a row of A's tile"});
    constants.push_back({"NV", tile_n / 4, "vectors of a row of B's tile"});
    constants.push_back(
        {"A_VECTORS", tile_m * tile_k / 4 / invocations, "A's vectors each invocation stages"});
    constants.push_back(
        {"B_VECTORS", tile_k * tile_n / 4 / invocations, "B's vectors each invocation stages"});
  }
  wgsl += "\n" + constant_declarations(constants) + kTilesWgsl;
  if (vectors) wgsl += kVectorTilesWgsl;
  wgsl += entry_wgsl("gemm", schedule, kScalarNextWgsl, kScalarLoadsWgsl, kScalarStagingWgsl,
                     "store_row");
  if (vectors) {
    const std::uint32_t a_vectors = tile_m * tile_k / 4 / invocations;
    const std::uint32_t b_vectors = tile_k * tile_n / 4 / invocations;
    wgsl +=
        entry_wgsl("gemm_vec4", schedule, kVectorNextWgsl, vector_loads_wgsl(a_vectors, b_vectors),
                   vector_staging_wgsl(a_vectors, b_vectors), "store_vector");
  }
  return wgsl;
}

}  // namespace

const KernelDefinition& gemm_f32_kernel() {
  static const GemmF32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
