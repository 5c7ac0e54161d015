// The runtime against the real adapter: kernels that compute a known function, grids over 65535
// workgroups, compile and validation errors, timing, the topology hash, device loss, and every
// webgpu.h callback and struct we declare (a wrong declaration must fail here, not hang).

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include "gpu/gpu_test_support.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/hash.hpp"

namespace wgsl_forge {
namespace {

using gpu::BufferBinding;
using gpu::BufferUsage;
using gpu::DispatchStep;
using testing::as_bytes_of;
using testing::shared_device;
using testing::values_from_bytes;

constexpr std::uint32_t kPoison = 0xDEADBEEF;

BufferBinding bind(std::uint32_t binding, const gpu::Buffer& buffer, std::uint64_t offset = 0,
                   std::optional<std::uint64_t> size = std::nullopt) {
  BufferBinding result;
  result.binding = binding;
  result.buffer = &buffer;
  result.offset = offset;
  result.size = size;
  return result;
}

// y[i] = x[i] * 2654435761 + (i ^ seed) with wrapping u32 arithmetic: every element differs,
// and an element left unwritten keeps the poison. The grid may be 2-D (more than 65535
// workgroups); the kernel linearises it and stops at n.
std::string known_function_wgsl(std::uint32_t workgroup_size) {
  return "struct Params { n: u32, seed: u32 }\n"
         "@group(0) @binding(0) var<storage, read> x: array<u32>;\n"
         "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
         "@group(0) @binding(2) var<uniform> params: Params;\n"
         "@compute @workgroup_size(" +
         std::to_string(workgroup_size) +
         ")\n"
         "fn main(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,\n"
         "        @builtin(local_invocation_index) local: u32) {\n"
         "  let linear_group = group.x + group.y * groups.x;\n"
         "  let i = linear_group * " +
         std::to_string(workgroup_size) +
         "u + local;\n"
         "  if (i >= params.n) { return; }\n"
         "  y[i] = x[i] * 2654435761u + (i ^ params.seed);\n"
         "}\n";
}

const std::vector<KernelBinding> kKnownFunctionBindings = {
    {0, 0, BindingKind::kStorageRead, "x"},
    {0, 1, BindingKind::kStorageReadWrite, "y"},
    {0, 2, BindingKind::kUniform, "params"},
};

struct KnownFunctionRun {
  std::vector<std::uint32_t> input;
  std::vector<std::uint32_t> output;
  std::uint32_t seed = 0;
};

// Runs the known function over n random elements on `device` and returns input and output.
KnownFunctionRun run_known_function(gpu::Device& device, std::uint32_t n,
                                    std::uint32_t workgroup_size, std::mt19937_64& random) {
  KnownFunctionRun run;
  run.seed = static_cast<std::uint32_t>(random());
  run.input.resize(n);
  for (auto& value : run.input) value = static_cast<std::uint32_t>(random());
  std::uint64_t bytes = std::uint64_t{n} * 4;
  auto x = device.create_buffer(bytes, BufferUsage::kStorage, "x").value();
  auto y = device.create_buffer(bytes, BufferUsage::kStorage, "y").value();
  auto params = device.create_buffer(8, BufferUsage::kUniform, "params").value();
  EXPECT_TRUE(device.write_buffer(x, 0, as_bytes_of(run.input)).ok());
  std::vector<std::uint32_t> poison(std::max<std::uint32_t>(n, 1), kPoison);
  EXPECT_TRUE(device.write_buffer(y, 0, as_bytes_of(poison)).ok());
  std::vector<std::uint32_t> parameters = {n, run.seed};
  EXPECT_TRUE(device.write_buffer(params, 0, as_bytes_of(parameters)).ok());

  auto pipeline = device
                      .create_compute_pipeline(known_function_wgsl(workgroup_size), "main",
                                               kKnownFunctionBindings, "known_function")
                      .value();
  std::array<BufferBinding, 3> bindings = {bind(0, x), bind(1, y), bind(2, params)};
  auto group = device.create_bind_group(pipeline, bindings).value();
  std::uint64_t workgroups = (std::uint64_t{n} + workgroup_size - 1) / workgroup_size;
  auto grid = gpu::plan_workgroup_grid(workgroups,
                                       device.adapter().limits.max_compute_workgroups_per_dimension)
                  .value();
  DispatchStep step{&pipeline, &group, grid};
  Status ran = device.run(std::span(&step, 1));
  EXPECT_TRUE(ran.ok()) << (ran.ok() ? "" : ran.error().to_string());
  run.output = values_from_bytes<std::uint32_t>(device.read_buffer(y, 0, bytes).value());
  return run;
}

void expect_known_function(const KnownFunctionRun& run) {
  ASSERT_EQ(run.output.size(), run.input.size());
  std::size_t mismatches = 0;
  for (std::uint32_t i = 0; i < run.input.size(); ++i) {
    std::uint32_t expected = run.input[i] * 2654435761u + (i ^ run.seed);
    if (run.output[i] != expected && mismatches++ < 5) {
      ADD_FAILURE() << "element " << i << ": expected " << expected << ", got " << run.output[i];
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = testing::test_seed();
    random_.seed(seed_);
  }
  std::string trace() const { return "seed " + std::to_string(seed_); }
  std::uint64_t seed_ = 0;
  std::mt19937_64 random_;
};

TEST_F(RuntimeTest, KnownFunctionMatchesTheCpuAtEdgeSizes) {
  SCOPED_TRACE(trace());
  for (std::uint32_t n : {0u, 1u, 255u, 256u, 257u, (1u << 20) + 3}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    expect_known_function(run_known_function(shared_device(), n, 256, random_));
  }
}

TEST_F(RuntimeTest, GridOfMoreThan65535WorkgroupsCoversEveryElement) {
  SCOPED_TRACE(trace());
  // 2^20 + 3 elements at 8 per workgroup: 131073 workgroups, laid out in two dimensions.
  const std::uint32_t n = (1u << 20) + 3;
  auto grid = gpu::plan_workgroup_grid((n + 7) / 8, 65535).value();
  EXPECT_GT(grid.y, 1u);
  EXPECT_GE(grid.count(), (n + 7) / 8u);
  expect_known_function(run_known_function(shared_device(), n, 8, random_));
}

TEST(WorkgroupGridTest, SplitsLargeCountsAndRefusesImpossibleOnes) {
  EXPECT_EQ(gpu::plan_workgroup_grid(0, 65535).value().count(), 0u);
  auto one_row = gpu::plan_workgroup_grid(65535, 65535).value();
  EXPECT_EQ(one_row.x, 65535u);
  EXPECT_EQ(one_row.y, 1u);
  auto two_rows = gpu::plan_workgroup_grid(65536, 65535).value();
  EXPECT_EQ(two_rows.y, 2u);
  EXPECT_EQ(two_rows.x, 32768u);
  for (std::uint64_t count : {100000ull, 4294836225ull, 1234567891ull}) {
    auto grid = gpu::plan_workgroup_grid(count, 65535).value();
    EXPECT_LE(grid.x, 65535u);
    EXPECT_LE(grid.y, 65535u);
    EXPECT_GE(grid.count(), count);
    EXPECT_LT(grid.count() - count, grid.y) << "waste is less than one workgroup per row";
  }
  auto too_many = gpu::plan_workgroup_grid(4294836226ull, 65535);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().message(),
            "Workgroup count (4294836226) exceeds maxComputeWorkgroupsPerDimension squared "
            "(4294836225).");
}

TEST_F(RuntimeTest, BuffersRoundTripAnyByteCount) {
  SCOPED_TRACE(trace());
  gpu::Device& device = shared_device();
  for (std::uint64_t size : {1ull, 3ull, 4ull, 5ull, 1023ull, 65537ull}) {
    std::vector<std::byte> bytes(size);
    for (auto& byte : bytes) byte = static_cast<std::byte>(random_());
    auto buffer = device.create_buffer(size, BufferUsage::kStorage, "round trip").value();
    ASSERT_TRUE(device.write_buffer(buffer, 0, bytes).ok());
    EXPECT_EQ(device.read_buffer(buffer, 0, size).value(), bytes) << size << " bytes";
  }
  auto buffer = device.create_buffer(16, BufferUsage::kStorage, "small").value();
  std::vector<std::byte> too_much(20);
  Status write = device.write_buffer(buffer, 0, too_much);
  ASSERT_FALSE(write.ok());
  EXPECT_EQ(write.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_FALSE(device.read_buffer(buffer, 8, 12).ok());
}

// A tune's inputs are uploaded into a buffer created mapped and filled on every core, or above
// 64 MiB through the device's two staging buffers, chunk by chunk: any byte count comes back as
// given, zero-padded to whole words (past one staging buffer, and past both, so that the first
// is mapped again after its copy).
TEST_F(RuntimeTest, BuffersCreatedWithContentsHoldThemZeroPadded) {
  SCOPED_TRACE(trace());
  gpu::Device& device = shared_device();
  for (std::uint64_t size :
       {0ull, 1ull, 7ull, 65537ull, (40ull << 20) + 3, (64ull << 20) + 1, (130ull << 20) + 2}) {
    std::vector<std::byte> bytes(size);
    for (std::size_t i = 0; i < size; i += 8) {
      const std::uint64_t word = random_();
      std::memcpy(bytes.data() + i, &word, std::min<std::size_t>(8, size - i));
    }
    Result<gpu::Buffer> buffer = device.create_buffer_with_contents(bytes, "with contents");
    ASSERT_TRUE(buffer.ok()) << buffer.error().to_string();
    const std::uint64_t words = std::max<std::uint64_t>(4, (size + 3) / 4 * 4);
    ASSERT_EQ(buffer->size(), words);
    std::vector<std::byte> expected = bytes;
    expected.resize(words, std::byte{0});
    EXPECT_TRUE(device.read_buffer(*buffer, 0, words).value() == expected) << size << " bytes";
  }
}

// Certification reads a case's outputs and every guard in one mapping: each region comes back
// as written, in order, an empty one too, and a region past its buffer or without one is refused
// before anything is read.
TEST_F(RuntimeTest, ReadRegionsReadsEveryRegionOfSeveralBuffersInOneMapping) {
  SCOPED_TRACE(trace());
  gpu::Device& device = shared_device();
  std::vector<std::vector<std::byte>> written;
  std::vector<gpu::Buffer> buffers;
  for (std::uint64_t size : {4096ull, 65540ull}) {
    std::vector<std::byte> bytes(size);
    for (auto& byte : bytes) byte = static_cast<std::byte>(random_());
    buffers.push_back(device.create_buffer(size, BufferUsage::kStorage, "regions").value());
    ASSERT_TRUE(device.write_buffer(buffers.back(), 0, bytes).ok());
    written.push_back(std::move(bytes));
  }
  const std::vector<gpu::BufferRegion> regions = {
      {&buffers[1], 65280, 260}, {&buffers[0], 0, 256}, {&buffers[0], 8, 0}, {&buffers[1], 4, 13}};
  std::vector<std::size_t> visited;
  Status read = device.read_regions(regions, [&](std::size_t i, std::span<const std::byte> found) {
    visited.push_back(i);
    const std::size_t source = regions[i].buffer == &buffers[0] ? 0 : 1;
    const auto from = written[source].begin() + static_cast<std::ptrdiff_t>(regions[i].offset);
    EXPECT_EQ(std::vector<std::byte>(found.begin(), found.end()),
              std::vector<std::byte>(from, from + static_cast<std::ptrdiff_t>(regions[i].size)))
        << "region " << i;
  });
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(visited, (std::vector<std::size_t>{0, 1, 2, 3}));
  for (const gpu::BufferRegion& bad :
       {gpu::BufferRegion{&buffers[0], 4092, 8}, gpu::BufferRegion{&buffers[0], 2, 4},
        gpu::BufferRegion{nullptr, 0, 4}}) {
    const std::vector<gpu::BufferRegion> with_bad = {regions[1], bad};
    bool visited_any = false;
    Status refused = device.read_regions(
        with_bad, [&](std::size_t, std::span<const std::byte>) { visited_any = true; });
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().kind(), ErrorKind::kInvalidInput);
    EXPECT_FALSE(visited_any);
  }
}

TEST(RuntimeErrorsTest, BrokenShaderGivesCompileErrorWithLineAndColumn) {
  const std::string broken =
      "@group(0) @binding(0) var<storage, read_write> y: array<u32>;\n"
      "@compute @workgroup_size(64)\n"
      "fn main(@builtin(global_invocation_id) id: vec3u) {\n"
      "  y[id.x] = undefined_name + 1u;\n"
      "}\n";
  std::vector<KernelBinding> bindings = {{0, 0, BindingKind::kStorageReadWrite, "y"}};
  auto pipeline = shared_device().create_compute_pipeline(broken, "main", bindings, "broken");
  ASSERT_FALSE(pipeline.ok());
  EXPECT_EQ(pipeline.error().kind(), ErrorKind::kCompilation);
  const std::string& message = pipeline.error().message();
  EXPECT_NE(message.find("broken:4:13: error: unresolved value 'undefined_name'"),
            std::string::npos)
      << message;
}

TEST(RuntimeErrorsTest, OutOfRangeDispatchIsAValidationErrorNotACrash) {
  gpu::Device& device = shared_device();
  std::mt19937_64 random(1);
  auto x = device.create_buffer(64, BufferUsage::kStorage, "x").value();
  auto y = device.create_buffer(64, BufferUsage::kStorage, "y").value();
  auto params = device.create_buffer(8, BufferUsage::kUniform, "params").value();
  auto pipeline = device
                      .create_compute_pipeline(known_function_wgsl(64), "main",
                                               kKnownFunctionBindings, "known_function")
                      .value();
  std::array<BufferBinding, 3> bindings = {bind(0, x), bind(1, y), bind(2, params)};
  auto group = device.create_bind_group(pipeline, bindings).value();
  DispatchStep step{&pipeline, &group, {70000, 1, 1}};
  Status ran = device.run(std::span(&step, 1));
  ASSERT_FALSE(ran.ok());
  EXPECT_EQ(ran.error().kind(), ErrorKind::kValidation);
  EXPECT_NE(ran.error().message().find("70000"), std::string::npos) << ran.error().to_string();
  EXPECT_NE(ran.error().message().find("65535"), std::string::npos) << ran.error().to_string();
  // The device survives a validation error.
  DispatchStep fine{&pipeline, &group, {1, 1, 1}};
  EXPECT_TRUE(device.run(std::span(&fine, 1)).ok());
}

TEST(RuntimeErrorsTest, OutOfRangeBindingIsAValidationError) {
  gpu::Device& device = shared_device();
  auto x = device.create_buffer(64, BufferUsage::kStorage, "x").value();
  auto y = device.create_buffer(64, BufferUsage::kStorage, "y").value();
  auto params = device.create_buffer(8, BufferUsage::kUniform, "params").value();
  auto pipeline = device
                      .create_compute_pipeline(known_function_wgsl(64), "main",
                                               kKnownFunctionBindings, "known_function")
                      .value();
  std::array<BufferBinding, 3> past_the_end = {bind(0, x, 256, 64), bind(1, y), bind(2, params)};
  auto group = device.create_bind_group(pipeline, past_the_end);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.error().kind(), ErrorKind::kValidation);
  EXPECT_NE(group.error().to_string().find("binding buffers to known_function"), std::string::npos);

  std::array<BufferBinding, 2> missing = {bind(0, x), bind(1, y)};
  auto incomplete = device.create_bind_group(pipeline, missing);
  ASSERT_FALSE(incomplete.ok());
  EXPECT_EQ(incomplete.error().message(), "No buffer is given for binding 2 (params).");
}

TEST(RuntimeErrorsTest, WorkgroupLargerThanTheLimitIsAValidationError) {
  gpu::Device& device = shared_device();
  std::uint32_t too_large = device.adapter().limits.max_compute_invocations_per_workgroup * 2;
  auto pipeline = device.create_compute_pipeline(known_function_wgsl(too_large), "main",
                                                 kKnownFunctionBindings, "too_large");
  ASSERT_FALSE(pipeline.ok());
  EXPECT_NE(pipeline.error().kind(), ErrorKind::kRuntime) << pipeline.error().to_string();
}

TEST_F(RuntimeTest, DeviceHasTheAdaptersLimitsNotWebGpuDefaults) {
  gpu::Device& device = shared_device();
  const gpu::AdapterLimits& limits = device.adapter().limits;
  // WebGPU's defaults are 256 invocations and 16 KiB; lavapipe and the H200 offer more.
  EXPECT_GT(limits.max_compute_invocations_per_workgroup, 256u);
  EXPECT_GT(limits.max_compute_workgroup_storage_size, 16384u);
  std::uint32_t largest =
      std::min(limits.max_compute_invocations_per_workgroup, limits.max_compute_workgroup_size_x);
  expect_known_function(run_known_function(device, 5000, largest, random_));
}

TEST_F(RuntimeTest, TimingReturnsPlausiblePositiveSamples) {
  gpu::Device& device = shared_device();
  const std::uint32_t n = 1u << 18;
  std::vector<std::uint32_t> input(n, 7);
  auto x = device.create_buffer(n * 4ull, BufferUsage::kStorage, "x").value();
  auto y = device.create_buffer(n * 4ull, BufferUsage::kStorage, "y").value();
  auto params = device.create_buffer(8, BufferUsage::kUniform, "params").value();
  ASSERT_TRUE(device.write_buffer(params, 0, as_bytes_of(std::vector<std::uint32_t>{n, 1})).ok());
  auto pipeline = device
                      .create_compute_pipeline(known_function_wgsl(256), "main",
                                               kKnownFunctionBindings, "known_function")
                      .value();
  std::array<BufferBinding, 3> bindings = {bind(0, x), bind(1, y), bind(2, params)};
  auto group = device.create_bind_group(pipeline, bindings).value();
  DispatchStep step{&pipeline, &group, {n / 256, 1, 1}};
  gpu::TimingOptions options;
  options.samples = 7;
  Result<gpu::TimedRun> timed = device.time(std::span(&step, 1), options);
  ASSERT_TRUE(timed.ok()) << timed.error().to_string();
  const TimingSummary& summary = timed->summary;
  EXPECT_EQ(summary.sample_count, 7u);
  EXPECT_EQ(summary.source,
            device.has_gpu_timestamps() ? TimingSource::kGpuTimestamp : TimingSource::kHostClock);
  EXPECT_GT(summary.min_ns, 0u);
  EXPECT_LE(summary.min_ns, summary.median_ns);
  EXPECT_LE(summary.median_ns, static_cast<double>(summary.max_ns));
  // 2 MiB read + 2 MiB written cannot take less than 100 ns nor more than 10 s on any adapter.
  EXPECT_GT(summary.median_ns, 100.0);
  EXPECT_LT(summary.median_ns, 1e10);
  EXPECT_GE(timed->executions_per_sample, 1u);
  EXPECT_GT(timed->resolution_ns, 0u);
  EXPECT_GE(static_cast<double>(timed->executions_per_sample) * summary.median_ns, 0.5 * 200'000)
      << "a sample must cover the minimum sample duration";

  // A sampling budget shorter than one sample leaves the fewest samples it allows; a long one,
  // as many as asked for.
  options.samples = 9;
  options.sampling_budget = std::chrono::nanoseconds(1);
  Result<gpu::TimedRun> budgeted = device.time(std::span(&step, 1), options);
  ASSERT_TRUE(budgeted.ok()) << budgeted.error().to_string();
  EXPECT_EQ(budgeted->summary.sample_count, gpu::TimingOptions::kMinBudgetedSamples);
  options.sampling_budget = std::chrono::seconds(100);
  budgeted = device.time(std::span(&step, 1), options);
  ASSERT_TRUE(budgeted.ok()) << budgeted.error().to_string();
  EXPECT_EQ(budgeted->summary.sample_count, 9u);
}

// Each feature the device reports is usable: a wrong feature number in our declarations would
// enable a different feature, and these shaders would then fail to compile.
TEST_F(RuntimeTest, ReportedFeaturesAreReallyEnabled) {
  gpu::Device& device = shared_device();
  const gpu::AdapterInfo& info = device.adapter();
  if (device.has_feature("subgroups")) {
    const std::string wgsl =
        "enable subgroups;\n"
        "@group(0) @binding(0) var<storage, read_write> y: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(local_invocation_index) i: u32) {\n"
        "  y[i] = subgroupAdd(1u);\n"
        "}\n";
    std::vector<KernelBinding> bindings = {{0, 0, BindingKind::kStorageReadWrite, "y"}};
    auto pipeline = device.create_compute_pipeline(wgsl, "main", bindings, "subgroups");
    ASSERT_TRUE(pipeline.ok()) << pipeline.error().to_string();
    auto y = device.create_buffer(64 * 4, BufferUsage::kStorage, "y").value();
    std::array<BufferBinding, 1> binding = {bind(0, y)};
    auto group = device.create_bind_group(*pipeline, binding).value();
    DispatchStep step{&*pipeline, &group, {1, 1, 1}};
    ASSERT_TRUE(device.run(std::span(&step, 1)).ok());
    auto sizes = values_from_bytes<std::uint32_t>(device.read_buffer(y, 0, 64 * 4).value());
    for (std::uint32_t size : sizes) {
      EXPECT_GE(size, info.subgroup_min_size);
      EXPECT_LE(size, info.subgroup_max_size);
    }
  }
  if (device.has_feature("shader-f16")) {
    const std::string wgsl =
        "enable f16;\n"
        "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n"
        "@compute @workgroup_size(1)\n"
        "fn main() { let h: f16 = 1.5h; y[0] = f32(h * 2.0h); }\n";
    std::vector<KernelBinding> bindings = {{0, 0, BindingKind::kStorageReadWrite, "y"}};
    auto pipeline = device.create_compute_pipeline(wgsl, "main", bindings, "f16");
    EXPECT_TRUE(pipeline.ok()) << pipeline.error().to_string();
  }
  EXPECT_EQ(device.has_gpu_timestamps(), device.has_feature("timestamp-query"));
}

TEST(TopologyHashTest, StableWithinARunAndAcrossProcesses) {
  const gpu::AdapterInfo& first = shared_device().adapter();
  EXPECT_TRUE(is_hex_digest(first.topology_hash));
  EXPECT_EQ(first.topology_hash, gpu::compute_topology_hash(first));
  auto second = gpu::Device::open(gpu::RuntimeOptions{}).value();
  EXPECT_EQ(second->adapter().topology_hash, first.topology_hash);

  std::string command = std::string(WGSL_FORGE_CLI_PATH) + " adapters --json";
  for (int process = 0; process < 2; ++process) {
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string output;
    char buffer[4096];
    while (std::size_t count = std::fread(buffer, 1, sizeof buffer, pipe))
      output.append(buffer, count);
    EXPECT_EQ(WEXITSTATUS(::pclose(pipe)), 0);
    EXPECT_NE(output.find("\"topology_hash\": \"" + first.topology_hash + "\""), std::string::npos)
        << output;
  }
}

TEST(TopologyHashTest, ChangesWithWhatCanChangeAWinner) {
  gpu::AdapterInfo info = shared_device().adapter();
  const std::string base = gpu::compute_topology_hash(info);
  gpu::AdapterInfo other = info;
  other.identity.driver_info += "-next";
  EXPECT_NE(gpu::compute_topology_hash(other), base);
  other = info;
  other.limits.max_compute_workgroup_storage_size /= 2;
  EXPECT_NE(gpu::compute_topology_hash(other), base);
  other = info;
  other.toggles.push_back("enabled:disable_robustness");
  EXPECT_NE(gpu::compute_topology_hash(other), base);
  other = info;
  other.library_blake3 = std::string(64, '0');
  EXPECT_NE(gpu::compute_topology_hash(other), base);
  other = info;
  other.library_path = "/elsewhere/libwebgpu.so";  // where the library lies is not part of it
  EXPECT_EQ(gpu::compute_topology_hash(other), base);
}

// Reads past the end of a 4-word workgroup array. Dawn's clamps make every such read the array's
// last word; without them (bounds_checks false) the reads reach past it, into the array declared
// next or elsewhere, so that not all of them can equal that word. (Reads past a storage binding
// read zeros on lavapipe either way, by the driver's own robustness.) The toggle is also part of
// the topology hash.
TEST(BoundsChecksTest, SwitchingThemOffReachesDawnAndKeysTheAdapterApart) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with WGSL_FORGE_TEST_SEED)");
  std::mt19937 random(static_cast<std::uint32_t>(seed));
  std::vector<std::uint32_t> data(12);
  for (std::uint32_t& word : data) word = static_cast<std::uint32_t>(random()) | 1u;
  data[3] &= ~1u;  // every other word is odd: the array's last word is unique
  const std::string wgsl =
      "@group(0) @binding(0) var<storage, read> x: array<u32>;\n"
      "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
      "var<workgroup> four: array<u32, 4>;\n"
      "var<workgroup> after: array<u32, 8>;\n"
      "@compute @workgroup_size(8)\n"
      "fn main(@builtin(local_invocation_index) i: u32) {\n"
      "  if (i < 4u) { four[i] = x[i]; }\n"
      "  after[i] = x[4u + i];\n"
      "  workgroupBarrier();\n"
      "  y[i] = four[4u + i];\n"
      "}\n";
  const std::vector<KernelBinding> bindings = {{0, 0, BindingKind::kStorageRead, "x"},
                                               {0, 1, BindingKind::kStorageReadWrite, "y"}};
  std::map<bool, std::string> topology;
  for (const bool bounds_checks : {true, false}) {
    SCOPED_TRACE(bounds_checks ? "with bounds checks" : "without bounds checks");
    gpu::RuntimeOptions options;
    options.bounds_checks = bounds_checks;
    auto device = gpu::Device::open(options).value();
    topology[bounds_checks] = device->adapter().topology_hash;
    auto pipeline = device->create_compute_pipeline(wgsl, "main", bindings, "past the end").value();
    auto x = device->create_buffer(data.size() * 4, BufferUsage::kStorage, "x").value();
    auto y = device->create_buffer(8 * 4, BufferUsage::kStorage, "y").value();
    ASSERT_TRUE(device->write_buffer(x, 0, as_bytes_of(data)).ok());
    ASSERT_TRUE(
        device->write_buffer(y, 0, as_bytes_of(std::vector<std::uint32_t>(8, kPoison))).ok());
    std::array<BufferBinding, 2> group_bindings = {bind(0, x), bind(1, y)};
    auto group = device->create_bind_group(pipeline, group_bindings).value();
    DispatchStep step{&pipeline, &group, {1, 1, 1}};
    ASSERT_TRUE(device->run(std::span(&step, 1)).ok());
    const auto reads = values_from_bytes<std::uint32_t>(device->read_buffer(y, 0, 8 * 4).value());
    const auto clamped = std::count(reads.begin(), reads.end(), data[3]);
    if (bounds_checks) {
      EXPECT_EQ(clamped, 8) << "every read past the array is clamped to its last word";
    } else {
      EXPECT_LT(clamped, 8) << "the reads past the array were clamped: the toggle is not in force";
    }
  }
  EXPECT_NE(topology[true], topology[false]);
}

TEST(DeviceLossTest, LostDeviceFailsEveryLaterCallCleanly) {
  auto device = gpu::Device::open(gpu::RuntimeOptions{}).value();
  auto buffer = device->create_buffer(64, BufferUsage::kStorage, "before loss").value();
  EXPECT_FALSE(device->lost_reason().has_value());
  ASSERT_TRUE(device->force_loss_for_testing("simulated driver crash").ok());
  ASSERT_TRUE(device->lost_reason().has_value());
  EXPECT_NE(device->lost_reason()->find("simulated driver crash"), std::string::npos);

  auto read = device->read_buffer(buffer, 0, 64);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().kind(), ErrorKind::kDeviceLost);
  EXPECT_NE(read.error().message().find("The GPU device is lost"), std::string::npos)
      << read.error().to_string();
  auto created = device->create_buffer(64, BufferUsage::kStorage, "after loss");
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().message().find("simulated driver crash"), std::string::npos);
  auto pipeline = device->create_compute_pipeline(known_function_wgsl(64), "main",
                                                  kKnownFunctionBindings, "after loss");
  EXPECT_FALSE(pipeline.ok());
}

TEST(WatchdogTest, AKernelThatRunsTooLongIsAnErrorNotAHang) {
  auto device = gpu::Device::open(gpu::RuntimeOptions{}).value();
  // Each invocation runs a dependent loop of params.iterations steps. Nothing can preempt a
  // kernel through WebGPU: the wait gives up, and the device finishes the work before it is
  // destroyed. So first find a loop that lasts about half a second on this adapter.
  const std::string slow =
      "struct Params { iterations: u32 }\n"
      "@group(0) @binding(0) var<storage, read_write> y: array<u32>;\n"
      "@group(0) @binding(1) var<uniform> params: Params;\n"
      "@compute @workgroup_size(64)\n"
      "fn main(@builtin(global_invocation_id) id: vec3u) {\n"
      "  var acc = y[id.x];\n"
      "  for (var i = 0u; i < params.iterations; i++) { acc = acc * 1664525u + 1013904223u; }\n"
      "  y[id.x] = acc;\n"
      "}\n";
  std::vector<KernelBinding> bindings = {{0, 0, BindingKind::kStorageReadWrite, "y"},
                                         {0, 1, BindingKind::kUniform, "params"}};
  auto pipeline = device->create_compute_pipeline(slow, "main", bindings, "slow").value();
  auto y = device->create_buffer(1 << 16, BufferUsage::kStorage, "y").value();
  auto params = device->create_buffer(4, BufferUsage::kUniform, "params").value();
  std::array<BufferBinding, 2> binding = {bind(0, y), bind(1, params)};
  auto group = device->create_bind_group(pipeline, binding).value();
  DispatchStep step{&pipeline, &group, {256, 1, 1}};
  auto run_for = [&](std::uint32_t iterations) {
    std::vector<std::uint32_t> words = {iterations};
    EXPECT_TRUE(device->write_buffer(params, 0, as_bytes_of(words)).ok());
    auto start = std::chrono::steady_clock::now();
    Status ran = device->run(std::span(&step, 1));
    return std::make_pair(std::move(ran), std::chrono::steady_clock::now() - start);
  };
  std::uint32_t iterations = 1000;
  while (run_for(iterations).second < std::chrono::milliseconds(500) && iterations < (1u << 30)) {
    iterations *= 2;
  }
  device->set_wait_timeout(std::chrono::milliseconds(20));
  auto [ran, waited] = run_for(iterations);
  ASSERT_FALSE(ran.ok()) << "a " << iterations << "-step loop finished within 20 ms";
  EXPECT_EQ(ran.error().kind(), ErrorKind::kTimeout);
  EXPECT_NE(ran.error().message().find("Timed out after 20 ms"), std::string::npos)
      << ran.error().to_string();
  EXPECT_LT(waited, std::chrono::milliseconds(400));
  // The kernel cannot be preempted; waiting for the device to drain brings it back to work.
  ASSERT_TRUE(device->wait_for_idle(std::chrono::minutes(2)).ok());
  EXPECT_EQ(device->wait_timeout(), std::chrono::milliseconds(20));
  device->set_wait_timeout(std::chrono::minutes(2));
  auto [after, took] = run_for(1);
  EXPECT_TRUE(after.ok()) << after.error().to_string();
}

TEST(LibraryLoadingTest, MissingOrForeignLibraryIsAClearError) {
  gpu::RuntimeOptions options;
  options.library_path = "/nonexistent/libwebgpu.so";
  auto missing = gpu::Device::open(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(missing.error().message().find("/nonexistent/libwebgpu.so (from --webgpu-lib) does "
                                           "not exist"),
            std::string::npos);

  options.library_path = WGSL_FORGE_CLI_PATH;  // a file, but not a shared library
  auto not_a_library = gpu::Device::open(options);
  ASSERT_FALSE(not_a_library.ok());
  EXPECT_NE(not_a_library.error().message().find("Cannot load the WebGPU library"),
            std::string::npos);

  options.library_path = "/lib/x86_64-linux-gnu/libz.so.1";  // a library without webgpu.h
  if (std::filesystem::exists(*options.library_path)) {
    auto foreign = gpu::Device::open(options);
    ASSERT_FALSE(foreign.ok());
    EXPECT_NE(foreign.error().message().find("does not export the webgpu.h functions"),
              std::string::npos);
  }
}

TEST(ResolveWebGpuLibraryTest, LooksBesideTheWgslForgeCodeThenInTheBuildTree) {
  namespace fs = std::filesystem;
  // This test binary links the static layers, so the wgsl_forge code is the binary itself.
  const fs::path dir = fs::weakly_canonical(fs::read_symlink("/proc/self/exe")).parent_path();
  gpu::WebGpuLibrarySearch search = gpu::webgpu_library_search(std::nullopt);
  EXPECT_FALSE(search.explicit_path);
  ASSERT_EQ(search.installed.size(), 2u);
  EXPECT_EQ(search.installed[0], dir / "wgsl_forge/libwebgpu_wrapper.so");
  EXPECT_EQ(search.installed[1].filename(), "libwebgpu_wrapper.so");
  EXPECT_EQ(search.installed[1].parent_path().filename(), "wgsl_forge");
  ASSERT_FALSE(search.build_tree.empty());
  EXPECT_EQ(search.build_tree[0], fs::path(WGSL_FORGE_SOURCE_DIR) /
                                      "node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so");

  testing::TempDir temp;
  const fs::path installed = temp.path() / "installed.so";
  const fs::path built = temp.path() / "built.so";
  testing::write_text(installed, "x");
  testing::write_text(built, "x");
  search.variable.reset();
  search.installed = {temp.path() / "missing.so", installed};
  search.build_tree = {built};
  EXPECT_EQ(gpu::resolve_webgpu_library(search).value(), installed);
  search.installed = {temp.path() / "missing.so"};
  EXPECT_EQ(gpu::resolve_webgpu_library(search).value(), built);
  search.installed = {installed};
  search.variable = built;  // the variable comes first, and the option before it
  EXPECT_EQ(gpu::resolve_webgpu_library(search).value(), built);
  search.explicit_path = installed;
  EXPECT_EQ(gpu::resolve_webgpu_library(search).value(), installed);

  search.explicit_path.reset();
  search.variable = temp.path() / "missing.so";  // a variable naming nothing is not skipped
  auto missing = gpu::resolve_webgpu_library(search);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(missing.error().message().find((temp.path() / "missing.so").string() +
                                           " (from WGSL_FORGE_WEBGPU_LIB) does not exist"),
            std::string::npos);
}

TEST(ResolveWebGpuLibraryTest, NothingFoundIsOneErrorNamingEveryPlaceTried) {
  gpu::WebGpuLibrarySearch search;
  search.installed = {"/nowhere/lib/wgsl_forge/libwebgpu_wrapper.so",
                      "/nowhere/lib/../lib/wgsl_forge/libwebgpu_wrapper.so"};
  search.build_tree = {"/nowhere/src/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so"};
  auto missing = gpu::resolve_webgpu_library(search);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kRuntime);
  EXPECT_EQ(missing.error().message(),
            "No WebGPU library is found (--webgpu-lib or RuntimeOptions::library_path: not set; "
            "WGSL_FORGE_WEBGPU_LIB: not set; installed beside the wgsl_forge code: "
            "/nowhere/lib/wgsl_forge/libwebgpu_wrapper.so, "
            "/nowhere/lib/../lib/wgsl_forge/libwebgpu_wrapper.so; build tree: "
            "/nowhere/src/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so). Set "
            "WGSL_FORGE_WEBGPU_LIB to Dawn's libwebgpu_wrapper.so, install wgsl-forge with cmake "
            "--install (it copies Dawn), or run scripts/setup.sh.");

  search.installed.clear();  // the code's own file unknown
  EXPECT_NE(gpu::resolve_webgpu_library(search).error().message().find(
                "installed beside the wgsl_forge code: none;"),
            std::string::npos);
}

// The installed layout, <prefix>/bin/wgsl-forge and <prefix>/lib/wgsl_forge/: the tool finds
// Dawn there before the build tree's, with no variable set.
TEST(ResolveWebGpuLibraryTest, TheToolFindsDawnInItsInstalledPrefix) {
  namespace fs = std::filesystem;
  gpu::WebGpuLibrarySearch search = gpu::webgpu_library_search(std::nullopt);
  search.installed.clear();
  search.variable.reset();
  Result<fs::path> dawn = gpu::resolve_webgpu_library(search);
  ASSERT_TRUE(dawn.ok()) << dawn.error().to_string();

  testing::TempDir prefix;
  const fs::path installed = prefix.path() / "lib/wgsl_forge/libwebgpu_wrapper.so";
  fs::create_directories(prefix.path() / "bin");
  fs::create_directories(installed.parent_path());
  // Copies, not links: the loader reports a library's canonical path.
  fs::copy_file(WGSL_FORGE_CLI_PATH, prefix.path() / "bin/wgsl-forge");
  fs::copy_file(*dawn, installed);
  const std::string command = "env -u WGSL_FORGE_WEBGPU_LIB " +
                              (prefix.path() / "bin/wgsl-forge").string() + " adapters --json";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (std::size_t count = std::fread(buffer, 1, sizeof buffer, pipe))
    output.append(buffer, count);
  EXPECT_EQ(WEXITSTATUS(::pclose(pipe)), 0);
  EXPECT_NE(output.find("\"library_path\": \"" + fs::weakly_canonical(installed).string() + "\""),
            std::string::npos)
      << output;
}

TEST(LibraryLoadingTest, UnknownBackendIsBadInput) {
  gpu::RuntimeOptions options;
  options.backend = "glide";
  auto device = gpu::Device::open(options);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message(), "Unknown backend 'glide' (known: vulkan, any).");
}

}  // namespace
}  // namespace wgsl_forge
