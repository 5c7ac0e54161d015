// radix_sort_u32 and radix_sort_pairs_u32: stable ascending sort of u32 keys, alone or carrying
// u32 values.
//
// Least-significant-digit radix sort, 32 / digit_bits rounds; each round is five passes of one
// submission, none waiting on another workgroup (safe without forward-progress guarantees):
//   digit_count    each tile (workgroup_size * keys_per_invocation consecutive keys) counts its
//                  digits into counts[digit * tiles + tile] (digit-major, so one scan gives every
//                  offset), in workgroups of 64 (see digit_count_wgsl);
//   counts_reduce, counts_spine, counts_apply
//                  an exclusive reduce-then-scan of the counts;
//   scatter        each tile ranks its keys stably and writes them, with their values, to
//                  counts[digit * tiles + tile] + rank.
// Rounds alternate between a scratch buffer and the output; the input is never written.
//
// The scatter ranks in one of two ways (knob use_subgroups):
//   0  each invocation owns consecutive keys and counts them per digit; a workgroup scan over
//      the invocations, one per digit, orders them (4 * 2^digit_bits * (workgroup_size + 1)
//      bytes of workgroup memory, so at most 4 digit bits). Keys go straight from registers to
//      their place in the output.
//   1  each subgroup owns a run of sg * keys_per_invocation keys, read striped (key j of lane l
//      is the run's j sg + l-th, so loads are coalesced). For each j, digit_bits ballots find the
//      lanes holding the same digit; the lowest of them adds their number to the subgroup's
//      counter for that digit (16-bit counters, two per word) and the others take their rank
//      from it. A scan over the subgroups, then over the digits, gives each key its place in the
//      tile sorted by digit; the tile is staged in that order in workgroup memory and written
//      out in order, so that consecutive invocations write consecutive addresses of each
//      digit's run. This needs subgroups of at least 8 invocations (room for workgroup_size / 8
//      subgroups' counters) and numbered in order of local_invocation_index, as Vulkan drivers
//      do; certification checks the result. The loops over an invocation's key slots are
//      unrolled (unrolled_loop), so that Dawn's bounds clamps are not needed on their indices.
// Past the end of the input, the last tile's keys read as 0xffffffff: they rank after every real
// key of the last digit, and are not written.
// Knobs: workgroup_size, keys_per_invocation, digit_bits (2, 4, or 8 with subgroups),
// use_subgroups.
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

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512}, 128};
const KnobSpec kKeysPerInvocation{
    "keys_per_invocation", "keys per invocation and tile", {1, 2, 4, 8, 16}, 4};
const KnobSpec kDigitBits{"digit_bits", "bits sorted per round", {2, 4, 8}, 4};
const KnobSpec kUseSubgroups{
    "use_subgroups", "rank with subgroup ballots and stage the tile", {0, 1}, 0};

class RadixSort final : public KernelDefinition {
 public:
  explicit RadixSort(bool pairs) : pairs_(pairs) {}

  std::string_view id() const override {
    return pairs_ ? "radix_sort_pairs_u32" : "radix_sort_u32";
  }
  std::uint32_t revision() const override { return 4; }
  std::string_view summary() const override {
    return pairs_ ? "stable ascending sort of u32 keys carrying u32 values"
                  : "ascending sort of u32 keys";
  }

  std::vector<KnobSpec> knobs() const override {
    return {kWorkgroupSize, kKeysPerInvocation, kDigitBits, kUseSubgroups};
  }

  Status check_resources(const Schedule& schedule, const DeviceCapabilities& device) const override;

  // A round reads keys_in and writes keys_out; the plan binds them to the input, the scratch
  // buffer and the output in turn.
  std::vector<WgslBinding> wgsl_bindings(const Schedule&) const override {
    std::vector<WgslBinding> table = {params_binding("Params"), storage_read(1, "keys_in", "u32"),
                                      storage_read_write(2, "keys_out", "u32"),
                                      storage_read_write(3, "counts", "u32"),
                                      storage_read_write(4, "block_sums", "u32")};
    if (pairs_) {
      table.push_back(storage_read(5, "values_in", "u32"));
      table.push_back(storage_read_write(6, "values_out", "u32"));
    }
    return table;
  }

  std::vector<BufferSpec> buffer_specs() const override {
    constexpr const char* kColumn = "n elements, at least 1";
    std::vector<BufferSpec> specs = {
        {"keys", ElementType::kU32, BufferRole::kInput, kColumn},
        {"sorted", ElementType::kU32, BufferRole::kOutput, kColumn},
        {"scratch", ElementType::kU32, BufferRole::kScratch, kColumn},
        {"counts", ElementType::kU32, BufferRole::kScratch, "2^digit_bits * tiles elements"},
        {"block_sums", ElementType::kU32, BufferRole::kScratch, "the counts' scan blocks"}};
    if (pairs_) {
      specs.push_back({"values", ElementType::kU32, BufferRole::kInput, kColumn});
      specs.push_back({"sorted_values", ElementType::kU32, BufferRole::kOutput, kColumn});
      specs.push_back({"scratch_values", ElementType::kU32, BufferRole::kScratch, kColumn});
    }
    return specs;
  }

  std::vector<std::string> entry_points(const Schedule&) const override {
    return {"digit_count", "counts_reduce", "counts_spine", "counts_apply", "scatter"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override;

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t n = problem.elements;
    const std::uint32_t wg = knob(schedule, kWorkgroupSize);
    const std::uint32_t bits = knob(schedule, kDigitBits);
    const std::uint64_t tile = std::uint64_t{wg} * knob(schedule, kKeysPerInvocation);
    const std::uint64_t tiles = ceil_div(n, tile);
    const std::uint64_t count_length = (std::uint64_t{1} << bits) * tiles;
    const std::uint64_t count_blocks = ceil_div(count_length, std::uint64_t{wg} * kCountScanItems);
    const std::uint64_t bytes = std::max<std::uint64_t>(4, n * 4);
    DispatchPlan plan;
    std::map<std::string, std::uint64_t> sizes = {
        {"keys", bytes},
        {"sorted", bytes},
        {"scratch", bytes},
        {"counts", std::max<std::uint64_t>(4, count_length * 4)},
        {"block_sums", std::max<std::uint64_t>(4, count_blocks * 4)}};
    if (pairs_) {
      sizes.insert({{"values", bytes}, {"sorted_values", bytes}, {"scratch_values", bytes}});
    }
    plan.buffers = make_buffer_plans(buffer_specs(), sizes);
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

  // The H200's (driver 580.159.04) budget-24 winner for keys, 21.9 G keys/s with revision 4, and
  // the fastest timed for pairs (docs/performance.md).
  std::vector<std::string> starting_points() const override {
    return {"digit_bits=8,keys_per_invocation=16,use_subgroups=1,workgroup_size=256"};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem;
    problem.elements = cpu_adapter ? (1u << 16) : (1u << 28);
    return problem;
  }

 private:
  std::uint64_t workgroup_bytes(const Schedule& schedule) const;
  std::string invocation_ranked_scatter_wgsl(const Schedule& schedule) const;
  std::string subgroup_ranked_scatter_wgsl(const Schedule& schedule) const;

  bool pairs_;
};

// The subgroup ranking keeps counters for workgroup_size / kMinSubgroup subgroups.
constexpr std::uint32_t kMinSubgroup = 8;

// Words of the subgroup ranking's counters: two 16-bit digit counters per word and subgroup.
std::uint32_t subgroup_counter_words(const Schedule& schedule) {
  return (knob(schedule, kWorkgroupSize) / kMinSubgroup) * ((1u << knob(schedule, kDigitBits)) / 2);
}

std::uint64_t RadixSort::workgroup_bytes(const Schedule& schedule) const {
  const std::uint64_t wg = knob(schedule, kWorkgroupSize);
  const std::uint64_t digits = std::uint64_t{1} << knob(schedule, kDigitBits);
  const std::uint64_t scan = 4 * wg;  // workgroup_exclusive_scan
  const std::uint64_t count = 4 * digits;
  if (knob(schedule, kUseSubgroups) == 0) return count + scan + 4 * digits * (wg + 1);
  const std::uint64_t tile = wg * knob(schedule, kKeysPerInvocation);
  const std::uint64_t counters = subgroup_counter_words(schedule);
  const std::uint64_t digit_group_sums = 4 * (wg / kMinSubgroup);
  return count + scan + 4 * std::max(counters, tile) + 8 * digits + digit_group_sums +
         (pairs_ ? 4 * tile : 0);
}

Status RadixSort::check_resources(const Schedule& schedule,
                                  const DeviceCapabilities& device) const {
  const bool subgroups = knob(schedule, kUseSubgroups) == 1;
  if (knob(schedule, kDigitBits) == 8 && !subgroups) {
    return Error(ErrorKind::kInvalidInput,
                 "Knob digit_bits (8) needs use_subgroups (1): ranking without subgroups keeps a "
                 "counter per digit and invocation, which fits up to 4 digit bits.");
  }
  if (subgroups && device.subgroup_min_size != 0 && device.subgroup_min_size < kMinSubgroup) {
    return Error(ErrorKind::kInvalidInput, "Knob use_subgroups (1) needs subgroups of at least " +
                                               std::to_string(kMinSubgroup) +
                                               " invocations; the adapter's smallest has " +
                                               std::to_string(device.subgroup_min_size) + ".");
  }
  const std::uint64_t bytes = workgroup_bytes(schedule);
  if (bytes > device.max_workgroup_storage_size) {
    return Error(ErrorKind::kInvalidInput,
                 "Knobs workgroup_size (" + std::to_string(knob(schedule, kWorkgroupSize)) +
                     "), keys_per_invocation (" +
                     std::to_string(knob(schedule, kKeysPerInvocation)) + "), digit_bits (" +
                     std::to_string(knob(schedule, kDigitBits)) + ") and use_subgroups (" +
                     std::to_string(knob(schedule, kUseSubgroups)) + ") need " +
                     std::to_string(bytes) +
                     " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                     std::to_string(device.max_workgroup_storage_size) + ").");
  }
  return Ok{};
}

// digit_count runs in workgroups of 64 invocations whatever the tile, so that each has many keys
// in flight (up to 128), loaded 16 at a time before they are counted. Keys are counted either
// with one workgroup atomic each or, with subgroups and up to 16 digits, in byte counters in
// registers (digit d in byte d % 4 of word d / 4), which each subgroup adds in 16-bit halves (at
// most 64 lanes x 128 keys) and then into the tile's counters, one atomic per digit.
constexpr std::uint32_t kCountWorkgroup = 64;

const char* const kAtomicCountWgsl = R"(  workgroupBarrier();
  for (var chunk = 0u; chunk < COUNT_KEYS; chunk += COUNT_CHUNK) {
    let keys = load_count_chunk(first + chunk * COUNT_WG);
    for (var item = 0u; item < COUNT_CHUNK; item++) {
      if (first + (chunk + item) * COUNT_WG < params.n) {
        atomicAdd(&tile_counts[digit(keys[item])], 1u);
      }
    }
  }
)";

const char* const kPackedCountWgsl = R"(  var packed = vec4u(0u);
  for (var chunk = 0u; chunk < COUNT_KEYS; chunk += COUNT_CHUNK) {
    let keys = load_count_chunk(first + chunk * COUNT_WG);
    for (var item = 0u; item < COUNT_CHUNK; item++) {
      let d = digit(keys[item]);
      let inside = first + (chunk + item) * COUNT_WG < params.n;
      let one = select(0u, 1u << (8u * (d & 3u)), inside);
      packed += select(vec4u(0u), vec4u(one), vec4u(d / 4u) == vec4u(0u, 1u, 2u, 3u));
    }
  }
  let even_bytes = subgroupAdd(packed & vec4u(0x00ff00ffu));  // bytes 0 and 2 of each word
  let odd_bytes = subgroupAdd((packed >> vec4u(8u)) & vec4u(0x00ff00ffu));  // bytes 1 and 3
  workgroupBarrier();
  for (var d = lane; d < DIGITS; d += sg) {
    let halves = select(even_bytes[d / 4u], odd_bytes[d / 4u], (d & 1u) == 1u);
    let count = (halves >> (16u * ((d / 2u) & 1u))) & 0xffffu;
    if (count != 0u) { atomicAdd(&tile_counts[d], count); }
  }
)";

std::string digit_count_wgsl(const Schedule& schedule, bool packed) {
  const std::uint32_t keys =
      knob(schedule, kWorkgroupSize) * knob(schedule, kKeysPerInvocation) / kCountWorkgroup;
  const std::string subgroup_builtins =
      packed ? ",\n               @builtin(subgroup_invocation_id) lane: u32, "
               "@builtin(subgroup_size) sg: u32"
             : "";
  return "const COUNT_WG: u32 = " + std::to_string(kCountWorkgroup) +
         "u;\n"
         "const COUNT_KEYS: u32 = " +
         std::to_string(keys) +
         "u;  // keys per invocation\n"
         "const COUNT_CHUNK: u32 = " +
         std::to_string(std::min(keys, 16u)) +
         "u;  // keys loaded before they are counted\n"
         "// COUNT_CHUNK keys, COUNT_WG apart from `first` (clamped loads: no branch).\n"
         "fn load_count_chunk(first: u32) -> array<u32, COUNT_CHUNK> {\n"
         "  let last = max(params.n, 1u) - 1u;\n"
         "  var keys = array<u32, COUNT_CHUNK>();\n"
         "  for (var item = 0u; item < COUNT_CHUNK; item++) {\n"
         "    keys[item] = keys_in[min(first + item * COUNT_WG, last)];\n"
         "  }\n"
         "  return keys;\n"
         "}\n"
         "@compute @workgroup_size(COUNT_WG)\n"
         "fn digit_count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: "
         "vec3u,\n"
         "               @builtin(local_invocation_index) local: u32" +
         subgroup_builtins +
         ") {\n"
         "  let tile = linear_workgroup(group, groups);\n"
         "  for (var d = local; d < DIGITS; d += COUNT_WG) { atomicStore(&tile_counts[d], 0u); }\n"
         "  let first = tile * (WG * KPI) + local;\n" +
         (packed ? kPackedCountWgsl : kAtomicCountWgsl) +
         "  workgroupBarrier();\n"
         "  if (tile >= params.tiles) { return; }\n"
         "  for (var d = local; d < DIGITS; d += COUNT_WG) {\n"
         "    counts[d * params.tiles + tile] = atomicLoad(&tile_counts[d]);\n"
         "  }\n"
         "}\n";
}

std::string RadixSort::generate_wgsl(const Schedule& schedule) const {
  const std::uint32_t wg_value = knob(schedule, kWorkgroupSize);
  const std::string wg = std::to_string(wg_value);
  const std::string kpi = std::to_string(knob(schedule, kKeysPerInvocation));
  const std::uint32_t digits_value = 1u << knob(schedule, kDigitBits);
  const std::string digits = std::to_string(digits_value);
  const std::string mask = std::to_string(digits_value - 1);
  const bool subgroups = knob(schedule, kUseSubgroups) == 1;
  std::string wgsl = std::string(subgroups ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl +
                     "\nstruct Params { n: u32, tiles: u32, shift: u32, count_length: u32, "
                     "count_blocks: u32 }\n" +
                     binding_declarations(wgsl_bindings(schedule));
  wgsl += "\nconst WG: u32 = " + wg + "u;\nconst KPI: u32 = " + kpi +
          "u;\nconst DIGITS: u32 = " + digits +
          "u;\n"
          "fn digit(key: u32) -> u32 { return (key >> params.shift) & " +
          mask +
          "u; }\n"
          "fn scan_length() -> u32 { return params.count_length; }\n"
          "fn scan_blocks() -> u32 { return params.count_blocks; }\n"
          "fn scan_value(i: u32) -> u32 { return counts[i]; }\n"
          "fn scan_store(i: u32, prefix: u32) { counts[i] = prefix; }\n"
          "fn scan_total(total: u32) {}\n\n" +
          workgroup_scan_wgsl(wg_value) +
          reduce_then_scan_wgsl("counts", wg_value, kCountScanItems) +
          "\nvar<workgroup> tile_counts: array<atomic<u32>, DIGITS>;\n";
  wgsl += digit_count_wgsl(schedule, subgroups && digits_value <= 16);
  return wgsl + (subgroups ? subgroup_ranked_scatter_wgsl(schedule)
                           : invocation_ranked_scatter_wgsl(schedule));
}

// Invocation `local` owns keys [first, first + KPI) of the tile, in order; digit_prefix[d * WG +
// local] becomes the number of digit-d keys owned by earlier invocations.
std::string RadixSort::invocation_ranked_scatter_wgsl(const Schedule& schedule) const {
  const std::uint32_t wg = knob(schedule, kWorkgroupSize);
  const std::uint32_t digits = 1u << knob(schedule, kDigitBits);
  return "\nvar<workgroup> digit_prefix: array<u32, " + std::to_string(digits * wg) +
         ">;\n"
         "@compute @workgroup_size(WG)\n"
         "fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: "
         "vec3u,\n"
         "           @builtin(local_invocation_index) local: u32) {\n"
         "  let tile = linear_workgroup(group, groups);\n"
         "  let first = tile * (WG * KPI) + local * KPI;\n"
         "  var keys = array<u32, KPI>();\n" +
         std::string(pairs_ ? "  var values = array<u32, KPI>();\n" : "") +
         "  var mine = array<u32, DIGITS>();\n"
         "  for (var j = 0u; j < KPI; j++) {\n"
         "    let i = first + j;\n"
         "    if (i < params.n) {\n"
         "      keys[j] = keys_in[i];\n" +
         std::string(pairs_ ? "      values[j] = values_in[i];\n" : "") +
         "      mine[digit(keys[j])] += 1u;\n"
         "    }\n"
         "  }\n"
         "  for (var d = 0u; d < DIGITS; d++) { digit_prefix[d * WG + local] = mine[d]; }\n"
         "  workgroupBarrier();\n"
         "  for (var offset = 1u; offset < WG; offset *= 2u) {\n"
         "    var adds = array<u32, DIGITS>();\n"
         "    if (local >= offset) {\n"
         "      for (var d = 0u; d < DIGITS; d++) { adds[d] = digit_prefix[d * WG + local - "
         "offset]; }\n"
         "    }\n"
         "    workgroupBarrier();\n"
         "    for (var d = 0u; d < DIGITS; d++) { digit_prefix[d * WG + local] += adds[d]; }\n"
         "    workgroupBarrier();\n"
         "  }\n"
         "  if (tile >= params.tiles) { return; }\n"
         "  var next = array<u32, DIGITS>();\n"
         "  for (var d = 0u; d < DIGITS; d++) {\n"
         "    next[d] = counts[d * params.tiles + tile] + digit_prefix[d * WG + local] - "
         "mine[d];\n"
         "  }\n"
         "  for (var j = 0u; j < KPI; j++) {\n"
         "    if (first + j < params.n) {\n"
         "      let d = digit(keys[j]);\n"
         "      keys_out[next[d]] = keys[j];\n" +
         std::string(pairs_ ? "      values_out[next[d]] = values[j];\n" : "") +
         "      next[d] += 1u;\n"
         "    }\n"
         "  }\n"
         "}\n";
}

// See the file comment. ranked holds, during ranking, the subgroups' digit counters (subgroup w,
// digits 2q and 2q + 1 in the low and high half of word w * DIGITS / 2 + q) and then the tile's
// keys in their ranked order; digit_base holds each digit's first place in the tile, then the
// output index of the tile's place 0 for that digit.
std::string RadixSort::subgroup_ranked_scatter_wgsl(const Schedule& schedule) const {
  const std::uint32_t wg = knob(schedule, kWorkgroupSize);
  const std::uint32_t digits = 1u << knob(schedule, kDigitBits);
  const std::uint32_t kpi = knob(schedule, kKeysPerInvocation);
  const std::uint32_t tile = wg * kpi;
  const std::uint32_t counter_words = subgroup_counter_words(schedule);
  const std::uint32_t digits_per_invocation = std::max(1u, digits / wg);
  std::string wgsl =
      "\nconst BITS: u32 = " + std::to_string(knob(schedule, kDigitBits)) +
      "u;\n"
      "const WORDS: u32 = " +
      std::to_string(digits / 2) +
      "u;  // counter words per subgroup\n"
      "const COUNTER_WORDS: u32 = " +
      std::to_string(counter_words) +
      "u;\n"
      "const PER: u32 = " +
      std::to_string(digits_per_invocation) +
      "u;  // digits per invocation in the scan over digits\n"
      "var<workgroup> ranked: array<atomic<u32>, " +
      std::to_string(std::max(counter_words, tile)) +
      ">;\n"
      "var<workgroup> digit_base: array<u32, DIGITS>;\n"
      "var<workgroup> digit_group_sums: array<u32, " +
      std::to_string(wg / kMinSubgroup) +
      ">;  // the digits' sums per subgroup\n"
      "var<workgroup> tile_start: array<u32, DIGITS>;  // the tile's first output place per "
      "digit\n" +
      std::string(pairs_
                      ? "var<workgroup> ranked_values: array<u32, " + std::to_string(tile) + ">;\n"
                      : "") +
      "\n// The lanes of a vec4u ballot below `lane`.\n"
      "fn lanes_below(lane: u32) -> vec4u {\n"
      "  var below = vec4u(0u);\n"
      "  for (var c = 0u; c < 4u; c++) {\n"
      "    if (lane >= c * 32u + 32u) {\n"
      "      below[c] = 0xffffffffu;\n"
      "    } else if (lane > c * 32u) {\n"
      "      below[c] = (1u << (lane - c * 32u)) - 1u;\n"
      "    }\n"
      "  }\n"
      "  return below;\n"
      "}\n"
      "fn lanes_in(mask: vec4u) -> u32 {\n"
      "  let c = countOneBits(mask);\n"
      "  return c.x + c.y + c.z + c.w;\n"
      "}\n"
      "fn first_lane(mask: vec4u) -> u32 {\n"
      "  for (var c = 0u; c < 4u; c++) {\n"
      "    if (mask[c] != 0u) { return c * 32u + firstTrailingBit(mask[c]); }\n"
      "  }\n"
      "  return 0u;\n"
      "}\n"
      "// The lanes holding digit d: one ballot per bit. Most GPUs' subgroups have at most 32\n"
      "// lanes, whose ballots are the first word alone (a quarter of the work).\n"
      "fn same_digit_narrow(d: u32) -> u32 {\n"
      "  var same = subgroupBallot(true).x;\n"
      "  for (var bit = 0u; bit < BITS; bit++) {\n"
      "    let is_set = ((d >> bit) & 1u) == 1u;\n"
      "    let vote = subgroupBallot(is_set).x;\n"
      "    same &= select(~vote, vote, is_set);\n"
      "  }\n"
      "  return same;\n"
      "}\n"
      "fn same_digit_wide(d: u32) -> vec4u {\n"
      "  var same = subgroupBallot(true);\n"
      "  for (var bit = 0u; bit < BITS; bit++) {\n"
      "    let is_set = ((d >> bit) & 1u) == 1u;\n"
      "    let vote = subgroupBallot(is_set);\n"
      "    same &= select(~vote, vote, is_set);\n"
      "  }\n"
      "  return same;\n"
      "}\n\n"
      "@compute @workgroup_size(WG)\n"
      "fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,\n"
      "           @builtin(local_invocation_index) local: u32,\n"
      "           @builtin(subgroup_invocation_id) lane: u32,\n"
      "           @builtin(subgroup_size) sg: u32) {\n"
      "  let tile = linear_workgroup(group, groups);\n"
      "  if (tile >= params.tiles) { return; }\n"
      "  let subgroup = local / sg;\n"
      "  for (var w = local; w < COUNTER_WORDS; w += WG) { atomicStore(&ranked[w], 0u); }\n"
      "  workgroupBarrier();\n"
      // The tile's output bases are read now, so that their latency passes during the ranking.
      "  for (var d = local; d < DIGITS; d += WG) { tile_start[d] = counts[d * params.tiles + "
      "tile]; }\n"
      "  let run = tile * (WG * KPI) + subgroup * sg * KPI;\n"
      "  let below = lanes_below(lane);\n"
      // Every key is loaded before the ranking, clamped and selected rather than guarded by a
      // branch: ballots follow.
      "  let last = params.n - 1u;  // a tile exists, so n > 0\n"
      "  var keys = array<u32, KPI>();\n" +
      std::string(pairs_ ? "  var values = array<u32, KPI>();\n" : "") +
      unrolled_loop("j", kpi,
                    "    let i = run + j * sg + lane;\n"
                    "    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);\n" +
                        std::string(pairs_ ? "    values[j] = values_in[min(i, last)];\n" : "")) +
      "  var places = array<u32, KPI>();  // rank among the subgroup's keys of the same "
      "digit\n" +
      unrolled_loop(
          "j", kpi,
          "    let d = digit(keys[j]);\n"
          "    var rank = 0u;\n"
          "    var peers = 0u;\n"
          "    var leader = 0u;\n"
          "    if (sg <= 32u) {\n"
          "      let same = same_digit_narrow(d);\n"
          "      rank = countOneBits(same & below.x);\n"
          "      peers = countOneBits(same);\n"
          "      leader = firstTrailingBit(same);\n"
          "    } else {\n"
          "      let same = same_digit_wide(d);\n"
          "      rank = lanes_in(same & below);\n"
          "      peers = lanes_in(same);\n"
          "      leader = first_lane(same);\n"
          "    }\n"
          "    var before = 0u;\n"
          "    if (rank == 0u) {\n"
          "      let half = 16u * (d & 1u);\n"
          "      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);\n"
          "      before = (word >> half) & 0xffffu;\n"
          "    }\n"
          "    places[j] = subgroupShuffle(before, leader) + rank;\n") +
      "  workgroupBarrier();\n"
      // Exclusive scan over the subgroups, two digits per word: each half stays below 2^16.
      "  let subgroups = WG / sg;\n"
      "  for (var q = local; q < WORDS; q += WG) {\n"
      "    var running = 0u;\n"
      "    for (var w = 0u; w < subgroups; w++) {\n"
      "      let count = atomicLoad(&ranked[w * WORDS + q]);\n"
      "      atomicStore(&ranked[w * WORDS + q], running);\n"
      "      running += count;\n"
      "    }\n"
      "    digit_base[2u * q] = running & 0xffffu;\n"
      "    digit_base[2u * q + 1u] = running >> 16u;\n"
      "  }\n"
      "  workgroupBarrier();\n"
      // Exclusive scan over the digits: invocation t owns digits [t PER, t PER + PER). A subgroup
      // scan and one barrier, where a workgroup scan takes 2 log2(WG) + 2; the sums are read by
      // a select, not a branch, since a subgroup scan follows.
      "  var owned = 0u;\n"
      "  for (var q = 0u; q < PER; q++) {\n"
      "    let d = local * PER + q;\n"
      "    owned += select(0u, digit_base[min(d, DIGITS - 1u)], d < DIGITS);\n"
      "  }\n"
      "  var start = subgroupExclusiveAdd(owned);\n"
      "  let subgroup_total = subgroupAdd(owned);\n"
      "  if (lane == 0u) { digit_group_sums[subgroup] = subgroup_total; }\n"
      "  workgroupBarrier();\n"
      "  for (var w = 0u; w < subgroup; w++) { start += digit_group_sums[w]; }\n"
      "  if (local * PER < DIGITS) {\n"
      "    for (var q = 0u; q < PER; q++) {\n"
      "      let total = digit_base[local * PER + q];\n"
      "      digit_base[local * PER + q] = start;\n"
      "      start += total;\n"
      "    }\n"
      "  }\n"
      "  workgroupBarrier();\n" +
      unrolled_loop("j", kpi,
                    "    let d = digit(keys[j]);\n"
                    "    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);\n"
                    "    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);\n") +
      "  workgroupBarrier();\n" +
      unrolled_loop("j", kpi,
                    "    atomicStore(&ranked[places[j]], keys[j]);\n" +
                        std::string(pairs_ ? "    ranked_values[places[j]] = values[j];\n" : "")) +
      "  for (var d = local; d < DIGITS; d += WG) {\n"
      "    digit_base[d] = tile_start[d] - digit_base[d];\n"
      "  }\n"
      "  workgroupBarrier();\n"
      "  let valid = min(WG * KPI, params.n - tile * (WG * KPI));\n"
      "  for (var p = local; p < valid; p += WG) {\n"
      "    let key = atomicLoad(&ranked[p]);\n"
      "    keys_out[digit_base[digit(key)] + p] = key;\n" +
      std::string(pairs_ ? "    values_out[digit_base[digit(key)] + p] = ranked_values[p];\n"
                         : "") +
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
