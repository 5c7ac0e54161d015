// The chained scan (scan_exclusive_u32, compact_f32) when its predecessors do not help: WGSL
// promises no forward progress between workgroups, so the look-back must finish even when a
// predecessor never publishes. Two edits of the generated WGSL force the paths a fast GPU rarely
// takes, and the result must still match the oracle on the real adapter:
//   - no tile ever publishes: every tile reduces all of its predecessors from the input itself;
//   - tiles are claimed last first: look-backs meet unpublished, partly published and published
//     predecessors in every order.

#include <gtest/gtest.h>

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
};

class ChainedScanFallbackTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChainedScanFallbackTest, MatchesTheOracleWhenPredecessorsDoNotPublish) {
  const kernels::KernelDefinition& kernel = *kernels::find_kernel(GetParam()).value();
  gpu::Device& device = testing::shared_device();
  const kernels::DeviceCapabilities capabilities = forge::capabilities_of(device.adapter());
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with WGSL_FORGE_TEST_SEED)");
  std::mt19937_64 random(seed);
  // Tiles of 256 and 512 elements, so that the quick cases (up to 10^4 elements) have up to 40
  // tiles; the second one scans row by row.
  std::vector<std::string> schedules = {"workgroup_size=64,vectors_per_invocation=1"};
  if (capabilities.subgroups) {
    schedules.push_back("workgroup_size=64,vectors_per_invocation=2,use_subgroups=1");
  }
  for (const std::string& overrides : schedules) {
    const Schedule schedule = kernels::parse_schedule_overrides(kernel, overrides).value();
    const std::string source =
        kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl, capabilities)
            .value()
            .source;
    for (const SourceEdit& edit : kEdits) {
      SCOPED_TRACE(overrides + ", " + edit.name);
      std::string edited = source;
      const std::size_t at = edited.find(edit.from);
      ASSERT_NE(at, std::string::npos) << "the generated WGSL no longer contains: " << edit.from;
      edited.replace(at, std::string_view(edit.from).size(), edit.to);

      forge::CertifyOptions options;
      options.source = edited;
      options.quick = true;
      options.seed = random();
      Result<CertificationManifest> manifest = forge::certify(device, kernel, schedule, options);
      ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
      EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ChainedScanFallbackTest,
                         ::testing::Values("scan_exclusive_u32", "compact_f32"));

}  // namespace
}  // namespace wgsl_forge
