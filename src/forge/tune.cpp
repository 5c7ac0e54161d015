// Tuning: the fastest certified schedule of a kernel on this adapter.
//
// Why the median decides and the MAD judges ties: GPU timings have a long right tail (clock
// ramps, other work on the machine) and rare fast outliers (a cached result, a clock step); the
// mean follows the tail and the minimum rewards luck. The median of interleaved re-timings is
// stable across runs; two finalists whose medians differ by less than the larger of their MADs,
// or by less than 1 %, cannot be told apart, and the default schedule wins such a tie because it
// is the one users can reason about.
//
// A re-tune must never lose or worsen what is stored, whatever its budget or noise: the stored
// winner (TuneOptions::incumbent) is re-timed as a finalist in the same rounds and wins its ties,
// even against the default. So a new winner is certified and faster than the stored one by more
// than the noise rule above, or the stored winner wins again and its entry stays.

#include <algorithm>
#include <random>

#include "util/try.hpp"
#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

namespace {

constexpr std::size_t kFinalists = 3;
constexpr std::uint32_t kInterleavedRounds = 3;

FailureStage stage_of(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::kCompilation:
      return FailureStage::kCompile;
    case ErrorKind::kValidation:
    case ErrorKind::kInvalidInput:
      return FailureStage::kValidation;
    case ErrorKind::kTimeout:
      return FailureStage::kTimeout;
    default:
      return FailureStage::kExecution;
  }
}

// Gives the device another wait timeout for a scope (the watchdog of one candidate).
class ScopedWaitTimeout {
 public:
  ScopedWaitTimeout(gpu::Device& device, std::optional<std::chrono::milliseconds> timeout)
      : device_(device), usual_(device.wait_timeout()) {
    if (timeout) device_.set_wait_timeout(*timeout);
  }
  ScopedWaitTimeout(const ScopedWaitTimeout&) = delete;
  ScopedWaitTimeout& operator=(const ScopedWaitTimeout&) = delete;
  ~ScopedWaitTimeout() { device_.set_wait_timeout(usual_); }

 private:
  gpu::Device& device_;
  std::chrono::milliseconds usual_;
};

// A candidate that passed certification and was timed once.
struct Timed {
  CandidateResult result;
  std::vector<std::uint64_t> samples;
};

class Tuner {
 public:
  Tuner(gpu::Device& device, const kernels::KernelDefinition& kernel, const TuneOptions& options)
      : device_(device), kernel_(kernel), options_(options) {}

  // prepare, search, retime_finalists, publish.
  Result<TuneOutcome> run();

 private:
  // The space, the incumbent, the timing options, the problem and its inputs.
  Status prepare();
  // What to try first for `budget` candidates.
  std::vector<Schedule> initial_queue(std::size_t budget);
  // What to try once the queue is empty.
  std::vector<Schedule> refinements(const std::vector<Timed>& timed,
                                    const std::vector<Schedule>& tried) const;
  // Every candidate certified (quick cases) and timed; those that passed.
  Result<std::vector<Timed>> search();
  // Who wins a tie, in order: the stored winner, then the default.
  std::vector<Schedule> preferred() const;
  Result<std::vector<Timed>> retime_finalists(std::vector<Timed> timed);
  // The fastest finalist that passes the full certification, as a manifest.
  Result<TuneOutcome> publish(std::vector<Timed> finalists);
  Result<TuningManifest> manifest_for(const Timed& winner, const std::vector<Timed>& finalists,
                                      std::vector<Schedule> ties) const;
  // Certifies and times one schedule; a failure is recorded and nullopt returned. An error is
  // returned only when tuning cannot go on (the device is lost).
  Result<std::optional<Timed>> evaluate(const Schedule& schedule);
  Result<Timed> time_schedule(const Schedule& schedule, ComparisonReport oracle);
  // Keeps the finalists' buffers between timing rounds (binding GiB-sized plans dominates
  // otherwise); everything else is released as soon as it has been timed.
  struct Resident {
    Schedule schedule;
    std::unique_ptr<PreparedKernel> prepared;
    std::unique_ptr<BoundPlan> bound;
  };
  std::vector<Resident> resident_;
  bool keep_resident_ = false;
  // The default, then the kernel's starting points that are in this adapter's space.
  std::vector<Schedule> first_candidates() const;
  std::vector<Schedule> neighbours(const Schedule& schedule) const;
  void report(const std::string& stage) const;
  // Reports a candidate's timing, or its failure (the last one recorded).
  void report_outcome(const Schedule& schedule, const std::optional<Timed>& timed) const;
  Status device_alive() const;
  // Records why `schedule` failed. After a timeout the kernel still occupies the GPU (WebGPU
  // cannot preempt it), so this waits for it to finish before the next candidate is measured;
  // an error when it does not finish within options_.drain_timeout.
  Status record_failure(const Schedule& schedule, const Error& error);

  gpu::Device& device_;
  const kernels::KernelDefinition& kernel_;
  const TuneOptions& options_;
  kernels::DeviceCapabilities capabilities_;
  gpu::TimingOptions timing_;
  kernels::Problem problem_;
  BufferContents inputs_;
  std::mt19937_64 random_;
  std::vector<Schedule> space_;
  std::size_t planned_ = 0;
  std::size_t evaluated_ = 0;
  std::vector<CandidateFailure> failures_;
  // TuneOptions::incumbent while it is in this adapter's schedule space.
  std::optional<Schedule> incumbent_;
};

void Tuner::report(const std::string& stage) const {
  if (options_.progress)
    options_.progress({std::string(kernel_.id()), evaluated_, planned_, stage, {}, {}, {}});
}

void Tuner::report_outcome(const Schedule& schedule, const std::optional<Timed>& timed) const {
  if (!options_.progress) return;
  TuneProgress progress{std::string(kernel_.id()), evaluated_, planned_, "timed", schedule, {}, {}};
  if (timed) {
    progress.timing = timed->result.timing;
  } else {
    progress.stage = "failed";
    progress.failure = failures_.back();
  }
  options_.progress(progress);
}

Status Tuner::device_alive() const {
  if (auto lost = device_.lost_reason()) {
    return Error(ErrorKind::kDeviceLost, "The GPU device was lost while tuning " +
                                             std::string(kernel_.id()) + " (" + *lost +
                                             "); nothing measured on it is published.");
  }
  return Ok{};
}

Status Tuner::record_failure(const Schedule& schedule, const Error& error) {
  const FailureStage stage = stage_of(error);
  failures_.push_back({schedule, stage, error.to_string()});
  if (stage != FailureStage::kTimeout) return Ok{};
  if (Status idle = device_.wait_for_idle(options_.drain_timeout); !idle) {
    return Error(ErrorKind::kTimeout,
                 "Schedule " + schedule.to_string() + " of " + std::string(kernel_.id()) +
                     " still occupies the GPU " + std::to_string(options_.drain_timeout.count()) +
                     " ms after its wait timed out; tuning stops and nothing is published.")
        .with_context(idle.error().message());
  }
  return Ok{};
}

Result<Timed> Tuner::time_schedule(const Schedule& schedule, ComparisonReport oracle) {
  for (Resident& resident : resident_) {
    if (resident.schedule != schedule) continue;
    WF_TRY_ASSIGN(gpu::TimedRun timed, device_.time(resident.bound->steps(), timing_));
    return Timed{CandidateResult{schedule, oracle, timed.summary}, timed.samples_ns};
  }
  WF_TRY_ASSIGN(GeneratedKernel generated,
                kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl, capabilities_));
  WF_TRY_ASSIGN(PreparedKernel prepared, PreparedKernel::prepare(device_, kernel_, generated));
  WF_TRY_ASSIGN(std::unique_ptr<BoundPlan> bound, prepared.bind(problem_));
  WF_TRY(prepared.load_inputs(*bound, inputs_));
  WF_TRY_ASSIGN(gpu::TimedRun timed, device_.time(bound->steps(), timing_));
  if (keep_resident_) {
    resident_.push_back(
        {schedule, std::make_unique<PreparedKernel>(std::move(prepared)), std::move(bound)});
  }
  return Timed{CandidateResult{schedule, oracle, timed.summary}, timed.samples_ns};
}

Result<std::optional<Timed>> Tuner::evaluate(const Schedule& schedule) {
  ++evaluated_;
  ScopedWaitTimeout watchdog(device_, options_.candidate_timeout);
  report("certifying");
  CertifyOptions certify_options;
  certify_options.quick = true;
  certify_options.seed = random_();
  Result<CertificationManifest> certification =
      certify(device_, kernel_, schedule, certify_options);
  WF_TRY(device_alive());
  if (!certification) {
    WF_TRY(record_failure(schedule, certification.error()));
    return std::optional<Timed>();
  }
  if (certification->verdict != Verdict::kCertified) {
    failures_.push_back({schedule, FailureStage::kMismatch, first_failure(*certification)});
    return std::optional<Timed>();
  }
  ComparisonReport oracle;
  for (const CertificationCase& one : certification->cases) {
    oracle.compared += one.report.compared;
    oracle.max_absolute_error = std::max(oracle.max_absolute_error, one.report.max_absolute_error);
    oracle.max_relative_error = std::max(oracle.max_relative_error, one.report.max_relative_error);
  }
  report("timing");
  Result<Timed> timed = time_schedule(schedule, oracle);
  WF_TRY(device_alive());
  if (!timed) {
    WF_TRY(record_failure(schedule, timed.error()));
    return std::optional<Timed>();
  }
  return std::optional<Timed>(std::move(timed).value());
}

std::vector<Schedule> Tuner::first_candidates() const {
  std::vector<Schedule> first = {space_.front()};  // the default
  for (const std::string& overrides : kernel_.starting_points()) {
    // A starting point the catalog test parses; one that does not fit this adapter is skipped.
    Result<Schedule> schedule = kernels::parse_schedule_overrides(kernel_, overrides);
    if (!schedule) continue;
    if (std::find(space_.begin(), space_.end(), *schedule) != space_.end() &&
        std::find(first.begin(), first.end(), *schedule) == first.end()) {
      first.push_back(*std::move(schedule));
    }
  }
  return first;
}

std::vector<Schedule> Tuner::neighbours(const Schedule& schedule) const {
  std::vector<Schedule> result;
  for (const kernels::KnobSpec& knob : kernel_.knobs()) {
    auto at = std::find(knob.values.begin(), knob.values.end(), *schedule.get(knob.name));
    for (int step : {-1, 1}) {
      auto index = (at - knob.values.begin()) + step;
      if (index < 0 || index >= static_cast<std::ptrdiff_t>(knob.values.size())) continue;
      Schedule neighbour = schedule;
      neighbour.set(knob.name, knob.values[static_cast<std::size_t>(index)]);
      if (std::find(space_.begin(), space_.end(), neighbour) != space_.end())
        result.push_back(neighbour);
    }
  }
  return result;
}

bool within_noise(const TimingSummary& a, const TimingSummary& b) {
  const double noise = std::max({a.mad_ns, b.mad_ns, 0.01 * std::min(a.median_ns, b.median_ns)});
  return std::abs(a.median_ns - b.median_ns) <= noise;
}

// The finalist that wins: the fastest, unless a preferred schedule (the stored winner, then the
// default) is within noise of it. `ties` gets the other finalists within noise of the fastest.
const Timed* choose_winner(const std::vector<Timed>& finalists,
                           const std::vector<Schedule>& preferred, std::vector<Schedule>& ties) {
  const Timed* fastest = &finalists.front();
  const Timed* chosen = fastest;
  for (const Schedule& schedule : preferred) {
    auto found = std::find_if(finalists.begin(), finalists.end(), [&](const Timed& finalist) {
      return finalist.result.schedule == schedule;
    });
    if (found != finalists.end() && within_noise(found->result.timing, fastest->result.timing)) {
      chosen = &*found;
      break;
    }
  }
  ties.clear();
  for (const Timed& other : finalists) {
    if (&other != chosen && within_noise(other.result.timing, fastest->result.timing))
      ties.push_back(other.result.schedule);
  }
  return chosen;
}

Status Tuner::prepare() {
  capabilities_ = capabilities_of(device_.adapter());
  space_ = kernel_.schedule_space(capabilities_);
  if (space_.empty()) {
    return Error(ErrorKind::kInvalidInput,
                 "No schedule of " + std::string(kernel_.id()) + " fits this adapter's limits.");
  }
  if (options_.incumbent) {
    if (std::find(space_.begin(), space_.end(), *options_.incumbent) != space_.end()) {
      incumbent_ = options_.incumbent;
    } else {
      failures_.push_back({*options_.incumbent, FailureStage::kValidation,
                           "The stored winner " + options_.incumbent->to_string() +
                               " is not in this adapter's schedule space."});
    }
  }
  random_.seed(options_.seed != 0 ? options_.seed : std::random_device{}());
  timing_ = options_.timing;
  if (device_.adapter().identity.device_type == "Cpu") {
    // A CPU adapter's timings are steady and slow; fewer samples tell the same.
    timing_.warmup_runs = std::min<std::uint32_t>(timing_.warmup_runs, 1);
    timing_.samples = std::min<std::uint32_t>(timing_.samples, 7);
  }
  if (options_.problem) {
    problem_ = *options_.problem;
  } else if (options_.bucket) {
    problem_ = options_.bucket->problem;
  } else {
    problem_ = kernel_.tuning_problem(device_.adapter().identity.device_type == "Cpu");
  }
  WF_TRY(check_problem_fits(device_, kernel_, problem_));
  const std::vector<kernels::CaseSpec> specs = kernel_.certification_cases();
  inputs_ =
      kernel_
          .make_inputs({"tuning " + problem_.to_string(), problem_, specs.front().value_profile},
                       random_())
          .buffers;
  return Ok{};
}

std::vector<Schedule> Tuner::initial_queue(std::size_t budget) {
  // Everything when the space fits the budget; otherwise the default, the kernel's starting
  // points that fit this adapter and a random sample up to two thirds of the budget (the rest of
  // the budget goes to the neighbours of the best so far).
  std::vector<Schedule> queue;
  if (space_.size() <= budget) {
    queue = space_;
  } else {
    queue = first_candidates();
    std::vector<Schedule> rest;
    for (const Schedule& schedule : space_) {
      if (std::find(queue.begin(), queue.end(), schedule) == queue.end()) rest.push_back(schedule);
    }
    std::shuffle(rest.begin(), rest.end(), random_);
    const std::size_t sampled = std::max<std::size_t>(1, budget * 2 / 3);
    const std::size_t drawn = std::min(sampled - std::min(sampled, queue.size()), rest.size());
    queue.insert(queue.end(), rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(drawn));
  }
  // The stored winner is timed first, beyond the budget, so that a small budget cannot leave it
  // out.
  if (incumbent_) queue.insert(queue.begin(), *incumbent_);
  return queue;
}

std::vector<Schedule> Tuner::refinements(const std::vector<Timed>& timed,
                                         const std::vector<Schedule>& tried) const {
  // The untried neighbours of the fastest so far, else any untried schedule.
  std::vector<Schedule> queue;
  auto best = std::min_element(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) {
    return a.result.timing.median_ns < b.result.timing.median_ns;
  });
  if (best != timed.end()) {
    for (const Schedule& neighbour : neighbours(best->result.schedule)) {
      if (std::find(tried.begin(), tried.end(), neighbour) == tried.end())
        queue.push_back(neighbour);
    }
  }
  for (const Schedule& schedule : space_) {
    if (!queue.empty()) break;
    if (std::find(tried.begin(), tried.end(), schedule) == tried.end()) queue.push_back(schedule);
  }
  return queue;
}

Result<std::vector<Timed>> Tuner::search() {
  const std::size_t budget = std::max<std::uint32_t>(1, options_.budget);
  const std::size_t limit =
      budget + (incumbent_ && *incumbent_ != kernel_.default_schedule() ? 1 : 0);
  std::vector<Schedule> queue = initial_queue(budget);
  planned_ = std::min(limit, space_.size());
  std::vector<Schedule> tried;
  std::vector<Timed> timed;
  while (tried.size() < limit) {
    if (queue.empty()) queue = refinements(timed, tried);
    if (queue.empty()) break;
    Schedule next = queue.front();
    queue.erase(queue.begin());
    if (std::find(tried.begin(), tried.end(), next) != tried.end()) continue;
    tried.push_back(next);
    WF_TRY_ASSIGN(std::optional<Timed> outcome, evaluate(next));
    report_outcome(next, outcome);
    if (outcome.has_value()) timed.push_back(std::move(*outcome));
  }
  if (timed.empty()) {
    std::string reason = failures_.empty() ? "no candidate" : failures_.front().message;
    return Error(ErrorKind::kRuntime, "No schedule of " + std::string(kernel_.id()) +
                                          " was certified on this adapter (" +
                                          std::to_string(failures_.size()) +
                                          " failed; first: " + reason + ").");
  }
  return timed;
}

std::vector<Schedule> Tuner::preferred() const {
  std::vector<Schedule> order;
  if (incumbent_) order.push_back(*incumbent_);
  order.push_back(kernel_.default_schedule());
  return order;
}

Result<std::vector<Timed>> Tuner::retime_finalists(std::vector<Timed> timed) {
  // The fastest few, the stored winner and the default, re-timed in interleaved rounds.
  std::sort(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) {
    return a.result.timing.median_ns < b.result.timing.median_ns;
  });
  std::vector<Timed> finalists(timed.begin(), timed.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                  kFinalists, timed.size())));
  for (const Schedule& schedule : preferred()) {
    auto is_it = [&](const Timed& candidate) { return candidate.result.schedule == schedule; };
    if (std::any_of(finalists.begin(), finalists.end(), is_it)) continue;
    auto found = std::find_if(timed.begin(), timed.end(), is_it);
    if (found != timed.end()) finalists.push_back(*found);
  }
  report("finalists");
  keep_resident_ = true;
  for (std::uint32_t round = 0; round < kInterleavedRounds; ++round) {
    for (std::size_t i = 0; i < finalists.size(); ++i) {
      Timed& finalist = finalists[(i + round) % finalists.size()];
      Result<Timed> again = time_schedule(finalist.result.schedule, finalist.result.oracle);
      WF_TRY(device_alive());
      WF_TRY_CONTEXT(again, "re-timing finalists of " + std::string(kernel_.id()));
      finalist.samples.insert(finalist.samples.end(), again->samples.begin(), again->samples.end());
    }
  }
  for (Timed& finalist : finalists) {
    finalist.result.timing =
        TimingSummary::from_samples(finalist.result.timing.source, finalist.samples).value();
  }
  std::sort(finalists.begin(), finalists.end(), [](const Timed& a, const Timed& b) {
    return a.result.timing.median_ns < b.result.timing.median_ns;
  });
  return finalists;
}

Result<TuneOutcome> Tuner::publish(std::vector<Timed> finalists) {
  // The winner must also pass the full certification (with the many-workgroups cases); a
  // finalist that fails it gives way to the next.
  const std::vector<Schedule> order = preferred();
  while (!finalists.empty()) {
    std::vector<Schedule> ties;
    const Timed* winner = choose_winner(finalists, order, ties);
    CertifyOptions full;
    full.seed = random_();
    Result<CertificationManifest> certification =
        certify(device_, kernel_, winner->result.schedule, full);
    WF_TRY(device_alive());
    if (!certification) {
      WF_TRY(record_failure(winner->result.schedule, certification.error()));
    } else if (certification->verdict != Verdict::kCertified) {
      failures_.push_back(
          {winner->result.schedule, FailureStage::kMismatch, first_failure(*certification)});
    }
    if (!certification || certification->verdict != Verdict::kCertified) {
      finalists.erase(finalists.begin() + (winner - finalists.data()));
      continue;
    }
    WF_TRY_ASSIGN(TuningManifest manifest, manifest_for(*winner, finalists, std::move(ties)));
    return TuneOutcome{std::move(manifest), std::move(certification).value(), problem_};
  }
  return Error(ErrorKind::kRuntime,
               "Every finalist of " + std::string(kernel_.id()) +
                   " failed its full certification (first: " + failures_.back().message + ").");
}

Result<TuningManifest> Tuner::manifest_for(const Timed& winner, const std::vector<Timed>& finalists,
                                           std::vector<Schedule> ties) const {
  TuningResult result;
  result.evaluated_candidates = evaluated_;
  result.rejected_candidates = failures_.size();
  result.failures = failures_;
  result.winner = winner.result;
  for (const Timed& finalist : finalists) result.finalists.push_back(finalist.result);
  TuningContext context;
  context.topology_hash = device_.adapter().topology_hash;
  context.problem_size = problem_.elements != 0
                             ? problem_.elements
                             : std::uint64_t{problem_.m} * problem_.n * problem_.k;
  if (options_.bucket && !options_.bucket->main) context.bucket = options_.bucket->label;
  context.toggles = device_.adapter().toggles;
  const Schedule default_schedule = kernel_.default_schedule();
  auto default_finalist = std::find_if(finalists.begin(), finalists.end(), [&](const Timed& one) {
    return one.result.schedule == default_schedule;
  });
  if (default_finalist != finalists.end()) context.baseline = default_finalist->result;
  context.ties = std::move(ties);
  WF_TRY_ASSIGN(GeneratedKernel generated,
                kernels::generate_builtin(kernel_, winner.result.schedule, TargetBackend::kWgsl,
                                          capabilities_));
  return TuningManifest::create(generated, device_.adapter().identity, std::move(result),
                                std::move(context));
}

Result<TuneOutcome> Tuner::run() {
  WF_TRY(prepare());
  WF_TRY_ASSIGN(std::vector<Timed> timed, search());
  WF_TRY_ASSIGN(std::vector<Timed> finalists, retime_finalists(std::move(timed)));
  return publish(std::move(finalists));
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
