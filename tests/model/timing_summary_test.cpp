#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "support/test_manifests.hpp"
#include "wgsl_forge/model.hpp"

namespace wgsl_forge {
namespace {

TEST(TimingSummaryTest, NoSamplesIsAnError) {
  Result<TimingSummary> summary = TimingSummary::from_samples(TimingSource::kGpuTimestamp, {});
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(summary.error().message(),
            "A timing summary needs at least one sample (got 0 from gpu_timestamp).");
}

TEST(TimingSummaryTest, OneSampleIsEveryStatistic) {
  std::uint64_t samples[] = {10};
  TimingSummary summary = TimingSummary::from_samples(TimingSource::kSynthetic, samples).value();
  EXPECT_EQ(summary.sample_count, 1u);
  EXPECT_EQ(summary.min_ns, 10u);
  EXPECT_EQ(summary.max_ns, 10u);
  EXPECT_EQ(summary.median_ns, 10.0);
  EXPECT_EQ(summary.mean_ns, 10.0);
  EXPECT_EQ(summary.mad_ns, 0.0);
  EXPECT_EQ(summary.p10_ns, 10.0);
  EXPECT_EQ(summary.p90_ns, 10.0);
}

TEST(TimingSummaryTest, KnownSamplesGiveKnownStatistics) {
  // Unsorted on purpose; one outlier that must move the mean but not the median or the MAD much.
  std::uint64_t samples[] = {13, 10, 1000, 11, 12, 10};
  TimingSummary summary = TimingSummary::from_samples(TimingSource::kHostClock, samples).value();
  EXPECT_EQ(summary.source, TimingSource::kHostClock);
  EXPECT_EQ(summary.sample_count, 6u);
  EXPECT_EQ(summary.min_ns, 10u);
  EXPECT_EQ(summary.max_ns, 1000u);
  EXPECT_DOUBLE_EQ(summary.median_ns, 11.5);  // (11 + 12) / 2
  EXPECT_DOUBLE_EQ(summary.mean_ns, 1056.0 / 6.0);
  EXPECT_DOUBLE_EQ(summary.mad_ns, 1.5);               // deviations 0.5 0.5 1.5 1.5 1.5 988.5
  EXPECT_DOUBLE_EQ(summary.p10_ns, 10.0);              // rank 0.5 between 10 and 10
  EXPECT_DOUBLE_EQ(summary.p90_ns, 13.0 + 0.5 * 987);  // rank 4.5 between 13 and 1000
}

TEST(TimingSummaryTest, RandomSamplesAgreeWithSortedDefinitions) {
  std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 random(seed);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::uint64_t> samples(1 + random() % 51);
    for (auto& sample : samples) sample = random() % 100000;
    TimingSummary summary =
        TimingSummary::from_samples(TimingSource::kGpuTimestamp, samples).value();
    std::sort(samples.begin(), samples.end());
    std::size_t n = samples.size();
    double median =
        n % 2 ? static_cast<double>(samples[n / 2])
              : (static_cast<double>(samples[n / 2 - 1]) + static_cast<double>(samples[n / 2])) / 2;
    EXPECT_EQ(summary.min_ns, samples.front());
    EXPECT_EQ(summary.max_ns, samples.back());
    EXPECT_DOUBLE_EQ(summary.median_ns, median);
    EXPECT_LE(summary.p10_ns, summary.median_ns);
    EXPECT_LE(summary.median_ns, summary.p90_ns);
    EXPECT_GE(summary.mad_ns, 0.0);
    EXPECT_LE(summary.mad_ns, static_cast<double>(samples.back() - samples.front()));
  }
}

}  // namespace
}  // namespace wgsl_forge
