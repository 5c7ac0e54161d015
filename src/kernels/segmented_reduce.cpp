// segmented_reduce_sum_f32: sums[s] = x[offsets[s]] + ... + x[offsets[s + 1] - 1] for each of
// the problem's `segments` segments; an empty segment sums to 0. offsets holds segments + 1
// words, ascending, at most n (values outside [offsets[0], offsets[segments]) belong to no
// segment). The typed calls check host offsets (check_segment_offsets); on the GPU a range is
// clamped to the input, so offsets that break the rule give wrong sums, never a stray access.
//
// Segment lengths are known only on the GPU, and each length takes its own path, so that every
// length runs fast:
//   reset_ranges    one invocation empties `ranges`: the first and one past the last segment
//                   longer than short, and the same for those longer than chunk;
//   short_segments  a team of team_lanes invocations per segment (a few lanes, or a subgroup)
//                   sums each segment of at most short = team_lanes * team_items values, the
//                   team's lanes reading consecutive values (with team_vectors 1, consecutive
//                   aligned vec4s, team_items each: short = 4 team_lanes team_items - 3, and
//                   a 1-invocation pass short_tail adds the last n % 4 values, which no whole
//                   vec4 holds, to their short segments); a team takes team_segments
//                   segments, one per round, and each round the workgroup's teams take
//                   consecutive segments, so a round reads one run of values (coalesced) and
//                   all rounds' loads are issued before any team sum (more bytes in flight per
//                   workgroup for short segments). The others widen `ranges`
//                   (atomicMin/atomicMax, once per workgroup);
//   chunk_partials  the input is cut into chunks of chunk = workgroup_size * chunk_items
//                   values; a chunk whose first value lies in a long segment (longer than
//                   chunk) sums its values of that segment into partials[chunk] (its workgroup
//                   finds the segment by a binary search of offsets within the long range, and
//                   leaves at once when the input has no long segment);
//   large_segments  each workgroup scans block_segments segments (none, when its block lies
//                   outside the range of segments longer than short) and sums each of those
//                   longer than short with all its invocations: a medium one (up to chunk
//                   values) from the input, a long one from its head (the values before its
//                   first chunk boundary) and the partials of the chunks that start inside it.
// So several workgroups share a long segment and the last pass combines their partials; no pass
// waits on another workgroup, and no atomics touch the sums. Each sum is added in an order that
// depends on the schedule alone, so the result is deterministic. The passes that find nothing to
// do cost one load per workgroup, so a schedule pays for the path its segments take (before the
// ranges, every chunk's workgroup searched all offsets, which made short segments slow).
//
// Size buckets are keyed by the average segment length n / segments, all at the main element
// count: segments of 32, 256 (the main bucket), 1024 and 8192 on a GPU, of 32 and 256 on a CPU
// adapter. A call takes the bucket nearest to its average length by ratio (nearest_buckets), so
// a schedule always runs at the segment lengths it was tuned for.
//
// Knobs: workgroup_size, team_lanes, team_items, team_segments, block_segments (at most
// workgroup_size), team_vectors and pass_grid (revision 3; 0 is revision 2's behaviour: the
// latter bounds chunk_partials' and large_segments' grids, which stride over the chunks and
// blocks in the ranges that short_segments recorded; revision 4 only moves x4's declaration into
// the binding table's),
// chunk_items, use_subgroups (teams add with subgroup shuffles, which needs team_lanes within
// the adapter's smallest subgroup, and workgroups add subgroup sums; otherwise trees in
// workgroup memory). Revision 5: a short_segments workgroup whose segments are all short no
// longer reads the global `ranges` before it ends.
//
// Oracle and tolerance: each sum is compared with the exact sum (long double) of its segment:
// |s - exact| <= len 2^-24 sum|x| + len FLT_MIN (any order of additions; subnormals may flush),
// an empty segment exactly 0. Bytes moved: 4 n + 4 (segments + 1) + 4 segments.

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

#include "kernel_support.hpp"
#include "util/try.hpp"

namespace wgsl_forge::kernels {
namespace {

using namespace support;

const KnobSpec kWorkgroupSize{
    "workgroup_size", "invocations per workgroup", {64, 128, 256, 512}, 256};
const KnobSpec kTeamLanes{"team_lanes", "invocations per short segment", {1, 4, 8, 16, 32}, 8};
const KnobSpec kTeamItems{
    "team_items", "values per invocation of a short segment", {1, 2, 4, 8, 16, 32}, 4};
const KnobSpec kTeamSegments{
    "team_segments", "short segments per team, one per round", {1, 2, 4, 8}, 1};
const KnobSpec kBlockSegments{
    "block_segments", "segments scanned per workgroup for medium and long ones", {16, 64, 256}, 64};
const KnobSpec kChunkItems{
    "chunk_items", "values per invocation of a long segment's chunk", {8, 16, 32, 64}, 16};
const KnobSpec kUseSubgroups{"use_subgroups", "add within subgroups", {0, 1}, 0};
const KnobSpec kPassGrid{"pass_grid",
                         "workgroups of chunk_partials and large_segments at most (0: one per "
                         "chunk and per block)",
                         {0, 32, 1024},
                         0};
const KnobSpec kTeamVectors{
    "team_vectors",
    "short segments read as 0: f32 values, 1: aligned vec4 (team_items vec4 a lane)",
    {0, 1},
    0};

// The main tuning problem's segments: one per this many values (the typed calls take any
// layout); the other buckets' lengths (see the header).
constexpr std::uint64_t kTuningSegmentLength = 256;
const std::vector<std::uint64_t> kGpuBucketLengths = {32, 256, 1024, 8192};
const std::vector<std::uint64_t> kCpuBucketLengths = {32, 256};

// The longest short segment: what a team's loads cover, and with vec4 loads from the vec4 that
// holds its first value, whatever its alignment (a team of L lanes x I vec4 covers 4 L I values
// from a multiple of 4, so any segment of 4 L I - 3).
std::uint32_t short_limit(const Schedule& schedule) {
  const std::uint32_t covered = knob(schedule, kTeamLanes) * knob(schedule, kTeamItems);
  return knob(schedule, kTeamVectors) == 1 ? 4 * covered - 3 : covered;
}
std::uint64_t chunk_values(const Schedule& schedule) {
  return std::uint64_t{knob(schedule, kWorkgroupSize)} * knob(schedule, kChunkItems);
}

// The segment lengths of a profile (their sum at most n; the profile "boundaries SHORT CHUNK"
// is a schedule's own case), and the first segment's offset.
struct Layout {
  std::uint64_t first = 0;
  std::vector<std::uint64_t> lengths;
};

Layout segment_layout(const Problem& problem, const std::string& profile, std::mt19937_64& random) {
  const std::uint64_t n = problem.elements;
  const std::uint64_t segments = problem.segments;
  Layout layout;
  if (profile.rfind("boundaries", 0) == 0) {
    // Every length around the schedule's thresholds, from an offset that is no multiple of a
    // chunk, so that each long segment has a head.
    std::uint64_t short_max = 0;
    std::uint64_t chunk = 0;
    std::istringstream(profile.substr(10)) >> short_max >> chunk;
    layout.first = 3;
    for (std::uint64_t length :
         {std::uint64_t{0}, std::uint64_t{1}, short_max - 1, short_max, short_max + 1, chunk - 1,
          chunk, chunk + 1, 2 * chunk + 5, std::uint64_t{0}, 3 * chunk + chunk / 2}) {
      layout.lengths.push_back(length);
    }
    layout.lengths.resize(segments, 1);
    return layout;
  }
  if (profile == "mixed") {
    // Lengths drawn from 0, 1, 32 and 1024 (mean 264), after a few values that no segment
    // holds; the last segment takes what is left but a few values, so it is very long when
    // the draws fall short of n, and the draws that overshoot become empty segments.
    const std::uint64_t kLengths[] = {0, 1, 32, 1024};
    layout.first = std::min<std::uint64_t>(n, random() % 5);
    std::uint64_t left = n - layout.first - std::min<std::uint64_t>(n - layout.first, 3);
    for (std::uint64_t s = 0; s + 1 < segments; ++s) {
      const std::uint64_t length = std::min(left, kLengths[random() % 4]);
      layout.lengths.push_back(length);
      left -= length;
    }
    if (segments > 0) layout.lengths.push_back(left);
    return layout;
  }
  // "even": segment s holds [floor(s n / segments), floor((s + 1) n / segments)).
  for (std::uint64_t s = 0; s < segments; ++s) {
    layout.lengths.push_back((s + 1) * n / segments - s * n / segments);
  }
  return layout;
}

class SegmentedReduceSumF32 final : public KernelDefinition {
 public:
  std::string_view id() const override { return "segmented_reduce_sum_f32"; }
  std::uint32_t revision() const override { return 5; }
  std::string_view summary() const override {
    return "sum of each segment of n f32 given by segments + 1 u32 offsets (empty: 0)";
  }

  std::vector<KnobSpec> knobs() const override {
    return {kWorkgroupSize, kTeamLanes,    kTeamItems,   kTeamSegments, kBlockSegments,
            kChunkItems,    kUseSubgroups, kTeamVectors, kPassGrid};
  }

  Status check_resources(const Schedule& schedule,
                         const DeviceCapabilities& device) const override {
    if (knob(schedule, kBlockSegments) > knob(schedule, kWorkgroupSize)) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob block_segments (" + std::to_string(knob(schedule, kBlockSegments)) +
                       ") exceeds workgroup_size (" +
                       std::to_string(knob(schedule, kWorkgroupSize)) +
                       "): one invocation looks at each segment of a block.");
    }
    if (knob(schedule, kTeamVectors) == 1 && short_limit(schedule) < 5) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob team_vectors (1) needs team_lanes x team_items of at least 2 (it is " +
                       std::to_string(knob(schedule, kTeamLanes) * knob(schedule, kTeamItems)) +
                       "): a team then takes any segment of up to 5 values, so that below 4 "
                       "values every segment is short.");
    }
    if (knob(schedule, kUseSubgroups) == 1 && device.subgroup_min_size != 0 &&
        knob(schedule, kTeamLanes) > device.subgroup_min_size) {
      return Error(ErrorKind::kInvalidInput,
                   "Knob team_lanes (" + std::to_string(knob(schedule, kTeamLanes)) +
                       ") with use_subgroups (1) needs subgroups of at least that many "
                       "invocations; the adapter's smallest has " +
                       std::to_string(device.subgroup_min_size) + ".");
    }
    return Ok{};
  }

  Status check_problem(const Problem& problem) const override {
    WF_TRY(KernelDefinition::check_problem(problem));
    constexpr std::uint64_t kLargest = std::numeric_limits<std::uint32_t>::max() - 1;
    if (problem.segments > kLargest) {
      return Error(ErrorKind::kInvalidInput,
                   "Segment count (" + std::to_string(problem.segments) +
                       ") exceeds the largest that segmented_reduce_sum_f32 indexes (" +
                       std::to_string(kLargest) + ": its offsets are u32 words).");
    }
    return Ok{};
  }

  // With team_vectors, short_segments reads x through `x4`, a vec4 view of its binding.
  std::vector<WgslBinding> wgsl_bindings(const Schedule& schedule) const override {
    WgslBinding x = storage_read(1, "x", "f32");
    if (knob(schedule, kTeamVectors) == 1) x = with_view(x, "x4", "vec4f");
    return {params_binding("Params"),
            x,
            storage_read(2, "offsets", "u32"),
            storage_read_write(3, "sums", "f32"),
            storage_read_write(4, "partials", "f32"),
            storage_read_write(5, "ranges", "atomic<u32>")};
  }

  std::vector<BufferSpec> buffer_specs() const override {
    return {{"x", ElementType::kF32, BufferRole::kInput, "n elements, at least 1"},
            {"offsets", ElementType::kU32, BufferRole::kInput,
             "segments + 1 elements (ascending, at most n)"},
            {"sums", ElementType::kF32, BufferRole::kOutput, "segments elements, at least 1"},
            {"partials", ElementType::kF32, BufferRole::kScratch,
             "one element per chunk of workgroup_size * chunk_items values"},
            {"ranges", ElementType::kU32, BufferRole::kScratch,
             "4 elements: the segments longer than short, and than a chunk"}};
  }

  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    if (knob(schedule, kTeamVectors) == 1) {
      return {"reset_ranges", "short_segments", "short_tail", "chunk_partials", "large_segments"};
    }
    return {"reset_ranges", "short_segments", "chunk_partials", "large_segments"};
  }

  std::string generate_wgsl(const Schedule& schedule) const override;

  Result<DispatchPlan> plan(const Schedule& schedule, const Problem& problem,
                            const DeviceCapabilities&) const override {
    const std::uint64_t n = problem.elements;
    const std::uint64_t segments = problem.segments;
    const std::uint64_t teams = knob(schedule, kWorkgroupSize) / knob(schedule, kTeamLanes);
    const std::uint64_t team_segments = teams * knob(schedule, kTeamSegments);
    const std::uint64_t chunks = ceil_div(n, chunk_values(schedule));
    const std::vector<std::uint32_t> params = {static_cast<std::uint32_t>(n),
                                               static_cast<std::uint32_t>(segments),
                                               static_cast<std::uint32_t>(chunks)};
    DispatchPlan plan;
    plan.buffers =
        make_buffer_plans(buffer_specs(), {{"x", std::max<std::uint64_t>(4, 4 * n)},
                                           {"offsets", 4 * (segments + 1)},
                                           {"sums", std::max<std::uint64_t>(4, 4 * segments)},
                                           {"partials", std::max<std::uint64_t>(4, 4 * chunks)},
                                           {"ranges", 16}});
    const std::map<std::uint32_t, std::string> buffers = {
        {1, "x"}, {2, "offsets"}, {3, "sums"}, {4, "partials"}, {5, "ranges"}};
    // With vec4 loads and fewer than 4 values short_tail sums every segment (see the WGSL).
    const bool vectors = knob(schedule, kTeamVectors) == 1;
    plan.passes = {{"reset_ranges", 1, buffers, params},
                   {"short_segments", vectors && n < 4 ? 0 : ceil_div(segments, team_segments),
                    buffers, params}};
    if (vectors) {
      plan.passes.push_back({"short_tail", segments == 0 ? 0u : 1u, buffers, params});
    }
    // pass_grid bounds the grids that stride over chunks and blocks (see the WGSL).
    const std::uint64_t grid = knob(schedule, kPassGrid);
    const std::uint64_t blocks = ceil_div(segments, knob(schedule, kBlockSegments));
    plan.passes.push_back(
        {"chunk_partials", grid == 0 ? chunks : std::min(chunks, grid), buffers, params});
    plan.passes.push_back(
        {"large_segments", grid == 0 ? blocks : std::min(blocks, grid), buffers, params});
    return plan;
  }

  std::string tolerance() const override {
    return "per segment |s - exact| <= len 2^-24 sum|x| + len FLT_MIN; empty segments 0";
  }

  std::vector<CaseSpec> certification_cases() const override {
    auto one = [](std::string name, std::uint64_t n, std::uint64_t segments, std::string profile) {
      Problem problem = elements_problem(n);
      problem.segments = segments;
      return CaseSpec{name + " n=" + std::to_string(n) + " segments=" + std::to_string(segments),
                      problem, std::move(profile)};
    };
    // The first profile is what the tuner and bench time: even segments of n / segments.
    return {one("no segments", 0, 0, "even"), one("empty segments", 0, 7, "even"),
            one("one segment", 7919, 1, "even"), one("lengths 0 and 1", 600, 1000, "even"),
            one("length 1", 1000, 1000, "even"), one("length 32", 32 * 301, 301, "even"),
            one("length 1024", 1024 * 37, 37, "even"), one("very long", 3 * 100003, 3, "even"),
            one("mixed", 3001 * 264, 3001, "mixed"), one("mixed", 104729, 400, "mixed"),
            // Short segments holding the last n % 4 values, which vec4 loads leave to short_tail.
            one("short tail", 999, 999, "even"), one("short tail", 32 * 300 + 3, 301, "even"),
            one("fewer than 4 values", 3, 5, "even"),
            // More than 65535 workgroups of short_segments where a workgroup takes at most 32
            // segments (workgroup_size / team_lanes * team_segments).
            one("many-workgroups", 1u << 21, (1u << 21) + 5, "even")};
  }

  // Past each threshold of the schedule: segments of short - 1, short and short + 1 values
  // (team or workgroup), chunk - 1 to chunk + 1 (medium or long) and of several chunks with a
  // head; and a long segment of more chunks than the workgroup has invocations, so that
  // large_segments' loop over partials wraps (none when it would pass the binding limit).
  std::vector<CaseSpec> schedule_cases(const Schedule& schedule,
                                       const DeviceCapabilities& device) const override {
    const std::uint64_t short_max = short_limit(schedule);
    const std::uint64_t chunk = chunk_values(schedule);
    Problem boundaries = elements_problem(3 + 3 * short_max + 10 * chunk + chunk / 2 + 8);
    boundaries.segments = 11;
    std::vector<CaseSpec> cases = {
        {"boundaries short=" + std::to_string(short_max) + " chunk=" + std::to_string(chunk),
         boundaries, "boundaries " + std::to_string(short_max) + " " + std::to_string(chunk)}};
    const std::uint64_t wrap = 2 * (knob(schedule, kWorkgroupSize) * chunk + chunk + 3) + 1;
    if (4 * wrap <= device.max_storage_binding_size) {
      Problem problem = elements_problem(wrap);
      problem.segments = 2;
      cases.push_back({"partials past the workgroup n=" + std::to_string(wrap), problem, "even"});
    }
    return cases;
  }

  CaseInputs make_inputs(const CaseSpec& spec, std::uint64_t seed) const override {
    std::mt19937_64 random(seed);
    const Layout layout = segment_layout(spec.problem, spec.value_profile, random);
    std::vector<std::uint32_t> offsets = {static_cast<std::uint32_t>(layout.first)};
    for (std::uint64_t length : layout.lengths) {
      offsets.push_back(offsets.back() + static_cast<std::uint32_t>(length));
    }
    CaseInputs inputs;
    inputs.problem = spec.problem;
    inputs.buffers["x"] = random_float_bytes(spec.problem.elements, "uniform", random);
    inputs.buffers["offsets"] = to_bytes(offsets);
    return inputs;
  }

  CaseVerdict check(const CaseInputs& inputs,
                    const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    const std::uint64_t segments = inputs.problem.segments;
    const auto x = from_bytes<float>(inputs.buffers.at("x"), inputs.problem.elements);
    const auto offsets = from_bytes<std::uint32_t>(inputs.buffers.at("offsets"), segments + 1);
    std::vector<double> expected(segments);
    std::vector<double> bound(segments);
    for (std::uint64_t s = 0; s < segments; ++s) {
      long double exact = 0;
      long double magnitude = 0;
      for (std::uint32_t i = offsets[s]; i < offsets[s + 1]; ++i) {
        exact += x[i];
        magnitude += std::abs(static_cast<long double>(x[i]));
      }
      const double length = offsets[s + 1] - offsets[s];
      expected[s] = static_cast<double>(exact);
      bound[s] = length * std::ldexp(1.0, -24) * static_cast<double>(magnitude) +
                 length * std::numeric_limits<float>::min();
    }
    CaseVerdict verdict;
    verdict.report =
        compare_within(expected, from_bytes<float>(outputs.at("sums"), segments), bound);
    verdict.allowed_relative_error = static_cast<double>(inputs.problem.elements) * 0x1p-24;
    return verdict;
  }

  WorkAmount work(const Problem& problem) const override {
    return {4 * problem.elements + 8 * problem.segments + 4, 0};
  }

  Problem tuning_problem(bool cpu_adapter) const override {
    Problem problem = elements_problem(tuning_elements(cpu_adapter));
    problem.segments = problem.elements / kTuningSegmentLength;
    return problem;
  }

  // One bucket per segment length, each at the main element count (see the header), labelled
  // "2^28x32": the average length decides the path, so it is what a schedule is tuned for.
  std::vector<SizeBucket> size_buckets(bool cpu_adapter) const override {
    const Problem main = tuning_problem(cpu_adapter);
    const std::string elements = "2^" + std::to_string(std::countr_zero(main.elements));
    std::vector<SizeBucket> buckets;
    for (std::uint64_t length : cpu_adapter ? kCpuBucketLengths : kGpuBucketLengths) {
      Problem problem = main;
      problem.segments = main.elements / length;
      buckets.push_back(
          {elements + "x" + std::to_string(length), problem, length == kTuningSegmentLength});
    }
    return buckets;
  }

  // For the H200 (subgroups of 32), one per bucket's regime, listed in the order a small budget
  // takes them at segments of 32 (budget 3 tries the default and the first two;
  // starting_points_for puts first, at each bucket, those whose teams take its segments): a
  // subgroup of 4 vec4 a lane per segment of up to 509 values (3512 GB/s at segments of 256,
  // session 27 call 2); teams of 4 lanes x 4 vec4, 4 segments each (a short limit of 61: a segment
  // of 32 at any alignment; 3405 GB/s at segments of 32, session 28 call 2); of 8 lanes x 2 vec4
  // (2777 there); a subgroup of 8 values a lane per segment of up to 256 (2946 GB/s at 256, session
  // 26); a subgroup of 16 vec4 a lane per segment of up to 2045 (3911 GB/s at 1024, session 27);
  // then teams of 8 lanes x 4 values (2477 at 32), a subgroup per segment of up to 1024 values, and
  // chunks of 2048 under a short limit of 1024 for longer ones. The vec4 points bound the grids of
  // the passes that such layouts leave at once.
  std::vector<std::string> starting_points() const override {
    return {
        "team_lanes=32,team_items=4,team_segments=2,use_subgroups=1,block_segments=256,"
        "team_vectors=1,pass_grid=1024",
        "team_lanes=4,team_items=4,team_segments=4,use_subgroups=1,block_segments=256,"
        "team_vectors=1,pass_grid=1024",
        "team_lanes=8,team_items=2,team_segments=4,use_subgroups=1,block_segments=256,"
        "team_vectors=1,pass_grid=1024",
        "team_lanes=32,team_items=8,team_segments=2,use_subgroups=1,block_segments=256",
        "team_lanes=32,team_items=16,team_segments=2,use_subgroups=1,block_segments=256,"
        "team_vectors=1,pass_grid=1024",
        "team_lanes=8,team_items=4,team_segments=4,use_subgroups=1,block_segments=256",
        "team_lanes=32,team_items=32,use_subgroups=1,block_segments=256",
        "team_lanes=32,team_items=32,use_subgroups=1,block_segments=64,chunk_items=8"};
  }
  // Those whose teams take the problem's average segment (its short path) first, each part in
  // the listed order, so that a tune of budget 3 at segments of 1024 times the 32 x 16 vec4 teams:
  // 372 us on an H100 at 2^28 values, where the better of the first two (both send such segments
  // to large_segments) took 608 us (session 39). At 32 every point covers the length, so the order
  // is the list's; at 256 the first point stays first.
  std::vector<std::string> starting_points_for(const Problem& problem) const override {
    std::vector<std::string> points = starting_points();
    const std::uint64_t length = problem.elements / std::max<std::uint64_t>(problem.segments, 1);
    std::stable_partition(points.begin(), points.end(), [&](const std::string& overrides) {
      const Result<Schedule> schedule = parse_schedule_overrides(*this, overrides);
      return schedule.ok() && short_limit(*schedule) >= length;
    });
    return points;
  }
};

// --- WGSL -----------------------------------------------------------------------------------
// The shader: parameters and bindings, the schedule's constants, the invocation's ids, the team
// and workgroup sums (trees in workgroup memory, or subgroup operations), the shared helpers
// and the three entry points.

const char* const kParamsWgsl = R"(
struct Params { n: u32, segments: u32, chunks: u32 }
)";

// The invocation's own ids. The workgroup's are parameters of their own: the uniformity
// analysis takes a struct as a whole, and local_invocation_index would make them non-uniform.
const char* const kInvocationWgsl = R"(
struct Invocation {
  @builtin(local_invocation_index) local: u32,
}
)";

const char* const kSubgroupInvocationWgsl = R"(
struct Invocation {
  @builtin(local_invocation_index) local: u32,
  @builtin(subgroup_invocation_id) lane: u32,
  @builtin(subgroup_size) sg: u32,
}
)";

// team_sum: the sum of a team's values (TEAM consecutive invocations), valid in its first
// invocation; workgroup_sum: the workgroup's, valid in every invocation. Both are called in
// uniform control flow, and add in an order fixed by the schedule.
const char* const kTreeSumsWgsl = R"(
var<workgroup> sum_scratch: array<f32, WG>;
fn team_sum(value: f32, id: Invocation) -> f32 {
  sum_scratch[id.local] = value;
  workgroupBarrier();
  for (var stride = TEAM / 2u; stride > 0u; stride /= 2u) {
    if (id.local % TEAM < stride) { sum_scratch[id.local] += sum_scratch[id.local + stride]; }
    workgroupBarrier();
  }
  return sum_scratch[id.local - id.local % TEAM];
}
fn workgroup_sum(value: f32, id: Invocation) -> f32 {
  sum_scratch[id.local] = value;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (id.local < stride) { sum_scratch[id.local] += sum_scratch[id.local + stride]; }
    workgroupBarrier();
  }
  let total = sum_scratch[0];
  workgroupBarrier();  // the scratch is written again by the next call
  return total;
}
)";

// A team's lanes lie in one subgroup (TEAM divides the subgroup size, and subgroups are runs of
// consecutive local_invocation_index, as Vulkan drivers number them); so does the slot of each
// subgroup's sum.
const char* const kSubgroupSumsWgsl = R"(
var<workgroup> sum_scratch: array<f32, WG>;
fn team_sum(value: f32, id: Invocation) -> f32 {
  var sum = value;
  for (var mask = TEAM / 2u; mask > 0u; mask /= 2u) { sum += subgroupShuffleXor(sum, mask); }
  return sum;
}
fn workgroup_sum(value: f32, id: Invocation) -> f32 {
  let partial = subgroupAdd(value);
  if (id.lane == 0u) { sum_scratch[id.local / id.sg] = partial; }
  workgroupBarrier();
  var total = 0.0;
  for (var w = 0u; w < WG / id.sg; w++) { total += sum_scratch[w]; }
  workgroupBarrier();  // the scratch is written again by the next call
  return total;
}
)";

const char* const kHelpersWgsl = R"(
// ranges[RANGE_LARGE], ranges[RANGE_LARGE + 1]: the first and one past the last segment longer
// than SHORT (medium or long); ranges[RANGE_LONG], ranges[RANGE_LONG + 1]: those longer than
// CHUNK. Empty (NO_SEGMENT, 0) after reset_ranges.
const RANGE_LARGE = 0u;
const RANGE_LONG = 2u;
const NO_SEGMENT = 0xffffffffu;

// Segment s's values [start, end), clamped to the input.
fn segment_range(s: u32) -> vec2u {
  let end = min(offsets[s + 1u], params.n);
  return vec2u(min(offsets[s], end), end);
}

// The last segment of [first, last) whose first offset is at most p, or params.segments when
// there is none.
fn segment_of(p: u32, first: u32, last: u32) -> u32 {
  if (first >= last || offsets[first] > p) { return params.segments; }
  var low = first;   // offsets[low] <= p
  var high = last;   // offsets[high] > p, or the end of the range
  while (high - low > 1u) {
    let middle = low + (high - low) / 2u;
    if (offsets[middle] <= p) { low = middle; } else { high = middle; }
  }
  return low;
}

// The sum of x[i] for i = first, first + WG, ... below end, four loads in flight at a time.
fn strided_sum(first: u32, end: u32) -> f32 {
  var acc = 0.0;
  if (first >= end) { return acc; }
  let last = end - 1u;
  for (var i = first; i < end; i += 4u * WG) {
    let a = x[i];
    let b = select(0.0, x[min(i + WG, last)], i + WG < end);
    let c = select(0.0, x[min(i + 2u * WG, last)], i + 2u * WG < end);
    let d = select(0.0, x[min(i + 3u * WG, last)], i + 3u * WG < end);
    acc += ((a + b) + c) + d;
  }
  return acc;
}

// The first chunk that starts at or after value p.
fn chunk_at_or_after(p: u32) -> u32 { return p / CHUNK + select(0u, 1u, p % CHUNK != 0u); }
)";

// team_share: a lane's share of a short segment's sum (0 for a longer one). With f32 loads the
// team's lanes read consecutive values, TEAM_ITEMS each.
const char* const kValueTeamShareWgsl = R"(
fn team_share(range: vec2u, lane: u32) -> f32 {
  var sum = 0.0;
  if (range.y - range.x <= SHORT) {
    for (var k = 0u; k < TEAM_ITEMS; k++) {
      let i = range.x + k * TEAM + lane;
      if (i < range.y) { sum += x[i]; }
    }
  }
  return sum;
}
)";

// With vec4 loads the team's lanes read consecutive vec4s from the one that holds the segment's
// first value, TEAM_ITEMS each, through `x4`, a vec4 view of x's binding (wgsl_bindings).
// Only whole vec4s are read: the last n % 4 values, past the view's end, are short_tail's.
const char* const kVectorTeamShareWgsl = R"(
fn team_share(range: vec2u, lane: u32) -> f32 {
  var sum = 0.0;
  if (range.y - range.x <= SHORT) {
    let end = min(range.y, params.n & ~3u);
    for (var k = 0u; k < TEAM_ITEMS; k++) {
      let i = (range.x & ~3u) + 4u * (k * TEAM + lane);
      if (i < end) {
        let q = x4[i / 4u];
        let inside = vec4<bool>(i >= range.x, i + 1u >= range.x && i + 1u < end,
                                i + 2u >= range.x && i + 2u < end, i + 3u < end);
        let kept = select(vec4f(0.0), q, inside);
        sum += (kept.x + kept.y) + (kept.z + kept.w);
      }
    }
  }
  return sum;
}

// The values past the last whole vec4 (at most 3), added to the short segments that hold them
// by one invocation, in order, after short_segments wrote those segments' sums. Below 4 values
// the vec4 view would be bound to fewer than its 16 bytes, so short_segments does not run, every
// segment is short (SHORT is at least 5), and this invocation sums them all.
@compute @workgroup_size(1)
fn short_tail() {
  if (params.n < 4u) {
    for (var s = 0u; s < params.segments; s++) {
      let range = segment_range(s);
      var sum = 0.0;
      for (var i = range.x; i < range.y; i++) { sum += x[i]; }
      sums[s] = sum;
    }
    return;
  }
  for (var i = params.n & ~3u; i < params.n; i++) {
    let s = segment_of(i, 0u, params.segments);
    if (s < params.segments) {
      let range = segment_range(s);
      if (i < range.y && range.y - range.x <= SHORT) { sums[s] += x[i]; }
    }
  }
}
)";

const char* const kEntryPointsWgsl = R"(
@compute @workgroup_size(1)
fn reset_ranges() {
  atomicStore(&ranges[RANGE_LARGE], NO_SEGMENT);
  atomicStore(&ranges[RANGE_LARGE + 1u], 0u);
  atomicStore(&ranges[RANGE_LONG], NO_SEGMENT);
  atomicStore(&ranges[RANGE_LONG + 1u], 0u);
}

// The workgroup's part of `ranges`, merged into the global words once.
var<workgroup> workgroup_ranges: array<atomic<u32>, 4>;

@compute @workgroup_size(WG)
fn short_segments(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                   id: Invocation) {
  if (id.local < 4u) {
    atomicStore(&workgroup_ranges[id.local], select(0u, NO_SEGMENT, id.local % 2u == 0u));
  }
  workgroupBarrier();
  // Round j's segment of this team is first + j * TEAMS.
  let first = linear_workgroup(group, groups) * TEAMS * TEAM_SEGMENTS + id.local / TEAM;
  let lane = id.local % TEAM;
  var round_ranges: array<vec2u, TEAM_SEGMENTS>;
  var acc: array<f32, TEAM_SEGMENTS>;
  for (var j = 0u; j < TEAM_SEGMENTS; j++) {
    let s = first + j * TEAMS;
    var range = vec2u(0u);
    if (s < params.segments) { range = segment_range(s); }
    round_ranges[j] = range;
    acc[j] = team_share(range, lane);
  }
  for (var j = 0u; j < TEAM_SEGMENTS; j++) {
    let s = first + j * TEAMS;
    let range = round_ranges[j];
    let total = team_sum(acc[j], id);
    if (lane == 0u && s < params.segments) {
      if (range.y - range.x <= SHORT) {
        sums[s] = total;
      } else {
        atomicMin(&workgroup_ranges[RANGE_LARGE], s);
        atomicMax(&workgroup_ranges[RANGE_LARGE + 1u], s + 1u);
        if (range.y - range.x > CHUNK) {
          atomicMin(&workgroup_ranges[RANGE_LONG], s);
          atomicMax(&workgroup_ranges[RANGE_LONG + 1u], s + 1u);
        }
      }
    }
  }
  workgroupBarrier();
  // The global words only move one way until the next reset, so a bound they already pass is
  // left out: most workgroups then add no contended atomic to the first segment's word. A bound
  // still at its reset value (every segment of the workgroup short) cannot move them and reads
  // none: the global words are atomics in one line of L2, so with short segments every
  // workgroup ended with a round trip to that one line.
  if (id.local < 4u) {
    let bound = atomicLoad(&workgroup_ranges[id.local]);
    let minimum = id.local % 2u == 0u;
    if (bound != select(0u, NO_SEGMENT, minimum)) {
      if (minimum && bound < atomicLoad(&ranges[id.local])) {
        atomicMin(&ranges[id.local], bound);
      }
      if (!minimum && bound > atomicLoad(&ranges[id.local])) {
        atomicMax(&ranges[id.local], bound);
      }
    }
  }
}

// The chunks that can start inside a long segment (from the one that holds the first long
// segment's first value to the last long segment's end; none when no segment is long), found
// once per workgroup. The grid strides over them: one chunk per workgroup with pass_grid 0, else
// at most pass_grid workgroups, so that a layout without long segments launches few.
var<workgroup> chunk_span: vec2u;
// Where the chunk's values of a long segment end, or 0 when its first value lies in no long
// segment (the others' values are the other passes'). Found by one invocation and shared: loads
// of offsets do not count as uniform, and the workgroup's sum needs uniform control flow.
var<workgroup> chunk_end: u32;

@compute @workgroup_size(WG)
fn chunk_partials(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                   id: Invocation) {
  if (id.local == 0u) {
    let first = atomicLoad(&ranges[RANGE_LONG]);
    let last = min(atomicLoad(&ranges[RANGE_LONG + 1u]), params.segments);
    var span = vec2u(0u);
    if (first < last) {
      span = vec2u(min(offsets[first], params.n) / CHUNK,
                   min(params.chunks, chunk_at_or_after(min(offsets[last], params.n))));
    }
    chunk_span = span;
  }
  let span = workgroupUniformLoad(&chunk_span);
  let grid = groups.x * groups.y;
  for (var c = span.x + linear_workgroup(group, groups); c < span.y; c += grid) {
    let p = c * CHUNK;
    if (id.local == 0u) {
      var end = 0u;
      let last = min(atomicLoad(&ranges[RANGE_LONG + 1u]), params.segments);
      let s = segment_of(p, atomicLoad(&ranges[RANGE_LONG]), last);
      if (s < params.segments) {
        let range = segment_range(s);
        if (range.y - range.x > CHUNK && p < range.y) { end = min(p + CHUNK, range.y); }
      }
      chunk_end = end;
    }
    let end = workgroupUniformLoad(&chunk_end);
    if (end != 0u) {
      let total = workgroup_sum(strided_sum(p + id.local, end), id);
      if (id.local == 0u) { partials[c] = total; }
    }
    workgroupBarrier();  // chunk_end is written again
  }
}

var<workgroup> large_list: array<u32, BLOCK>;
var<workgroup> large_count: atomic<u32>;
var<workgroup> large_total: u32;  // large_count, for workgroupUniformLoad
// The blocks that meet the range of segments longer than short (none when there is none),
// strided over by the grid as chunk_partials' chunks are.
var<workgroup> block_span: vec2u;

@compute @workgroup_size(WG)
fn large_segments(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                   id: Invocation) {
  if (id.local == 0u) {
    let first = atomicLoad(&ranges[RANGE_LARGE]);
    let last = min(atomicLoad(&ranges[RANGE_LARGE + 1u]), params.segments);
    let blocks_end = last / BLOCK + select(0u, 1u, last % BLOCK != 0u);
    block_span = select(vec2u(0u), vec2u(first / BLOCK, blocks_end), first < last);
  }
  let span = workgroupUniformLoad(&block_span);
  let grid = groups.x * groups.y;
  for (var block = span.x + linear_workgroup(group, groups); block < span.y; block += grid) {
    if (id.local == 0u) { atomicStore(&large_count, 0u); }
    workgroupBarrier();
    let s = block * BLOCK + id.local;
    if (id.local < BLOCK && s < params.segments) {
      let range = segment_range(s);
      if (range.y - range.x > SHORT) { large_list[atomicAdd(&large_count, 1u)] = s; }
    }
    workgroupBarrier();
    if (id.local == 0u) { large_total = atomicLoad(&large_count); }
    let count = workgroupUniformLoad(&large_total);
    for (var k = 0u; k < count; k++) {
      let segment = large_list[k];
      let range = segment_range(segment);
      var acc = 0.0;
      if (range.y - range.x <= CHUNK) {
        acc = strided_sum(range.x + id.local, range.y);
      } else {
        // The head, then the partial of every chunk that starts inside the segment.
        let first_chunk = chunk_at_or_after(range.x);
        acc = strided_sum(range.x + id.local, first_chunk * CHUNK);
        for (var c = first_chunk + id.local; c < chunk_at_or_after(range.y); c += WG) {
          acc += partials[c];
        }
      }
      let total = workgroup_sum(acc, id);
      if (id.local == 0u) { sums[segment] = total; }
    }
    workgroupBarrier();  // large_list, large_count and large_total are written again
  }
}
)";

std::string SegmentedReduceSumF32::generate_wgsl(const Schedule& schedule) const {
  const bool subgroups = knob(schedule, kUseSubgroups) == 1;
  return std::string(subgroups ? "enable subgroups;\n" : "") + kLinearWorkgroupWgsl + kParamsWgsl +
         binding_declarations(wgsl_bindings(schedule)) + "\n" +
         constant_declarations(
             {{"WG", knob(schedule, kWorkgroupSize), "invocations per workgroup"},
              {"TEAM", knob(schedule, kTeamLanes), "invocations per short segment"},
              {"TEAMS", knob(schedule, kWorkgroupSize) / knob(schedule, kTeamLanes),
               "teams per workgroup"},
              {"TEAM_SEGMENTS", knob(schedule, kTeamSegments), "segments per team, one a round"},
              {"TEAM_ITEMS", knob(schedule, kTeamItems), "values per invocation of a team"},
              {"SHORT", short_limit(schedule), "the longest short segment"},
              {"BLOCK", knob(schedule, kBlockSegments), "segments per workgroup of large_segments"},
              {"CHUNK", static_cast<std::uint32_t>(chunk_values(schedule)),
               "values per chunk; longer segments are long"}}) +
         (subgroups ? kSubgroupInvocationWgsl : kInvocationWgsl) +
         (subgroups ? kSubgroupSumsWgsl : kTreeSumsWgsl) + kHelpersWgsl +
         (knob(schedule, kTeamVectors) == 1 ? kVectorTeamShareWgsl : kValueTeamShareWgsl) +
         kEntryPointsWgsl;
}

}  // namespace

const KernelDefinition& segmented_reduce_sum_f32_kernel() {
  static const SegmentedReduceSumF32 kKernel;
  return kKernel;
}

Status check_segment_offsets(std::span<const std::uint32_t> offsets, std::uint64_t n) {
  if (offsets.empty()) {
    return Error(ErrorKind::kInvalidInput,
                 "Segment offsets are empty; segments + 1 offsets are needed (0 and n for one "
                 "segment).");
  }
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    if (offsets[i] > n) {
      return Error(ErrorKind::kInvalidInput,
                   "Segment offset " + std::to_string(i) + " (" + std::to_string(offsets[i]) +
                       ") exceeds the value count n (" + std::to_string(n) + ").");
    }
    if (i > 0 && offsets[i] < offsets[i - 1]) {
      return Error(ErrorKind::kInvalidInput,
                   "Segment offset " + std::to_string(i) + " (" + std::to_string(offsets[i]) +
                       ") is below offset " + std::to_string(i - 1) + " (" +
                       std::to_string(offsets[i - 1]) + "); offsets must ascend.");
    }
  }
  return Ok{};
}

}  // namespace wgsl_forge::kernels
