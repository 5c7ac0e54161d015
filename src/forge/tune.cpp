// Tuning: the fastest certified schedule of a kernel on this adapter. Three pieces, each in its
// own file, joined here:
//   - search_plan.cpp: what to try next, from the results so far (pure logic);
//   - candidate_bench.cpp: measuring candidates (quick certification, timing, the finals);
//   - publish.cpp: who wins and the manifest; the winner is certified here as the GPU runs it.
//
// A re-tune must never lose or worsen what is stored, whatever its budget or noise: the stored
// winner (TuneOptions::incumbent) is re-timed as a finalist in the same rounds and wins its ties,
// even against the default. So a new winner is certified and faster than the stored one by more
// than the noise rule (publish.hpp), or the stored winner wins again and its entry stays.
//
// Each candidate's outcome is stored as soon as it is known (TuneOptions::journal, a
// MeasurementRecord): a search that is interrupted resumes from what was measured on the same
// topology, kernel revision and problem, and a schedule that failed once on this topology is
// never tried again nor published.

#include <algorithm>
#include <functional>
#include <future>
#include <random>
#include <set>
#include <thread>
#include <variant>

#include "candidate_bench.hpp"
#include "phase_timer.hpp"
#include "publish.hpp"
#include "search_plan.hpp"
#include "util/try.hpp"
#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

namespace {

constexpr std::size_t kFinalists = 3;
constexpr std::uint32_t kInterleavedRounds = 3;
// GPU time a candidate's timing may take (gpu::TimingOptions::sampling_budget): a kernel whose
// run lasts tens of milliseconds gets at least 5 samples a timing, 20 a finalist.
constexpr std::chrono::milliseconds kSamplingBudget{250};

// Calls work(i) for every i in [0, count), in contiguous runs on up to every core at once.
void on_every_core(std::size_t count, const std::function<void(std::size_t)>& work) {
  const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1,
                                                      std::max<std::size_t>(1, count));
  std::vector<std::future<void>> runs;
  for (std::size_t t = 0; t < threads; ++t) {
    runs.push_back(std::async(std::launch::async, [&, t] {
      for (std::size_t i = count * t / threads; i < count * (t + 1) / threads; ++i) work(i);
    }));
  }
  for (std::future<void>& run : runs) run.get();
}

class Tuner {
 public:
  Tuner(gpu::Device& device, const kernels::KernelDefinition& kernel, const TuneOptions& options)
      : device_(device),
        kernel_(kernel),
        options_(options),
        bench_(device, kernel, options, breakdown_) {}

  Result<TuneOutcome> run();

 private:
  // The space, the plan (with what the journal holds), the problem and its inputs.
  Status prepare();
  // What the journal holds for the space: failures, and timings at this problem when resuming.
  std::vector<CandidateRecord> journal_entries(const std::vector<Schedule>& space);
  bool journaling() const;
  // The code of a schedule as the journal keys it (nullopt: it does not generate).
  std::optional<MeasurementRecord::Code> code_of(const Schedule& schedule) const;
  // Every candidate of the plan certified (quick cases) and timed, batch by batch.
  Status search();
  // The finalists, re-timed together, fastest first.
  Result<std::vector<TimedCandidate>> run_finals();
  // The fastest finalist that passes the winner's certification, as an outcome.
  Result<TuneOutcome> publish(std::vector<TimedCandidate> finalists);
  // The winner's certification of `schedule`: the journal's, when it holds one of the same code
  // on this topology made as a winner's is (a schedule that won another size bucket), else a new
  // one; a failure as a value, an error when tuning cannot go on.
  struct WinnerCertification {
    std::optional<CertificationManifest> manifest;  // when it passed
    std::optional<CandidateRecord::Failure> failure;
  };
  Result<WinnerCertification> certify_winner(const Schedule& schedule);

  void record_failure(const Schedule& schedule, CandidateRecord::Failure failure);
  void record_timing(TimedCandidate timed);
  // Stores a candidate's outcome in the journal; a failure to store it is a warning.
  void journal(const CandidateRecord& candidate);
  // The fastest first timing so far.
  std::optional<double> leader_ns() const;
  // The default schedule's timing: as re-timed among `finalists`, else its first timing here.
  std::optional<CandidateResult> baseline(const std::vector<TimedCandidate>& finalists) const;

  void report(std::string stage, const std::optional<Schedule>& schedule = std::nullopt,
              const std::optional<TimingSummary>& timing = std::nullopt,
              const std::optional<CandidateFailure>& failure = std::nullopt);
  void warn(std::string message);

  gpu::Device& device_;
  const kernels::KernelDefinition& kernel_;
  const TuneOptions& options_;
  TimeBreakdown breakdown_;
  CandidateBench bench_;
  kernels::Problem problem_;
  std::mt19937_64 random_;
  std::optional<SearchPlan> plan_;
  std::vector<TimedCandidate> timed_;  // every candidate timed here, with its samples
  std::vector<Schedule> numbered_;     // candidates in the order they were first reported
  std::vector<std::string> warnings_;
};

void Tuner::report(std::string stage, const std::optional<Schedule>& schedule,
                   const std::optional<TimingSummary>& timing,
                   const std::optional<CandidateFailure>& failure) {
  if (!options_.progress) return;
  TuneProgress progress;
  progress.kernel_id = std::string(kernel_.id());
  progress.candidate = plan_ ? plan_->tried() : 0;
  if (schedule) {
    // A candidate keeps the number it got when it was first reported.
    auto known = std::find(numbered_.begin(), numbered_.end(), *schedule);
    if (known == numbered_.end()) known = numbered_.insert(numbered_.end(), *schedule);
    progress.candidate = static_cast<std::size_t>(known - numbered_.begin()) + 1;
  }
  progress.candidates = plan_ ? plan_->planned() : 0;
  progress.stage = std::move(stage);
  progress.schedule = schedule;
  progress.timing = timing;
  progress.failure = failure;
  options_.progress(progress);
}

void Tuner::warn(std::string message) {
  warnings_.push_back(message);
  if (!options_.progress) return;
  TuneProgress progress;
  progress.kernel_id = std::string(kernel_.id());
  progress.stage = "warning";
  progress.message = std::move(message);
  options_.progress(progress);
}

std::optional<MeasurementRecord::Code> Tuner::code_of(const Schedule& schedule) const {
  Result<GeneratedKernel> generated = kernels::generate_builtin(
      kernel_, schedule, TargetBackend::kWgsl, capabilities_of(device_.adapter()));
  if (!generated) return std::nullopt;
  return MeasurementRecord::Code{device_.adapter().topology_hash, std::string(kernel_.id()),
                                 kernel_.revision(), schedule, generated->source_hash};
}

std::vector<CandidateRecord> Tuner::journal_entries(const std::vector<Schedule>& space) {
  std::vector<CandidateRecord> found;
  if (!journaling()) return found;
  const std::string problem = problem_.to_string();
  // Each schedule's keys name its WGSL's hash: generated and hashed on every core, since a space
  // holds up to tens of thousands of schedules (seconds on one core); then looked up in order.
  std::vector<std::vector<std::string>> keys(space.size());
  on_every_core(space.size(), [&](std::size_t i) {
    const std::optional<MeasurementRecord::Code> code = code_of(space[i]);
    if (!code) return;
    keys[i].push_back(MeasurementRecord::failure_key(*code));
    if (options_.resume) keys[i].push_back(MeasurementRecord::timing_key(*code, problem));
  });
  // The measurements the cache directory holds: a key not among them is not read (a space's tens
  // of thousands of files that do not exist). With a shared store every key is asked for, since
  // the store may hold what the directory does not.
  std::optional<std::set<std::string>> stored;
  if (!options_.journal->remote()) {
    if (Result<std::vector<CacheEntry>> entries = options_.journal->list()) {
      stored.emplace();
      for (const CacheEntry& entry : *entries) {
        if (entry.kind == ManifestKind::kMeasurement) stored->insert(entry.key);
      }
    }
  }
  for (std::size_t i = 0; i < space.size(); ++i) {
    for (const std::string& key : keys[i]) {
      if (stored && !stored->contains(key)) continue;
      Result<std::optional<MeasurementRecord>> record = options_.journal->load_measurement(key);
      if (!record) {
        warn("a measurement of " + space[i].to_string() +
             " is not used: " + record.error().message());
      } else if (record->has_value()) {
        found.push_back((*record)->candidate);
      }
    }
  }
  return found;
}

Status Tuner::prepare() {
  std::optional<PhaseTimer> planning(&breakdown_.bookkeeping);
  const kernels::DeviceCapabilities capabilities = capabilities_of(device_.adapter());
  if (options_.problem) {
    problem_ = *options_.problem;
  } else if (options_.bucket) {
    problem_ = options_.bucket->problem;
  } else {
    problem_ = kernel_.tuning_problem(device_.adapter().identity.device_type == "Cpu");
  }
  WF_TRY(check_problem_fits(device_, kernel_, problem_));
  SearchPlan::Space space{kernel_.schedule_space(capabilities), kernel_.knobs(), {}};
  if (space.schedules.empty()) {
    return Error(ErrorKind::kInvalidInput,
                 "No schedule of " + std::string(kernel_.id()) + " fits this adapter's limits.");
  }
  for (const std::string& overrides : kernel_.starting_points_for(problem_)) {
    // A starting point the catalog test parses; one that does not fit this adapter is skipped.
    if (Result<Schedule> schedule = kernels::parse_schedule_overrides(kernel_, overrides)) {
      space.starting_points.push_back(*std::move(schedule));
    }
  }
  random_.seed(options_.seed != 0 ? options_.seed : std::random_device{}());
  std::optional<Schedule> incumbent;
  std::optional<CandidateRecord> incumbent_outside;
  if (options_.incumbent) {
    if (std::find(space.schedules.begin(), space.schedules.end(), *options_.incumbent) !=
        space.schedules.end()) {
      incumbent = options_.incumbent;
    } else {
      incumbent_outside = CandidateRecord{
          *options_.incumbent, CandidateRecord::Origin::kMeasured, std::nullopt,
          CandidateRecord::Failure{FailureStage::kValidation,
                                   "The stored winner " + options_.incumbent->to_string() +
                                       " is not in this adapter's schedule space."},
          false};
    }
  }
  const std::vector<CandidateRecord> earlier = journal_entries(space.schedules);
  plan_.emplace(std::move(space), options_.budget, incumbent, random_());
  if (incumbent_outside) plan_->add_untried_failure(*incumbent_outside);
  for (const CandidateRecord& record : earlier) plan_->resume(record);
  for (const CandidateRecord& record : plan_->candidates()) {
    if (record.origin == CandidateRecord::Origin::kMeasured) continue;
    std::optional<CandidateFailure> failure;
    if (record.failure) {
      failure = CandidateFailure{record.schedule, record.failure->stage, record.failure->message};
    }
    report(record.origin == CandidateRecord::Origin::kResumed ? "resumed" : "failed before",
           record.schedule, record.timing, failure);
  }
  gpu::TimingOptions timing = options_.timing;
  if (!timing.sampling_budget) timing.sampling_budget = kSamplingBudget;
  if (device_.adapter().identity.device_type == "Cpu") {
    // A CPU adapter's timings are steady and slow; fewer samples tell the same.
    timing.warmup_runs = std::min<std::uint32_t>(timing.warmup_runs, 1);
    timing.samples = std::min<std::uint32_t>(timing.samples, 7);
  }
  planning.reset();
  return bench_.prepare(problem_, timing, random_(), options_.timing_inputs.get());
}

std::optional<double> Tuner::leader_ns() const {
  std::optional<double> fastest;
  for (const CandidateRecord& one : plan_->candidates()) {
    if (one.timing && !one.failure && (!fastest || one.timing->median_ns < *fastest))
      fastest = one.timing->median_ns;
  }
  return fastest;
}

std::optional<CandidateResult> Tuner::baseline(const std::vector<TimedCandidate>& finalists) const {
  const Schedule default_schedule = kernel_.default_schedule();
  for (const std::vector<TimedCandidate>* list : {&finalists, &timed_}) {
    for (const TimedCandidate& one : *list) {
      if (one.result.schedule == default_schedule) return one.result;
    }
  }
  return std::nullopt;
}

bool Tuner::journaling() const {
  return options_.journal != nullptr && !device_.adapter().topology_hash.empty();
}

void Tuner::journal(const CandidateRecord& candidate) {
  if (!journaling()) return;
  PhaseTimer storing(&breakdown_.bookkeeping);
  std::optional<MeasurementRecord::Code> code = code_of(candidate.schedule);
  if (!code) return;
  CandidateRecord measured = candidate;
  measured.finalist = false;
  // A finalist's full-certification failure is stored as a failure alone.
  if (measured.failure) measured.timing.reset();
  Result<MeasurementRecord> record = MeasurementRecord::create(
      std::move(*code), problem_.to_string(), std::move(measured), utc_timestamp_now());
  Result<std::filesystem::path> stored = record ? options_.journal->store_measurement(*record)
                                                : Result<std::filesystem::path>(record.error());
  // A collision is an earlier outcome of the same code, which stays (the first failure is the
  // one that counts).
  if (!stored && stored.error().kind() != ErrorKind::kCollision) {
    warn("the measurement of " + candidate.schedule.to_string() +
         " is not stored, so a resumed tune would measure it again: " + stored.error().message());
  }
}

void Tuner::record_failure(const Schedule& schedule, CandidateRecord::Failure failure) {
  plan_->record_failure(schedule, failure);
  journal(*plan_->find(schedule));
  report("failed", schedule, std::nullopt,
         CandidateFailure{schedule, failure.stage, std::move(failure.message)});
}

void Tuner::record_timing(TimedCandidate timed) {
  const Schedule schedule = timed.result.schedule;
  plan_->record_timing(schedule, timed.result.timing);
  journal(*plan_->find(schedule));
  report("timed", schedule, timed.result.timing);
  timed_.push_back(std::move(timed));
  // Only the finalists so far keep their buffers bound.
  PhaseTimer releasing(&breakdown_.bind);
  bench_.release_except(plan_->finalists(kFinalists));
}

Status Tuner::search() {
  while (true) {
    const std::vector<Schedule> batch = plan_->next_batch();
    if (batch.empty()) break;
    // Compiled together, certified, then timed back to back, so that the GPU stays warm between
    // timings.
    bench_.compile(batch);
    std::vector<Schedule> certified;
    for (const Schedule& schedule : batch) {
      report("certifying", schedule);
      WF_TRY_ASSIGN(std::optional<CandidateRecord::Failure> failure,
                    bench_.certify(schedule, random_()));
      if (failure) {
        record_failure(schedule, std::move(*failure));
      } else {
        certified.push_back(schedule);
      }
    }
    // The default last: it is usually the slowest, and timed after a faster one it stops after a
    // few samples (kClearlySlowerFactor); its timing is only the baseline.
    std::stable_partition(certified.begin(), certified.end(), [&](const Schedule& schedule) {
      return schedule != kernel_.default_schedule();
    });
    for (const Schedule& schedule : certified) {
      report("timing", schedule);
      WF_TRY_ASSIGN(auto outcome, bench_.time(schedule, leader_ns()));
      if (auto* failure = std::get_if<CandidateRecord::Failure>(&outcome)) {
        record_failure(schedule, std::move(*failure));
      } else {
        record_timing(std::get<TimedCandidate>(std::move(outcome)));
      }
    }
  }
  if (!leader_ns()) {
    TuningResult seen;
    seen.candidates = plan_->candidates();
    const std::vector<CandidateFailure> failures = seen.failures();
    const std::string reason = failures.empty() ? "no candidate" : failures.front().message;
    return Error(ErrorKind::kRuntime, "No schedule of " + std::string(kernel_.id()) +
                                          " was certified on this adapter (" +
                                          std::to_string(failures.size()) +
                                          " failed; first: " + reason + ").");
  }
  return Ok{};
}

Result<std::vector<TimedCandidate>> Tuner::run_finals() {
  report("finalists");
  std::vector<TimedCandidate> finalists;
  for (const Schedule& schedule : plan_->finalists(kFinalists)) {
    auto timed = std::find_if(timed_.begin(), timed_.end(), [&](const TimedCandidate& one) {
      return one.result.schedule == schedule;
    });
    if (timed != timed_.end()) {
      finalists.push_back(*timed);
      continue;
    }
    // Resumed from an earlier search: certified and compiled here before it is timed again.
    WF_TRY_ASSIGN(std::optional<CandidateRecord::Failure> failure,
                  bench_.certify(schedule, random_()));
    if (failure) {
      record_failure(schedule, std::move(*failure));
      continue;
    }
    // Its earlier first timing ranked it; its final timing is measured here alone.
    finalists.push_back(
        {{schedule, bench_.oracle(schedule).value(), plan_->find(schedule)->timing.value()}, {}});
  }
  if (finalists.empty()) {
    return Error(ErrorKind::kRuntime, "No finalist of " + std::string(kernel_.id()) +
                                          " could be certified again on this adapter.");
  }
  for (const TimedCandidate& finalist : finalists) plan_->mark_finalist(finalist.result.schedule);
  // The rounds compare finalists under the same conditions; a lone finalist timed here has none
  // to be compared with, and its first timing stands (one that was resumed is timed here).
  const bool alone = finalists.size() == 1 && !finalists.front().samples.empty();
  return bench_.retime(std::move(finalists), alone ? 0 : kInterleavedRounds);
}

Result<TuneOutcome> Tuner::publish(std::vector<TimedCandidate> finalists) {
  // The winner must pass the full certification as the GPU runs it: every case, in several
  // rounds of fresh seeds, each case run twice; a finalist that fails gives way to the next.
  const std::vector<Schedule> order = plan_->preferred();
  while (!finalists.empty()) {
    std::vector<Schedule> ties;
    const TimedCandidate* winner = choose_winner(finalists, order, ties);
    const Schedule& schedule = winner->result.schedule;
    report("certifying winner", schedule);
    WF_TRY_ASSIGN(WinnerCertification certification, certify_winner(schedule));
    if (certification.failure) {
      record_failure(schedule, *certification.failure);
      finalists.erase(finalists.begin() + (winner - finalists.data()));
      continue;
    }
    PhaseTimer building(&breakdown_.bookkeeping);
    SearchOutcome search{plan_->candidates(), finalists, winner, std::move(ties),
                         baseline(finalists)};
    WF_TRY_ASSIGN(
        TuningManifest manifest,
        build_tuning_manifest(device_, kernel_, problem_, options_.bucket, std::move(search)));
    TuneOutcome outcome;
    outcome.manifest = std::move(manifest);
    outcome.certification = std::move(*certification.manifest);
    outcome.problem = problem_;
    return outcome;
  }
  TuningResult seen;
  seen.candidates = plan_->candidates();
  const std::vector<CandidateFailure> failures = seen.failures();
  return Error(
      ErrorKind::kRuntime,
      "Every finalist of " + std::string(kernel_.id()) + " failed its full certification (last: " +
          (failures.empty() ? std::string("none recorded") : failures.back().message) + ").");
}

Result<Tuner::WinnerCertification> Tuner::certify_winner(const Schedule& schedule) {
  PreparedKernel& prepared = *bench_.prepared(schedule);
  if (options_.journal != nullptr) {
    PhaseTimer looking_up(&breakdown_.bookkeeping);
    Result<CertificationManifest> keyed =
        CertificationManifest::create(prepared.generated(), device_.adapter().identity,
                                      device_.adapter().topology_hash, kernel_.tolerance(), {});
    if (keyed && keyed->cache_key) {
      Result<std::optional<CertificationManifest>> earlier =
          options_.journal->load_certification(*keyed->cache_key);
      if (earlier && earlier->has_value() && certified_as_winner(**earlier)) {
        return WinnerCertification{std::move(**earlier), std::nullopt};
      }
    }
  }
  CertifyOptions full;
  full.seed = random_();
  full.rounds = kWinnerRounds;
  full.runs_per_case = kWinnerRunsPerCase;
  full.breakdown = &breakdown_;
  Result<CertificationManifest> certification =
      certify_prepared(device_, kernel_, prepared, schedule, full);
  WF_TRY(bench_.device_alive());
  if (!certification) {
    WF_TRY_ASSIGN(CandidateRecord::Failure failure,
                  bench_.failure_of(schedule, certification.error()));
    return WinnerCertification{std::nullopt, std::move(failure)};
  }
  if (certification->verdict != Verdict::kCertified) {
    return WinnerCertification{
        std::nullopt,
        CandidateRecord::Failure{FailureStage::kMismatch, first_failure(*certification)}};
  }
  return WinnerCertification{std::move(certification).value(), std::nullopt};
}

Result<TuneOutcome> Tuner::run() {
  const auto started = std::chrono::steady_clock::now();
  WF_TRY(prepare());
  WF_TRY(search());
  WF_TRY_ASSIGN(std::vector<TimedCandidate> finalists, run_finals());
  WF_TRY_ASSIGN(TuneOutcome outcome, publish(std::move(finalists)));
  {
    // The problem's buffers (gigabytes at 2^28) are freed within the tune's time, before the
    // next tune allocates its own, not when the tuner goes.
    PhaseTimer releasing(&breakdown_.bind);
    bench_.release_buffers();
  }
  breakdown_.total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  outcome.breakdown = breakdown_;
  outcome.warnings = warnings_;
  TuneProgress published;
  published.kernel_id = std::string(kernel_.id());
  published.candidate = plan_->tried();
  published.candidates = plan_->planned();
  published.stage = "published";
  published.breakdown = breakdown_;
  if (options_.progress) options_.progress(published);
  return outcome;
}

}  // namespace

Result<TuneOutcome> tune(gpu::Device& device, const kernels::KernelDefinition& kernel,
                         const TuneOptions& options) {
  return Tuner(device, kernel, options).run();
}

std::pair<double, std::string> throughput(const kernels::KernelDefinition& kernel,
                                          const kernels::Problem& problem, double median_ns) {
  const kernels::WorkAmount work = kernel.work(problem);
  const double per_ns = median_ns > 0 ? 1 / median_ns : 0;
  if (work.flops != 0) return {static_cast<double>(work.flops) * per_ns / 1e3, "TFLOP/s"};
  if (work.items_name != nullptr) {
    return {static_cast<double>(work.items) * per_ns, std::string("G ") + work.items_name + "/s"};
  }
  return {static_cast<double>(work.bytes) * per_ns, "GB/s"};
}

}  // namespace wgsl_forge::forge
