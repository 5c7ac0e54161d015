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
                               const kernels::DeviceCapabilities& capabilities,
                               const kernels::SizeBucket& bucket) {
  const std::string key = ManifestCache::bucket_key(topology, kernel.id(), bucket.key_label());
  Result<std::optional<TuningManifest>> cached = cache.load_tuning(key);
  if (!cached) {
    return default_schedule_because(
        kernel, "the cache entry cannot be used (" + cached.error().message() + ")");
  }
  if (!cached->has_value()) {
    return default_schedule_because(
        kernel, "size bucket " + bucket.label + " is not tuned for this adapter yet");
  }
  const TuningManifest& manifest = **cached;
  if (std::optional<UnusableTuning> unusable =
          find_unusable_tuning(kernel, manifest, &capabilities)) {
    return default_schedule_because(
        kernel, "cache entry " + cache.path_for(ManifestKind::kTuning, key).string() + " is " +
                    entry_health_name(unusable->health) + ": " + unusable->reason);
  }
  return {manifest.result.winner.schedule, true,
          "tuned for bucket " + bucket.label + ": median " +
              std::to_string(manifest.result.winner.timing.median_ns / 1e3) +
              " us at problem size " + std::to_string(manifest.context.problem_size) +
              " (cache key " + key + ")"};
}

// The schedule for buckets[wanted]: its own tuning, else that of the nearest bucket that has a
// usable one (a schedule tuned at another size beats the untuned default), else the default
// with the wanted bucket's reason.
ScheduleChoice choose_bucket_schedule(const kernels::KernelDefinition& kernel,
                                      const ManifestCache& cache, const std::string& topology,
                                      const kernels::DeviceCapabilities& capabilities,
                                      const std::vector<kernels::SizeBucket>& buckets,
                                      std::size_t wanted) {
  ScheduleChoice own = choose_schedule(kernel, cache, topology, capabilities, buckets[wanted]);
  if (own.tuned) return own;
  for (std::size_t other : kernels::nearest_buckets(buckets, buckets[wanted].problem)) {
    if (other == wanted) continue;
    ScheduleChoice nearest = choose_schedule(kernel, cache, topology, capabilities, buckets[other]);
    if (!nearest.tuned) continue;
    nearest.origin += "; used for bucket " + buckets[wanted].label +
                      ", the nearest tuned to it, which has no usable tuning (" + own.origin + ")";
    return nearest;
  }
  return own;
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

KernelLibrary::ReadyKernel& KernelLibrary::BucketedKernel::for_problem(
    const kernels::Problem& problem) const {
  return *ready[kernels::nearest_bucket(buckets, problem)];
}

std::string KernelLibrary::BucketedKernel::origins() const {
  std::string text;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (i != 0) text += "\n";
    text += buckets[i].label + ": " + bucket_origins[i];
  }
  return text;
}

Result<KernelLibrary::ChosenKernel> KernelLibrary::choose(
    const kernels::KernelDefinition& kernel, const std::vector<kernels::SizeBucket>& buckets,
    std::size_t wanted) {
  const kernels::DeviceCapabilities capabilities = capabilities_of(device_->adapter());
  ScheduleChoice choice = choose_bucket_schedule(kernel, cache_, device_->adapter().topology_hash,
                                                 capabilities, buckets, wanted);
  if (choice.tuned && options_.recertify_winners) {
    choice = recertified(*device_, kernel, std::move(choice));
  }
  WF_TRY_ASSIGN(
      GeneratedKernel generated,
      kernels::generate_builtin(kernel, choice.schedule, TargetBackend::kWgsl, capabilities));
  return ChosenKernel{&kernel, std::move(generated), choice.tuned, std::move(choice.origin)};
}

Result<KernelLibrary::ChosenKernel> KernelLibrary::choose_for(
    const kernels::KernelDefinition& kernel, const std::optional<kernels::Problem>& problem) {
  const std::vector<kernels::SizeBucket> buckets = size_buckets(*device_, kernel);
  const auto main = std::find_if(buckets.begin(), buckets.end(),
                                 [](const kernels::SizeBucket& one) { return one.main; });
  const std::size_t wanted = problem ? kernels::nearest_bucket(buckets, *problem)
                                     : static_cast<std::size_t>(main - buckets.begin());
  return choose(kernel, buckets, wanted);
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

Result<KernelLibrary::ReadyKernel> KernelLibrary::load(std::string_view kernel_id,
                                                       const kernels::Problem& problem) {
  WF_TRY_ASSIGN(const kernels::KernelDefinition* kernel, kernels::find_kernel(kernel_id));
  return load_one(*kernel, problem);
}

Result<KernelLibrary::ReadyKernel> KernelLibrary::load(const kernels::KernelDefinition& kernel) {
  return load_one(kernel, std::nullopt);
}

Result<KernelLibrary::ReadyKernel> KernelLibrary::load_one(
    const kernels::KernelDefinition& kernel, const std::optional<kernels::Problem>& problem) {
  WF_TRY_ASSIGN(ChosenKernel chosen, choose_for(kernel, problem));
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
    Result<ChosenKernel> one = kernel ? choose_for(**kernel, std::nullopt)
                                      : Result<ChosenKernel>(std::move(kernel).error());
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

Result<std::vector<KernelLibrary::BucketedKernel>> KernelLibrary::load_bucketed(
    std::span<const std::string_view> kernel_ids) {
  // Each kernel's buckets, and for each bucket the index of its schedule among the distinct
  // schedules chosen (buckets that chose the same schedule share its pipelines).
  struct Plan {
    const kernels::KernelDefinition* kernel = nullptr;
    std::vector<kernels::SizeBucket> buckets;
    std::vector<std::size_t> distinct_of_bucket;
    std::vector<std::string> origins;
  };
  std::vector<Plan> plans;
  std::vector<ChosenKernel> distinct;
  for (std::string_view kernel_id : kernel_ids) {
    WF_TRY_ASSIGN(const kernels::KernelDefinition* kernel, kernels::find_kernel(kernel_id));
    Plan plan{kernel, size_buckets(*device_, *kernel), {}, {}};
    const std::size_t first = distinct.size();
    for (std::size_t bucket = 0; bucket < plan.buckets.size(); ++bucket) {
      WF_TRY_ASSIGN(ChosenKernel chosen, choose(*kernel, plan.buckets, bucket));
      auto same = std::find_if(distinct.begin() + static_cast<std::ptrdiff_t>(first),
                               distinct.end(), [&](const ChosenKernel& one) {
                                 return one.generated.schedule == chosen.generated.schedule;
                               });
      plan.distinct_of_bucket.push_back(static_cast<std::size_t>(same - distinct.begin()));
      plan.origins.push_back(chosen.origin);
      if (same == distinct.end()) distinct.push_back(std::move(chosen));
    }
    plans.push_back(std::move(plan));
  }
  WF_TRY_ASSIGN(std::vector<ReadyKernel> ready, prepare(std::move(distinct)));
  std::vector<std::shared_ptr<ReadyKernel>> shared;
  for (ReadyKernel& one : ready) shared.push_back(std::make_shared<ReadyKernel>(std::move(one)));
  std::vector<BucketedKernel> loaded;
  for (Plan& plan : plans) {
    BucketedKernel kernel{plan.kernel, std::move(plan.buckets), {}, std::move(plan.origins)};
    for (std::size_t index : plan.distinct_of_bucket) kernel.ready.push_back(shared[index]);
    loaded.push_back(std::move(kernel));
  }
  return loaded;
}

}  // namespace wgsl_forge::forge
