#pragma once
// Adds the wall time of a scope to one phase of a TimeBreakdown.

#include <chrono>

#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

class PhaseTimer {
 public:
  // `phase` is a field of a TimeBreakdown, or null to time nothing.
  explicit PhaseTimer(double* phase) : phase_(phase), started_(Clock::now()) {}
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  ~PhaseTimer() {
    if (phase_ != nullptr)
      *phase_ += std::chrono::duration<double>(Clock::now() - started_).count();
  }

 private:
  using Clock = std::chrono::steady_clock;
  double* phase_;
  Clock::time_point started_;
};

// The field `phase` of `breakdown`, or null when there is no breakdown to add to.
inline double* phase_of(TimeBreakdown* breakdown, double TimeBreakdown::*phase) {
  return breakdown != nullptr ? &(breakdown->*phase) : nullptr;
}

}  // namespace wgsl_forge::forge
