// hash_join_u32 and group_by_sum_f32 through the typed primitives and the C API on the real
// adapter (lavapipe in CI), on seeded random columns against a CPU evaluation: joins and
// group-bys run and waited for or recorded into one batch, a repeated build key reported as an
// error naming it, more distinct keys than max_groups reported as an error, and the C API's
// host-memory calls with their errors.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "gpu/gpu_test_support.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "wgsl_forge/primitives.hpp"
#include "wgsl_forge/wgsl_forge.h"

namespace wgsl_forge {
namespace {

using forge::F32Column;
using forge::U32Column;

template <typename T>
gpu::Buffer column_of(gpu::Device& device, const std::vector<T>& values, std::size_t count = 0) {
  const std::size_t elements = std::max<std::size_t>({values.size(), count, 1});
  std::vector<T> padded((elements + 3) / 4 * 4, static_cast<T>(0xDEAD));
  std::copy(values.begin(), values.end(), padded.begin());
  gpu::Buffer buffer =
      device.create_buffer(padded.size() * sizeof(T), gpu::BufferUsage::kStorage, "column").value();
  EXPECT_TRUE(device.write_buffer(buffer, 0, testing::as_bytes_of(padded)).ok());
  return buffer;
}

template <typename T>
std::vector<T> read(gpu::Device& device, const gpu::Buffer& buffer, std::size_t count) {
  if (count == 0) return {};
  return testing::values_from_bytes<T>(device.read_buffer(buffer, 0, count * sizeof(T)).value());
}

std::vector<std::uint32_t> unique_keys(std::size_t count, std::mt19937_64& random) {
  std::unordered_set<std::uint32_t> seen;
  std::vector<std::uint32_t> keys;
  while (keys.size() < count) {
    const auto key = static_cast<std::uint32_t>(random());
    if (seen.insert(key).second) keys.push_back(key);
  }
  return keys;
}

// A build side of unique keys (0 and 0xffffffff among them) with payloads, and a probe side
// whose keys are about half build keys.
struct JoinInput {
  std::vector<std::uint32_t> build_keys, build_payloads, probe_keys, probe_payloads;
};

JoinInput random_join(std::size_t build_n, std::size_t probe_n, std::mt19937_64& random) {
  JoinInput input;
  input.build_keys = unique_keys(build_n, random);
  input.build_keys[0] = 0;
  input.build_keys[1] = 0xffffffffu;
  std::shuffle(input.build_keys.begin(), input.build_keys.end(), random);
  for (std::size_t i = 0; i < build_n; ++i) {
    input.build_payloads.push_back(static_cast<std::uint32_t>(random()));
  }
  for (std::size_t i = 0; i < probe_n; ++i) {
    input.probe_keys.push_back(random() % 2 ? input.build_keys[random() % build_n]
                                            : static_cast<std::uint32_t>(random()));
    input.probe_payloads.push_back(static_cast<std::uint32_t>(i));
  }
  return input;
}

// The join's (probe payload, build payload) pairs, sorted.
std::vector<std::pair<std::uint32_t, std::uint32_t>> expected_pairs(const JoinInput& input) {
  std::unordered_map<std::uint32_t, std::uint32_t> table;
  for (std::size_t i = 0; i < input.build_keys.size(); ++i) {
    table.emplace(input.build_keys[i], input.build_payloads[i]);
  }
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
  for (std::size_t j = 0; j < input.probe_keys.size(); ++j) {
    if (auto hit = table.find(input.probe_keys[j]); hit != table.end()) {
      pairs.emplace_back(input.probe_payloads[j], hit->second);
    }
  }
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> sorted_pairs(
    const std::vector<std::uint32_t>& probe, const std::vector<std::uint32_t>& build) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
  for (std::size_t i = 0; i < probe.size(); ++i) pairs.emplace_back(probe[i], build[i]);
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

struct ExactGroup {
  double sum = 0;
  double magnitude = 0;
  std::uint32_t count = 0;
  double rounding = 0;  // 2^-(k+1): how far each value may be from its fixed-point integer
};

// The groups of finite values, with the kernel's scale: k = 150 - max(e, 1), e the biased
// exponent of the largest |value|.
std::map<std::uint32_t, ExactGroup> exact_groups(const std::vector<std::uint32_t>& keys,
                                                 const std::vector<float>& values) {
  int exponent = 1;
  for (float value : values) {
    exponent =
        std::max(exponent, static_cast<int>((std::bit_cast<std::uint32_t>(value) >> 23) & 0xff));
  }
  std::map<std::uint32_t, ExactGroup> groups;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ExactGroup& group = groups[keys[i]];
    group.sum += values[i];
    group.magnitude += std::abs(values[i]);
    ++group.count;
    group.rounding = std::ldexp(1.0, exponent - 151);
  }
  return groups;
}

// Every group once, with its count exact and its sum within the kernel's documented bound.
void expect_groups(const std::map<std::uint32_t, ExactGroup>& expected,
                   const std::vector<std::uint32_t>& keys, const std::vector<float>& sums,
                   const std::vector<std::uint32_t>& counts, const std::string& trace) {
  ASSERT_EQ(keys.size(), expected.size()) << trace;
  std::set<std::uint32_t> seen;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    SCOPED_TRACE("key " + std::to_string(keys[i]) + ", " + trace);
    EXPECT_TRUE(seen.insert(keys[i]).second) << "key emitted twice";
    auto group = expected.find(keys[i]);
    ASSERT_NE(group, expected.end());
    EXPECT_EQ(counts[i], group->second.count);
    const double m = group->second.count;
    const double rounding = m * group->second.rounding;
    const double bound = rounding + 0x1p-24 * (std::abs(group->second.sum) + rounding) + 0x1p-150 +
                         m * 0x1p-52 * group->second.magnitude;
    EXPECT_LE(std::abs(sums[i] - group->second.sum), bound);
  }
}

class JoinGroupTest : public testing::SeededTest {
 protected:
  gpu::Device& device_ = testing::shared_device();
  testing::TempDir cache_dir_;
  forge::Primitives primitives_{device_, ManifestCache(cache_dir_.path())};
};

TEST_F(JoinGroupTest, JoinsRunAndRecordedMatchTheCpu) {
  const std::size_t build_n = 500 + random_() % 3000;
  const std::size_t probe_n = 10000 + random_() % 20000;
  const JoinInput input = random_join(build_n, probe_n, random_);
  gpu::Buffer build_keys = column_of(device_, input.build_keys);
  gpu::Buffer build_payloads = column_of(device_, input.build_payloads);
  gpu::Buffer probe_keys = column_of(device_, input.probe_keys);
  gpu::Buffer probe_payloads = column_of(device_, input.probe_payloads);
  gpu::Buffer pairs_probe = column_of(device_, std::vector<std::uint32_t>(probe_n));
  gpu::Buffer pairs_build = column_of(device_, std::vector<std::uint32_t>(probe_n));
  const auto expected = expected_pairs(input);

  Result<std::uint64_t> count =
      primitives_.hash_join_u32({&build_keys}, {&build_payloads}, build_n, {&probe_keys},
                                {&probe_payloads}, probe_n, {&pairs_probe}, {&pairs_build});
  ASSERT_TRUE(count.ok()) << count.error().to_string() << " " << trace();
  ASSERT_EQ(*count, expected.size()) << trace();
  EXPECT_EQ(sorted_pairs(read<std::uint32_t>(device_, pairs_probe, *count),
                         read<std::uint32_t>(device_, pairs_build, *count)),
            expected)
      << trace();

  // Recorded twice into one batch, the second join probing the first one's output.
  gpu::Buffer status = column_of(device_, std::vector<std::uint32_t>(3));
  gpu::Buffer again_probe = column_of(device_, std::vector<std::uint32_t>(probe_n));
  gpu::Buffer again_build = column_of(device_, std::vector<std::uint32_t>(probe_n));
  gpu::Buffer again_status = column_of(device_, std::vector<std::uint32_t>(3));
  Result<forge::Batch> batch = primitives_.begin_batch();
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE(primitives_
                  .hash_join_u32(*batch, {&build_keys}, {&build_payloads}, build_n, {&probe_keys},
                                 {&probe_payloads}, probe_n, {&pairs_probe}, {&pairs_build},
                                 {&status})
                  .ok());
  // Build payloads as probe keys: every pair whose build payload is itself a build key.
  ASSERT_TRUE(primitives_
                  .hash_join_u32(*batch, {&build_keys}, {&build_payloads}, build_n, {&pairs_build},
                                 {&pairs_probe}, expected.size(), {&again_probe}, {&again_build},
                                 {&again_status})
                  .ok());
  ASSERT_TRUE(batch->submit_and_wait().ok());
  EXPECT_EQ(read<std::uint32_t>(device_, status, 3),
            (std::vector<std::uint32_t>{static_cast<std::uint32_t>(expected.size()), 0, 0}));
  JoinInput second{input.build_keys, input.build_payloads, {}, {}};
  for (const auto& [probe, build] : expected) {
    second.probe_keys.push_back(build);
    second.probe_payloads.push_back(probe);
  }
  const auto expected_second = expected_pairs(second);
  const std::uint32_t second_count = read<std::uint32_t>(device_, again_status, 1)[0];
  ASSERT_EQ(second_count, expected_second.size()) << trace();
  EXPECT_EQ(sorted_pairs(read<std::uint32_t>(device_, again_probe, second_count),
                         read<std::uint32_t>(device_, again_build, second_count)),
            expected_second)
      << trace();
}

TEST_F(JoinGroupTest, ARepeatedBuildKeyIsAnErrorNamingIt) {
  const std::size_t build_n = 100 + random_() % 1000;
  JoinInput input = random_join(build_n, 1000, random_);
  const std::size_t copy = random_() % build_n;
  const std::size_t original = (copy + 1 + random_() % (build_n - 1)) % build_n;
  input.build_keys[copy] = input.build_keys[original];
  const std::uint32_t repeated = input.build_keys[copy];
  gpu::Buffer build_keys = column_of(device_, input.build_keys);
  gpu::Buffer build_payloads = column_of(device_, input.build_payloads);
  gpu::Buffer probe_keys = column_of(device_, input.probe_keys);
  gpu::Buffer probe_payloads = column_of(device_, input.probe_payloads);
  gpu::Buffer pairs_probe = column_of(device_, std::vector<std::uint32_t>(1000));
  gpu::Buffer pairs_build = column_of(device_, std::vector<std::uint32_t>(1000));
  Result<std::uint64_t> count =
      primitives_.hash_join_u32({&build_keys}, {&build_payloads}, build_n, {&probe_keys},
                                {&probe_payloads}, 1000, {&pairs_probe}, {&pairs_build});
  ASSERT_FALSE(count.ok()) << trace();
  EXPECT_EQ(count.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(count.error().message(),
            "Build key " + std::to_string(repeated) +
                " occurs more than once on the build side of hash_join_u32 (repeated build "
                "rows: 1); build keys must be unique.")
      << trace();

  // The same columns without the repeat join again: nothing of the failed call lingers.
  input.build_keys[copy] = unique_keys(1, random_)[0];
  while (std::count(input.build_keys.begin(), input.build_keys.end(), input.build_keys[copy]) > 1)
    input.build_keys[copy] = unique_keys(1, random_)[0];
  build_keys = column_of(device_, input.build_keys);
  count = primitives_.hash_join_u32({&build_keys}, {&build_payloads}, build_n, {&probe_keys},
                                    {&probe_payloads}, 1000, {&pairs_probe}, {&pairs_build});
  ASSERT_TRUE(count.ok()) << count.error().to_string() << " " << trace();
  EXPECT_EQ(*count, expected_pairs(input).size()) << trace();
}

TEST_F(JoinGroupTest, GroupBysFewAndManyGroupsMatchTheCpu) {
  for (const std::size_t distinct : {std::size_t{1} + random_() % 50, std::size_t{3000},
                                     std::size_t{20000} + random_() % 5000}) {
    const std::size_t n = 50000 + random_() % 30000;
    const std::vector<std::uint32_t> pool = unique_keys(distinct, random_);
    std::vector<std::uint32_t> keys(n);
    std::vector<float> values(n);
    std::uniform_real_distribution<float> uniform(-1000.0f, 1000.0f);
    for (std::size_t i = 0; i < n; ++i) {
      keys[i] = pool[random_() % distinct];
      values[i] = uniform(random_);
    }
    const auto expected = exact_groups(keys, values);
    gpu::Buffer key_column = column_of(device_, keys);
    gpu::Buffer value_column = column_of(device_, values);
    gpu::Buffer group_keys = column_of(device_, std::vector<std::uint32_t>(distinct));
    gpu::Buffer group_sums = column_of(device_, std::vector<float>(distinct));
    gpu::Buffer group_counts = column_of(device_, std::vector<std::uint32_t>(distinct));
    Result<std::uint64_t> groups = primitives_.group_by_sum_f32(
        {&key_column}, {&value_column}, n, distinct, {&group_keys}, {&group_sums}, {&group_counts});
    ASSERT_TRUE(groups.ok()) << groups.error().to_string() << " " << trace();
    expect_groups(expected, read<std::uint32_t>(device_, group_keys, *groups),
                  read<float>(device_, group_sums, *groups),
                  read<std::uint32_t>(device_, group_counts, *groups),
                  std::to_string(distinct) + " keys, " + trace());
  }
}

TEST_F(JoinGroupTest, MoreDistinctKeysThanMaxGroupsIsAnError) {
  const std::size_t n = 5000;
  const std::vector<std::uint32_t> keys = unique_keys(n, random_);
  const std::vector<float> values(n, 1.0f);
  gpu::Buffer key_column = column_of(device_, keys);
  gpu::Buffer value_column = column_of(device_, values);
  gpu::Buffer group_keys = column_of(device_, std::vector<std::uint32_t>(100));
  gpu::Buffer group_sums = column_of(device_, std::vector<float>(100));
  gpu::Buffer group_counts = column_of(device_, std::vector<std::uint32_t>(100));
  Result<std::uint64_t> groups = primitives_.group_by_sum_f32(
      {&key_column}, {&value_column}, n, 100, {&group_keys}, {&group_sums}, {&group_counts});
  ASSERT_FALSE(groups.ok()) << trace();
  EXPECT_EQ(groups.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(groups.error().message().find("more distinct values than max_groups (100)"),
            std::string::npos)
      << groups.error().message();
}

// The C API's host-memory calls: a join and a group-by against the CPU, and the errors.
TEST_F(JoinGroupTest, CApiHostCallsJoinAndGroupAndReportErrors) {
  wf_context* context = nullptr;
  ASSERT_EQ(wf_context_create(cache_dir_.path().c_str(), &context), WF_OK)
      << wf_context_error(context);
  const JoinInput input = random_join(200 + random_() % 500, 3000 + random_() % 3000, random_);
  std::vector<std::uint32_t> pairs_probe(input.probe_keys.size());
  std::vector<std::uint32_t> pairs_build(input.probe_keys.size());
  std::size_t pairs = 0;
  ASSERT_EQ(wf_hash_join_u32_host(context, input.build_keys.data(), input.build_payloads.data(),
                                  input.build_keys.size(), input.probe_keys.data(),
                                  input.probe_payloads.data(), input.probe_keys.size(),
                                  pairs_probe.data(), pairs_build.data(), &pairs),
            WF_OK)
      << wf_context_error(context);
  pairs_probe.resize(pairs);
  pairs_build.resize(pairs);
  EXPECT_EQ(sorted_pairs(pairs_probe, pairs_build), expected_pairs(input)) << trace();

  std::vector<std::uint32_t> repeated = input.build_keys;
  repeated[1] = repeated[0];
  EXPECT_EQ(wf_hash_join_u32_host(context, repeated.data(), input.build_payloads.data(),
                                  repeated.size(), input.probe_keys.data(),
                                  input.probe_payloads.data(), input.probe_keys.size(),
                                  pairs_probe.data(), pairs_build.data(), &pairs),
            WF_ERROR_INVALID_INPUT);
  EXPECT_NE(std::string(wf_context_error(context))
                .find("Build key " + std::to_string(repeated[0]) + " occurs more than once"),
            std::string::npos)
      << wf_context_error(context);

  const std::size_t n = 4000 + random_() % 4000;
  const std::vector<std::uint32_t> pool = unique_keys(64, random_);
  std::vector<std::uint32_t> keys(n);
  std::vector<float> values(n);
  std::uniform_real_distribution<float> uniform(-10.0f, 10.0f);
  for (std::size_t i = 0; i < n; ++i) {
    keys[i] = pool[random_() % pool.size()];
    values[i] = uniform(random_);
  }
  std::vector<std::uint32_t> group_keys(64), group_counts(64);
  std::vector<float> group_sums(64);
  std::size_t groups = 0;
  ASSERT_EQ(wf_group_by_sum_f32_host(context, keys.data(), values.data(), n, 64, group_keys.data(),
                                     group_sums.data(), group_counts.data(), &groups),
            WF_OK)
      << wf_context_error(context);
  group_keys.resize(groups);
  group_sums.resize(groups);
  group_counts.resize(groups);
  expect_groups(exact_groups(keys, values), group_keys, group_sums, group_counts, trace());
  EXPECT_EQ(wf_group_by_sum_f32_host(context, keys.data(), values.data(), n, 10, group_keys.data(),
                                     group_sums.data(), group_counts.data(), &groups),
            WF_ERROR_INVALID_INPUT);
  EXPECT_EQ(wf_group_by_sum_f32_host(context, nullptr, values.data(), n, 10, group_keys.data(),
                                     group_sums.data(), group_counts.data(), &groups),
            WF_ERROR_INVALID_INPUT);
  wf_context_destroy(context);
}

}  // namespace
}  // namespace wgsl_forge
