// Radix sort's ranking and look-back paths on the real adapter: the scatter ranks per invocation
// or with subgroup ballots, looks back over its predecessors' digit counts with one digit or
// several per invocation, and counts an unpublished predecessor's digits from the input. Each
// path must match the oracle.

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

TEST_P(RadixSortPathsTest, EveryRankingAndLookBackPathMatchesTheOracle) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)");
  // Tiles of one key per invocation make long look-backs; 8-bit digits in workgroups of 64 give
  // each invocation four digits to look back for.
  std::vector<std::string> schedules = {
      "workgroup_size=64,keys_per_invocation=1",
      "workgroup_size=256,keys_per_invocation=16,digit_bits=2",
  };
  if (capabilities_.subgroups) {
    schedules.push_back("use_subgroups=1,workgroup_size=64,keys_per_invocation=1");
    schedules.push_back("use_subgroups=1,workgroup_size=64,keys_per_invocation=16,digit_bits=8");
    schedules.push_back("use_subgroups=1,workgroup_size=128,keys_per_invocation=16");
    schedules.push_back("use_subgroups=1,workgroup_size=256,keys_per_invocation=8,digit_bits=8");
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

// The look-back's rarer paths, forced by editing the generated WGSL: a tile that never publishes
// its prefix makes every later tile sum aggregates window by window back to tile 0; words never
// seen published (and never polled again) make it count every predecessor from the input.
TEST_P(RadixSortPathsTest, TheLookBackSumsAggregatesAndCountsUnpublishedTiles) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)");
  using Edits = std::vector<std::pair<std::string, std::string>>;
  const std::vector<std::pair<std::string, Edits>> variants = {
      {"aggregates only",
       {{"  atomicStore(&status[word], FLAG_PREFIX | (start + count));\n  return start;",
         "  return start;"}}},
      {"never published",
       {{"const SPINS: u32 = 64u;", "const SPINS: u32 = 0u;"},
        {"let read = atomicLoad(&status[1u + (next - 1u - min(w, next - 1u)) * DIGITS + d]);",
         "let read = 0u;"}}}};
  for (const char* overrides : {"workgroup_size=64,keys_per_invocation=2",
                                "use_subgroups=1,workgroup_size=64,keys_per_invocation=4"}) {
    if (std::string(overrides).starts_with("use_subgroups") && !capabilities_.subgroups) continue;
    const Schedule schedule = kernels::parse_schedule_overrides(kernel_, overrides).value();
    for (const auto& [name, edits] : variants) {
      SCOPED_TRACE(std::string(overrides) + ", " + name);
      std::string source =
          kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl, capabilities_)
              .value()
              .source;
      for (const auto& [from, to] : edits) {
        const std::size_t at = source.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        source.replace(at, from.size(), to);
      }
      forge::CertifyOptions options;
      options.quick = true;
      options.seed = random_();
      options.source = source;
      Result<CertificationManifest> manifest = forge::certify(device_, kernel_, schedule, options);
      ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
      EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, RadixSortPathsTest,
                         ::testing::Values("radix_sort_u32", "radix_sort_pairs_u32"));

}  // namespace
}  // namespace wgsl_forge
