// Radix sort's Onesweep rounds (look_back=1) when predecessors do not help: WGSL promises no
// forward progress between workgroups, so each digit's look-back must finish even when a
// predecessor never publishes. Edits of the generated WGSL force the paths a fast GPU rarely
// takes, and the sort must still match the oracle on the real adapter:
//   - no tile ever publishes: every tile counts each digit of all of its predecessors from the
//     input itself;
//   - tiles are claimed last first: look-backs meet unpublished, partly published and published
//     predecessors in every order;
//   - no tile but the first publishes its prefix: every look-back walks the counts back to
//     tile 0.
// Tiles of 256 keys give the quick cases (up to 10^4 keys) up to 31 tiles per round; the 8-bit
// schedule's tiles of 1024 keys give up to 8, because a silent tile is counted once per digit.

#include <gtest/gtest.h>

#include "support/edited_certification.hpp"

namespace wgsl_forge {
namespace {

using testing::EditedCertificationTest;
using testing::replace_once;
using testing::SourceEdit;

const SourceEdit kEdits[] = {
    {"no tile publishes",
     "  atomicStore(&counts[chain_word(tile, d, params.round_index % 2u)], word);\n", ""},
    {"tiles claimed last first",
     "claimed_tile = atomicAdd(&counts[TICKETS + params.round_index], 1u);",
     "claimed_tile = params.tiles - 1u - atomicAdd(&counts[TICKETS + params.round_index], 1u);"},
    {"only tile 0 publishes a prefix", "    publish(tile, d, FLAG_PREFIX | (before + total));\n",
     ""},
};

// A silent predecessor is counted from the input after 4 look-back steps instead of 64, so that
// the edited sorts finish quickly on a CPU adapter; correctness does not depend on the number.
const SourceEdit kFewSpins = {"4 steps before counting", "const SPINS: u32 = 64u;",
                              "const SPINS: u32 = 4u;"};

using RadixSortLookBackTest = EditedCertificationTest;

TEST_P(RadixSortLookBackTest, MatchesTheOracleWhenPredecessorsDoNotPublish) {
  SCOPED_TRACE(trace());
  // Both rankings; with subgroups also 8-bit digits, several per invocation.
  std::vector<std::string> schedules = {
      "look_back=1,workgroup_size=64,keys_per_invocation=4,digit_bits=4"};
  if (capabilities_.subgroups && capabilities_.subgroup_min_size >= 8) {
    schedules.push_back("look_back=1,workgroup_size=64,keys_per_invocation=4,use_subgroups=1");
    schedules.push_back(
        "look_back=1,workgroup_size=64,keys_per_invocation=16,use_subgroups=1,digit_bits=8");
  }
  for (const std::string& overrides : schedules) {
    const Schedule schedule = schedule_of(overrides);
    std::string source = generated(schedule);
    ASSERT_TRUE(replace_once(source, kFewSpins));
    for (const SourceEdit& edit : kEdits) {
      SCOPED_TRACE(overrides + ", " + edit.name);
      std::string edited = source;
      ASSERT_TRUE(replace_once(edited, edit));
      expect_certified(schedule, edited);
    }
  }
}

TEST_P(RadixSortLookBackTest, EveryCaseMatchesTheOracleAsGenerated) {
  SCOPED_TRACE(trace());
  // Every case: the large ones have thousands of tiles per round, the many-workgroups one a 2-D
  // grid rounded up past the tiles.
  expect_certified(schedule_of("look_back=1,workgroup_size=64,keys_per_invocation=1"), std::nullopt,
                   /*quick=*/false);
}

INSTANTIATE_TEST_SUITE_P(Kernels, RadixSortLookBackTest,
                         ::testing::Values("radix_sort_u32", "radix_sort_pairs_u32"));

}  // namespace
}  // namespace wgsl_forge
