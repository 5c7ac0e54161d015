// Radix sort's counting and ranking paths on the real adapter: digit_count counts either with one
// workgroup atomic per key or, with subgroups and up to 4 digit bits, in byte counters added per
// subgroup, in chunks of up to 16 keys per invocation; the scatter ranks per invocation or with
// subgroup ballots. Each path, and one and several chunks, must match the oracle.

#include <gtest/gtest.h>

#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

class RadixSortPathsTest : public ::testing::TestWithParam<std::string> {
 protected:
  const kernels::KernelDefinition& kernel_ = *kernels::find_kernel(GetParam()).value();
  gpu::Device& device_ = testing::shared_device();
  const kernels::DeviceCapabilities capabilities_ = forge::capabilities_of(device_.adapter());
  const std::uint64_t seed_ = testing::test_seed();
  std::mt19937_64 random_{seed_};
};

TEST_P(RadixSortPathsTest, EveryCountingAndRankingPathMatchesTheOracle) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)");
  // digit_count's invocations hold workgroup_size * keys_per_invocation / 64 keys: 1 (one chunk
  // of one key), 16 (one chunk) and 64 (four chunks).
  std::vector<std::string> schedules = {
      "workgroup_size=64,keys_per_invocation=1",
      "workgroup_size=256,keys_per_invocation=16,digit_bits=2",
  };
  if (capabilities_.subgroups) {
    schedules.push_back("use_subgroups=1,workgroup_size=64,keys_per_invocation=1");
    schedules.push_back("use_subgroups=1,workgroup_size=64,keys_per_invocation=16,digit_bits=2");
    schedules.push_back("use_subgroups=1,workgroup_size=128,keys_per_invocation=16");
    schedules.push_back("use_subgroups=1,workgroup_size=128,keys_per_invocation=8,digit_bits=8");
  }
  for (const std::string& overrides : schedules) {
    SCOPED_TRACE(overrides);
    forge::CertifyOptions options;
    options.quick = true;
    options.seed = random_();
    Result<CertificationManifest> manifest = forge::certify(
        device_, kernel_, kernels::parse_schedule_overrides(kernel_, overrides).value(), options);
    ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
    EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);
  }
}

// The subgroup scatter's key-slot loops are unrolled so that their array indices are constants,
// which Dawn does not clamp (a sixth of radix sort's time on the H200 when they were loops).
TEST_P(RadixSortPathsTest, SubgroupScatterIndexesItsKeySlotsByConstants) {
  const Schedule schedule =
      kernels::parse_schedule_overrides(
          kernel_, "use_subgroups=1,workgroup_size=128,keys_per_invocation=8,digit_bits=8")
          .value();
  const std::string wgsl = kernel_.generate_wgsl(schedule);
  const std::string scatter = wgsl.substr(wgsl.find("fn scatter("));
  EXPECT_EQ(scatter.find("j < KPI"), std::string::npos) << scatter;
  for (const char* slot : {"const j = 0u;", "const j = 7u;"}) {
    std::size_t copies = 0;
    for (std::size_t at = scatter.find(slot); at != std::string::npos;
         at = scatter.find(slot, at + 1)) {
      ++copies;
    }
    EXPECT_EQ(copies, 4u) << slot << " (load, rank, place and stage each once)";
  }
  EXPECT_EQ(scatter.find("const j = 8u;"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Kernels, RadixSortPathsTest,
                         ::testing::Values("radix_sort_u32", "radix_sort_pairs_u32"));

}  // namespace
}  // namespace wgsl_forge
