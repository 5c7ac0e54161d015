#pragma once
// Runs a generated builtin kernel on a device: its pipelines, the buffers of its dispatch plan,
// one uniform block per pass, and all passes in one submission. Used by certification, tuning,
// benchmarks and programs that embed the forge.

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "wgsl_forge/gpu.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge::forge {

kernels::DeviceCapabilities capabilities_of(const gpu::AdapterInfo& adapter);

using BufferContents = std::map<std::string, std::vector<std::byte>>;

// A caller's buffer for one of the kernel's buffers (kernels::BufferSpec): from `offset` (a
// multiple of the device's minStorageBufferOffsetAlignment) to the end of `buffer`. `element`,
// when given, must be the kernel's element type for that buffer.
struct BufferSlice {
  BufferSlice() = default;
  BufferSlice(const gpu::Buffer* whole) : buffer(whole) {}  // NOLINT: a whole buffer is a slice
  BufferSlice(const gpu::Buffer* of, std::uint64_t from, std::optional<kernels::ElementType> type)
      : buffer(of), offset(from), element(type) {}

  const gpu::Buffer* buffer = nullptr;
  std::uint64_t offset = 0;
  std::optional<kernels::ElementType> element;
};

// Buffers a caller owns, by the names of the kernel's buffer table ("x", "keys", ...).
using ExternalBuffers = std::map<std::string, BufferSlice>;

// Scratch buffers shared by the bound plans of one kernel: one buffer per scratch name, grown
// when a plan needs more and never shrunk, so repeated calls allocate nothing. Plans of one
// submission may share them because WebGPU runs the passes of a submission in order.
class ScratchPool {
 public:
  // A buffer of at least `bytes` for scratch buffer `name`, shared with earlier plans.
  Result<std::shared_ptr<gpu::Buffer>> acquire(gpu::Device& device, const std::string& name,
                                               std::uint64_t bytes);

 private:
  std::map<std::string, std::shared_ptr<gpu::Buffer>> buffers_;
};

// The plan's buffers for one problem, bound to every pass: ready to run again and again.
class BoundPlan {
 public:
  const kernels::DispatchPlan& plan() const { return plan_; }
  const std::vector<gpu::DispatchStep>& steps() const { return steps_; }
  // The buffer bound as `name`. For a caller's buffer this is the caller's object, which must
  // still exist: the bind groups keep the WebGPU buffer alive, not the gpu::Buffer (the typed
  // primitives keep bound plans across calls and never ask for a caller's buffer).
  const gpu::Buffer& buffer(const std::string& name) const;
  // Where buffer `name` starts in buffer(name): the caller's offset, a guarded run's, or 0.
  std::uint64_t offset(const std::string& name) const;

 private:
  friend class PreparedKernel;
  kernels::DispatchPlan plan_;
  // A library buffer of a guarded run (PreparedKernel::run_guarded): its allocation is `guard`
  // bytes, the plan's, `guard` bytes; the binding starts after the first guard and takes
  // `bound_tail` bytes of the second (all of it unless that would pass the binding limit).
  struct Guarded {
    std::uint64_t guard = 0;
    std::uint64_t bound_tail = 0;
  };
  // The bytes bound as `name`: the plan's, and a guarded buffer's tail.
  std::uint64_t binding_bytes(const std::string& name, std::uint64_t planned) const;

  std::map<std::string, std::shared_ptr<gpu::Buffer>> buffers_;  // the library's, by name
  std::map<std::string, Guarded> guarded_;
  ExternalBuffers external_;
  std::vector<gpu::Buffer> uniforms_;
  std::vector<gpu::BindGroup> groups_;
  std::vector<gpu::DispatchStep> steps_;
};

// What certification puts around one case's buffers (PreparedKernel::run_guarded), drawn anew
// for each case so that no kernel can be right by knowing it.
struct CaseGuards {
  std::uint64_t seed = 0;     // draws the guard bytes and the inputs' poison
  std::uint32_t ordinal = 0;  // the case's place in its certification: picks the inputs' poison
};

// The outputs of a guarded run, and each guard the kernel changed, in words.
struct GuardedOutputs {
  BufferContents outputs;
  std::vector<std::string> violations;
};

class PreparedKernel;

// One case of a certification bound between its guards with its inputs loaded
// (PreparedKernel::bind_guarded), to be run once or several times: each run poisons the outputs
// and scratch buffers and their guards again, so that every run starts from the same bytes; the
// inputs, bound read-only, are written once.
class GuardedCase {
 public:
  // Runs the case: outputs and scratch poisoned, all passes, then the outputs and every guard
  // read back in one mapping. With `earlier` (an earlier run's outputs), the outputs are compared
  // with those where they are mapped instead of being copied out: the result's outputs stay
  // empty, and a difference is one violation ("run N of the same inputs differs from run 1 ...:
  // the kernel's result is not reproducible").
  Result<GuardedOutputs> run(const BufferContents* earlier = nullptr);

 private:
  friend class PreparedKernel;
  GuardedCase() = default;
  PreparedKernel* prepared_ = nullptr;
  std::unique_ptr<BoundPlan> bound_;
  CaseGuards guards_;
  std::uint32_t runs_ = 0;
  // 0xDEADBEEF words, as long as the largest output or scratch buffer.
  std::vector<std::byte> poison_;
};

// One kernel for PreparedKernel::prepare_all: its definition and its WGSL (the generated
// kernel's or a user's own), both valid during the call.
struct KernelToPrepare {
  const kernels::KernelDefinition* kernel = nullptr;
  const GeneratedKernel* generated = nullptr;
};

class PreparedKernel {
 public:
  // Compiles every entry point of `generated` (the WGSL of `kernel` or a user's own), all at once.
  static Result<PreparedKernel> prepare(gpu::Device& device,
                                        const kernels::KernelDefinition& kernel,
                                        const GeneratedKernel& generated);
  // Compiles every entry point of every kernel at once (gpu::Device::create_compute_pipelines),
  // which is what makes a start-up fast: the kernels prepared, in order, or the error prepare
  // gives for the first kernel that fails (then none is kept).
  static Result<std::vector<PreparedKernel>> prepare_all(gpu::Device& device,
                                                         std::span<const KernelToPrepare> kernels);

  const GeneratedKernel& generated() const { return generated_; }

  // Binds the plan's buffers for `problem`. Those named in `external` are the caller's: each name
  // must be one of the kernel's buffers, of its element type, holding at least what the plan
  // needs, and when any buffer is given every input must be. The others are created here (scratch
  // from `scratch` when given, to be reused). Errors name the kernel, the buffer and the sizes.
  Result<std::unique_ptr<BoundPlan>> bind(const kernels::Problem& problem,
                                          const ExternalBuffers& external = {},
                                          ScratchPool* scratch = nullptr);
  // Runs all passes on the bound buffers as they are, in one submission, and waits.
  Status execute(const BoundPlan& bound);
  // Records all passes into `encoder`, to run when it is submitted.
  Status record(const BoundPlan& bound, const gpu::CommandEncoder& encoder);
  // For certification and tuning, never a production call: writes every input of the plan
  // (zero-padded to the buffer; an input missing from `inputs` is an error) and poisons the
  // outputs and scratch buffers, so that an element the kernel forgets is seen.
  Status load_inputs(const BoundPlan& bound, const BufferContents& inputs);
  // Writes the inputs, poisons outputs and scratch, runs all passes, returns the outputs.
  Result<BufferContents> run(BoundPlan& bound, const BufferContents& inputs);
  // bind + run.
  Result<BufferContents> run(const kernels::CaseInputs& inputs);
  // Certification's run of one case, never a production call: what a database would suffer from
  // a kernel that strays past its buffers (it sub-allocates its columns from large buffers, and
  // may run without bounds checks) is made visible. Every plan buffer gets an allocation of its
  // own with a guard before it, at a non-zero offset. An output or scratch buffer is poisoned
  // and followed by a guard of seeded bytes, bound with it: Dawn's bounds clamps keep a write
  // past the end inside the binding, so it lands in the guard instead of being clamped onto the
  // buffer's last element. An input is followed, from the end of its contents, by poison values
  // (NaN payloads, huge magnitudes, 0xdeadbeef) that change any sum, extreme or gather that reads
  // them, also bound. After the run every guard is compared byte for byte: a changed one is a
  // violation naming the kernel, the buffer, the offset and the bytes found.
  Result<GuardedOutputs> run_guarded(const kernels::CaseInputs& inputs, const CaseGuards& guards);
  // run_guarded's allocations bound and its inputs loaded, for runs of the case that each start
  // from the same bytes (certification runs a winner's cases twice).
  Result<std::unique_ptr<GuardedCase>> bind_guarded(const kernels::CaseInputs& inputs,
                                                    const CaseGuards& guards);

 private:
  // bind, with the library's buffers between guards of `guard` bytes (0: none).
  Result<std::unique_ptr<BoundPlan>> bind_plan(const kernels::Problem& problem,
                                               const ExternalBuffers& external,
                                               ScratchPool* scratch, std::uint64_t guard);
  // The uniform block, bind group and grid of every pass of `bound`, whose buffers are set.
  Status bind_passes(BoundPlan& bound);
  // The plan's output buffers as they are now.
  Result<BufferContents> read_outputs(const BoundPlan& bound);
  friend class GuardedCase;
  // run_guarded's input allocations filled: guards, inputs and their poison.
  Status load_guarded_inputs(const BoundPlan& bound, const BufferContents& inputs,
                             const CaseGuards& guards);
  // run_guarded's output and scratch allocations filled: guards and `poison`.
  Status poison_guarded(const BoundPlan& bound, const CaseGuards& guards,
                        std::span<const std::byte> poison);
  // The outputs of guarded run number `run`, and its guards compared with what poison_guarded
  // wrote (one violation per changed guard), from one read-back; outputs compared with
  // `earlier`'s instead of copied when it is given (GuardedCase::run).
  Result<GuardedOutputs> read_guarded(const BoundPlan& bound, const CaseGuards& guards,
                                      const BufferContents* earlier, std::uint32_t run);

  gpu::Device* device_ = nullptr;
  const kernels::KernelDefinition* kernel_ = nullptr;
  GeneratedKernel generated_;
  std::map<std::string, gpu::ComputePipeline> pipelines_;
};

}  // namespace wgsl_forge::forge
