// gemm_f32: C = A x B, row-major, A is m x k, B is k x n, C is m x n; any m, n, k.
//
// Each workgroup computes a tile_m x tile_n block of C, walking k in steps of tile_k through
// tiles of A and B staged in workgroup memory as vec4: A transposed ([depth][row]) and B as is
// ([depth][column]), so that the inner loop reads each invocation's rows and columns as whole
// vec4s. Each invocation computes thread_m x thread_n outputs in registers: thread_m / 4 groups of
// 4 rows and thread_n / 4 groups of 4 columns, the groups spread tile_m / (thread_m / 4) rows
// (and columns) apart, so that neighbouring invocations read neighbouring vec4s (no bank
// conflicts) and the rows of one subgroup are broadcasts. The next tiles' global loads are issued
// into registers before the current tiles are multiplied, which hides their latency behind the
// arithmetic (register double buffering). The inner product is unrolled here, in the generator:
// the accumulators must be registers, whatever the driver's unrolling. The tiles are arrays of
// depth steps, so that the bounds clamp Dawn puts on an index into a step (the invocation's
// row or column) is the same for every step, computed once, rather than one clamp per read of
// a flat array (revision 3: 28.1 -> 29.8 TFLOP/s on the H200; unrolling the depth loop too
// reached 30.0 but made lavapipe compile the kernel 2-3 times slower).
// Edges are handled by loading zeros past m, n or k and not storing past m or n. Knobs: tile_m,
// tile_n, tile_k, thread_m, thread_n. Workgroup size is (tile_m / thread_m) (tile_n / thread_n);
// workgroup memory is 4 (tile_m + tile_n) tile_k bytes.
//
// Oracle: the product in double. Tolerance (accumulation in any order, subnormals may flush):
// |c - exact| <= k 2^-23 sum_l |a_il b_lj| + k FLT_MIN. FLOPs: 2 m n k.

#include <cmath>
#include <limits>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

const KnobSpec kTileM{"tile_m", "rows of C per workgroup", {32, 64, 128}, 64};
const KnobSpec kTileN{"tile_n", "columns of C per workgroup", {32, 64, 128}, 64};
const KnobSpec kTileK{"tile_k", "depth of the staged tiles", {8, 16, 32}, 16};
const KnobSpec kThreadM{"thread_m", "rows of C per invocation (groups of 4)", {4, 8}, 4};
const KnobSpec kThreadN{"thread_n", "columns of C per invocation (groups of 4)", {4, 8}, 4};

class GemmF32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "gemm_f32"; }
  std::uint32_t revision() const override { return 3; }
  std::string_view summary() const override { return "C = A x B, row-major f32, any m, n, k"; }

  std::vector<KnobSpec> knobs() const override {
    return {kTileM, kTileN, kTileK, kThreadM, kThreadN};
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
    const std::uint32_t invocations =
        (tile_m / knob(schedule, kThreadM)) * (tile_n / knob(schedule, kThreadN));
    if (invocations > device.max_invocations_per_workgroup || invocations < 32) {
      return Error(
          ErrorKind::kInvalidInput,
          "Knobs tile_m/thread_m x tile_n/thread_n give " + std::to_string(invocations) +
              " invocations per workgroup, outside 32..maxComputeInvocationsPerWorkgroup (" +
              std::to_string(device.max_invocations_per_workgroup) + ").");
    }
    const std::uint64_t bytes = 4ull * (tile_m + tile_n) * knob(schedule, kTileK);
    if (bytes > device.max_workgroup_storage_size) {
      return Error(ErrorKind::kInvalidInput,
                   "Knobs tile_m, tile_n and tile_k need " + std::to_string(bytes) +
                       " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                       std::to_string(device.max_workgroup_storage_size) + ").");
    }
    return Ok{};
  }

  std::vector<WgslBinding> wgsl_bindings(const Schedule&) const override {
    return {params_binding("Params"), storage_read(1, "a", "f32"), storage_read(2, "b", "f32"),
            storage_read_write(3, "c", "f32")};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {
        {"a", ElementType::kF32, BufferRole::kInput, "m * k elements (row-major), at least 1"},
        {"b", ElementType::kF32, BufferRole::kInput, "k * n elements (row-major), at least 1"},
        {"c", ElementType::kF32, BufferRole::kOutput, "m * n elements (row-major), at least 1"}};
  }

  std::vector<std::string> entry_points(const Schedule&) const override { return {"gemm"}; }

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
    plan.passes = {{"gemm",
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
  // swapped) and three k-tiles, the last partial.
  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities&) const override {
    Problem problem;
    problem.m = 2 * knob(schedule, kTileM) + 1;
    problem.n = knob(schedule, kTileN) + 1;
    problem.k = 2 * knob(schedule, kTileK) + 1;
    return {{"tiles m=" + std::to_string(problem.m) + " n=" + std::to_string(problem.n) +
                 " k=" + std::to_string(problem.k),
             problem, "small"}};
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    const Problem& p = spec.problem;
    inputs.buffers["a"] =
        to_bytes(random_floats(std::uint64_t{p.m} * p.k, spec.value_profile, random));
    inputs.buffers["b"] =
        to_bytes(random_floats(std::uint64_t{p.k} * p.n, spec.value_profile, random));
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
    return {"tile_m=128,tile_n=128,tile_k=16,thread_m=4,thread_n=8"};
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

// The staged tiles ([depth][row / 4] of A, [depth][column / 4] of B), their loads and the
// stores of C. A is read along its rows (consecutive depths), B along its rows (consecutive
// columns): both coalesced.
const char* const kTilesWgsl = R"(
var<workgroup> tile_a: array<array<vec4f, TILE_M / 4u>, TILE_K>;
var<workgroup> tile_b: array<array<vec4f, TILE_N / 4u>, TILE_K>;

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
fn store_row(r: u32, col: u32, values: vec4f) {
  if (r >= params.m) { return; }
  for (var j = 0u; j < 4u; j++) {
    if (col + j < params.n) { c[r * params.n + col + j] = values[j]; }
  }
}
)";

// The entry point up to the inner product of one depth step `d`, which the generator unrolls.
const char* const kGemmHeadWgsl = R"(
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
  for (var s = 0u; s < A_LOADS; s++) { next_a[s] = load_a(row0, 0u, local + s * INVOCATIONS); }
  for (var s = 0u; s < B_LOADS; s++) { next_b[s] = load_b(col0, 0u, local + s * INVOCATIONS); }
  for (var k0 = 0u; k0 < params.k; k0 += TILE_K) {
    for (var s = 0u; s < A_LOADS; s++) {
      let e = local + s * INVOCATIONS;
      let r = e / TILE_K;
      tile_a[e % TILE_K][r / 4u][r % 4u] = next_a[s];
    }
    for (var s = 0u; s < B_LOADS; s++) {
      let e = local + s * INVOCATIONS;
      let col = e % TILE_N;
      tile_b[e / TILE_N][col / 4u][col % 4u] = next_b[s];
    }
    workgroupBarrier();
    if (k0 + TILE_K < params.k) {
      for (var s = 0u; s < A_LOADS; s++) {
        next_a[s] = load_a(row0, k0 + TILE_K, local + s * INVOCATIONS);
      }
      for (var s = 0u; s < B_LOADS; s++) {
        next_b[s] = load_b(col0, k0 + TILE_K, local + s * INVOCATIONS);
      }
    }
    for (var d = 0u; d < TILE_K; d++) {
)";

const char* const kGemmStepEndWgsl = R"(    }
    workgroupBarrier();
  }
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
};

RegisterBlock register_block(const Schedule& schedule) {
  const std::uint32_t row_groups = knob(schedule, kThreadM) / 4;
  const std::uint32_t column_groups = knob(schedule, kThreadN) / 4;
  return {row_groups, column_groups, knob(schedule, kTileM) / (4 * row_groups),
          knob(schedule, kTileN) / (4 * column_groups)};
}

std::string u32_literal(std::uint32_t value) { return std::to_string(value) + "u"; }

// Depth step d of the inner product: each invocation's vec4s of A and B, then one fma per
// accumulator.
std::string inner_product_wgsl(const RegisterBlock& block) {
  static constexpr const char* kLane[] = {"x", "y", "z", "w"};
  WgslLines lines(3);
  for (std::uint32_t gi = 0; gi < block.row_groups; ++gi) {
    lines.line("let a" + std::to_string(gi) + " = tile_a[d][" +
               u32_literal(gi * block.thread_rows) + " + ty];");
  }
  for (std::uint32_t gj = 0; gj < block.column_groups; ++gj) {
    lines.line("let b" + std::to_string(gj) + " = tile_b[d][" +
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

std::string stores_wgsl(const RegisterBlock& block) {
  WgslLines lines(1);
  for (std::uint32_t gi = 0; gi < block.row_groups; ++gi) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      for (std::uint32_t gj = 0; gj < block.column_groups; ++gj) {
        lines.line("store_row(row0 + " + u32_literal(gi * 4 * block.thread_rows + i) +
                   " + 4u * ty, col0 + " + u32_literal(gj * 4 * block.thread_columns) +
                   " + 4u * tx, acc[" + std::to_string(block.accumulator(gi, i, gj)) + "]);");
      }
    }
  }
  return lines.text() + "}\n";
}

std::string GemmF32::generate_wgsl(const Schedule& schedule) const {
  const RegisterBlock block = register_block(schedule);
  const std::uint32_t tile_m = knob(schedule, kTileM);
  const std::uint32_t tile_n = knob(schedule, kTileN);
  const std::uint32_t tile_k = knob(schedule, kTileK);
  const std::uint32_t invocations = block.thread_rows * block.thread_columns;
  return std::string(kLinearWorkgroupWgsl) + kParamsWgsl +
         binding_declarations(wgsl_bindings(schedule)) + "\n" +
         constant_declarations(
             {{"TILE_M", tile_m, ""},
              {"TILE_N", tile_n, ""},
              {"TILE_K", tile_k, ""},
              {"RT", block.thread_rows, "rows of invocations"},
              {"CT", block.thread_columns, "columns of invocations"},
              {"INVOCATIONS", invocations, ""},
              {"ACCUMULATORS", 4 * block.row_groups * block.column_groups, "vec4f per invocation"},
              // Whole numbers: every knob is a power of two, and a tile of A or B has at least
              // as many values as there are invocations (tile_k thread_m thread_n >= 8 x 4 x 4,
              // at least tile_m and tile_n).
              {"A_LOADS", tile_m * tile_k / invocations, "A's values each invocation stages"},
              {"B_LOADS", tile_k * tile_n / invocations, "B's values each invocation stages"}}) +
         kTilesWgsl + kGemmHeadWgsl + inner_product_wgsl(block) + kGemmStepEndWgsl +
         stores_wgsl(block);
}

}  // namespace

const KernelDefinition& gemm_f32_kernel() {
  static const GemmF32 kKernel;
  return kKernel;
}

}  // namespace wgsl_forge::kernels
