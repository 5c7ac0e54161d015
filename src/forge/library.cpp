// The start-up entry point: tuned kernels for this adapter, or the default schedule (said so).

#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

Result<KernelLibrary::ReadyKernel> KernelLibrary::load(std::string_view kernel_id) {
  Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(kernel_id);
  if (!kernel) return std::move(kernel).error();
  const kernels::DeviceCapabilities capabilities = capabilities_of(device_->adapter());
  const std::string& topology = device_->adapter().topology_hash;

  Schedule schedule = (*kernel)->default_schedule();
  bool tuned = false;
  std::string origin;
  Result<std::optional<TuningManifest>> cached =
      cache_.load_tuning_for_topology(topology, kernel_id);
  if (!cached) {
    origin = "default schedule: the cache entry cannot be used (" + cached.error().message() + ")";
  } else if (!cached->has_value()) {
    origin = "default schedule: not tuned for this adapter yet (run wgsl-forge auto-tune-all)";
  } else if ((*cached)->kernel_revision != (*kernel)->revision()) {
    origin = "default schedule: tuned for revision " + std::to_string((*cached)->kernel_revision) +
             ", the generator is now revision " + std::to_string((*kernel)->revision()) +
             " (run wgsl-forge auto-tune-all)";
  } else {
    schedule = (*cached)->result.winner.schedule;
    tuned = true;
    origin = "tuned: median " + std::to_string((*cached)->result.winner.timing.median_ns / 1e3) +
             " us at problem size " + std::to_string((*cached)->context.problem_size) +
             " (cache key " + ManifestCache::topology_key(topology, kernel_id) + ")";
  }
  Result<GeneratedKernel> generated =
      kernels::generate_builtin(**kernel, schedule, TargetBackend::kWgsl, capabilities);
  if (!generated) return std::move(generated).error();
  Result<PreparedKernel> prepared = PreparedKernel::prepare(*device_, **kernel, *generated);
  if (!prepared) return std::move(prepared).error();
  return ReadyKernel{*kernel, std::move(prepared).value(), tuned, std::move(origin)};
}

}  // namespace wgsl_forge::forge
