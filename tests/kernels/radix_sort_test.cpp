// Radix sort's counting and ranking paths on the real adapter: digit_count counts either with one
// workgroup atomic per key or, with subgroups and up to 4 digit bits, in byte counters added per
// subgroup, in chunks of up to 16 keys per invocation; the scatter ranks per invocation or with
// subgroup ballots. Each path, and one and several chunks, must match the oracle. So must the
// one-sweep path (one_sweep=1), with each ranking and digit width, and at sizes of many tiles,
// where each scatter looks back over many predecessors and, on lavapipe, finds some of them
// unpublished and counts them from the input (the fallback). Each for the u32 keys, the u32
// pairs and the u64 pairs (whose two sorts run the pairs' passes on the low and high words).
// The u64 pairs' direct rounds (direct_rounds=1), in five passes and in one sweep, which skips
// the rounds whose digit every key shares.

#include <gtest/gtest.h>

#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernel_runner.hpp"
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
  if (kernel_.id() == "radix_sort_pairs_u64") {
    // Its digit passes are the u32 pairs' WGSL, whose paths are certified here; its five-pass
    // plan (two sorts sharing the counts) is the default schedule's, which KernelOnAdapterTest
    // certifies with every case. Compiling its modules again took lavapipe 95 s.
    GTEST_SKIP() << "the u32 pairs' paths, certified by the u32 pairs' instance";
  }
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

TEST_P(RadixSortPathsTest, OneSweepMatchesTheOracleOverManyTiles) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)");
  // Invocation ranking with 2 and 4 digit bits (16 and 8 rounds); subgroup ranking with 4 and 8,
  // with tiles of 64 to 2048 keys (larger tiles certify too, but compiling their unrolled slots
  // takes lavapipe several seconds each).
  std::vector<std::string> schedules = {
      "one_sweep=1,workgroup_size=64,keys_per_invocation=1,digit_bits=2",
      "one_sweep=1,workgroup_size=128,keys_per_invocation=4",
  };
  if (capabilities_.subgroups) {
    schedules.push_back("one_sweep=1,use_subgroups=1,workgroup_size=64,keys_per_invocation=2");
    schedules.push_back(
        "one_sweep=1,use_subgroups=1,workgroup_size=256,keys_per_invocation=1,digit_bits=8");
    schedules.push_back(
        "one_sweep=1,use_subgroups=1,workgroup_size=256,keys_per_invocation=8,digit_bits=8");
  }
  for (const std::string& overrides : schedules) {
    SCOPED_TRACE(overrides);
    const Schedule schedule = kernels::parse_schedule_overrides(kernel_, overrides).value();
    forge::CertifyOptions options;
    options.quick = true;
    options.seed = random_();
    Result<CertificationManifest> manifest = forge::certify(device_, kernel_, schedule, options);
    ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
    EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);

    // Many tiles, the last one partial.
    const std::uint64_t tile = static_cast<std::uint64_t>(*schedule.get("workgroup_size")) *
                               static_cast<std::uint64_t>(*schedule.get("keys_per_invocation"));
    kernels::CaseSpec spec;
    spec.problem.elements = std::max<std::uint64_t>(2000, 40 * tile) + tile / 3 + 1;
    spec.name = "n=" + std::to_string(spec.problem.elements) + " uniform";
    spec.value_profile = "uniform";
    SCOPED_TRACE(spec.name);
    auto generated =
        kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl, capabilities_);
    ASSERT_TRUE(generated.ok()) << generated.error().to_string();
    auto prepared = forge::PreparedKernel::prepare(device_, kernel_, *generated);
    ASSERT_TRUE(prepared.ok()) << prepared.error().to_string();
    const kernels::CaseInputs inputs = kernel_.make_inputs(spec, random_());
    auto outputs = prepared->run(inputs);
    ASSERT_TRUE(outputs.ok()) << outputs.error().to_string();
    const kernels::CaseVerdict verdict = kernel_.check(inputs, *outputs);
    EXPECT_EQ(verdict.report.mismatch_count, 0u);
    EXPECT_TRUE(verdict.failed_checks.empty()) << verdict.failed_checks.front();
  }
}

// One sweep is 2 + 32 / digit_bits dispatches: 6 with 8-bit digits, against 20 (twice, and three
// element-wise passes, for u64 keys).
TEST_P(RadixSortPathsTest, OneSweepDispatchesOneScatterPerRound) {
  const Schedule schedule =
      kernels::parse_schedule_overrides(
          kernel_,
          "one_sweep=1,use_subgroups=1,workgroup_size=256,keys_per_invocation=16,"
          "digit_bits=8")
          .value();
  kernels::Problem problem;
  problem.elements = 1u << 20;
  auto plan = kernel_.plan(schedule, problem, capabilities_);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  std::vector<std::string> entry_points;
  for (const kernels::PassPlan& pass : plan->passes) entry_points.push_back(pass.entry_point);
  const std::vector<std::string> sort = {"sweep_clear", "digit_histograms", "scatter",
                                         "scatter",     "scatter",          "scatter"};
  std::vector<std::string> expected = sort;
  if (kernel_.id() == "radix_sort_pairs_u64") {
    // The low words' sort, then the high words', between the u64 kernel's own passes.
    expected = {"split_keys"};
    expected.insert(expected.end(), sort.begin(), sort.end());
    expected.push_back("gather_high");
    expected.insert(expected.end(), sort.begin(), sort.end());
    expected.push_back("finish_keys");
    expected.push_back("finish_values");
  }
  EXPECT_EQ(entry_points, expected);
  if (kernel_.id() == "radix_sort_pairs_u64") {
    // Direct rounds: plan_rounds routes the eight rounds over the u64 keys (or skips them).
    const Schedule direct = kernels::parse_schedule_overrides(
                                kernel_,
                                "direct_rounds=1,one_sweep=1,use_subgroups=1,workgroup_size=256,"
                                "keys_per_invocation=16,digit_bits=8")
                                .value();
    auto direct_plan = kernel_.plan(direct, problem, capabilities_);
    ASSERT_TRUE(direct_plan.ok()) << direct_plan.error().to_string();
    entry_points.clear();
    for (const kernels::PassPlan& pass : direct_plan->passes) {
      entry_points.push_back(pass.entry_point);
    }
    expected = {"sweep_clear", "digit_histograms", "plan_rounds"};
    expected.insert(expected.end(), 8, "scatter");
    EXPECT_EQ(entry_points, expected);
  }
  problem.elements = std::uint64_t{1} << 30;
  EXPECT_EQ(kernel_.plan(schedule, problem, capabilities_).error().message(),
            "Knob one_sweep (1) sorts at most 2^30 - 1 keys, whose counts fit its 30-bit "
            "look-back words; the problem has 1073741824.");
}

// The atomic digit_count takes 4 tiles per workgroup; the packed count (subgroups, up to 4 digit
// bits) and the u64 keys' direct rounds one: 1000 tiles of 256 keys take 250 workgroups, 1001
// take 251 (the last counts one).
TEST_P(RadixSortPathsTest, DigitCountTakesFourTilesPerWorkgroupWhenCountingByAtomics) {
  std::vector<std::pair<std::string, std::uint64_t>> cases = {
      // knobs, tiles per group
      {"use_subgroups=1,workgroup_size=64,keys_per_invocation=4,digit_bits=8", 4},
      {"use_subgroups=0,workgroup_size=64,keys_per_invocation=4,digit_bits=4", 4},
      {"use_subgroups=1,workgroup_size=64,keys_per_invocation=4,digit_bits=4", 1}};
  if (kernel_.id() == "radix_sort_pairs_u64") {
    cases.push_back(
        {"direct_rounds=1,use_subgroups=1,workgroup_size=64,keys_per_invocation=4,digit_bits=8",
         1});
  }
  for (const auto& [knobs, group] : cases) {
    SCOPED_TRACE(knobs);
    const Schedule schedule = kernels::parse_schedule_overrides(kernel_, knobs).value();
    for (const std::uint64_t tiles : {std::uint64_t{1000}, std::uint64_t{1001}}) {
      kernels::Problem problem;
      problem.elements = tiles * 256 - 7;
      auto plan = kernel_.plan(schedule, problem, capabilities_);
      ASSERT_TRUE(plan.ok()) << plan.error().to_string();
      std::size_t counted = 0;
      for (const kernels::PassPlan& pass : plan->passes) {
        if (pass.entry_point != "digit_count") continue;
        ++counted;
        EXPECT_EQ(pass.workgroups, (tiles + group - 1) / group);
      }
      EXPECT_GT(counted, 0u);
    }
  }
}

// radix_sort_pairs_u64's direct rounds: 64 / digit_bits rounds over the u64 keys, each moving
// both words and the value, in five passes per round or in one sweep (8 rounds of 8 bits). The
// certification cases' profiles skip different rounds in one sweep: none (uniform), all but the
// last (equal, tiny n), all but two (small), the low words' (high-only) or five (ids, three
// kept: an odd number, which starts in sorted). Then many tiles.
TEST_P(RadixSortPathsTest, DirectRoundsMatchTheOracle) {
  if (kernel_.id() != "radix_sort_pairs_u64") GTEST_SKIP() << "u64 keys only";
  if (!capabilities_.subgroups) GTEST_SKIP() << "direct rounds rank with subgroups";
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (rerun with WGSL_FORGE_TEST_SEED)");
  const std::vector<std::string> schedules = {
      "direct_rounds=1,use_subgroups=1,workgroup_size=64,keys_per_invocation=4,digit_bits=8",
      "direct_rounds=1,one_sweep=1,use_subgroups=1,workgroup_size=256,keys_per_invocation=4,"
      "digit_bits=8",
  };
  for (const std::string& overrides : schedules) {
    SCOPED_TRACE(overrides);
    const Schedule schedule = kernels::parse_schedule_overrides(kernel_, overrides).value();
    forge::CertifyOptions options;
    options.quick = true;
    options.seed = random_();
    Result<CertificationManifest> manifest = forge::certify(device_, kernel_, schedule, options);
    ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
    EXPECT_EQ(manifest->verdict, Verdict::kCertified) << forge::first_failure(*manifest);
    if (*schedule.get("one_sweep") == 0) continue;
    auto generated =
        kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl, capabilities_);
    ASSERT_TRUE(generated.ok()) << generated.error().to_string();
    auto prepared = forge::PreparedKernel::prepare(device_, kernel_, *generated);
    ASSERT_TRUE(prepared.ok()) << prepared.error().to_string();
    for (const char* profile : {"uniform", "ids"}) {
      kernels::CaseSpec spec;
      spec.problem.elements = 40 * 1024 + 333;  // 41 tiles of 1024 keys, the last partial
      spec.name = "n=" + std::to_string(spec.problem.elements) + " " + profile;
      spec.value_profile = profile;
      SCOPED_TRACE(spec.name);
      const kernels::CaseInputs inputs = kernel_.make_inputs(spec, random_());
      auto outputs = prepared->run(inputs);
      ASSERT_TRUE(outputs.ok()) << outputs.error().to_string();
      const kernels::CaseVerdict verdict = kernel_.check(inputs, *outputs);
      EXPECT_EQ(verdict.report.mismatch_count, 0u);
      EXPECT_TRUE(verdict.failed_checks.empty()) << verdict.failed_checks.front();
    }
  }
  // Ranking per invocation has no staged tile to move the three columns by.
  const Schedule invocation_ranked =
      kernels::parse_schedule_overrides(kernel_, "direct_rounds=1,use_subgroups=0").value();
  EXPECT_EQ(kernel_.check_schedule(invocation_ranked, capabilities_).error().message(),
            "Knob direct_rounds (1) needs use_subgroups (1): its scatter stages the tile's key "
            "words and values in their ranked order, which the subgroup ranking computes.");
}

// How many times `needle` stands in `text`.
std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
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
  // The pairs stage their values in a slot loop of its own, and leave by output slots s.
  const bool pairs = kernel_.id() != "radix_sort_u32";
  const auto copies_of = [&](const char* text) { return occurrences(scatter, text); };
  for (const char* slot : {"const j = 0u;", "const j = 7u;"}) {
    EXPECT_EQ(copies_of(slot), pairs ? 5u : 4u) << slot << " (load, rank, place, stage, values)";
  }
  for (const char* slot : {"const s = 0u;", "const s = 7u;"}) {
    EXPECT_EQ(copies_of(slot), pairs ? 2u : 0u) << slot << " (keys out, values out)";
  }
  EXPECT_EQ(scatter.find("const j = 8u;"), std::string::npos);
  EXPECT_EQ(scatter.find("const s = 8u;"), std::string::npos);
  EXPECT_EQ(scatter.find("ranked_values"), std::string::npos);
  // The pairs load each value just before staging it, not into a register array at the start.
  EXPECT_EQ(scatter.find("values[j]"), std::string::npos);
}

// The u64 keys' direct rounds stage the digit words, the other words and the values in turn in
// `ranked`, by constant slots too, without a workgroup array of their own, and branch on their
// round's route once around each step's slots.
TEST(RadixSortDirectRoundsTest, StageEveryColumnInRankedByConstantSlots) {
  const kernels::KernelDefinition& kernel = *kernels::find_kernel("radix_sort_pairs_u64").value();
  for (const char* sweep : {"0", "1"}) {
    const Schedule schedule = kernels::parse_schedule_overrides(
                                  kernel, std::string("direct_rounds=1,use_subgroups=1,"
                                                      "workgroup_size=128,keys_per_invocation=8,"
                                                      "digit_bits=8,one_sweep=") +
                                              sweep)
                                  .value();
    const std::string wgsl = kernel.generate_wgsl(schedule);
    const std::string scatter = wgsl.substr(wgsl.find("fn scatter("));
    const auto copies_of = [&](const char* text) { return occurrences(scatter, text); };
    for (const char* slot : {"const j = 0u;", "const j = 7u;"}) {
      EXPECT_EQ(copies_of(slot), 8u)
          << slot << " (load from each of 3 sources, rank, place, stage, others, values)";
    }
    for (const char* slot : {"const s = 0u;", "const s = 7u;"}) {
      EXPECT_EQ(copies_of(slot), 5u)
          << slot << " (targets, pairs and values out to each of 2 destinations)";
    }
    // The tile's accesses branch once on the round's route, not in each slot.
    EXPECT_EQ(copies_of("load_pair("), 0u);
    EXPECT_EQ(copies_of("pair_from_scratch(min(i, last))"), 8u);
    EXPECT_EQ(copies_of("value_to_sorted(targets[s]"), 8u);
    EXPECT_EQ(copies_of("atomicStore(&ranked[places[j]], "), 24u) << "three columns, 8 slots";
    EXPECT_EQ(wgsl.find("ranked_values"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, RadixSortPathsTest,
                         ::testing::Values("radix_sort_u32", "radix_sort_pairs_u32",
                                           "radix_sort_pairs_u64"));

}  // namespace
}  // namespace wgsl_forge
