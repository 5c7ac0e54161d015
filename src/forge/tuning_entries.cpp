// Whether this build uses a tuning entry that parses: the checks that need the kernel, which the
// model (the parser) cannot make.

#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/hash.hpp"

namespace wgsl_forge::forge {

namespace {

// The winner's schedule against the kernel's knobs and, with a device, against its limits.
Status check_winner_schedule(const kernels::KernelDefinition& kernel, const Schedule& schedule,
                             const kernels::DeviceCapabilities* device) {
  return device != nullptr ? kernel.check_schedule(schedule, *device)
                           : kernel.check_knobs(schedule);
}

}  // namespace

std::optional<UnusableTuning> find_unusable_tuning(const kernels::KernelDefinition& kernel,
                                                   const TuningManifest& manifest,
                                                   const kernels::DeviceCapabilities* device) {
  const std::string named = "The tuning of " + manifest.kernel_id + " ";
  if (manifest.kernel_revision != kernel.revision()) {
    return UnusableTuning{EntryHealth::kStale, named + "is for revision " +
                                                   std::to_string(manifest.kernel_revision) +
                                                   "; the generator is now revision " +
                                                   std::to_string(kernel.revision()) + "."};
  }
  const Schedule& winner = manifest.result.winner.schedule;
  if (Status legal = check_winner_schedule(kernel, winner, device); !legal) {
    return UnusableTuning{
        EntryHealth::kIllegalSchedule,
        named + "has a winner that is not a legal schedule: " + legal.error().message()};
  }
  // The WGSL that would run is regenerated from the winner; the entry must be about that code.
  const std::string regenerated = blake3_hex(kernel.generate_wgsl(winner));
  if (manifest.source_hash != regenerated) {
    return UnusableTuning{EntryHealth::kSourceMismatch,
                          named + "records source hash " + manifest.source_hash +
                              ", but its winner " + winner.to_string() + " generates " +
                              regenerated + "."};
  }
  return std::nullopt;
}

Result<VerifyReport> verify_cache(const ManifestCache& cache) {
  Result<VerifyReport> report = cache.verify();
  if (!report) return report;
  for (EntryCheck& check : report->checks) {
    if (check.health != EntryHealth::kValid || check.entry->kind != ManifestKind::kTuning) {
      continue;
    }
    Result<std::optional<TuningManifest>> manifest = cache.load_tuning(check.entry->key);
    if (!manifest) {  // changed since ManifestCache::verify read it
      check.health = manifest.error().kind() == ErrorKind::kIo ? EntryHealth::kUnreadable
                                                               : EntryHealth::kCorrupt;
      check.message = manifest.error().message();
      continue;
    }
    if (!manifest->has_value()) {
      check.health = EntryHealth::kUnreadable;
      check.message = "The file disappeared while it was being verified.";
      continue;
    }
    Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel((*manifest)->kernel_id);
    if (!kernel) {
      check.health = EntryHealth::kStale;
      check.message =
          "The tuning of " + (*manifest)->kernel_id + " is for a kernel this build does not have.";
      continue;
    }
    if (std::optional<UnusableTuning> unusable =
            find_unusable_tuning(**kernel, **manifest, /*device=*/nullptr)) {
      check.health = unusable->health;
      check.message = std::move(unusable->reason);
    }
  }
  return report;
}

}  // namespace wgsl_forge::forge
