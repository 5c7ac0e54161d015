// Device::create_compute_pipelines against the real adapter: many pipelines requested at once,
// some sharing a shader module, all usable; a request that fails among valid ones (a compile
// error before anything is requested, a validation error from Dawn's asynchronous creation)
// gives the one error of that request; a lost device is an error, not a hang.

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_test_support.hpp"
#include "support/test_manifests.hpp"

namespace wgsl_forge {
namespace {

using gpu::BufferBinding;
using gpu::BufferUsage;
using gpu::ComputePipelineRequest;
using testing::as_bytes_of;
using testing::shared_device;
using testing::values_from_bytes;

const std::vector<KernelBinding> kBindings = {
    {0, 0, BindingKind::kStorageRead, "x"},
    {0, 1, BindingKind::kStorageReadWrite, "y"},
};

// One module with an entry point per multiplier: scale_<m> writes y[i] = x[i] * m + i.
std::string scaling_wgsl(std::uint32_t workgroup_size, const std::vector<std::uint32_t>& factors) {
  std::string wgsl =
      "@group(0) @binding(0) var<storage, read> x: array<u32>;\n"
      "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n";
  for (std::uint32_t factor : factors) {
    wgsl += "@compute @workgroup_size(" + std::to_string(workgroup_size) + ")\nfn scale_" +
            std::to_string(factor) +
            "(@builtin(global_invocation_id) id: vec3u) {\n"
            "  if (id.x >= arrayLength(&y)) { return; }\n"
            "  y[id.x] = x[id.x] * " +
            std::to_string(factor) + "u + id.x;\n}\n";
  }
  return wgsl;
}

const std::string kBrokenWgsl =
    "@group(0) @binding(0) var<storage, read> x: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) id: vec3u) {\n"
    "  y[id.x] = undefined_name + 1u;\n"
    "}\n";

// The requests' strings, kept alive for the views in the requests.
struct RequestTexts {
  std::vector<std::string> wgsl;
  std::vector<std::string> entry_points;
  std::vector<std::string> labels;
  std::vector<std::uint32_t> factors;
};

// 4 modules (workgroup sizes 32 to 256) of 3 entry points each: 12 pipelines.
RequestTexts scaling_texts() {
  RequestTexts texts;
  std::uint32_t factor = 3;
  for (std::uint32_t workgroup_size : {32u, 64u, 128u, 256u}) {
    std::vector<std::uint32_t> factors = {factor, factor + 2, factor + 4};
    factor += 6;
    texts.wgsl.push_back(scaling_wgsl(workgroup_size, factors));
    for (std::uint32_t f : factors) {
      texts.entry_points.push_back("scale_" + std::to_string(f));
      texts.labels.push_back("scaling" + std::to_string(workgroup_size) + ".scale_" +
                             std::to_string(f));
      texts.factors.push_back(f);
    }
  }
  return texts;
}

std::vector<ComputePipelineRequest> requests_of(const RequestTexts& texts) {
  std::vector<ComputePipelineRequest> requests;
  for (std::size_t i = 0; i < texts.labels.size(); ++i) {
    requests.push_back(ComputePipelineRequest{texts.wgsl[i / 3], texts.entry_points[i], kBindings,
                                              texts.labels[i], "testing a batch"});
  }
  return requests;
}

std::uint32_t workgroup_size_of(std::size_t request) { return 32u << (request / 3); }

TEST(PipelineBatchTest, ManyPipelinesCreatedAtOnceAreAllUsableAndMatchTheCpu) {
  gpu::Device& device = shared_device();
  const RequestTexts texts = scaling_texts();
  const std::vector<ComputePipelineRequest> requests = requests_of(texts);
  Result<std::vector<gpu::ComputePipeline>> pipelines = device.create_compute_pipelines(requests);
  ASSERT_TRUE(pipelines.ok()) << pipelines.error().to_string();
  ASSERT_EQ(pipelines->size(), requests.size());

  std::mt19937_64 random(testing::test_seed());
  const std::uint32_t n = 1000 + static_cast<std::uint32_t>(random() % 1000);
  std::vector<std::uint32_t> input(n);
  for (std::uint32_t& value : input) value = static_cast<std::uint32_t>(random());
  auto x = device.create_buffer(n * 4, BufferUsage::kStorage, "x").value();
  auto y = device.create_buffer(n * 4, BufferUsage::kStorage, "y").value();
  ASSERT_TRUE(device.write_buffer(x, 0, as_bytes_of(input)).ok());
  for (std::size_t i = 0; i < pipelines->size(); ++i) {
    const gpu::ComputePipeline& pipeline = (*pipelines)[i];
    EXPECT_EQ(pipeline.label(), texts.labels[i]);
    EXPECT_EQ(pipeline.bindings(), kBindings);
    std::array<BufferBinding, 2> buffers = {BufferBinding{0, &x, 0, std::nullopt},
                                            BufferBinding{1, &y, 0, std::nullopt}};
    auto group = device.create_bind_group(pipeline, buffers).value();
    const std::uint32_t workgroups = (n + workgroup_size_of(i) - 1) / workgroup_size_of(i);
    gpu::DispatchStep step{&pipeline, &group, {workgroups, 1, 1}};
    Status ran = device.run(std::span(&step, 1));
    ASSERT_TRUE(ran.ok()) << ran.error().to_string();
    auto output = values_from_bytes<std::uint32_t>(device.read_buffer(y, 0, n * 4).value());
    std::size_t mismatches = 0;
    for (std::uint32_t e = 0; e < n; ++e) {
      if (output[e] != input[e] * texts.factors[i] + e && mismatches++ < 3) {
        ADD_FAILURE() << texts.labels[i] << " element " << e << ": expected "
                      << input[e] * texts.factors[i] + e << ", got " << output[e];
      }
    }
    EXPECT_EQ(mismatches, 0u) << texts.labels[i];
  }
}

TEST(PipelineBatchTest, AShaderThatDoesNotCompileAmongValidOnesGivesOneErrorNamingIt) {
  gpu::Device& device = shared_device();
  const RequestTexts texts = scaling_texts();
  std::vector<ComputePipelineRequest> requests = requests_of(texts);
  requests.insert(requests.begin() + 4, ComputePipelineRequest{kBrokenWgsl, "main", kBindings,
                                                               "broken.main", "preparing broken"});
  Result<std::vector<gpu::ComputePipeline>> pipelines = device.create_compute_pipelines(requests);
  ASSERT_FALSE(pipelines.ok());
  const Error& error = pipelines.error();
  EXPECT_EQ(error.kind(), ErrorKind::kCompilation);
  EXPECT_NE(error.message().find("WGSL of broken.main does not compile:\n"
                                 "broken.main:5:13: error: unresolved value 'undefined_name'"),
            std::string::npos)
      << error.to_string();
  EXPECT_NE(error.to_string().find("creating compute pipeline broken.main"), std::string::npos)
      << error.to_string();
  EXPECT_NE(error.to_string().find("preparing broken"), std::string::npos) << error.to_string();
  EXPECT_EQ(error.to_string().find("scaling"), std::string::npos) << error.to_string();

  // What was requested before the broken shader was released, not left pending: the same
  // pipelines build again and the device still runs them.
  Result<std::vector<gpu::ComputePipeline>> again =
      device.create_compute_pipelines(requests_of(texts));
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->size(), texts.labels.size());
}

TEST(PipelineBatchTest, AWorkgroupOverTheLimitIsTheValidationErrorOfItsPipelineOnly) {
  gpu::Device& device = shared_device();
  const RequestTexts texts = scaling_texts();
  const std::uint32_t too_large = device.adapter().limits.max_compute_invocations_per_workgroup * 2;
  const std::string too_large_wgsl = scaling_wgsl(too_large, {7});
  std::vector<ComputePipelineRequest> requests = requests_of(texts);
  // The module compiles (WGSL does not know the device's limits): Dawn's asynchronous creation
  // refuses the pipeline, after the ones before it were requested.
  requests.insert(requests.begin() + 7,
                  ComputePipelineRequest{too_large_wgsl, "scale_7", kBindings, "too_large.scale_7",
                                         "preparing too_large"});
  Result<std::vector<gpu::ComputePipeline>> pipelines = device.create_compute_pipelines(requests);
  ASSERT_FALSE(pipelines.ok());
  const std::string text = pipelines.error().to_string();
  EXPECT_EQ(pipelines.error().kind(), ErrorKind::kValidation) << text;
  EXPECT_EQ(pipelines.error().message().rfind("Validation error: ", 0), 0u) << text;
  EXPECT_NE(text.find(std::to_string(too_large)), std::string::npos) << text;
  EXPECT_NE(text.find("creating compute pipeline too_large.scale_7"), std::string::npos) << text;
  EXPECT_NE(text.find("preparing too_large"), std::string::npos) << text;
  EXPECT_EQ(text.find("creating compute pipeline scaling"), std::string::npos) << text;
}

TEST(PipelineBatchTest, ALostDeviceIsAnErrorNotAHang) {
  auto device = gpu::Device::open(gpu::RuntimeOptions{});
  ASSERT_TRUE(device.ok()) << device.error().to_string();
  ASSERT_TRUE((*device)->force_loss_for_testing("simulated driver crash").ok());
  const RequestTexts texts = scaling_texts();
  Result<std::vector<gpu::ComputePipeline>> pipelines =
      (*device)->create_compute_pipelines(requests_of(texts));
  ASSERT_FALSE(pipelines.ok());
  EXPECT_EQ(pipelines.error().kind(), ErrorKind::kDeviceLost);
  EXPECT_NE(pipelines.error().message().find("simulated driver crash"), std::string::npos)
      << pipelines.error().to_string();
}

}  // namespace
}  // namespace wgsl_forge
