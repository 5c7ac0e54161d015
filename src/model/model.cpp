#include "wgsl_forge/model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <ctime>
#include <numeric>

#include "json_codec.hpp"
#include "util/try.hpp"
#include "wgsl_forge/hash.hpp"

namespace wgsl_forge {

bool same_evidence_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

namespace {

template <typename Enum, std::size_t N>
Result<Enum> parse_enum(std::string_view name, const char* (*to_name)(Enum),
                        const Enum (&values)[N], const char* what) {
  for (Enum value : values) {
    if (name == to_name(value)) return value;
  }
  std::string known;
  for (Enum value : values) known += std::string(known.empty() ? "" : ", ") + to_name(value);
  return Error(ErrorKind::kInvalidInput, std::string("Unknown ") + what + " '" + std::string(name) +
                                             "' (known: " + known + ").");
}

// Canonical compact JSON of an identity object, hashed into cache keys. Invalid UTF-8 in adapter
// strings is replaced rather than failing: a key must always be computable.
std::string hash_identity(const json_codec::Json& identity) {
  return blake3_hex(identity.dump(-1, ' ', false, json_codec::Json::error_handler_t::replace));
}

}  // namespace

const char* target_backend_name(TargetBackend backend) {
  switch (backend) {
    case TargetBackend::kWgsl:
      return "wgsl";
  }
  return "unknown";
}

Result<TargetBackend> parse_target_backend(std::string_view name) {
  static constexpr TargetBackend kAll[] = {TargetBackend::kWgsl};
  return parse_enum(name, &target_backend_name, kAll, "target backend");
}

const char* timing_source_name(TimingSource source) {
  switch (source) {
    case TimingSource::kGpuTimestamp:
      return "gpu_timestamp";
    case TimingSource::kHostClock:
      return "host_clock";
    case TimingSource::kSynthetic:
      return "synthetic";
  }
  return "unknown";
}

Result<TimingSource> parse_timing_source(std::string_view name) {
  static constexpr TimingSource kAll[] = {TimingSource::kGpuTimestamp, TimingSource::kHostClock,
                                          TimingSource::kSynthetic};
  return parse_enum(name, &timing_source_name, kAll, "timing source");
}

const char* failure_stage_name(FailureStage stage) {
  switch (stage) {
    case FailureStage::kCompile:
      return "compile";
    case FailureStage::kValidation:
      return "validation";
    case FailureStage::kExecution:
      return "execution";
    case FailureStage::kMismatch:
      return "mismatch";
    case FailureStage::kTimeout:
      return "timeout";
    case FailureStage::kDeviceLost:
      return "device_lost";
  }
  return "unknown";
}

Result<FailureStage> parse_failure_stage(std::string_view name) {
  static constexpr FailureStage kAll[] = {FailureStage::kCompile,   FailureStage::kValidation,
                                          FailureStage::kExecution, FailureStage::kMismatch,
                                          FailureStage::kTimeout,   FailureStage::kDeviceLost};
  return parse_enum(name, &failure_stage_name, kAll, "failure stage");
}

const char* candidate_origin_name(CandidateRecord::Origin origin) {
  switch (origin) {
    case CandidateRecord::Origin::kMeasured:
      return "measured";
    case CandidateRecord::Origin::kResumed:
      return "resumed";
    case CandidateRecord::Origin::kFailedBefore:
      return "failed_before";
  }
  return "unknown";
}

Result<CandidateRecord::Origin> parse_candidate_origin(std::string_view name) {
  static constexpr CandidateRecord::Origin kAll[] = {CandidateRecord::Origin::kMeasured,
                                                     CandidateRecord::Origin::kResumed,
                                                     CandidateRecord::Origin::kFailedBefore};
  return parse_enum(name, &candidate_origin_name, kAll, "candidate origin");
}

std::uint64_t TuningResult::evaluated_candidates() const {
  return static_cast<std::uint64_t>(
      std::count_if(candidates.begin(), candidates.end(), [](const CandidateRecord& one) {
        return one.origin != CandidateRecord::Origin::kFailedBefore;
      }));
}

std::uint64_t TuningResult::rejected_candidates() const {
  return static_cast<std::uint64_t>(
      std::count_if(candidates.begin(), candidates.end(), [](const CandidateRecord& one) {
        return one.origin != CandidateRecord::Origin::kFailedBefore && one.failure.has_value();
      }));
}

std::vector<CandidateFailure> TuningResult::failures() const {
  std::vector<CandidateFailure> list;
  for (const CandidateRecord& one : candidates) {
    if (one.failure) list.push_back({one.schedule, one.failure->stage, one.failure->message});
  }
  return list;
}

const char* verdict_name(Verdict verdict) {
  return verdict == Verdict::kCertified ? "certified" : "rejected";
}

std::optional<std::int64_t> Schedule::get(std::string_view knob) const {
  auto it = knobs_.find(std::string(knob));
  if (it == knobs_.end()) return std::nullopt;
  return it->second;
}

std::string Schedule::to_string() const {
  std::string text = "{";
  for (const auto& [name, value] : knobs_) {
    if (text.size() > 1) text += ", ";
    text += name + "=" + std::to_string(value);
  }
  return text + "}";
}

Result<TimingSummary> TimingSummary::from_samples(TimingSource source,
                                                  std::span<const std::uint64_t> samples_ns) {
  if (samples_ns.empty()) {
    return Error(ErrorKind::kInvalidInput,
                 std::string("A timing summary needs at least one sample (got 0 from ") +
                     timing_source_name(source) + ").");
  }
  std::vector<double> sorted(samples_ns.begin(), samples_ns.end());
  std::sort(sorted.begin(), sorted.end());
  // Linear interpolation between closest ranks, as numpy's default percentile does.
  auto quantile = [](const std::vector<double>& values, double q) {
    double position = q * static_cast<double>(values.size() - 1);
    auto lower = static_cast<std::size_t>(std::floor(position));
    std::size_t upper = std::min(lower + 1, values.size() - 1);
    double fraction = position - static_cast<double>(lower);
    return values[lower] + (values[upper] - values[lower]) * fraction;
  };

  TimingSummary summary;
  summary.source = source;
  summary.sample_count = samples_ns.size();
  summary.min_ns = *std::min_element(samples_ns.begin(), samples_ns.end());
  summary.max_ns = *std::max_element(samples_ns.begin(), samples_ns.end());
  summary.median_ns = quantile(sorted, 0.5);
  summary.p10_ns = quantile(sorted, 0.1);
  summary.p90_ns = quantile(sorted, 0.9);
  summary.mean_ns =
      std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
  std::vector<double> deviations;
  deviations.reserve(sorted.size());
  for (double value : sorted) deviations.push_back(std::abs(value - summary.median_ns));
  std::sort(deviations.begin(), deviations.end());
  summary.mad_ns = quantile(deviations, 0.5);
  return summary;
}

bool Mismatch::operator==(const Mismatch& other) const {
  return index == other.index && same_evidence_value(expected, other.expected) &&
         same_evidence_value(actual, other.actual);
}

bool ComparisonReport::operator==(const ComparisonReport& other) const {
  return compared == other.compared && mismatch_count == other.mismatch_count &&
         first_mismatch == other.first_mismatch &&
         same_evidence_value(max_absolute_error, other.max_absolute_error) &&
         same_evidence_value(max_relative_error, other.max_relative_error);
}

bool CertificationCase::operator==(const CertificationCase& other) const {
  return name == other.name && element_count == other.element_count &&
         value_profile == other.value_profile && seed == other.seed &&
         same_evidence_value(allowed_absolute_error, other.allowed_absolute_error) &&
         same_evidence_value(allowed_relative_error, other.allowed_relative_error) &&
         report == other.report && failed_checks == other.failed_checks && runs == other.runs;
}

Verdict verdict_of(const std::vector<CertificationCase>& cases) {
  bool all_passed = !cases.empty() && std::all_of(cases.begin(), cases.end(),
                                                  [](const auto& one) { return one.passed(); });
  return all_passed ? Verdict::kCertified : Verdict::kRejected;
}

void GeneratedKernel::seal() { source_hash = blake3_hex(source); }

namespace {

// A manifest records the source hash but not the source, so create() checks it on its input.
Status check_generated(const GeneratedKernel& generated) {
  if (generated.source_hash != blake3_hex(generated.source)) {
    return Error(ErrorKind::kInvalidInput,
                 "The generated kernel's source hash (" + generated.source_hash +
                     ") is not the BLAKE3 of its source (" + blake3_hex(generated.source) +
                     "); call GeneratedKernel::seal() after changing the source.");
  }
  return Ok{};
}

std::optional<BrokenInvariant> broken_kernel_id(const std::string& kernel_id) {
  if (kernel_id.empty()) return BrokenInvariant{"kernel_id", "The kernel id is empty."};
  return std::nullopt;
}

std::optional<BrokenInvariant> broken_topology_hash(const std::optional<std::string>& topology_hash,
                                                    const char* field) {
  if (topology_hash && !is_hex_digest(*topology_hash)) {
    return BrokenInvariant{
        field, "Topology hash (" + *topology_hash + ") is not 64 hexadecimal characters."};
  }
  return std::nullopt;
}

std::optional<BrokenInvariant> broken_candidate(const CandidateRecord& candidate,
                                                const std::string& field) {
  const std::string schedule = candidate.schedule.to_string();
  if (!candidate.timing && !candidate.failure) {
    return BrokenInvariant{field, "Candidate " + schedule + " has neither a timing nor a failure."};
  }
  if (candidate.origin == CandidateRecord::Origin::kFailedBefore &&
      (candidate.timing || !candidate.failure || candidate.finalist)) {
    return BrokenInvariant{field, "Candidate " + schedule +
                                      " failed before: it has a failure and no timing, and is "
                                      "not a finalist."};
  }
  if (candidate.finalist && !candidate.timing) {
    return BrokenInvariant{field, "Candidate " + schedule + " is a finalist without a timing."};
  }
  if (candidate.failure && candidate.failure->message.empty()) {
    return BrokenInvariant{field + ".failure.message",
                           "Candidate " + schedule + " failed without a message."};
  }
  return std::nullopt;
}

std::optional<BrokenInvariant> broken_tuning_result(const TuningResult& result) {
  const CandidateResult& winner = result.winner;
  if (!winner.oracle.matches() || winner.oracle.compared == 0) {
    return BrokenInvariant{"result.winner.oracle",
                           "The winner " + winner.schedule.to_string() + " is not certified (" +
                               std::to_string(winner.oracle.mismatch_count) + " mismatches in " +
                               std::to_string(winner.oracle.compared) +
                               " compared elements); only certified schedules can win."};
  }
  if (std::find(result.finalists.begin(), result.finalists.end(), winner) ==
      result.finalists.end()) {
    return BrokenInvariant{"result.finalists", "The winner " + winner.schedule.to_string() +
                                                   " is not among the finalists."};
  }
  for (std::size_t i = 0; i < result.candidates.size(); ++i) {
    const CandidateRecord& candidate = result.candidates[i];
    const std::string field = "result.candidates[" + std::to_string(i) + "]";
    if (auto broken = broken_candidate(candidate, field)) return broken;
    for (std::size_t j = 0; j < i; ++j) {
      if (result.candidates[j].schedule == candidate.schedule) {
        return BrokenInvariant{field, "Candidate " + candidate.schedule.to_string() +
                                          " is listed twice (also at " + std::to_string(j) + ")."};
      }
    }
  }
  for (std::size_t i = 0; i < result.finalists.size(); ++i) {
    const Schedule& finalist = result.finalists[i].schedule;
    auto candidate =
        std::find_if(result.candidates.begin(), result.candidates.end(),
                     [&](const CandidateRecord& one) { return one.schedule == finalist; });
    if (candidate == result.candidates.end() || !candidate->finalist || candidate->failure) {
      return BrokenInvariant{"result.finalists[" + std::to_string(i) + "]",
                             "Finalist " + finalist.to_string() +
                                 " is not a candidate marked finalist without a failure."};
    }
  }
  return std::nullopt;
}

// "2026-12-02T15:33:31Z": what utc_timestamp_now writes.
bool is_utc_timestamp(std::string_view text) {
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:ddZ";
  if (text.size() != kShape.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (kShape[i] == 'd' ? !digit : text[i] != kShape[i]) return false;
  }
  return true;
}

std::optional<BrokenInvariant> broken_timestamp(const std::string& timestamp, const char* field) {
  if (is_utc_timestamp(timestamp)) return std::nullopt;
  return BrokenInvariant{field, "The time ('" + timestamp.substr(0, 40) +
                                    "') is not a UTC time like 2026-12-02T15:33:31Z."};
}

// Bucket labels are what kernels::SizeBucket makes ("2^20", "1024^3", "512x256x128", "2^28x32",
// "2^28g2^20"): they are hashed into cache keys and printed, so nothing else is accepted.
std::optional<BrokenInvariant> broken_bucket(const std::optional<std::string>& bucket) {
  if (!bucket) return std::nullopt;
  const bool well_formed = !bucket->empty() && bucket->size() <= 32 &&
                           std::all_of(bucket->begin(), bucket->end(), [](char c) {
                             return (c >= '0' && c <= '9') || c == '^' || c == 'x' || c == 'g';
                           });
  if (well_formed) return std::nullopt;
  return BrokenInvariant{"context.bucket",
                         "The size bucket ('" + bucket->substr(0, 40) +
                             "') is not a label of 1 to 32 digits, '^', 'x' and 'g'."};
}

// create() sorts and deduplicates the toggles, so a manifest it made always has them so.
std::optional<BrokenInvariant> broken_toggles(const std::vector<std::string>& toggles) {
  for (std::size_t i = 1; i < toggles.size(); ++i) {
    if (toggles[i - 1] >= toggles[i]) {
      return BrokenInvariant{"context.toggles", "The toggles are not sorted and unique ('" +
                                                    toggles[i - 1] + "' comes before '" +
                                                    toggles[i] + "')."};
    }
  }
  return std::nullopt;
}

std::optional<BrokenInvariant> broken_cache_key(const std::optional<std::string>& recorded,
                                                const std::optional<std::string>& computed,
                                                const char* describes) {
  if (recorded == computed) return std::nullopt;
  return BrokenInvariant{
      "cache_key", "The cache key (" + recorded.value_or("null") + ") does not match the " +
                       describes + " the manifest describes (" + computed.value_or("null") + ")."};
}

Error invariant_error(const BrokenInvariant& broken, const char* what,
                      const std::string& kernel_id) {
  return Error(ErrorKind::kInvalidInput, broken.rule)
      .with_context(std::string("building the ") + what + " manifest of " + kernel_id);
}

}  // namespace

Result<TuningManifest> TuningManifest::create(const GeneratedKernel& generated,
                                              AdapterIdentity adapter, TuningResult result,
                                              TuningContext context) {
  WF_TRY_CONTEXT(check_generated(generated),
                 "building the tuning manifest of " + generated.kernel_id);
  // A tuning manifest has one schedule, the winner's: the generated kernel must be of it.
  if (generated.schedule != result.winner.schedule) {
    return Error(ErrorKind::kInvalidInput,
                 "The generated kernel's schedule " + generated.schedule.to_string() +
                     " is not the winner's " + result.winner.schedule.to_string() + ".")
        .with_context("building the tuning manifest of " + generated.kernel_id);
  }
  if (context.tuned_at.empty()) context.tuned_at = utc_timestamp_now();
  std::sort(context.toggles.begin(), context.toggles.end());
  context.toggles.erase(std::unique(context.toggles.begin(), context.toggles.end()),
                        context.toggles.end());

  TuningManifest manifest;
  manifest.kernel_id = generated.kernel_id;
  manifest.kernel_revision = generated.kernel_revision;
  manifest.backend = generated.backend;
  manifest.source_hash = generated.source_hash;
  manifest.adapter = std::move(adapter);
  manifest.context = std::move(context);
  manifest.result = std::move(result);
  manifest.cache_key = manifest.compute_cache_key();
  if (auto broken = manifest.broken_invariant()) {
    return invariant_error(*broken, "tuning", manifest.kernel_id);
  }
  return manifest;
}

std::optional<BrokenInvariant> TuningManifest::broken_invariant() const {
  if (auto broken = broken_kernel_id(kernel_id)) return broken;
  if (auto broken = broken_topology_hash(context.topology_hash, "context.topology_hash")) {
    return broken;
  }
  if (auto broken = broken_tuning_result(result)) return broken;
  if (auto broken = broken_toggles(context.toggles)) return broken;
  if (auto broken = broken_bucket(context.bucket)) return broken;
  if (auto broken = broken_timestamp(context.tuned_at, "context.tuned_at")) return broken;
  return broken_cache_key(cache_key, compute_cache_key(), "kernel, adapter, topology and bucket");
}

std::string TuningManifest::compute_cache_key() const {
  json_codec::Json identity = {
      {"manifest_kind", "tuning"},
      {"kernel_id", kernel_id},
      {"kernel_revision", kernel_revision},
      {"backend", target_backend_name(backend)},
      {"source_hash", source_hash},
      {"adapter", json_codec::encode(adapter)},
      {"topology_hash",
       context.topology_hash ? json_codec::Json(*context.topology_hash) : json_codec::Json()},
      {"bucket", context.bucket ? json_codec::Json(*context.bucket) : json_codec::Json()}};
  return hash_identity(identity);
}

std::optional<double> TuningManifest::speedup_over_baseline() const {
  if (!context.baseline || result.winner.timing.median_ns <= 0) return std::nullopt;
  return context.baseline->timing.median_ns / result.winner.timing.median_ns;
}

Result<CertificationManifest> CertificationManifest::create(
    const GeneratedKernel& generated, AdapterIdentity adapter,
    std::optional<std::string> topology_hash, std::string tolerance,
    std::vector<CertificationCase> cases) {
  WF_TRY_CONTEXT(check_generated(generated),
                 "building the certification manifest of " + generated.kernel_id);
  CertificationManifest manifest;
  manifest.kernel_id = generated.kernel_id;
  manifest.kernel_revision = generated.kernel_revision;
  manifest.backend = generated.backend;
  manifest.source_hash = generated.source_hash;
  manifest.schedule = generated.schedule;
  manifest.adapter = std::move(adapter);
  manifest.topology_hash = std::move(topology_hash);
  manifest.tolerance = std::move(tolerance);
  manifest.cases = std::move(cases);
  manifest.verdict = verdict_of(manifest.cases);
  manifest.cache_key = manifest.compute_cache_key();
  if (auto broken = manifest.broken_invariant()) {
    return invariant_error(*broken, "certification", manifest.kernel_id);
  }
  return manifest;
}

std::optional<BrokenInvariant> CertificationManifest::broken_invariant() const {
  if (auto broken = broken_kernel_id(kernel_id)) return broken;
  if (auto broken = broken_topology_hash(topology_hash, "topology_hash")) return broken;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].runs == 0) {
      return BrokenInvariant{"cases[" + std::to_string(i) + "].runs",
                             "Case '" + cases[i].name + "' never ran (runs is 0)."};
    }
  }
  if (verdict != verdict_of(cases)) {
    return BrokenInvariant{"verdict", std::string("The verdict (") + verdict_name(verdict) +
                                          ") contradicts the cases, which make it " +
                                          verdict_name(verdict_of(cases)) + "."};
  }
  return broken_cache_key(cache_key, compute_cache_key(), "kernel and topology");
}

std::optional<std::string> CertificationManifest::compute_cache_key() const {
  if (!topology_hash) return std::nullopt;
  json_codec::Json identity = {{"manifest_kind", "certification"},
                               {"kernel_id", kernel_id},
                               {"kernel_revision", kernel_revision},
                               {"backend", target_backend_name(backend)},
                               {"source_hash", source_hash},
                               {"schedule", json_codec::encode(schedule)},
                               {"adapter", json_codec::encode(adapter)},
                               {"topology_hash", *topology_hash}};
  return hash_identity(identity);
}

namespace {

json_codec::Json measurement_identity(const MeasurementRecord::Code& code, const char* outcome) {
  return {{"manifest_kind", "measurement"},      {"outcome", outcome},
          {"kernel_id", code.kernel_id},         {"kernel_revision", code.kernel_revision},
          {"topology_hash", code.topology_hash}, {"schedule", json_codec::encode(code.schedule)},
          {"source_hash", code.source_hash}};
}

}  // namespace

std::string MeasurementRecord::timing_key(const Code& code, std::string_view problem) {
  json_codec::Json identity = measurement_identity(code, "timing");
  identity["problem"] = problem;
  return hash_identity(identity);
}

std::string MeasurementRecord::failure_key(const Code& code) {
  return hash_identity(measurement_identity(code, "failure"));
}

std::string MeasurementRecord::compute_cache_key() const {
  const Code code{topology_hash, kernel_id, kernel_revision, candidate.schedule, source_hash};
  return is_failure() ? failure_key(code) : timing_key(code, problem);
}

Result<MeasurementRecord> MeasurementRecord::create(Code code, std::string problem,
                                                    CandidateRecord candidate,
                                                    std::string recorded_at) {
  MeasurementRecord record;
  record.kernel_id = std::move(code.kernel_id);
  record.kernel_revision = code.kernel_revision;
  record.topology_hash = std::move(code.topology_hash);
  record.source_hash = std::move(code.source_hash);
  record.problem = std::move(problem);
  record.candidate = std::move(candidate);
  record.candidate.schedule = std::move(code.schedule);
  record.recorded_at = std::move(recorded_at);
  record.cache_key = record.compute_cache_key();
  if (auto broken = record.broken_invariant()) {
    return invariant_error(*broken, "measurement", record.kernel_id);
  }
  return record;
}

std::optional<BrokenInvariant> MeasurementRecord::broken_invariant() const {
  if (auto broken = broken_kernel_id(kernel_id)) return broken;
  if (auto broken = broken_topology_hash(topology_hash, "topology_hash")) return broken;
  if (!is_hex_digest(source_hash)) {
    return BrokenInvariant{"source_hash", "The source hash (" + source_hash.substr(0, 80) +
                                              ") is not 64 hexadecimal characters."};
  }
  if (problem.empty()) return BrokenInvariant{"problem", "The problem is empty."};
  if (auto broken = broken_candidate(candidate, "candidate")) return broken;
  if (candidate.origin != CandidateRecord::Origin::kMeasured || candidate.finalist) {
    return BrokenInvariant{"candidate",
                           "A measurement is of a candidate measured here, not a finalist."};
  }
  if (auto broken = broken_timestamp(recorded_at, "recorded_at")) return broken;
  return broken_cache_key(cache_key, compute_cache_key(), "outcome, kernel, topology and problem");
}

std::string utc_timestamp_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace wgsl_forge
