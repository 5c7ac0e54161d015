// The chained scan (scan_exclusive_u32, compact_f32) when its predecessors do not help: WGSL
// promises no forward progress between workgroups, so the look-back must finish even when a
// predecessor never publishes. Edits of the generated WGSL force the paths a fast GPU rarely
// takes, and the result must still match the oracle on the real adapter:
//   - no tile ever publishes: every tile reduces all of its predecessors from the input itself;
//   - tiles are claimed last first: look-backs meet unpublished, partly published and published
//     predecessors in every order (with the workgroup's id as the tile: workgroups that start
//     in order take the tiles from the last);
//   - no tile but the first publishes its prefix: every look-back walks windows of aggregates
//     back to tile 0.
// The quick cases have at most 31 tiles, so the workgroup's look-back window is also narrowed from
// 32 to 4 predecessors (the subgroup's is the subgroup, 8 lanes on lavapipe, times look_back_rows).
// The three-pass strategy has no look-back, and compaction without staging looks back as it does
// with staging; they are certified as generated.

#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

struct SourceEdit {
  const char* name;
  const char* from;
  const char* to;
};

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

// "tiles claimed last first" where the tile is the workgroup's id.
const SourceEdit kLastFirstById = {"tiles taken last first",
                                   "let tile = linear_workgroup(workgroup, workgroups);",
                                   "let tile = params.tiles - 1u - linear_workgroup(workgroup, "
                                   "workgroups);"};

const SourceEdit kNarrowWindow = {"a window of 4", "const LOOK_BACK: u32 = 32u;",
                                  "const LOOK_BACK: u32 = 4u;"};

// Applies `edit` to `source`; false, with the reason logged, when the source lacks its text.
::testing::AssertionResult replace_once(std::string& source, const SourceEdit& edit) {
  const std::size_t at = source.find(edit.from);
  if (at == std::string::npos) {
    return ::testing::AssertionFailure()
           << "the generated WGSL no longer contains: " << edit.from << " (" << edit.name << ")";
  }
  source.replace(at, std::string_view(edit.from).size(), edit.to);
  return ::testing::AssertionSuccess();
}

class ChainedScanFallbackTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Certification of `schedule` (with `source` in place of the generated WGSL when given) on the
  // shared device, with a fresh seed; quick: only the cases of at most kQuickCaseElements.
  void expect_certified(const Schedule& schedule, std::optional<std::string> source = {},
                        bool quick = true) {
    forge::CertifyOptions options;
    options.source = std::move(source);
    options.quick = quick;
    options.seed = random_();
    Result<CertificationManifest> manifest = forge::certify(device_, kernel_, schedule, options);
    ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
    EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);
  }

  const kernels::KernelDefinition& kernel_ = *kernels::find_kernel(GetParam()).value();
  gpu::Device& device_ = testing::shared_device();
  const kernels::DeviceCapabilities capabilities_ = forge::capabilities_of(device_.adapter());
  const std::uint64_t seed_ = testing::test_seed();
  std::mt19937_64 random_{seed_};
};

TEST_P(ChainedScanFallbackTest, MatchesTheOracleWhenPredecessorsDoNotPublish) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)");
  // Tiles of 256 and 512 elements, so that the quick cases (up to 10^4 elements) have up to 40
  // tiles; the second one uses subgroups (warp-striped tiles, one subgroup looking back). Each
  // also with the workgroup's id as its tile instead of a claimed one.
  std::vector<std::string> schedules = {"workgroup_size=64,vectors_per_invocation=1"};
  if (capabilities_.subgroups) {
    schedules.push_back("workgroup_size=64,vectors_per_invocation=2,use_subgroups=1");
  }
  for (std::size_t i = 0, count = schedules.size(); i < count; ++i) {
    schedules.push_back(schedules[i] + ",claim_tiles=0");
  }
  // Two predecessors per lane at once (a window of 16 on lavapipe's 8 lanes; tiles of 256
  // elements, so that the longest quick case, 31 tiles, walks more than one window), and stores
  // with one bounds test per tile.
  if (capabilities_.subgroups) {
    schedules.push_back(
        "workgroup_size=64,vectors_per_invocation=1,use_subgroups=1,look_back_rows=2,"
        "bounds_per_tile=1");
    // The same, each look-back also publishing the prefixes of the tiles it passed.
    schedules.push_back(schedules.back() + ",look_back_publishes=1");
  }
  for (const std::string& overrides : schedules) {
    const Schedule schedule = kernels::parse_schedule_overrides(kernel_, overrides).value();
    std::string source =
        kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl, capabilities_)
            .value()
            .source;
    if (schedule.get("use_subgroups") == 0) {
      ASSERT_TRUE(replace_once(source, kNarrowWindow));
    }
    for (const SourceEdit& edit : kEdits) {
      SCOPED_TRACE(overrides + ", " + edit.name);
      std::string edited = source;
      ASSERT_TRUE(replace_once(
          edited,
          schedule.get("claim_tiles") == 0 && edit.from == kEdits[1].from ? kLastFirstById : edit));
      expect_certified(schedule, edited);
    }
  }
}

TEST_P(ChainedScanFallbackTest, ThreePassAndUnstagedSchedulesMatchTheOracle) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)");
  std::vector<std::string> schedules = {"workgroup_size=64,vectors_per_invocation=2,passes=3"};
  if (capabilities_.subgroups) schedules.push_back(schedules.front() + ",use_subgroups=1");
  if (kernel_.id() == "compact_f32") {
    for (std::size_t i = 0, count = schedules.size(); i < count; ++i) {
      schedules.push_back(schedules[i] + ",stage_kept=0");
    }
    schedules.push_back("workgroup_size=64,stage_kept=0");
    // The H200's fastest shape: subgroups, tiles by workgroup id, stores without staging.
    if (capabilities_.subgroups) {
      schedules.push_back(
          "workgroup_size=64,vectors_per_invocation=4,use_subgroups=1,claim_tiles=0,stage_kept=0");
      // The same with one bounds test per tile, and staged with it.
      schedules.push_back(schedules.back() + ",bounds_per_tile=1");
      schedules.push_back(
          "workgroup_size=64,vectors_per_invocation=2,use_subgroups=1,bounds_per_tile=1");
    }
  }
  for (const std::string& overrides : schedules) {
    SCOPED_TRACE(overrides);
    // The first one with every case: the quick ones have fewer tiles than the spine has
    // invocations, so no invocation would carry a run of several tile sums.
    expect_certified(kernels::parse_schedule_overrides(kernel_, overrides).value(), std::nullopt,
                     /*quick=*/overrides != schedules.front());
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ChainedScanFallbackTest,
                         ::testing::Values("scan_exclusive_u32", "compact_f32"));

}  // namespace
}  // namespace wgsl_forge
