// The chained scan (scan_exclusive_u32, compact_f32) when its predecessors do not help: WGSL
// promises no forward progress between workgroups, so the look-back must finish even when a
// predecessor never publishes. Edits of the generated WGSL force the paths a fast GPU rarely
// takes, and the result must still match the oracle on the real adapter:
//   - no tile ever publishes: every tile reduces all of its predecessors from the input itself;
//   - tiles are claimed last first: look-backs meet unpublished, partly published and published
//     predecessors in every order;
//   - no tile but the first publishes its prefix: every look-back walks windows of aggregates
//     back to tile 0.
// The quick cases have at most 31 tiles, so the workgroup's look-back window is also narrowed from
// 32 to 4 predecessors (the subgroup's is the subgroup, 8 lanes on lavapipe).
// The three-pass strategy and compaction without staging have no look-back; they are certified
// as generated.

#include <gtest/gtest.h>

#include "support/edited_certification.hpp"

namespace wgsl_forge {
namespace {

using testing::EditedCertificationTest;
using testing::replace_once;
using testing::SourceEdit;

const SourceEdit kEdits[] = {
    {"no tile publishes",
     "  atomicStore(&chain[1u + 2u * tile], flag | (value & 0xffffu));\n"
     "  atomicStore(&chain[2u + 2u * tile], flag | (value >> 16u));\n",
     ""},
    {"tiles claimed last first", "claimed_tile = atomicAdd(&chain[0], 1u);",
     "claimed_tile = params.tiles - 1u - atomicAdd(&chain[0], 1u);"},
    {"only tile 0 publishes a prefix", "{ publish(tile, FLAG_PREFIX, prefix + tile_total); }",
     "{}"},
};

const SourceEdit kNarrowWindow = {"a window of 4", "const LOOK_BACK: u32 = 32u;",
                                  "const LOOK_BACK: u32 = 4u;"};

using ChainedScanFallbackTest = EditedCertificationTest;

TEST_P(ChainedScanFallbackTest, MatchesTheOracleWhenPredecessorsDoNotPublish) {
  SCOPED_TRACE(trace());
  // Tiles of 256 and 512 elements, so that the quick cases (up to 10^4 elements) have up to 40
  // tiles; the second one uses subgroups (warp-striped tiles, one subgroup looking back).
  std::vector<std::string> schedules = {"workgroup_size=64,vectors_per_invocation=1"};
  if (capabilities_.subgroups) {
    schedules.push_back("workgroup_size=64,vectors_per_invocation=2,use_subgroups=1");
  }
  for (const std::string& overrides : schedules) {
    const Schedule schedule = schedule_of(overrides);
    std::string source = generated(schedule);
    if (schedule.get("use_subgroups") == 0) {
      ASSERT_TRUE(replace_once(source, kNarrowWindow));
    }
    for (const SourceEdit& edit : kEdits) {
      SCOPED_TRACE(overrides + ", " + edit.name);
      std::string edited = source;
      ASSERT_TRUE(replace_once(edited, edit));
      expect_certified(schedule, edited);
    }
  }
}

TEST_P(ChainedScanFallbackTest, ThreePassAndUnstagedSchedulesMatchTheOracle) {
  SCOPED_TRACE(trace());
  std::vector<std::string> schedules = {"workgroup_size=64,vectors_per_invocation=2,passes=3"};
  if (capabilities_.subgroups) schedules.push_back(schedules.front() + ",use_subgroups=1");
  if (kernel_.id() == "compact_f32") {
    for (std::size_t i = 0, count = schedules.size(); i < count; ++i) {
      schedules.push_back(schedules[i] + ",stage_kept=0");
    }
    schedules.push_back("workgroup_size=64,stage_kept=0");
  }
  for (const std::string& overrides : schedules) {
    SCOPED_TRACE(overrides);
    // The first one with every case: the quick ones have fewer tiles than the spine has
    // invocations, so no invocation would carry a run of several tile sums.
    expect_certified(schedule_of(overrides), std::nullopt,
                     /*quick=*/overrides != schedules.front());
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ChainedScanFallbackTest,
                         ::testing::Values("scan_exclusive_u32", "compact_f32"));

}  // namespace
}  // namespace wgsl_forge
