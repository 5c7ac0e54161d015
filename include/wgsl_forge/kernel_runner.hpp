#pragma once
// Runs a generated builtin kernel on a device: its pipelines, the buffers of its dispatch plan,
// one uniform block per pass, and all passes in one submission. Used by certification, tuning,
// benchmarks and programs that embed the forge.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wgsl_forge/gpu.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge::forge {

kernels::DeviceCapabilities capabilities_of(const gpu::AdapterInfo& adapter);

using BufferContents = std::map<std::string, std::vector<std::byte>>;

// Buffers a caller owns, by the plan's buffer names ("x", "y", ...).
using ExternalBuffers = std::map<std::string, const gpu::Buffer*>;

// The plan's buffers for one problem, bound to every pass: ready to run again and again.
class BoundPlan {
 public:
  const kernels::DispatchPlan& plan() const { return plan_; }
  const std::vector<gpu::DispatchStep>& steps() const { return steps_; }
  const gpu::Buffer& buffer(const std::string& name) const;

 private:
  friend class PreparedKernel;
  kernels::DispatchPlan plan_;
  std::map<std::string, gpu::Buffer> buffers_;  // the ones the plan owns
  ExternalBuffers external_;
  std::vector<gpu::Buffer> uniforms_;
  std::vector<gpu::BindGroup> groups_;
  std::vector<gpu::DispatchStep> steps_;
};

class PreparedKernel {
 public:
  // Compiles every entry point of `generated` (the WGSL of `kernel` or a user's own).
  static Result<PreparedKernel> prepare(gpu::Device& device,
                                        const kernels::KernelDefinition& kernel,
                                        const GeneratedKernel& generated);

  const GeneratedKernel& generated() const { return generated_; }

  // Binds the plan's buffers for `problem`: those named in `external` are the caller's (each
  // must be at least as large as the plan says), the others are created here.
  Result<std::unique_ptr<BoundPlan>> bind(const kernels::Problem& problem,
                                          const ExternalBuffers& external = {});
  // Runs all passes on the bound buffers as they are, in one submission.
  Status execute(const BoundPlan& bound);
  // Writes the inputs (zero-padded) and poisons the outputs and scratch buffers.
  Status load_inputs(const BoundPlan& bound, const BufferContents& inputs);
  // Writes the inputs, poisons outputs and scratch, runs all passes, returns the outputs.
  Result<BufferContents> run(BoundPlan& bound, const BufferContents& inputs);
  // bind + run.
  Result<BufferContents> run(const kernels::CaseInputs& inputs);

 private:
  gpu::Device* device_ = nullptr;
  const kernels::KernelDefinition* kernel_ = nullptr;
  GeneratedKernel generated_;
  std::map<std::string, gpu::ComputePipeline> pipelines_;
};

}  // namespace wgsl_forge::forge
