// Every builtin kernel, with its default schedule (all certification cases, including a grid of
// more than 65535 workgroups) and three other legal schedules drawn from the seed (the cases up
// to 10000 elements), certified against its oracle on the real adapter (lavapipe in CI). Outputs
// are poisoned before each run, so an element the kernel forgets fails, and every buffer lies
// between guards and poison (forge::PreparedKernel::run_guarded), so one it strays past fails.
// The same without Dawn's bounds clamps, for the default and one other schedule.

#include <gtest/gtest.h>

#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

using kernels::KernelDefinition;

std::vector<std::string> kernel_ids() {
  std::vector<std::string> ids;
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) ids.emplace_back(kernel->id());
  return ids;
}

// Certifies `kernel` with `schedule` through the forge and expects every case to pass; `quick`
// leaves out the cases above forge::kQuickCaseElements elements.
void expect_certified(gpu::Device& device, const KernelDefinition& kernel, const Schedule& schedule,
                      bool quick, std::mt19937_64& random) {
  forge::CertifyOptions options;
  options.quick = quick;
  options.seed = random();
  SCOPED_TRACE(std::string(kernel.id()) + " " + schedule.to_string() + " case seeds from " +
               std::to_string(options.seed));
  Result<CertificationManifest> manifest = forge::certify(device, kernel, schedule, options);
  ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
  EXPECT_GE(manifest->cases.size(), quick ? 5u : 8u);
  EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);
  EXPECT_TRUE(manifest->cache_key.has_value());
  if (!quick) {
    // The schedule's own cases (its second levels) are among those certified.
    for (const kernels::CaseSpec& spec :
         kernel.schedule_cases(schedule, forge::capabilities_of(device.adapter()))) {
      EXPECT_TRUE(std::any_of(manifest->cases.begin(), manifest->cases.end(), [&](const auto& one) {
        return one.name == spec.name;
      })) << spec.name;
    }
    EXPECT_TRUE(
        std::any_of(manifest->cases.begin(), manifest->cases.end(),
                    [](const auto& one) { return one.name.rfind("many-workgroups", 0) == 0; }) ||
        kernel.id() == "gemm_f32");
  }
}

class KernelOnAdapterTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KernelOnAdapterTest, DefaultAndThreeOtherSchedulesMatchTheOracle) {
  const KernelDefinition& kernel = *kernels::find_kernel(GetParam()).value();
  gpu::Device& device = testing::shared_device();
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with WGSL_FORGE_TEST_SEED)");
  std::mt19937_64 random(seed);
  std::vector<Schedule> space = kernel.schedule_space(forge::capabilities_of(device.adapter()));
  ASSERT_GE(space.size(), 4u) << "a kernel's space must offer real choices";
  ASSERT_EQ(space.front(), kernel.default_schedule());
  expect_certified(device, kernel, space.front(), /*quick=*/false, random);
  std::vector<std::size_t> others(space.size() - 1);
  for (std::size_t i = 0; i < others.size(); ++i) others[i] = i + 1;
  std::shuffle(others.begin(), others.end(), random);
  for (std::size_t i = 0; i < 3; ++i) {
    expect_certified(device, kernel, space[others[i]], /*quick=*/true, random);
  }
}

// Without Dawn's bounds clamps (gpu::RuntimeOptions::bounds_checks false) a kernel that relied
// on them, reading or writing past an array, would compute something else: the default schedule
// and one other drawn from the seed must still match the oracle.
TEST_P(KernelOnAdapterTest, DefaultAndOtherScheduleMatchTheOracleWithoutBoundsChecks) {
  static const std::unique_ptr<gpu::Device> device = [] {
    gpu::RuntimeOptions options;
    options.bounds_checks = false;
    return gpu::Device::open(options).value();
  }();
  const KernelDefinition& kernel = *kernels::find_kernel(GetParam()).value();
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with WGSL_FORGE_TEST_SEED)");
  std::mt19937_64 random(seed);
  std::vector<Schedule> space = kernel.schedule_space(forge::capabilities_of(device->adapter()));
  ASSERT_GE(space.size(), 2u);
  expect_certified(*device, kernel, space.front(), /*quick=*/true, random);
  expect_certified(*device, kernel, space[1 + random() % (space.size() - 1)], /*quick=*/true,
                   random);
}

INSTANTIATE_TEST_SUITE_P(Builtins, KernelOnAdapterTest, ::testing::ValuesIn(kernel_ids()),
                         [](const auto& test_info) { return test_info.param; });

}  // namespace
}  // namespace wgsl_forge
