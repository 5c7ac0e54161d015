#pragma once
// The forge's evidence as plain data: adapters, schedules, oracle reports, timings, tuning and
// certification manifests. No I/O and no GPU here; src/model/manifest_json.cpp owns the on-disk
// form (see include/wgsl_forge/manifest_json.hpp for the format and its version policy).

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wgsl_forge/error.hpp"

namespace wgsl_forge {

// Compares doubles as stored evidence: NaN equals NaN, -0 differs from +0, otherwise bit equality.
bool same_evidence_value(double a, double b);

// What the adapter says it is. `vendor` and `device` are PCI ids where the backend has them.
struct AdapterIdentity {
  std::string name;
  std::uint32_t vendor = 0;
  std::uint32_t device = 0;
  std::string device_type;  // "DiscreteGpu", "IntegratedGpu", "Cpu", "Unknown"
  std::string backend;      // "Vulkan", "Metal", "D3D12", ...
  std::string driver;
  std::string driver_info;

  bool operator==(const AdapterIdentity&) const = default;
};

enum class TargetBackend { kWgsl };
const char* target_backend_name(TargetBackend backend);
Result<TargetBackend> parse_target_backend(std::string_view name);

// A kernel's tunable knobs by name (workgroup_size, items_per_invocation, ...). Each kernel of
// the catalog defines its legal values and its default; the model only holds the values.
class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(std::map<std::string, std::int64_t> knobs) : knobs_(std::move(knobs)) {}

  const std::map<std::string, std::int64_t>& knobs() const { return knobs_; }
  std::optional<std::int64_t> get(std::string_view knob) const;
  void set(std::string knob, std::int64_t value) { knobs_[std::move(knob)] = value; }

  // "{items_per_invocation=4, workgroup_size=256}": knobs in name order.
  std::string to_string() const;

  bool operator==(const Schedule&) const = default;

 private:
  std::map<std::string, std::int64_t> knobs_;
};

enum class TimingSource { kGpuTimestamp, kHostClock, kSynthetic };
const char* timing_source_name(TimingSource source);
Result<TimingSource> parse_timing_source(std::string_view name);

// Statistics of timing samples in nanoseconds. The median decides, the MAD (median absolute
// deviation) says how noisy it was, p10/p90 bound the bulk; min and mean are kept because users
// compare against tools that report them.
struct TimingSummary {
  TimingSource source = TimingSource::kSynthetic;
  std::uint64_t sample_count = 0;
  std::uint64_t min_ns = 0;
  std::uint64_t max_ns = 0;
  double median_ns = 0;
  double mean_ns = 0;
  double mad_ns = 0;
  double p10_ns = 0;
  double p90_ns = 0;

  // An error for an empty sample set: a timing without samples is not evidence.
  static Result<TimingSummary> from_samples(TimingSource source,
                                            std::span<const std::uint64_t> samples_ns);

  bool operator==(const TimingSummary&) const = default;
};

struct Mismatch {
  std::uint64_t index = 0;
  double expected = 0;
  double actual = 0;

  bool operator==(const Mismatch& other) const;
};

// How a kernel's output compared with its CPU oracle.
struct ComparisonReport {
  std::uint64_t compared = 0;
  std::uint64_t mismatch_count = 0;
  std::optional<Mismatch> first_mismatch;
  double max_absolute_error = 0;
  double max_relative_error = 0;

  bool matches() const { return mismatch_count == 0; }
  bool operator==(const ComparisonReport& other) const;
};

struct CandidateResult {
  Schedule schedule;
  ComparisonReport oracle;
  TimingSummary timing;

  bool operator==(const CandidateResult&) const = default;
};

// Why a candidate schedule left the search.
enum class FailureStage { kCompile, kValidation, kExecution, kMismatch, kTimeout, kDeviceLost };
const char* failure_stage_name(FailureStage stage);
Result<FailureStage> parse_failure_stage(std::string_view name);

struct CandidateFailure {
  Schedule schedule;
  FailureStage stage = FailureStage::kCompile;
  std::string message;

  bool operator==(const CandidateFailure&) const = default;
};

// What became of one schedule that a search looked at.
struct CandidateRecord {
  // Where its numbers come from.
  enum class Origin {
    kMeasured,  // this search certified (quick cases) and timed it, or saw it fail
    // An earlier search on this topology and kernel revision measured it at the same problem and
    // stored the measurement (MeasurementRecord): an interrupted search resumes from it.
    kResumed,
    // It failed in an earlier search on this topology and kernel revision (a MeasurementRecord
    // of its failure): it is not run again and never published.
    kFailedBefore,
  };
  struct Failure {
    FailureStage stage = FailureStage::kCompile;
    std::string message;

    bool operator==(const Failure&) const = default;
  };

  Schedule schedule;
  Origin origin = Origin::kMeasured;
  std::optional<TimingSummary> timing;  // its first timing, when it got that far
  // Why it left the search, when it did: at screening, or as a finalist at its full
  // certification (then it also has a timing).
  std::optional<Failure> failure;
  bool finalist = false;  // re-timed with the other finalists

  bool operator==(const CandidateRecord&) const = default;
};
const char* candidate_origin_name(CandidateRecord::Origin origin);
Result<CandidateRecord::Origin> parse_candidate_origin(std::string_view name);

struct TuningResult {
  // Every schedule the search looked at, in the order it looked at them, with what became of it.
  std::vector<CandidateRecord> candidates;
  CandidateResult winner;
  // The finalists as re-timed together (their timings are the re-timed ones); the winner is one.
  std::vector<CandidateResult> finalists;

  // Candidates run on this topology (measured or resumed), and those of them that failed.
  std::uint64_t evaluated_candidates() const;
  std::uint64_t rejected_candidates() const;
  // Every failure, here or in an earlier search, in the order of the candidates.
  std::vector<CandidateFailure> failures() const;

  bool operator==(const TuningResult&) const = default;
};

enum class BindingKind { kStorageRead, kStorageReadWrite, kUniform };

struct KernelBinding {
  std::uint32_t group = 0;
  std::uint32_t binding = 0;
  BindingKind kind = BindingKind::kStorageRead;
  std::string name;

  bool operator==(const KernelBinding&) const = default;
};

// What the generator produced for one (kernel, schedule, backend). The dispatch plan depends on
// the problem size and lives with the kernel (src/kernels); this is the part that is evidence.
struct GeneratedKernel {
  std::string kernel_id;
  std::uint32_t kernel_revision = 0;
  TargetBackend backend = TargetBackend::kWgsl;
  Schedule schedule;
  std::string source;
  std::vector<std::string> entry_points;
  std::vector<KernelBinding> bindings;
  std::string source_hash;  // BLAKE3 of `source`, hex

  // Sets source_hash from source.
  void seal();
};

// What the tuner knew about the run besides the candidates.
struct TuningContext {
  std::optional<std::string> topology_hash;  // of the adapter + runtime the timings come from
  std::uint64_t problem_size = 0;            // elements (or M*N*K for GEMM); 0: not recorded
  std::vector<std::string> toggles;          // runtime toggles in force while timing, sorted
  std::optional<CandidateResult> baseline;   // the kernel's default schedule, measured alongside
  std::vector<Schedule> ties;                // finalists within timing noise of the winner
  // The size bucket tuned for (kernels::SizeBucket::label), for every bucket but the kernel's
  // main one, whose entry stays at the seed's topology key: the cache checks that an entry
  // belongs to the key of its bucket (ManifestCache::bucket_key).
  std::optional<std::string> bucket;
  // When the search ended, in UTC: "2026-12-02T15:33:31Z" (RFC 3339, whole seconds).
  std::string tuned_at;

  bool operator==(const TuningContext&) const = default;
};

// A rule of a manifest's create() that the manifest's own fields break: the field, as the on-disk
// form names it ("result.finalists"), and the rule in words, one sentence as create() reports it.
struct BrokenInvariant {
  std::string field;
  std::string rule;
};

// Evidence that `result.winner` is the fastest certified schedule of a kernel on an adapter.
struct TuningManifest {
  static constexpr std::uint32_t kSchemaVersion = 3;

  std::string cache_key;  // 64 hex; see compute_cache_key()
  std::string kernel_id;
  std::uint32_t kernel_revision = 0;
  TargetBackend backend = TargetBackend::kWgsl;
  std::string source_hash;  // of the winner's generated source
  AdapterIdentity adapter;
  TuningContext context;
  TuningResult result;

  // Checks that the evidence is coherent (the generated kernel is the winner's and its source
  // hash that of its source), sorts and deduplicates the toggles, sets context.tuned_at to now
  // when it is empty, computes the cache key and then requires broken_invariant() to find
  // nothing.
  static Result<TuningManifest> create(const GeneratedKernel& generated, AdapterIdentity adapter,
                                       TuningResult result, TuningContext context = {});

  // The invariants of every manifest create() makes, on the fields alone: a kernel id, a
  // topology hash of 64 hex characters (when recorded), candidates with distinct schedules, each
  // with a timing or a failure (only a failure when it failed before), a certified winner
  // (compared elements, no mismatch) that is among the finalists, finalists that are candidates
  // marked so, timed and not failed, sorted unique toggles, a tuned_at time, and the cache key
  // of the identity. The parser refuses a stored manifest that
  // breaks one, so what is read is what create() accepts. Whether the source hash is that of the
  // WGSL the generator writes for the winner needs the kernel: forge checks it where an entry is
  // used (forge::find_unusable_tuning).
  std::optional<BrokenInvariant> broken_invariant() const;

  // BLAKE3 over what identifies the tuned code and hardware: kernel id and revision, backend,
  // source hash, adapter identity and topology hash. Timings are not part of the key.
  std::string compute_cache_key() const;

  // Median speed-up of the winner over the baseline, when a baseline was measured.
  std::optional<double> speedup_over_baseline() const;

  bool operator==(const TuningManifest&) const = default;
};

enum class Verdict { kCertified, kRejected };
const char* verdict_name(Verdict verdict);

// One run of the kernel against its oracle: a size, a value profile and the seed that drew it.
struct CertificationCase {
  std::string name;
  std::uint64_t element_count = 0;
  std::string value_profile;
  std::uint64_t seed = 0;
  double allowed_absolute_error = 0;
  double allowed_relative_error = 0;
  ComparisonReport report;
  std::vector<std::string> failed_checks;  // kernel-specific checks (permutation, count, ...)
  // How many times the case ran on its inputs. From the second run on, every output must be the
  // first run's byte for byte where the kernel's result is deterministic (a difference is a
  // failed check): a kernel that is right only some of the time is caught.
  std::uint32_t runs = 1;

  bool passed() const { return report.matches() && failed_checks.empty(); }
  bool operator==(const CertificationCase& other) const;
};

// Certified when there is at least one case and every case passed.
Verdict verdict_of(const std::vector<CertificationCase>& cases);

// Evidence that one generated kernel computes what its oracle computes on one adapter.
struct CertificationManifest {
  static constexpr std::uint32_t kSchemaVersion = 2;

  // Absent when the adapter's topology hash is unknown: such a manifest cannot be cached.
  std::optional<std::string> cache_key;
  std::string kernel_id;
  std::uint32_t kernel_revision = 0;
  TargetBackend backend = TargetBackend::kWgsl;
  std::string source_hash;
  Schedule schedule;
  AdapterIdentity adapter;
  std::optional<std::string> topology_hash;
  std::string tolerance;  // the rule in words, e.g. "exact" or "|d| <= 2 n eps sum|x|"
  std::vector<CertificationCase> cases;
  Verdict verdict = Verdict::kRejected;

  // The verdict follows from the cases (see verdict_of); requires broken_invariant() to find
  // nothing in what it makes.
  static Result<CertificationManifest> create(const GeneratedKernel& generated,
                                              AdapterIdentity adapter,
                                              std::optional<std::string> topology_hash,
                                              std::string tolerance,
                                              std::vector<CertificationCase> cases);

  // The invariants of every manifest create() makes, on the fields alone: a kernel id, a
  // topology hash of 64 hex characters (when recorded), cases that ran at least once, the verdict
  // of the cases and the cache key of the identity. The parser refuses a stored manifest that
  // breaks one.
  std::optional<BrokenInvariant> broken_invariant() const;

  std::optional<std::string> compute_cache_key() const;

  bool operator==(const CertificationManifest&) const = default;
};

// One candidate's outcome in one search, stored in the cache as soon as it is known, so that a
// search interrupted on this topology resumes from what was measured (CandidateRecord::Origin::
// kResumed), and a schedule that failed here once is never run again nor published
// (kFailedBefore). Both are keyed by the code that ran (kernel, revision, schedule and the hash
// of its WGSL); a timing also by the problem it was measured at, a failure not, because code that
// once gave a wrong answer, hung or failed to run on this topology is not trusted at any size.
struct MeasurementRecord {
  static constexpr std::uint32_t kSchemaVersion = 1;

  std::string cache_key;  // timing_key or failure_key of the fields below
  std::string kernel_id;
  std::uint32_t kernel_revision = 0;
  std::string topology_hash;
  std::string source_hash;    // of the schedule's WGSL
  std::string problem;        // the problem timed, or the one searched when it failed ("n=1048576")
  CandidateRecord candidate;  // measured here: a timing or a failure, not a finalist
  std::string recorded_at;    // UTC, as TuningContext::tuned_at

  // What identifies the code a measurement is of, and where it ran.
  struct Code {
    std::string topology_hash;
    std::string kernel_id;
    std::uint32_t kernel_revision = 0;
    Schedule schedule;
    std::string source_hash;
  };
  static std::string timing_key(const Code& code, std::string_view problem);
  static std::string failure_key(const Code& code);

  // Checks the fields (the invariants below) and computes the cache key.
  static Result<MeasurementRecord> create(Code code, std::string problem, CandidateRecord candidate,
                                          std::string recorded_at);
  // A kernel id, topology and source hashes of 64 hex characters, a problem, a candidate of
  // origin measured that is not a finalist and has a failure or else a timing, a recorded_at
  // time, and the key of its kind.
  std::optional<BrokenInvariant> broken_invariant() const;
  bool is_failure() const { return candidate.failure.has_value(); }
  std::string compute_cache_key() const;

  bool operator==(const MeasurementRecord&) const = default;
};

// The current time as TuningContext::tuned_at writes it.
std::string utc_timestamp_now();

}  // namespace wgsl_forge
