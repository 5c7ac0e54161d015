// auto-tune-all: every builtin kernel not yet tuned for this adapter's topology.

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "util/try.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/leases.hpp"

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

// An entry that parses but that KernelLibrary would not use on this device counts as not tuned;
// the reason says why.
std::optional<UnusableTuning> unusable_here(const gpu::Device& device,
                                            const kernels::KernelDefinition& kernel,
                                            const TuningManifest& manifest) {
  const kernels::DeviceCapabilities capabilities = capabilities_of(device.adapter());
  return find_unusable_tuning(kernel, manifest, &capabilities);
}

// The bucket's entry key: the seed's topology key for the main bucket.
std::string entry_key(const gpu::Device& device, const kernels::KernelDefinition& kernel,
                      const kernels::SizeBucket& bucket) {
  return ManifestCache::bucket_key(device.adapter().topology_hash, kernel.id(), bucket.key_label());
}

}  // namespace

std::vector<kernels::SizeBucket> size_buckets(const gpu::Device& device,
                                              const kernels::KernelDefinition& kernel) {
  return kernel.size_buckets(device.adapter().identity.device_type == "Cpu");
}

kernels::SizeBucket main_bucket(const gpu::Device& device,
                                const kernels::KernelDefinition& kernel) {
  for (kernels::SizeBucket& bucket : size_buckets(device, kernel)) {
    if (bucket.main) return bucket;
  }
  throw std::logic_error(std::string(kernel.id()) + " has no main size bucket");
}

std::vector<kernels::SizeBucket> selected_buckets(const gpu::Device& device,
                                                  const kernels::KernelDefinition& kernel,
                                                  const std::vector<std::string>& sizes) {
  std::vector<kernels::SizeBucket> selected;
  for (kernels::SizeBucket& bucket : size_buckets(device, kernel)) {
    const bool wanted =
        sizes.empty() || std::any_of(sizes.begin(), sizes.end(), [&](const std::string& size) {
          return size == bucket.label || (size == "main" && bucket.main);
        });
    if (wanted) selected.push_back(std::move(bucket));
  }
  return selected;
}

Result<std::filesystem::path> store_certification_evidence(const ManifestCache& cache,
                                                           const CertificationManifest& manifest) {
  Result<std::filesystem::path> stored = cache.store_certification_replacing_damaged(manifest);
  if (stored || stored.error().kind() != ErrorKind::kCollision || !manifest.cache_key)
    return stored;
  WF_TRY_ASSIGN(std::optional<CertificationManifest> earlier,
                cache.load_certification(*manifest.cache_key));
  if (!earlier.has_value() || earlier->verdict != manifest.verdict) return stored;
  return cache.path_for(ManifestKind::kCertification, *manifest.cache_key);
}

bool would_tune(const gpu::Device& device, const ManifestCache& cache,
                const kernels::KernelDefinition& kernel, const kernels::SizeBucket& bucket,
                const AutoTuneOptions& options) {
  if (options.retune) return true;
  Result<std::optional<TuningManifest>> cached =
      cache.load_tuning(entry_key(device, kernel, bucket));
  if (!cached) return cached.error().kind() == ErrorKind::kCorruption;
  return !cached->has_value() || unusable_here(device, kernel, **cached).has_value();
}

bool would_tune(const gpu::Device& device, const ManifestCache& cache,
                const kernels::KernelDefinition& kernel, const AutoTuneOptions& options) {
  return would_tune(device, cache, kernel, main_bucket(device, kernel), options);
}

const char* auto_tune_status_name(AutoTuneRow::Status status) {
  switch (status) {
    case AutoTuneRow::Status::kTuned:
      return "tuned";
    case AutoTuneRow::Status::kCached:
      return "cached";
    case AutoTuneRow::Status::kKept:
      return "kept";
    case AutoTuneRow::Status::kTunedElsewhere:
      return "tuned by another process";
    case AutoTuneRow::Status::kFailed:
      return "failed";
  }
  return "failed";
}

namespace {

std::string median_text(const TimingSummary& timing) {
  char text[64];
  std::snprintf(text, sizeof text, "median %.1f us, MAD %.1f us", timing.median_ns / 1e3,
                timing.mad_ns / 1e3);
  return text;
}

// What the new search made of the stored winner, for AutoTuneRow::decision.
std::string retune_decision(const TuningManifest& stored, const TuningResult& result,
                            bool replaced) {
  const Schedule& old_winner = stored.result.winner.schedule;
  const std::string rule =
      " (the rule: a re-tune replaces the stored winner only with a certified schedule whose "
      "median is lower by more than the larger of the two MADs and 1 %)";
  auto retimed =
      std::find_if(result.finalists.begin(), result.finalists.end(),
                   [&](const CandidateResult& one) { return one.schedule == old_winner; });
  if (!replaced) {
    auto challenger =
        std::find_if(result.finalists.begin(), result.finalists.end(),
                     [&](const CandidateResult& one) { return one.schedule != old_winner; });
    return "kept the stored winner " + old_winner.to_string() + " (" +
           median_text(result.winner.timing) + ")" +
           (challenger != result.finalists.end()
                ? ": the best other finalist " + challenger->schedule.to_string() + " (" +
                      median_text(challenger->timing) + ") is not faster beyond noise"
                : ": no other schedule was certified and timed") +
           rule;
  }
  if (retimed != result.finalists.end()) {
    return "replaced the stored winner " + old_winner.to_string() + " (" +
           median_text(retimed->timing) + ") with " + result.winner.schedule.to_string() + " (" +
           median_text(result.winner.timing) + ")" + rule;
  }
  const std::vector<CandidateFailure> failures = result.failures();
  auto failed = std::find_if(failures.begin(), failures.end(), [&](const CandidateFailure& one) {
    return one.schedule == old_winner;
  });
  return "replaced the stored winner " + old_winner.to_string() +
         (failed != failures.end()
              ? ", which failed here at " + std::string(failure_stage_name(failed->stage)) + " (" +
                    failed->message + ")"
              : ", which this search could not time") +
         ", with " + result.winner.schedule.to_string();
}

// What replacing the entry that `cached` read means, in words; empty when there was none.
// `unusable` is why this build does not use the entry, when it parsed but is not used.
std::string replacement_decision(const std::optional<UnusableTuning>& unusable,
                                 const Result<std::optional<TuningManifest>>& cached,
                                 const std::optional<TuningManifest>& stored,
                                 const TuningResult& result, bool force) {
  if (stored && force) {
    return "replaced the stored winner " + stored->result.winner.schedule.to_string() + " with " +
           result.winner.schedule.to_string() + " without comparing, as forced";
  }
  if (stored) return retune_decision(*stored, result, true);
  if (!cached) return "replaced the damaged entry (" + cached.error().message() + ")";
  if (unusable) return "replaced the entry this build does not use (" + unusable->reason + ")";
  return "";
}

// After a store lost to another writer: success when that writer's entry is valid and of this
// kernel revision (the race was for the same answer), else the store's error.
AutoTuneRow settle_lost_race(gpu::Device& device, const ManifestCache& cache,
                             const kernels::KernelDefinition& kernel,
                             const kernels::SizeBucket& bucket, AutoTuneRow row,
                             const Error& lost) {
  Result<std::optional<TuningManifest>> theirs =
      cache.load_tuning(entry_key(device, kernel, bucket));
  if (!theirs || !theirs->has_value() || (*theirs)->kernel_revision != kernel.revision()) {
    row.message = lost.to_string();
    return row;
  }
  row.status = AutoTuneRow::Status::kTunedElsewhere;
  row.manifest = **theirs;
  row.certified_cases = certified_cases(device, cache, kernel, **theirs);
  row.decision = "tuned by another process while this one searched; its entry is kept";
  return row;
}

}  // namespace

AutoTuneRow tune_and_store(gpu::Device& device, const ManifestCache& cache,
                           const kernels::KernelDefinition& kernel,
                           const kernels::SizeBucket& bucket, const AutoTuneOptions& options) {
  AutoTuneRow row;
  row.kernel_id = std::string(kernel.id());
  row.bucket = bucket.label;
  const std::string& topology = device.adapter().topology_hash;
  const std::string key = entry_key(device, kernel, bucket);

  // Ask the cache first. The snapshot is taken before the load, so
  // that a writer who replaces the entry after either is noticed when this one stores; a name
  // that cannot be read at all (a FIFO, a link) fails both, and the load reports it.
  Result<ManifestCache::Snapshot> snapshot = cache.snapshot(ManifestKind::kTuning, key);
  Result<std::optional<TuningManifest>> cached = cache.load_tuning(key);
  const std::optional<UnusableTuning> unusable =
      cached && cached->has_value() ? unusable_here(device, kernel, **cached) : std::nullopt;
  // A damaged entry (it does not parse, breaks an invariant, or is not a regular file) holds
  // nothing worth keeping: it is searched again and replaced like a missing one. Any other
  // failure to read (permissions, I/O) may hide a good entry, so this kernel stops there.
  if (!cached && cached.error().kind() != ErrorKind::kCorruption && !options.retune) {
    row.message = cached.error().to_string();
    return row;
  }
  if (cached && cached->has_value() && !unusable && !options.retune) {
    row.status = AutoTuneRow::Status::kCached;
    row.manifest = **cached;
    row.certified_cases = certified_cases(device, cache, kernel, **cached);
    return row;
  }
  // A valid current entry competes in its own re-tune, unless forced out.
  const std::optional<TuningManifest> stored =
      cached && cached->has_value() && !unusable ? std::optional(**cached) : std::nullopt;
  TuneOptions tune_options = options.tune;
  tune_options.bucket = bucket;
  tune_options.journal = &cache;
  tune_options.resume = !options.retune;
  if (stored && !options.force) tune_options.incumbent = stored->result.winner.schedule;
  Result<TuneOutcome> outcome = tune(device, kernel, tune_options);
  if (!outcome) {
    row.message = outcome.error().to_string();
    return row;
  }
  if (Result<std::filesystem::path> evidence =
          store_certification_evidence(cache, outcome->certification);
      !evidence) {
    row.message = evidence.error().to_string();
    return row;
  }
  const TuningResult& result = outcome->manifest.result;
  if (tune_options.incumbent && result.winner.schedule == *tune_options.incumbent) {
    // Nothing to write; but if another writer replaced the entry meanwhile, theirs stands.
    Result<ManifestCache::Snapshot> now = cache.snapshot(ManifestKind::kTuning, key);
    if (snapshot && (!now || now->bytes != snapshot->bytes)) {
      return settle_lost_race(
          device, cache, kernel, bucket, std::move(row),
          Error(ErrorKind::kCollision, "Cache entry " +
                                           cache.path_for(ManifestKind::kTuning, key).string() +
                                           " changed while this process was tuning."));
    }
    row.status = AutoTuneRow::Status::kKept;
    row.breakdown = outcome->breakdown;
    row.warnings = outcome->warnings;
    row.manifest = *stored;
    row.decision = retune_decision(*stored, result, false);
    row.certified_cases = outcome->certification.cases.size();
    return row;
  }
  row.decision = replacement_decision(unusable, cached, stored, result, options.force);
  Result<std::filesystem::path> replaced = cache.replace_tuning_for_topology(
      topology, kernel.id(), outcome->manifest,
      options.force || !snapshot ? std::nullopt : std::optional(*snapshot));
  if (!replaced) {
    if (replaced.error().kind() == ErrorKind::kCollision) {
      return settle_lost_race(device, cache, kernel, bucket, std::move(row), replaced.error());
    }
    row.message = replaced.error().to_string();
    return row;
  }
  row.status = AutoTuneRow::Status::kTuned;
  row.breakdown = outcome->breakdown;
  row.warnings = outcome->warnings;
  row.manifest = std::move(outcome->manifest);
  row.certified_cases = outcome->certification.cases.size();
  return row;
}

AutoTuneRow tune_and_store(gpu::Device& device, const ManifestCache& cache,
                           const kernels::KernelDefinition& kernel,
                           const AutoTuneOptions& options) {
  return tune_and_store(device, cache, kernel, main_bucket(device, kernel), options);
}

namespace {

// The fleet's leases on its Redis (RemoteStore), as a LeaseStore.
class RemoteLeases final : public LeaseStore {
 public:
  explicit RemoteLeases(std::shared_ptr<RemoteStore> remote) : remote_(std::move(remote)) {}
  Result<ClaimOutcome> claim(std::string_view key, const std::string& token,
                             std::chrono::milliseconds duration) override {
    if (remote_->claim(key, token, duration)) return ClaimOutcome::kClaimed;
    return remote_->online() ? ClaimOutcome::kHeldElsewhere : ClaimOutcome::kUnavailable;
  }
  bool renew(std::string_view key, const std::string& token,
             std::chrono::milliseconds duration) override {
    return remote_->renew(key, token, duration);
  }
  void release(std::string_view key, const std::string& token) override {
    remote_->release(key, token);
  }

 private:
  std::shared_ptr<RemoteStore> remote_;
};

// A process's claim on one entry while it tunes it: renewed on a thread of its own every third
// of the lease, released when the tune is over. A renewal that finds the lease gone (this
// process stalled past it and another claimed the entry) stops renewing; the stores then settle
// which entry stands, as for any two writers.
class EntryLease {
 public:
  EntryLease(LeaseStore& store, std::string key, std::string token,
             std::chrono::milliseconds duration)
      : store_(store), key_(std::move(key)), token_(std::move(token)) {
    renewer_ = std::thread([this, duration] {
      std::unique_lock lock(mutex_);
      while (!stopping_.wait_for(lock, duration / 3, [this] { return stopped_; })) {
        if (!store_.renew(key_, token_, duration)) return;
      }
    });
  }
  ~EntryLease() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    stopping_.notify_all();
    renewer_.join();
    store_.release(key_, token_);
  }
  EntryLease(const EntryLease&) = delete;
  EntryLease& operator=(const EntryLease&) = delete;

 private:
  LeaseStore& store_;
  std::string key_;
  std::string token_;
  std::mutex mutex_;
  std::condition_variable stopping_;
  bool stopped_ = false;
  std::thread renewer_;
};

}  // namespace

std::vector<AutoTuneRow> auto_tune_all(gpu::Device& device, const ManifestCache& cache,
                                       std::span<const kernels::KernelDefinition* const> catalog,
                                       const AutoTuneOptions& options) {
  std::vector<std::pair<const kernels::KernelDefinition*, kernels::SizeBucket>> work;
  for (const kernels::KernelDefinition* kernel : catalog) {
    for (kernels::SizeBucket& bucket : selected_buckets(device, *kernel, options.sizes)) {
      work.emplace_back(kernel, std::move(bucket));
    }
  }
  // The fleet's leases while its remote answers, else those of the local cache directory,
  // which the processes sharing it (auto-tune-all --adapters' workers) split the work by.
  std::optional<RemoteLeases> remote_leases;
  if (cache.remote()) remote_leases.emplace(cache.remote());
  LocalLeases local_leases(cache.root());
  const std::string token = RemoteStore::unique_token();
  const std::chrono::milliseconds poll_interval = std::clamp(
      options.lease_duration / 4, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
  // Once another node held an entry, its tune is taken as the fleet's (no re-tune of it here).
  AutoTuneOptions after_waiting = options;
  after_waiting.retune = false;
  after_waiting.force = false;

  std::vector<std::optional<AutoTuneRow>> rows(work.size());
  std::vector<bool> waited(work.size(), false);
  std::vector<std::size_t> pending(work.size());
  for (std::size_t i = 0; i < work.size(); ++i) pending[i] = i;
  std::size_t looked_at = 0;
  // The timing inputs of the next entry to tune, drawn while this one is tuned, and whose they
  // are. Their seeds come from the tune's seed, so a seeded run draws the same inputs.
  std::shared_ptr<TimingInputs> ahead;
  std::size_t ahead_for = work.size();
  std::mt19937_64 ahead_seeds(options.tune.seed != 0 ? options.tune.seed : std::random_device{}());
  auto problem_of = [&](std::size_t i) {
    return options.tune.problem.value_or(work[i].second.problem);
  };
  auto draw = [&](std::size_t j, const TimingInputs* after) -> std::shared_ptr<TimingInputs> {
    const kernels::KernelDefinition& kernel = *work[j].first;
    // One that does not fit is left to tune(), which says why.
    if (!check_problem_fits(device, kernel, problem_of(j))) return nullptr;
    return TimingInputs::draw_ahead(kernel, problem_of(j), ahead_seeds(), after);
  };
  // Starts drawing the inputs of the first of `candidates` that would be tuned, after `after`.
  auto draw_next = [&](std::span<const std::size_t> candidates, const TimingInputs* after) {
    for (std::size_t j : candidates) {
      const auto& [kernel, bucket] = work[j];
      if (!would_tune(device, cache, *kernel, bucket, waited[j] ? after_waiting : options)) {
        continue;
      }
      ahead = draw(j, after);
      ahead_for = j;
      return;
    }
  };
  while (!pending.empty() && !device.lost_reason()) {
    std::vector<std::size_t> held_elsewhere;
    for (std::size_t k = 0; k < pending.size(); ++k) {
      const std::size_t i = pending[k];
      if (device.lost_reason()) break;
      const auto& [kernel, bucket] = work[i];
      AutoTuneOptions these_options = waited[i] ? after_waiting : options;
      std::optional<EntryLease> lease;
      if (would_tune(device, cache, *kernel, bucket, these_options)) {
        const std::string key = entry_key(device, *kernel, bucket);
        LeaseStore* store = &local_leases;
        Result<ClaimOutcome> claimed = ClaimOutcome::kUnavailable;
        if (remote_leases) {
          store = &*remote_leases;
          claimed = remote_leases->claim(key, token, options.lease_duration);
        }
        if (claimed && *claimed == ClaimOutcome::kUnavailable) {
          store = &local_leases;
          claimed = local_leases.claim(key, token, options.lease_duration);
        }
        if (!claimed) {
          AutoTuneRow failed;
          failed.kernel_id = std::string(kernel->id());
          failed.bucket = bucket.label;
          failed.message = claimed.error().to_string();
          rows[i] = std::move(failed);
          continue;
        }
        if (*claimed == ClaimOutcome::kHeldElsewhere) {
          waited[i] = true;
          held_elsewhere.push_back(i);
          continue;
        }
        lease.emplace(*store, key, token, options.lease_duration);
      }
      if (options.on_kernel) options.on_kernel(looked_at++, work.size(), std::string(kernel->id()));
      if (lease) {
        // This entry's inputs (drawn while the last one was tuned, else now), then the next's,
        // drawn once these are.
        std::shared_ptr<TimingInputs> inputs = ahead_for == i ? std::move(ahead) : draw(i, nullptr);
        ahead.reset();
        ahead_for = work.size();
        draw_next(std::span(pending).subspan(k + 1), inputs.get());
        these_options.tune.timing_inputs = std::move(inputs);
      }
      AutoTuneRow row = tune_and_store(device, cache, *kernel, bucket, these_options);
      if (waited[i] && row.status == AutoTuneRow::Status::kCached) {
        row.status = AutoTuneRow::Status::kTunedElsewhere;
        row.decision = "tuned by another process, which held its lease";
      } else if (waited[i] && row.status == AutoTuneRow::Status::kTuned) {
        row.decision =
            "tuned here after another process's lease ended without an entry (that process "
            "died or failed)";
      }
      rows[i] = std::move(row);
    }
    if (held_elsewhere.size() == pending.size()) std::this_thread::sleep_for(poll_interval);
    pending = std::move(held_elsewhere);
  }
  std::vector<AutoTuneRow> ordered;
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (rows[i]) {
      ordered.push_back(std::move(*rows[i]));
      continue;
    }
    // The device was lost: nothing more can run; say so for every one left.
    AutoTuneRow lost;
    lost.kernel_id = std::string(work[i].first->id());
    lost.bucket = work[i].second.label;
    lost.message = "not tuned: the GPU device was lost (" + device.lost_reason().value_or("") + ")";
    ordered.push_back(std::move(lost));
  }
  return ordered;
}

std::vector<AutoTuneRow> auto_tune_all(gpu::Device& device, const ManifestCache& cache,
                                       const AutoTuneOptions& options) {
  return auto_tune_all(device, cache, kernels::builtin_kernels(), options);
}

}  // namespace wgsl_forge::forge
