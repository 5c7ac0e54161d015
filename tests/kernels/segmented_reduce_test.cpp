// segmented_reduce_sum_f32: the host rule for offsets (each error names the offset that breaks
// it), the plan's passes and grids, and each path on the real adapter: short segments summed by
// teams of 1 to 16 lanes, one or several segments each (trees or subgroup shuffles; f32 or
// vec4 loads, the latter with short_tail's last n % 4 values), medium
// ones by a workgroup, long ones by several workgroups' chunk partials, with every schedule's
// own cases (segments just past each threshold, and a long segment of more chunks than the
// workgroup has invocations).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <random>
#include <set>

#include "gpu/gpu_test_support.hpp"
#include "support/seeded_test.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernel_runner.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

const kernels::KernelDefinition& segmented() {
  return *kernels::find_kernel("segmented_reduce_sum_f32").value();
}

TEST(SegmentOffsetsTest, OffsetsMustAscendAndStayWithinTheValues) {
  const std::vector<std::uint32_t> good = {0, 0, 3, 10, 10};
  EXPECT_TRUE(kernels::check_segment_offsets(good, 10).ok());
  EXPECT_TRUE(kernels::check_segment_offsets(std::vector<std::uint32_t>{4}, 10).ok());

  const std::vector<std::uint32_t> descending = {0, 5, 4, 9};
  EXPECT_EQ(kernels::check_segment_offsets(descending, 10).error().message(),
            "Segment offset 2 (4) is below offset 1 (5); offsets must ascend.");
  const std::vector<std::uint32_t> past = {0, 5, 11};
  EXPECT_EQ(kernels::check_segment_offsets(past, 10).error().message(),
            "Segment offset 2 (11) exceeds the value count n (10).");
  EXPECT_EQ(kernels::check_segment_offsets({}, 10).error().message(),
            "Segment offsets are empty; segments + 1 offsets are needed (0 and n for one "
            "segment).");
  EXPECT_EQ(kernels::check_segment_offsets(descending, 10).error().kind(),
            ErrorKind::kInvalidInput);
}

TEST(SegmentOffsetsTest, ThePlanRunsEachPathOverItsOwnGrid) {
  const kernels::KernelDefinition& kernel = segmented();
  const Schedule schedule =
      kernel.default_schedule();  // 256 invocations, teams of 8, chunks of 4096
  kernels::Problem problem;
  problem.elements = 1'000'000;
  problem.segments = 70'000;
  auto plan = kernel.plan(schedule, problem, kernels::DeviceCapabilities{});
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  ASSERT_EQ(plan->passes.size(), 4u);
  EXPECT_EQ(plan->passes[0].entry_point, "reset_ranges");
  EXPECT_EQ(plan->passes[0].workgroups, 1u);
  EXPECT_EQ(plan->passes[1].entry_point, "short_segments");
  EXPECT_EQ(plan->passes[1].workgroups, (70'000 + 31) / 32);
  EXPECT_EQ(plan->passes[2].entry_point, "chunk_partials");
  EXPECT_EQ(plan->passes[2].workgroups, (1'000'000 + 4095) / 4096);
  EXPECT_EQ(plan->passes[3].entry_point, "large_segments");
  EXPECT_EQ(plan->passes[3].workgroups, (70'000 + 63) / 64);
  // With vec4 loads one invocation adds the values past the last whole vec4 after the teams.
  auto vector_plan =
      kernel.plan(kernels::parse_schedule_overrides(kernel, "team_vectors=1").value(), problem,
                  kernels::DeviceCapabilities{});
  ASSERT_TRUE(vector_plan.ok()) << vector_plan.error().to_string();
  ASSERT_EQ(vector_plan->passes.size(), 5u);
  EXPECT_EQ(vector_plan->passes[2].entry_point, "short_tail");
  EXPECT_EQ(vector_plan->passes[2].workgroups, 1u);
  problem.segments = std::uint64_t{1} << 32;
  EXPECT_EQ(kernel.check_problem(problem).error().message(),
            "Segment count (4294967296) exceeds the largest that segmented_reduce_sum_f32 "
            "indexes (4294967294: its offsets are u32 words).");
}

// Every schedule's own cases reach its levels: segments on both sides of its short and chunk
// thresholds (a long one with a head, at an offset that is no multiple of a chunk), and a long
// segment of more chunks than large_segments' workgroup has invocations.
TEST(SegmentOffsetsTest, EachSchedulesCasesReachEveryThresholdAndLevel) {
  const kernels::KernelDefinition& kernel = segmented();
  kernels::DeviceCapabilities device;
  device.max_invocations_per_workgroup = device.max_workgroup_size_x = 1024;
  device.max_storage_binding_size = 4294967295u;
  device.subgroups = true;
  const std::vector<Schedule> space = kernel.schedule_space(device);
  ASSERT_GT(space.size(), 100u);
  for (std::size_t i = 0; i < space.size(); i += 151) {
    const Schedule& schedule = space[i];
    SCOPED_TRACE(schedule.to_string());
    const std::uint64_t wg = static_cast<std::uint64_t>(*schedule.get("workgroup_size"));
    // With vec4 loads a team covers 4 lanes x items values from a multiple of 4.
    const std::uint64_t covered =
        static_cast<std::uint64_t>(*schedule.get("team_lanes") * *schedule.get("team_items"));
    const std::uint64_t short_max = *schedule.get("team_vectors") == 1 ? 4 * covered - 3 : covered;
    const std::uint64_t chunk = wg * static_cast<std::uint64_t>(*schedule.get("chunk_items"));
    const std::vector<kernels::CaseSpec> cases = kernel.schedule_cases(schedule, device);
    ASSERT_EQ(cases.size(), 2u);
    const kernels::CaseInputs inputs = kernel.make_inputs(cases[0], 1);
    const auto& bytes = inputs.buffers.at("offsets");
    std::vector<std::uint32_t> offsets(bytes.size() / 4);
    std::memcpy(offsets.data(), bytes.data(), bytes.size());
    ASSERT_TRUE(kernels::check_segment_offsets(offsets, inputs.problem.elements).ok());
    std::set<std::uint64_t> lengths;
    bool long_with_head = false;
    for (std::size_t s = 0; s + 1 < offsets.size(); ++s) {
      lengths.insert(offsets[s + 1] - offsets[s]);
      long_with_head |= offsets[s + 1] - offsets[s] > chunk && offsets[s] % chunk != 0;
    }
    for (std::uint64_t length : {short_max, short_max + 1, chunk, chunk + 1}) {
      EXPECT_TRUE(lengths.contains(length)) << length;
    }
    EXPECT_TRUE(long_with_head);
    // Two even segments, each of more than wg chunks.
    EXPECT_EQ(cases[1].problem.segments, 2u);
    EXPECT_GT(cases[1].problem.elements / 2, wg * chunk);
  }
}

// The longest segment a starting point's teams take (its short path; see short_limit in the
// kernel).
std::uint64_t team_short_limit(const std::string& overrides) {
  const Schedule schedule = kernels::parse_schedule_overrides(segmented(), overrides).value();
  const std::int64_t covered = *schedule.get("team_lanes") * *schedule.get("team_items");
  return static_cast<std::uint64_t>(*schedule.get("team_vectors") == 1 ? 4 * covered - 3 : covered);
}

// A tune of budget 3 tries the default and the first two starting points it is given: as listed
// (and so at segments of 32), the first must take the main bucket's segments of 256 by teams (a
// short limit of at least 256), the second those of 32 (session 27 put a vec4 point for segments
// of 32 first, and the main bucket lost its subgroup-per-segment schedule: 2946 -> 521 GB/s on the
// H200). At 256 and 1024 starting_points_for reorders them (below).
TEST(SegmentOffsetsTest, TheFirstStartingPointsTakeSegmentsOf256And32ByTeams) {
  const kernels::KernelDefinition& kernel = segmented();
  const std::vector<std::string> points = kernel.starting_points();
  ASSERT_GE(points.size(), 2u);
  EXPECT_GE(team_short_limit(points[0]), 256u) << points[0];
  EXPECT_GE(team_short_limit(points[1]), 32u) << points[1];
  EXPECT_LT(team_short_limit(points[1]), 256u) << points[1] << ": a team per segment of 32";
}

// A tune at a bucket times first the starting points whose teams take the bucket's average
// segment, so that budget 3 reaches a short path at segments of 1024 too (session 39: 372 us
// against 608 us through large_segments on an H100); at 32 the list's order stays.
TEST(SegmentOffsetsTest, ATuneAtABucketStartsFromTeamsThatTakeItsSegments) {
  const kernels::KernelDefinition& kernel = segmented();
  const std::vector<std::string> listed = kernel.starting_points();
  for (const kernels::SizeBucket& bucket : kernel.size_buckets(false)) {
    SCOPED_TRACE(bucket.label);
    const std::uint64_t length = bucket.problem.elements / bucket.problem.segments;
    // Those that take the length first, then the others, each part in the listed order.
    std::vector<std::string> expected;
    std::copy_if(listed.begin(), listed.end(), std::back_inserter(expected),
                 [&](const std::string& point) { return team_short_limit(point) >= length; });
    std::copy_if(listed.begin(), listed.end(), std::back_inserter(expected),
                 [&](const std::string& point) { return team_short_limit(point) < length; });
    EXPECT_EQ(kernel.starting_points_for(bucket.problem), expected);
    if (length == 32) {
      EXPECT_EQ(expected, listed);
    }
    if (length == 1024) {
      EXPECT_EQ(team_short_limit(expected[0]), 2045u) << expected[0] << ": 32 x 16 vec4 teams";
    }
  }
}

class SegmentedReducePathsTest : public testing::SeededTest {
 protected:
  gpu::Device& device_ = testing::shared_device();
  const kernels::DeviceCapabilities capabilities_ = forge::capabilities_of(device_.adapter());

  // Runs `spec` with `schedule` under certification's guards and poison and checks the oracle.
  void expect_matches(const Schedule& schedule, const kernels::CaseSpec& spec) {
    SCOPED_TRACE(schedule.to_string() + " " + spec.name + " " + trace());
    const kernels::KernelDefinition& kernel = segmented();
    auto generated =
        kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl, capabilities_);
    ASSERT_TRUE(generated.ok()) << generated.error().to_string();
    auto prepared = forge::PreparedKernel::prepare(device_, kernel, *generated);
    ASSERT_TRUE(prepared.ok()) << prepared.error().to_string();
    const kernels::CaseInputs inputs = kernel.make_inputs(spec, random_());
    auto outputs = prepared->run(inputs);
    ASSERT_TRUE(outputs.ok()) << outputs.error().to_string();
    const kernels::CaseVerdict verdict = kernel.check(inputs, *outputs);
    EXPECT_EQ(verdict.report.mismatch_count, 0u)
        << "first at " << verdict.report.first_mismatch->index << ": expected "
        << verdict.report.first_mismatch->expected << ", got "
        << verdict.report.first_mismatch->actual;
  }
};

TEST_F(SegmentedReducePathsTest, EveryPathMatchesTheOracleAtEachThreshold) {
  std::vector<std::string> schedules = {
      "team_lanes=1,team_items=8,chunk_items=8,workgroup_size=64,block_segments=16",
      "team_lanes=4,team_items=1,chunk_items=16,workgroup_size=128,block_segments=64",
      "team_lanes=16,team_items=2,chunk_items=8,workgroup_size=256,block_segments=256",
      // Several segments per team (the rounds), and teams of up to 32 x 32 values.
      "team_lanes=4,team_items=8,team_segments=4,chunk_items=8,workgroup_size=64,"
      "block_segments=16",
      "team_lanes=8,team_items=32,team_segments=2,chunk_items=32,workgroup_size=128",
      // vec4 loads (short limits 29 and 13) and short_tail's last n % 4 values; grids of 32
      // workgroups that stride over the chunks and blocks.
      "team_vectors=1,team_lanes=4,team_items=2,chunk_items=8,workgroup_size=64,"
      "block_segments=16,pass_grid=32",
      "team_vectors=1,team_lanes=1,team_items=4,team_segments=2,chunk_items=8,"
      "workgroup_size=64,block_segments=16",
  };
  if (capabilities_.subgroups) {
    schedules.push_back("use_subgroups=1,team_lanes=4,team_items=4,chunk_items=8");
    schedules.push_back(
        "use_subgroups=1,team_lanes=8,team_items=1,chunk_items=8,workgroup_size=64,"
        "block_segments=16");
    schedules.push_back("use_subgroups=1,team_lanes=8,team_items=4,team_segments=8,chunk_items=8");
    schedules.push_back(
        "use_subgroups=1,team_vectors=1,team_lanes=8,team_items=2,team_segments=4,chunk_items=8");
  }
  const kernels::KernelDefinition& kernel = segmented();
  for (const std::string& overrides : schedules) {
    const Schedule schedule = kernels::parse_schedule_overrides(kernel, overrides).value();
    ASSERT_TRUE(kernel.check_schedule(schedule, capabilities_).ok()) << overrides;
    std::vector<kernels::CaseSpec> cases = kernel.schedule_cases(schedule, capabilities_);
    ASSERT_EQ(cases.size(), 2u) << overrides;
    for (const kernels::CaseSpec& spec : kernel.certification_cases()) {
      if (spec.value_profile == "mixed" || spec.problem.segments <= 1000) cases.push_back(spec);
    }
    for (const kernels::CaseSpec& spec : cases) expect_matches(schedule, spec);
  }
}

// A long segment's sum is its head plus its chunks' partials: a chunk left out (or counted
// twice) shows, since every value of the segment is 1 or more.
TEST_F(SegmentedReducePathsTest, ALongSegmentSumsEveryChunkOnce) {
  const kernels::KernelDefinition& kernel = segmented();
  const Schedule schedule =
      kernels::parse_schedule_overrides(kernel, "workgroup_size=64,chunk_items=8,block_segments=16")
          .value();
  auto generated = kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl, capabilities_);
  ASSERT_TRUE(generated.ok()) << generated.error().to_string();
  auto prepared = forge::PreparedKernel::prepare(device_, kernel, *generated);
  ASSERT_TRUE(prepared.ok()) << prepared.error().to_string();
  const std::uint32_t n = 512 * 37 + 100 + static_cast<std::uint32_t>(random_() % 400);
  kernels::CaseInputs inputs;
  inputs.problem.elements = n;
  inputs.problem.segments = 3;
  std::vector<float> x(n);
  for (float& value : x) value = static_cast<float>(1 + random_() % 4);
  const std::vector<std::uint32_t> offsets = {0, 5, n - 7, n};  // short, long with a head, short
  const auto bytes = [](const auto& values) {
    const std::span<const std::byte> view = testing::as_bytes_of(values);
    return std::vector<std::byte>(view.begin(), view.end());
  };
  inputs.buffers["x"] = bytes(x);
  inputs.buffers["offsets"] = bytes(offsets);
  auto outputs = prepared->run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.error().to_string();
  const kernels::CaseVerdict verdict = kernel.check(inputs, *outputs);
  EXPECT_EQ(verdict.report.mismatch_count, 0u) << trace();
}

}  // namespace
}  // namespace wgsl_forge
