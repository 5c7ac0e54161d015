// auto-tune-all: every builtin kernel not yet tuned for this adapter's topology.

#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

namespace {

// The certification manifest of a tuned winner, when the cache has it.
std::size_t certified_cases(gpu::Device& device, const ManifestCache& cache,
                            const kernels::KernelDefinition& kernel,
                            const TuningManifest& manifest) {
  Result<GeneratedKernel> generated =
      kernels::generate_builtin(kernel, manifest.result.winner.schedule, TargetBackend::kWgsl,
                                capabilities_of(device.adapter()));
  if (!generated) return 0;
  Result<CertificationManifest> keyed =
      CertificationManifest::create(*generated, device.adapter().identity,
                                    device.adapter().topology_hash, kernel.tolerance(), {});
  if (!keyed || !keyed->cache_key) return 0;
  Result<std::optional<CertificationManifest>> stored = cache.load_certification(*keyed->cache_key);
  if (!stored || !stored->has_value()) return 0;
  return (*stored)->cases.size();
}

// An entry that parses but that KernelLibrary would not use on this device counts as not tuned.
bool unusable_here(const gpu::Device& device, const kernels::KernelDefinition& kernel,
                   const TuningManifest& manifest) {
  const kernels::DeviceCapabilities capabilities = capabilities_of(device.adapter());
  return find_unusable_tuning(kernel, manifest, &capabilities).has_value();
}

}  // namespace

Result<std::filesystem::path> store_certification_evidence(const ManifestCache& cache,
                                                           const CertificationManifest& manifest) {
  Result<std::filesystem::path> stored = cache.store_certification(manifest);
  if (stored || stored.error().kind() != ErrorKind::kCollision || !manifest.cache_key)
    return stored;
  Result<std::optional<CertificationManifest>> earlier =
      cache.load_certification(*manifest.cache_key);
  if (!earlier) return std::move(earlier).error();
  if (!earlier->has_value() || (*earlier)->verdict != manifest.verdict) return stored;
  return cache.path_for(ManifestKind::kCertification, *manifest.cache_key);
}

bool would_tune(const gpu::Device& device, const ManifestCache& cache,
                const kernels::KernelDefinition& kernel, const AutoTuneOptions& options) {
  if (options.retune) return true;
  Result<std::optional<TuningManifest>> cached =
      cache.load_tuning_for_topology(device.adapter().topology_hash, kernel.id());
  return cached && (!cached->has_value() || unusable_here(device, kernel, **cached));
}

AutoTuneRow tune_and_store(gpu::Device& device, const ManifestCache& cache,
                           const kernels::KernelDefinition& kernel,
                           const AutoTuneOptions& options) {
  AutoTuneRow row;
  row.kernel_id = std::string(kernel.id());
  const std::string& topology = device.adapter().topology_hash;
  const std::string key = ManifestCache::topology_key(topology, kernel.id());

  // Ask the cache first, as the original module does.
  Result<std::optional<TuningManifest>> cached = cache.load_tuning(key);
  const bool unusable = cached && cached->has_value() && unusable_here(device, kernel, **cached);
  if (!cached && !options.retune) {
    row.message =
        cached.error().to_string() + " Run wgsl-forge auto-tune-all --retune to replace it.";
    return row;
  }
  if (cached && cached->has_value() && !unusable && !options.retune) {
    row.status = AutoTuneRow::Status::kCached;
    row.manifest = **cached;
    row.certified_cases = certified_cases(device, cache, kernel, **cached);
    return row;
  }
  if (!cached || cached->has_value()) {
    // Replacing an entry (re-tune, one this build does not use, or a damaged file) is explicit.
    Result<bool> removed = cache.remove(ManifestKind::kTuning, key);
    if (!removed) {
      row.message = removed.error().to_string();
      return row;
    }
  }
  Result<TuneOutcome> outcome = tune(device, kernel, options.tune);
  if (!outcome) {
    row.message = outcome.error().to_string();
    return row;
  }
  if (Result<std::filesystem::path> stored =
          store_certification_evidence(cache, outcome->certification);
      !stored) {
    row.message = stored.error().to_string();
    return row;
  }
  Result<std::filesystem::path> stored =
      cache.store_tuning_for_topology(topology, kernel.id(), outcome->manifest);
  if (!stored) {
    row.message = stored.error().to_string();
    return row;
  }
  row.status = AutoTuneRow::Status::kTuned;
  row.manifest = std::move(outcome->manifest);
  row.certified_cases = outcome->certification.cases.size();
  return row;
}

std::vector<AutoTuneRow> auto_tune_all(gpu::Device& device, const ManifestCache& cache,
                                       const AutoTuneOptions& options) {
  std::vector<AutoTuneRow> rows;
  const auto& catalog = kernels::builtin_kernels();
  for (std::size_t i = 0; i < catalog.size(); ++i) {
    if (options.on_kernel) options.on_kernel(i, catalog.size(), std::string(catalog[i]->id()));
    rows.push_back(tune_and_store(device, cache, *catalog[i], options));
    if (device.lost_reason()) {
      // Nothing more can run; say so for every kernel left.
      for (std::size_t j = i + 1; j < catalog.size(); ++j) {
        rows.push_back({std::string(catalog[j]->id()), AutoTuneRow::Status::kFailed, std::nullopt,
                        "not tuned: the GPU device was lost (" + *device.lost_reason() + ")", 0});
      }
      break;
    }
  }
  return rows;
}

}  // namespace wgsl_forge::forge
