// The start-up entry point: tuned kernels for this adapter, or the default schedule (said so).

#include "util/try.hpp"
#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

namespace {

struct ScheduleChoice {
  Schedule schedule;
  bool tuned = false;
  std::string origin;
};

ScheduleChoice default_schedule_because(const kernels::KernelDefinition& kernel,
                                        std::string reason) {
  return {kernel.default_schedule(), false, "default schedule: " + std::move(reason)};
}

// The cached winner when this build may use it (find_unusable_tuning, with the device's
// limits), else the default schedule with the reason, naming the entry.
ScheduleChoice choose_schedule(const kernels::KernelDefinition& kernel, const ManifestCache& cache,
                               const std::string& topology,
                               const kernels::DeviceCapabilities& capabilities) {
  const std::string key = ManifestCache::topology_key(topology, kernel.id());
  Result<std::optional<TuningManifest>> cached = cache.load_tuning(key);
  if (!cached) {
    return default_schedule_because(
        kernel, "the cache entry cannot be used (" + cached.error().message() + ")");
  }
  if (!cached->has_value()) {
    return default_schedule_because(kernel, "not tuned for this adapter yet");
  }
  const TuningManifest& manifest = **cached;
  if (std::optional<UnusableTuning> unusable =
          find_unusable_tuning(kernel, manifest, &capabilities)) {
    return default_schedule_because(
        kernel, "cache entry " + cache.path_for(ManifestKind::kTuning, key).string() + " is " +
                    entry_health_name(unusable->health) + ": " + unusable->reason);
  }
  return {manifest.result.winner.schedule, true,
          "tuned: median " + std::to_string(manifest.result.winner.timing.median_ns / 1e3) +
              " us at problem size " + std::to_string(manifest.context.problem_size) +
              " (cache key " + key + ")"};
}

// The quick certification cases of a tuned winner, run again on this device: a winner that
// fails them (or cannot run) gives way to the default schedule.
ScheduleChoice recertified(gpu::Device& device, const kernels::KernelDefinition& kernel,
                           ScheduleChoice tuned) {
  CertifyOptions quick;
  quick.quick = true;
  Result<CertificationManifest> certification = certify(device, kernel, tuned.schedule, quick);
  if (!certification) {
    return default_schedule_because(kernel, "the tuned winner " + tuned.schedule.to_string() +
                                                " cannot be re-certified (" +
                                                certification.error().to_string() + ")");
  }
  if (certification->verdict != Verdict::kCertified) {
    return default_schedule_because(
        kernel, "the tuned winner " + tuned.schedule.to_string() +
                    " fails its quick re-certification: " + first_failure(*certification));
  }
  tuned.origin +=
      "; re-certified on " + std::to_string(certification->cases.size()) + " quick cases";
  return tuned;
}

}  // namespace

Result<KernelLibrary::ChosenKernel> KernelLibrary::choose(const kernels::KernelDefinition& kernel) {
  const kernels::DeviceCapabilities capabilities = capabilities_of(device_->adapter());
  ScheduleChoice choice =
      choose_schedule(kernel, cache_, device_->adapter().topology_hash, capabilities);
  if (choice.tuned && options_.recertify_winners) {
    choice = recertified(*device_, kernel, std::move(choice));
  }
  WF_TRY_ASSIGN(
      GeneratedKernel generated,
      kernels::generate_builtin(kernel, choice.schedule, TargetBackend::kWgsl, capabilities));
  return ChosenKernel{&kernel, std::move(generated), choice.tuned, std::move(choice.origin)};
}

Result<std::vector<KernelLibrary::ReadyKernel>> KernelLibrary::prepare(
    std::vector<ChosenKernel> chosen) {
  std::vector<KernelToPrepare> to_prepare;
  for (const ChosenKernel& one : chosen) to_prepare.push_back({one.definition, &one.generated});
  WF_TRY_ASSIGN(std::vector<PreparedKernel> prepared,
                PreparedKernel::prepare_all(*device_, to_prepare));
  std::vector<ReadyKernel> ready;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    ready.push_back(ReadyKernel{chosen[i].definition, std::move(prepared[i]), chosen[i].tuned,
                                std::move(chosen[i].origin)});
  }
  return ready;
}

Result<KernelLibrary::ReadyKernel> KernelLibrary::load(std::string_view kernel_id) {
  WF_TRY_ASSIGN(std::vector<ReadyKernel> ready, load(std::span(&kernel_id, 1)));
  return std::move(ready.front());
}

Result<KernelLibrary::ReadyKernel> KernelLibrary::load(const kernels::KernelDefinition& kernel) {
  WF_TRY_ASSIGN(ChosenKernel chosen, choose(kernel));
  std::vector<ChosenKernel> one;
  one.push_back(std::move(chosen));
  WF_TRY_ASSIGN(std::vector<ReadyKernel> ready, prepare(std::move(one)));
  return std::move(ready.front());
}

Result<std::vector<KernelLibrary::ReadyKernel>> KernelLibrary::load(
    std::span<const std::string_view> kernel_ids) {
  std::vector<ChosenKernel> chosen;
  // The first kernel that cannot be chosen; the ones before it are still prepared, so that the
  // error is the one loading them one by one would give first.
  std::optional<Error> stopped;
  for (std::string_view kernel_id : kernel_ids) {
    Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(kernel_id);
    Result<ChosenKernel> one =
        kernel ? choose(**kernel) : Result<ChosenKernel>(std::move(kernel).error());
    if (!one) {
      stopped = std::move(one).error();
      break;
    }
    chosen.push_back(std::move(one).value());
  }
  WF_TRY_ASSIGN(std::vector<ReadyKernel> ready, prepare(std::move(chosen)));
  if (stopped) return std::move(*stopped);
  return ready;
}

}  // namespace wgsl_forge::forge
