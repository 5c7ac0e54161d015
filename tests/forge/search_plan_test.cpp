// The search's rules, without an adapter: what a tune tries, in which batches, what counts
// toward its budget and who takes part in the finals.

#include "forge/search_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_manifests.hpp"

namespace wgsl_forge {
namespace {

using forge::SearchPlan;

// One knob `size` with values 0..count-1; 0 is the default.
SearchPlan::Space line_space(std::int64_t count, std::vector<std::int64_t> starts = {}) {
  SearchPlan::Space space;
  kernels::KnobSpec knob{"size", "a test knob", {}, 0};
  for (std::int64_t value = 0; value < count; ++value) {
    knob.values.push_back(value);
    space.schedules.push_back(Schedule({{"size", value}}));
  }
  space.knobs = {knob};
  for (std::int64_t start : starts) space.starting_points.push_back(Schedule({{"size", start}}));
  return space;
}

Schedule at(std::int64_t value) { return Schedule({{"size", value}}); }

TimingSummary median(double ns) {
  const std::uint64_t samples[] = {static_cast<std::uint64_t>(ns)};
  return TimingSummary::from_samples(TimingSource::kSynthetic, samples).value();
}

const CandidateRecord::Failure kWrong{FailureStage::kMismatch, "case 'n=1': element 0 is 3"};

TEST(SearchPlanTest, TheFirstBatchIsTheDefaultAndTheStartingPointsThenTheFastestsNeighbours) {
  SearchPlan plan(line_space(20, {7}), 4, std::nullopt, testing::test_seed());
  const std::vector<Schedule> first = plan.next_batch();
  // Two thirds of a budget of 4 is 2: the default and the starting point fill it.
  ASSERT_EQ(first, (std::vector<Schedule>{at(0), at(7)}));
  EXPECT_EQ(plan.tried(), 2u);
  plan.record_timing(at(0), median(1000));
  plan.record_timing(at(7), median(100));
  // The rest of the budget goes to the neighbours of the fastest, 7.
  const std::vector<Schedule> second = plan.next_batch();
  EXPECT_EQ(second, (std::vector<Schedule>{at(6), at(8)}));
  plan.record_timing(at(6), median(90));
  plan.record_failure(at(8), kWrong);
  EXPECT_TRUE(plan.next_batch().empty()) << "the budget is spent";
  EXPECT_EQ(plan.candidates().size(), 4u);
  // The fastest three that did not fail; the default is clearly slower, so it is not one.
  EXPECT_EQ(plan.finalists(3), (std::vector<Schedule>{at(6), at(7)}));
}

TEST(SearchPlanTest, ASpaceWithinTheBudgetIsTriedWhole) {
  SearchPlan plan(line_space(3), 12, std::nullopt, testing::test_seed());
  EXPECT_EQ(plan.planned(), 3u);
  EXPECT_EQ(plan.next_batch(), (std::vector<Schedule>{at(0), at(1), at(2)}));
  for (std::int64_t value : {0, 1, 2})
    plan.record_timing(at(value), median(100.0 + static_cast<double>(value)));
  EXPECT_TRUE(plan.next_batch().empty());
  // Within kClearlySlowerFactor, the default takes part.
  EXPECT_EQ(plan.finalists(2), (std::vector<Schedule>{at(0), at(1)}));
}

TEST(SearchPlanTest, ACandidateAQuarterSlowerThanTheFastestTakesNoPartInTheFinals) {
  SearchPlan plan(line_space(3), 3, std::nullopt, testing::test_seed());
  EXPECT_EQ(plan.next_batch(), (std::vector<Schedule>{at(0), at(1), at(2)}));
  // A 2^28-pair u64 sort on the H200 (session 27): 98.7 ms, 130.5 ms (1.32 times) and the
  // default at 184.7 ms; only the fastest is re-timed.
  plan.record_timing(at(0), median(184.7e6));
  plan.record_timing(at(1), median(98.7e6));
  plan.record_timing(at(2), median(130.5e6));
  EXPECT_EQ(plan.finalists(3), (std::vector<Schedule>{at(1)}));
  // Within a quarter, one takes part.
  plan.record_timing(at(2), median(120e6));
  EXPECT_EQ(plan.finalists(3), (std::vector<Schedule>{at(1), at(2)}));
}

TEST(SearchPlanTest, EarlierTimingsSpendTheBudgetAndEarlierFailuresAreNeverTried) {
  SearchPlan plan(line_space(10), 3, std::nullopt, testing::test_seed());
  plan.resume({at(0), CandidateRecord::Origin::kMeasured, std::nullopt, kWrong, false});
  plan.resume({at(4), CandidateRecord::Origin::kMeasured, median(50), std::nullopt, false});
  // A failure outweighs an earlier timing of the same schedule.
  plan.resume({at(5), CandidateRecord::Origin::kMeasured, median(10), std::nullopt, false});
  plan.resume({at(5), CandidateRecord::Origin::kMeasured, std::nullopt, kWrong, false});
  // Outside the space: ignored.
  plan.resume({at(99), CandidateRecord::Origin::kMeasured, median(1), std::nullopt, false});
  EXPECT_EQ(plan.tried(), 1u);
  std::vector<Schedule> tried;
  while (true) {
    const std::vector<Schedule> batch = plan.next_batch();
    if (batch.empty()) break;
    for (const Schedule& schedule : batch) {
      EXPECT_NE(schedule, at(0));
      EXPECT_NE(schedule, at(5));
      EXPECT_NE(schedule, at(4)) << "resumed, not measured again";
      plan.record_timing(schedule, median(100));
      tried.push_back(schedule);
    }
  }
  EXPECT_EQ(tried.size(), 2u) << "one of the budget of 3 was resumed";
  const CandidateRecord* resumed = plan.find(at(4));
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->origin, CandidateRecord::Origin::kResumed);
  EXPECT_EQ(plan.find(at(5))->origin, CandidateRecord::Origin::kFailedBefore);
  EXPECT_FALSE(plan.find(at(5))->timing.has_value());
  const std::vector<Schedule> finalists = plan.finalists(3);
  EXPECT_EQ(finalists.front(), at(4));
  EXPECT_EQ(std::count(finalists.begin(), finalists.end(), at(0)), 0);
  EXPECT_EQ(std::count(finalists.begin(), finalists.end(), at(5)), 0);
}

TEST(SearchPlanTest, TheStoredWinnerIsTriedFirstBeyondTheBudgetAndAlwaysAFinalist) {
  SearchPlan plan(line_space(10), 1, at(9), testing::test_seed());
  EXPECT_EQ(plan.planned(), 2u);
  EXPECT_EQ(plan.next_batch(), (std::vector<Schedule>{at(9), at(0)}));
  plan.record_timing(at(9), median(1000));
  plan.record_timing(at(0), median(10));
  EXPECT_TRUE(plan.next_batch().empty());
  EXPECT_EQ(plan.preferred(), (std::vector<Schedule>{at(9), at(0)}));
  // Clearly slower than the fastest, and still in the finals.
  EXPECT_EQ(plan.finalists(1), (std::vector<Schedule>{at(0), at(9)}));
}

}  // namespace
}  // namespace wgsl_forge
