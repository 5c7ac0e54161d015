// The tuner facing candidates that misbehave on the real adapter: one that does not compile, one
// that fails pipeline validation, one that runs far longer than the watchdog allows, one that
// computes a wrong answer; a device that is lost in the middle of a search, and the search that
// resumes from what it measured; a schedule that failed here once.

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>

#include "gpu/gpu_test_support.hpp"
#include "support/delegating_kernel.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {
namespace {

enum Mode : std::int64_t { kHealthy, kNoCompile, kInvalidPipeline, kSlow, kWrong };

// affine_f32 with one extra knob, `mode`, that makes its WGSL misbehave in one way; every other
// knob is pinned to affine's default so that the space is exactly the five modes.
class MisbehavingAffine final : public testing::DelegatingKernel {
 public:
  explicit MisbehavingAffine(std::uint64_t spin_iterations)
      : DelegatingKernel("affine_f32"), spin_(spin_iterations) {}

  std::string_view id() const override { return "misbehaving_affine"; }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override { return "affine_f32 with a misbehaviour knob"; }
  std::vector<kernels::KnobSpec> knobs() const override {
    std::vector<kernels::KnobSpec> pinned;
    for (kernels::KnobSpec knob : base_.knobs()) {
      knob.values = {knob.default_value};
      pinned.push_back(knob);
    }
    pinned.push_back({"mode",
                      "0 healthy, 1 no compile, 2 invalid pipeline, 3 slow, 4 wrong",
                      {kHealthy, kNoCompile, kInvalidPipeline, kSlow, kWrong},
                      kHealthy});
    return pinned;
  }
  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    return base_.entry_points(without_mode(schedule));
  }
  std::string generate_wgsl(const Schedule& schedule) const override {
    std::string wgsl = base_.generate_wgsl(without_mode(schedule));
    switch (*schedule.get("mode")) {
      case kNoCompile:
        return wgsl + "\nfn broken( {\n";
      case kInvalidPipeline:
        return replace(wgsl, "const WG: u32 = 256u;", "const WG: u32 = 4096u;");
      case kSlow:
        // Invocation 0 runs a dependent loop the compiler cannot remove.
        return replace(wgsl, "  for (var item = 0u;",
                       "  if (first == 0u) {\n    var h = bitcast<u32>(params.a);\n"
                       "    for (var k = 0u; k < " +
                           std::to_string(spin_) +
                           "u; k++) { h = h * 1664525u + 1013904223u; }\n"
                           "    if (h == 0x9e3779b9u) { y[0] = 0.0; }\n  }\n"
                           "  for (var item = 0u;");
      case kWrong:
        return replace(wgsl, "params.a * x[i] + params.b", "params.a * x[i] + params.b + 0.25");
      default:
        return wgsl;
    }
  }
  Result<kernels::DispatchPlan> plan(const Schedule& schedule, const kernels::Problem& problem,
                                     const kernels::DeviceCapabilities& device) const override {
    return base_.plan(without_mode(schedule), problem, device);
  }

 private:
  static Schedule without_mode(const Schedule& schedule) {
    std::map<std::string, std::int64_t> knobs = schedule.knobs();
    knobs.erase("mode");
    return Schedule(knobs);
  }
  static std::string replace(std::string text, const std::string& from, const std::string& to) {
    std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << "affine_f32's WGSL no longer contains '" << from << "'";
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  }

  std::uint64_t spin_;
};

Schedule with_mode(const kernels::KernelDefinition& kernel, Mode mode) {
  Schedule schedule = kernel.default_schedule();
  schedule.set("mode", mode);
  return schedule;
}

// How long one run of the slow mode takes on one element, with the usual (long) wait timeout.
// The second run is timed: lavapipe compiles a pipeline's machine code at its first dispatch,
// which on a busy machine can take longer than the spin itself and would make it look slow.
std::chrono::milliseconds slow_run_time(gpu::Device& device, std::uint64_t spin) {
  MisbehavingAffine kernel(spin);
  auto generated = kernels::generate_builtin(kernel, with_mode(kernel, kSlow), TargetBackend::kWgsl,
                                             forge::capabilities_of(device.adapter()));
  EXPECT_TRUE(generated.ok()) << generated.error().to_string();
  auto prepared = forge::PreparedKernel::prepare(device, kernel, *generated);
  EXPECT_TRUE(prepared.ok()) << prepared.error().to_string();
  kernels::CaseSpec one{"n=1", {}, "uniform"};
  one.problem.elements = 1;
  EXPECT_TRUE(prepared->run(kernel.make_inputs(one, 1)).ok());
  auto start = std::chrono::steady_clock::now();
  auto ran = prepared->run(kernel.make_inputs(one, 1));
  EXPECT_TRUE(ran.ok()) << ran.error().to_string();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

TEST(TunerFaultTest, FailingCandidatesAreRecordedAndTheSearchGoesOn) {
  auto device = gpu::Device::open(gpu::RuntimeOptions{}).value();
  // A spin of about 1.5 seconds here (the loop's time is linear in its length), so that a
  // 150 ms watchdog fires on it and on nothing else (a healthy quick case takes milliseconds),
  // and it still occupies the GPU when the next candidate comes.
  std::uint64_t spin = 1u << 16;
  std::chrono::milliseconds spun{0};
  while ((spun = slow_run_time(*device, spin)) < std::chrono::milliseconds(100)) spin *= 2;
  spin = spin * 1500 / static_cast<std::uint64_t>(spun.count());
  MisbehavingAffine kernel(spin);
  forge::TuneOptions options;
  options.candidate_timeout = std::chrono::milliseconds(150);
  options.budget = 5;
  options.seed = testing::test_seed();
  kernels::Problem problem;
  problem.elements = 4096;
  options.problem = problem;
  std::vector<forge::TuneProgress> outcomes;  // each candidate's "timed" or "failed" report
  options.progress = [&outcomes](const forge::TuneProgress& step) {
    if (step.stage == "timed" || step.stage == "failed") outcomes.push_back(step);
  };
  Result<forge::TuneOutcome> outcome = forge::tune(*device, kernel, options);
  ASSERT_TRUE(outcome.ok()) << outcome.error().to_string() << ", seed " << options.seed;

  const TuningResult& result = outcome->manifest.result;
  EXPECT_EQ(result.winner.schedule, with_mode(kernel, kHealthy));
  EXPECT_EQ(result.evaluated_candidates(), 5u);
  std::map<std::int64_t, FailureStage> stages;
  for (const CandidateFailure& failure : result.failures()) {
    stages[*failure.schedule.get("mode")] = failure.stage;
  }
  EXPECT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[kNoCompile], FailureStage::kCompile);
  EXPECT_EQ(stages[kInvalidPipeline], FailureStage::kValidation);
  EXPECT_EQ(stages[kSlow], FailureStage::kTimeout) << "spin " << spin;
  // Evaluated after the slow one, which still occupied the GPU: judged on its output all the same.
  EXPECT_EQ(stages[kWrong], FailureStage::kMismatch);
  // Progress reported every candidate's outcome as it happened, each under its own number.
  ASSERT_EQ(outcomes.size(), 5u);
  std::set<std::size_t> numbers;
  for (const forge::TuneProgress& step : outcomes) {
    numbers.insert(step.candidate);
    const bool healthy = *step.schedule->get("mode") == kHealthy;
    EXPECT_EQ(step.stage, healthy ? "timed" : "failed");
    EXPECT_EQ(step.timing.has_value(), healthy);
    if (healthy) {
      EXPECT_GT(step.timing->median_ns, 0);
    } else {
      EXPECT_EQ(step.failure->stage, stages[*step.schedule->get("mode")]);
    }
  }
  EXPECT_EQ(numbers, (std::set<std::size_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(outcome->certification.verdict, Verdict::kCertified);
  EXPECT_FALSE(device->lost_reason().has_value());
}

// What a tune stored besides its measurements (which it keeps as it goes, for a resumed tune).
std::size_t published_entries(const ManifestCache& cache) {
  std::size_t published = 0;
  const std::vector<CacheEntry> entries = cache.list().value();
  for (const CacheEntry& entry : entries) {
    if (entry.kind != ManifestKind::kMeasurement) ++published;
  }
  return published;
}

TEST(TunerFaultTest, ALostDeviceEndsTheSearchAndPublishesNothing) {
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  for (std::size_t lose_at : {1u, 3u}) {
    auto device = gpu::Device::open(gpu::RuntimeOptions{}).value();
    testing::TempDir temp;
    ManifestCache cache(temp.path());
    forge::AutoTuneOptions options;
    options.tune.budget = 4;
    options.tune.seed = testing::test_seed();
    options.tune.progress = [&](const forge::TuneProgress& step) {
      if (step.candidate == lose_at && step.stage == "timing") {
        ASSERT_TRUE(device->force_loss_for_testing("simulated driver reset").ok());
      }
    };
    forge::AutoTuneRow row = forge::tune_and_store(*device, cache, affine, options);
    EXPECT_EQ(row.status, forge::AutoTuneRow::Status::kFailed) << "lost at " << lose_at;
    EXPECT_NE(row.message.find("The GPU device was lost while tuning affine_f32"),
              std::string::npos)
        << row.message;
    EXPECT_NE(row.message.find("simulated driver reset"), std::string::npos) << row.message;
    EXPECT_NE(row.message.find("nothing measured on it is published"), std::string::npos)
        << row.message;
    EXPECT_EQ(published_entries(cache), 0u) << "lost at " << lose_at;

    // auto-tune-all on the lost device says so for every kernel and stores nothing.
    std::vector<forge::AutoTuneRow> rows = forge::auto_tune_all(*device, cache, options);
    std::size_t buckets = 0;
    for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels()) {
      buckets += forge::size_buckets(*device, *kernel).size();
    }
    ASSERT_EQ(rows.size(), buckets) << "one row per (kernel, size bucket)";
    for (const forge::AutoTuneRow& one : rows) {
      EXPECT_EQ(one.status, forge::AutoTuneRow::Status::kFailed) << one.kernel_id;
      EXPECT_NE(one.message.find("lost"), std::string::npos) << one.message;
    }
    EXPECT_EQ(published_entries(cache), 0u);
  }
}

TEST(TunerFaultTest, AnInterruptedTuneResumesFromWhatItMeasured) {
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  testing::TempDir temp;
  ManifestCache cache(temp.path());
  forge::TuneOptions options;
  options.budget = 5;
  options.seed = testing::test_seed();
  options.journal = &cache;
  kernels::Problem problem;
  problem.elements = 1 << 16;
  options.problem = problem;

  // The first tune loses its device while the third candidate is timed: what was measured
  // before stays in the journal.
  std::set<std::string> timed_before;
  {
    auto device = gpu::Device::open(gpu::RuntimeOptions{}).value();
    options.progress = [&](const forge::TuneProgress& step) {
      if (step.stage == "timed") timed_before.insert(step.schedule->to_string());
      if (step.candidate == 3 && step.stage == "timing") {
        ASSERT_TRUE(device->force_loss_for_testing("simulated driver reset").ok());
      }
    };
    Result<forge::TuneOutcome> interrupted = forge::tune(*device, affine, options);
    ASSERT_FALSE(interrupted.ok()) << "seed " << options.seed;
    EXPECT_EQ(interrupted.error().kind(), ErrorKind::kDeviceLost)
        << interrupted.error().to_string();
  }
  ASSERT_FALSE(timed_before.empty()) << "seed " << options.seed;

  // The second resumes them (reported, not timed again) and measures only the rest.
  auto device = gpu::Device::open(gpu::RuntimeOptions{}).value();
  std::set<std::string> resumed;
  std::set<std::string> timed_again;
  options.progress = [&](const forge::TuneProgress& step) {
    if (step.stage == "resumed") resumed.insert(step.schedule->to_string());
    if (step.stage == "timing") timed_again.insert(step.schedule->to_string());
  };
  Result<forge::TuneOutcome> outcome = forge::tune(*device, affine, options);
  ASSERT_TRUE(outcome.ok()) << outcome.error().to_string() << ", seed " << options.seed;
  EXPECT_EQ(resumed, timed_before) << "seed " << options.seed;
  for (const std::string& schedule : timed_before) {
    EXPECT_FALSE(timed_again.contains(schedule)) << schedule << " was timed again";
  }
  std::size_t resumed_records = 0;
  for (const CandidateRecord& record : outcome->manifest.result.candidates) {
    if (record.origin == CandidateRecord::Origin::kResumed) {
      ++resumed_records;
      EXPECT_TRUE(timed_before.contains(record.schedule.to_string()))
          << record.schedule.to_string();
      EXPECT_TRUE(record.timing.has_value());
    }
  }
  EXPECT_EQ(resumed_records, timed_before.size());
  // The winner was certified as a published winner is: three rounds, every case run twice.
  EXPECT_TRUE(forge::certified_as_winner(outcome->certification))
      << serialize_manifest(outcome->certification).value();
}

TEST(TunerFaultTest, AScheduleThatFailedBeforeIsNeverRunNorPublished) {
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  auto device = gpu::Device::open(gpu::RuntimeOptions{}).value();
  testing::TempDir temp;
  ManifestCache cache(temp.path());
  kernels::Problem problem;
  problem.elements = 1 << 16;

  // The default schedule, which every search tries first, failed here once (as a compaction
  // schedule lost a store in one of four runs on the H200).
  const Schedule doomed = affine.default_schedule();
  const GeneratedKernel generated =
      kernels::generate_builtin(affine, doomed, TargetBackend::kWgsl,
                                forge::capabilities_of(device->adapter()))
          .value();
  const MeasurementRecord::Code code{device->adapter().topology_hash, std::string(affine.id()),
                                     affine.revision(), doomed, generated.source_hash};
  const CandidateRecord failed{
      doomed, CandidateRecord::Origin::kMeasured, std::nullopt,
      CandidateRecord::Failure{FailureStage::kMismatch, "a lost store in one run of four"}, false};
  const MeasurementRecord record =
      MeasurementRecord::create(code, "n=7", failed, utc_timestamp_now()).value();
  ASSERT_TRUE(cache.store_measurement(record).ok());

  forge::TuneOptions options;
  options.budget = 3;
  options.seed = testing::test_seed();
  options.journal = &cache;
  options.problem = problem;
  std::set<std::string> ran;
  std::set<std::string> failed_before;
  options.progress = [&](const forge::TuneProgress& step) {
    if (step.stage == "timing" || step.stage == "timed") ran.insert(step.schedule->to_string());
    if (step.stage == "failed before") failed_before.insert(step.schedule->to_string());
  };
  Result<forge::TuneOutcome> outcome = forge::tune(*device, affine, options);
  ASSERT_TRUE(outcome.ok()) << outcome.error().to_string() << ", seed " << options.seed;
  EXPECT_EQ(failed_before, std::set<std::string>{doomed.to_string()});
  EXPECT_FALSE(ran.contains(doomed.to_string())) << "a schedule that failed before ran again";
  EXPECT_NE(outcome->manifest.result.winner.schedule, doomed);
  bool recorded = false;
  for (const CandidateRecord& candidate : outcome->manifest.result.candidates) {
    if (candidate.schedule != doomed) continue;
    recorded = true;
    EXPECT_EQ(candidate.origin, CandidateRecord::Origin::kFailedBefore);
    ASSERT_TRUE(candidate.failure.has_value());
    EXPECT_EQ(candidate.failure->message, "a lost store in one run of four");
    EXPECT_FALSE(candidate.finalist);
  }
  EXPECT_TRUE(recorded) << "the manifest keeps the earlier failure";
}

}  // namespace
}  // namespace wgsl_forge
