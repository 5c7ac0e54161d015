#pragma once
// A kernel definition that forwards every call to a builtin kernel, so that a test changes one
// behaviour of a real kernel (its WGSL, its plan, its inputs) and keeps the rest.

#include <string_view>

#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge::testing {

class DelegatingKernel : public kernels::KernelDefinition {
 public:
  explicit DelegatingKernel(std::string_view builtin_id)
      : base_(*kernels::find_kernel(builtin_id).value()) {}

  std::vector<kernels::KnobSpec> knobs() const override { return base_.knobs(); }
  std::vector<kernels::WgslBinding> wgsl_bindings(const Schedule& schedule) const override {
    return base_.wgsl_bindings(schedule);
  }
  std::vector<kernels::BufferSpec> buffer_specs() const override { return base_.buffer_specs(); }
  std::vector<std::string> entry_points(const Schedule& schedule) const override {
    return base_.entry_points(schedule);
  }
  std::string generate_wgsl(const Schedule& schedule) const override {
    return base_.generate_wgsl(schedule);
  }
  Result<kernels::DispatchPlan> plan(const Schedule& schedule, const kernels::Problem& problem,
                                     const kernels::DeviceCapabilities& device) const override {
    return base_.plan(schedule, problem, device);
  }
  std::string tolerance() const override { return base_.tolerance(); }
  std::vector<kernels::CaseSpec> certification_cases() const override {
    return base_.certification_cases();
  }
  std::vector<kernels::CaseSpec> schedule_cases(
      const Schedule& schedule, const kernels::DeviceCapabilities& device) const override {
    return base_.schedule_cases(schedule, device);
  }
  kernels::CaseInputs make_inputs(const kernels::CaseSpec& spec,
                                  std::uint64_t seed) const override {
    return base_.make_inputs(spec, seed);
  }
  kernels::CaseVerdict check(
      const kernels::CaseInputs& inputs,
      const std::map<std::string, std::vector<std::byte>>& outputs) const override {
    return base_.check(inputs, outputs);
  }
  kernels::WorkAmount work(const kernels::Problem& problem) const override {
    return base_.work(problem);
  }
  bool deterministic() const override { return base_.deterministic(); }
  Status check_problem(const kernels::Problem& problem) const override {
    return base_.check_problem(problem);
  }
  kernels::Problem tuning_problem(bool cpu_adapter) const override {
    return base_.tuning_problem(cpu_adapter);
  }

 protected:
  const kernels::KernelDefinition& base_;
};

}  // namespace wgsl_forge::testing
