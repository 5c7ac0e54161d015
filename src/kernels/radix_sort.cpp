// radix_sort_u32 and radix_sort_pairs_u32: stable ascending sort of u32 keys, alone or carrying
// u32 values; radix_sort_pairs_u64 (below) sorts u64 keys with the same passes.
//
// Least-significant-digit radix sort, 32 / digit_bits rounds; each round is five passes of one
// submission, none waiting on another workgroup (safe without forward-progress guarantees):
//   digit_count    each tile (workgroup_size * keys_per_invocation consecutive keys) counts its
//                  digits into counts[digit * tiles + tile] (digit-major, so one scan gives every
//                  offset), in workgroups of 64, each taking 4 tiles where keys are counted by
//                  workgroup atomics (see kCountGroup and kGroupedDigitCountWgsl);
//   counts_reduce, counts_spine, counts_apply
//                  an exclusive reduce-then-scan of the counts, in blocks of workgroup_size * 4
//                  counts, the spine (one workgroup) in steps of as many blocks; the width is a
//                  uniform word, which a certification case narrows to reach the spine's later
//                  steps with few keys (scan_width_of);
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
//      digit's run; a pairs sort then stages its values in the same words, in the same order. This
//      needs subgroups of at least 8 invocations (room for workgroup_size / 8 subgroups' counters)
//      and numbered in order of local_invocation_index, as Vulkan drivers do; certification checks
//      the result. The loops over an invocation's key slots are unrolled (unrolled_loop), so that
//      Dawn's bounds clamps are not needed on their indices.
// Past the end of the input, the last tile's keys read as 0xffffffff: they rank after every real
// key of the last digit, and are not written.
//
// With one_sweep (1) the sort is 2 + 32 / digit_bits passes (6 with 8-bit digits, against 20),
// after Onesweep (Adinets and Merrill, 2022):
//   sweep_clear       one workgroup zeroes `counts`, which holds each round's digit totals
//                     here;
//   digit_histograms  reads the keys once and counts every round's digits (workgroup-private
//                     counters, then one global atomic per non-zero counter); it also zeroes the
//                     first round's look-back words;
//   scatter           once per round: each workgroup takes the tile of its id (as CUB does; a
//                     predecessor that has not started is counted by the look-back's fallback,
//                     below, so no forward progress is assumed), takes each digit's first output
//                     place from an exclusive scan of the round's totals (every workgroup scans
//                     them again: DIGITS values; with subgroups, by subgroup scans and one
//                     barrier once its keys' loads are issued, so that their latency passes
//                     during the scan), ranks its
//                     keys as above, publishes its count of each digit (the aggregate), finds
//                     each digit's count over all earlier tiles by decoupled look-back (one
//                     invocation per digit), publishes its inclusive prefix, and writes its keys
//                     (and values, moved by the same ranks) to their places. It also zeroes its
//                     look-back words of the next round.
// The look-back words (`block_sums` here: each tile's published digit sums) alternate between
// two regions by round: round r's scatter zeroes region (r + 1) % 2, which round r - 1 used and
// round r + 1 will use. Rounds alternate buffers as above, so the input is never written.
// The look-back's fallback (look_back in kSweepWalkWgsl) is cooperative: when some digits
// gave up on a predecessor, the whole workgroup counts the nearest such predecessor's keys, and
// the digits waiting for it walk on.
// A look-back word is a 2-bit flag (0: nothing yet, aggregate, inclusive prefix) above a 30-bit
// count, stored and loaded as one atomic, so a reader never sees a flag with another value's
// count; a count is at most n, and the plan refuses n >= 2^30 (4-byte keys of a binding of at
// most 4 GiB number fewer anyway). WGSL promises no forward progress between workgroups, so no
// invocation waits without bound: after kSpins polls of a predecessor that published nothing, the
// workgroup counts that predecessor's digits from the input itself (the fallback of decoupled
// look-back), which is correct because a round's input is not written during its pass.
//
// Knobs: workgroup_size, keys_per_invocation, digit_bits (2, 4, or 8 with subgroups),
// use_subgroups, one_sweep. Tiles that are not a power of two (workgroup_size 384,
// keys_per_invocation 12 or 20, as CUB's 384 x 20 on the H200) need one_sweep: digit_count's
// chunks of 16 keys divide only power-of-two tiles.
//
// radix_sort_pairs_u64: stable ascending sort of u64 keys carrying u32 values, out of place.
// Layout: `keys` and `sorted` hold 2 n u32 words, key i in words 2i (low) and 2i + 1 (high): a
// little-endian u64 array, as a database's u64 column is. Its WGSL is the pairs' module (the
// same digit passes, counts' scan or one sweep, and ranking) plus three element-wise passes and
// two bindings (keys64, sorted64); the plan runs the pairs' sort twice, with positions as values:
//   split_keys    low[i] = low word of key i, positions[i] = i;
//   (sort)        the low words carrying positions (32 / digit_bits rounds, "low" <-> scratch);
//   gather_high   high[i] = high word of key positions[i];
//   (sort)        the high words carrying positions ("high" <-> scratch): stable, so keys equal in
//                 their high words keep the order of their low words, and equal keys input order;
//   finish_keys   sorted[i] = key positions[i] (its high word from `high`);
//   finish_values sorted_values[i] = values[positions[i]] (a pass of its own: one pass gathering
//                 from the keys and the values at once took 49.55 ms for 2^28 pairs on an H100 in
//                 session 36, where gather_high's one gather from the keys took 9.44 ms).
// The 32-bit sorts' WGSL is untouched by it (their golden files are byte-identical).
// That design (direct_rounds = 0) moves 12 bytes a pair in each of its 2 * 32 / digit_bits
// rounds too, and its gathers are random (about 2.5 ms a GiB on the H200).
// With direct_rounds (1) the sort is 64 / digit_bits rounds over the u64 keys themselves, the
// low word's digits first, and no gathers: each round's scatter ranks a tile once, by the
// digit's word (the pairs' ranking code), and moves the key's two words (one vec2u) and its value
// to their places by that ranking, staged in the tile's ranked order in three turns of one array
// (the digit words, the other words, the values; workgroup memory as for u32 pairs). Rounds go
// between `scratch` (the keys, then the values) and `sorted`. Five passes per round, as above
// (round 0 reads the input), or one sweep, whose digit_histograms counts all the rounds' digits;
// then plan_rounds (one workgroup) skips every round whose digit all keys share (one digit counts n
// keys: a stable scatter would move nothing), as the high words' rounds of a column of row ids,
// and routes the kept ones: the first reads the input, each writes scratch or sorted, the last
// sorted (all skipped, as for equal keys: the last round is kept). Each pass binds the input,
// scratch and sorted, and branches on the round's route (uniform) for every access. Ranking
// needs subgroups (use_subgroups = 1).
//
// Oracle: std::stable_sort; exact, plus explicit checks that the output is ascending, is a
// permutation of the input, and (for pairs) keeps equal keys in input order.
// Bytes moved: 8 n (keys), 16 n (pairs) or 24 n (u64 pairs): one read and one write of each
// array, the lower bound.

#include <algorithm>
#include <array>
#include <numeric>

#include "kernel_support.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

constexpr std::uint32_t kCountScanItems = 4;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 384, 512}, 128};
const KnobSpec kKeysPerInvocation{
    "keys_per_invocation", "keys per invocation and tile", {1, 2, 4, 8, 12, 16, 20}, 4};
const KnobSpec kDigitBits{"digit_bits", "bits sorted per round", {2, 4, 8}, 4};
const KnobSpec kUseSubgroups{
    "use_subgroups", "rank with subgroup ballots and stage the tile", {0, 1}, 0};
const KnobSpec kOneSweep{
    "one_sweep",
    "count every round's digits once, then one scatter per round with look-back",
    {0, 1},
    0};

// The one-sweep passes' constants: digit_histograms runs in workgroups of kHistogramWorkgroup
// invocations, each loading kHistogramChunk keys at once, in at most kHistogramGroups
// workgroups (about what the H200 keeps resident), which bounds its global atomics to
// kHistogramGroups * 32 / digit_bits * 2^digit_bits. kSpins: polls of a predecessor before the
// workgroup counts it from the input.
constexpr std::uint32_t kHistogramWorkgroup = 256;
constexpr std::uint32_t kHistogramChunk = 8;
constexpr std::uint64_t kHistogramGroups = 1024;
constexpr std::uint32_t kSpins = 128;
// Look-back words keep 30-bit counts.
constexpr std::uint64_t kMaxSweepKeys = (std::uint64_t{1} << 30) - 1;

const KnobSpec kDirectRounds{
    "direct_rounds",
    "u64 keys: 64 / digit_bits rounds each moving both key words and the value (1), or two "
    "sorts of 32-bit words carrying positions and random gathers (0)",
    {0, 1},
    0};

bool one_sweep(const Schedule& schedule) { return knob(schedule, kOneSweep) == 1; }

// digit_histograms' workgroups for n keys.
std::uint64_t histogram_groups_of(std::uint64_t n) {
  return std::clamp<std::uint64_t>(
      ceil_div(n, std::uint64_t{kHistogramWorkgroup} * kHistogramChunk), 1, kHistogramGroups);
}

// n u64 keys as 2 n u32 words (low, high) of a profile: those of random_u32 for the whole key
// ("uniform", "equal", "small", "sorted", "reversed": ordered as u64), "high-only" (every low
// word the same, the high words uniform) or "ids" (below 2^24, as a table's row ids: three
// digits of 8 bits differ, the other five are 0).
std::vector<std::byte> random_u64_word_bytes(std::size_t n, const std::string& profile,
                                             std::mt19937_64& random) {
  const bool high_only = profile == "high-only";
  const bool ordered = profile == "sorted" || profile == "reversed";
  const bool ids = profile == "ids";
  const std::string word_profile = ordered || high_only || ids ? "uniform" : profile;
  // Drawn straight into the uploaded bytes, each word on every core: at 2^28 keys, drawing
  // the words apart and joining them took seconds of one core.
  std::vector<std::byte> bytes(8 * n);
  draw_u32_words(bytes.data(), 8, n, high_only ? "equal" : word_profile, random);
  draw_u32_words(bytes.data() + 4, 8, n, word_profile, random);
  std::uint32_t first_high = 0;
  if (n != 0) std::memcpy(&first_high, bytes.data() + 4, 4);
  auto key = [&](std::size_t i) {
    std::uint64_t value = 0;
    std::memcpy(&value, bytes.data() + 8 * i, 8);
    return value;
  };
  auto store = [&](std::size_t i, std::uint64_t value) {
    std::memcpy(bytes.data() + 8 * i, &value, 8);
  };
  if (profile == "small" || ids) {
    for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t) {
      for (std::size_t i = begin; i < end; ++i) {
        const auto low = static_cast<std::uint32_t>(key(i));
        store(i, ids ? low & 0x00ffffffu : std::uint64_t{first_high} << 32 | low);
      }
    });
  }
  if (ordered) {
    std::vector<std::uint64_t> keys(n);
    for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t) {
      for (std::size_t i = begin; i < end; ++i) keys[i] = key(i);
    });
    if (profile == "sorted") std::sort(keys.begin(), keys.end());
    if (profile == "reversed") std::sort(keys.begin(), keys.end(), std::greater<>());
    for_each_chunk(n, [&](std::size_t begin, std::size_t end, std::size_t) {
      for (std::size_t i = begin; i < end; ++i) store(i, keys[i]);
    });
  }
  return bytes;
}

// The buffers of one sort of 32-bit keys: the keys and values its first round reads, the
// scratch pair, and the pair its last round writes (rounds alternate between the last two).
struct RoundColumns {
  std::string keys = "keys";
  std::string scratch = "scratch";
  std::string sorted = "sorted";
  std::string values = "values";
  std::string scratch_values = "scratch_values";
  std::string sorted_values = "sorted_values";
};

// radix_sort_pairs_u64's two sorts of 32-bit keys carrying positions: the low words (from
// "low", which split_keys fills), then the high words in that order (from "high", which
// gather_high fills). Each ends where it started, so its input is consumed by its first round
// before its second writes there.
RoundColumns wide_columns(const std::string& words) {
  return {words, "scratch", words, "positions", "scratch_values", "positions"};
}

class RadixSort final : public KernelDefinition {
 public:
  // `wide_keys`: u64 keys carrying u32 values (radix_sort_pairs_u64; `pairs` must be true).
  RadixSort(bool pairs, bool wide_keys) : pairs_(pairs), wide_keys_(wide_keys) {}

  std::string_view id() const override {
    if (wide_keys_) return "radix_sort_pairs_u64";
    return pairs_ ? "radix_sort_pairs_u32" : "radix_sort_u32";
  }
  // The 32-bit sorts' WGSL is unchanged by the 64-bit one (which adds bindings and entry points
  // only to its own module). Revision 6 (2 for u64 keys): the counts' scan width is a uniform
  // word (scan_width), so that certification reaches the spine's second step.
  // Revision 3 for u64 keys: direct_rounds. Revision 7 (4 for u64 keys): the one-sweep scatter
  // takes tiles by workgroup id, and with subgroups scans the round's totals after its loads.
  // Revision 8 (5 for u64 keys): the atomic digit_count takes 4 tiles per workgroup (one in the
  // u64 keys' direct rounds).
  // Revision 9 (6 for u64 keys): the pairs' subgroup scatter stages its values in `ranked` once
  // the keys have left it, without a workgroup array of their own; the u64 keys' two sorts move
  // the keys and the values to their places in two passes (finish_keys, finish_values).
  // Revision 7 for u64 keys: the direct rounds stage the other words and the values in `ranked`
  // too, in turn after the digit words, without `ranked_values`.
  // Revision 10 (8 for u64 keys): the pairs' subgroup scatter loads each value just before
  // staging it; the u64 keys' direct rounds branch on their round's route once per tile.
  // Revision 11 (9 for u64 keys): the subgroup scatter's counters are not cleared (WGSL
  // zero-initializes workgroup memory, and each workgroup ranks one tile).
  // Revision 12 (10 for u64 keys): the five-pass subgroup scatter holds the tile's output starts
  // in registers of the invocations owning their digits, without the workgroup array tile_start.
  std::uint32_t revision() const override { return wide_keys_ ? 10 : 12; }
  std::string_view summary() const override {
    if (wide_keys_)
      return "stable ascending sort of u64 keys (low, high u32 words) carrying u32 values";
    return pairs_ ? "stable ascending sort of u32 keys carrying u32 values"
                  : "ascending sort of u32 keys";
  }

  std::vector<KnobSpec> knobs() const override {
    std::vector<KnobSpec> specs = {kWorkgroupSize, kKeysPerInvocation, kDigitBits, kUseSubgroups,
                                   kOneSweep};
    if (wide_keys_) specs.push_back(kDirectRounds);
    return specs;
  }

  Status check_resources(const Schedule& schedule, const DeviceCapabilities& device) const override;

  // A round reads keys_in and writes keys_out; the plan binds them to the input, the scratch
  // buffer and the output in turn. counts and block_sums hold the counts' scan or, with
  // one_sweep, the rounds' tile counters and totals and the look-back words, atomic there (their
  // size rules say both); the table keeps its bindings and names for every schedule.
  std::vector<WgslBinding> wgsl_bindings(const Schedule& schedule) const override {
    const std::string scratch = one_sweep(schedule) ? "atomic<u32>" : "u32";
    // With direct_rounds, keys_out is scratch: the keys (vec2u) and then the values (two a
    // vec2u), see kWideRoutesWgsl.
    std::vector<WgslBinding> table = {
        params_binding("Params"), storage_read(1, "keys_in", "u32"),
        storage_read_write(2, "keys_out", direct(schedule) ? "vec2u" : "u32"),
        storage_read_write(3, "counts", scratch), storage_read_write(4, "block_sums", scratch)};
    if (pairs_) {
      table.push_back(storage_read(5, "values_in", "u32"));
      table.push_back(storage_read_write(6, "values_out", "u32"));
    }
    if (wide_keys_) {
      table.push_back(storage_read(7, "keys64", "vec2u"));
      table.push_back(storage_read_write(8, "sorted64", "vec2u"));
    }
    return table;
  }

  std::vector<BufferSpec> buffer_specs() const override {
    constexpr const char* kColumn = "n elements, at least 1";
    std::vector<BufferSpec> specs = {
        {"keys", ElementType::kU32, BufferRole::kInput, kColumn},
        {"sorted", ElementType::kU32, BufferRole::kOutput, kColumn},
        {"scratch", ElementType::kU32, BufferRole::kScratch, kColumn},
        {"counts", ElementType::kU32, BufferRole::kScratch,
         "2^digit_bits * tiles elements; with one_sweep, 32 / digit_bits * (1 + 2^digit_bits) "
         "(each round's tile counter, then each round's digit totals)"},
        {"block_sums", ElementType::kU32, BufferRole::kScratch,
         "the counts' scan blocks; with one_sweep, 2 * 2^digit_bits * tiles elements (the "
         "look-back words of two rounds)"}};
    if (pairs_) {
      specs.push_back({"values", ElementType::kU32, BufferRole::kInput, kColumn});
      specs.push_back({"sorted_values", ElementType::kU32, BufferRole::kOutput, kColumn});
      specs.push_back({"scratch_values", ElementType::kU32, BufferRole::kScratch, kColumn});
    }
    if (wide_keys_) {
      constexpr const char* kWideColumn =
          "2 n elements, at least 2: key i is words 2i (low) and 2i + 1 (high), a little-endian "
          "u64 array";
      specs[0].size_rule = kWideColumn;
      specs[1].size_rule = kWideColumn;
      specs[2].size_rule =
          "n elements, at least 1; with direct_rounds, 2 n + 2 ceil(n / 2), at least 4 (the keys' "
          "two words, then the values)";
      specs[3].size_rule =
          "as for u32 keys; with direct_rounds and one_sweep, 64 / digit_bits * (2 + "
          "2^digit_bits) (each round's tile counter, digit totals, then route)";
      specs[7].size_rule = "n elements, at least 1; 1 with direct_rounds (unused)";
      for (const char* name : {"low", "high", "positions"}) {
        specs.push_back({name, ElementType::kU32, BufferRole::kScratch,
                         "n elements, at least 1; 1 with direct_rounds (unused)"});
      }
    }
    return specs;
  }

  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    if (direct(schedule) && one_sweep(schedule)) {
      return {"sweep_clear", "digit_histograms", "plan_rounds", "scatter"};
    }
    std::vector<std::string> names =
        one_sweep(schedule) ? std::vector<std::string>{"sweep_clear", "digit_histograms", "scatter"}
                            : std::vector<std::string>{"digit_count", "counts_reduce",
                                                       "counts_spine", "counts_apply", "scatter"};
    if (wide_keys_ && !direct(schedule)) {
      names.insert(names.end(), {"split_keys", "gather_high", "finish_keys", "finish_values"});
    }
    return names;
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
    if (wide_keys_) {
      // The 64-bit keys' own: only the high words differ, so the second sort alone orders them
      // (and direct rounds skip the low words' rounds); or row ids, whose direct rounds keep
      // an odd number of rounds (three).
      std::size_t top_bits = 0;
      for (CaseSpec& spec : cases) {
        if (spec.value_profile == "top-bits") {
          spec.value_profile = top_bits++ % 2 == 0 ? "high-only" : "ids";
          spec.name = spec.name.substr(0, spec.name.find(' ')) + " " + spec.value_profile;
        }
      }
      Problem ids;
      ids.elements = 104729;
      cases.push_back({"n=104729 ids", ids, "ids"});
    }
    return cases;
  }

  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities& device) const override;

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    CaseInputs inputs;
    inputs.problem = spec.problem;
    inputs.buffers["keys"] =
        wide_keys_ ? random_u64_word_bytes(spec.problem.elements, spec.value_profile, random)
                   : random_u32_bytes(spec.problem.elements, spec.value_profile, random);
    // Values are the input positions, so stability can be checked directly.
    if (pairs_) inputs.buffers["values"] = position_bytes(spec.problem.elements);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override;

  WorkAmount work(const Problem& problem) const override {
    const std::uint64_t bytes = wide_keys_ ? 24 : (pairs_ ? 16 : 8);
    return {bytes * problem.elements, 0, problem.elements, pairs_ ? "pairs" : "keys"};
  }

  // The H200's (driver 580.159.04) budget-24 winner for keys, 21.9 G keys/s with revision 4, and
  // the fastest schedule timed for pairs since revision 9 (14.50 ms at 2^28 on an H100, session
  // 36, against 18.88 ms for one sweep of 384 x 12; docs/performance.md).
  // Then one-sweep schedules: for keys the same tile and a wider one (the 2^20 bucket's winners);
  // for pairs 384 x 12, which takes tiles by id since session 33, certified on an H100 with seeds
  // 3323, 3324, 3672 and 3673 (and three times on the H200 in session 22, when it claimed its
  // tiles).
  // radix_sort_pairs_u64 starts from direct rounds in one sweep of 256 x 16, the fastest u64
  // schedule timed on an H100 in session 37 (see docs/performance.md), then the two sorts in the
  // pairs' schedules (59.50 ms for 2^28 pairs there) and direct rounds in five passes.
  std::vector<std::string> starting_points() const override {
    const std::string pairs_tile =
        "digit_bits=8,keys_per_invocation=16,use_subgroups=1,workgroup_size=256";
    std::vector<std::string> points = {pairs_tile};
    if (pairs_) {
      points.push_back(
          "digit_bits=8,keys_per_invocation=12,one_sweep=1,use_subgroups=1,"
          "workgroup_size=384");
      if (wide_keys_) {
        points.insert(points.begin(), "direct_rounds=1,one_sweep=1," + pairs_tile);
        points.push_back("direct_rounds=1," + pairs_tile);
      }
    } else {
      points.push_back(
          "digit_bits=8,keys_per_invocation=16,one_sweep=1,use_subgroups=1,"
          "workgroup_size=256");
      points.push_back(
          "digit_bits=8,keys_per_invocation=16,one_sweep=1,use_subgroups=1,"
          "workgroup_size=384");
    }
    return points;
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem;
    problem.elements = cpu_adapter ? (1u << 16) : (1u << 28);
    return problem;
  }

 private:
  // radix_sort_pairs_u64 with direct_rounds (1).
  bool direct(const Schedule& schedule) const {
    return wide_keys_ && knob(schedule, kDirectRounds) == 1;
  }
  // Rounds of one sort: over 32-bit keys, or over the u64 keys with direct_rounds.
  std::uint32_t sort_rounds(const Schedule& schedule) const {
    return (direct(schedule) ? 64 : 32) / knob(schedule, kDigitBits);
  }
  Result<DispatchPlan> direct_plan(const Schedule& schedule, std::uint64_t n,
                                   std::uint64_t scan_width,
                                   std::map<std::string, std::uint64_t> sizes) const;
  std::string direct_wgsl(const Schedule& schedule) const;
  // The passes of one sort of 32-bit keys on `columns`: five per round, or one sweep.
  void append_counted_rounds(const Schedule& schedule, std::uint64_t n, std::uint64_t scan_width,
                             const RoundColumns& columns, std::vector<PassPlan>& passes) const;
  void append_one_sweep(const Schedule& schedule, std::uint64_t n, const RoundColumns& columns,
                        std::vector<PassPlan>& passes) const;
  // scan_width: the counts' reduce-then-scan width (scan_width_of), for the five passes.
  void append_sort(const Schedule& schedule, std::uint64_t n, std::uint64_t scan_width,
                   const RoundColumns& columns, std::vector<PassPlan>& passes) const {
    if (one_sweep(schedule)) {
      append_one_sweep(schedule, n, columns, passes);
    } else {
      append_counted_rounds(schedule, n, scan_width, columns, passes);
    }
  }
  std::map<std::uint32_t, std::string> round_buffers(std::uint32_t round,
                                                     const RoundColumns& columns) const;
  std::uint64_t workgroup_bytes(const Schedule& schedule) const;
  std::uint64_t one_sweep_workgroup_bytes(const Schedule& schedule) const;
  std::string subgroup_ranked_scatter_wgsl(const Schedule& schedule) const;
  std::string invocation_ranked_scatter_wgsl(const Schedule& schedule) const;
  std::string one_sweep_wgsl(const Schedule& schedule) const;

  bool pairs_;
  bool wide_keys_;
};

// The subgroup ranking keeps counters for workgroup_size / kMinSubgroup subgroups.
constexpr std::uint32_t kMinSubgroup = 8;

// Words of the subgroup ranking's counters: two 16-bit digit counters per word and subgroup.
std::uint32_t subgroup_counter_words(const Schedule& schedule) {
  return (knob(schedule, kWorkgroupSize) / kMinSubgroup) * ((1u << knob(schedule, kDigitBits)) / 2);
}

std::uint32_t digit_count_of(const Schedule& schedule) { return 1u << knob(schedule, kDigitBits); }

// digit_count counts digits in byte counters in registers with subgroups and up to 16 digits
// (kPackedDigitCountWgsl), else with one workgroup atomic per key (kGroupedDigitCountWgsl).
bool packed_count(const Schedule& schedule) {
  return knob(schedule, kUseSubgroups) == 1 && knob(schedule, kDigitBits) <= 4;
}

// Tiles per digit_count workgroup: the atomic count takes kCountGroup consecutive tiles, so that
// each digit's counts of those tiles (digit-major, `tiles` words apart per digit) leave as one
// run of consecutive words instead of one scattered word per tile and digit. Measured on an H100
// (session 36, 2^28, 256 x 16, 4 rounds): keys' digit_count 2.11 -> 1.72 ms (whole sort 12.77 ->
// 12.37 ms), pairs' 2.13 -> 1.72 ms; 8 tiles gained nothing (2.10 ms). The direct rounds of u64
// keys, which read both key words, lost (8 rounds 6.89 -> 10.65 ms), so they count one tile each.
constexpr std::uint32_t kCountGroup = 4;
std::uint32_t count_group(const Schedule& schedule, bool direct_rounds) {
  return packed_count(schedule) || direct_rounds ? 1 : kCountGroup;
}
std::uint64_t tile_keys(const Schedule& schedule) {
  return std::uint64_t{knob(schedule, kWorkgroupSize)} * knob(schedule, kKeysPerInvocation);
}

// The most counts one workgroup of the counts' reduce-then-scan takes: every call's width.
std::uint64_t full_scan_width(const Schedule& schedule) {
  return std::uint64_t{knob(schedule, kWorkgroupSize)} * kCountScanItems;
}

// The counts' reduce-then-scan width of a problem (kCountsScanWgsl): counts per block and blocks
// per spine step.
std::uint64_t scan_width_of(const Schedule& schedule, const Problem& problem) {
  return problem.counts_scan_width != 0 ? problem.counts_scan_width : full_scan_width(schedule);
}

// The five-pass sort's second level is the spine's second step, which at the full width comes
// only past (WG * SCAN_ITEMS)^2 counts (8388609 keys for the default schedule). Its case narrows
// the width to kCertifiedScanWidth, one invocation's counts and one more (so that two invocations
// take part in each block and step, unaligned), and takes just enough full tiles (at least two,
// the last one key short) for 2 * width + 1 blocks: the spine in three or more steps, the last
// partial, each carrying the ones before. The very code of every call runs; only the uniform
// width differs. One sweep has no spine: its look-back walks back one predecessor at a time, and
// digit_histograms' second block per workgroup (past 2^21 keys, whatever the schedule) is the
// many-workgroups case's.
constexpr std::uint32_t kCertifiedScanWidth = kCountScanItems + 1;

std::vector<CaseSpec> RadixSort::schedule_cases(const Schedule& schedule,
                                                const DeviceCapabilities&) const {
  if (one_sweep(schedule)) return {};
  const std::uint64_t width = kCertifiedScanWidth;
  const std::uint64_t counts = 2 * width * width + 1;
  const std::uint64_t tiles =
      std::max<std::uint64_t>(2, ceil_div(counts, std::uint64_t{digit_count_of(schedule)}));
  Problem problem;
  problem.elements = tiles * tile_keys(schedule) - 1;
  problem.counts_scan_width = kCertifiedScanWidth;
  return {{"counts-spine n=" + std::to_string(problem.elements) +
               " width=" + std::to_string(width) + " uniform",
           problem, "uniform"}};
}

// The scatter's ranking: per invocation, the digits' prefixes over the invocations plus each
// digit's output start; with subgroups, the counters or the staged tile, each digit's base and
// start and the subgroups' sums (the staged values and the u64 keys' other words take turns with
// the keys in `ranked`).
std::uint64_t ranking_bytes(const Schedule& schedule) {
  const std::uint64_t wg = knob(schedule, kWorkgroupSize);
  const std::uint64_t digits = digit_count_of(schedule);
  if (knob(schedule, kUseSubgroups) == 0) return 4 * digits * (wg + 1);
  const std::uint64_t tile = tile_keys(schedule);
  const std::uint64_t counters = subgroup_counter_words(schedule);
  const std::uint64_t digit_group_sums = 4 * (wg / kMinSubgroup);
  return 4 * std::max(counters, tile) + 8 * digits + digit_group_sums;
}

std::uint64_t RadixSort::workgroup_bytes(const Schedule& schedule) const {
  if (one_sweep(schedule)) return one_sweep_workgroup_bytes(schedule);
  const std::uint64_t scan = 4 * knob(schedule, kWorkgroupSize);  // workgroup_exclusive_scan
  const std::uint64_t count =  // digit_count's tile_counts or group_counts
      4 * std::uint64_t{digit_count_of(schedule)} * count_group(schedule, direct(schedule));
  return count + scan + ranking_bytes(schedule);
}

// Each entry point declares its own: the scatter's ranking, its scan of the round's totals
// (workgroup_exclusive_scan without subgroups; with them, the ranking's digit_group_sums) and
// look-back state (the fallback's counts, the stuck tile and its copy; the u64 keys' route), or
// digit_histograms' counters of every round.
std::uint64_t RadixSort::one_sweep_workgroup_bytes(const Schedule& schedule) const {
  const std::uint64_t scan =
      knob(schedule, kUseSubgroups) == 1 ? 0 : 4 * std::uint64_t{knob(schedule, kWorkgroupSize)};
  const std::uint64_t look_back = 4 * digit_count_of(schedule) + 8 + (direct(schedule) ? 4 : 0);
  const std::uint64_t histograms =
      4 * std::uint64_t{sort_rounds(schedule)} * digit_count_of(schedule);
  return std::max(scan + ranking_bytes(schedule) + look_back, histograms);
}

std::map<std::uint32_t, std::string> RadixSort::round_buffers(std::uint32_t round,
                                                              const RoundColumns& columns) const {
  const bool even = round % 2 == 0;
  std::map<std::uint32_t, std::string> buffers = {
      {1, round == 0 ? columns.keys : (even ? columns.sorted : columns.scratch)},
      {2, even ? columns.scratch : columns.sorted},
      {3, "counts"},
      {4, "block_sums"}};
  if (pairs_) {
    buffers[5] =
        round == 0 ? columns.values : (even ? columns.sorted_values : columns.scratch_values);
    buffers[6] = even ? columns.scratch_values : columns.sorted_values;
  }
  if (wide_keys_) {
    buffers[7] = "keys";
    buffers[8] = "sorted";
  }
  return buffers;
}

Result<DispatchPlan> RadixSort::plan(const Schedule& schedule, const Problem& problem,
                                     const DeviceCapabilities&) const {
  const std::uint64_t n = problem.elements;
  if (one_sweep(schedule) && n > kMaxSweepKeys) {
    return Error(ErrorKind::kInvalidInput,
                 "Knob one_sweep (1) sorts at most 2^30 - 1 keys, whose counts fit its 30-bit "
                 "look-back words; the problem has " +
                     std::to_string(n) + ".");
  }
  const std::uint64_t scan_width = scan_width_of(schedule, problem);
  if (!one_sweep(schedule) && scan_width > full_scan_width(schedule)) {
    return Error(ErrorKind::kInvalidInput,
                 "Problem counts_scan_width (" + std::to_string(scan_width) +
                     ") exceeds the most counts one workgroup of the counts' scan takes, "
                     "workgroup_size * 4 (" +
                     std::to_string(full_scan_width(schedule)) + ").");
  }
  const std::uint64_t digits = digit_count_of(schedule);
  const std::uint64_t tiles = ceil_div(n, tile_keys(schedule));
  const std::uint64_t bytes = std::max<std::uint64_t>(4, n * 4);
  std::map<std::string, std::uint64_t> sizes = {
      {"keys", bytes}, {"sorted", bytes}, {"scratch", bytes}};
  if (one_sweep(schedule)) {
    sizes["counts"] = 4 * sort_rounds(schedule) * digits;
    sizes["block_sums"] = std::max<std::uint64_t>(4, 4 * 2 * digits * tiles);
  } else {
    const std::uint64_t count_length = digits * tiles;
    sizes["counts"] = std::max<std::uint64_t>(4, count_length * 4);
    sizes["block_sums"] = std::max<std::uint64_t>(4, 4 * ceil_div(count_length, scan_width));
  }
  if (pairs_) {
    sizes.insert({{"values", bytes}, {"sorted_values", bytes}, {"scratch_values", bytes}});
  }
  if (direct(schedule)) return direct_plan(schedule, n, scan_width, std::move(sizes));
  DispatchPlan plan;
  if (!wide_keys_) {
    plan.buffers = make_buffer_plans(buffer_specs(), sizes);
    append_sort(schedule, n, scan_width, RoundColumns{}, plan.passes);
    return plan;
  }
  // radix_sort_pairs_u64: split the low words off and number the positions; sort the low words
  // carrying positions; fetch each position's high word; sort those carrying the positions; then
  // move each key and value from its final position (see the file comment).
  sizes["keys"] = sizes["sorted"] = std::max<std::uint64_t>(8, n * 8);
  sizes.insert({{"low", bytes}, {"high", bytes}, {"positions", bytes}});
  plan.buffers = make_buffer_plans(buffer_specs(), sizes);
  const std::uint64_t groups = ceil_div(n, knob(schedule, kWorkgroupSize));
  const std::vector<std::uint32_t> params(6, 0);  // the counted rounds' Params, n first
  auto pass = [&](const char* entry_point, std::map<std::uint32_t, std::string> buffers) {
    buffers.insert({{3, "counts"}, {4, "block_sums"}, {7, "keys"}, {8, "sorted"}});
    std::vector<std::uint32_t> words = params;
    words[0] = static_cast<std::uint32_t>(n);
    plan.passes.push_back({entry_point, groups, std::move(buffers), std::move(words)});
  };
  pass("split_keys", {{1, "high"}, {2, "low"}, {5, "values"}, {6, "positions"}});
  append_sort(schedule, n, scan_width, wide_columns("low"), plan.passes);
  pass("gather_high", {{1, "low"}, {2, "high"}, {5, "positions"}, {6, "scratch_values"}});
  append_sort(schedule, n, scan_width, wide_columns("high"), plan.passes);
  pass("finish_keys", {{1, "positions"}, {2, "high"}, {5, "values"}, {6, "sorted_values"}});
  pass("finish_values", {{1, "positions"}, {2, "high"}, {5, "values"}, {6, "sorted_values"}});
  return plan;
}

// The routes of direct rounds (kWideRoutesWgsl): where a round reads and writes its keys and
// values.
constexpr std::uint32_t kFromInput = 0;
constexpr std::uint32_t kScratch = 1;
constexpr std::uint32_t kSorted = 2;
constexpr std::uint32_t route(std::uint32_t source, std::uint32_t destination) {
  return source | destination << 2;
}

// radix_sort_pairs_u64 with direct_rounds: 64 / digit_bits rounds over the u64 keys, each moving
// both words and the value. Five passes per round, round r reading the input (r = 0) or round
// r - 1's output and writing scratch (r even) or sorted (r odd: the last round, as the rounds
// are even); or sweep_clear, digit_histograms and plan_rounds, then one scatter per round
// wherever plan_rounds routes it (a round whose digit all keys share is skipped).
Result<DispatchPlan> RadixSort::direct_plan(const Schedule& schedule, std::uint64_t n,
                                            std::uint64_t scan_width,
                                            std::map<std::string, std::uint64_t> sizes) const {
  const std::uint32_t bits = knob(schedule, kDigitBits);
  const std::uint32_t rounds = sort_rounds(schedule);
  const std::uint64_t digits = digit_count_of(schedule);
  const std::uint64_t tiles = ceil_div(n, tile_keys(schedule));
  const std::uint64_t key_bytes = std::max<std::uint64_t>(8, n * 8);
  sizes["keys"] = sizes["sorted"] = key_bytes;
  sizes["scratch"] = std::max<std::uint64_t>(16, 8 * (n + ceil_div(n, 2)));
  for (const char* unused : {"low", "high", "positions", "scratch_values"}) sizes[unused] = 4;
  if (one_sweep(schedule)) sizes["counts"] = 4 * rounds * (1 + digits);
  DispatchPlan plan;
  plan.buffers = make_buffer_plans(buffer_specs(), sizes);
  // keys_in (a u32 view of the keys) is not read.
  const std::map<std::uint32_t, std::string> buffers = {
      {1, "keys"},   {2, "scratch"},       {3, "counts"}, {4, "block_sums"},
      {5, "values"}, {6, "sorted_values"}, {7, "keys"},   {8, "sorted"}};
  const std::uint64_t count_length = digits * tiles;
  const std::uint64_t histogram_groups = histogram_groups_of(n);
  const auto params = [&](std::uint32_t round, std::uint32_t round_route) {
    return std::vector<std::uint32_t>{
        static_cast<std::uint32_t>(n),
        static_cast<std::uint32_t>(tiles),
        (round * bits) % 32,
        static_cast<std::uint32_t>(count_length),
        static_cast<std::uint32_t>(ceil_div(count_length, scan_width)),
        static_cast<std::uint32_t>(scan_width),
        round,
        static_cast<std::uint32_t>(histogram_groups),
        round_route};
  };
  if (one_sweep(schedule)) {
    plan.passes.push_back({"sweep_clear", 1, buffers, params(0, 0)});
    plan.passes.push_back({"digit_histograms", histogram_groups, buffers, params(0, 0)});
    plan.passes.push_back({"plan_rounds", 1, buffers, params(0, 0)});
    for (std::uint32_t round = 0; round < rounds; ++round) {
      plan.passes.push_back({"scatter", tiles, buffers, params(round, 0)});
    }
    return plan;
  }
  const std::uint64_t count_blocks = ceil_div(count_length, scan_width);
  for (std::uint32_t round = 0; round < rounds; ++round) {
    const std::uint32_t source = round == 0 ? kFromInput : (round % 2 == 1 ? kScratch : kSorted);
    const std::vector<std::uint32_t> words =
        params(round, route(source, round % 2 == 0 ? kScratch : kSorted));
    plan.passes.push_back(
        {"digit_count", ceil_div(tiles, count_group(schedule, true)), buffers, words});
    plan.passes.push_back({"counts_reduce", count_blocks, buffers, words});
    plan.passes.push_back({"counts_spine", 1, buffers, words});
    plan.passes.push_back({"counts_apply", count_blocks, buffers, words});
    plan.passes.push_back({"scatter", tiles, buffers, words});
  }
  return plan;
}

void RadixSort::append_counted_rounds(const Schedule& schedule, std::uint64_t n,
                                      std::uint64_t scan_width, const RoundColumns& columns,
                                      std::vector<PassPlan>& passes) const {
  const std::uint32_t bits = knob(schedule, kDigitBits);
  const std::uint64_t tiles = ceil_div(n, tile_keys(schedule));
  const std::uint64_t count_length = (std::uint64_t{1} << bits) * tiles;
  const std::uint64_t count_blocks = ceil_div(count_length, scan_width);
  const std::uint32_t rounds = 32 / bits;  // even, so the last round writes columns.sorted
  for (std::uint32_t round = 0; round < rounds; ++round) {
    const std::map<std::uint32_t, std::string> buffers = round_buffers(round, columns);
    const std::vector<std::uint32_t> params = {static_cast<std::uint32_t>(n),
                                               static_cast<std::uint32_t>(tiles),
                                               round * bits,
                                               static_cast<std::uint32_t>(count_length),
                                               static_cast<std::uint32_t>(count_blocks),
                                               static_cast<std::uint32_t>(scan_width)};
    passes.push_back(
        {"digit_count", ceil_div(tiles, count_group(schedule, false)), buffers, params});
    passes.push_back({"counts_reduce", count_blocks, buffers, params});
    passes.push_back({"counts_spine", 1, buffers, params});
    passes.push_back({"counts_apply", count_blocks, buffers, params});
    passes.push_back({"scatter", tiles, buffers, params});
  }
}

// sweep_clear, digit_histograms, then one scatter per round (see the file comment). The uniform
// words: n, tiles, the round's shift, the round, digit_histograms' workgroups.
void RadixSort::append_one_sweep(const Schedule& schedule, std::uint64_t n,
                                 const RoundColumns& columns, std::vector<PassPlan>& passes) const {
  const std::uint32_t bits = knob(schedule, kDigitBits);
  const std::uint32_t rounds =
      sort_rounds(schedule);  // even, so the last round writes columns.sorted
  const std::uint64_t tiles = ceil_div(n, tile_keys(schedule));
  const std::uint64_t histogram_groups = histogram_groups_of(n);
  const auto params = [&](std::uint32_t round) {
    return std::vector<std::uint32_t>{static_cast<std::uint32_t>(n),
                                      static_cast<std::uint32_t>(tiles), round * bits, round,
                                      static_cast<std::uint32_t>(histogram_groups)};
  };
  // Every pass binds the whole table; the counting passes, the first round's buffers.
  for (std::uint32_t round = 0; round < rounds; ++round) {
    const std::map<std::uint32_t, std::string> buffers = round_buffers(round, columns);
    if (round == 0) {
      passes.push_back({"sweep_clear", 1, buffers, params(0)});
      passes.push_back({"digit_histograms", histogram_groups, buffers, params(0)});
    }
    passes.push_back({"scatter", tiles, buffers, params(round)});
  }
}

Status RadixSort::check_resources(const Schedule& schedule,
                                  const DeviceCapabilities& device) const {
  const bool subgroups = knob(schedule, kUseSubgroups) == 1;
  if (direct(schedule) && !subgroups) {
    return Error(ErrorKind::kInvalidInput,
                 "Knob direct_rounds (1) needs use_subgroups (1): its scatter stages the tile's "
                 "key words and values in their ranked order, which the subgroup ranking "
                 "computes.");
  }
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
  const std::uint64_t tile = tile_keys(schedule);
  if (!one_sweep(schedule) && (tile & (tile - 1)) != 0) {
    return Error(ErrorKind::kInvalidInput,
                 "Knobs workgroup_size (" + std::to_string(knob(schedule, kWorkgroupSize)) +
                     ") and keys_per_invocation (" +
                     std::to_string(knob(schedule, kKeysPerInvocation)) + ") make tiles of " +
                     std::to_string(tile) +
                     " keys, which need one_sweep (1): digit_count's chunks divide only "
                     "power-of-two tiles.");
  }
  if (one_sweep(schedule) && knob(schedule, kWorkgroupSize) < digit_count_of(schedule)) {
    return Error(ErrorKind::kInvalidInput,
                 "Knob one_sweep (1) needs a workgroup_size (" +
                     std::to_string(knob(schedule, kWorkgroupSize)) +
                     ") of at least 2^digit_bits (" + std::to_string(digit_count_of(schedule)) +
                     ") invocations: one invocation looks back per digit.");
  }
  const std::uint64_t bytes = workgroup_bytes(schedule);
  if (bytes > device.max_workgroup_storage_size) {
    const std::string last_knobs =
        one_sweep(schedule)
            ? ", use_subgroups (" + std::to_string(knob(schedule, kUseSubgroups)) +
                  ") and one_sweep (1)"
            : " and use_subgroups (" + std::to_string(knob(schedule, kUseSubgroups)) + ")";
    return Error(ErrorKind::kInvalidInput,
                 "Knobs workgroup_size (" + std::to_string(knob(schedule, kWorkgroupSize)) +
                     "), keys_per_invocation (" +
                     std::to_string(knob(schedule, kKeysPerInvocation)) + "), digit_bits (" +
                     std::to_string(knob(schedule, kDigitBits)) + ")" + last_knobs + " need " +
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
struct Params { n: u32, tiles: u32, shift: u32, count_length: u32, count_blocks: u32, scan_width: u32 }
)";

// The digit of a key this round.
const char* const kDigitWgsl = R"(
fn digit(key: u32) -> u32 { return (key >> params.shift) & (DIGITS - 1u); }
)";

// The reduce-then-scan of the counts in blocks of params.scan_width counts (WG * SCAN_ITEMS;
// fewer in a certification case, see scan_width_of), each invocation taking SCAN_ITEMS
// consecutive counts of its block, as three entry points that never wait on another workgroup:
//   counts_reduce  block b: block_sums[b] = the block's sum;
//   counts_spine   one workgroup: exclusive scan of block_sums in place, scan_width of them a
//                  step, each step carrying the sum of the steps before it;
//   counts_apply   block b: every count becomes its exclusive prefix.
const char* const kCountsScanWgsl = R"(
@compute @workgroup_size(WG)
fn counts_reduce(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                 @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let width = params.scan_width;
  let end = min(b * width + width, params.count_length);
  let first = b * width + local * SCAN_ITEMS;
  var sum = 0u;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < end) { sum += counts[i]; }
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (local == 0u && b < params.count_blocks) { block_sums[b] = scanned.y; }
}

@compute @workgroup_size(WG)
fn counts_spine(@builtin(local_invocation_index) local: u32) {
  var carry = 0u;
  let blocks = params.count_blocks;
  let width = params.scan_width;
  for (var start = 0u; start < blocks; start += width) {
    let end = min(start + width, blocks);
    var values = array<u32, SCAN_ITEMS>();
    var sum = 0u;
    for (var j = 0u; j < SCAN_ITEMS; j++) {
      let i = start + local * SCAN_ITEMS + j;
      if (i < end) { values[j] = block_sums[i]; }
      sum += values[j];
    }
    let scanned = workgroup_exclusive_scan(sum, local);
    var running = carry + scanned.x;
    for (var j = 0u; j < SCAN_ITEMS; j++) {
      let i = start + local * SCAN_ITEMS + j;
      if (i < end) { block_sums[i] = running; }
      running += values[j];
    }
    carry += scanned.y;
  }
}

@compute @workgroup_size(WG)
fn counts_apply(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                @builtin(local_invocation_index) local: u32) {
  let b = linear_workgroup(group, groups);
  let width = params.scan_width;
  let end = min(b * width + width, params.count_length);
  let first = b * width + local * SCAN_ITEMS;
  var values = array<u32, SCAN_ITEMS>();
  var sum = 0u;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < end) { values[j] = counts[i]; }
    sum += values[j];
  }
  let scanned = workgroup_exclusive_scan(sum, local);
  if (b >= params.count_blocks) { return; }
  var running = block_sums[b] + scanned.x;
  for (var j = 0u; j < SCAN_ITEMS; j++) {
    let i = first + j;
    if (i < end) { counts[i] = running; }
    running += values[j];
  }
}
)";

// digit_count runs in workgroups of COUNT_WG (64) invocations whatever the tile, so that each
// has many keys in flight (COUNT_KEYS, up to 128), loaded COUNT_CHUNK (16) at a time before
// they are counted. Keys are counted either with one workgroup atomic each, COUNT_GROUP tiles
// per workgroup (kGroupedDigitCountWgsl), or, with subgroups and up to 16 digits, in byte
// counters in registers (kPackedDigitCountWgsl: digit d in byte d % 4 of word d / 4), which each
// subgroup adds in 16-bit halves (at most 64 lanes x 128 keys) and then into the tile's counters,
// one atomic per digit.
constexpr std::uint32_t kCountWorkgroup = 64;

const char* const kTileCountsWgsl = R"(
var<workgroup> tile_counts: array<atomic<u32>, DIGITS>;
)";

const char* const kLoadCountChunkWgsl = R"(
// COUNT_CHUNK keys, COUNT_WG apart from `first` (clamped loads: no branch).
fn load_count_chunk(first: u32) -> array<u32, COUNT_CHUNK> {
  let last = max(params.n, 1u) - 1u;
  var keys = array<u32, COUNT_CHUNK>();
  for (var item = 0u; item < COUNT_CHUNK; item++) {
    keys[item] = keys_in[min(first + item * COUNT_WG, last)];
  }
  return keys;
}
)";

const char* const kDigitCountWgsl = R"(
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

// The atomic count: each workgroup counts the COUNT_GROUP consecutive tiles from first_tile into
// group_counts[digit * COUNT_GROUP + t], then stores each digit's counts of those tiles to
// consecutive words of `counts`.
const char* const kGroupedDigitCountWgsl = R"(
var<workgroup> group_counts: array<atomic<u32>, DIGITS * COUNT_GROUP>;

@compute @workgroup_size(COUNT_WG)
fn digit_count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let first_tile = linear_workgroup(group, groups) * COUNT_GROUP;
  let tiles = min(COUNT_GROUP, params.tiles - min(first_tile, params.tiles));
  for (var w = local; w < DIGITS * COUNT_GROUP; w += COUNT_WG) {
    atomicStore(&group_counts[w], 0u);
  }
  workgroupBarrier();
  for (var t = 0u; t < tiles; t++) {
    let first = (first_tile + t) * (WG * KPI) + local;
    for (var chunk = 0u; chunk < COUNT_KEYS; chunk += COUNT_CHUNK) {
      let keys = load_count_chunk(first + chunk * COUNT_WG);
      for (var item = 0u; item < COUNT_CHUNK; item++) {
        if (first + (chunk + item) * COUNT_WG < params.n) {
          atomicAdd(&group_counts[digit(keys[item]) * COUNT_GROUP + t], 1u);
        }
      }
    }
  }
  workgroupBarrier();
  for (var w = local; w < DIGITS * COUNT_GROUP; w += COUNT_WG) {
    let t = w % COUNT_GROUP;
    if (t < tiles) {
      counts[(w / COUNT_GROUP) * params.tiles + first_tile + t] = atomicLoad(&group_counts[w]);
    }
  }
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
// writes v at output place p.
const char* const kKeyOnlyValuesWgsl = R"(
fn load_value(i: u32) -> u32 { return 0u; }
fn store_value(place: u32, value: u32) {}
)";

const char* const kPairValuesWgsl = R"(
fn load_value(i: u32) -> u32 { return values_in[i]; }
fn store_value(place: u32, value: u32) { values_out[place] = value; }
)";

// Invocation `local` owns keys [first, first + KPI) of the tile, in order; digit_prefix[d * WG +
// local] becomes the number of digit-d keys owned by earlier invocations. The entry point in
// steps: the tile is the workgroup's (kWorkgroupTileWgsl) or claimed (kClaimedTileWgsl); each
// digit's output start comes from the counts' scan (kCountedStartWgsl) or the look-back
// (kInvocationLookBackWgsl).
const char* const kInvocationScatterHeadWgsl = R"(
var<workgroup> digit_prefix: array<u32, DIGITS * WG>;

@compute @workgroup_size(WG)
fn scatter(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) local: u32) {
)";

const char* const kWorkgroupTileWgsl = R"(  let tile = linear_workgroup(group, groups);
)";

const char* const kInvocationRankingWgsl = R"(  let first = tile * (WG * KPI) + local * KPI;
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
)";

const char* const kCountedStartWgsl = R"(  if (tile >= params.tiles) { return; }
  var next = array<u32, DIGITS>();
  for (var d = 0u; d < DIGITS; d++) {
    next[d] = counts[d * params.tiles + tile] + digit_prefix[d * WG + local] - mine[d];
  }
)";

const char* const kInvocationScatterTailWgsl = R"(  for (var j = 0u; j < KPI; j++) {
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
)";

const char* const kTileByIdWgsl = R"(  let tile = linear_workgroup(group, groups);
  if (tile >= params.tiles) { return; }  // a grid rounded up past the tiles
)";

// The counters start at zero without a clear: WGSL zero-initializes workgroup memory before a
// workgroup runs, and a workgroup ranks one tile. (Clearing them all, room for subgroups of
// MIN_SUBGROUP lanes, took 16 atomic stores per invocation of 256 and a barrier.)
const char* const kSubgroupCountersWgsl = R"(  let subgroup = local / sg;
)";

// Invocation t holds the tile's output starts of the digits it owns in the scan over digits,
// [t PER, t PER + PER), in registers (revision 12; revision 11 kept them in a workgroup array,
// and five passes of 256 x 16 took 11.25 ms for 2^28 keys on an H100 against 10.87 for an edit of
// it that holds them in registers as this does, pairs 14.44 against 14.06: session 41).
const char* const kCountedTileStartWgsl =
    R"(  // The tile's output starts are read now, so that their latency passes during the ranking.
  var own_starts = array<u32, PER>();
  for (var q = 0u; q < PER; q++) {
    own_starts[q] = counts[min(local * PER + q, DIGITS - 1u) * params.tiles + tile];
  }
)";

const char* const kSubgroupLoadsWgsl = R"(  let run = tile * (WG * KPI) + subgroup * sg * KPI;
  let below = lanes_below(lane);
  // Every key is loaded before the ranking, clamped and selected rather than guarded by a
  // branch: ballots follow.
  let last = params.n - 1u;  // a tile exists, so n > 0
  var keys = array<u32, KPI>();
)";

const char* const kLoadSlotWgsl = R"(    let i = run + j * sg + lane;
    keys[j] = select(0xffffffffu, keys_in[min(i, last)], i < params.n);
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

const char* const kSubgroupScanWgsl = R"(  workgroupBarrier();
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
)";

const char* const kDigitScanWgsl =
    R"(  // Exclusive scan over the digits: invocation t owns digits [t PER, t PER + PER). A subgroup
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
)";

// digit_base[d] becomes the output place of the tile's first digit-d key minus its staged place.
const char* const kCountedTileBaseWgsl = R"(  for (var q = 0u; q < PER; q++) {
    let d = local * PER + q;
    if (d < DIGITS) { digit_base[d] = own_starts[q] - digit_base[d]; }
  }
)";

const char* const kSweepTileBaseWgsl = R"(  for (var d = local; d < DIGITS; d += WG) {
    digit_base[d] = tile_start[d] - digit_base[d];
  }
)";

const char* const kSubgroupTileOutputWgsl = R"(  workgroupBarrier();
  let valid = min(WG * KPI, params.n - tile * (WG * KPI));
)";

const char* const kSubgroupKeysOutWgsl = R"(  for (var p = local; p < valid; p += WG) {
    let key = atomicLoad(&ranked[p]);
    keys_out[digit_base[digit(key)] + p] = key;
  }
}
)";

// Pairs: the values are staged in `ranked` too, once the keys have left it, so that a workgroup
// holds a tile's words once (measured on an H100 in session 36, 2^28 pairs: 14.50 against 20.80
// ms for five passes of 256 x 16, whose ranked_values took 16 KiB more per workgroup; 18.88
// against 19.42 ms in one sweep of 384 x 12). Each invocation keeps the output places of its
// staged keys for its values.
const char* const kPairKeysOutWgsl =
    R"(  var targets = array<u32, KPI>();  // the output place of the staged key local + s WG
)";

const char* const kPairKeyOutSlotWgsl = R"(    let p = local + s * WG;
    let key = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(key)] + p;
    if (p < valid) { keys_out[targets[s]] = key; }
)";

// The pairs load each value again from the input just before staging it, rather than hold it in
// a register through the ranking: measured on an H100 in session 37 (2^28 pairs, five passes of
// 256 x 16), the scatter went from 12.04 to 11.60 ms and the sort from 14.46 to 14.02 ms; the
// tile was read moments before, so the load is likely an L2 hit. The u64 keys' direct rounds
// keep theirs in registers (kWideStagedValueSlotWgsl): reloading them through load_pair's branch
// on the round's source took their 8 rounds from 56.7 to 63.4 ms.
const char* const kValueStageSlotWgsl =
    R"(    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));
)";

const char* const kPairValueOutSlotWgsl = R"(    let p = local + s * WG;
    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }
)";

// --- One sweep (see the file comment) -------------------------------------------------------

const char* const kSweepParamsWgsl = R"(
struct Params { n: u32, tiles: u32, shift: u32, round: u32, histogram_groups: u32 }
)";

// counts[r * DIGITS + d]: the keys whose digit of round r is d, counted up from the zeroes of
// sweep_clear.
const char* const kSweepClearWgsl = R"(
@compute @workgroup_size(HIST_WG)
fn sweep_clear(@builtin(local_invocation_index) local: u32) {
  for (var w = local; w < ROUNDS * DIGITS; w += HIST_WG) {
    atomicStore(&counts[w], 0u);
  }
}
)";

const char* const kSweepHistogramsWgsl = R"(
var<workgroup> round_counts: array<atomic<u32>, ROUNDS * DIGITS>;

// The digit of a key in round r (of 32 / ROUNDS bits).
fn round_digit(key: u32, r: u32) -> u32 { return (key >> (r * (32u / ROUNDS))) & (DIGITS - 1u); }

// Workgroup g counts blocks g, g + histogram_groups, ... of HIST_WG * HIST_CHUNK keys, each
// invocation loading HIST_CHUNK keys HIST_WG apart (clamped loads: no branch) before counting
// them, then adds its non-zero counters to the totals. It also zeroes its share of the first
// round's look-back words (the region of round 0, tiles * DIGITS words).
@compute @workgroup_size(HIST_WG)
fn digit_histograms(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                    @builtin(local_invocation_index) local: u32) {
  let g = linear_workgroup(group, groups);
  for (var w = local; w < ROUNDS * DIGITS; w += HIST_WG) { atomicStore(&round_counts[w], 0u); }
  let invocations = params.histogram_groups * HIST_WG;
  for (var i = g * HIST_WG + local; i < params.tiles * DIGITS; i += invocations) {
    atomicStore(&block_sums[i], 0u);
  }
  workgroupBarrier();
  let last = max(params.n, 1u) - 1u;
  for (var block = g * HIST_BLOCK; block < params.n; block += params.histogram_groups * HIST_BLOCK) {
    var keys = array<u32, HIST_CHUNK>();
    for (var item = 0u; item < HIST_CHUNK; item++) {
      keys[item] = keys_in[min(block + item * HIST_WG + local, last)];
    }
    for (var item = 0u; item < HIST_CHUNK; item++) {
      if (block + item * HIST_WG + local < params.n) {
        for (var r = 0u; r < ROUNDS; r++) {
          atomicAdd(&round_counts[r * DIGITS + round_digit(keys[item], r)], 1u);
        }
      }
    }
  }
  workgroupBarrier();
  for (var w = local; w < ROUNDS * DIGITS; w += HIST_WG) {
    let count = atomicLoad(&round_counts[w]);
    if (count != 0u) { atomicAdd(&counts[w], count); }
  }
}
)";

// The scatter's tile, each digit's first output place, and the decoupled look-back.
// block_sums[(round % 2) * tiles * DIGITS + t * DIGITS + d] is tile t's word for digit d: a flag in
// the top 2 bits (0 while nothing is published) over a 30-bit count. One word, stored and loaded
// whole, so a reader sees a flag only with the count published with it, whatever the order in
// which other words become visible (no 64-bit atomics are needed, nor the two half-words of
// chained_scan.cpp); counts are at most n < 2^30 (the plan's limit), except in the last tile,
// whose ranking counts its padding keys, and whose words no tile reads (look-backs read
// predecessors only): publish masks them so that they never reach the flag.
const char* const kSweepLookBackWgsl = R"(
const FLAG_AGGREGATE: u32 = 0x40000000u;  // the tile's own count of the digit
const FLAG_PREFIX: u32 = 0x80000000u;     // the count of the digit in every tile up to this one
const FLAG_MASK: u32 = 0xc0000000u;
const COUNT_MASK: u32 = 0x3fffffffu;

// 1 + the nearest predecessor some digit gave up waiting for (0: none), and that predecessor's
// count of each digit, from the input.
var<workgroup> stuck_tile: atomic<u32>;
var<workgroup> stuck_counts: array<atomic<u32>, DIGITS>;
var<workgroup> stuck_copy: u32;  // stuck_tile, for workgroupUniformLoad
var<workgroup> tile_start: array<u32, DIGITS>;  // the tile's first output place per digit

fn chain_word(round: u32, tile: u32, d: u32) -> u32 {
  return (round % 2u) * params.tiles * DIGITS + tile * DIGITS + d;
}

// The round's count of digit `local` (0 past the digits).
fn round_total(local: u32) -> u32 {
  let d = min(local, DIGITS - 1u);
  return select(0u, atomicLoad(&counts[params.round * DIGITS + d]), local < DIGITS);
}

// Call in uniform control flow, before the ranking, with `start` the exclusive scan of the
// round's totals: tile_start[d] becomes the round's first output place of digit d; the tile's
// words of the next round are zeroed (that region's last readers ran in the previous round),
// and so is the look-back's state.
fn start_tile(tile: u32, local: u32, start: u32) {
  if (local < DIGITS) {
    tile_start[local] = start;
    atomicStore(&stuck_counts[local], 0u);
    if (params.round + 1u < ROUNDS) { atomicStore(&block_sums[chain_word(params.round + 1u, tile, local)], 0u); }
  }
  if (local == 0u) { atomicStore(&stuck_tile, 0u); }
}

fn publish(tile: u32, d: u32, flag: u32, count: u32) {
  atomicStore(&block_sums[chain_word(params.round, tile, d)], flag | (count & COUNT_MASK));
}

// Invocation d < DIGITS publishes the tile's count of digit d (tile 0: already its prefix).
fn publish_aggregate(tile: u32, local: u32, total: u32) {
  if (local < DIGITS) { publish(tile, local, select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u), total); }
}

// stuck_counts += the digits of a tile's keys, counted by the whole workgroup from the input,
// which no workgroup writes during the pass: the same keys the tile's own workgroup ranks.
)";

const char* const kCountFromInputWgsl = R"(fn count_from_input(tile: u32, local: u32) {
  for (var k = local; k < WG * KPI; k += WG) {
    let i = tile * (WG * KPI) + k;
    if (i < params.n) { atomicAdd(&stuck_counts[digit(keys_in[i])], 1u); }
  }
}
)";

const char* const kSweepWalkWgsl = R"(
// Call in uniform control flow: invocation d < DIGITS returns the count of digit d in every tile
// before `tile`. It walks back over its predecessors' words, adding aggregates, until a prefix
// (or tile 0); a predecessor that published nothing after SPINS polls is given up on. Then, as
// long as some digit gave up, the workgroup counts the nearest such predecessor from the input,
// and the digits waiting for it take its count and walk on. No invocation waits without bound:
// each walk step is at most SPINS polls, and each round of the loop accounts for at least one
// tile of some digit.
fn look_back(tile: u32, local: u32) -> u32 {
  var prefix = 0u;
  var next = tile;  // tiles before `next` are not accounted for yet
  var done = local >= DIGITS || tile == 0u;
  loop {
    var spins = 0u;
    while (!done && spins < SPINS) {
      let word = atomicLoad(&block_sums[chain_word(params.round, next - 1u, local)]);
      if ((word & FLAG_MASK) == 0u) {
        spins += 1u;
        continue;
      }
      prefix += word & COUNT_MASK;
      next -= 1u;
      spins = 0u;
      done = (word & FLAG_MASK) == FLAG_PREFIX || next == 0u;
    }
    if (!done) { atomicMax(&stuck_tile, next); }
    workgroupBarrier();
    if (local == 0u) { stuck_copy = atomicLoad(&stuck_tile); }
    let stuck = workgroupUniformLoad(&stuck_copy);
    if (stuck == 0u) { break; }
    count_from_input(stuck - 1u, local);
    workgroupBarrier();
    if (!done && next == stuck) {
      prefix += atomicLoad(&stuck_counts[local]);
      next -= 1u;
      done = next == 0u;
    }
    workgroupBarrier();
    if (local < DIGITS) { atomicStore(&stuck_counts[local], 0u); }
    if (local == 0u) { atomicStore(&stuck_tile, 0u); }
    workgroupBarrier();
  }
  return prefix;
}

// Call in uniform control flow after publish_aggregate: publishes the tile's inclusive prefix of
// each digit and adds the exclusive one to tile_start.
fn finish_tile(tile: u32, local: u32, total: u32) {
  let prefix = look_back(tile, local);
  if (local < DIGITS) {
    if (tile != 0u) { publish(tile, local, FLAG_PREFIX, prefix + total); }
    tile_start[local] += prefix;
  }
  workgroupBarrier();
}
)";

const char* const kSweepStartWgsl =
    R"(  start_tile(tile, local, workgroup_exclusive_scan(round_total(local), local).x);
)";

// The subgroup ranking scans the round's totals by subgroups (digit_group_sums is free until the
// scan over digits), after its keys' loads are issued.
const char* const kSubgroupSweepStartWgsl = R"(
fn scan_round_totals(local: u32, lane: u32, sg: u32) -> u32 {
  let total = round_total(local);
  let subgroup_total = subgroupAdd(total);
  var start = subgroupExclusiveAdd(total);
  if (lane == 0u) { digit_group_sums[local / sg] = subgroup_total; }
  workgroupBarrier();
  for (var w = 0u; w < local / sg; w++) { start += digit_group_sums[w]; }
  return start;
}
)";

const char* const kSubgroupSweepStartCallWgsl =
    R"(  start_tile(tile, local, scan_round_totals(local, lane, sg));
)";

// The invocation ranking's look-back: digit_prefix[d * WG + WG - 1] is the tile's count of
// digit d.
const char* const kInvocationLookBackWgsl =
    R"(  let digit_total = select(0u, digit_prefix[min(local, DIGITS - 1u) * WG + WG - 1u], local < DIGITS);
  publish_aggregate(tile, local, digit_total);
  finish_tile(tile, local, digit_total);
  var next = array<u32, DIGITS>();
  for (var d = 0u; d < DIGITS; d++) {
    next[d] = tile_start[d] + digit_prefix[d * WG + local] - mine[d];
  }
)";

// The subgroup ranking publishes its counts as soon as the scan over subgroups has them in
// digit_base, and looks back only once its keys are staged, so that predecessors have had the
// whole ranking to publish.
const char* const kSubgroupPublishWgsl =
    R"(  let digit_total = select(0u, digit_base[min(local, DIGITS - 1u)], local < DIGITS);
  publish_aggregate(tile, local, digit_total);
)";

const char* const kSubgroupLookBackWgsl = R"(  finish_tile(tile, local, digit_total);
)";

std::vector<WgslConstant> tile_constants(const Schedule& schedule) {
  return {{"WG", knob(schedule, kWorkgroupSize), "invocations of the scan and scatter passes"},
          {"KPI", knob(schedule, kKeysPerInvocation), "keys per invocation of a tile"},
          {"DIGITS", digit_count_of(schedule), ""}};
}

std::vector<WgslConstant> radix_constants(const Schedule& schedule, bool direct_rounds) {
  const std::uint32_t count_keys =
      static_cast<std::uint32_t>(tile_keys(schedule)) / kCountWorkgroup;
  std::vector<WgslConstant> constants = tile_constants(schedule);
  constants.insert(
      constants.end(),
      {{"SCAN_ITEMS", kCountScanItems, "counts per invocation of the counts' scan"},
       {"COUNT_WG", kCountWorkgroup, "invocations of digit_count"},
       {"COUNT_KEYS", count_keys, "keys per invocation of digit_count"},
       {"COUNT_CHUNK", std::min(count_keys, 16u), "keys loaded before they are counted"},
       {"COUNT_GROUP", count_group(schedule, direct_rounds),
        "tiles per workgroup of digit_count"}});
  return constants;
}

std::vector<WgslConstant> sweep_constants(const Schedule& schedule, std::uint32_t rounds) {
  std::vector<WgslConstant> constants = tile_constants(schedule);
  constants.insert(
      constants.end(),
      {{"ROUNDS", rounds, ""},
       {"HIST_WG", kHistogramWorkgroup, "invocations of sweep_clear and digit_histograms"},
       {"HIST_CHUNK", kHistogramChunk, "keys loaded at once by digit_histograms"},
       {"HIST_BLOCK", kHistogramWorkgroup * kHistogramChunk, "keys of a digit_histograms block"},
       {"SPINS", kSpins, "polls of a predecessor before it is counted from the input"}});
  return constants;
}

std::vector<WgslConstant> subgroup_scatter_constants(const Schedule& schedule) {
  const std::uint32_t digits = 1u << knob(schedule, kDigitBits);
  const std::uint32_t tile = knob(schedule, kWorkgroupSize) * knob(schedule, kKeysPerInvocation);
  const std::uint32_t counter_words = subgroup_counter_words(schedule);
  return {{"BITS", knob(schedule, kDigitBits), ""},
          {"MIN_SUBGROUP", kMinSubgroup, "the smallest subgroup the counters have room for"},
          {"WORDS", digits / 2, "counter words per subgroup"},
          {"RANKED_WORDS", std::max(counter_words, tile), "the counters, then the ranked tile"},
          {"PER", std::max(1u, digits / knob(schedule, kWorkgroupSize)),
           "digits per invocation in the scan over digits"}};
}

// The subgroup scatter's tile output up to its first store: the starts come from registers in
// five passes, from tile_start in one sweep.
std::string subgroup_tile_output_wgsl(bool sweep) {
  return std::string(sweep ? kSweepTileBaseWgsl : kCountedTileBaseWgsl) + kSubgroupTileOutputWgsl;
}

// The pairs' output: keys, then values staged where the keys were.
std::string pair_output_wgsl(std::uint32_t kpi) {
  return std::string(kPairKeysOutWgsl) + unrolled_loop("s", kpi, kPairKeyOutSlotWgsl) +
         "  workgroupBarrier();  // every key has left `ranked`\n" +
         unrolled_loop("j", kpi, kValueStageSlotWgsl) + kBarrierWgsl +
         unrolled_loop("s", kpi, kPairValueOutSlotWgsl) + "}\n";
}

// Each digit's output start comes from the counts' scan or, with one_sweep, from the round's
// totals and the look-back.
std::string RadixSort::subgroup_ranked_scatter_wgsl(const Schedule& schedule) const {
  const std::uint32_t kpi = knob(schedule, kKeysPerInvocation);
  const bool sweep = one_sweep(schedule);
  return "\n" + constant_declarations(subgroup_scatter_constants(schedule)) + kSubgroupRankingWgsl +
         (sweep ? kSubgroupSweepStartWgsl : "") + kSubgroupScatterHeadWgsl + kTileByIdWgsl +
         kSubgroupCountersWgsl + (sweep ? "" : kCountedTileStartWgsl) + kSubgroupLoadsWgsl +
         unrolled_loop("j", kpi, kLoadSlotWgsl) + (sweep ? kSubgroupSweepStartCallWgsl : "") +
         kPlacesWgsl + unrolled_loop("j", kpi, kRankSlotWgsl) + kSubgroupScanWgsl +
         (sweep ? kSubgroupPublishWgsl : "") + kDigitScanWgsl +
         unrolled_loop("j", kpi, kPlaceSlotWgsl) + kBarrierWgsl +
         unrolled_loop("j", kpi, kStageSlotWgsl) + (sweep ? kSubgroupLookBackWgsl : "") +
         subgroup_tile_output_wgsl(sweep) + (pairs_ ? pair_output_wgsl(kpi) : kSubgroupKeysOutWgsl);
}

std::string RadixSort::invocation_ranked_scatter_wgsl(const Schedule& schedule) const {
  if (!one_sweep(schedule)) {
    return std::string(kInvocationScatterHeadWgsl) + kWorkgroupTileWgsl + kInvocationRankingWgsl +
           kCountedStartWgsl + kInvocationScatterTailWgsl;
  }
  return std::string(kInvocationScatterHeadWgsl) + kTileByIdWgsl + kSweepStartWgsl +
         kInvocationRankingWgsl + kInvocationLookBackWgsl + kInvocationScatterTailWgsl;
}

// --- radix_sort_pairs_u64's own passes (see the file comment) --------------------------------
// keys64 and sorted64 hold key i as vec2u(low word, high word). Each pass binds the whole table:
// split_keys writes the low words (keys_out) and the positions (values_out); gather_high reads
// the positions (values_in) and writes the high words (keys_out); finish_keys reads the final
// positions (keys_in) and the sorted high words (keys_out) and writes the sorted keys (sorted64);
// finish_values moves the values (values_in to values_out) by the same positions.
const char* const kWideKeysWgsl = R"(
@compute @workgroup_size(WG)
fn split_keys(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
              @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.n) {
    keys_out[i] = keys64[i].x;
    values_out[i] = i;
  }
}

@compute @workgroup_size(WG)
fn gather_high(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.n) { keys_out[i] = keys64[values_in[i]].y; }
}

@compute @workgroup_size(WG)
fn finish_keys(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.n) { sorted64[i] = vec2u(keys64[keys_in[i]].x, keys_out[i]); }
}

@compute @workgroup_size(WG)
fn finish_values(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                 @builtin(local_invocation_index) local: u32) {
  let i = linear_workgroup(group, groups) * WG + local;
  if (i < params.n) { values_out[i] = values_in[keys_in[i]]; }
}
)";

// --- radix_sort_pairs_u64's direct rounds (direct_rounds = 1) --------------------------------
// 64 / digit_bits rounds over the u64 keys, the low word's digits first; each round's scatter
// ranks a tile once, by the digit's word, and moves the key's two words (vec2u) and its value by
// that ranking. The pieces that differ from the 32-bit sorts' are below; the rest (counts' scan,
// ranking, look-back) is the same WGSL. Params is the union of both sorts' uniform words, plus
// the round and its route (five passes; one sweep keeps the routes in `counts`).
const char* const kWideParamsWgsl = R"(
struct Params { n: u32, tiles: u32, shift: u32, count_length: u32, count_blocks: u32, scan_width: u32, round: u32, histogram_groups: u32, route: u32 }
)";

// A round's route: bits 0-1 name its source (0 the input, 1 scratch, 2 sorted), bits 2-3 its
// destination (1 scratch, 2 sorted); route 0 is a skipped round. The bindings: the input in
// keys64 and values_in, sorted in sorted64 and values_out, scratch in keys_out, key i at i and
// value i in half i % 2 of n + i / 2 (the table's eight storage bindings, as for direct_rounds
// 0); each place has its accessors, named after it. load_pair branches on the route, uniform over
// the whole dispatch, in each access (digit_count, the look-back's fallback); the scatter's tile
// branches once (by_round_source, by_round_destination). The round's digit is in the key's low
// word for the first 32 / BITS rounds, then in its high word.
const char* const kWideRoutesWgsl = R"(
fn pair_from_input(i: u32) -> vec2u { return keys64[i]; }
fn pair_from_scratch(i: u32) -> vec2u { return keys_out[i]; }
fn pair_from_sorted(i: u32) -> vec2u { return sorted64[i]; }
fn value_from_input(i: u32) -> u32 { return values_in[i]; }
fn value_from_scratch(i: u32) -> u32 { return keys_out[params.n + i / 2u][i & 1u]; }
fn value_from_sorted(i: u32) -> u32 { return values_out[i]; }
fn pair_to_scratch(place: u32, pair: vec2u) { keys_out[place] = pair; }
fn pair_to_sorted(place: u32, pair: vec2u) { sorted64[place] = pair; }
fn value_to_scratch(place: u32, value: u32) { keys_out[params.n + place / 2u][place & 1u] = value; }
fn value_to_sorted(place: u32, value: u32) { values_out[place] = value; }
fn load_pair(i: u32) -> vec2u {
  let source = round_route() & 3u;
  if (source == 0u) { return pair_from_input(i); }
  if (source == 1u) { return pair_from_scratch(i); }
  return pair_from_sorted(i);
}
fn high_round() -> bool { return params.round >= 32u / BITS; }
fn digit_word(pair: vec2u) -> u32 { return select(pair.x, pair.y, high_round()); }
fn other_word(pair: vec2u) -> u32 { return select(pair.y, pair.x, high_round()); }
fn join_words(word: u32, other: u32) -> vec2u {
  return select(vec2u(word, other), vec2u(other, word), high_round());
}
)";

const char* const kCountedRouteWgsl = R"(
fn round_route() -> u32 { return params.route; }
)";

// One sweep: the scatter copies its round's route (from plan_rounds) here before any access.
const char* const kSweepRouteWgsl = R"(
var<private> sweep_route: u32;
var<workgroup> route_copy: u32;
fn round_route() -> u32 { return sweep_route; }
)";

const char* const kWideLoadCountChunkWgsl = R"(
// COUNT_CHUNK digit words, COUNT_WG apart from `first` (clamped loads: no branch).
fn load_count_chunk(first: u32) -> array<u32, COUNT_CHUNK> {
  let last = max(params.n, 1u) - 1u;
  var keys = array<u32, COUNT_CHUNK>();
  for (var item = 0u; item < COUNT_CHUNK; item++) {
    keys[item] = digit_word(load_pair(min(first + item * COUNT_WG, last)));
  }
  return keys;
}
)";

// digit_histograms of the 32-bit sorts (kSweepHistogramsWgsl) over the u64 keys of the input:
// every round's digits, ROUNDS of them.
const char* const kWideHistogramsWgsl = R"(
var<workgroup> round_counts: array<atomic<u32>, ROUNDS * DIGITS>;

fn pair_digit(pair: vec2u, r: u32) -> u32 {
  let half = ROUNDS / 2u;
  let word = select(pair.x, pair.y, r >= half);
  return (word >> ((r % half) * BITS)) & (DIGITS - 1u);
}

@compute @workgroup_size(HIST_WG)
fn digit_histograms(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                    @builtin(local_invocation_index) local: u32) {
  let g = linear_workgroup(group, groups);
  for (var w = local; w < ROUNDS * DIGITS; w += HIST_WG) { atomicStore(&round_counts[w], 0u); }
  let invocations = params.histogram_groups * HIST_WG;
  for (var i = g * HIST_WG + local; i < params.tiles * DIGITS; i += invocations) {
    atomicStore(&block_sums[i], 0u);
  }
  workgroupBarrier();
  let last = max(params.n, 1u) - 1u;
  for (var block = g * HIST_BLOCK; block < params.n; block += params.histogram_groups * HIST_BLOCK) {
    var keys = array<vec2u, HIST_CHUNK>();
    for (var item = 0u; item < HIST_CHUNK; item++) {
      keys[item] = keys64[min(block + item * HIST_WG + local, last)];
    }
    for (var item = 0u; item < HIST_CHUNK; item++) {
      if (block + item * HIST_WG + local < params.n) {
        for (var r = 0u; r < ROUNDS; r++) {
          atomicAdd(&round_counts[r * DIGITS + pair_digit(keys[item], r)], 1u);
        }
      }
    }
  }
  workgroupBarrier();
  for (var w = local; w < ROUNDS * DIGITS; w += HIST_WG) {
    let count = atomicLoad(&round_counts[w]);
    if (count != 0u) { atomicAdd(&counts[w], count); }
  }
}
)";

// One workgroup, after digit_histograms: a round whose totals have one digit of all n keys
// moves nothing (a stable scatter of equal digits is the identity), so it is skipped, as when
// a column's high words are all 0. The kept rounds alternate between scratch and sorted,
// starting from the input and ending in sorted; if every round is skipped (all keys equal), the
// last one is kept, so that sorted is written. counts[ROUNDS * DIGITS + r] is round
// r's route.
const char* const kPlanRoundsWgsl = R"(
var<workgroup> round_kept: array<u32, ROUNDS>;

@compute @workgroup_size(HIST_WG)
fn plan_rounds(@builtin(local_invocation_index) local: u32) {
  if (local < ROUNDS) {
    var kept = 1u;
    for (var d = 0u; d < DIGITS; d++) {
      if (atomicLoad(&counts[local * DIGITS + d]) == params.n) { kept = 0u; }
    }
    round_kept[local] = kept;
  }
  workgroupBarrier();
  if (local == 0u) {
    var kept_rounds = 0u;
    for (var r = 0u; r < ROUNDS; r++) { kept_rounds += round_kept[r]; }
    if (kept_rounds == 0u) {
      round_kept[ROUNDS - 1u] = 1u;
      kept_rounds = 1u;
    }
    var source = 0u;
    var done = 0u;
    for (var r = 0u; r < ROUNDS; r++) {
      var route = 0u;
      if (round_kept[r] == 1u) {
        let destination = select(1u, 2u, (kept_rounds - 1u - done) % 2u == 0u);
        route = source | (destination << 2u);
        source = destination;
        done += 1u;
      }
      atomicStore(&counts[ROUNDS * DIGITS + r], route);
    }
  }
}
)";

const char* const kWideCountFromInputWgsl = R"(fn count_from_input(tile: u32, local: u32) {
  for (var k = local; k < WG * KPI; k += WG) {
    let i = tile * (WG * KPI) + k;
    if (i < params.n) { atomicAdd(&stuck_counts[digit(digit_word(load_pair(i)))], 1u); }
  }
}
)";

const char* const kWideSweepTileWgsl =
    R"(  let tile = linear_workgroup(group, groups);
  if (tile >= params.tiles) { return; }  // a grid rounded up past the tiles
  if (local == 0u) { route_copy = atomicLoad(&counts[ROUNDS * DIGITS + params.round]); }
  let route = workgroupUniformLoad(&route_copy);
  sweep_route = route;
  if (route == 0u) {
    // A skipped round: the keys stay where they are, where plan_rounds routes the next kept
    // round. The tile's look-back words of the next round are zeroed all the same (start_tile).
    if (local < DIGITS && params.round + 1u < ROUNDS) {
      atomicStore(&block_sums[chain_word(params.round + 1u, tile, local)], 0u);
    }
    return;
  }
)";

const char* const kWideOthersWgsl = R"(  var values = array<u32, KPI>();
  var others = array<u32, KPI>();  // each key's other word
)";

// The slots below that access the round's source or destination name it ROUTE, which
// by_round_source and by_round_destination replace by each place's name.
const char* const kWideLoadSlotWgsl = R"(    let i = run + j * sg + lane;
    let pair = pair_from_ROUTE(min(i, last));
    keys[j] = select(0xffffffffu, digit_word(pair), i < params.n);
    others[j] = other_word(pair);
    values[j] = value_from_ROUTE(min(i, last));
)";

// The tile's three columns take turns in `ranked` (kStageSlotWgsl stages the digit words): each
// invocation reads the digit words of its staged keys and their output places, then the other
// words take the digit words' places and leave joined with them, then the values take their
// places and leave, as the 32-bit pairs' values do (kPairValueOutSlotWgsl).
// A workgroup holds a tile's words once: measured on an H100 in session 37 against an array of
// their own for the other words and values (see docs/performance.md). The tail starts as the
// 32-bit pairs' does (kSubgroupTileOutputWgsl, kPairKeysOutWgsl), keeping each staged key's digit
// word too.
const char* const kWideDigitWordsWgsl =
    R"(  var words = array<u32, KPI>();  // the digit word of the staged key local + s WG
)";

const char* const kWideTargetSlotWgsl = R"(    let p = local + s * WG;
    words[s] = atomicLoad(&ranked[p]);
    targets[s] = digit_base[digit(words[s])] + p;
)";

const char* const kWideStageOtherSlotWgsl = R"(    atomicStore(&ranked[places[j]], others[j]);
)";

const char* const kWideStagedValueSlotWgsl = R"(    atomicStore(&ranked[places[j]], values[j]);
)";

const char* const kWidePairOutSlotWgsl = R"(    let p = local + s * WG;
    if (p < valid) { pair_to_ROUTE(targets[s], join_words(words[s], atomicLoad(&ranked[p]))); }
)";

const char* const kWideValueOutSlotWgsl = R"(    let p = local + s * WG;
    if (p < valid) { value_to_ROUTE(targets[s], atomicLoad(&ranked[p])); }
)";

// `slot` with its place ROUTE named `route`.
std::string slot_at_route(std::string slot, const std::string& route) {
  for (std::size_t at = slot.find("ROUTE"); at != std::string::npos; at = slot.find("ROUTE", at)) {
    slot.replace(at, 5, route);
  }
  return slot;
}

// The direct rounds' scatter branches on its round's route once per tile, around all the key
// slots' accesses, instead of in each access: measured on an H100 in session 37 (2^28 u64 pairs,
// one sweep of 256 x 16, docs/performance.md), the tile's loads alone took the eight rounds'
// scatter from 56.67 to 31.78 ms. The route is uniform over the dispatch.
std::string by_round_source(std::uint32_t kpi, const char* slot) {
  return "  let round_source = round_route() & 3u;\n  if (round_source == 0u) {\n" +
         indented(unrolled_loop("j", kpi, slot_at_route(slot, "input")), 1) +
         "  } else if (round_source == 1u) {\n" +
         indented(unrolled_loop("j", kpi, slot_at_route(slot, "scratch")), 1) + "  } else {\n" +
         indented(unrolled_loop("j", kpi, slot_at_route(slot, "sorted")), 1) + "  }\n";
}

std::string by_round_destination(std::uint32_t kpi, const char* slot) {
  return "  if ((round_route() >> 2u) == 1u) {\n" +
         indented(unrolled_loop("s", kpi, slot_at_route(slot, "scratch")), 1) + "  } else {\n" +
         indented(unrolled_loop("s", kpi, slot_at_route(slot, "sorted")), 1) + "  }\n";
}

std::string digit_count_wgsl(const Schedule& schedule) {
  if (packed_count(schedule)) {
    return std::string(kTileCountsWgsl) + kDigitCountWgsl + kPackedDigitCountWgsl;
  }
  return kGroupedDigitCountWgsl;
}

std::string RadixSort::direct_wgsl(const Schedule& schedule) const {
  const std::uint32_t kpi = knob(schedule, kKeysPerInvocation);
  const bool sweep = one_sweep(schedule);
  std::string wgsl = std::string("enable subgroups;\n") + kLinearWorkgroupWgsl + kWideParamsWgsl +
                     binding_declarations(wgsl_bindings(schedule)) + "\n" +
                     constant_declarations(sweep ? sweep_constants(schedule, sort_rounds(schedule))
                                                 : radix_constants(schedule, true)) +
                     "\n" + kDigitWgsl + kWideRoutesWgsl;
  if (sweep) {
    wgsl += std::string(kSweepRouteWgsl) + kSweepClearWgsl + kWideHistogramsWgsl + kPlanRoundsWgsl +
            kSweepLookBackWgsl + kWideCountFromInputWgsl + kSweepWalkWgsl;
  } else {
    wgsl += std::string(kCountedRouteWgsl) + kWorkgroupScanWgsl + kCountsScanWgsl +
            kWideLoadCountChunkWgsl + digit_count_wgsl(schedule);
  }
  return wgsl + "\n" + constant_declarations(subgroup_scatter_constants(schedule)) +
         kSubgroupRankingWgsl + (sweep ? kSubgroupSweepStartWgsl : "") + kSubgroupScatterHeadWgsl +
         (sweep ? kWideSweepTileWgsl : kTileByIdWgsl) + kSubgroupCountersWgsl +
         (sweep ? "" : kCountedTileStartWgsl) + kSubgroupLoadsWgsl + kWideOthersWgsl +
         by_round_source(kpi, kWideLoadSlotWgsl) + (sweep ? kSubgroupSweepStartCallWgsl : "") +
         kPlacesWgsl + unrolled_loop("j", kpi, kRankSlotWgsl) + kSubgroupScanWgsl +
         (sweep ? kSubgroupPublishWgsl : "") + kDigitScanWgsl +
         unrolled_loop("j", kpi, kPlaceSlotWgsl) + kBarrierWgsl +
         unrolled_loop("j", kpi, kStageSlotWgsl) + (sweep ? kSubgroupLookBackWgsl : "") +
         subgroup_tile_output_wgsl(sweep) + kPairKeysOutWgsl + kWideDigitWordsWgsl +
         unrolled_loop("s", kpi, kWideTargetSlotWgsl) + kBarrierWgsl +
         unrolled_loop("j", kpi, kWideStageOtherSlotWgsl) + kBarrierWgsl +
         by_round_destination(kpi, kWidePairOutSlotWgsl) + kBarrierWgsl +
         unrolled_loop("j", kpi, kWideStagedValueSlotWgsl) + kBarrierWgsl +
         by_round_destination(kpi, kWideValueOutSlotWgsl) + "}\n";
}

std::string RadixSort::one_sweep_wgsl(const Schedule& schedule) const {
  const bool subgroups = knob(schedule, kUseSubgroups) == 1;
  return std::string(subgroups ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl +
         kSweepParamsWgsl + binding_declarations(wgsl_bindings(schedule)) + "\n" +
         constant_declarations(sweep_constants(schedule, sort_rounds(schedule))) + "\n" +
         (subgroups ? "" : kWorkgroupScanWgsl) + kDigitWgsl + kSweepClearWgsl +
         kSweepHistogramsWgsl + kSweepLookBackWgsl + kCountFromInputWgsl + kSweepWalkWgsl +
         (pairs_ ? kPairValuesWgsl : kKeyOnlyValuesWgsl) +
         (subgroups ? subgroup_ranked_scatter_wgsl(schedule)
                    : invocation_ranked_scatter_wgsl(schedule)) +
         (wide_keys_ ? kWideKeysWgsl : "");
}

std::string RadixSort::generate_wgsl(const Schedule& schedule) const {
  if (direct(schedule)) return direct_wgsl(schedule);
  if (one_sweep(schedule)) return one_sweep_wgsl(schedule);
  const bool subgroups = knob(schedule, kUseSubgroups) == 1;
  const std::string values = pairs_ ? kPairValuesWgsl : kKeyOnlyValuesWgsl;
  return std::string(subgroups ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl + kParamsWgsl +
         binding_declarations(wgsl_bindings(schedule)) + "\n" +
         constant_declarations(radix_constants(schedule, false)) + "\n" + kWorkgroupScanWgsl +
         kDigitWgsl + kCountsScanWgsl + kLoadCountChunkWgsl + digit_count_wgsl(schedule) + values +
         (subgroups ? subgroup_ranked_scatter_wgsl(schedule)
                    : invocation_ranked_scatter_wgsl(schedule)) +
         (wide_keys_ ? kWideKeysWgsl : "");
}

namespace {

// The oracle's order: the input positions sorted stably by key, by a least-significant-digit
// radix sort of 8-bit digits (linear time; a comparison sort of tens of millions of indices
// through their keys took seconds). Keys are u32 or u64.
template <typename Key>
std::vector<std::uint32_t> stable_order(const std::vector<Key>& keys) {
  const std::size_t n = keys.size();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::vector<std::uint32_t> next(n);
  for (std::uint32_t shift = 0; shift < 8 * sizeof(Key); shift += 8) {
    std::array<std::size_t, 257> starts{};
    for (Key key : keys) ++starts[((key >> shift) & 0xffu) + 1];
    for (std::size_t digit = 1; digit < starts.size(); ++digit) starts[digit] += starts[digit - 1];
    for (std::uint32_t position : order)
      next[starts[(keys[position] >> shift) & 0xffu]++] = position;
    order.swap(next);
  }
  return order;
}

}  // namespace

// radix_sort_pairs_u64's oracle: the positions sorted stably by their u64 keys (stable_order);
// exact, with the same checks as the 32-bit sorts.
CaseVerdict check_wide_pairs(const CaseInputs& inputs,
                             const std::map<std::string, std::vector<std::byte>>& outputs) {
  const std::uint64_t n = inputs.problem.elements;
  const auto words = from_bytes<std::uint32_t>(inputs.buffers.at("keys"), 2 * n);
  const auto values = from_bytes<std::uint32_t>(inputs.buffers.at("values"), n);
  const auto sorted_words = from_bytes<std::uint32_t>(outputs.at("sorted"), 2 * n);
  const auto sorted_values = from_bytes<std::uint32_t>(outputs.at("sorted_values"), n);
  const auto key = [](const std::vector<std::uint32_t>& w, std::uint64_t i) {
    return std::uint64_t{w[2 * i + 1]} << 32 | w[2 * i];
  };
  std::vector<std::uint64_t> keys(n);
  for (std::uint64_t i = 0; i < n; ++i) keys[i] = key(words, i);
  const std::vector<std::uint32_t> order = stable_order(keys);
  std::vector<std::uint32_t> expected(3 * n);  // the sorted words, then the values
  for (std::uint64_t i = 0; i < n; ++i) {
    expected[2 * i] = words[2 * order[i]];
    expected[2 * i + 1] = words[2 * order[i] + 1];
    expected[2 * n + i] = values[order[i]];
  }
  std::vector<std::uint32_t> actual = sorted_words;
  actual.insert(actual.end(), sorted_values.begin(), sorted_values.end());
  CaseVerdict verdict;
  verdict.report = compare_exact(expected, actual);  // indices past 2 n are values
  for (std::uint64_t i = 1; i < n; ++i) {
    if (key(sorted_words, i) < key(sorted_words, i - 1)) {
      verdict.failed_checks.push_back("keys are not in ascending order (at " + std::to_string(i) +
                                      ")");
      break;
    }
  }
  if (verdict.report.mismatch_count > 0) {
    std::vector<std::uint64_t> got(n);
    std::vector<std::uint64_t> want(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      got[i] = key(sorted_words, i);
      want[i] = key(words, i);
    }
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    if (got != want) verdict.failed_checks.push_back("keys are not a permutation of the input");
  }
  for (std::uint64_t i = 1; i < n; ++i) {
    if (key(sorted_words, i) == key(sorted_words, i - 1) &&
        sorted_values[i] < sorted_values[i - 1]) {
      verdict.failed_checks.push_back("equal keys at " + std::to_string(i - 1) + " and " +
                                      std::to_string(i) + " lost their input order (not stable)");
      break;
    }
  }
  return verdict;
}

CaseVerdict RadixSort::check(const CaseInputs& inputs,
                             const std::map<std::string, std::vector<std::byte>>& outputs) const {
  if (wide_keys_) return check_wide_pairs(inputs, outputs);
  const std::uint64_t n = inputs.problem.elements;
  const auto keys = from_bytes<std::uint32_t>(inputs.buffers.at("keys"), n);
  const auto sorted = from_bytes<std::uint32_t>(outputs.at("sorted"), n);
  const std::vector<std::uint32_t> order = stable_order(keys);
  std::vector<std::uint32_t> expected_keys(n);
  for (std::uint64_t i = 0; i < n; ++i) expected_keys[i] = keys[order[i]];
  CaseVerdict verdict;
  verdict.report = compare_exact(expected_keys, sorted);
  if (!std::is_sorted(sorted.begin(), sorted.end())) {
    verdict.failed_checks.push_back("keys are not in ascending order");
  }
  if (verdict.report.mismatch_count > 0) {
    // What the wrong keys are, in words: only sorting them can tell.
    std::vector<std::uint32_t> multiset = sorted;
    std::sort(multiset.begin(), multiset.end());
    if (multiset != expected_keys) {
      verdict.failed_checks.push_back("keys are not a permutation of the input");
    }
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
  static const RadixSort kKernel(false, false);
  return kKernel;
}
const KernelDefinition& radix_sort_pairs_u32_kernel() {
  static const RadixSort kKernel(true, false);
  return kKernel;
}
const KernelDefinition& radix_sort_pairs_u64_kernel() {
  static const RadixSort kKernel(true, true);
  return kKernel;
}

}  // namespace wgsl_forge::kernels
