#include "publish.hpp"

#include <algorithm>
#include <cmath>

#include "util/try.hpp"

namespace wgsl_forge::forge {

bool within_noise(const TimingSummary& a, const TimingSummary& b) {
  const double noise = std::max({a.mad_ns, b.mad_ns, 0.01 * std::min(a.median_ns, b.median_ns)});
  return std::abs(a.median_ns - b.median_ns) <= noise;
}

const TimedCandidate* choose_winner(const std::vector<TimedCandidate>& finalists,
                                    const std::vector<Schedule>& preferred,
                                    std::vector<Schedule>& ties) {
  const TimedCandidate* fastest = &finalists.front();
  const TimedCandidate* chosen = fastest;
  for (const Schedule& schedule : preferred) {
    auto found = std::find_if(finalists.begin(), finalists.end(), [&](const TimedCandidate& one) {
      return one.result.schedule == schedule;
    });
    if (found != finalists.end() && within_noise(found->result.timing, fastest->result.timing)) {
      chosen = &*found;
      break;
    }
  }
  ties.clear();
  for (const TimedCandidate& other : finalists) {
    if (&other != chosen && within_noise(other.result.timing, fastest->result.timing))
      ties.push_back(other.result.schedule);
  }
  return chosen;
}

Result<TuningManifest> build_tuning_manifest(const gpu::Device& device,
                                             const kernels::KernelDefinition& kernel,
                                             const kernels::Problem& problem,
                                             const std::optional<kernels::SizeBucket>& bucket,
                                             SearchOutcome outcome) {
  TuningResult result;
  result.candidates = std::move(outcome.candidates);
  result.winner = outcome.winner->result;
  for (const TimedCandidate& finalist : outcome.finalists)
    result.finalists.push_back(finalist.result);
  TuningContext context;
  context.topology_hash = device.adapter().topology_hash;
  context.problem_size = kernels::bucket_measure(problem);
  if (bucket && !bucket->main) context.bucket = bucket->label;
  context.toggles = device.adapter().toggles;
  context.baseline = std::move(outcome.baseline);
  context.ties = std::move(outcome.ties);
  context.tuned_at = utc_timestamp_now();
  WF_TRY_ASSIGN(GeneratedKernel generated,
                kernels::generate_builtin(kernel, result.winner.schedule, TargetBackend::kWgsl,
                                          capabilities_of(device.adapter())));
  return TuningManifest::create(generated, device.adapter().identity, std::move(result),
                                std::move(context));
}

}  // namespace wgsl_forge::forge
