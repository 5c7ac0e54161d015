// Times one kernel through the runtime: y = 2x + 1 over N floats, with a naive schedule (scalar,
// 256 invocations, one element each) and a vectorised one (vec4, 128 invocations, a grid-stride
// loop over a capped grid). Checks every output element, then prints time and bandwidth.
//
//   runtime_probe [--elements N] [--samples S] [--buffer-elements B] [--grid-caps C1,C2,...]
//                 [--warmup-runs W] [--warmup-ms MS]
//
// Defaults: 2^25 elements, 20 samples, buffers of exactly N floats. With B > N the buffers hold B
// floats and the kernel reads and writes the first N: the same work in larger allocations, which
// separates the cost of a buffer's size from the cost of the bytes moved. --grid-caps times the
// vectorised kernel with each grid cap in turn (0: one invocation per vec4, no loop), to see how
// the order in which the grid walks memory changes the bandwidth.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wgsl_forge/gpu.hpp"

namespace {

using namespace wgsl_forge;

struct ProbeSchedule {
  const char* name;
  std::uint32_t workgroup_size;
  bool vec4;
  std::uint32_t max_workgroups;  // grid cap; invocations loop over the rest
};

std::string affine_wgsl(const ProbeSchedule& schedule) {
  const std::string type = schedule.vec4 ? "vec4f" : "f32";
  return "struct Params { count: u32, invocations: u32 }\n"
         "@group(0) @binding(0) var<storage, read> x: array<" +
         type +
         ">;\n"
         "@group(0) @binding(1) var<storage, read_write> y: array<" +
         type +
         ">;\n"
         "@group(0) @binding(2) var<uniform> params: Params;\n"
         "@compute @workgroup_size(" +
         std::to_string(schedule.workgroup_size) +
         ")\n"
         "fn main(@builtin(global_invocation_id) id: vec3u, @builtin(num_workgroups) n: vec3u) {\n"
         "  let first = id.x + id.y * n.x * " +
         std::to_string(schedule.workgroup_size) +
         "u;\n"
         "  for (var i = first; i < params.count; i += params.invocations) {\n"
         "    y[i] = 2.0 * x[i] + 1.0;\n"
         "  }\n"
         "}\n";
}

int fail(const Error& error) {
  std::fprintf(stderr, "runtime_probe: %s\n", error.to_string().c_str());
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t elements = 1ull << 25;
  std::uint32_t samples = 20;
  std::uint64_t buffer_elements = 0;
  std::vector<std::uint32_t> grid_caps;
  std::uint32_t warmup_runs = gpu::TimingOptions{}.warmup_runs;
  auto warmup_duration = gpu::TimingOptions{}.warmup_duration;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--elements") == 0) elements = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--buffer-elements") == 0)
      buffer_elements = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--warmup-runs") == 0)
      warmup_runs = static_cast<std::uint32_t>(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--warmup-ms") == 0)
      warmup_duration = std::chrono::milliseconds(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--grid-caps") == 0) {
      for (char* cap = std::strtok(argv[i + 1], ","); cap; cap = std::strtok(nullptr, ",")) {
        grid_caps.push_back(static_cast<std::uint32_t>(std::strtoul(cap, nullptr, 10)));
      }
    }
    if (std::strcmp(argv[i], "--samples") == 0)
      samples = static_cast<std::uint32_t>(std::atoi(argv[i + 1]));
  }
  elements = elements / 4 * 4;
  auto device = gpu::Device::open(gpu::RuntimeOptions{});
  if (!device) return fail(device.error());
  gpu::Device& gpu_device = **device;
  const gpu::AdapterInfo& info = gpu_device.adapter();
  std::printf("adapter: %s (%s %s), topology %s\n", info.identity.name.c_str(),
              info.identity.driver.c_str(), info.identity.driver_info.c_str(),
              info.topology_hash.c_str());

  std::vector<float> input(elements);
  for (std::uint64_t i = 0; i < elements; ++i)
    input[i] = static_cast<float>(i % 1000) * 0.5f - 7.0f;
  const std::uint64_t bytes = elements * sizeof(float);
  const std::uint64_t buffer_bytes = std::max(elements, buffer_elements) * sizeof(float);
  std::printf("%llu elements in buffers of %llu bytes\n", static_cast<unsigned long long>(elements),
              static_cast<unsigned long long>(buffer_bytes));
  auto x = gpu_device.create_buffer(buffer_bytes, gpu::BufferUsage::kStorage, "x");
  auto y = gpu_device.create_buffer(buffer_bytes, gpu::BufferUsage::kStorage, "y");
  auto params = gpu_device.create_buffer(8, gpu::BufferUsage::kUniform, "params");
  if (!x) return fail(x.error());
  if (!y) return fail(y.error());
  if (!params) return fail(params.error());
  if (auto written = gpu_device.write_buffer(*x, 0, std::as_bytes(std::span(input))); !written) {
    return fail(written.error());
  }

  std::vector<ProbeSchedule> schedules = {{"naive   scalar wg=256", 256, false, 0},
                                          {"tuned   vec4   wg=128", 128, true, 8192}};
  for (std::uint32_t cap : grid_caps)
    schedules.push_back({"capped  vec4   wg=256", 256, true, cap});
  const std::uint32_t max_per_dimension = info.limits.max_compute_workgroups_per_dimension;
  for (const ProbeSchedule& schedule : schedules) {
    const std::uint64_t items = schedule.vec4 ? elements / 4 : elements;
    std::uint64_t workgroups = (items + schedule.workgroup_size - 1) / schedule.workgroup_size;
    if (schedule.max_workgroups != 0)
      workgroups = std::min<std::uint64_t>(workgroups, schedule.max_workgroups);
    auto grid = gpu::plan_workgroup_grid(workgroups, max_per_dimension);
    if (!grid) return fail(grid.error());
    std::uint32_t values[2] = {static_cast<std::uint32_t>(items),
                               static_cast<std::uint32_t>(grid->count() * schedule.workgroup_size)};
    if (auto written = gpu_device.write_buffer(*params, 0, std::as_bytes(std::span(values)));
        !written) {
      return fail(written.error());
    }
    std::vector<float> poison(elements, -12345.0f);
    if (auto written = gpu_device.write_buffer(*y, 0, std::as_bytes(std::span(poison))); !written) {
      return fail(written.error());
    }
    std::vector<KernelBinding> bindings = {{0, 0, BindingKind::kStorageRead, "x"},
                                           {0, 1, BindingKind::kStorageReadWrite, "y"},
                                           {0, 2, BindingKind::kUniform, "params"}};
    auto pipeline =
        gpu_device.create_compute_pipeline(affine_wgsl(schedule), "main", bindings, "affine");
    if (!pipeline) return fail(pipeline.error());
    gpu::BufferBinding buffers[3];
    buffers[0].binding = 0;
    buffers[0].buffer = &*x;
    buffers[1].binding = 1;
    buffers[1].buffer = &*y;
    buffers[2].binding = 2;
    buffers[2].buffer = &*params;
    auto group = gpu_device.create_bind_group(*pipeline, buffers);
    if (!group) return fail(group.error());
    gpu::DispatchStep step{&*pipeline, &*group, *grid};
    if (auto ran = gpu_device.run(std::span(&step, 1)); !ran) return fail(ran.error());
    auto output = gpu_device.read_buffer(*y, 0, bytes);
    if (!output) return fail(output.error());
    std::vector<float> result(elements);
    std::memcpy(result.data(), output->data(), bytes);
    for (std::uint64_t i = 0; i < elements; ++i) {
      if (result[i] != 2.0f * input[i] + 1.0f) {
        std::fprintf(stderr, "runtime_probe: element %llu is %g, expected %g\n",
                     static_cast<unsigned long long>(i), result[i], 2.0f * input[i] + 1.0f);
        return 1;
      }
    }
    gpu::TimingOptions options;
    options.samples = samples;
    options.warmup_runs = warmup_runs;
    options.warmup_duration = warmup_duration;
    auto timed = gpu_device.time(std::span(&step, 1), options);
    if (!timed) return fail(timed.error());
    const double seconds = timed->summary.median_ns * 1e-9;
    std::printf(
        "%s  grid %ux%u  median %.1f us (p10 %.1f, p90 %.1f, %s, %u runs/sample, "
        "resolution %llu ns)  %.1f GB/s (read + write)\n",
        schedule.name, grid->x, grid->y, timed->summary.median_ns / 1e3,
        timed->summary.p10_ns / 1e3, timed->summary.p90_ns / 1e3,
        timing_source_name(timed->summary.source), timed->executions_per_sample,
        static_cast<unsigned long long>(timed->resolution_ns),
        2.0 * static_cast<double>(bytes) / seconds / 1e9);
  }
  return 0;
}
