// The typed primitives on the real adapter (lavapipe in CI): each operation on seeded random
// columns against a CPU evaluation, run and wait or recorded into one batch; the errors a
// database sees for a buffer of the wrong name, type, size or alignment; and a device the test
// creates itself through webgpu.h's C calls, as a database would, handed to the forge.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "gpu/gpu_test_support.hpp"
#include "gpu/webgpu_abi.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "wgsl_forge/primitives.hpp"

namespace wgsl_forge {
namespace {

using forge::F32Column;
using forge::U32Column;

// A device buffer of `count` elements (rounded up to whole vec4s, as vectorised kernels read
// them) holding `values`, the rest poisoned so that a kernel reading past n shows.
template <typename T>
gpu::Buffer column_of(gpu::Device& device, const std::vector<T>& values, std::size_t count = 0) {
  const std::size_t elements = std::max<std::size_t>({values.size(), count, 1});
  std::vector<T> padded((elements + 3) / 4 * 4);
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

std::vector<std::uint32_t> random_u32(std::size_t n, std::mt19937_64& random) {
  std::vector<std::uint32_t> values(n);
  for (auto& value : values) value = static_cast<std::uint32_t>(random());
  return values;
}

std::vector<float> random_floats(std::size_t n, std::mt19937_64& random) {
  std::vector<float> values(n);
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);
  for (auto& value : values) value = uniform(random);
  return values;
}

class PrimitivesTest : public testing::SeededTest {
 protected:
  gpu::Device& device_ = testing::shared_device();
  testing::TempDir cache_dir_;
  forge::Primitives primitives_{device_, ManifestCache(cache_dir_.path())};
};

TEST_F(PrimitivesTest, SortsInPlaceAndCarriesValuesStably) {
  const std::size_t n = 5000 + random_() % 3000;
  std::vector<std::uint32_t> keys = random_u32(n, random_);
  for (std::size_t i = 0; i < n; i += 3) keys[i] %= 64;  // many equal keys, for stability
  gpu::Buffer key_column = column_of(device_, keys);
  ASSERT_TRUE(primitives_.sort_u32(U32Column{&key_column}, n).ok()) << trace();
  std::vector<std::uint32_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(read<std::uint32_t>(device_, key_column, n), expected) << trace();

  std::vector<std::uint32_t> values(n);
  std::iota(values.begin(), values.end(), 0u);
  gpu::Buffer pair_keys = column_of(device_, keys);
  gpu::Buffer pair_values = column_of(device_, values);
  Status sorted = primitives_.sort_pairs_u32(U32Column{&pair_keys}, U32Column{&pair_values}, n);
  ASSERT_TRUE(sorted.ok()) << sorted.error().to_string();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  EXPECT_EQ(read<std::uint32_t>(device_, pair_values, n), order) << trace();
  EXPECT_EQ(read<std::uint32_t>(device_, pair_keys, n), expected) << trace();
}

TEST_F(PrimitivesTest, ScanHistogramGatherAffineAndGemmMatchTheCpu) {
  const std::size_t n = 3000 + random_() % 2000;
  std::vector<std::uint32_t> x = random_u32(n, random_);
  for (auto& value : x) value %= 1000;
  gpu::Buffer x_column = column_of(device_, x);
  gpu::Buffer y_column = column_of<std::uint32_t>(device_, {}, n);
  ASSERT_TRUE(primitives_.exclusive_scan_u32(U32Column{&x_column}, n, U32Column{&y_column}).ok());
  std::vector<std::uint32_t> prefix(n);
  std::exclusive_scan(x.begin(), x.end(), prefix.begin(), 0u);
  EXPECT_EQ(read<std::uint32_t>(device_, y_column, n), prefix) << trace();

  const std::uint32_t bins = 1 + static_cast<std::uint32_t>(random_() % 300);
  gpu::Buffer counts = column_of<std::uint32_t>(device_, {}, bins);
  ASSERT_TRUE(primitives_.histogram_u32(U32Column{&x_column}, n, bins, U32Column{&counts}).ok());
  std::vector<std::uint32_t> expected_counts(bins);
  for (std::uint32_t value : x) ++expected_counts[value % bins];
  EXPECT_EQ(read<std::uint32_t>(device_, counts, bins), expected_counts) << trace();

  const std::size_t source_length = 700;
  std::vector<float> source = random_floats(source_length, random_);
  std::vector<std::uint32_t> idx(n);
  for (auto& index : idx) index = static_cast<std::uint32_t>(random_() % (source_length + 50));
  gpu::Buffer source_column = column_of(device_, source);
  gpu::Buffer idx_column = column_of(device_, idx);
  gpu::Buffer gathered = column_of<float>(device_, {}, n);
  ASSERT_TRUE(primitives_
                  .gather_f32(F32Column{&source_column}, source_length, U32Column{&idx_column}, n,
                              F32Column{&gathered})
                  .ok());
  std::vector<float> got = read<float>(device_, gathered, n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], idx[i] < source_length ? source[idx[i]] : 0.0f) << i << " " << trace();
  }

  std::vector<float> values = random_floats(n, random_);
  gpu::Buffer affine_in = column_of(device_, values);
  gpu::Buffer affine_out = column_of<float>(device_, {}, n);
  ASSERT_TRUE(
      primitives_.affine_f32(F32Column{&affine_in}, n, 1.5f, -2.0f, F32Column{&affine_out}).ok());
  got = read<float>(device_, affine_out, n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], 1.5f * values[i] - 2.0f, 1e-4f * (1 + std::abs(values[i]))) << trace();
  }

  const std::uint32_t m = 37, k = 29, cols = 45;
  std::vector<float> a = random_floats(m * k, random_);
  std::vector<float> b = random_floats(k * cols, random_);
  gpu::Buffer a_column = column_of(device_, a);
  gpu::Buffer b_column = column_of(device_, b);
  gpu::Buffer c_column = column_of<float>(device_, {}, m * cols);
  ASSERT_TRUE(
      primitives_
          .gemm_f32(F32Column{&a_column}, F32Column{&b_column}, F32Column{&c_column}, m, cols, k)
          .ok());
  got = read<float>(device_, c_column, m * cols);
  for (std::uint32_t row = 0; row < m; ++row) {
    for (std::uint32_t col = 0; col < cols; ++col) {
      double exact = 0, magnitude = 0;
      for (std::uint32_t l = 0; l < k; ++l) {
        exact += double{a[row * k + l]} * b[l * cols + col];
        magnitude += std::abs(double{a[row * k + l]} * b[l * cols + col]);
      }
      ASSERT_NEAR(got[row * cols + col], exact, 1e-5 * magnitude + 1e-6) << trace();
    }
  }
}

TEST_F(PrimitivesTest, CompactionAndReductionsReturnTheirValues) {
  const std::size_t n = 10000 + random_() % 5000;
  std::vector<float> x = random_floats(n, random_);
  const float threshold = std::uniform_real_distribution<float>(-50, 50)(random_);
  gpu::Buffer x_column = column_of(device_, x);
  gpu::Buffer kept = column_of<float>(device_, {}, n);
  Result<std::uint64_t> count =
      primitives_.compact_f32(F32Column{&x_column}, n, threshold, F32Column{&kept});
  ASSERT_TRUE(count.ok()) << count.error().to_string();
  std::vector<float> expected;
  std::copy_if(x.begin(), x.end(), std::back_inserter(expected),
               [&](float value) { return value > threshold; });
  ASSERT_EQ(*count, expected.size()) << trace();
  EXPECT_EQ(read<float>(device_, kept, expected.size()), expected) << trace();

  const double exact = std::accumulate(x.begin(), x.end(), 0.0);
  double magnitude = 0;
  for (float value : x) magnitude += std::abs(value);
  Result<float> sum = primitives_.sum_f32(F32Column{&x_column}, n);
  ASSERT_TRUE(sum.ok()) << sum.error().to_string();
  EXPECT_NEAR(*sum, exact, static_cast<double>(n) * std::ldexp(magnitude, -24)) << trace();
  EXPECT_EQ(primitives_.min_f32(F32Column{&x_column}, n).value(),
            *std::min_element(x.begin(), x.end()));
  EXPECT_EQ(primitives_.max_f32(F32Column{&x_column}, n).value(),
            *std::max_element(x.begin(), x.end()));
  std::vector<std::uint32_t> words = random_u32(n, random_);
  gpu::Buffer word_column = column_of(device_, words);
  EXPECT_EQ(primitives_.sum_u32(U32Column{&word_column}, n).value(),
            std::accumulate(words.begin(), words.end(), 0u));
  // The same call again reuses its binding and gives the same answer.
  EXPECT_EQ(primitives_.sum_f32(F32Column{&x_column}, n).value(), *sum);
  EXPECT_FALSE(primitives_.min_f32(F32Column{&x_column}, 0).ok());
}

// A database's query in one submission: filter a column, sum what passed, gather through the
// kept positions, and sort keys, all recorded into one batch and checked after it ran.
TEST_F(PrimitivesTest, ChainedCallsRunInOneSubmission) {
  const std::size_t n = 6000 + random_() % 2000;
  std::vector<float> x = random_floats(n, random_);
  std::vector<std::uint32_t> keys = random_u32(n, random_);
  gpu::Buffer x_column = column_of(device_, x);
  gpu::Buffer kept = column_of<float>(device_, {}, n);
  gpu::Buffer count = column_of<std::uint32_t>(device_, {}, 1);
  gpu::Buffer total = column_of<float>(device_, {}, 1);
  gpu::Buffer key_column = column_of(device_, keys);

  Result<forge::Batch> batch = primitives_.begin_batch();
  ASSERT_TRUE(batch.ok()) << batch.error().to_string();
  ASSERT_TRUE(
      primitives_
          .compact_f32(*batch, F32Column{&x_column}, n, 0.0f, F32Column{&kept}, U32Column{&count})
          .ok());
  ASSERT_TRUE(primitives_.sum_f32(*batch, F32Column{&x_column}, n, F32Column{&total}).ok());
  ASSERT_TRUE(primitives_.sort_u32(U32Column{&key_column}, n, &*batch).ok());
  // Nothing has run yet.
  EXPECT_EQ(read<std::uint32_t>(device_, count, 1)[0], 0xDEADu);
  Status ran = batch->submit_and_wait();
  ASSERT_TRUE(ran.ok()) << ran.error().to_string();

  const auto passed = static_cast<std::uint32_t>(
      std::count_if(x.begin(), x.end(), [](float value) { return value > 0.0f; }));
  EXPECT_EQ(read<std::uint32_t>(device_, count, 1)[0], passed) << trace();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(read<std::uint32_t>(device_, key_column, n), keys) << trace();
  EXPECT_NEAR(read<float>(device_, total, 1)[0], std::accumulate(x.begin(), x.end(), 0.0),
              1e-3 * static_cast<double>(n));
  EXPECT_FALSE(batch->submit_and_wait().ok());  // an encoder is submitted once
}

TEST_F(PrimitivesTest, BadBuffersAreClearErrorsNamingKernelBufferAndSizes) {
  gpu::Buffer small = column_of<std::uint32_t>(device_, {1, 2, 3, 4});
  Status short_keys = primitives_.sort_u32(U32Column{&small}, 1000);
  ASSERT_FALSE(short_keys.ok());
  EXPECT_EQ(short_keys.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(short_keys.error().to_string().find("Buffer keys holds 16 bytes from offset 0; the "
                                                "plan needs 4000 (n elements, at least 1)."),
            std::string::npos)
      << short_keys.error().to_string();
  EXPECT_NE(short_keys.error().to_string().find("radix_sort_u32"), std::string::npos);

  gpu::Buffer big = column_of<std::uint32_t>(device_, {}, 4096);
  Status misaligned = primitives_.sort_u32(U32Column{&big, 4}, 100);
  ASSERT_FALSE(misaligned.ok());
  EXPECT_NE(misaligned.error().message().find("not a multiple of minStorageBufferOffsetAlignment"),
            std::string::npos);

  // By name, as before the typed calls: a misspelt name, a missing input and a wrong type.
  forge::KernelLibrary library(device_, ManifestCache(cache_dir_.path()));
  auto ready = library.load("radix_sort_u32").value();
  kernels::Problem problem;
  problem.elements = 100;
  auto misspelt = ready.prepared.bind(problem, {{"key", &big}, {"sorted", &big}});
  ASSERT_FALSE(misspelt.ok());
  EXPECT_NE(misspelt.error().message().find(
                "Kernel radix_sort_u32 has no buffer 'key' (its buffers: keys, sorted, scratch"),
            std::string::npos)
      << misspelt.error().to_string();
  auto missing = ready.prepared.bind(problem, {{"sorted", &big}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("Input buffer keys is not given"), std::string::npos);
  auto wrong_type = ready.prepared.bind(
      problem, {{"keys", forge::BufferSlice(&big, 0, kernels::ElementType::kF32)}});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.error().message().find(
                "Buffer keys holds f32 elements; the kernel reads it as u32."),
            std::string::npos);
}

// What a database does: the instance, adapter and device come from its own webgpu.h calls.
class OwnDeviceTest : public testing::SeededTest {
 protected:
  using Api = gpu::abi::WebGpuFunctions;

  void SetUp() override {
    SeededTest::SetUp();
    const auto path = gpu::resolve_webgpu_library(std::nullopt);
    ASSERT_TRUE(path.ok()) << path.error().to_string();
    library_ = ::dlopen(path->c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << ::dlerror();
#define WGSL_FORGE_TEST_RESOLVE(name, result, ...) \
  api_.name = reinterpret_cast<decltype(api_.name)>(::dlsym(library_, "wgpu" #name));
    WGSL_FORGE_WEBGPU_FUNCTIONS(WGSL_FORGE_TEST_RESOLVE)
#undef WGSL_FORGE_TEST_RESOLVE
    instance_ = api_.CreateInstance(nullptr);
    ASSERT_NE(instance_, nullptr);
    gpu::abi::WGPURequestAdapterOptions options{};
    options.featureLevel = gpu::abi::kFeatureLevelCore;
    options.backendType = gpu::abi::kBackendTypeVulkan;
    api_.InstanceRequestAdapter(
        instance_, &options,
        {nullptr, gpu::abi::kCallbackModeAllowProcessEvents,
         [](std::uint32_t, gpu::abi::WGPUAdapter adapter, gpu::abi::WGPUStringView, void* out,
            void*) { *static_cast<gpu::abi::WGPUAdapter*>(out) = adapter; },
         &adapter_, nullptr});
    for (int i = 0; i < 10000 && adapter_ == nullptr; ++i) api_.InstanceProcessEvents(instance_);
    ASSERT_NE(adapter_, nullptr);
  }

  void TearDown() override {
    if (device_ != nullptr) api_.DeviceRelease(device_);
    if (adapter_ != nullptr) api_.AdapterRelease(adapter_);
    if (instance_ != nullptr) api_.InstanceRelease(instance_);
  }

  // A device with WebGPU's default limits and features (a database need not ask for more), or
  // with the adapter's limits, its features and the toggle the forge sets.
  void create_device(bool like_the_forge) {
    gpu::abi::LimitsStorage limits{};
    ASSERT_EQ(api_.AdapterGetLimits(adapter_, &limits.limits), gpu::abi::kStatusSuccess);
    std::vector<std::uint32_t> features;
    for (std::uint32_t feature : {gpu::abi::kFeatureTimestampQuery, gpu::abi::kFeatureSubgroups,
                                  gpu::abi::kFeatureShaderF16}) {
      if (api_.AdapterHasFeature(adapter_, feature)) features.push_back(feature);
    }
    static const char* const kDisabled[] = {"timestamp_quantization"};
    gpu::abi::WGPUDawnTogglesDescriptor toggles{};
    toggles.chain.sType = gpu::abi::kSTypeDawnTogglesDescriptor;
    toggles.disabledToggleCount = 1;
    toggles.disabledToggles = kDisabled;
    gpu::abi::WGPUDeviceDescriptor descriptor{};
    if (like_the_forge) {
      descriptor.nextInChain = &toggles.chain;
      descriptor.requiredFeatureCount = features.size();
      descriptor.requiredFeatures = features.data();
      descriptor.requiredLimits = &limits.limits;
    }
    api_.AdapterRequestDevice(
        adapter_, &descriptor,
        {nullptr, gpu::abi::kCallbackModeAllowProcessEvents,
         [](std::uint32_t, gpu::abi::WGPUDevice device, gpu::abi::WGPUStringView, void* out,
            void*) { *static_cast<gpu::abi::WGPUDevice*>(out) = device; },
         &device_, nullptr});
    for (int i = 0; i < 10000 && device_ == nullptr; ++i) api_.InstanceProcessEvents(instance_);
    ASSERT_NE(device_, nullptr);
  }

  gpu::abi::WGPUBuffer create_buffer(std::uint64_t size) {
    gpu::abi::WGPUBufferDescriptor descriptor{};
    descriptor.size = size;
    descriptor.usage = gpu::abi::kBufferUsageStorage | gpu::abi::kBufferUsageCopySrc |
                       gpu::abi::kBufferUsageCopyDst;
    return api_.DeviceCreateBuffer(device_, &descriptor);
  }

  void* library_ = nullptr;
  Api api_;
  gpu::abi::WGPUInstance instance_ = nullptr;
  gpu::abi::WGPUAdapter adapter_ = nullptr;
  gpu::abi::WGPUDevice device_ = nullptr;
};

TEST_F(OwnDeviceTest, TheForgeRunsOnTheDatabasesDeviceAndFindsItsTopology) {
  create_device(/*like_the_forge=*/true);
  gpu::ExternalDevice external;
  external.instance = instance_;
  external.adapter = adapter_;
  external.device = device_;
  Result<std::unique_ptr<gpu::Device>> adopted = gpu::Device::adopt(external);
  ASSERT_TRUE(adopted.ok()) << adopted.error().to_string();
  EXPECT_EQ((*adopted)->adapter().topology_hash, testing::shared_device().adapter().topology_hash);

  // The database's own buffer and command encoder.
  const std::size_t n = 4000 + random_() % 1000;
  std::vector<std::uint32_t> keys = random_u32(n, random_);
  gpu::abi::WGPUBuffer raw = create_buffer(n * 4);
  api_.QueueWriteBuffer(api_.DeviceGetQueue(device_), raw, 0, keys.data(), n * 4);
  Result<gpu::Buffer> wrapped = (*adopted)->wrap_buffer(raw, "keys");
  ASSERT_TRUE(wrapped.ok()) << wrapped.error().to_string();
  testing::TempDir cache;
  forge::Primitives primitives(**adopted, ManifestCache(cache.path()));
  gpu::abi::WGPUCommandEncoder encoder = api_.DeviceCreateCommandEncoder(device_, nullptr);
  {
    forge::Batch batch = primitives.record_into(encoder);
    ASSERT_TRUE(primitives.sort_u32(U32Column{&*wrapped}, n, &batch).ok());
    EXPECT_FALSE(batch.submit_and_wait().ok());  // the database submits its own encoder
    gpu::abi::WGPUCommandBuffer commands = api_.CommandEncoderFinish(encoder, nullptr);
    gpu::abi::WGPUQueue queue = api_.DeviceGetQueue(device_);
    api_.QueueSubmit(queue, 1, &commands);
    api_.CommandBufferRelease(commands);
    api_.QueueRelease(queue);
    std::vector<std::uint32_t> sorted = read<std::uint32_t>(**adopted, *wrapped, n);
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(sorted, keys) << trace();
  }
  api_.CommandEncoderRelease(encoder);
  wrapped = Error(ErrorKind::kInvalidInput, "released");
  api_.BufferRelease(raw);
}

TEST_F(OwnDeviceTest, ADeviceWithWebGpuDefaultLimitsKeepsTheAdaptersKeyAndRunsPrimitives) {
  create_device(/*like_the_forge=*/false);
  gpu::ExternalDevice external;
  external.instance = instance_;
  external.adapter = adapter_;
  external.device = device_;
  auto adopted = gpu::Device::adopt(external).value();
  EXPECT_EQ(adopted->adapter().topology_hash, testing::shared_device().adapter().topology_hash);
  EXPECT_FALSE(adopted->has_feature("subgroups"));
  Result<gpu::Buffer> not_storage = adopted->wrap_buffer(nullptr, "nothing");
  ASSERT_FALSE(not_storage.ok());

  const std::size_t n = 3000;
  std::vector<float> x = random_floats(n, random_);
  gpu::Buffer column = column_of(*adopted, x);
  testing::TempDir cache;
  forge::Primitives primitives(*adopted, ManifestCache(cache.path()));
  Result<float> sum = primitives.sum_f32(F32Column{&column}, n);
  ASSERT_TRUE(sum.ok()) << sum.error().to_string();
  EXPECT_NEAR(*sum, std::accumulate(x.begin(), x.end(), 0.0), 1e-3 * static_cast<double>(n))
      << trace();
  EXPECT_NE(primitives.origin("reduce_sum_f32").value().find("default schedule"),
            std::string::npos);
}

}  // namespace
}  // namespace wgsl_forge
