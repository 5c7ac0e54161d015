// bench: tuned and default schedules of builtin kernels against the adapter's copy ceiling.
//
// The ceiling is the best of a few vectorised copy kernels (vec4 loads and stores, a capped
// grid with a grid-stride loop) moving the same number of bytes as the kernel must move
// (half read, half written); a kernel at 100 % moves its bytes as fast as this adapter copies.

#include <algorithm>

#include "util/try.hpp"
#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

namespace {

std::string copy_wgsl(std::uint32_t workgroup_size) {
  const std::string wg = std::to_string(workgroup_size);
  return "struct Params { vectors: u32, invocations: u32 }\n"
         "@group(0) @binding(0) var<uniform> params: Params;\n"
         "@group(0) @binding(1) var<storage, read> x: array<vec4u>;\n"
         "@group(0) @binding(2) var<storage, read_write> y: array<vec4u>;\n"
         "@compute @workgroup_size(" +
         wg +
         ")\n"
         "fn copy(@builtin(global_invocation_id) id: vec3u, @builtin(num_workgroups) n: vec3u) {\n"
         "  for (var i = id.x + id.y * n.x * " +
         wg +
         "u; i < params.vectors; i += params.invocations) {\n"
         "    y[i] = x[i];\n"
         "  }\n"
         "}\n";
}

Result<std::vector<PassTime>> time_passes(gpu::Device& device, const BoundPlan& bound,
                                          const gpu::TimingOptions& timing) {
  const std::vector<gpu::DispatchStep>& steps = bound.steps();
  std::vector<PassTime> passes;
  double before = 0;
  for (std::size_t count = 1; count <= steps.size(); ++count) {
    WF_TRY_ASSIGN(gpu::TimedRun timed, device.time(std::span(steps.data(), count), timing));
    const kernels::PassPlan& pass = bound.plan().passes[count - 1];
    const double cumulative = timed.summary.median_ns;
    passes.push_back(
        {pass.entry_point, pass.workgroups, std::max(0.0, cumulative - before), cumulative});
    before = cumulative;
  }
  return passes;
}

}  // namespace

Result<CopyCeiling> measure_copy_ceiling(gpu::Device& device, std::uint64_t bytes,
                                         const gpu::TimingOptions& timing) {
  const std::uint64_t vectors = std::max<std::uint64_t>(1, bytes / 2 / 16);
  WF_TRY_ASSIGN(gpu::Buffer x,
                device.create_buffer(vectors * 16, gpu::BufferUsage::kStorage, "copy x"));
  WF_TRY_ASSIGN(gpu::Buffer y,
                device.create_buffer(vectors * 16, gpu::BufferUsage::kStorage, "copy y"));
  WF_TRY_ASSIGN(gpu::Buffer params,
                device.create_buffer(16, gpu::BufferUsage::kUniform, "copy params"));
  std::vector<KernelBinding> bindings = {{0, 0, BindingKind::kUniform, "params"},
                                         {0, 1, BindingKind::kStorageRead, "x"},
                                         {0, 2, BindingKind::kStorageReadWrite, "y"}};
  CopyCeiling best;
  for (std::uint32_t workgroup_size : {128u, 256u}) {
    WF_TRY_ASSIGN(
        gpu::ComputePipeline pipeline,
        device.create_compute_pipeline(copy_wgsl(workgroup_size), "copy", bindings, "copy"));
    for (std::uint64_t cap : {4096ull, 8192ull, 16384ull, 65535ull}) {
      const std::uint64_t workgroups =
          std::min<std::uint64_t>(cap, (vectors + workgroup_size - 1) / workgroup_size);
      WF_TRY_ASSIGN(gpu::WorkgroupGrid grid,
                    gpu::plan_workgroup_grid(
                        workgroups, device.adapter().limits.max_compute_workgroups_per_dimension));
      const std::uint32_t words[4] = {static_cast<std::uint32_t>(vectors),
                                      static_cast<std::uint32_t>(grid.count() * workgroup_size), 0,
                                      0};
      WF_TRY(device.write_buffer(params, 0, std::as_bytes(std::span(words))));
      gpu::BufferBinding bound[3];
      bound[0].binding = 0;
      bound[0].buffer = &params;
      bound[1].binding = 1;
      bound[1].buffer = &x;
      bound[2].binding = 2;
      bound[2].buffer = &y;
      WF_TRY_ASSIGN(gpu::BindGroup group, device.create_bind_group(pipeline, bound));
      gpu::DispatchStep step{&pipeline, &group, grid};
      WF_TRY_ASSIGN(gpu::TimedRun timed, device.time(std::span(&step, 1), timing));
      if (best.median_ns == 0 || timed.summary.median_ns < best.median_ns) {
        best.median_ns = timed.summary.median_ns;
        best.bytes = vectors * 16 * 2;
        best.description = "vec4 copy, workgroup " + std::to_string(workgroup_size) + ", " +
                           std::to_string(grid.count()) + " workgroups";
      }
    }
  }
  return best;
}

Result<BenchRow> bench_kernel(gpu::Device& device, const ManifestCache& cache,
                              const kernels::KernelDefinition& kernel,
                              const kernels::Problem& problem, const gpu::TimingOptions& timing,
                              bool pass_times, const std::optional<Schedule>& given,
                              const std::optional<std::string>& given_source) {
  BenchRow row;
  row.kernel_id = std::string(kernel.id());
  row.problem = problem;
  WF_TRY(check_problem_fits(device, kernel, problem));
  const kernels::DeviceCapabilities capabilities = capabilities_of(device.adapter());
  // The tuning of the bucket nearest to the problem, as a typed call of this size would use.
  const std::vector<kernels::SizeBucket> buckets = size_buckets(device, kernel);
  const kernels::SizeBucket& bucket = buckets[kernels::nearest_bucket(buckets, problem)];
  row.bucket = bucket.label;
  WF_TRY_ASSIGN(std::optional<TuningManifest> tuned,
                cache.load_tuning_for_topology(device.adapter().topology_hash, kernel.id(),
                                               bucket.key_label()));
  std::vector<std::pair<std::string, Schedule>> schedules = {
      {"default", kernel.default_schedule()}};
  if (given) {
    WF_TRY(kernel.check_schedule(*given, capabilities));
    schedules.insert(schedules.begin(), {"tuned", *given});
    row.given = true;
    row.given_source = given_source.has_value();
  } else if (tuned.has_value() && !find_unusable_tuning(kernel, *tuned, &capabilities)) {
    schedules.insert(schedules.begin(), {"tuned", tuned->result.winner.schedule});
  }
  const std::vector<kernels::CaseSpec> specs = kernel.certification_cases();
  // The values of a certification case, bound to `problem` as given (as the tuner does): the
  // case's own problem holds parameters drawn for certification, such as compact_f32's
  // threshold, which may keep everything or nothing.
  const kernels::CaseInputs inputs =
      kernel.make_inputs({"bench", problem, specs.front().value_profile}, 0x5eed);
  for (const auto& [label, schedule] : schedules) {
    WF_TRY_ASSIGN(GeneratedKernel generated,
                  kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl, capabilities));
    if (label == "tuned" && given_source) generated.source = *given_source;
    WF_TRY_ASSIGN(PreparedKernel prepared, PreparedKernel::prepare(device, kernel, generated));
    WF_TRY_ASSIGN(std::unique_ptr<BoundPlan> bound, prepared.bind(problem));
    WF_TRY(prepared.load_inputs(*bound, inputs.buffers));
    WF_TRY_ASSIGN(gpu::TimedRun timed, device.time(bound->steps(), timing));
    if (pass_times && row.passes.empty()) {
      WF_TRY_ASSIGN(std::vector<PassTime> passes, time_passes(device, *bound, timing));
      row.passes = std::move(passes);
    }
    if (label == "tuned") {
      row.tuned_schedule = schedule;
      row.tuned = timed.summary;
    } else {
      row.default_schedule = schedule;
      row.default_timing = timed.summary;
    }
  }
  return row;
}

}  // namespace wgsl_forge::forge
