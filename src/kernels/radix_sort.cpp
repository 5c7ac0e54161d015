// radix_sort_u32 and radix_sort_pairs_u32: stable ascending sort of u32 keys, alone or carrying
// u32 values.
//
// Least-significant-digit radix sort, 32 / digit_bits rounds of one submission. Each round's
// scatter cuts the keys into tiles (workgroup_size * keys_per_invocation consecutive keys), ranks
// each tile's keys stably and writes them, with their values, to the tile's offset for their
// digit plus their rank. Rounds alternate between a scratch buffer and the output; the input is
// never written. The tiles' offsets come in one of two ways (knob look_back):
//   0  five passes per round, none waiting on another workgroup:
//        digit_count    each tile counts its digits into counts[digit * tiles + tile]
//                       (digit-major, so one scan gives every offset);
//        counts_reduce, counts_spine, counts_apply
//                       an exclusive reduce-then-scan of the counts;
//        scatter        reads its offsets from the counts.
//   1  Onesweep: before the rounds, one pass counts every byte of every key (byte_histogram) and
//      one workgroup turns the byte counts into each round's digit bases (digit_bases); then one
//      pass per round, whose tiles claim their numbers from a counter and take their offsets by
//      decoupled look-back, one digit per invocation: publish the tile's count of the digit,
//      walk back over the predecessors' published counts up to one that published its
//      inclusive prefix, then publish the tile's own. The keys are read once per round instead
//      of twice. A predecessor that published nothing after a number of polls is counted from
//      the input by the waiting invocation (WGSL promises no forward progress between
//      workgroups). Published words hold a 2-bit flag and a 30-bit count, so n < 2^30. The
//      counts of a round live in one of two chain regions, and each tile clears its words of
//      the other region for the next round.
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
//      do; certification checks the result.
// Past the end of the input, the last tile's keys read as 0xffffffff: they rank after every real
// key of the last digit, and are not written.
// Knobs: workgroup_size, keys_per_invocation, digit_bits (2, 4, or 8 with subgroups),
// use_subgroups, look_back.
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
// look_back = 1: keys counted per invocation of byte_histogram. Each of its workgroups adds its
// 1024 byte counts to the global ones, so larger workgroups' shares mean fewer global atomics.
constexpr std::uint32_t kHistogramKeysPerInvocation = 256;
// look_back = 1: words of the counts buffer before the chain regions: 4 * 256 byte counts, then
// each round's digit bases, then each round's tile counter.
constexpr std::uint32_t kByteCountWords = 1024;
// look_back = 1: look-back steps that find a predecessor silent before its digits are counted
// from the input.
constexpr std::uint32_t kSpins = 64;
// look_back = 1: predecessors read at once per digit; each invocation reads up to 8 of the
// (digit, predecessor) pairs, and no window is wider than 32.
std::uint32_t look_back_window(std::uint32_t workgroup_size, std::uint32_t digits) {
  return std::clamp(8 * workgroup_size / digits, 1u, 32u);
}
std::uint32_t chain_start(std::uint32_t digit_bits) {
  const std::uint32_t rounds = 32 / digit_bits;
  return kByteCountWords + rounds * (1u << digit_bits) + rounds;
}

class RadixSort final : public KernelDefinition {
 public:
  explicit RadixSort(bool pairs) : pairs_(pairs) {}

  std::string_view id() const override {
    return pairs_ ? "radix_sort_pairs_u32" : "radix_sort_u32";
  }
  std::uint32_t revision() const override { return 3; }
  std::string_view summary() const override {
    return pairs_ ? "stable ascending sort of u32 keys carrying u32 values"
                  : "ascending sort of u32 keys";
  }

  std::vector<KnobSpec> knobs() const override {
    return {{"workgroup_size", "invocations per workgroup", {64, 128, 256, 512}, 128},
            {"keys_per_invocation", "keys per invocation and tile", {1, 2, 4, 8, 16}, 4},
            {"digit_bits", "bits sorted per round", {2, 4, 8}, 4},
            {"use_subgroups", "rank with subgroup ballots and stage the tile", {0, 1}, 0},
            {"look_back",
             "one histogram pass, then one pass per round taking offsets by decoupled look-back",
             {0, 1},
             0}};
  }

  Status check_resources(const Schedule& schedule, const DeviceCapabilities& device) const override;

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

  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    if (knob(schedule, "look_back") == 1) {
      return {"clear", "byte_histogram", "digit_bases", "scatter"};
    }
    return {"digit_count", "counts_reduce", "counts_spine", "counts_apply", "scatter"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override;

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override;
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
  std::uint64_t workgroup_bytes(const Schedule& schedule) const;
  std::string invocation_ranked_scatter_wgsl(const Schedule& schedule) const;
  std::string subgroup_ranked_scatter_wgsl(const Schedule& schedule) const;
  void add_buffers(DispatchPlan& plan, std::uint64_t n, std::uint64_t count_words,
                   std::uint64_t block_sum_words) const;
  std::map<std::uint32_t, std::string> round_buffers(std::uint32_t round) const;

  bool pairs_;
};

// The subgroup ranking keeps counters for workgroup_size / kMinSubgroup subgroups.
constexpr std::uint32_t kMinSubgroup = 8;

// Words of the subgroup ranking's counters: two 16-bit digit counters per word and subgroup.
std::uint32_t subgroup_counter_words(const Schedule& schedule) {
  return (knob(schedule, "workgroup_size") / kMinSubgroup) *
         ((1u << knob(schedule, "digit_bits")) / 2);
}

void RadixSort::add_buffers(DispatchPlan& plan, std::uint64_t n, std::uint64_t count_words,
                            std::uint64_t block_sum_words) const {
  const std::uint64_t bytes = std::max<std::uint64_t>(4, n * 4);
  plan.buffers.push_back({"keys", bytes, BufferRole::kInput});
  plan.buffers.push_back({"sorted", bytes, BufferRole::kOutput});
  plan.buffers.push_back({"scratch", bytes, BufferRole::kScratch});
  plan.buffers.push_back(
      {"counts", std::max<std::uint64_t>(4, count_words * 4), BufferRole::kScratch});
  plan.buffers.push_back(
      {"block_sums", std::max<std::uint64_t>(4, block_sum_words * 4), BufferRole::kScratch});
  if (pairs_) {
    plan.buffers.push_back({"values", bytes, BufferRole::kInput});
    plan.buffers.push_back({"sorted_values", bytes, BufferRole::kOutput});
    plan.buffers.push_back({"scratch_values", bytes, BufferRole::kScratch});
  }
}

// Round 0 reads the input; then rounds alternate between scratch and sorted, and the number of
// rounds is even, so the last one writes sorted.
std::map<std::uint32_t, std::string> RadixSort::round_buffers(std::uint32_t round) const {
  const bool even = round % 2 == 0;
  std::map<std::uint32_t, std::string> buffers = {
      {1, round == 0 ? "keys" : (even ? "sorted" : "scratch")},
      {2, even ? "scratch" : "sorted"},
      {3, "counts"},
      {4, "block_sums"}};
  if (pairs_) {
    buffers[5] = round == 0 ? "values" : (even ? "sorted_values" : "scratch_values");
    buffers[6] = even ? "scratch_values" : "sorted_values";
  }
  return buffers;
}

Result<DispatchPlan> RadixSort::plan(const Schedule& schedule, const Problem& problem,
                                     const DeviceCapabilities&) const {
  const std::uint64_t n = problem.elements;
  const std::uint32_t wg = knob(schedule, "workgroup_size");
  const std::uint32_t bits = knob(schedule, "digit_bits");
  const std::uint32_t rounds = 32 / bits;
  const std::uint64_t digits = std::uint64_t{1} << bits;
  const std::uint64_t tiles =
      ceil_div(n, std::uint64_t{wg} * knob(schedule, "keys_per_invocation"));
  const auto u32 = [](std::uint64_t value) { return static_cast<std::uint32_t>(value); };
  DispatchPlan plan;
  if (knob(schedule, "look_back") == 1) {
    if (n >= (std::uint64_t{1} << 30)) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob look_back (1) publishes digit counts in 30 bits, so it sorts fewer than "
                   "2^30 keys; this problem has " +
                       std::to_string(n) + ". Use look_back=0.");
    }
    const std::uint64_t start = chain_start(bits);
    const std::uint64_t cleared = start + digits * tiles;  // what precedes the second region
    add_buffers(plan, n, cleared + digits * tiles, 1);
    const std::vector<std::uint32_t> first = {u32(n), u32(tiles), 0, 0, u32(cleared)};
    plan.passes.push_back({"clear", ceil_div(cleared, wg), round_buffers(0), first});
    plan.passes.push_back({"byte_histogram",
                           ceil_div(n, std::uint64_t{wg} * kHistogramKeysPerInvocation),
                           round_buffers(0), first});
    plan.passes.push_back({"digit_bases", 1, round_buffers(0), first});
    for (std::uint32_t round = 0; round < rounds; ++round) {
      plan.passes.push_back({"scatter",
                             tiles,
                             round_buffers(round),
                             {u32(n), u32(tiles), round * bits, round, u32(cleared)}});
    }
    return plan;
  }
  const std::uint64_t count_length = digits * tiles;
  const std::uint64_t count_blocks = ceil_div(count_length, std::uint64_t{wg} * kCountScanItems);
  add_buffers(plan, n, count_length, count_blocks);
  for (std::uint32_t round = 0; round < rounds; ++round) {
    const std::map<std::uint32_t, std::string> buffers = round_buffers(round);
    const std::vector<std::uint32_t> params = {u32(n), u32(tiles), round * bits, u32(count_length),
                                               u32(count_blocks)};
    plan.passes.push_back({"digit_count", tiles, buffers, params});
    plan.passes.push_back({"counts_reduce", count_blocks, buffers, params});
    plan.passes.push_back({"counts_spine", 1, buffers, params});
    plan.passes.push_back({"counts_apply", count_blocks, buffers, params});
    plan.passes.push_back({"scatter", tiles, buffers, params});
  }
  return plan;
}

std::uint64_t RadixSort::workgroup_bytes(const Schedule& schedule) const {
  const std::uint64_t wg = knob(schedule, "workgroup_size");
  const std::uint64_t digits = std::uint64_t{1} << knob(schedule, "digit_bits");
  const std::uint64_t scan = 4 * wg;  // workgroup_exclusive_scan
  // digit_count's counters; with look_back instead, the scatter's claimed tile, look-back state
  // (four words per digit and two flags) and, without subgroups, its tile offsets.
  const bool look_back = knob(schedule, "look_back") == 1;
  const bool subgroups = knob(schedule, "use_subgroups") == 1;
  const std::uint64_t extra =
      look_back ? 12 + 16 * digits + (subgroups ? 0 : 4 * digits) : 4 * digits;
  std::uint64_t scatter = extra + scan + 4 * digits * (wg + 1);
  if (subgroups) {
    const std::uint64_t tile = wg * knob(schedule, "keys_per_invocation");
    const std::uint64_t counters = subgroup_counter_words(schedule);
    scatter = extra + scan + 4 * std::max(counters, tile) + 4 * digits + (pairs_ ? 4 * tile : 0);
  }
  // byte_histogram's 1024 counters.
  return look_back ? std::max<std::uint64_t>(scatter, 4 * kByteCountWords) : scatter;
}

Status RadixSort::check_resources(const Schedule& schedule,
                                  const DeviceCapabilities& device) const {
  const bool subgroups = knob(schedule, "use_subgroups") == 1;
  if (knob(schedule, "digit_bits") == 8 && !subgroups) {
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
                 "Knobs workgroup_size (" + knob_string(schedule, "workgroup_size") +
                     "), keys_per_invocation (" + knob_string(schedule, "keys_per_invocation") +
                     "), digit_bits (" + knob_string(schedule, "digit_bits") +
                     "), use_subgroups (" + knob_string(schedule, "use_subgroups") +
                     ") and look_back (" + knob_string(schedule, "look_back") + ") need " +
                     std::to_string(bytes) +
                     " bytes of workgroup memory, more than maxComputeWorkgroupStorageSize (" +
                     std::to_string(device.max_workgroup_storage_size) + ").");
  }
  return Ok{};
}

// The passes that give each round's scatter its tile offsets by counting: digit_count and a
// reduce-then-scan of the counts.
std::string counting_wgsl(std::uint32_t workgroup_size) {
  return std::string(
             "\nfn scan_length() -> u32 { return params.count_length; }\n"
             "fn scan_blocks() -> u32 { return params.count_blocks; }\n"
             "fn scan_value(i: u32) -> u32 { return counts[i]; }\n"
             "fn scan_store(i: u32, prefix: u32) { counts[i] = prefix; }\n"
             "fn scan_total(total: u32) {}\n") +
         reduce_then_scan_wgsl("counts", workgroup_size, kCountScanItems) +
         "\nvar<workgroup> tile_counts: array<atomic<u32>, DIGITS>;\n"
         "@compute @workgroup_size(WG)\n"
         "fn digit_count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: "
         "vec3u,\n"
         "               @builtin(local_invocation_index) local: u32) {\n"
         "  let tile = linear_workgroup(group, groups);\n"
         "  for (var d = local; d < DIGITS; d += WG) { atomicStore(&tile_counts[d], 0u); }\n"
         "  workgroupBarrier();\n"
         "  let first = tile * (WG * KPI) + local;\n"
         "  for (var item = 0u; item < KPI; item++) {\n"
         "    let i = first + item * WG;\n"
         "    if (i < params.n) { atomicAdd(&tile_counts[digit(keys_in[i])], 1u); }\n"
         "  }\n"
         "  workgroupBarrier();\n"
         "  if (tile >= params.tiles) { return; }\n"
         "  for (var d = local; d < DIGITS; d += WG) {\n"
         "    counts[d * params.tiles + tile] = atomicLoad(&tile_counts[d]);\n"
         "  }\n"
         "}\n";
}

// look_back = 1: the passes before the rounds (clear, byte_histogram, digit_bases) and the
// scatter's look-back (see the file comment).
std::string look_back_wgsl(const Schedule& schedule) {
  const std::uint32_t wg = knob(schedule, "workgroup_size");
  const std::uint32_t digits = 1u << knob(schedule, "digit_bits");
  const std::uint32_t window = look_back_window(wg, digits);
  return "const ROUNDS: u32 = 32u / BITS;\n"
         "const SPINS: u32 = " +
         std::to_string(kSpins) +
         "u;  // look-back steps finding a tile silent before it is counted from the input\n"
         "const HISTOGRAM_KPI: u32 = " +
         std::to_string(kHistogramKeysPerInvocation) +
         "u;\n"
         "// counts[] holds the byte counts (BYTES of each of the 4 key bytes), then each round's\n"
         "// digit bases, each round's tile counter, and two chain regions of DIGITS words per\n"
         "// tile (round r publishes to region r % 2).\n"
         "const BASES: u32 = " +
         std::to_string(kByteCountWords) +
         "u;\n"
         "const TICKETS: u32 = BASES + ROUNDS * DIGITS;\n"
         "const CHAIN: u32 = TICKETS + ROUNDS;\n"
         "const SLOTS: u32 = " +
         std::to_string(std::max(1u, digits / wg)) +
         "u;  // digits per invocation\n"
         "const WINDOW: u32 = " +
         std::to_string(window) +
         "u;  // predecessors read at once per digit\n"
         "const PAIR_SLOTS: u32 = " +
         std::to_string(ceil_div(digits * window, wg)) +
         "u;  // (digit, predecessor) pairs per invocation\n" +
         R"(const FLAG_AGGREGATE: u32 = 0x40000000u;  // the tile's own count of the digit
const FLAG_PREFIX: u32 = 0x80000000u;     // the count in every tile up to this one
const FLAG_MASK: u32 = 0xc0000000u;

@compute @workgroup_size(WG)
fn clear(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.cleared) { atomicStore(&counts[i], 0u); }
}

var<workgroup> byte_counts: array<atomic<u32>, 1024>;
@compute @workgroup_size(WG)
fn byte_histogram(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                  @builtin(local_invocation_index) local: u32) {
  for (var w = local; w < 1024u; w += WG) { atomicStore(&byte_counts[w], 0u); }
  workgroupBarrier();
  let first = linear_workgroup(group, groups) * (WG * HISTOGRAM_KPI) + local;
  for (var j = 0u; j < HISTOGRAM_KPI; j += 4u) {
    // Four loads in flight before the atomics that wait on them.
    var batch = array<u32, 4>();
    for (var k = 0u; k < 4u; k++) {
      let i = first + (j + k) * WG;
      if (i < params.n) { batch[k] = keys_in[i]; }
    }
    for (var k = 0u; k < 4u; k++) {
      if (first + (j + k) * WG < params.n) {
        for (var b = 0u; b < 4u; b++) {
          atomicAdd(&byte_counts[b * 256u + ((batch[k] >> (8u * b)) & 0xffu)], 1u);
        }
      }
    }
  }
  workgroupBarrier();
  for (var w = local; w < 1024u; w += WG) {
    let count = atomicLoad(&byte_counts[w]);
    if (count != 0u) { atomicAdd(&counts[w], count); }
  }
}

var<workgroup> digit_totals: array<u32, DIGITS>;
@compute @workgroup_size(WG)
fn digit_bases(@builtin(local_invocation_index) local: u32) {
  for (var r = 0u; r < ROUNDS; r++) {
    let byte_index = r * BITS / 8u;
    let low = r * BITS % 8u;  // the digit's lowest bit in its byte
    for (var d = local; d < DIGITS; d += WG) {
      var total = 0u;
      for (var k = 0u; k < 256u / DIGITS; k++) {  // the byte values whose digit is d
        let v = ((k >> low) << (low + BITS)) | (d << low) | (k & ((1u << low) - 1u));
        total += atomicLoad(&counts[byte_index * 256u + v]);
      }
      digit_totals[d] = total;
    }
    workgroupBarrier();
    if (local == 0u) {
      var running = 0u;
      for (var d = 0u; d < DIGITS; d++) {
        atomicStore(&counts[BASES + r * DIGITS + d], running);
        running += digit_totals[d];
      }
    }
    workgroupBarrier();
  }
}

fn chain_word(tile: u32, d: u32, region: u32) -> u32 {
  return CHAIN + (region * params.tiles + tile) * DIGITS + d;
}

fn publish(tile: u32, d: u32, word: u32) {
  atomicStore(&counts[chain_word(tile, d, params.round_index % 2u)], word);
}

// Publishes `total`, the tile's count of digit d, as its prefix when it is the first tile.
fn publish_count(tile: u32, d: u32, total: u32) {
  publish(tile, d, select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u) | total);
}

// A tile's count of digit d, from the input.
fn count_digit(tile: u32, d: u32) -> u32 {
  let first = tile * (WG * KPI);
  let end = min(first + WG * KPI, params.n);
  var count = 0u;
  for (var i = first; i < end; i++) { count += select(0u, 1u, digit(keys_in[i]) == d); }
  return count;
}

const LOOK_NONE: u32 = 0xffffffffu;
var<workgroup> look_next: array<u32, DIGITS>;   // 1 + the nearest tile not summed yet; 0: done
var<workgroup> look_spins: array<u32, DIGITS>;  // steps that found tile look_next - 1 silent
var<workgroup> look_stop: array<atomic<u32>, DIGITS>;
var<workgroup> look_sum: array<atomic<u32>, DIGITS>;
var<workgroup> look_pending: atomic<u32>;
var<workgroup> look_more: u32;

// Sets look_sum[d] to the count of digit d in the tiles before `tile`, all digits at once. Each
// step reads WINDOW predecessors of every digit (consecutive invocations read consecutive words),
// finds the nearest one that is not an aggregate (look_stop: 2 * (distance - 1), plus 1 when it is
// silent), sums the counts up to it, and ends the digit's walk at a prefix. A tile found silent
// by SPINS steps is counted from the input instead. Called by the whole workgroup, in uniform
// control flow, for a tile after the first.
fn look_back(tile: u32, local: u32) {
  for (var d = local; d < DIGITS; d += WG) {
    look_next[d] = tile;
    look_spins[d] = 0u;
    atomicStore(&look_sum[d], 0u);
  }
  loop {
    for (var d = local; d < DIGITS; d += WG) { atomicStore(&look_stop[d], LOOK_NONE); }
    if (local == 0u) { atomicStore(&look_pending, 0u); }
    workgroupBarrier();
    var seen = array<u32, PAIR_SLOTS>();  // 0 where not read: no flag, so never summed
    for (var s = 0u; s < PAIR_SLOTS; s++) {
      let d = (local + s * WG) % DIGITS;
      let k = (local + s * WG) / DIGITS;
      if (k < WINDOW && k < look_next[d]) {
        seen[s] = atomicLoad(&counts[chain_word(look_next[d] - 1u - k, d, params.round_index % 2u)]);
        let flag = seen[s] & FLAG_MASK;
        if (flag != FLAG_AGGREGATE) {
          atomicMin(&look_stop[d], 2u * k + select(0u, 1u, flag == 0u));
        }
      }
    }
    workgroupBarrier();
    for (var s = 0u; s < PAIR_SLOTS; s++) {
      let d = (local + s * WG) % DIGITS;
      let k = (local + s * WG) / DIGITS;
      let stop = atomicLoad(&look_stop[d]);
      let flag = seen[s] & FLAG_MASK;
      if ((flag == FLAG_AGGREGATE && 2u * k < stop) || (flag == FLAG_PREFIX && 2u * k == stop)) {
        atomicAdd(&look_sum[d], seen[s] & ~FLAG_MASK);
      }
    }
    for (var d = local; d < DIGITS; d += WG) {
      let stop = atomicLoad(&look_stop[d]);
      var next = look_next[d];
      if (next == 0u) { continue; }
      if (stop == LOOK_NONE) {
        next -= min(next, WINDOW);
      } else if (stop % 2u == 0u) {
        next = 0u;  // met a prefix
      } else {
        next -= stop / 2u;  // the aggregates before the silent tile are summed
        look_spins[d] = select(look_spins[d] + 1u, 1u, stop > 1u);
        if (look_spins[d] == SPINS) {  // still silent: count it here instead of waiting
          atomicAdd(&look_sum[d], count_digit(next - 1u, d));
          next -= 1u;
          look_spins[d] = 0u;
        }
      }
      look_next[d] = next;
      if (next != 0u) { atomicStore(&look_pending, 1u); }
    }
    workgroupBarrier();
    if (local == 0u) { look_more = atomicLoad(&look_pending); }
    if (workgroupUniformLoad(&look_more) == 0u) { break; }
  }
}

// After look_back: publishes the tile's prefix of digit d and returns the output index of the
// tile's first key of digit d.
fn tile_offset(tile: u32, d: u32, total: u32) -> u32 {
  var before = 0u;
  if (tile != 0u) {
    before = atomicLoad(&look_sum[d]);
    publish(tile, d, FLAG_PREFIX | (before + total));
  }
  return atomicLoad(&counts[BASES + params.round_index * DIGITS + d]) + before;
}

var<workgroup> claimed_tile: u32;
)";
}

// The scatter's tile: its workgroup's (counting), or claimed in order from the round's counter,
// which also clears the tile's words of the other chain region for the next round (look_back).
std::string claim_tile_wgsl(bool look_back) {
  if (!look_back) return "  let tile = linear_workgroup(group, groups);\n";
  return R"(  if (local == 0u) { claimed_tile = atomicAdd(&counts[TICKETS + params.round_index], 1u); }
  let tile = workgroupUniformLoad(&claimed_tile);
  if (tile >= params.tiles) { return; }  // a grid rounded up past the tiles
  for (var d = local; d < DIGITS; d += WG) {
    atomicStore(&counts[chain_word(tile, d, 1u - params.round_index % 2u)], 0u);
  }
)";
}

std::string RadixSort::generate_wgsl(const Schedule& schedule) const {
  const std::uint32_t wg = knob(schedule, "workgroup_size");
  const std::uint32_t digits = 1u << knob(schedule, "digit_bits");
  const bool subgroups = knob(schedule, "use_subgroups") == 1;
  const bool look_back = knob(schedule, "look_back") == 1;
  std::string wgsl =
      std::string(subgroups ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl +
      (look_back ? "\nstruct Params { n: u32, tiles: u32, shift: u32, round_index: u32, cleared: "
                   "u32 }\n"
                 : "\nstruct Params { n: u32, tiles: u32, shift: u32, count_length: u32, "
                   "count_blocks: u32 }\n") +
      "@group(0) @binding(0) var<uniform> params: Params;\n"
      "@group(0) @binding(1) var<storage, read> keys_in: array<u32>;\n"
      "@group(0) @binding(2) var<storage, read_write> keys_out: array<u32>;\n" +
      (look_back ? "@group(0) @binding(3) var<storage, read_write> counts: array<atomic<u32>>;\n"
                 : "@group(0) @binding(3) var<storage, read_write> counts: array<u32>;\n") +
      "@group(0) @binding(4) var<storage, read_write> block_sums: array<u32>;\n";
  if (pairs_) {
    wgsl +=
        "@group(0) @binding(5) var<storage, read> values_in: array<u32>;\n"
        "@group(0) @binding(6) var<storage, read_write> values_out: array<u32>;\n";
  }
  wgsl += "\nconst WG: u32 = " + std::to_string(wg) +
          "u;\nconst KPI: u32 = " + knob_string(schedule, "keys_per_invocation") +
          "u;\nconst BITS: u32 = " + knob_string(schedule, "digit_bits") +
          "u;\nconst DIGITS: u32 = " + std::to_string(digits) +
          "u;\n"
          "fn digit(key: u32) -> u32 { return (key >> params.shift) & " +
          std::to_string(digits - 1) + "u; }\n\n" + workgroup_scan_wgsl(wg) +
          (look_back ? look_back_wgsl(schedule) : counting_wgsl(wg));
  return wgsl + (subgroups ? subgroup_ranked_scatter_wgsl(schedule)
                           : invocation_ranked_scatter_wgsl(schedule));
}

// Invocation `local` owns keys [first, first + KPI) of the tile, in order; digit_prefix[d * WG +
// local] becomes the number of digit-d keys owned by earlier invocations.
std::string RadixSort::invocation_ranked_scatter_wgsl(const Schedule& schedule) const {
  const std::uint32_t wg = knob(schedule, "workgroup_size");
  const std::uint32_t digits = 1u << knob(schedule, "digit_bits");
  const bool look_back = knob(schedule, "look_back") == 1;
  // The output index of the tile's first key of each digit: read from the counts' scan, or taken
  // by look-back from the tile's count of each digit (the inclusive scan's last invocation's).
  const std::string tile_offsets =
      look_back ? "  for (var d = local; d < DIGITS; d += WG) {\n"
                  "    publish_count(tile, d, digit_prefix[d * WG + WG - 1u]);\n"
                  "  }\n"
                  "  if (tile != 0u) { look_back(tile, local); }\n"
                  "  for (var d = local; d < DIGITS; d += WG) {\n"
                  "    tile_offsets[d] = tile_offset(tile, d, digit_prefix[d * WG + WG - 1u]);\n"
                  "  }\n"
                  "  workgroupBarrier();\n"
                  "  var next = array<u32, DIGITS>();\n"
                  "  for (var d = 0u; d < DIGITS; d++) {\n"
                  "    next[d] = tile_offsets[d] + digit_prefix[d * WG + local] - mine[d];\n"
                  "  }\n"
                : "  if (tile >= params.tiles) { return; }\n"
                  "  var next = array<u32, DIGITS>();\n"
                  "  for (var d = 0u; d < DIGITS; d++) {\n"
                  "    next[d] = counts[d * params.tiles + tile] + digit_prefix[d * WG + local] - "
                  "mine[d];\n"
                  "  }\n";
  return "\nvar<workgroup> digit_prefix: array<u32, " + std::to_string(digits * wg) + ">;\n" +
         (look_back ? "var<workgroup> tile_offsets: array<u32, DIGITS>;\n" : "") +
         "@compute @workgroup_size(WG)\n"
         "fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: "
         "vec3u,\n"
         "           @builtin(local_invocation_index) local: u32) {\n" +
         claim_tile_wgsl(look_back) +
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
         "  }\n" +
         tile_offsets +
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
// look_back = 1: once the subgroups' counts are summed (digit_base[d] is the tile's count of
// digit d), the tile publishes them, so that its successors' look-backs wait as little as
// possible; its own look-back waits until its keys are staged.
const char* const kPublishSubgroupCounts =
    R"(  var totals = array<u32, SLOTS>();  // the counts of this invocation's digits
  for (var s = 0u; s < SLOTS; s++) {
    let d = local + s * WG;
    if (d < DIGITS) {
      // The last tile's padding keys rank last in the last digit; they are not counted.
      let padding = WG * KPI - min(WG * KPI, params.n - tile * (WG * KPI));
      totals[s] = digit_base[d] - select(0u, padding, d == DIGITS - 1u);
      publish_count(tile, d, totals[s]);
    }
  }
)";

std::string RadixSort::subgroup_ranked_scatter_wgsl(const Schedule& schedule) const {
  const bool look_back = knob(schedule, "look_back") == 1;
  const std::uint32_t wg = knob(schedule, "workgroup_size");
  const std::uint32_t digits = 1u << knob(schedule, "digit_bits");
  const std::uint32_t tile = wg * knob(schedule, "keys_per_invocation");
  const std::uint32_t counter_words = subgroup_counter_words(schedule);
  const std::uint32_t digits_per_invocation = std::max(1u, digits / wg);
  std::string wgsl =
      "\nconst WORDS: u32 = " + std::to_string(digits / 2) +
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
      "var<workgroup> digit_base: array<u32, DIGITS>;\n" +
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
      "           @builtin(subgroup_size) sg: u32) {\n" +
      (look_back ? claim_tile_wgsl(true)
                 : "  let tile = linear_workgroup(group, groups);\n"
                   "  if (tile >= params.tiles) { return; }\n") +
      "  let subgroup = local / sg;\n"
      "  for (var w = local; w < COUNTER_WORDS; w += WG) { atomicStore(&ranked[w], 0u); }\n"
      "  workgroupBarrier();\n"
      "  let run = tile * (WG * KPI) + subgroup * sg * KPI;\n"
      "  let below = lanes_below(lane);\n"
      "  var keys = array<u32, KPI>();\n" +
      std::string(pairs_ ? "  var values = array<u32, KPI>();\n" : "") +
      "  var places = array<u32, KPI>();  // rank among the subgroup's keys of the same digit\n"
      "  for (var j = 0u; j < KPI; j++) {\n"
      "    let i = run + j * sg + lane;\n"
      "    var key = 0xffffffffu;\n"
      "    if (i < params.n) {\n"
      "      key = keys_in[i];\n" +
      std::string(pairs_ ? "      values[j] = values_in[i];\n" : "") +
      "    }\n"
      "    keys[j] = key;\n"
      "    let d = digit(key);\n"
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
      "    places[j] = subgroupShuffle(before, leader) + rank;\n"
      "  }\n"
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
      "  workgroupBarrier();\n" +
      std::string(look_back ? kPublishSubgroupCounts : "") +
      // Exclusive scan over the digits: invocation t owns digits [t PER, t PER + PER).
      "  var owned = 0u;\n"
      "  if (local * PER < DIGITS) {\n"
      "    for (var q = 0u; q < PER; q++) { owned += digit_base[local * PER + q]; }\n"
      "  }\n"
      "  var start = workgroup_exclusive_scan(owned, local).x;\n"
      "  if (local * PER < DIGITS) {\n"
      "    for (var q = 0u; q < PER; q++) {\n"
      "      let total = digit_base[local * PER + q];\n"
      "      digit_base[local * PER + q] = start;\n"
      "      start += total;\n"
      "    }\n"
      "  }\n"
      "  workgroupBarrier();\n"
      "  for (var j = 0u; j < KPI; j++) {\n"
      "    let d = digit(keys[j]);\n"
      "    let word = atomicLoad(&ranked[subgroup * WORDS + d / 2u]);\n"
      "    places[j] += digit_base[d] + ((word >> (16u * (d & 1u))) & 0xffffu);\n"
      "  }\n"
      "  workgroupBarrier();\n"
      "  for (var j = 0u; j < KPI; j++) {\n"
      "    atomicStore(&ranked[places[j]], keys[j]);\n" +
      std::string(pairs_ ? "    ranked_values[places[j]] = values[j];\n" : "") + "  }\n" +
      (look_back ? "  if (tile != 0u) { look_back(tile, local); }\n"
                   "  for (var s = 0u; s < SLOTS; s++) {\n"
                   "    let d = local + s * WG;\n"
                   "    if (d < DIGITS) { digit_base[d] = tile_offset(tile, d, totals[s]) - "
                   "digit_base[d]; }\n"
                   "  }\n"
                 : "  for (var d = local; d < DIGITS; d += WG) {\n"
                   "    digit_base[d] = counts[d * params.tiles + tile] - digit_base[d];\n"
                   "  }\n") +
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
