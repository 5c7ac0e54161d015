// Every builtin kernel, with its default schedule and three other legal schedules drawn from the
// seed, against its oracle over its certification cases, on the real adapter (lavapipe in CI).
// Outputs are poisoned before each run, so an element the kernel forgets fails.

#include <gtest/gtest.h>

#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/kernel_runner.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

using kernels::KernelDefinition;

std::vector<std::string> kernel_ids() {
  std::vector<std::string> ids;
  for (const KernelDefinition* kernel : kernels::builtin_kernels()) ids.emplace_back(kernel->id());
  return ids;
}

// Runs every case of `kernel` with `schedule`; returns how many cases ran.
int certify_schedule(gpu::Device& device, const KernelDefinition& kernel, const Schedule& schedule,
                     bool include_many_workgroups, std::mt19937_64& random) {
  const kernels::DeviceCapabilities capabilities = forge::capabilities_of(device.adapter());
  Result<GeneratedKernel> generated =
      kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl, capabilities);
  EXPECT_TRUE(generated.ok()) << generated.error().to_string();
  if (!generated) return 0;
  Result<forge::PreparedKernel> prepared =
      forge::PreparedKernel::prepare(device, kernel, *generated);
  EXPECT_TRUE(prepared.ok()) << prepared.error().to_string() << "\n" << generated->source;
  if (!prepared) return 0;
  int ran = 0;
  for (const kernels::CaseSpec& spec : kernel.certification_cases()) {
    const bool many = spec.name.rfind("many-workgroups", 0) == 0;
    if (many && !include_many_workgroups) continue;
    const std::uint64_t seed = random();
    SCOPED_TRACE(std::string(kernel.id()) + " " + schedule.to_string() + " case '" + spec.name +
                 "' seed " + std::to_string(seed));
    kernels::CaseInputs inputs = kernel.make_inputs(spec, seed);
    Result<forge::BufferContents> outputs = prepared->run(inputs);
    EXPECT_TRUE(outputs.ok()) << outputs.error().to_string();
    if (!outputs) continue;
    kernels::CaseVerdict verdict = kernel.check(inputs, *outputs);
    EXPECT_EQ(verdict.report.mismatch_count, 0u)
        << "first mismatch at " << verdict.report.first_mismatch->index << ": expected "
        << verdict.report.first_mismatch->expected << ", got "
        << verdict.report.first_mismatch->actual;
    for (const std::string& failed : verdict.failed_checks) ADD_FAILURE() << failed;
    ++ran;
  }
  return ran;
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
  EXPECT_GT(certify_schedule(device, kernel, space.front(), true, random), 0);
  std::vector<std::size_t> others(space.size() - 1);
  for (std::size_t i = 0; i < others.size(); ++i) others[i] = i + 1;
  std::shuffle(others.begin(), others.end(), random);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_GT(certify_schedule(device, kernel, space[others[i]], false, random), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Builtins, KernelOnAdapterTest, ::testing::ValuesIn(kernel_ids()),
                         [](const auto& test_info) { return test_info.param; });

}  // namespace
}  // namespace wgsl_forge
