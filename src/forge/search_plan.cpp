#include "search_plan.hpp"

#include <algorithm>
#include <utility>

namespace wgsl_forge::forge {

namespace {

bool timed_and_passed(const CandidateRecord& candidate) {
  return candidate.timing.has_value() && !candidate.failure.has_value();
}

bool contains(const std::vector<Schedule>& list, const Schedule& schedule) {
  return std::find(list.begin(), list.end(), schedule) != list.end();
}

}  // namespace

SearchPlan::SearchPlan(Space space, std::size_t budget, std::optional<Schedule> incumbent,
                       std::uint64_t seed)
    : space_(std::move(space)),
      budget_(std::max<std::size_t>(1, budget)),
      incumbent_(std::move(incumbent)),
      random_(seed) {}

bool SearchPlan::in_space(const Schedule& schedule) const {
  return contains(space_.schedules, schedule);
}

const CandidateRecord* SearchPlan::find(const Schedule& schedule) const {
  auto found = std::find_if(candidates_.begin(), candidates_.end(),
                            [&](const CandidateRecord& one) { return one.schedule == schedule; });
  return found != candidates_.end() ? &*found : nullptr;
}

CandidateRecord* SearchPlan::find_mutable(const Schedule& schedule) {
  return const_cast<CandidateRecord*>(std::as_const(*this).find(schedule));
}

void SearchPlan::resume(const CandidateRecord& earlier) {
  if (!in_space(earlier.schedule)) return;
  CandidateRecord* seen = find_mutable(earlier.schedule);
  if (earlier.failure) {
    // A failure outweighs an earlier timing of the same schedule: it is never tried again.
    CandidateRecord failed{earlier.schedule, CandidateRecord::Origin::kFailedBefore, std::nullopt,
                           earlier.failure, false};
    if (seen != nullptr) {
      *seen = std::move(failed);
    } else {
      candidates_.push_back(std::move(failed));
    }
    return;
  }
  if (seen != nullptr || !earlier.timing) return;
  candidates_.push_back(
      {earlier.schedule, CandidateRecord::Origin::kResumed, earlier.timing, std::nullopt, false});
}

std::size_t SearchPlan::tried() const {
  return pending_.size() +
         static_cast<std::size_t>(
             std::count_if(candidates_.begin(), candidates_.end(), [](const CandidateRecord& one) {
               return one.origin != CandidateRecord::Origin::kFailedBefore;
             }));
}

bool SearchPlan::known(const Schedule& schedule) const {
  return find(schedule) != nullptr || contains(pending_, schedule);
}

std::size_t SearchPlan::planned() const {
  const std::size_t limit =
      budget_ + (incumbent_ && *incumbent_ != space_.schedules.front() ? 1 : 0);
  const std::size_t failed_before = candidates_.size() + pending_.size() - tried();
  const std::size_t available =
      space_.schedules.size() > failed_before ? space_.schedules.size() - failed_before : 0;
  return std::min(limit, available);
}

bool SearchPlan::budget_spent() const { return tried() >= planned(); }

std::vector<Schedule> SearchPlan::initial_queue() {
  std::vector<Schedule> queue;
  if (space_.schedules.size() <= budget_) {
    queue = space_.schedules;
  } else {
    queue.push_back(space_.schedules.front());
    for (const Schedule& start : space_.starting_points) {
      if (in_space(start) && !contains(queue, start)) queue.push_back(start);
    }
    std::vector<Schedule> rest;
    for (const Schedule& schedule : space_.schedules) {
      if (!contains(queue, schedule)) rest.push_back(schedule);
    }
    std::shuffle(rest.begin(), rest.end(), random_);
    const std::size_t sampled = std::max<std::size_t>(1, budget_ * 2 / 3);
    const std::size_t drawn = std::min(sampled - std::min(sampled, queue.size()), rest.size());
    queue.insert(queue.end(), rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(drawn));
  }
  if (incumbent_) queue.insert(queue.begin(), *incumbent_);
  return queue;
}

std::vector<Schedule> SearchPlan::neighbours(const Schedule& schedule) const {
  std::vector<Schedule> result;
  for (const kernels::KnobSpec& knob : space_.knobs) {
    const std::optional<std::int64_t> value = schedule.get(knob.name);
    if (!value) continue;
    auto at = std::find(knob.values.begin(), knob.values.end(), *value);
    if (at == knob.values.end()) continue;
    for (int step : {-1, 1}) {
      const auto index = (at - knob.values.begin()) + step;
      if (index < 0 || index >= static_cast<std::ptrdiff_t>(knob.values.size())) continue;
      Schedule neighbour = schedule;
      neighbour.set(knob.name, knob.values[static_cast<std::size_t>(index)]);
      if (in_space(neighbour)) result.push_back(std::move(neighbour));
    }
  }
  return result;
}

std::vector<Schedule> SearchPlan::refinements() const {
  std::vector<Schedule> queue;
  const CandidateRecord* best = nullptr;
  for (const CandidateRecord& one : candidates_) {
    if (timed_and_passed(one) &&
        (best == nullptr || one.timing->median_ns < best->timing->median_ns))
      best = &one;
  }
  if (best != nullptr) {
    for (const Schedule& neighbour : neighbours(best->schedule)) {
      if (!known(neighbour) && !contains(queue, neighbour)) queue.push_back(neighbour);
    }
  }
  for (const Schedule& schedule : space_.schedules) {
    if (!queue.empty()) break;
    if (!known(schedule)) queue.push_back(schedule);
  }
  return queue;
}

std::vector<Schedule> SearchPlan::next_batch() {
  if (!queue_made_) {
    queue_ = initial_queue();
    queue_made_ = true;
  }
  std::vector<Schedule> batch;
  while (!budget_spent()) {
    if (queue_.empty()) {
      // A batch ends where the next schedules depend on its results.
      if (!batch.empty()) break;
      queue_ = refinements();
      if (queue_.empty()) break;
    }
    Schedule candidate = std::move(queue_.front());
    queue_.erase(queue_.begin());
    if (known(candidate)) continue;
    pending_.push_back(candidate);
    batch.push_back(std::move(candidate));
  }
  return batch;
}

void SearchPlan::record_timing(const Schedule& schedule, const TimingSummary& timing) {
  std::erase(pending_, schedule);
  if (CandidateRecord* seen = find_mutable(schedule)) {
    seen->timing = timing;
    return;
  }
  candidates_.push_back(
      {schedule, CandidateRecord::Origin::kMeasured, timing, std::nullopt, false});
}

void SearchPlan::record_failure(const Schedule& schedule, CandidateRecord::Failure failure) {
  std::erase(pending_, schedule);
  if (CandidateRecord* seen = find_mutable(schedule)) {
    if (!seen->failure) seen->failure = std::move(failure);
    return;
  }
  candidates_.push_back(
      {schedule, CandidateRecord::Origin::kMeasured, std::nullopt, std::move(failure), false});
}

void SearchPlan::mark_finalist(const Schedule& schedule) {
  if (CandidateRecord* seen = find_mutable(schedule)) seen->finalist = true;
}

void SearchPlan::add_untried_failure(CandidateRecord candidate) {
  if (find(candidate.schedule) == nullptr) candidates_.push_back(std::move(candidate));
}

std::vector<Schedule> SearchPlan::preferred() const {
  std::vector<Schedule> order;
  if (incumbent_) order.push_back(*incumbent_);
  order.push_back(space_.schedules.front());
  return order;
}

std::vector<Schedule> SearchPlan::finalists(std::size_t count) const {
  std::vector<const CandidateRecord*> timed;
  for (const CandidateRecord& one : candidates_) {
    if (timed_and_passed(one)) timed.push_back(&one);
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const CandidateRecord* a, const CandidateRecord* b) {
                     return a->timing->median_ns < b->timing->median_ns;
                   });
  std::vector<Schedule> chosen;
  for (const CandidateRecord* one : timed) {
    if (chosen.size() == count) break;
    if (one->timing->median_ns <= kClearlySlowerFactor * timed.front()->timing->median_ns)
      chosen.push_back(one->schedule);
  }
  // The stored winner competes in its own re-tune, however slow it timed here.
  if (incumbent_) {
    const CandidateRecord* one = find(*incumbent_);
    if (one != nullptr && timed_and_passed(*one) && !contains(chosen, *incumbent_))
      chosen.push_back(*incumbent_);
  }
  return chosen;
}

}  // namespace wgsl_forge::forge
