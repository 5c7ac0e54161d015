#pragma once
// Certification of a kernel's schedules on the shared real device, optionally with edits of the
// generated WGSL that force paths a fast GPU rarely takes (a look-back whose predecessors never
// publish, tiles claimed in reverse): the result must still match the oracle.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "gpu/gpu_test_support.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge::testing {

struct SourceEdit {
  const char* name;
  const char* from;
  const char* to;
};

// Applies `edit` to `source`; false, with the reason logged, when the source lacks its text.
inline ::testing::AssertionResult replace_once(std::string& source, const SourceEdit& edit) {
  const std::size_t at = source.find(edit.from);
  if (at == std::string::npos) {
    return ::testing::AssertionFailure()
           << "the generated WGSL no longer contains: " << edit.from << " (" << edit.name << ")";
  }
  source.replace(at, std::string_view(edit.from).size(), edit.to);
  return ::testing::AssertionSuccess();
}

// Parameterized by kernel id.
class EditedCertificationTest : public ::testing::TestWithParam<std::string> {
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

  Schedule schedule_of(const std::string& overrides) const {
    return kernels::parse_schedule_overrides(kernel_, overrides).value();
  }

  std::string generated(const Schedule& schedule) const {
    return kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl, capabilities_)
        .value()
        .source;
  }

  std::string trace() const {
    return "seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)";
  }

  const kernels::KernelDefinition& kernel_ = *kernels::find_kernel(GetParam()).value();
  gpu::Device& device_ = shared_device();
  const kernels::DeviceCapabilities capabilities_ = forge::capabilities_of(device_.adapter());
  const std::uint64_t seed_ = test_seed();
  std::mt19937_64 random_{seed_};
};

}  // namespace wgsl_forge::testing
