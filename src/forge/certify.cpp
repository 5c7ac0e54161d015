// Certification: a generated (or user-written) kernel against its CPU oracle on this adapter.

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "phase_timer.hpp"
#include "util/try.hpp"
#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

namespace {

std::uint64_t fresh_seed() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

// Whole numbers (u32 outputs) in full; others with the 9 digits that tell two floats apart.
std::string format_value(double value) {
  std::ostringstream text;
  text.precision(std::trunc(value) == value && std::abs(value) < 0x1p53 ? 17 : 9);
  text << value;
  return text.str();
}

}  // namespace

TimeBreakdown& TimeBreakdown::operator+=(const TimeBreakdown& other) {
  inputs += other.inputs;
  oracle += other.oracle;
  compile += other.compile;
  gpu_runs += other.gpu_runs;
  upload += other.upload;
  bind += other.bind;
  warmup += other.warmup;
  timing += other.timing;
  bookkeeping += other.bookkeeping;
  total += other.total;
  return *this;
}

double TimeBreakdown::unattributed() const {
  return total -
         (inputs + oracle + compile + gpu_runs + upload + bind + warmup + timing + bookkeeping);
}

namespace {

// One certification case: its spec, the seed that draws its inputs and guards, and its place.
struct PlannedCase {
  const kernels::CaseSpec* spec = nullptr;
  std::uint64_t seed = 0;
  std::uint32_t ordinal = 0;
};

std::uint64_t case_size(const kernels::CaseSpec& spec) {
  return std::max<std::uint64_t>(spec.problem.elements,
                                 std::uint64_t{spec.problem.m} * spec.problem.n);
}

// The cases of every round, each with its seed, in the order they run.
std::vector<PlannedCase> plan_cases(const std::vector<kernels::CaseSpec>& specs,
                                    const CertifyOptions& options) {
  std::mt19937_64 seeds(options.seed != 0 ? options.seed : fresh_seed());
  std::vector<PlannedCase> planned;
  for (std::uint32_t round = 0; round < std::max(1u, options.rounds); ++round) {
    for (const kernels::CaseSpec& spec : specs) {
      if (options.quick && case_size(spec) > kQuickCaseElements) continue;
      planned.push_back({&spec, seeds(), static_cast<std::uint32_t>(planned.size())});
    }
  }
  return planned;
}

// What a case's runs produced: the first run's outputs, every guard a run changed and the
// differences between runs.
struct CaseRuns {
  BufferContents outputs;
  std::vector<std::string> violations;
};

Result<CaseRuns> run_case(PreparedKernel& prepared, const kernels::KernelDefinition& kernel,
                          const kernels::CaseInputs& inputs, const PlannedCase& planned,
                          std::uint32_t runs) {
  CaseRuns result;
  // Bound and its inputs loaded once: every run starts from the same bytes.
  WF_TRY_ASSIGN(std::unique_ptr<GuardedCase> bound,
                prepared.bind_guarded(inputs, CaseGuards{planned.seed, planned.ordinal}));
  for (std::uint32_t run = 1; run <= runs; ++run) {
    // A later run of a deterministic kernel is compared with the first where it is mapped; one
    // of a kernel whose result may differ only has its guards checked.
    const bool compared = run > 1 && kernel.deterministic();
    WF_TRY_ASSIGN(GuardedOutputs outputs, bound->run(compared ? &result.outputs : nullptr));
    for (std::string& violation : outputs.violations) {
      if (std::find(result.violations.begin(), result.violations.end(), violation) ==
          result.violations.end())
        result.violations.push_back(std::move(violation));
    }
    if (run == 1) result.outputs = std::move(outputs.outputs);
  }
  return result;
}

CertificationCase case_record(const PlannedCase& planned, kernels::CaseVerdict verdict,
                              std::vector<std::string> violations, std::uint32_t runs) {
  const kernels::CaseSpec& spec = *planned.spec;
  // A changed guard rejects the kernel like a wrong element: it would have been a neighbour's.
  verdict.failed_checks.insert(verdict.failed_checks.begin(), violations.begin(), violations.end());
  CertificationCase record;
  record.name = spec.name;
  record.element_count = spec.problem.elements != 0
                             ? spec.problem.elements
                             : std::uint64_t{spec.problem.m} * spec.problem.n;
  record.value_profile = spec.value_profile;
  record.seed = planned.seed;
  record.allowed_absolute_error = verdict.allowed_absolute_error;
  record.allowed_relative_error = verdict.allowed_relative_error;
  record.report = verdict.report;
  record.failed_checks = std::move(verdict.failed_checks);
  record.runs = runs;
  return record;
}

// Cases whose inputs are drawn, or whose outputs are checked, on worker threads at once: the GPU
// runs one case while the CPU draws the next ones' inputs and checks earlier ones' outputs, on
// every core. Bounded, so that a few of the largest cases are in memory at a time.
std::size_t cases_in_flight() {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 2, 8);
}

}  // namespace

Result<CertificationManifest> certify_prepared(gpu::Device& device,
                                               const kernels::KernelDefinition& kernel,
                                               PreparedKernel& prepared, const Schedule& schedule,
                                               const CertifyOptions& options) {
  const std::string context =
      "certifying " + std::string(kernel.id()) + " with schedule " + schedule.to_string();
  std::vector<kernels::CaseSpec> specs = kernel.certification_cases();
  for (kernels::CaseSpec& spec : kernel.schedule_cases(schedule, capabilities_of(device.adapter())))
    specs.push_back(std::move(spec));
  const std::vector<PlannedCase> planned = plan_cases(specs, options);
  const std::uint32_t runs = std::max(1u, options.runs_per_case);
  const std::size_t window = cases_in_flight();
  // This thread's time by what it waits for (TimeBreakdown): the drawing and the checks run on
  // worker threads and count only while this thread waits for them.
  auto waiting_for = [&](double TimeBreakdown::*phase) {
    return PhaseTimer(phase_of(options.breakdown, phase));
  };

  std::vector<std::future<kernels::CaseInputs>> drawn(planned.size());
  auto draw = [&](std::size_t i) {
    drawn[i] = std::async(std::launch::async,
                          [&, i] { return kernel.make_inputs(*planned[i].spec, planned[i].seed); });
  };
  std::vector<std::future<CertificationCase>> checked;
  std::size_t next_draw = 0;
  for (std::size_t i = 0; i < planned.size(); ++i) {
    while (next_draw < planned.size() && next_draw < i + window) draw(next_draw++);
    std::shared_ptr<kernels::CaseInputs> inputs;
    {
      PhaseTimer drawing = waiting_for(&TimeBreakdown::inputs);
      inputs = std::make_shared<kernels::CaseInputs>(drawn[i].get());
    }
    Result<CaseRuns> outputs = [&] {
      PhaseTimer running = waiting_for(&TimeBreakdown::gpu_runs);
      return run_case(prepared, kernel, *inputs, planned[i], runs);
    }();
    if (!outputs) {
      // The futures left wait for their threads as they are destroyed.
      return std::move(outputs).error().with_context(context + ", case '" + planned[i].spec->name +
                                                     "'");
    }
    auto outcome = std::make_shared<CaseRuns>(std::move(outputs).value());
    checked.push_back(std::async(std::launch::async, [&, i, inputs, outcome] {
      kernels::CaseVerdict verdict = kernel.check(*inputs, outcome->outputs);
      return case_record(planned[i], std::move(verdict), std::move(outcome->violations), runs);
    }));
    // The oldest checks finish before more outputs pile up.
    if (checked.size() > window) {
      PhaseTimer checking = waiting_for(&TimeBreakdown::oracle);
      checked[checked.size() - 1 - window].wait();
    }
  }
  std::vector<CertificationCase> cases;
  {
    PhaseTimer checking = waiting_for(&TimeBreakdown::oracle);
    for (std::future<CertificationCase>& one : checked) cases.push_back(one.get());
  }
  return CertificationManifest::create(prepared.generated(), device.adapter().identity,
                                       device.adapter().topology_hash, kernel.tolerance(),
                                       std::move(cases));
}

Result<CertificationManifest> certify(gpu::Device& device, const kernels::KernelDefinition& kernel,
                                      const Schedule& schedule, const CertifyOptions& options) {
  std::optional<PhaseTimer> compiling(phase_of(options.breakdown, &TimeBreakdown::compile));
  WF_TRY_ASSIGN(GeneratedKernel generated,
                kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl,
                                          capabilities_of(device.adapter())));
  if (options.source) {
    generated.source = *options.source;
    generated.seal();
  }
  WF_TRY_ASSIGN(PreparedKernel prepared, PreparedKernel::prepare(device, kernel, generated));
  compiling.reset();
  return certify_prepared(device, kernel, prepared, schedule, options);
}

bool certified_as_winner(const CertificationManifest& certification) {
  if (certification.verdict != Verdict::kCertified) return false;
  std::map<std::string, std::uint32_t> rounds;
  for (const CertificationCase& one : certification.cases) {
    if (one.runs < kWinnerRunsPerCase) return false;
    ++rounds[one.name];
  }
  return std::all_of(rounds.begin(), rounds.end(),
                     [](const auto& named) { return named.second >= kWinnerRounds; });
}

std::string first_failure(const CertificationManifest& manifest) {
  for (const CertificationCase& one : manifest.cases) {
    if (one.passed()) continue;
    std::string text = "case '" + one.name + "' (seed " + std::to_string(one.seed) + "): ";
    if (one.report.first_mismatch) {
      const Mismatch& mismatch = *one.report.first_mismatch;
      text += "element " + std::to_string(mismatch.index) + " is " + format_value(mismatch.actual) +
              ", expected " + format_value(mismatch.expected) + " (" +
              std::to_string(one.report.mismatch_count) + " of " +
              std::to_string(one.report.compared) + " elements differ)";
    } else if (!one.failed_checks.empty()) {
      text += one.failed_checks.front();
    } else {
      text += std::to_string(one.report.mismatch_count) + " elements differ";
    }
    return text;
  }
  return manifest.cases.empty() ? "no case ran" : "";
}

}  // namespace wgsl_forge::forge
