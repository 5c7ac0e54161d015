#include "support/test_manifests.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "wgsl_forge/hash.hpp"

namespace wgsl_forge::testing {

std::uint64_t test_seed() {
  if (const char* fixed = std::getenv("WGSL_FORGE_TEST_SEED")) return std::stoull(fixed);
  return std::random_device{}() * 0x100000001ull + std::random_device{}();
}

AdapterIdentity test_adapter() {
  return AdapterIdentity{"test", 1, 2, "DiscreteGpu", "Vulkan", "test", "1"};
}

Schedule default_affine_schedule() {
  return Schedule({{"workgroup_size", 256}, {"items_per_invocation", 1}, {"vector_width", 1}});
}

GeneratedKernel affine_kernel(const Schedule& schedule) {
  GeneratedKernel kernel;
  kernel.kernel_id = "affine_f32";
  kernel.kernel_revision = 1;
  kernel.schedule = schedule;
  kernel.source =
      "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
      "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
      "@compute @workgroup_size(" +
      std::to_string(schedule.get("workgroup_size").value_or(64)) +
      ")\nfn main(@builtin(global_invocation_id) id: vec3u) {\n"
      "  if (id.x < arrayLength(&x)) { y[id.x] = 2.0 * x[id.x] + 1.0; }\n}\n";
  kernel.entry_points = {"main"};
  kernel.bindings = {{0, 0, BindingKind::kStorageRead, "x"},
                     {0, 1, BindingKind::kStorageReadWrite, "y"}};
  kernel.seal();
  return kernel;
}

CandidateResult certified_candidate(const Schedule& schedule, std::uint64_t median_ns) {
  ComparisonReport report{1024, 0, std::nullopt, 0.0, 0.0};
  std::uint64_t samples[] = {median_ns, median_ns + 1, median_ns - 1};
  return CandidateResult{schedule, report,
                         TimingSummary::from_samples(TimingSource::kSynthetic, samples).value()};
}

namespace {

double random_double(std::mt19937_64& random) {
  switch (random() % 8) {
    case 0:
      return std::numeric_limits<double>::quiet_NaN();
    case 1:
      return std::numeric_limits<double>::infinity();
    case 2:
      return -std::numeric_limits<double>::infinity();
    case 3:
      return -0.0;
    case 4:
      return std::numeric_limits<float>::denorm_min();
    case 5:
      return std::uniform_real_distribution<double>(-1e300, 1e300)(random);
    default:
      return std::uniform_real_distribution<double>(-10, 10)(random);
  }
}

std::string random_text(std::mt19937_64& random) {
  static const char* const kPieces[] = {"llvmpipe", "NVIDIA H200", "\"quoted\"", "tab\there",
                                        "ünïcödé",  "back\\slash", "",           "line\nbreak"};
  return std::string(kPieces[random() % 8]) + std::to_string(random() % 1000);
}

Schedule random_schedule(std::mt19937_64& random) {
  Schedule schedule;
  schedule.set("workgroup_size", 32 << (random() % 4));
  schedule.set("items_per_invocation", 1 << (random() % 4));
  if (random() % 2) schedule.set("vector_width", 4);
  if (random() % 4 == 0) schedule.set("negative_knob", -static_cast<std::int64_t>(random() % 9));
  return schedule;
}

ComparisonReport random_report(std::mt19937_64& random, bool matching) {
  ComparisonReport report;
  report.compared = random() % (1u << 30);
  report.mismatch_count = matching ? 0 : 1 + random() % 100;
  if (!matching)
    report.first_mismatch = Mismatch{random() % 1000, random_double(random), random_double(random)};
  report.max_absolute_error = matching ? 0.0 : random_double(random);
  report.max_relative_error = matching ? 1e-7 : random_double(random);
  return report;
}

CandidateResult random_candidate(std::mt19937_64& random, const Schedule& schedule) {
  std::vector<std::uint64_t> samples(1 + random() % 9);
  for (auto& sample : samples) sample = 1000 + random() % 1000000;
  TimingSource source = random() % 2 ? TimingSource::kGpuTimestamp : TimingSource::kHostClock;
  ComparisonReport report = random_report(random, true);
  report.compared += 1;
  return CandidateResult{schedule, report, TimingSummary::from_samples(source, samples).value()};
}

// A candidate record of any origin, with what that origin allows.
CandidateRecord random_record(std::mt19937_64& random, const Schedule& schedule) {
  CandidateRecord record;
  record.schedule = schedule;
  record.origin = static_cast<CandidateRecord::Origin>(random() % 3);
  const bool failed = record.origin == CandidateRecord::Origin::kFailedBefore || random() % 2 == 0;
  if (failed) {
    record.failure = CandidateRecord::Failure{static_cast<FailureStage>(random() % 6),
                                              "failed: " + random_text(random)};
  }
  if (record.origin != CandidateRecord::Origin::kFailedBefore && (!failed || random() % 2 == 0)) {
    record.timing = random_candidate(random, schedule).timing;
  }
  return record;
}

}  // namespace

TuningResult single_winner_result(const CandidateResult& winner) {
  TuningResult result;
  result.candidates = {
      {winner.schedule, CandidateRecord::Origin::kMeasured, winner.timing, std::nullopt, true}};
  result.winner = winner;
  result.finalists = {winner};
  return result;
}

MeasurementRecord random_measurement_record(std::mt19937_64& random) {
  CandidateRecord candidate = random_record(random, random_schedule(random));
  candidate.origin = CandidateRecord::Origin::kMeasured;
  if (candidate.failure) candidate.timing.reset();
  if (!candidate.failure && !candidate.timing) {
    candidate.timing = random_candidate(random, candidate.schedule).timing;
  }
  MeasurementRecord::Code code{random_topology_hash(random), "affine_f32",
                               static_cast<std::uint32_t>(random() % 10), candidate.schedule,
                               blake3_hex(random_text(random))};
  return MeasurementRecord::create(std::move(code), "n=" + std::to_string(random() % (1u << 30)),
                                   std::move(candidate), "2026-12-02T15:33:31Z")
      .value();
}

std::string random_topology_hash(std::mt19937_64& random) {
  return blake3_hex(std::to_string(random()));
}

TuningManifest random_tuning_manifest(std::mt19937_64& random) {
  Schedule winner_schedule = random_schedule(random);
  GeneratedKernel generated = affine_kernel(winner_schedule);
  generated.kernel_revision = static_cast<std::uint32_t>(random() % 10);
  TuningResult result;
  result.winner = random_candidate(random, winner_schedule);
  Schedule other = random_schedule(random);
  while (other == winner_schedule) other.set("items_per_invocation", 1 << (random() % 8));
  result.finalists = {random_candidate(random, other), result.winner};
  for (const CandidateResult& finalist : result.finalists) {
    result.candidates.push_back(random_record(random, finalist.schedule));
    result.candidates.back().finalist = true;
    if (result.candidates.back().origin == CandidateRecord::Origin::kFailedBefore)
      result.candidates.back().origin = CandidateRecord::Origin::kResumed;
    result.candidates.back().failure.reset();
    result.candidates.back().timing = random_candidate(random, finalist.schedule).timing;
  }
  for (std::uint64_t i = random() % 6; i > 0; --i) {
    CandidateRecord record = random_record(random, random_schedule(random));
    const bool seen =
        std::any_of(result.candidates.begin(), result.candidates.end(),
                    [&](const CandidateRecord& one) { return one.schedule == record.schedule; });
    if (!seen) result.candidates.push_back(std::move(record));
  }
  AdapterIdentity adapter{random_text(random),
                          static_cast<std::uint32_t>(random()),
                          static_cast<std::uint32_t>(random()),
                          random() % 2 ? "DiscreteGpu" : "Cpu",
                          "Vulkan",
                          random_text(random),
                          random_text(random)};
  TuningContext context;
  if (random() % 3) context.topology_hash = random_topology_hash(random);
  context.problem_size = random();
  if (random() % 2) context.toggles = {"timestamp_quantization=off", "disable_robustness"};
  if (random() % 2) context.baseline = random_candidate(random, default_affine_schedule());
  if (random() % 2) context.ties = {random_schedule(random)};
  context.tuned_at = "20" + std::to_string(10 + random() % 90) + "-0" +
                     std::to_string(1 + random() % 9) + "-1" + std::to_string(random() % 10) +
                     "T0" + std::to_string(random() % 10) + ":1" + std::to_string(random() % 10) +
                     ":5" + std::to_string(random() % 10) + "Z";
  return TuningManifest::create(generated, adapter, result, context).value();
}

CertificationManifest random_certification_manifest(std::mt19937_64& random) {
  GeneratedKernel generated = affine_kernel(random_schedule(random));
  std::vector<CertificationCase> cases;
  for (std::uint64_t i = 1 + random() % 4; i > 0; --i) {
    CertificationCase one_case;
    one_case.name = "case" + std::to_string(i);
    one_case.element_count = random() % 5000000;
    one_case.value_profile = random() % 2 ? "uniform" : "specials";
    one_case.seed = random();
    one_case.allowed_absolute_error = random_double(random);
    one_case.allowed_relative_error = 1e-6;
    one_case.report = random_report(random, random() % 4 != 0);
    if (random() % 8 == 0) one_case.failed_checks = {"output is not a permutation of the input"};
    one_case.runs = 1 + static_cast<std::uint32_t>(random() % 3);
    cases.push_back(std::move(one_case));
  }
  std::optional<std::string> topology;
  if (random() % 4) topology = random_topology_hash(random);
  return CertificationManifest::create(generated, test_adapter(), topology, "|gpu - cpu| <= 2 ulp",
                                       cases)
      .value();
}

}  // namespace wgsl_forge::testing
