#include "candidate_bench.hpp"

#include <algorithm>
#include <future>

#include "phase_timer.hpp"
#include "util/try.hpp"

namespace wgsl_forge::forge {

namespace {

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

// The sum of what the quick cases compared, and their largest errors: the candidate's oracle.
ComparisonReport summary_of(const CertificationManifest& certification) {
  ComparisonReport oracle;
  for (const CertificationCase& one : certification.cases) {
    oracle.compared += one.report.compared;
    oracle.max_absolute_error = std::max(oracle.max_absolute_error, one.report.max_absolute_error);
    oracle.max_relative_error = std::max(oracle.max_relative_error, one.report.max_relative_error);
  }
  return oracle;
}

}  // namespace

struct CandidateBench::Candidate {
  Schedule schedule;
  std::unique_ptr<PreparedKernel> prepared;
  ComparisonReport oracle;
  std::unique_ptr<BoundPlan> bound;  // bound at the problem once timed, until released
};

CandidateBench::CandidateBench(gpu::Device& device, const kernels::KernelDefinition& kernel,
                               const TuneOptions& options, TimeBreakdown& breakdown)
    : device_(device), kernel_(kernel), options_(options), breakdown_(breakdown) {}

CandidateBench::~CandidateBench() = default;

CandidateBench::Candidate* CandidateBench::find(const Schedule& schedule) {
  for (const std::unique_ptr<Candidate>& candidate : candidates_) {
    if (candidate->schedule == schedule) return candidate.get();
  }
  return nullptr;
}

PreparedKernel* CandidateBench::prepared(const Schedule& schedule) {
  Candidate* candidate = find(schedule);
  return candidate != nullptr ? candidate->prepared.get() : nullptr;
}

std::optional<ComparisonReport> CandidateBench::oracle(const Schedule& schedule) {
  Candidate* candidate = find(schedule);
  if (candidate == nullptr) return std::nullopt;
  return candidate->oracle;
}

Status CandidateBench::device_alive() const {
  if (auto lost = device_.lost_reason()) {
    return Error(ErrorKind::kDeviceLost, "The GPU device was lost while tuning " +
                                             std::string(kernel_.id()) + " (" + *lost +
                                             "); nothing measured on it is published.");
  }
  return Ok{};
}

Result<CandidateRecord::Failure> CandidateBench::failure_of(const Schedule& schedule,
                                                            const Error& error) {
  WF_TRY(device_alive());
  const FailureStage stage = stage_of(error);
  if (stage == FailureStage::kTimeout) {
    if (Status idle = device_.wait_for_idle(options_.drain_timeout); !idle) {
      return Error(ErrorKind::kTimeout,
                   "Schedule " + schedule.to_string() + " of " + std::string(kernel_.id()) +
                       " still occupies the GPU " + std::to_string(options_.drain_timeout.count()) +
                       " ms after its wait timed out; tuning stops and nothing is published.")
          .with_context(idle.error().message());
    }
  }
  return CandidateRecord::Failure{stage, error.to_string()};
}

std::shared_ptr<TimingInputs> TimingInputs::draw_ahead(const kernels::KernelDefinition& kernel,
                                                       const kernels::Problem& problem,
                                                       std::uint64_t seed,
                                                       const TimingInputs* after) {
  auto ahead = std::make_shared<TimingInputs>();
  ahead->kernel_id_ = std::string(kernel.id());
  ahead->problem_ = problem.to_string();
  auto finished = std::make_shared<std::promise<void>>();
  ahead->finished_ = finished->get_future().share();
  std::shared_future<void> earlier =
      after != nullptr ? after->finished_ : std::shared_future<void>();
  ahead->drawn_ = std::async(std::launch::async, [&kernel, problem, seed, finished, earlier] {
    if (earlier.valid()) earlier.wait();
    // Set however the drawing ends, so that a drawing chained after this one never waits for
    // ever.
    struct Finish {
      std::promise<void>& promise;
      ~Finish() { promise.set_value(); }
    } finish{*finished};
    return draw(kernel, problem, seed);
  });
  return ahead;
}

kernels::CaseInputs TimingInputs::draw(const kernels::KernelDefinition& kernel,
                                       const kernels::Problem& problem, std::uint64_t seed) {
  const std::vector<kernels::CaseSpec> specs = kernel.certification_cases();
  return kernel.make_inputs({"tuning " + problem.to_string(), problem, specs.front().value_profile},
                            seed);
}

bool TimingInputs::fits(const kernels::KernelDefinition& kernel,
                        const kernels::Problem& problem) const {
  return drawn_.valid() && kernel_id_ == kernel.id() && problem_ == problem.to_string();
}

kernels::CaseInputs TimingInputs::take() { return drawn_.get(); }

Status CandidateBench::prepare(const kernels::Problem& problem, const gpu::TimingOptions& timing,
                               std::uint64_t seed, TimingInputs* ahead) {
  problem_ = problem;
  timing_ = timing;
  BufferContents inputs;
  {
    PhaseTimer drawing(&breakdown_.inputs);
    inputs = ahead != nullptr && ahead->fits(kernel_, problem)
                 ? ahead->take().buffers
                 : TimingInputs::draw(kernel_, problem, seed).buffers;
  }
  PhaseTimer uploading(&breakdown_.upload);
  for (auto& [name, bytes] : inputs) {
    // Zero-padded to whole words; the plan's own buffers zero-pad past the contents.
    WF_TRY_ASSIGN(gpu::Buffer buffer,
                  device_.create_buffer_with_contents(
                      bytes, std::string(kernel_.id()) + " tuning input " + name));
    uploaded_.emplace(name, std::move(buffer));
    // Gone as soon as it is on the GPU: the next kernel's inputs are drawn meanwhile.
    std::vector<std::byte>().swap(bytes);
  }
  return Ok{};
}

void CandidateBench::compile(const std::vector<Schedule>& batch) {
  PhaseTimer compiling(&breakdown_.compile);
  ScopedWaitTimeout watchdog(device_, options_.candidate_timeout);
  std::vector<Schedule> schedules;
  std::vector<GeneratedKernel> generated;
  for (const Schedule& schedule : batch) {
    Result<GeneratedKernel> one = kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl,
                                                            capabilities_of(device_.adapter()));
    // One that does not generate fails again, alone, in certify().
    if (!one) continue;
    schedules.push_back(schedule);
    generated.push_back(std::move(one).value());
  }
  if (schedules.size() < 2) return;
  std::vector<KernelToPrepare> requests;
  for (const GeneratedKernel& one : generated) requests.push_back({&kernel_, &one});
  Result<std::vector<PreparedKernel>> prepared = PreparedKernel::prepare_all(device_, requests);
  if (!prepared) return;
  for (std::size_t i = 0; i < schedules.size(); ++i) {
    compiled_.emplace_back(schedules[i],
                           std::make_unique<PreparedKernel>(std::move((*prepared)[i])));
  }
}

Result<std::optional<CandidateRecord::Failure>> CandidateBench::certify(const Schedule& schedule,
                                                                        std::uint64_t seed) {
  ScopedWaitTimeout watchdog(device_, options_.candidate_timeout);
  auto candidate = std::make_unique<Candidate>();
  candidate->schedule = schedule;
  auto precompiled = std::find_if(compiled_.begin(), compiled_.end(),
                                  [&](const auto& one) { return one.first == schedule; });
  if (precompiled != compiled_.end()) {
    candidate->prepared = std::move(precompiled->second);
    compiled_.erase(precompiled);
  } else {
    Result<PreparedKernel> prepared = [&]() -> Result<PreparedKernel> {
      PhaseTimer compiling(&breakdown_.compile);
      WF_TRY_ASSIGN(GeneratedKernel generated,
                    kernels::generate_builtin(kernel_, schedule, TargetBackend::kWgsl,
                                              capabilities_of(device_.adapter())));
      return PreparedKernel::prepare(device_, kernel_, generated);
    }();
    if (!prepared) {
      WF_TRY_ASSIGN(CandidateRecord::Failure failure, failure_of(schedule, prepared.error()));
      return std::optional(std::move(failure));
    }
    candidate->prepared = std::make_unique<PreparedKernel>(std::move(prepared).value());
  }
  CertifyOptions quick;
  quick.quick = true;
  quick.seed = seed;
  quick.breakdown = &breakdown_;
  Result<CertificationManifest> certification =
      certify_prepared(device_, kernel_, *candidate->prepared, schedule, quick);
  if (!certification) {
    WF_TRY_ASSIGN(CandidateRecord::Failure failure, failure_of(schedule, certification.error()));
    return std::optional(std::move(failure));
  }
  WF_TRY(device_alive());
  if (certification->verdict != Verdict::kCertified) {
    return std::optional(
        CandidateRecord::Failure{FailureStage::kMismatch, first_failure(*certification)});
  }
  candidate->oracle = summary_of(*certification);
  candidates_.push_back(std::move(candidate));
  return std::optional<CandidateRecord::Failure>();
}

Status CandidateBench::bind(Candidate& candidate) {
  PhaseTimer binding(&breakdown_.bind);
  WF_TRY_ASSIGN(candidate.bound, candidate.prepared->bind(problem_));
  WF_TRY_ASSIGN(gpu::CommandEncoder encoder, device_.create_command_encoder());
  for (const kernels::BufferPlan& buffer : candidate.bound->plan().buffers) {
    if (buffer.role != kernels::BufferRole::kInput) continue;
    auto source = uploaded_.find(buffer.name);
    if (source == uploaded_.end()) {
      return Error(ErrorKind::kInvalidInput, "The tuning inputs of " + std::string(kernel_.id()) +
                                                 " have no buffer " + buffer.name + ".");
    }
    const std::uint64_t bytes = std::min(buffer.bytes, source->second.size());
    WF_TRY(device_.encode_copy(encoder, source->second, 0, candidate.bound->buffer(buffer.name),
                               candidate.bound->offset(buffer.name), bytes));
  }
  return device_.submit_and_wait(std::move(encoder), "copying the tuning inputs");
}

Result<gpu::TimedRun> CandidateBench::time_steps(const std::vector<gpu::DispatchStep>& steps,
                                                 const gpu::TimingOptions& timing) {
  WF_TRY_ASSIGN(gpu::TimedRun timed, device_.time(steps, timing));
  breakdown_.warmup += std::chrono::duration<double>(timed.warmup_wall).count();
  breakdown_.timing += std::chrono::duration<double>(timed.sampling_wall).count();
  return timed;
}

Result<std::variant<TimedCandidate, CandidateRecord::Failure>> CandidateBench::time(
    const Schedule& schedule, std::optional<double> leader_ns) {
  using Outcome = std::variant<TimedCandidate, CandidateRecord::Failure>;
  ScopedWaitTimeout watchdog(device_, options_.candidate_timeout);
  Candidate* candidate = find(schedule);
  if (candidate == nullptr) {
    return Error(ErrorKind::kInvalidInput, "Schedule " + schedule.to_string() + " of " +
                                               std::string(kernel_.id()) +
                                               " is timed before it is certified.");
  }
  gpu::TimingOptions timing = timing_;
  if (leader_ns) timing.give_up_above_ns = kClearlySlowerFactor * *leader_ns;
  Status bound = candidate->bound ? Status(Ok{}) : bind(*candidate);
  Result<gpu::TimedRun> timed =
      bound ? time_steps(candidate->bound->steps(), timing) : Result<gpu::TimedRun>(bound.error());
  if (!timed) {
    candidate->bound.reset();
    WF_TRY_ASSIGN(CandidateRecord::Failure failure, failure_of(schedule, timed.error()));
    return Outcome(std::move(failure));
  }
  WF_TRY(device_alive());
  return Outcome(TimedCandidate{CandidateResult{schedule, candidate->oracle, timed->summary},
                                std::move(timed->samples_ns)});
}

void CandidateBench::release_except(const std::vector<Schedule>& keep) {
  for (const std::unique_ptr<Candidate>& candidate : candidates_) {
    if (std::find(keep.begin(), keep.end(), candidate->schedule) == keep.end())
      candidate->bound.reset();
  }
}

void CandidateBench::release_buffers() {
  release_except({});
  uploaded_.clear();
}

Result<std::vector<TimedCandidate>> CandidateBench::retime(std::vector<TimedCandidate> finalists,
                                                           std::uint32_t rounds) {
  // Every finalist has run here before (its first timing or its certification), and the rounds
  // run back to back: the calibration run is all the warm-up a finalist needs (a warm-up run
  // more costs a 2^28-pair sort 0.1 s a finalist and round).
  gpu::TimingOptions warm = timing_;
  warm.warmup_runs = 0;
  for (std::uint32_t round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < finalists.size(); ++i) {
      TimedCandidate& finalist = finalists[(i + round) % finalists.size()];
      Candidate* candidate = find(finalist.result.schedule);
      if (candidate == nullptr) {
        return Error(ErrorKind::kInvalidInput, "Finalist " + finalist.result.schedule.to_string() +
                                                   " of " + std::string(kernel_.id()) +
                                                   " was not certified by this tune.");
      }
      if (!candidate->bound) WF_TRY(bind(*candidate));
      Result<gpu::TimedRun> again = time_steps(candidate->bound->steps(), warm);
      WF_TRY(device_alive());
      WF_TRY_CONTEXT(again, "re-timing the finalists of " + std::string(kernel_.id()));
      finalist.samples.insert(finalist.samples.end(), again->samples_ns.begin(),
                              again->samples_ns.end());
    }
  }
  for (TimedCandidate& finalist : finalists) {
    finalist.result.timing =
        TimingSummary::from_samples(finalist.result.timing.source, finalist.samples).value();
  }
  std::stable_sort(finalists.begin(), finalists.end(),
                   [](const TimedCandidate& a, const TimedCandidate& b) {
                     return a.result.timing.median_ns < b.result.timing.median_ns;
                   });
  return finalists;
}

}  // namespace wgsl_forge::forge
