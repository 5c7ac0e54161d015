// hash_join_u32's probe variants on the real adapter: the slot read by atomic word loads or by one
// 8-byte load (through the table's writable binding or a read-only one), and the matches placed by
// a workgroup atomic per match or by subgroup ranks with one atomic per subgroup (in workgroup or
// global memory), slot by slot or in runs of 2 or 4 slots, each with several rows in flight per
// invocation, against the oracle on the kernel's own small certification cases (every profile:
// half, all and no matches, the extreme keys 0 and 0xffffffff, a repeated build key).

#include <gtest/gtest.h>

#include "gpu/gpu_test_support.hpp"
#include "support/seeded_test.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernel_runner.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

class HashJoinProbeTest : public testing::SeededTest {
 protected:
  gpu::Device& device_ = testing::shared_device();
  const kernels::DeviceCapabilities capabilities_ = forge::capabilities_of(device_.adapter());
  const kernels::KernelDefinition& kernel_ = *kernels::find_kernel("hash_join_u32").value();
};

TEST_F(HashJoinProbeTest, EveryProbeVariantMatchesTheOracle) {
  std::vector<std::string> schedules = {
      "slot_loads=0,match_places=0",  // revision 1's probe
      "rows_per_invocation=4,workgroup_size=64",
      "slot_loads=0,rows_per_invocation=2,probing=1",
      "slot_loads=2,rows_per_invocation=2",  // the table read through its read-only binding
      // Runs of slots read at once (a run of 4 on a table of 2 build rows holds the whole table).
      "probe_window=4",
      "slot_loads=2,probe_window=2,rows_per_invocation=2",
      "slot_loads=2,probe_window=4,table_factor=4,workgroup_size=64",
  };
  if (capabilities_.subgroups) {
    schedules.push_back("slot_loads=2,probe_window=4,rows_per_invocation=4,match_places=1");
    schedules.push_back("rows_per_invocation=4,match_places=1");
    schedules.push_back("rows_per_invocation=8,match_places=2,workgroup_size=128,probing=1");
    schedules.push_back("slot_loads=0,match_places=1,table_factor=4,workgroup_size=64");
    schedules.push_back("match_places=2,rows_per_invocation=2");
  }
  for (const std::string& overrides : schedules) {
    const Schedule schedule = kernels::parse_schedule_overrides(kernel_, overrides).value();
    ASSERT_TRUE(kernel_.check_schedule(schedule, capabilities_).ok()) << overrides;
    auto generated =
        kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl, capabilities_);
    ASSERT_TRUE(generated.ok()) << generated.error().to_string();
    auto prepared = forge::PreparedKernel::prepare(device_, kernel_, *generated);
    ASSERT_TRUE(prepared.ok()) << prepared.error().to_string();
    for (const kernels::CaseSpec& spec : kernel_.certification_cases()) {
      if (spec.problem.elements > 200'000) continue;  // the many-workgroups case: certify's
      SCOPED_TRACE(overrides + " " + spec.name + " " + trace());
      const kernels::CaseInputs inputs = kernel_.make_inputs(spec, random_());
      auto outputs = prepared->run(inputs);
      ASSERT_TRUE(outputs.ok()) << outputs.error().to_string();
      const kernels::CaseVerdict verdict = kernel_.check(inputs, *outputs);
      EXPECT_TRUE(verdict.failed_checks.empty()) << verdict.failed_checks.front();
      EXPECT_EQ(verdict.report.mismatch_count, 0u);
    }
  }
}

// Runs of slots are read by 16-byte loads along linear probing's sequence: with atomic word
// loads or triangular probing the schedule is refused, naming both knobs.
TEST_F(HashJoinProbeTest, AProbeWindowNeedsWholeSlotLoadsAndLinearProbing) {
  for (const auto& [overrides, other] : std::vector<std::pair<std::string, std::string>>{
           {"probe_window=4,slot_loads=0", "slot_loads"},
           {"probe_window=2,probing=1", "probing"}}) {
    const Schedule schedule = kernels::parse_schedule_overrides(kernel_, overrides).value();
    const Status status = kernel_.check_schedule(schedule, capabilities_);
    ASSERT_FALSE(status.ok()) << overrides;
    EXPECT_EQ(status.error().kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(status.error().message().find("probe_window"), std::string::npos)
        << status.error().message();
    EXPECT_NE(status.error().message().find(other), std::string::npos) << status.error().message();
  }
}

}  // namespace
}  // namespace wgsl_forge
