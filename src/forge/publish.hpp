#pragma once
// Publishing a tune: which finalist wins, and the manifest that records the whole search.
//
// Why the median decides and the MAD judges ties: GPU timings have a long right tail (clock
// ramps, other work on the machine) and rare fast outliers (a cached result, a clock step); the
// mean follows the tail and the minimum rewards luck. The median of interleaved re-timings is
// stable across runs; two finalists whose medians differ by less than the larger of their MADs,
// or by less than 1 %, cannot be told apart, and a preferred schedule wins such a tie: a
// re-tune's stored winner (so that a re-tune never replaces what is stored with something no
// faster), then the default (the schedule users can reason about).

#include <vector>

#include "candidate_bench.hpp"

namespace wgsl_forge::forge {

bool within_noise(const TimingSummary& a, const TimingSummary& b);

// The finalist that wins: the fastest (finalists are sorted, fastest first), unless a schedule of
// `preferred` is within noise of it. `ties` gets the other finalists within noise of the fastest.
const TimedCandidate* choose_winner(const std::vector<TimedCandidate>& finalists,
                                    const std::vector<Schedule>& preferred,
                                    std::vector<Schedule>& ties);

// What a search found: every candidate, the finalists as re-timed, the winner (one of them), the
// ties, and the default's timing (as re-timed when it was a finalist, else its first timing).
struct SearchOutcome {
  std::vector<CandidateRecord> candidates;
  std::vector<TimedCandidate> finalists;
  const TimedCandidate* winner = nullptr;
  std::vector<Schedule> ties;
  std::optional<CandidateResult> baseline;
};

// The tuning manifest of a search, with its context: topology, problem, bucket, toggles, the
// default as baseline, the time.
Result<TuningManifest> build_tuning_manifest(const gpu::Device& device,
                                             const kernels::KernelDefinition& kernel,
                                             const kernels::Problem& problem,
                                             const std::optional<kernels::SizeBucket>& bucket,
                                             SearchOutcome outcome);

}  // namespace wgsl_forge::forge
