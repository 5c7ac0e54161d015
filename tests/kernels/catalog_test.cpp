// Every builtin kernel, with its default schedule (all certification cases, including a grid of
// more than 65535 workgroups; under AddressSanitizer those up to 2^21 elements) and three other
// legal schedules drawn from the seed (the cases up to 10000 elements), certified against its
// oracle on the real adapter (lavapipe in CI). Outputs are poisoned before each run, so an element
// the kernel forgets fails, and every buffer lies between guards and poison
// (forge::PreparedKernel::run_guarded), so one it strays past fails.
// The same without Dawn's bounds clamps, for the default and one other schedule. And every
// schedule the tuner starts from (those this adapter runs) and a seeded sample of each space,
// with the quick cases and the schedule's own second-level cases.

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/delegating_kernel.hpp"
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

// Second-level cases above this size (a reduction's second pass or a scan's look-back on the
// widest tiles) take seconds each on lavapipe.
constexpr std::uint64_t kLargestLevelCase = std::uint64_t{1} << 21;

// Under AddressSanitizer a full certification stops at kLargestLevelCase elements too. The cases
// above it (up to 128 MiB a buffer) run the same host code as the smaller ones; their time is
// lavapipe's and the page faults of ASan's allocator, which maps every large allocation afresh
// (a scan's full certification: 2.3 M faults and 41 s against 0.34 M and 8 s uninstrumented).
// The ci stage certifies them in full.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

// A builtin kernel whose certification cases stop at `largest_case` elements and whose schedule's
// own second-level cases stop at `largest_level_case`.
class CasesUpTo final : public testing::DelegatingKernel {
 public:
  CasesUpTo(std::string_view builtin_id, std::uint64_t largest_case,
            std::uint64_t largest_level_case)
      : DelegatingKernel(builtin_id),
        largest_case_(largest_case),
        largest_level_case_(largest_level_case) {}
  std::string_view id() const override { return base_.id(); }
  std::uint32_t revision() const override { return base_.revision(); }
  std::string_view summary() const override { return base_.summary(); }
  bool deterministic() const override { return base_.deterministic(); }
  std::vector<kernels::CaseSpec> certification_cases() const override {
    return at_most(base_.certification_cases(), largest_case_);
  }
  std::vector<kernels::CaseSpec> schedule_cases(
      const Schedule& schedule, const kernels::DeviceCapabilities& device) const override {
    return at_most(base_.schedule_cases(schedule, device), largest_level_case_);
  }

 private:
  static std::vector<kernels::CaseSpec> at_most(std::vector<kernels::CaseSpec> cases,
                                                std::uint64_t elements) {
    std::erase_if(cases, [&](const kernels::CaseSpec& spec) {
      return std::max<std::uint64_t>(spec.problem.elements,
                                     std::uint64_t{spec.problem.m} * spec.problem.n) > elements;
    });
    return cases;
  }

  std::uint64_t largest_case_;
  std::uint64_t largest_level_case_;
};

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
        kernel.id() == "gemm_f32" || kAddressSanitizer);
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
  const CasesUpTo sanitized(kernel.id(), kLargestLevelCase, kLargestLevelCase);
  const KernelDefinition& fully_certified = kAddressSanitizer ? sanitized : kernel;
  expect_certified(device, fully_certified, space.front(), /*quick=*/false, random);
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

TEST_P(KernelOnAdapterTest, StartingPointsAndASampleOfTheSpaceCertifyWithTheirSecondLevels) {
  const KernelDefinition& kernel = *kernels::find_kernel(GetParam()).value();
  gpu::Device& device = testing::shared_device();
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with WGSL_FORGE_TEST_SEED)");
  std::mt19937_64 random(seed);
  const kernels::DeviceCapabilities capabilities = forge::capabilities_of(device.adapter());
  std::vector<Schedule> schedules;
  for (const std::string& point : kernel.starting_points()) {
    Result<Schedule> schedule = kernels::parse_schedule_overrides(kernel, point);
    ASSERT_TRUE(schedule.ok()) << schedule.error().to_string();
    // Some are the H200's (more workgroup memory than lavapipe's 32 KiB): the tuner skips them.
    if (kernel.check_schedule(*schedule, capabilities).ok()) schedules.push_back(*schedule);
  }
  const std::vector<Schedule> space = kernel.schedule_space(capabilities);
  std::vector<std::size_t> others(space.size() - 1);
  std::iota(others.begin(), others.end(), 1);
  std::shuffle(others.begin(), others.end(), random);
  for (std::size_t i = 0; i < std::min<std::size_t>(2, others.size()); ++i) {
    schedules.push_back(space[others[i]]);
  }
  // The cases that screen a tuning candidate and the schedule's own second levels up to
  // kLargestLevelCase (the default schedule's full certification above runs its own).
  const CasesUpTo screened(kernel.id(), forge::kQuickCaseElements, kLargestLevelCase);
  for (const Schedule& schedule : schedules) {
    forge::CertifyOptions options;
    options.seed = random();
    SCOPED_TRACE(schedule.to_string() + " case seeds from " + std::to_string(options.seed));
    Result<CertificationManifest> manifest = forge::certify(device, screened, schedule, options);
    ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
    EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);
  }
}

INSTANTIATE_TEST_SUITE_P(Builtins, KernelOnAdapterTest, ::testing::ValuesIn(kernel_ids()),
                         [](const auto& test_info) { return test_info.param; });

}  // namespace
}  // namespace wgsl_forge
