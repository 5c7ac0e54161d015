// Certification: a generated (or user-written) kernel against its CPU oracle on this adapter.

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

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

Result<CertificationManifest> certify(gpu::Device& device, const kernels::KernelDefinition& kernel,
                                      const Schedule& schedule, const CertifyOptions& options) {
  const std::string context =
      "certifying " + std::string(kernel.id()) + " with schedule " + schedule.to_string();
  WF_TRY_ASSIGN(GeneratedKernel generated,
                kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl,
                                          capabilities_of(device.adapter())));
  if (options.source) {
    generated.source = *options.source;
    generated.seal();
  }
  WF_TRY_ASSIGN(PreparedKernel prepared, PreparedKernel::prepare(device, kernel, generated));

  std::mt19937_64 seeds(options.seed != 0 ? options.seed : fresh_seed());
  std::vector<CertificationCase> cases;
  std::vector<kernels::CaseSpec> specs = kernel.certification_cases();
  for (kernels::CaseSpec& spec : kernel.schedule_cases(schedule, capabilities_of(device.adapter())))
    specs.push_back(std::move(spec));
  for (const kernels::CaseSpec& spec : specs) {
    const std::uint64_t size = std::max<std::uint64_t>(
        spec.problem.elements, std::uint64_t{spec.problem.m} * spec.problem.n);
    if (options.quick && size > kQuickCaseElements) continue;
    const std::uint64_t seed = seeds();
    kernels::CaseInputs inputs = kernel.make_inputs(spec, seed);
    const CaseGuards guards{seed, static_cast<std::uint32_t>(cases.size())};
    Result<GuardedOutputs> outputs = prepared.run_guarded(inputs, guards);
    if (!outputs) {
      return std::move(outputs).error().with_context(context + ", case '" + spec.name + "'");
    }
    kernels::CaseVerdict verdict = kernel.check(inputs, outputs->outputs);
    // A changed guard rejects the kernel like a wrong element: it would have been a neighbour's.
    verdict.failed_checks.insert(verdict.failed_checks.begin(), outputs->violations.begin(),
                                 outputs->violations.end());
    CertificationCase record;
    record.name = spec.name;
    record.element_count = spec.problem.elements != 0
                               ? spec.problem.elements
                               : std::uint64_t{spec.problem.m} * spec.problem.n;
    record.value_profile = spec.value_profile;
    record.seed = seed;
    record.allowed_absolute_error = verdict.allowed_absolute_error;
    record.allowed_relative_error = verdict.allowed_relative_error;
    record.report = verdict.report;
    record.failed_checks = std::move(verdict.failed_checks);
    cases.push_back(std::move(record));
  }
  return CertificationManifest::create(generated, device.adapter().identity,
                                       device.adapter().topology_hash, kernel.tolerance(),
                                       std::move(cases));
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
