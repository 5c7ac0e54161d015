// The start-up entry point: tuned kernels for this adapter, or the default schedule (said so).

#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

Result<KernelLibrary::ChosenKernel> KernelLibrary::choose(std::string_view kernel_id) {
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
  return ChosenKernel{*kernel, std::move(generated).value(), tuned, std::move(origin)};
}

Result<KernelLibrary::ReadyKernel> KernelLibrary::load(std::string_view kernel_id) {
  Result<std::vector<ReadyKernel>> ready = load(std::span(&kernel_id, 1));
  if (!ready) return std::move(ready).error();
  return std::move(ready->front());
}

Result<std::vector<KernelLibrary::ReadyKernel>> KernelLibrary::load(
    std::span<const std::string_view> kernel_ids) {
  std::vector<ChosenKernel> chosen;
  // The first kernel that cannot be chosen; the ones before it are still prepared, so that the
  // error is the one loading them one by one would give first.
  std::optional<Error> stopped;
  for (std::string_view kernel_id : kernel_ids) {
    Result<ChosenKernel> one = choose(kernel_id);
    if (!one) {
      stopped = std::move(one).error();
      break;
    }
    chosen.push_back(std::move(one).value());
  }
  std::vector<KernelToPrepare> to_prepare;
  for (const ChosenKernel& one : chosen) to_prepare.push_back({one.definition, &one.generated});
  Result<std::vector<PreparedKernel>> prepared = PreparedKernel::prepare_all(*device_, to_prepare);
  if (!prepared) return std::move(prepared).error();
  if (stopped) return std::move(*stopped);
  std::vector<ReadyKernel> ready;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    ready.push_back(ReadyKernel{chosen[i].definition, std::move((*prepared)[i]), chosen[i].tuned,
                                std::move(chosen[i].origin)});
  }
  return ready;
}

}  // namespace wgsl_forge::forge
