// The typed calls of segmented_reduce_sum_f32 and radix_sort_pairs_u64 on the real adapter, on
// seeded random columns against a CPU evaluation: segment sums from device or host offsets (and
// the error for host offsets that break the rule), and the u64 sort, stable and out of place
// (and the error for an output column that overlaps an input).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "wgsl_forge/primitives.hpp"

namespace wgsl_forge {
namespace {

using forge::F32Column;
using forge::U32Column;

template <typename T>
gpu::Buffer column_of(gpu::Device& device, const std::vector<T>& values) {
  std::vector<T> padded(std::max<std::size_t>(4, (values.size() + 3) / 4 * 4));
  std::fill(padded.begin(), padded.end(), static_cast<T>(0xDEAD));
  std::copy(values.begin(), values.end(), padded.begin());
  gpu::Buffer buffer =
      device.create_buffer(padded.size() * sizeof(T), gpu::BufferUsage::kStorage, "column").value();
  EXPECT_TRUE(device.write_buffer(buffer, 0, testing::as_bytes_of(padded)).ok());
  return buffer;
}

template <typename T>
std::vector<T> read(gpu::Device& device, const gpu::Buffer& buffer, std::size_t count) {
  return testing::values_from_bytes<T>(device.read_buffer(buffer, 0, count * sizeof(T)).value());
}

class SegmentsPrimitivesTest : public testing::SeededTest {
 protected:
  gpu::Device& device_ = testing::shared_device();
  testing::TempDir cache_dir_;
  forge::Primitives primitives_{device_, ManifestCache(cache_dir_.path())};
};

TEST_F(SegmentsPrimitivesTest, SegmentSumsFromDeviceAndHostOffsetsMatchTheCpu) {
  // Segments of 0 to 40 values, and now and then a long one (up to 20000).
  std::vector<std::uint32_t> offsets = {static_cast<std::uint32_t>(random_() % 3)};
  const std::size_t segments = 500 + random_() % 500;
  for (std::size_t s = 0; s < segments; ++s) {
    const std::uint32_t length =
        static_cast<std::uint32_t>(random_() % 50 == 0 ? random_() % 20000 : random_() % 41);
    offsets.push_back(offsets.back() + length);
  }
  const std::size_t n = offsets.back() + random_() % 5;
  std::vector<float> x(n);
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);
  for (float& value : x) value = uniform(random_);
  std::vector<double> expected(segments);
  std::vector<double> bound(segments);
  for (std::size_t s = 0; s < segments; ++s) {
    double magnitude = 0;
    for (std::uint32_t i = offsets[s]; i < offsets[s + 1]; ++i) {
      expected[s] += x[i];
      magnitude += std::abs(x[i]);
    }
    bound[s] = (offsets[s + 1] - offsets[s]) * 0x1p-24 * magnitude;
  }
  const auto expect_sums = [&](const std::vector<float>& sums) {
    for (std::size_t s = 0; s < segments; ++s) {
      ASSERT_LE(std::abs(sums[s] - expected[s]), bound[s])
          << "segment " << s << " of " << offsets[s + 1] - offsets[s] << " values; " << trace();
    }
  };
  gpu::Buffer values = column_of(device_, x);
  gpu::Buffer device_offsets = column_of(device_, offsets);
  gpu::Buffer sums = column_of(device_, std::vector<float>(segments, -1.0f));
  Status summed = primitives_.segmented_sum_f32(F32Column{&values}, n, U32Column{&device_offsets},
                                                segments, F32Column{&sums});
  ASSERT_TRUE(summed.ok()) << summed.error().to_string();
  expect_sums(read<float>(device_, sums, segments));

  gpu::Buffer host_sums = column_of(device_, std::vector<float>(segments, -1.0f));
  summed = primitives_.segmented_sum_f32(F32Column{&values}, n, offsets, F32Column{&host_sums});
  ASSERT_TRUE(summed.ok()) << summed.error().to_string();
  expect_sums(read<float>(device_, host_sums, segments));

  std::vector<std::uint32_t> bad = offsets;
  std::swap(bad[3], bad[4]);
  bad[3] = bad[4] + 1;
  EXPECT_EQ(primitives_.segmented_sum_f32(F32Column{&values}, n, bad, F32Column{&host_sums})
                .error()
                .to_string(),
            "Segment offset 4 (" + std::to_string(bad[4]) + ") is below offset 3 (" +
                std::to_string(bad[3]) +
                "); offsets must ascend. (while calling segmented_reduce_sum_f32)");
  bad = offsets;
  bad.back() = static_cast<std::uint32_t>(n + 1);
  EXPECT_EQ(primitives_.segmented_sum_f32(F32Column{&values}, n, bad, F32Column{&host_sums})
                .error()
                .message(),
            "Segment offset " + std::to_string(segments) + " (" + std::to_string(n + 1) +
                ") exceeds the value count n (" + std::to_string(n) + ").");
}

TEST_F(SegmentsPrimitivesTest, U64PairsSortStablyOutOfPlace) {
  const std::size_t n = 3000 + random_() % 3000;
  std::vector<std::uint32_t> words(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    // Few distinct high words and low words, so that many keys are equal (stability) and many
    // differ only in the high word.
    words[2 * i] = static_cast<std::uint32_t>(random_() % 8) * 0x10001u;
    words[2 * i + 1] = random_() % 2 == 0 ? static_cast<std::uint32_t>(random_())
                                          : static_cast<std::uint32_t>(random_() % 4) << 30;
  }
  std::vector<std::uint32_t> values(n);
  std::iota(values.begin(), values.end(), 0u);
  const auto key = [&](std::uint32_t i) {
    return std::uint64_t{words[2 * i + 1]} << 32 | words[2 * i];
  };
  std::vector<std::uint32_t> order = values;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
  std::vector<std::uint32_t> expected_words(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    expected_words[2 * i] = words[2 * order[i]];
    expected_words[2 * i + 1] = words[2 * order[i] + 1];
  }

  gpu::Buffer keys = column_of(device_, words);
  gpu::Buffer value_column = column_of(device_, values);
  gpu::Buffer sorted_keys = column_of(device_, std::vector<std::uint32_t>(2 * n));
  gpu::Buffer sorted_values = column_of(device_, std::vector<std::uint32_t>(n));
  Status sorted = primitives_.sort_pairs_u64(U32Column{&keys}, U32Column{&value_column}, n,
                                             U32Column{&sorted_keys}, U32Column{&sorted_values});
  ASSERT_TRUE(sorted.ok()) << sorted.error().to_string();
  EXPECT_EQ(read<std::uint32_t>(device_, sorted_keys, 2 * n), expected_words) << trace();
  EXPECT_EQ(read<std::uint32_t>(device_, sorted_values, n), order) << trace();
  EXPECT_EQ(read<std::uint32_t>(device_, keys, 2 * n), words) << "the input is never written";

  EXPECT_EQ(primitives_
                .sort_pairs_u64(U32Column{&keys}, U32Column{&value_column}, n, U32Column{&keys},
                                U32Column{&sorted_values})
                .error()
                .message(),
            "radix_sort_pairs_u64 sorts out of place: column sorted_keys (offset 0, " +
                std::to_string(8 * n) + " bytes) overlaps column keys (offset 0, " +
                std::to_string(8 * n) + " bytes) of the same buffer.");
}

}  // namespace
}  // namespace wgsl_forge
