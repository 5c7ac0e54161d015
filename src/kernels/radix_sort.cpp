// radix_sort_u32 and radix_sort_pairs_u32: stable ascending sort of u32 keys, alone or carrying
// u32 values.
//
// Least-significant-digit radix sort, 32 / digit_bits rounds; each round is five passes of one
// submission, none waiting on another workgroup (safe without forward-progress guarantees):
//   digit_count    each tile (workgroup_size * keys_per_invocation keys) counts its digits into
//                  counts[digit * tiles + tile] (digit-major, so one scan gives every offset);
//   counts_reduce, counts_spine, counts_apply
//                  an exclusive reduce-then-scan of the counts;
//   scatter        each tile ranks its keys stably (each invocation owns consecutive keys, a
//                  workgroup prefix per digit orders the invocations) and writes them, with their
//                  values, to counts[digit * tiles + tile] + rank.
// Rounds alternate between a scratch buffer and the output; the input is never written.
// Knobs: workgroup_size, keys_per_invocation, digit_bits (2 or 4). Workgroup memory:
// 4 * 2^digit_bits * (workgroup_size + 1) bytes.
//
// Oracle: std::stable_sort; exact, plus explicit checks that the output is ascending, is a
// permutation of the input, and (for pairs) keeps equal keys in input order.
// Bytes moved: 8 n (keys) or 16 n (pairs): one read and one write of each array, the lower bound.

#include <algorithm>
#include <numeric>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

constexpr std::uint32_t kCountScanItems = 4;

class RadixSort final : public KernelDefinition {
 public:
  explicit RadixSort(bool pairs) : pairs_(pairs) {}

  std::string_view id() const override {
    return pairs_ ? "radix_sort_pairs_u32" : "radix_sort_u32";
  }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override {
    return pairs_ ? "stable ascending sort of u32 keys carrying u32 values"
                  : "ascending sort of u32 keys";
  }

  std::vector<KnobSpec> knobs() const override {
    return {{"workgroup_size", "invocations per workgroup", {64, 128, 256}, 64},
            {"keys_per_invocation", "consecutive keys per invocation", {1, 2, 4, 8}, 1},
            {"digit_bits", "bits sorted per round", {2, 4}, 4}};
  }

  Status check_resources(const Schedule& schedule,
                         const DeviceCapabilities& device) const override {
    const std::uint64_t digits = 1u << knob(schedule, "digit_bits");
    const std::uint64_t bytes = 4 * digits * (knob(schedule, "workgroup_size") + 1);
    const std::uint64_t scan_bytes = 4 * std::uint64_t{knob(schedule, "workgroup_size")};
    if (bytes + scan_bytes > device.max_workgroup_storage_size) {
      return Error(ErrorKind::kInvalidInput,
                   "Knobs workgroup_size (" + knob_string(schedule, "workgroup_size") +
                       ") and digit_bits (" + knob_string(schedule, "digit_bits") + ") need " +
                       std::to_string(bytes + scan_bytes) +
                       " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                       std::to_string(device.max_workgroup_storage_size) + ").");
    }
    return Ok{};
  }

  std::vector<KernelBinding> bindings() const override {
    std::vector<KernelBinding> list = {{0, 0, BindingKind::kUniform, "params"},
                                       {0, 1, BindingKind::kStorageRead, "keys_in"},
                                       {0, 2, BindingKind::kStorageReadWrite, "keys_out"},
                                       {0, 3, BindingKind::kStorageReadWrite, "counts"},
                                       {0, 4, BindingKind::kStorageReadWrite, "block_sums"}};
    if (pairs_) {
      list.push_back({0, 5, BindingKind::kStorageRead, "values_in"});
      list.push_back({0, 6, BindingKind::kStorageReadWrite, "values_out"});
    }
    return list;
  }

  std::vector<std::string> entry_points() const override {
    return {"digit_count", "counts_reduce", "counts_spine", "counts_apply", "scatter"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override;

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t n = problem.elements;
    const std::uint32_t wg = knob(schedule, "workgroup_size");
    const std::uint32_t bits = knob(schedule, "digit_bits");
    const std::uint64_t tile = std::uint64_t{wg} * knob(schedule, "keys_per_invocation");
    const std::uint64_t tiles = ceil_div(n, tile);
    const std::uint64_t count_length = (std::uint64_t{1} << bits) * tiles;
    const std::uint64_t count_blocks = ceil_div(count_length, std::uint64_t{wg} * kCountScanItems);
    const std::uint64_t bytes = std::max<std::uint64_t>(4, n * 4);
    DispatchPlan plan;
    plan.buffers = {
        {"keys", bytes, BufferRole::kInput},
        {"sorted", bytes, BufferRole::kOutput},
        {"scratch", bytes, BufferRole::kScratch},
        {"counts", std::max<std::uint64_t>(4, count_length * 4), BufferRole::kScratch},
        {"block_sums", std::max<std::uint64_t>(4, count_blocks * 4), BufferRole::kScratch}};
    if (pairs_) {
      plan.buffers.push_back({"values", bytes, BufferRole::kInput});
      plan.buffers.push_back({"sorted_values", bytes, BufferRole::kOutput});
      plan.buffers.push_back({"scratch_values", bytes, BufferRole::kScratch});
    }
    const std::uint32_t rounds = 32 / bits;  // even, so the last round writes "sorted"
    for (std::uint32_t round = 0; round < rounds; ++round) {
      const bool even = round % 2 == 0;
      const std::string source = round == 0 ? "keys" : (even ? "sorted" : "scratch");
      std::map<std::uint32_t, std::string> buffers = {
          {1, source}, {2, even ? "scratch" : "sorted"}, {3, "counts"}, {4, "block_sums"}};
      if (pairs_) {
        buffers[5] = round == 0 ? "values" : (even ? "sorted_values" : "scratch_values");
        buffers[6] = even ? "scratch_values" : "sorted_values";
      }
      const std::vector<std::uint32_t> params = {
          static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(tiles), round * bits,
          static_cast<std::uint32_t>(count_length), static_cast<std::uint32_t>(count_blocks)};
      plan.passes.push_back({"digit_count", tiles, buffers, params});
      plan.passes.push_back({"counts_reduce", count_blocks, buffers, params});
      plan.passes.push_back({"counts_spine", 1, buffers, params});
      plan.passes.push_back({"counts_apply", count_blocks, buffers, params});
      plan.passes.push_back({"scatter", tiles, buffers, params});
    }
    return plan;
  }

  std::string tolerance() const override {
    return pairs_ ? "exact; ascending, a permutation of the input, equal keys keep input order"
                  : "exact; ascending, a permutation of the input";
  }

  std::vector<CaseSpec> certification_cases() const override {
    std::vector<CaseSpec> cases;
    const char* profiles[] = {"uniform", "equal", "sorted", "reversed", "small", "top-bits"};
    std::size_t next = 0;
    for (std::uint64_t n : edge_sizes(64, 64)) {
      for (int repeat = 0; repeat < 2; ++repeat) {
        const char* profile = profiles[next++ % std::size(profiles)];
        Problem problem;
        problem.elements = n;
        cases.push_back({"n=" + std::to_string(n) + " " + profile, problem, profile});
      }
    }
    Problem many;
    many.elements = many_workgroups_size(64, 4, 128u << 20);
    cases.push_back({"many-workgroups n=" + std::to_string(many.elements), many, "uniform"});
    return cases;
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    inputs.buffers["keys"] =
        to_bytes(random_u32(spec.problem.elements, spec.value_profile, random));
    if (pairs_) {
      // Values are the input positions, so stability can be checked directly.
      std::vector<std::uint32_t> values(spec.problem.elements);
      std::iota(values.begin(), values.end(), 0u);
      inputs.buffers["values"] = to_bytes(values);
    }
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override;

  WorkAmount work(const Problem& problem) const override {
    return {(pairs_ ? 16 : 8) * problem.elements, 0};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem;
    problem.elements = cpu_adapter ? (1u << 16) : (1u << 28);
    return problem;
  }

 private:
  bool pairs_;
};

std::string RadixSort::generate_wgsl(const Schedule& schedule) const {
  const std::uint32_t wg_value = knob(schedule, "workgroup_size");
  const std::string wg = std::to_string(wg_value);
  const std::string kpi = knob_string(schedule, "keys_per_invocation");
  const std::uint32_t digits_value = 1u << knob(schedule, "digit_bits");
  const std::string digits = std::to_string(digits_value);
  const std::string mask = std::to_string(digits_value - 1);
  const std::string builtins =
      "(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,\n"
      "    @builtin(local_invocation_index) local: u32)";
  std::string wgsl = std::string(kLinearWorkgroupWgsl) +
                     "\nstruct Params { n: u32, tiles: u32, shift: u32, count_length: u32, "
                     "count_blocks: u32 }\n"
                     "@group(0) @binding(0) var<uniform> params: Params;\n"
                     "@group(0) @binding(1) var<storage, read> keys_in: array<u32>;\n"
                     "@group(0) @binding(2) var<storage, read_write> keys_out: array<u32>;\n"
                     "@group(0) @binding(3) var<storage, read_write> counts: array<u32>;\n"
                     "@group(0) @binding(4) var<storage, read_write> block_sums: array<u32>;\n";
  if (pairs_) {
    wgsl +=
        "@group(0) @binding(5) var<storage, read> values_in: array<u32>;\n"
        "@group(0) @binding(6) var<storage, read_write> values_out: array<u32>;\n";
  }
  wgsl += "\nfn digit(key: u32) -> u32 { return (key >> params.shift) & " + mask +
          "u; }\n"
          "fn scan_length() -> u32 { return params.count_length; }\n"
          "fn scan_blocks() -> u32 { return params.count_blocks; }\n"
          "fn scan_value(i: u32) -> u32 { return counts[i]; }\n"
          "fn scan_store(i: u32, prefix: u32) { counts[i] = prefix; }\n"
          "fn scan_total(total: u32) {}\n\n" +
          workgroup_scan_wgsl(wg_value) +
          reduce_then_scan_wgsl("counts", wg_value, kCountScanItems);
  wgsl += "\nvar<workgroup> tile_counts: array<atomic<u32>, " + digits +
          ">;\n"
          "@compute @workgroup_size(" +
          wg + ")\nfn digit_count" + builtins +
          " {\n"
          "  let tile = linear_workgroup(group, groups);\n"
          "  if (local < " +
          digits +
          "u) { atomicStore(&tile_counts[local], 0u); }\n"
          "  workgroupBarrier();\n"
          "  let first = tile * (" +
          wg + "u * " + kpi +
          "u) + local;\n"
          "  for (var item = 0u; item < " +
          kpi +
          "u; item++) {\n"
          "    let i = first + item * " +
          wg +
          "u;\n"
          "    if (i < params.n) { atomicAdd(&tile_counts[digit(keys_in[i])], 1u); }\n"
          "  }\n"
          "  workgroupBarrier();\n"
          "  if (local < " +
          digits +
          "u && tile < params.tiles) {\n"
          "    counts[local * params.tiles + tile] = atomicLoad(&tile_counts[local]);\n"
          "  }\n"
          "}\n";
  // Stable ranking: invocation `local` owns keys [first, first + kpi) of the tile, in order;
  // digit_prefix[d * wg + local] becomes the number of digit-d keys owned by earlier invocations.
  wgsl += "\nvar<workgroup> digit_prefix: array<u32, " + std::to_string(digits_value * wg_value) +
          ">;\n"
          "@compute @workgroup_size(" +
          wg + ")\nfn scatter" + builtins +
          " {\n"
          "  let tile = linear_workgroup(group, groups);\n"
          "  let first = tile * (" +
          wg + "u * " + kpi + "u) + local * " + kpi +
          "u;\n"
          "  var keys = array<u32, " +
          kpi + ">();\n" +
          std::string(pairs_ ? "  var values = array<u32, " + kpi + ">();\n" : "") +
          "  var mine = array<u32, " + digits +
          ">();\n"
          "  for (var j = 0u; j < " +
          kpi +
          "u; j++) {\n"
          "    let i = first + j;\n"
          "    if (i < params.n) {\n"
          "      keys[j] = keys_in[i];\n" +
          std::string(pairs_ ? "      values[j] = values_in[i];\n" : "") +
          "      mine[digit(keys[j])] += 1u;\n"
          "    }\n"
          "  }\n"
          "  for (var d = 0u; d < " +
          digits + "u; d++) { digit_prefix[d * " + wg +
          "u + local] = mine[d]; }\n"
          "  workgroupBarrier();\n"
          "  for (var offset = 1u; offset < " +
          wg +
          "u; offset *= 2u) {\n"
          "    var adds = array<u32, " +
          digits +
          ">();\n"
          "    if (local >= offset) {\n"
          "      for (var d = 0u; d < " +
          digits + "u; d++) { adds[d] = digit_prefix[d * " + wg +
          "u + local - offset]; }\n"
          "    }\n"
          "    workgroupBarrier();\n"
          "    for (var d = 0u; d < " +
          digits + "u; d++) { digit_prefix[d * " + wg +
          "u + local] += adds[d]; }\n"
          "    workgroupBarrier();\n"
          "  }\n"
          "  if (tile >= params.tiles) { return; }\n"
          "  var next = array<u32, " +
          digits +
          ">();\n"
          "  for (var d = 0u; d < " +
          digits +
          "u; d++) {\n"
          "    next[d] = counts[d * params.tiles + tile] + digit_prefix[d * " +
          wg +
          "u + local] - mine[d];\n"
          "  }\n"
          "  for (var j = 0u; j < " +
          kpi +
          "u; j++) {\n"
          "    if (first + j < params.n) {\n"
          "      let d = digit(keys[j]);\n"
          "      keys_out[next[d]] = keys[j];\n" +
          std::string(pairs_ ? "      values_out[next[d]] = values[j];\n" : "") +
          "      next[d] += 1u;\n"
          "    }\n"
          "  }\n"
          "}\n";
  return wgsl;
}

CaseVerdict RadixSort::check(const CaseInputs& inputs,
                             const std::map<std::string, std::vector<std::byte>>& outputs) const {
  const std::uint64_t n = inputs.problem.elements;
  const auto keys = from_bytes<std::uint32_t>(inputs.buffers.at("keys"), n);
  const auto sorted = from_bytes<std::uint32_t>(outputs.at("sorted"), n);
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  std::vector<std::uint32_t> expected_keys(n);
  for (std::uint64_t i = 0; i < n; ++i) expected_keys[i] = keys[order[i]];
  CaseVerdict verdict;
  verdict.report = compare_exact(expected_keys, sorted);
  if (!std::is_sorted(sorted.begin(), sorted.end())) {
    verdict.failed_checks.push_back("keys are not in ascending order");
  }
  std::vector<std::uint32_t> multiset = sorted;
  std::sort(multiset.begin(), multiset.end());
  if (multiset != expected_keys) {
    verdict.failed_checks.push_back("keys are not a permutation of the input");
  }
  if (!pairs_) return verdict;
  const auto values = from_bytes<std::uint32_t>(inputs.buffers.at("values"), n);
  const auto sorted_values = from_bytes<std::uint32_t>(outputs.at("sorted_values"), n);
  std::vector<std::uint32_t> expected_values(n);
  for (std::uint64_t i = 0; i < n; ++i) expected_values[i] = values[order[i]];
  ComparisonReport value_report = compare_exact(expected_values, sorted_values);
  verdict.report.compared += value_report.compared;
  if (value_report.mismatch_count > 0) {
    if (verdict.report.mismatch_count == 0) {
      verdict.report.first_mismatch = value_report.first_mismatch;
      verdict.report.first_mismatch->index += n;  // indices past n are values
    }
    verdict.report.mismatch_count += value_report.mismatch_count;
    verdict.report.max_absolute_error =
        std::max(verdict.report.max_absolute_error, value_report.max_absolute_error);
  }
  for (std::uint64_t i = 1; i < n; ++i) {
    if (sorted[i] == sorted[i - 1] && sorted_values[i] < sorted_values[i - 1]) {
      verdict.failed_checks.push_back("equal keys at " + std::to_string(i - 1) + " and " +
                                      std::to_string(i) + " lost their input order (not stable)");
      break;
    }
  }
  return verdict;
}

}  // namespace

const KernelDefinition& radix_sort_u32_kernel() {
  static const RadixSort kKernel(false);
  return kKernel;
}
const KernelDefinition& radix_sort_pairs_u32_kernel() {
  static const RadixSort kKernel(true);
  return kKernel;
}

}  // namespace wgsl_forge::kernels
