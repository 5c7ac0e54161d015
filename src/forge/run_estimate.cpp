#include <algorithm>

#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

namespace {

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

}  // namespace

RunEstimate::RunEstimate(std::size_t tunes, std::chrono::steady_clock::time_point start)
    : tunes_(tunes), stage_started_(start) {}

void RunEstimate::observe(const TuneProgress& progress, std::chrono::steady_clock::time_point now) {
  const std::string& stage = progress.stage;
  if (stage == "certifying" && phase_ == Phase::kPreparing) {
    done_.preparing += seconds_between(stage_started_, now);
    enter(Phase::kCandidates, now);
  } else if (stage == "finalists" && phase_ == Phase::kCandidates) {
    done_.candidates += seconds_between(stage_started_, now);
    done_.candidate_count += progress.candidate;
    enter(Phase::kFinals, now);
  } else if (stage == "certifying winner" && phase_ == Phase::kFinals) {
    done_.finals += seconds_between(stage_started_, now);
    enter(Phase::kWinner, now);
  } else if (stage == "published") {
    if (phase_ == Phase::kWinner) done_.winner += seconds_between(stage_started_, now);
    ++completed_;
    enter(Phase::kPreparing, now);
  }
  if (!progress.kernel_id.empty() && stage != "warning") {
    tried_ = progress.candidate;
    planned_ = progress.candidates;
  }
}

void RunEstimate::enter(Phase phase, std::chrono::steady_clock::time_point now) {
  phase_ = phase;
  stage_started_ = now;
}

std::optional<double> RunEstimate::seconds_left(std::chrono::steady_clock::time_point now) const {
  if (completed_ == 0) return std::nullopt;
  const double tunes = static_cast<double>(completed_);
  const double preparing = done_.preparing / tunes;
  const double per_candidate =
      done_.candidate_count > 0 ? done_.candidates / static_cast<double>(done_.candidate_count) : 0;
  const double finals = done_.finals / tunes;
  const double winner = done_.winner / tunes;
  const double in_stage = seconds_between(stage_started_, now);
  const double candidates_left = static_cast<double>(planned_ > tried_ ? planned_ - tried_ : 0);
  double current = 0;
  switch (phase_) {
    case Phase::kPreparing:
      // Between tunes: the next one is counted with the tunes to come.
      break;
    case Phase::kCandidates:
      current = candidates_left * per_candidate + finals + winner;
      break;
    case Phase::kFinals:
      current = std::max(0.0, finals - in_stage) + winner;
      break;
    case Phase::kWinner:
      current = std::max(0.0, winner - in_stage);
      break;
  }
  const std::size_t started = completed_ + (phase_ == Phase::kPreparing ? 0 : 1);
  const double to_come = static_cast<double>(tunes_ > started ? tunes_ - started : 0);
  const double per_tune =
      done_.candidate_count > 0
          ? (done_.preparing + done_.candidates + done_.finals + done_.winner) / tunes
          : preparing + finals + winner;
  return current + to_come * per_tune;
}

}  // namespace wgsl_forge::forge
