// The data of `wgsl-forge report`: every tuning entry of the cache with its kernel's knobs, its
// winner's certification and, where measured, the copy ceiling.

#include "wgsl_forge/tuning_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "util/try.hpp"

namespace wgsl_forge::forge {

namespace {

// The problem an entry's candidates were timed at: the bucket's problem, resized to the recorded
// problem size when that differs (`tune --size N` tunes the nearest bucket at N itself).
std::optional<kernels::Problem> timed_problem(const kernels::Problem& bucket_problem,
                                              std::uint64_t problem_size) {
  kernels::Problem problem = bucket_problem;
  if (problem_size == 0 || kernels::bucket_measure(problem) == problem_size) return problem;
  if (problem.m == 0) {
    problem.elements = problem_size;
    return problem;
  }
  // GEMM is resized as a cube (m = n = k), as --size does.
  const auto side = static_cast<std::uint64_t>(std::llround(std::cbrt(double(problem_size))));
  if (side * side * side != problem_size) return std::nullopt;
  problem.m = problem.n = problem.k = static_cast<std::uint32_t>(side);
  return problem;
}

// The entry's size bucket among the kernel's buckets on the entry's kind of adapter, and its
// index in them (for ordering); the main bucket when the entry records none.
struct FoundBucket {
  std::size_t index = 0;
  std::optional<kernels::SizeBucket> bucket;
};
FoundBucket find_bucket(const kernels::KernelDefinition& kernel, const TuningManifest& tuning) {
  const std::vector<kernels::SizeBucket> buckets =
      kernel.size_buckets(tuning.adapter.device_type == "Cpu");
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const bool same =
        tuning.context.bucket ? buckets[i].label == *tuning.context.bucket : buckets[i].main;
    if (same) return {i, buckets[i]};
  }
  return {buckets.size(), std::nullopt};
}

// The winner's certification, keyed as the tuner stored it: by the winner's code on the entry's
// adapter and topology.
void attach_certification(const ManifestCache& cache, const kernels::KernelDefinition& kernel,
                          BucketReport& entry) {
  const TuningManifest& tuning = entry.tuning;
  CertificationManifest keyed;
  keyed.kernel_id = tuning.kernel_id;
  keyed.kernel_revision = tuning.kernel_revision;
  keyed.backend = tuning.backend;
  keyed.source_hash = tuning.source_hash;
  keyed.schedule = tuning.result.winner.schedule;
  keyed.adapter = tuning.adapter;
  keyed.topology_hash = tuning.context.topology_hash;
  keyed.tolerance = kernel.tolerance();
  const std::optional<std::string> key = keyed.compute_cache_key();
  if (!key) {
    entry.certification_missing =
        "The entry records no topology hash, so no certification entry is keyed to it.";
    return;
  }
  Result<std::optional<CertificationManifest>> stored = cache.load_certification(*key);
  if (!stored) {
    entry.certification_missing = stored.error().message();
  } else if (!stored->has_value()) {
    entry.certification_missing = "The cache holds no certification of the winner " +
                                  tuning.result.winner.schedule.to_string() + " (key " + *key +
                                  ").";
  } else {
    entry.certification = std::move(**stored);
  }
}

}  // namespace

std::size_t TuningReport::bucket_count() const {
  std::size_t count = 0;
  for (const KernelReport& kernel : kernels) count += kernel.buckets.size();
  return count;
}

std::size_t TuningReport::candidate_count() const {
  std::size_t count = 0;
  for (const KernelReport& kernel : kernels) {
    for (const BucketReport& bucket : kernel.buckets)
      count += bucket.tuning.result.candidates.size();
  }
  return count;
}

Result<TuningReport> gather_tuning_report(
    const ManifestCache& cache, std::span<const kernels::KernelDefinition* const> kernels) {
  const std::span<const kernels::KernelDefinition* const> wanted =
      kernels.empty()
          ? std::span<const kernels::KernelDefinition* const>(kernels::builtin_kernels())
          : kernels;
  TuningReport report;
  report.cache_root = cache.root();
  std::map<std::string, std::size_t, std::less<>> index_of;
  for (const kernels::KernelDefinition* kernel : wanted) {
    if (index_of.count(kernel->id())) continue;
    index_of.emplace(std::string(kernel->id()), report.kernels.size());
    report.kernels.push_back({std::string(kernel->id()),
                              std::string(kernel->summary()),
                              kernel->knobs(),
                              kernel->default_schedule(),
                              {},
                              0});
  }
  auto kernel_of = [&](std::string_view id) -> KernelReport* {
    auto found = index_of.find(id);
    return found == index_of.end() ? nullptr : &report.kernels[found->second];
  };

  WF_TRY_ASSIGN(std::vector<CacheEntry> entries, cache.list());
  // Each kernel's entries ordered by topology (in the order first met, so that one adapter's
  // buckets stay together), then by size bucket.
  struct Placed {
    std::size_t topology = 0;
    std::size_t bucket = 0;
    BucketReport report;
  };
  std::vector<std::vector<Placed>> placed(report.kernels.size());
  std::vector<std::string> topologies;
  for (const CacheEntry& entry : entries) {
    if (entry.kind == ManifestKind::kMeasurement) {
      Result<std::optional<MeasurementRecord>> record = cache.load_measurement(entry.key);
      if (!record) {
        report.unreadable.push_back({entry.path, record.error().message()});
      } else if (record->has_value()) {
        if (KernelReport* kernel = kernel_of((*record)->kernel_id))
          ++kernel->journaled_measurements;
      }
      continue;
    }
    if (entry.kind != ManifestKind::kTuning) continue;
    Result<std::optional<TuningManifest>> tuning = cache.load_tuning(entry.key);
    if (!tuning) {
      report.unreadable.push_back({entry.path, tuning.error().message()});
      continue;
    }
    if (!tuning->has_value()) continue;  // removed since it was listed
    KernelReport* kernel = kernel_of((*tuning)->kernel_id);
    if (kernel == nullptr) continue;
    const kernels::KernelDefinition& definition = *kernels::find_kernel(kernel->kernel_id).value();
    BucketReport bucket;
    bucket.tuning = std::move(**tuning);
    const FoundBucket where = find_bucket(definition, bucket.tuning);
    if (where.bucket) {
      bucket.bucket = where.bucket->label;
      bucket.main_bucket = where.bucket->main;
      bucket.problem = timed_problem(where.bucket->problem, bucket.tuning.context.problem_size);
    } else {
      bucket.bucket = bucket.tuning.context.bucket.value_or("main");
    }
    if (bucket.problem) bucket.work = definition.work(*bucket.problem);
    if (std::optional<UnusableTuning> unusable =
            find_unusable_tuning(definition, bucket.tuning, /*device=*/nullptr)) {
      bucket.unusable = std::move(unusable->reason);
    }
    attach_certification(cache, definition, bucket);
    const std::string topology = bucket.tuning.context.topology_hash.value_or("");
    auto at = std::find(topologies.begin(), topologies.end(), topology);
    const auto topology_index = static_cast<std::size_t>(at - topologies.begin());
    if (at == topologies.end()) topologies.push_back(topology);
    placed[static_cast<std::size_t>(kernel - report.kernels.data())].push_back(
        {topology_index, where.index, std::move(bucket)});
  }
  for (std::size_t k = 0; k < placed.size(); ++k) {
    std::stable_sort(placed[k].begin(), placed[k].end(), [](const Placed& a, const Placed& b) {
      return std::tie(a.topology, a.bucket) < std::tie(b.topology, b.bucket);
    });
    for (Placed& one : placed[k]) report.kernels[k].buckets.push_back(std::move(one.report));
  }
  return report;
}

Status measure_copy_ceilings(gpu::Device& device, TuningReport& report,
                             const gpu::TimingOptions& timing) {
  std::map<std::uint64_t, CopyCeiling> measured;
  for (KernelReport& kernel : report.kernels) {
    for (BucketReport& bucket : kernel.buckets) {
      if (bucket.tuning.context.topology_hash != device.adapter().topology_hash) continue;
      if (bucket.work.bytes == 0) continue;
      auto known = measured.find(bucket.work.bytes);
      if (known == measured.end()) {
        WF_TRY_ASSIGN(CopyCeiling ceiling, measure_copy_ceiling(device, bucket.work.bytes, timing));
        known = measured.emplace(bucket.work.bytes, std::move(ceiling)).first;
      }
      bucket.copy_ceiling = known->second;
    }
  }
  return Ok{};
}

}  // namespace wgsl_forge::forge
