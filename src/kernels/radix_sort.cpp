// radix_sort_u32 and radix_sort_pairs_u32: stable ascending sort of u32 keys, alone or carrying
// u32 values.
//
// Least-significant-digit radix sort, 32 / digit_bits rounds; each round is five passes of one
// submission, none waiting on another workgroup (safe without forward-progress guarantees):
//   digit_count    each tile (workgroup_size * keys_per_invocation consecutive keys) counts its
//                  digits into counts[digit * tiles + tile] (digit-major, so one scan gives every
//                  offset), in workgroups of 64 (see kDigitCountWgsl);
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
    return {(pairs_ ? 16 : 8) * problem.elements, 0, problem.elements, pairs_ ? "pairs" : "keys"};
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

// --- WGSL -----------------------------------------------------------------------------------
// The shader is the modules below in this order; a schedule's values enter through constants
// (radix_constants, subgroup_scatter_constants), and the keys-only and pairs variants differ
// only in the value hooks (kKeyOnlyValuesWgsl, kPairValuesWgsl), which a compiler removes where
// they do nothing.

const char* const kParamsWgsl = R"(
struct Params { n: u32, tiles: u32, shift: u32, count_length: u32, count_blocks: u32 }
)";

// The digit of a key this round, and the reduce-then-scan of the counts in blocks of
// WG * SCAN_ITEMS (each invocation takes SCAN_ITEMS consecutive counts), as three entry points
// that never wait on another workgroup:
//   counts_reduce  block b: block_sums[b] = the block's sum;
//   counts_spine   one workgroup: exclusive scan of block_sums in place;
//   counts_apply   block b: every count becomes its exclusive prefix.
const char* const kCountsScanWgsl = R"(
fn digit(key: u32) -> u32 { return (key >> params.shift) & (DIGITS - 1u); }

@compute @workgroup_size(WG)
fn counts_reduce(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                 @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let first = b * (WG * SCAN_ITEMS) + local * SCAN_ITEMS;
  var sum = 0u;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < params.count_length) { sum += counts[i]; }
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (local == 0u && b < params.count_blocks) { block_sums[b] = scanned.y; }
}

@compute @workgroup_size(WG)
fn counts_spine(@builtin(local_invocation_index) local: u32) {
  var carry = 0u;
  let blocks = params.count_blocks;
  for (var start = 0u; start < blocks; start += WG * SCAN_ITEMS) {
    var values = array<u32, SCAN_ITEMS>();
    var sum = 0u;
    for (var j = 0u; j < SCAN_ITEMS; j++) {
      let i = start + local * SCAN_ITEMS + j;
      if (i < blocks) { values[j] = block_sums[i]; }
      sum += values[j];
    }
    let scanned = workgroup_exclusive_scan(sum, local);
    var running = carry + scanned.x;
    for (var j = 0u; j < SCAN_ITEMS; j++) {
      let i = start + local * SCAN_ITEMS + j;
      if (i < blocks) { block_sums[i] = running; }
      running += values[j];
    }
    carry += scanned.y;
  }
}

@compute @workgroup_size(WG)
fn counts_apply(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let first = b * (WG * SCAN_ITEMS) + local * SCAN_ITEMS;
  var values = array<u32, SCAN_ITEMS>();
  var sum = 0u;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < params.count_length) { values[j] = counts[i]; }
    sum += values[j];
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (b >= params.count_blocks) { return; }
  var running = block_sums[b] + scanned.x;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < params.count_length) { counts[i] = running; }
    running += values[j];
  }
}
)";

// digit_count runs in workgroups of COUNT_WG (64) invocations whatever the tile, so that each
// has many keys in flight (COUNT_KEYS, up to 128), loaded COUNT_CHUNK (16) at a time before
// they are counted. Keys are counted either with one workgroup atomic each
// (kAtomicDigitCountWgsl) or, with subgroups and up to 16 digits, in byte counters in registers
// (kPackedDigitCountWgsl: digit d in byte d % 4 of word d / 4), which each subgroup adds in
// 16-bit halves (at most 64 lanes x 128 keys) and then into the tile's counters, one atomic per
// digit.
constexpr std::uint32_t kCountWorkgroup = 64;

const char* const kDigitCountWgsl = R"(
var<workgroup> tile_counts: array<atomic<u32>, DIGITS>;

// COUNT_CHUNK keys, COUNT_WG apart from `first` (clamped loads: no branch).
fn load_count_chunk(first: u32) -> array<u32, COUNT_CHUNK> {
  let last = max(params.n, 1u) - 1u;
  var keys = array<u32, COUNT_CHUNK>();
  for (var item = 0u; item < COUNT_CHUNK; item++) {
    keys[item] = keys_in[min(first + item * COUNT_WG, last)];
  }
  return keys;
}

fn clear_tile_counts(local: u32) {
  for (var d = local; d < DIGITS; d += COUNT_WG) { atomicStore(&tile_counts[d], 0u); }
}

// Call in uniform control flow: it waits for the whole workgroup's counts.
fn store_tile_counts(tile: u32, local: u32) {
  workgroupBarrier();
  if (tile >= params.tiles) { return; }
  for (var d = local; d < DIGITS; d += COUNT_WG) {
    counts[d * params.tiles + tile] = atomicLoad(&tile_counts[d]);
  }
}
)";

const char* const kAtomicDigitCountWgsl = R"(
@compute @workgroup_size(COUNT_WG)
fn digit_count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let tile = linear_workgroup(group, groups);
  clear_tile_counts(local);
  let first = tile * (WG * KPI) + local;
  workgroupBarrier();
  for (var chunk = 0u; chunk < COUNT_KEYS; chunk += COUNT_CHUNK) {
    let keys = load_count_chunk(first + chunk * COUNT_WG);
    for (var item = 0u; item < COUNT_CHUNK; item++) {
      if (first + (chunk + item) * COUNT_WG < params.n) {
        atomicAdd(&tile_counts[digit(keys[item])], 1u);
      }
    }
  }
  store_tile_counts(tile, local);
}
)";

const char* const kPackedDigitCountWgsl = R"(
@compute @workgroup_size(COUNT_WG)
fn digit_count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32,
               @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) sg: u32) {
  let tile = linear_workgroup(group, groups);
  clear_tile_counts(local);
  let first = tile * (WG * KPI) + local;
  var packed = vec4u(0u);
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
  store_tile_counts(tile, local);
}
)";

// The value hooks of the scatters: load_value(i) reads value i of the input, store_value(p, v)
// writes v at output place p, stage_value(p, v) and staged_value(p) keep a tile's values in
// workgroup memory in their ranked order (the subgroup scatter).
const char* const kKeyOnlyValuesWgsl = R"(
fn load_value(i: u32) -> u32 { return 0u; }
fn store_value(place: u32, value: u32) {}
fn stage_value(place: u32, value: u32) {}
fn staged_value(place: u32) -> u32 { return 0u; }
)";

const char* const kPairValuesWgsl = R"(
fn load_value(i: u32) -> u32 { return values_in[i]; }
fn store_value(place: u32, value: u32) { values_out[place] = value; }
)";

const char* const kStagedPairValuesWgsl = R"(
var<workgroup> ranked_values: array<u32, WG * KPI>;
fn stage_value(place: u32, value: u32) { ranked_values[place] = value; }
fn staged_value(place: u32) -> u32 { return ranked_values[place]; }
)";

// Invocation `local` owns keys [first, first + KPI) of the tile, in order; digit_prefix[d * WG +
// local] becomes the number of digit-d keys owned by earlier invocations.
const char* const kInvocationRankedScatterWgsl = R"(
var<workgroup> digit_prefix: array<u32, DIGITS * WG>;

@compute @workgroup_size(WG)
fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) local: u32) {
  let tile = linear_workgroup(group, groups);
  let first = tile * (WG * KPI) + local * KPI;
  var keys = array<u32, KPI>();
  var values = array<u32, KPI>();
  var mine = array<u32, DIGITS>();
  for (var j = 0u; j < KPI; j++) {
    let i = first + j;
    if (i < params.n) {
      keys[j] = keys_in[i];
      values[j] = load_value(i);
      mine[digit(keys[j])] += 1u;
    }
  }
  for (var d = 0u; d < DIGITS; d++) { digit_prefix[d * WG + local] = mine[d]; }
  workgroupBarrier();
  for (var offset = 1u; offset < WG; offset *= 2u) {
    var adds = array<u32, DIGITS>();
    if (local >= offset) {
      for (var d = 0u; d < DIGITS; d++) { adds[d] = digit_prefix[d * WG + local - offset]; }
    }
    workgroupBarrier();
    for (var d = 0u; d < DIGITS; d++) { digit_prefix[d * WG + local] += adds[d]; }
    workgroupBarrier();
  }
  if (tile >= params.tiles) { return; }
  var next = array<u32, DIGITS>();
  for (var d = 0u; d < DIGITS; d++) {
    next[d] = counts[d * params.tiles + tile] + digit_prefix[d * WG + local] - mine[d];
  }
  for (var j = 0u; j < KPI; j++) {
    if (first + j < params.n) {
      let d = digit(keys[j]);
      keys_out[next[d]] = keys[j];
      store_value(next[d], values[j]);
      next[d] += 1u;
    }
  }
}
)";

// See the file comment. `ranked` holds, during ranking, the subgroups' digit counters (subgroup
// w, digits 2q and 2q + 1 in the low and high half of word w * WORDS + q) and then the tile's
// keys in their ranked order; digit_base holds each digit's first place in the tile, then the
// output index of the tile's place 0 for that digit.
const char* const kSubgroupRankingWgsl = R"(
var<workgroup> ranked: array<atomic<u32>, RANKED_WORDS>;
var<workgroup> digit_base: array<u32, DIGITS>;
var<workgroup> digit_group_sums: array<u32, WG / MIN_SUBGROUP>;  // the digits' sums per subgroup
var<workgroup> tile_start: array<u32, DIGITS>;  // the tile's first output place per digit

// The lanes of a vec4u ballot below `lane`.
fn lanes_below(lane: u32) -> vec4u {
  var below = vec4u(0u);
  for (var c = 0u; c < 4u; c++) {
    if (lane >= c * 32u + 32u) {
      below[c] = 0xffffffffu;
    } else if (lane > c * 32u) {
      below[c] = (1u << (lane - c * 32u)) - 1u;
    }
  }
  return below;
}
fn lanes_in(mask: vec4u) -> u32 {
  let c = countOneBits(mask);
  return c.x + c.y + c.z + c.w;
}
fn first_lane(mask: vec4u) -> u32 {
  for (var c = 0u; c < 4u; c++) {
    if (mask[c] != 0u) { return c * 32u + firstTrailingBit(mask[c]); }
  }
  return 0u;
}
// The lanes holding digit d: one ballot per bit. Most GPUs' subgroups have at most 32
// lanes, whose ballots are the first word alone (a quarter of the work).
fn same_digit_narrow(d: u32) -> u32 {
  var same = subgroupBallot(true).x;
  for (var bit = 0u; bit < BITS; bit++) {
    let is_set = ((d >> bit) & 1u) == 1u;
    let vote = subgroupBallot(is_set).x;
    same &= select(~vote, vote, is_set);
  }
  return same;
}
fn same_digit_wide(d: u32) -> vec4u {
  var same = subgroupBallot(true);
  for (var bit = 0u; bit < BITS; bit++) {
    let is_set = ((d >> bit) & 1u) == 1u;
    let vote = subgroupBallot(is_set);
    same &= select(~vote, vote, is_set);
  }
  return same;
}
)";

// The subgroup scatter's entry point in steps; the loops over an invocation's KPI key slots are
// unrolled (unrolled_loop) around the *_slot bodies, each of which sees its slot as `const j`.
const char* const kSubgroupScatterHeadWgsl = R"(
@compute @workgroup_size(WG)
fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) local: u32,
           @builtin(subgroup_invocation_id) lane: u32,
           @builtin(subgroup_size) sg: u32) {
  let tile = linear_workgroup(group, groups);
  if (tile >= params.tiles) { return; }
  let subgroup = local / sg;
  for (var w = local; w < COUNTER_WORDS; w += WG) { atomicStore(&ranked[w], 0u); }
  workgroupBarrier();
  // The tile's output bases are read now, so that their latency passes during the ranking.
  for (var d = local; d < DIGITS; d += WG) { tile_start[d] = counts[d * params.tiles + tile]; }
  let run = tile * (WG * KPI) + subgroup * sg * KPI;
  let below = lanes_below(lane);
  // Every key is loaded before the ranking, clamped and selected rather than guarded by a
  // branch: ballots follow.
  let last = params.n - 1u;  // a tile exists, so n > 0
  var keys = array<u32, KPI>();
  var values = array<u32, KPI>();
)";

const char* const kLoadSlotWgsl = R"(    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
    values[j] = load_value(min(i, last));
)";

const char* const kPlacesWgsl =
    R"(  var places = array<u32, KPI>();  // rank among the subgroup's keys of the same digit
)";

const char* const kRankSlotWgsl = R"(    let d = digit(keys[j]);
    var rank = 0u;
    var peers = 0u;
    var leader = 0u;
    if (sg <= 32u) {
      let same = same_digit_narrow(d);
      rank = countOneBits(same & below.x);
      peers = countOneBits(same);
      leader = firstTrailingBit(same);
    } else {
      let same = same_digit_wide(d);
      rank = lanes_in(same & below);
      peers = lanes_in(same);
      leader = first_lane(same);
    }
    var before = 0u;
    if (rank == 0u) {
      let half = 16u * (d & 1u);
      let word = atomicAdd(&ranked[subgroup * WORDS + d / 2u], peers << half);
      before = (word >> half) & 0xffffu;
    }
    places[j] = subgroupShuffle(before, leader) + rank;
)";

const char* const kDigitScansWgsl = R"(  workgroupBarrier();
  // Exclusive scan over the subgroups, two digits per word: each half stays below 2^16.
  let subgroups = WG / sg;
  for (var q = local; q < WORDS; q += WG) {
    var running = 0u;
    for (var w = 0u; w < subgroups; w++) {
      let count = atomicLoad(&ranked[w * WORDS + q]);
      atomicStore(&ranked[w * WORDS + q], running);
      running += count;
    }
    digit_base[2u * q] = running & 0xffffu;
    digit_base[2u * q + 1u] = running >> 16u;
  }
  workgroupBarrier();
  // Exclusive scan over the digits: invocation t owns digits [t PER, t PER + PER). A subgroup
  // scan and one barrier, where a workgroup scan takes 2 log2(WG) + 2; the sums are read by
  // a select, not a branch, since a subgroup scan follows.
  var owned = 0u;
  for (var q = 0u; q < PER; q++) {
    let d = local * PER + q;
    owned += select(0u, digit_base[min(d, DIGITS - 1u)], d < DIGITS);
  }
  var start = subgroupExclusiveAdd(owned);
  let subgroup_total = subgroupAdd(owned);
  if (lane == 0u) { digit_group_sums[subgroup] = subgroup_total; }
  workgroupBarrier();
  for (var w = 0u; w < subgroup; w++) { start += digit_group_sums[w]; }
  if (local * PER < DIGITS) {
    for (var q = 0u; q < PER; q++) {
      let total = digit_base[local * PER + q];
      digit_base[local * PER + q] = start;
      start += total;
    }
  }
  workgroupBarrier();
)";

const char* const kPlaceSlotWgsl = R"(    let d = digit(keys[j]);
    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);
    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);
)";

const char* const kBarrierWgsl = R"(  workgroupBarrier();
)";

const char* const kStageSlotWgsl = R"(    atomicStore(&ranked[places[j]], keys[j]);
    stage_value(places[j], values[j]);
)";

const char* const kSubgroupScatterTailWgsl = R"(  for (var d = local; d < DIGITS; d += WG) {
    digit_base[d] = tile_start[d] - digit_base[d];
  }
  workgroupBarrier();
  let valid = min(WG * KPI, params.n - tile * (WG * KPI));
  for (var p = local; p < valid; p += WG) {
    let key = atomicLoad(&ranked[p]);
    keys_out[digit_base[digit(key)] + p] = key;
    store_value(digit_base[digit(key)] + p, staged_value(p));
  }
}
)";

std::vector<WgslConstant> radix_constants(const Schedule& schedule) {
  const std::uint32_t tile = knob(schedule, kWorkgroupSize) * knob(schedule, kKeysPerInvocation);
  const std::uint32_t count_keys = tile / kCountWorkgroup;
  return {{"WG", knob(schedule, kWorkgroupSize), "invocations of the scan and scatter passes"},
          {"KPI", knob(schedule, kKeysPerInvocation), "keys per invocation of a tile"},
          {"DIGITS", 1u << knob(schedule, kDigitBits), ""},
          {"SCAN_ITEMS", kCountScanItems, "counts per invocation of the counts' scan"},
          {"COUNT_WG", kCountWorkgroup, "invocations of digit_count"},
          {"COUNT_KEYS", count_keys, "keys per invocation of digit_count"},
          {"COUNT_CHUNK", std::min(count_keys, 16u), "keys loaded before they are counted"}};
}

std::vector<WgslConstant> subgroup_scatter_constants(const Schedule& schedule) {
  const std::uint32_t digits = 1u << knob(schedule, kDigitBits);
  const std::uint32_t tile = knob(schedule, kWorkgroupSize) * knob(schedule, kKeysPerInvocation);
  const std::uint32_t counter_words = subgroup_counter_words(schedule);
  return {{"BITS", knob(schedule, kDigitBits), ""},
          {"MIN_SUBGROUP", kMinSubgroup, "the smallest subgroup the counters have room for"},
          {"WORDS", digits / 2, "counter words per subgroup"},
          {"COUNTER_WORDS", counter_words, ""},
          {"RANKED_WORDS", std::max(counter_words, tile), "the counters, then the ranked tile"},
          {"PER", std::max(1u, digits / knob(schedule, kWorkgroupSize)),
           "digits per invocation in the scan over digits"}};
}

std::string RadixSort::subgroup_ranked_scatter_wgsl(const Schedule& schedule) const {
  const std::uint32_t kpi = knob(schedule, kKeysPerInvocation);
  return "\n" + constant_declarations(subgroup_scatter_constants(schedule)) +
         (pairs_ ? kStagedPairValuesWgsl : "") + kSubgroupRankingWgsl + kSubgroupScatterHeadWgsl +
         unrolled_loop("j", kpi, kLoadSlotWgsl) + kPlacesWgsl +
         unrolled_loop("j", kpi, kRankSlotWgsl) + kDigitScansWgsl +
         unrolled_loop("j", kpi, kPlaceSlotWgsl) + kBarrierWgsl +
         unrolled_loop("j", kpi, kStageSlotWgsl) + kSubgroupScatterTailWgsl;
}

std::string RadixSort::generate_wgsl(const Schedule& schedule) const {
  const bool subgroups = knob(schedule, kUseSubgroups) == 1;
  const bool packed_count = subgroups && knob(schedule, kDigitBits) <= 4;
  const std::string values = pairs_ ? kPairValuesWgsl : kKeyOnlyValuesWgsl;
  return std::string(subgroups ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl + kParamsWgsl +
         binding_declarations(wgsl_bindings(schedule)) + "\n" +
         constant_declarations(radix_constants(schedule)) + "\n" + kWorkgroupScanWgsl +
         kCountsScanWgsl + kDigitCountWgsl +
         (packed_count ? kPackedDigitCountWgsl : kAtomicDigitCountWgsl) + values +
         (subgroups ? subgroup_ranked_scatter_wgsl(schedule)
                    : std::string(kInvocationRankedScatterWgsl));
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
