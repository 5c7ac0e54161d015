#pragma once
// What `wgsl-forge report` shows, gathered from the cache and the kernel definitions: per kernel
// and size bucket, every candidate its search looked at (knobs, timing or failure, finalist),
// the winner against the default schedule, the winner's certification cases, and where the copy
// ceiling comes from. The CLI draws it (src/cli/report_page.cpp); nothing here formats for a
// reader.
//
// The cache records no copy ceiling: a tuning manifest holds the kernel's timings, not the
// adapter's copy rate. measure_copy_ceilings() measures it on an open device for the entries
// tuned on that device's topology, as `bench` does; an entry of another topology has none.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernels.hpp"
#include "wgsl_forge/model.hpp"

namespace wgsl_forge::forge {

// One tuning entry of the cache: a kernel at one size bucket on one topology.
struct BucketReport {
  std::string bucket;  // the size bucket's label ("2^20", "128^3")
  bool main_bucket = false;
  TuningManifest tuning;
  // The problem the candidates were timed at (context.problem_size on the bucket's problem) and
  // what it moves and computes, for rates; none when the entry's size fits no problem of the
  // kernel as it is now (a bucket it no longer has).
  std::optional<kernels::Problem> problem;
  kernels::WorkAmount work;
  // The winner's certification, when the cache holds it (keyed by the winner's code on this
  // topology, so buckets with the same winner share it); otherwise why not, in words.
  std::optional<CertificationManifest> certification;
  std::string certification_missing;
  // Why this build would not use the entry (find_unusable_tuning); empty when it would.
  std::string unusable;
  // The adapter's copy ceiling for work.bytes, when measured (measure_copy_ceilings).
  std::optional<CopyCeiling> copy_ceiling;
};

struct KernelReport {
  std::string kernel_id;
  std::string summary;
  std::vector<kernels::KnobSpec> knobs;
  Schedule default_schedule;
  // By topology (in the order first met), then size bucket, smallest first.
  std::vector<BucketReport> buckets;
  // Candidate outcomes journaled in the cache for this kernel (MeasurementRecord), by searches
  // that published or not: a kernel with no tuning entry but some of these had its search
  // interrupted.
  std::size_t journaled_measurements = 0;
};

struct TuningReport {
  std::filesystem::path cache_root;
  // The kernels asked for, in catalog order, each with what the cache holds for it.
  std::vector<KernelReport> kernels;
  // Files of the cache the report could not use (corrupt, unreadable), with the reason; they are
  // named, not skipped silently.
  struct Unreadable {
    std::filesystem::path path;
    std::string reason;
  };
  std::vector<Unreadable> unreadable;

  // Tuning entries in all, and the candidates their searches looked at.
  std::size_t bucket_count() const;
  std::size_t candidate_count() const;
};

// Reads every tuning entry of `cache` (and each winner's certification and the journaled
// measurements) for `kernels` (empty: the whole catalog). A tuning entry of a kernel this build
// does not have is left out; one of another revision is shown, marked unusable.
Result<TuningReport> gather_tuning_report(
    const ManifestCache& cache, std::span<const kernels::KernelDefinition* const> kernels);

// Measures the copy ceiling (measure_copy_ceiling) for every entry of `report` tuned on the
// device's topology, once per byte count.
Status measure_copy_ceilings(gpu::Device& device, TuningReport& report,
                             const gpu::TimingOptions& timing);

}  // namespace wgsl_forge::forge
