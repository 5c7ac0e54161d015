#pragma once
// Measuring a tune's candidates on one device at one problem: each is screened by its quick
// certification cases and then timed once, and the finalists are timed again together. What a
// tune tries is decided elsewhere (search_plan.hpp), and what it publishes too (publish.hpp).
//
// Why the timing is arranged as it is:
//   - the timing problem's inputs are drawn once per tune and uploaded once, into buffers that
//     every candidate's plan copies from on the GPU: a candidate costs a copy at device speed,
//     not a host upload of up to gigabytes;
//   - a candidate is timed with the pipelines its certification compiled;
//   - a batch of candidates is certified first and timed back to back, so that the GPU stays
//     busy and warm between them (see gpu::TimingOptions::warmup_duration: the device warms up
//     only for as long as it was idle);
//   - a candidate whose first samples are clearly slower than the leader's median
//     (kClearlySlowerFactor) stops there (TimingOptions::give_up_above_ns): it cannot win, and
//     more samples would not change that.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "search_plan.hpp"
#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

// A candidate that passed its quick certification and was timed.
struct TimedCandidate {
  CandidateResult result;
  std::vector<std::uint64_t> samples;
};

class CandidateBench {
 public:
  CandidateBench(gpu::Device& device, const kernels::KernelDefinition& kernel,
                 const TuneOptions& options, TimeBreakdown& breakdown);
  ~CandidateBench();
  CandidateBench(const CandidateBench&) = delete;
  CandidateBench& operator=(const CandidateBench&) = delete;

  // Draws the problem's inputs with `seed`, or takes those drawn ahead when they fit (only the
  // wait for them counts as the inputs' time), and uploads them once.
  Status prepare(const kernels::Problem& problem, const gpu::TimingOptions& timing,
                 std::uint64_t seed, TimingInputs* ahead);

  // Compiles the pipelines of every schedule of a batch at once, so that the driver compiles them
  // side by side; certify() takes them from here. Where the batch fails as a whole, each schedule
  // is compiled alone by certify(), which records why one fails.
  void compile(const std::vector<Schedule>& batch);
  // Compiles `schedule` (unless compile() did) and runs its quick certification cases (drawn
  // from `seed`). nullopt when
  // it passed (its pipelines are kept for timing), else why it failed. An error only when tuning
  // cannot go on: the device is lost, or a timed-out kernel still holds the GPU.
  Result<std::optional<CandidateRecord::Failure>> certify(const Schedule& schedule,
                                                          std::uint64_t seed);
  // Times a schedule that certify() passed, once; with `leader_ns`, it stops early when clearly
  // slower than that median. The timing, or why it failed; an error as for certify.
  Result<std::variant<TimedCandidate, CandidateRecord::Failure>> time(
      const Schedule& schedule, std::optional<double> leader_ns);
  // The finalists (timed before, in any order) timed again in `rounds` interleaved rounds, their
  // new samples added to their first ones; sorted by median, fastest first.
  Result<std::vector<TimedCandidate>> retime(std::vector<TimedCandidate> finalists,
                                             std::uint32_t rounds);

  // Releases the buffers bound for timing every candidate but those in `keep` (the finalists so
  // far): at large problems each plan holds gigabytes.
  void release_except(const std::vector<Schedule>& keep);
  // Releases every buffer of the problem: the candidates' and the uploaded inputs.
  void release_buffers();

  // A schedule's pipelines, compiled by certify() (null when it was not certified here).
  PreparedKernel* prepared(const Schedule& schedule);
  // What its quick cases compared (nullopt when it was not certified here).
  std::optional<ComparisonReport> oracle(const Schedule& schedule);

  // What a failure of `schedule` with `error` is: its stage and message. After a timeout the
  // kernel may still occupy the GPU (WebGPU cannot preempt it), so this waits for it; an error
  // when it does not finish within TuneOptions::drain_timeout, or when the device is lost.
  Result<CandidateRecord::Failure> failure_of(const Schedule& schedule, const Error& error);
  // An error once the device is lost: nothing measured on it is published.
  Status device_alive() const;

 private:
  struct Candidate;
  Candidate* find(const Schedule& schedule);
  // Binds the candidate's plan at the problem and fills its inputs from the uploaded ones.
  Status bind(Candidate& candidate);
  Result<gpu::TimedRun> time_steps(const std::vector<gpu::DispatchStep>& steps,
                                   const gpu::TimingOptions& timing);
  gpu::Device& device_;
  const kernels::KernelDefinition& kernel_;
  const TuneOptions& options_;
  TimeBreakdown& breakdown_;
  kernels::Problem problem_;
  gpu::TimingOptions timing_;
  // The problem's inputs on the GPU, by buffer name, which each candidate's inputs copy.
  std::map<std::string, gpu::Buffer> uploaded_;
  std::vector<std::unique_ptr<Candidate>> candidates_;
  // Compiled by compile(), not yet certified.
  std::vector<std::pair<Schedule, std::unique_ptr<PreparedKernel>>> compiled_;
};

}  // namespace wgsl_forge::forge
