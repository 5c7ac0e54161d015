#pragma once
// What a tune tries next, from what it has seen so far. Pure logic: no GPU, no cache, so that the
// search's rules can be read in one place and tested without an adapter.
//
// The order: the stored winner of a re-tune first (beyond the budget, so that a small budget
// cannot leave it out), then, when the whole space fits the budget, every schedule; otherwise the
// default, the kernel's starting points that fit this adapter, a seeded random sample up to two
// thirds of the budget, and the untried neighbours of the fastest so far (one knob one step
// away) for the rest. Candidates that an earlier, interrupted search measured count as tried and
// spend the budget as if measured now; schedules that failed before on this topology are never
// tried (and never published).

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "wgsl_forge/kernels.hpp"
#include "wgsl_forge/model.hpp"

namespace wgsl_forge::forge {

// A candidate whose median is this many times the fastest one's is clearly slower: its timing
// stops after a few samples (CandidateBench::time), and it takes no part in the finals (it
// cannot win nor tie the winner: on a GPU two timings of one schedule differ by a few percent at
// most). 1.25 rather than 1.5 took a 2^28-pair u64 sort's 1.32-times slower candidate out of
// the finals on the H200 (2.7 s of re-timing; session 28).
inline constexpr double kClearlySlowerFactor = 1.25;

class SearchPlan {
 public:
  struct Space {
    std::vector<Schedule> schedules;        // every legal schedule here, the default first
    std::vector<kernels::KnobSpec> knobs;   // for neighbours: each knob's legal values in order
    std::vector<Schedule> starting_points;  // the kernel's, those in `schedules`
  };

  // `incumbent`: a re-tune's stored winner, which must be in the space.
  SearchPlan(Space space, std::size_t budget, std::optional<Schedule> incumbent,
             std::uint64_t seed);

  // What an earlier search on this topology and kernel revision left: a timing at this problem
  // (the candidate is resumed: tried and timed) or a failure (never tried again). A schedule
  // outside the space is ignored.
  void resume(const CandidateRecord& earlier);

  // The schedules to measure next, which need no result that is not known yet: what is left of
  // the first queue, then the untried neighbours of the fastest so far, within the budget. Each
  // counts as tried until its outcome is recorded. Empty when the budget is spent or nothing is
  // left to try.
  std::vector<Schedule> next_batch();
  // The outcome of a schedule of a batch (or of a finalist's full certification).
  void record_timing(const Schedule& schedule, const TimingSummary& timing);
  void record_failure(const Schedule& schedule, CandidateRecord::Failure failure);
  // Marks a timed candidate as one that took part in the finals.
  void mark_finalist(const Schedule& schedule);

  // How many candidates the search times or resumes in all, as far as is known now: the budget
  // (plus the incumbent beyond it), or the space when it is smaller.
  std::size_t planned() const;
  // Candidates tried so far (measured, resumed or in a batch).
  std::size_t tried() const;

  // The candidates that take part in the finals: the `count` fastest timed that are not clearly
  // slower than the fastest (kClearlySlowerFactor: they cannot win, the default included, whose
  // first timing is then the baseline), then the incumbent when it was timed, whatever its
  // time. A failed candidate never is one.
  std::vector<Schedule> finalists(std::size_t count) const;
  // Who wins a tie among finalists, in order: the incumbent, then the default.
  std::vector<Schedule> preferred() const;

  // Every candidate looked at, in order, and what became of it.
  const std::vector<CandidateRecord>& candidates() const { return candidates_; }
  // A candidate that failed without being tried (a re-tune's stored winner outside this space).
  void add_untried_failure(CandidateRecord candidate);
  const CandidateRecord* find(const Schedule& schedule) const;

 private:
  bool budget_spent() const;
  // The first schedules to try for the budget, before any result is known.
  std::vector<Schedule> initial_queue();
  // What to try once the queue is empty: the untried neighbours of the fastest, else anything
  // untried.
  std::vector<Schedule> refinements() const;
  bool known(const Schedule& schedule) const;
  std::vector<Schedule> neighbours(const Schedule& schedule) const;
  bool in_space(const Schedule& schedule) const;
  CandidateRecord* find_mutable(const Schedule& schedule);

  Space space_;
  std::size_t budget_;
  std::optional<Schedule> incumbent_;
  std::mt19937_64 random_;
  std::vector<Schedule> queue_;
  bool queue_made_ = false;
  std::vector<Schedule> pending_;  // in a batch, outcome not recorded yet
  std::vector<CandidateRecord> candidates_;
};

}  // namespace wgsl_forge::forge
