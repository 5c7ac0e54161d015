// group_by_sum_f32's fixed-point sums on the real adapter: every schedule (workgroup tables or
// none, searched slot by slot or by windows, rows one after the other or together, one workgroup
// per tile or a few looping over tiles, the keys in one aggregate pass or split by hash over
// several) gives each group the same sum bit for bit, the f32 nearest to the exact sum of its
// values' integers (computed here in 64 bits from double arithmetic, not from the kernel's bit
// manipulations), because integer addition does not depend on the order of the rows. A third of the
// rows share one key, so that its sum's low word overflows many times within one workgroup's table
// and in the global one: a lost or doubled carry changes that sum by 2^32 units. Another third have
// the key 0xffffffff, the tables' empty key, which adds up outside the workgroup's table.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/seeded_test.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernel_runner.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

const kernels::KernelDefinition& group_by() {
  return *kernels::find_kernel("group_by_sum_f32").value();
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> values_of(const std::vector<std::byte>& bytes, std::size_t count) {
  std::vector<T> values(count);
  std::memcpy(values.data(), bytes.data(), std::min(bytes.size(), count * sizeof(T)));
  return values;
}

// Each key's (sum bits, count).
using GroupWords = std::map<std::uint32_t, std::pair<std::uint32_t, std::uint32_t>>;

// The header's contract for finite values: k = 150 - max(e, 1), e the largest |value|'s biased
// exponent; each value rounded to an integer multiple of 2^-k, half away from zero; the integers
// summed exactly; the sum rounded once to f32 (exact here: normal results).
GroupWords fixed_point_groups(const std::vector<std::uint32_t>& keys,
                              const std::vector<float>& values) {
  int exponent = 1;
  for (float value : values) {
    exponent =
        std::max(exponent, static_cast<int>((std::bit_cast<std::uint32_t>(value) >> 23) & 0xff));
  }
  const int k = 150 - exponent;
  std::map<std::uint32_t, std::pair<std::int64_t, std::uint32_t>> sums;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto& [sum, count] = sums[keys[i]];
    sum += static_cast<std::int64_t>(std::round(std::ldexp(static_cast<double>(values[i]), k)));
    ++count;
  }
  GroupWords groups;
  for (const auto& [key, group] : sums) {
    const float sum = std::ldexp(static_cast<float>(group.first), -k);
    groups[key] = {std::bit_cast<std::uint32_t>(sum), group.second};
  }
  return groups;
}

class GroupBySumTest : public testing::SeededTest {
 protected:
  gpu::Device& device_ = testing::shared_device();
  const kernels::DeviceCapabilities capabilities_ = forge::capabilities_of(device_.adapter());

  GroupWords run(const Schedule& schedule, const kernels::CaseInputs& inputs) {
    const kernels::KernelDefinition& kernel = group_by();
    auto generated =
        kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl, capabilities_);
    EXPECT_TRUE(generated.ok()) << generated.error().to_string();
    if (!generated.ok()) return {};
    auto prepared = forge::PreparedKernel::prepare(device_, kernel, *generated);
    EXPECT_TRUE(prepared.ok()) << prepared.error().to_string();
    if (!prepared.ok()) return {};
    auto outputs = prepared->run(inputs);
    EXPECT_TRUE(outputs.ok()) << outputs.error().to_string();
    if (!outputs.ok()) return {};
    const auto groups = values_of<std::uint32_t>(outputs->at("groups"), 2);
    EXPECT_EQ(groups[1], 0u);
    const std::size_t count = std::min<std::size_t>(groups[0], inputs.problem.max_groups);
    const auto keys = values_of<std::uint32_t>(outputs->at("group_keys"), count);
    const auto sums = values_of<std::uint32_t>(outputs->at("group_sums"), count);
    const auto counts = values_of<std::uint32_t>(outputs->at("group_counts"), count);
    GroupWords words;
    for (std::size_t i = 0; i < count; ++i) words[keys[i]] = {sums[i], counts[i]};
    return words;
  }
  // n rows: a third with `pool[0]`, a third with `pool[1]`, the rest drawn from all of `pool`;
  // values uniform in [lowest, highest].
  kernels::CaseInputs draw_inputs(std::size_t n, const std::vector<std::uint32_t>& pool,
                                  float lowest = -1000.0f, float highest = 1000.0f) {
    std::vector<std::uint32_t> keys(n);
    std::vector<float> values(n);
    std::uniform_real_distribution<float> uniform(lowest, highest);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t third = random_() % 3;
      keys[i] = third < 2 ? pool[third] : pool[random_() % pool.size()];
      values[i] = uniform(random_);
    }
    kernels::CaseInputs inputs;
    inputs.problem.elements = n;
    inputs.problem.max_groups = 1024;
    inputs.buffers["keys"] = bytes_of(keys);
    inputs.buffers["values"] = bytes_of(values);
    expected_ = fixed_point_groups(keys, values);
    return inputs;
  }

  void expect_exact_sums(const std::string& overrides, const kernels::CaseInputs& inputs) {
    SCOPED_TRACE("schedule '" + overrides + "', " + trace());
    const Schedule schedule = kernels::parse_schedule_overrides(group_by(), overrides).value();
    const GroupWords got = run(schedule, inputs);
    ASSERT_EQ(got.size(), expected_.size());
    for (const auto& [key, words] : expected_) {
      ASSERT_TRUE(got.contains(key)) << key;
      EXPECT_EQ(got.at(key).second, words.second) << key;
      EXPECT_EQ(got.at(key).first, words.first)
          << "key " << key << ": " << std::bit_cast<float>(got.at(key).first) << ", expected "
          << std::bit_cast<float>(words.first);
    }
  }

  GroupWords expected_;
};

TEST_F(GroupBySumTest, EveryScheduleGivesTheExactFixedPointSumsBitForBit) {
  std::vector<std::uint32_t> pool(200);
  for (std::uint32_t& key : pool) key = static_cast<std::uint32_t>(random_());
  pool[1] = 0xffffffffu;
  const kernels::CaseInputs inputs = draw_inputs(40000 + random_() % 20000, pool);
  for (const char* overrides :
       {"", "local_slots=0,rows_per_invocation=4",
        "workgroup_size=64,rows_per_invocation=16,local_slots=2048,persistent_workgroups=256",
        "workgroup_size=128,rows_per_invocation=4,table_factor=4,persistent_workgroups=256",
        "key_partitions=2,probe_window=4",
        "workgroup_size=64,rows_per_invocation=4,local_slots=2048,probe_window=8,"
        "persistent_workgroups=256,key_partitions=4",
        "local_slots=0,key_partitions=2",
        "workgroup_size=64,rows_per_invocation=16,local_slots=1024,interleave_rows=1,"
        "persistent_workgroups=256",
        "rows_per_invocation=4,interleave_rows=1,key_partitions=2",
        "local_slots=0,rows_per_invocation=4,interleave_rows=1",
        "local_slots=0,rows_per_invocation=4,interleave_rows=1,key_partitions=4",
        // Tiles of 64 rows over 256 workgroups: each loops over 2 to 4 tiles, the last partial
        // (the rows of the next tile are loaded while a tile adds).
        "workgroup_size=64,rows_per_invocation=1,persistent_workgroups=256",
        "workgroup_size=64,rows_per_invocation=1,persistent_workgroups=256,interleave_rows=1"}) {
    expect_exact_sums(overrides, inputs);
  }
}

// The empty key's rows add up in each invocation's registers first: with 256 persistent
// workgroups of 64 invocations over 2^22 rows, 8 in 9 of them with the empty key, each invocation
// adds about 230 such rows, which sum to about 2^32 after the bias: many register sums carry.
TEST_F(GroupBySumTest, TheEmptyKeysRegisterSumsCarry) {
  const std::vector<std::uint32_t> pool = {0xffffffffu, 0xffffffffu,
                                           static_cast<std::uint32_t>(random_()) & 0xffffu};
  const kernels::CaseInputs inputs = draw_inputs(std::size_t{1} << 22, pool);
  expect_exact_sums(
      "workgroup_size=64,rows_per_invocation=16,local_slots=1024,persistent_workgroups=256",
      inputs);
}

// A workgroup slot counts the carries out of its low word in the top 8 bits of its counts word
// and adds 256 of them to the global high word when those bits wrap. With 256 persistent
// workgroups over 3 * 2^22 rows, 8 in 9 of them with one key and values in [500, 1000] (integers
// of 1.5 to 2 times 2^24 after the bias: a carry every 146 rows or so), each workgroup's slot of
// that key carries about 330 times, so every workgroup wraps once, by each way of adding a row.
TEST_F(GroupBySumTest, AWorkgroupSlotsCarriesWrapIntoTheGlobalHighWord) {
  const std::uint32_t key = static_cast<std::uint32_t>(random_()) & 0x7fffffffu;
  const std::vector<std::uint32_t> pool = {key, key, key ^ 1u};
  const kernels::CaseInputs inputs = draw_inputs(std::size_t{3} << 22, pool, 500.0f, 1000.0f);
  for (const char* overrides :
       {"workgroup_size=64,rows_per_invocation=16,local_slots=1024,persistent_workgroups=256",
        "workgroup_size=64,rows_per_invocation=16,local_slots=1024,persistent_workgroups=256,"
        "probe_window=4",
        "workgroup_size=64,rows_per_invocation=16,local_slots=1024,persistent_workgroups=256,"
        "interleave_rows=1"}) {
    expect_exact_sums(overrides, inputs);
  }
}

}  // namespace
}  // namespace wgsl_forge
