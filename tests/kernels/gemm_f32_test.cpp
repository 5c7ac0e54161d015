// gemm_f32 revision 4: the plan takes gemm_vec4 exactly where k and n are multiples of 4 (and
// nothing is empty), and revision 4's schedules (two stages of workgroup tiles, vec4 loads with
// unchecked interior tiles, thread 8 x 8, the depth loop unrolled, tiles taken in groups of
// tile rows) match the oracle on the real adapter with every certification case and their own,
// each with its seed (in groups of 8 tile rows, the schedule case's 3 x 2 tiles are one group
// of 3 rows).

#include <gtest/gtest.h>

#include "gpu/gpu_test_support.hpp"
#include "support/seeded_test.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

const kernels::KernelDefinition& gemm() { return *kernels::find_kernel("gemm_f32").value(); }

std::string entry_point_for(const Schedule& schedule, std::uint32_t m, std::uint32_t n,
                            std::uint32_t k) {
  kernels::Problem problem;
  problem.m = m;
  problem.n = n;
  problem.k = k;
  auto plan = gemm().plan(schedule, problem, kernels::DeviceCapabilities{});
  EXPECT_TRUE(plan.ok());
  return plan.ok() ? plan->passes.at(0).entry_point : "";
}

TEST(GemmF32Test, ThePlanTakesTheVectorEntryPointWhereKAndNAreWholeVectors) {
  const Schedule scalar = gemm().default_schedule();
  const Schedule vectors = kernels::parse_schedule_overrides(gemm(), "vector_loads=1").value();
  EXPECT_EQ(gemm().entry_points(scalar), (std::vector<std::string>{"gemm"}));
  EXPECT_EQ(gemm().entry_points(vectors), (std::vector<std::string>{"gemm", "gemm_vec4"}));
  EXPECT_EQ(entry_point_for(scalar, 64, 64, 64), "gemm");
  EXPECT_EQ(entry_point_for(vectors, 64, 64, 64), "gemm_vec4");
  EXPECT_EQ(entry_point_for(vectors, 3, 8, 12), "gemm_vec4");  // m need not be
  EXPECT_EQ(entry_point_for(vectors, 64, 66, 64), "gemm");
  EXPECT_EQ(entry_point_for(vectors, 64, 64, 66), "gemm");
  EXPECT_EQ(entry_point_for(vectors, 0, 64, 64), "gemm");  // a vec4 view needs 16 bytes
  EXPECT_EQ(entry_point_for(vectors, 64, 64, 0), "gemm");
}

class GemmF32OnAdapterTest : public testing::SeededTest {};

TEST_F(GemmF32OnAdapterTest, RevisionFourSchedulesMatchTheOracle) {
  gpu::Device& device = testing::shared_device();
  const kernels::DeviceCapabilities capabilities = forge::capabilities_of(device.adapter());
  // Each vector_loads schedule runs gemm (two stages here) where k or n is not a multiple of 4
  // and gemm_vec4 where both are. Two schedules, small ones: the first takes lavapipe about 2 s
  // of CPU to compile.
  for (const char* overrides :
       {"tile_m=128,tile_n=128,tile_k=8,thread_m=8,thread_n=8,stages=2,vector_loads=1,"
        "tile_rows_per_group=8",
        "tile_m=64,tile_n=64,tile_k=16,thread_m=4,thread_n=4,stages=2,vector_loads=1,"
        "unroll_depth=1"}) {
    const Schedule schedule = kernels::parse_schedule_overrides(gemm(), overrides).value();
    ASSERT_TRUE(gemm().check_schedule(schedule, capabilities).ok()) << overrides;
    forge::CertifyOptions options;
    options.seed = random_();
    SCOPED_TRACE(trace() + ", " + overrides + ", case seeds from " + std::to_string(options.seed));
    Result<CertificationManifest> manifest = forge::certify(device, gemm(), schedule, options);
    ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
    EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);
  }
}

}  // namespace
}  // namespace wgsl_forge
