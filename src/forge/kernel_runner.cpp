#include "wgsl_forge/kernel_runner.hpp"
#include "util/try.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>

namespace wgsl_forge::forge {

namespace {

constexpr std::uint32_t kPoison = 0xDEADBEEF;

// Uniform blocks are bound whole; WGSL rounds their size up to 16 bytes.
std::uint64_t round_up_16(std::uint64_t bytes) {
  return std::max<std::uint64_t>(16, (bytes + 15) / 16 * 16);
}

std::vector<std::byte> poison_bytes(std::uint64_t size) {
  std::vector<std::byte> bytes(size);
  for (std::uint64_t i = 0; i + 4 <= size; i += 4) std::memcpy(&bytes[i], &kPoison, 4);
  return bytes;
}

// The guard bytes of a case's buffer `index`, the same before and after it: seeded bytes, so
// that no value a kernel could write, zero or its own poison included, is likely to match.
std::vector<std::byte> guard_pattern(const CaseGuards& guards, std::size_t index,
                                     std::uint64_t size) {
  std::mt19937_64 random(guards.seed ^ (0x9e3779b97f4a7c15ull * (index + 1)));
  std::vector<std::byte> bytes(size);
  for (std::byte& byte : bytes) byte = static_cast<std::byte>(random() & 0xff);
  return bytes;
}

// The poison after an input's contents, `words` of it. Every kernel is blind to some value (a
// NaN is never kept by compaction; a huge positive value leaves a minimum as it is, a huge
// negative one a maximum), so the kinds alternate, and which comes first, right after the
// input's last element, moves on with each case.
std::vector<std::uint32_t> input_poison(kernels::ElementType element, const CaseGuards& guards,
                                        std::size_t index, std::uint64_t words) {
  std::mt19937_64 random(~guards.seed ^ (0x9e3779b97f4a7c15ull * (index + 1)));
  std::vector<std::uint32_t> poison(words);
  for (std::uint64_t j = 0; j < words; ++j) {
    const std::uint32_t drawn = static_cast<std::uint32_t>(random());
    const std::uint64_t kind = (guards.ordinal + j) % 3;
    if (element == kernels::ElementType::kF32) {
      // A quiet NaN with a drawn payload and sign, or a drawn magnitude above 2^126 of either sign.
      const std::uint32_t sign = kind == 2 || (kind == 0 && (drawn & 1) != 0) ? 0x80000000u : 0;
      poison[j] =
          kind == 0 ? sign | 0x7fc00000u | (drawn >> 10) : sign | 0x7e800000u | (drawn & 0x7fffffu);
    } else {
      // 0xdeadbeef, a drawn word with its top bit set, or a drawn small one (a bin, an index).
      poison[j] = kind == 0 ? 0xdeadbeefu : kind == 1 ? drawn | 0x80000000u : 1 + drawn % 1024;
    }
  }
  return poison;
}

// The contents given for input `buffer`: an error when there are none or more than the plan's
// buffer holds (both a bug of the caller, which writes the inputs of a certification or tuning).
Result<const std::vector<std::byte>*> input_contents(const std::string& kernel_id,
                                                     const kernels::BufferPlan& buffer,
                                                     const BufferContents& inputs) {
  auto given = inputs.find(buffer.name);
  if (given == inputs.end()) {
    return Error(ErrorKind::kInvalidInput,
                 "No contents are given for input " + buffer.name + " of " + kernel_id + ".");
  }
  if (given->second.size() > buffer.bytes) {
    return Error(ErrorKind::kInvalidInput,
                 "Input " + buffer.name + " has " + std::to_string(given->second.size()) +
                     " bytes; the plan's buffer holds " + std::to_string(buffer.bytes) + ".");
  }
  return &given->second;
}

std::string hex_bytes(std::span<const std::byte> bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text;
  for (std::byte byte : bytes) {
    if (!text.empty()) text += ' ';
    text += kDigits[std::to_integer<unsigned>(byte) >> 4];
    text += kDigits[std::to_integer<unsigned>(byte) & 0xf];
  }
  return text;
}

// The guard `found` compared with the `poison` written there, which starts `start` bytes from
// the beginning of the buffer (negative: before it): nothing, or a violation in words.
std::optional<std::string> guard_violation(const std::string& kernel_id,
                                           const kernels::BufferPlan& buffer, bool after,
                                           std::int64_t start, std::span<const std::byte> found,
                                           std::span<const std::byte> poison) {
  std::size_t at = 0;
  while (at < found.size() && found[at] == poison[at]) ++at;
  if (at == found.size()) return std::nullopt;
  std::size_t changed = 0;
  for (std::size_t i = at; i < found.size(); ++i) changed += found[i] != poison[i];
  const std::size_t shown = std::min<std::size_t>(8, found.size() - at);
  return kernel_id + " writes " + (after ? "past the end of " : "before the start of ") +
         kernels::buffer_role_name(buffer.role) + " " + buffer.name + " (" +
         std::to_string(buffer.bytes) + " bytes): its guard holds " + std::to_string(changed) +
         " changed bytes, the first at byte offset " +
         std::to_string(start + static_cast<std::int64_t>(at)) + ": found " +
         hex_bytes(found.subspan(at, shown)) + ", poison " + hex_bytes(poison.subspan(at, shown));
}

// How output `name` of run `run` differs from the first run's (`first`), if it does.
std::optional<std::string> differing_output(const std::string& name,
                                            std::span<const std::byte> first,
                                            std::span<const std::byte> again, std::uint32_t run) {
  auto [at, again_at] = std::mismatch(first.begin(), first.end(), again.begin(), again.end());
  if (at == first.end() && again_at == again.end()) return std::nullopt;
  const auto offset = static_cast<std::uint64_t>(at - first.begin());
  return "run " + std::to_string(run) + " of the same inputs differs from run 1 in output " + name +
         " at byte offset " + std::to_string(offset) + " (element " +
         std::to_string(offset / kernels::kElementBytes) +
         "): the kernel's result is not reproducible";
}

}  // namespace

kernels::DeviceCapabilities capabilities_of(const gpu::AdapterInfo& adapter) {
  kernels::DeviceCapabilities capabilities;
  capabilities.max_invocations_per_workgroup = adapter.limits.max_compute_invocations_per_workgroup;
  capabilities.max_workgroup_size_x = adapter.limits.max_compute_workgroup_size_x;
  capabilities.max_workgroup_storage_size = adapter.limits.max_compute_workgroup_storage_size;
  capabilities.max_workgroups_per_dimension = adapter.limits.max_compute_workgroups_per_dimension;
  capabilities.max_storage_binding_size = adapter.limits.max_storage_buffer_binding_size;
  capabilities.subgroups = std::find(adapter.features.begin(), adapter.features.end(),
                                     "subgroups") != adapter.features.end();
  capabilities.subgroup_min_size = adapter.subgroup_min_size;
  return capabilities;
}

Result<PreparedKernel> PreparedKernel::prepare(gpu::Device& device,
                                               const kernels::KernelDefinition& kernel,
                                               const GeneratedKernel& generated) {
  const KernelToPrepare one{&kernel, &generated};
  WF_TRY_ASSIGN(std::vector<PreparedKernel> prepared, prepare_all(device, std::span(&one, 1)));
  return std::move(prepared.front());
}

Result<std::vector<PreparedKernel>> PreparedKernel::prepare_all(
    gpu::Device& device, std::span<const KernelToPrepare> kernels) {
  // The strings the requests point to, made first so that they no longer move.
  std::vector<std::string> contexts;
  std::vector<std::string> labels;
  for (const KernelToPrepare& one : kernels) {
    const GeneratedKernel& generated = *one.generated;
    contexts.push_back("preparing " + generated.kernel_id + " with schedule " +
                       generated.schedule.to_string());
    for (const std::string& entry_point : generated.entry_points)
      labels.push_back(generated.kernel_id + "." + entry_point);
  }
  std::vector<gpu::ComputePipelineRequest> requests;
  requests.reserve(labels.size());
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    const GeneratedKernel& generated = *kernels[k].generated;
    for (const std::string& entry_point : generated.entry_points) {
      requests.push_back(gpu::ComputePipelineRequest{
          generated.source, entry_point, generated.bindings, labels[requests.size()], contexts[k]});
    }
  }
  WF_TRY_ASSIGN(std::vector<gpu::ComputePipeline> pipelines,
                device.create_compute_pipelines(requests));

  std::vector<PreparedKernel> prepared(kernels.size());
  std::size_t next = 0;
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    prepared[k].device_ = &device;
    prepared[k].kernel_ = kernels[k].kernel;
    prepared[k].generated_ = *kernels[k].generated;
    for (const std::string& entry_point : kernels[k].generated->entry_points)
      prepared[k].pipelines_.emplace(entry_point, std::move(pipelines[next++]));
  }
  return prepared;
}

std::uint64_t BoundPlan::binding_bytes(const std::string& name, std::uint64_t planned) const {
  auto it = guarded_.find(name);
  return it != guarded_.end() ? planned + it->second.bound_tail : planned;
}

const gpu::Buffer& BoundPlan::buffer(const std::string& name) const {
  if (auto it = external_.find(name); it != external_.end()) return *it->second.buffer;
  return *buffers_.at(name);
}

std::uint64_t BoundPlan::offset(const std::string& name) const {
  if (auto it = external_.find(name); it != external_.end()) return it->second.offset;
  auto it = guarded_.find(name);
  return it != guarded_.end() ? it->second.guard : 0;
}

Result<std::shared_ptr<gpu::Buffer>> ScratchPool::acquire(gpu::Device& device,
                                                          const std::string& name,
                                                          std::uint64_t bytes) {
  std::shared_ptr<gpu::Buffer>& pooled = buffers_[name];
  if (pooled == nullptr || pooled->size() < bytes) {
    // Plans bound earlier keep the smaller buffer alive as long as they need it.
    WF_TRY_ASSIGN(gpu::Buffer created,
                  device.create_buffer(bytes, gpu::BufferUsage::kStorage, name));
    pooled = std::make_shared<gpu::Buffer>(std::move(created));
  }
  return pooled;
}

namespace {

// A caller's buffer for `spec`, checked against what the plan needs.
Status check_external(const kernels::BufferSpec& spec, const kernels::BufferPlan& planned,
                      const BufferSlice& slice, std::uint32_t offset_alignment) {
  const std::string buffer = "Buffer " + spec.name;
  if (slice.buffer == nullptr) return Error(ErrorKind::kInvalidInput, buffer + " is null.");
  if (slice.element && *slice.element != spec.element) {
    return Error(ErrorKind::kInvalidInput, buffer + " holds " +
                                               kernels::element_type_name(*slice.element) +
                                               " elements; the kernel reads it as " +
                                               kernels::element_type_name(spec.element) + ".");
  }
  if (offset_alignment != 0 && slice.offset % offset_alignment != 0) {
    return Error(ErrorKind::kInvalidInput,
                 buffer + " starts at offset " + std::to_string(slice.offset) +
                     ", not a multiple of minStorageBufferOffsetAlignment (" +
                     std::to_string(offset_alignment) + ").");
  }
  const std::uint64_t size = slice.buffer->size();
  const std::uint64_t available = slice.offset < size ? size - slice.offset : 0;
  if (available < planned.bytes) {
    return Error(ErrorKind::kInvalidInput,
                 buffer + " holds " + std::to_string(available) + " bytes from offset " +
                     std::to_string(slice.offset) + "; the plan needs " +
                     std::to_string(planned.bytes) + " (" + spec.size_rule + ").");
  }
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<BoundPlan>> PreparedKernel::bind(const kernels::Problem& problem,
                                                        const ExternalBuffers& external,
                                                        ScratchPool* scratch) {
  return bind_plan(problem, external, scratch, 0);
}

Result<std::unique_ptr<BoundPlan>> PreparedKernel::bind_plan(const kernels::Problem& problem,
                                                             const ExternalBuffers& external,
                                                             ScratchPool* scratch,
                                                             std::uint64_t guard) {
  const std::string context = "binding " + generated_.kernel_id + " with schedule " +
                              generated_.schedule.to_string() + " for " + problem.to_string();
  WF_TRY_ASSIGN_CONTEXT(
      kernels::DispatchPlan plan,
      kernel_->plan(generated_.schedule, problem, capabilities_of(device_->adapter())), context);
  auto bound = std::make_unique<BoundPlan>();
  bound->plan_ = std::move(plan);
  for (const auto& [name, slice] : external) {
    if (Result<kernels::BufferSpec> spec = kernel_->find_buffer(name); !spec) {
      return std::move(spec).error().with_context(context);
    }
  }
  const std::vector<kernels::BufferSpec> specs = kernel_->buffer_specs();
  const std::uint32_t alignment = device_->adapter().limits.min_storage_buffer_offset_alignment;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const kernels::BufferSpec& spec = specs[i];
    const kernels::BufferPlan& planned = bound->plan_.buffers[i];
    if (auto given = external.find(spec.name); given != external.end()) {
      WF_TRY_CONTEXT(check_external(spec, planned, given->second, alignment), context);
      bound->external_.emplace(spec.name, given->second);
      continue;
    }
    if (!external.empty() && spec.role == kernels::BufferRole::kInput) {
      return Error(ErrorKind::kInvalidInput,
                   "Input buffer " + spec.name + " is not given (" + spec.size_rule + ").")
          .with_context(context);
    }
    if (scratch != nullptr && spec.role == kernels::BufferRole::kScratch) {
      WF_TRY_ASSIGN_CONTEXT(std::shared_ptr<gpu::Buffer> pooled,
                            scratch->acquire(*device_, spec.name, planned.bytes), context);
      bound->buffers_.emplace(spec.name, std::move(pooled));
      continue;
    }
    WF_TRY_ASSIGN_CONTEXT(
        gpu::Buffer created,
        device_->create_buffer(planned.bytes + 2 * guard, gpu::BufferUsage::kStorage, spec.name),
        context);
    if (guard != 0) {
      const std::uint64_t max_binding = device_->adapter().limits.max_storage_buffer_binding_size;
      const std::uint64_t room = max_binding > planned.bytes ? max_binding - planned.bytes : 0;
      bound->guarded_.emplace(spec.name, BoundPlan::Guarded{guard, std::min(guard, room)});
    }
    bound->buffers_.emplace(spec.name, std::make_shared<gpu::Buffer>(std::move(created)));
  }
  WF_TRY_CONTEXT(bind_passes(*bound), context);
  return bound;
}

Status PreparedKernel::bind_passes(BoundPlan& bound) {
  const std::uint32_t max_per_dimension =
      device_->adapter().limits.max_compute_workgroups_per_dimension;
  bound.groups_.reserve(bound.plan_.passes.size());
  bound.uniforms_.reserve(bound.plan_.passes.size());
  std::map<std::string, std::uint64_t> planned_bytes;
  for (const kernels::BufferPlan& buffer : bound.plan_.buffers) {
    planned_bytes[buffer.name] = buffer.bytes;
  }
  for (const kernels::PassPlan& pass : bound.plan_.passes) {
    auto pipeline = pipelines_.find(pass.entry_point);
    if (pipeline == pipelines_.end()) {
      return Error(ErrorKind::kInvalidInput,
                   "The plan uses entry point " + pass.entry_point + ", which the WGSL lacks.");
    }
    std::vector<std::uint32_t> words = pass.params;
    if (words.empty()) words.push_back(0);
    WF_TRY_ASSIGN(gpu::Buffer uniform,
                  device_->create_buffer(round_up_16(words.size() * 4), gpu::BufferUsage::kUniform,
                                         pass.entry_point + ".params"));
    WF_TRY(device_->write_buffer(uniform, 0, std::as_bytes(std::span(words))));
    std::vector<gpu::BufferBinding> bindings;
    gpu::BufferBinding params;
    params.binding = 0;
    params.buffer = &uniform;
    bindings.push_back(params);
    for (const auto& [binding, name] : pass.buffers) {
      // Exactly the planned bytes: a kernel that strays past them cannot reach a caller's
      // neighbouring data in the same allocation (a guarded run binds its guards too).
      gpu::BufferBinding one;
      one.binding = binding;
      one.buffer = &bound.buffer(name);
      one.offset = bound.offset(name);
      one.size = bound.binding_bytes(name, planned_bytes.at(name));
      bindings.push_back(one);
    }
    WF_TRY_ASSIGN(gpu::BindGroup group, device_->create_bind_group(pipeline->second, bindings));
    WF_TRY_ASSIGN(gpu::WorkgroupGrid grid,
                  gpu::plan_workgroup_grid(pass.workgroups, max_per_dimension));
    bound.uniforms_.push_back(std::move(uniform));
    bound.groups_.push_back(std::move(group));
    bound.steps_.push_back({&pipeline->second, &bound.groups_.back(), grid});
  }
  return Ok{};
}

Status PreparedKernel::load_inputs(const BoundPlan& bound, const BufferContents& inputs) {
  const std::string context = "loading the inputs of " + generated_.kernel_id;
  for (const kernels::BufferPlan& buffer : bound.plan_.buffers) {
    const gpu::Buffer& target = bound.buffer(buffer.name);
    std::vector<std::byte> contents;
    if (buffer.role == kernels::BufferRole::kInput) {
      WF_TRY_ASSIGN_CONTEXT(const std::vector<std::byte>* given,
                            input_contents(generated_.kernel_id, buffer, inputs), context);
      contents.assign(buffer.bytes, std::byte{0});
      if (!given->empty()) std::memcpy(contents.data(), given->data(), given->size());
    } else {
      contents = poison_bytes(buffer.bytes);
    }
    WF_TRY_CONTEXT(device_->write_buffer(target, bound.offset(buffer.name), contents), context);
  }
  return Ok{};
}

Result<BufferContents> PreparedKernel::run(BoundPlan& bound, const BufferContents& inputs) {
  WF_TRY(load_inputs(bound, inputs));
  WF_TRY(execute(bound));
  return read_outputs(bound);
}

Result<BufferContents> PreparedKernel::read_outputs(const BoundPlan& bound) {
  const std::string context = "reading the outputs of " + generated_.kernel_id + " with schedule " +
                              generated_.schedule.to_string();
  BufferContents outputs;
  for (const kernels::BufferPlan& buffer : bound.plan_.buffers) {
    if (buffer.role != kernels::BufferRole::kOutput) continue;
    const gpu::Buffer& source = bound.buffer(buffer.name);
    WF_TRY_ASSIGN_CONTEXT(std::vector<std::byte> bytes,
                          device_->read_buffer(source, bound.offset(buffer.name), buffer.bytes),
                          context);
    outputs.emplace(buffer.name, std::move(bytes));
  }
  return outputs;
}

Status PreparedKernel::record(const BoundPlan& bound, const gpu::CommandEncoder& encoder) {
  Status recorded = device_->encode(encoder, bound.steps_);
  if (!recorded) {
    return std::move(recorded).error().with_context(
        "recording " + generated_.kernel_id + " with schedule " + generated_.schedule.to_string());
  }
  return Ok{};
}

Status PreparedKernel::execute(const BoundPlan& bound) {
  Status ran = device_->run(bound.steps_);
  if (!ran) {
    return std::move(ran).error().with_context("running " + generated_.kernel_id +
                                               " with schedule " + generated_.schedule.to_string());
  }
  return Ok{};
}

Result<BufferContents> PreparedKernel::run(const kernels::CaseInputs& inputs) {
  WF_TRY_ASSIGN(std::unique_ptr<BoundPlan> bound, bind(inputs.problem));
  return run(*bound, inputs.buffers);
}

Result<GuardedOutputs> PreparedKernel::run_guarded(const kernels::CaseInputs& inputs,
                                                   const CaseGuards& guards) {
  WF_TRY_ASSIGN(std::unique_ptr<GuardedCase> bound, bind_guarded(inputs, guards));
  return bound->run();
}

Result<std::unique_ptr<GuardedCase>> PreparedKernel::bind_guarded(const kernels::CaseInputs& inputs,
                                                                  const CaseGuards& guards) {
  // A whole multiple of the offset alignment, so that the binding after the first guard is legal.
  const std::uint64_t guard =
      std::max<std::uint64_t>(256, device_->adapter().limits.min_storage_buffer_offset_alignment);
  std::unique_ptr<GuardedCase> bound(new GuardedCase());
  bound->prepared_ = this;
  bound->guards_ = guards;
  WF_TRY_ASSIGN(bound->bound_, bind_plan(inputs.problem, {}, nullptr, guard));
  WF_TRY(load_guarded_inputs(*bound->bound_, inputs.buffers, guards));
  std::uint64_t poisoned = 0;
  for (const kernels::BufferPlan& buffer : bound->bound_->plan_.buffers) {
    if (buffer.role != kernels::BufferRole::kInput) poisoned = std::max(poisoned, buffer.bytes);
  }
  bound->poison_ = poison_bytes(poisoned);
  return bound;
}

Result<GuardedOutputs> GuardedCase::run(const BufferContents* earlier) {
  WF_TRY(prepared_->poison_guarded(*bound_, guards_, poison_));
  WF_TRY(prepared_->execute(*bound_));
  return prepared_->read_guarded(*bound_, guards_, earlier, ++runs_);
}

// Each part is written where it lies, without joining them in host memory first: a certification
// case's buffers reach hundreds of megabytes. Buffer sizes and guards are whole words (a storage
// binding's size is a multiple of 4), so every part starts at a word.
Status PreparedKernel::load_guarded_inputs(const BoundPlan& bound, const BufferContents& inputs,
                                           const CaseGuards& guards) {
  const std::string context = "loading the guarded inputs of " + generated_.kernel_id;
  for (std::size_t index = 0; index < bound.plan_.buffers.size(); ++index) {
    const kernels::BufferPlan& buffer = bound.plan_.buffers[index];
    if (buffer.role != kernels::BufferRole::kInput) continue;
    const gpu::Buffer& target = bound.buffer(buffer.name);
    const std::uint64_t guard = bound.guarded_.at(buffer.name).guard;
    WF_TRY_CONTEXT(device_->write_buffer(target, 0, guard_pattern(guards, index, guard)), context);
    WF_TRY_ASSIGN_CONTEXT(const std::vector<std::byte>* given,
                          input_contents(generated_.kernel_id, buffer, inputs), context);
    // Zero-padded to a whole word by the write.
    WF_TRY_CONTEXT(device_->write_buffer(target, guard, *given), context);
    // From the end of the contents: the plan's padding is no more the kernel's to read.
    const std::uint64_t from = guard + (given->size() + 3) / 4 * 4;
    WF_TRY_ASSIGN_CONTEXT(kernels::BufferSpec spec, kernel_->find_buffer(buffer.name), context);
    const std::vector<std::uint32_t> poison =
        input_poison(spec.element, guards, index, (guard + buffer.bytes + guard - from) / 4);
    WF_TRY_CONTEXT(device_->write_buffer(target, from, std::as_bytes(std::span(poison))), context);
  }
  return Ok{};
}

Status PreparedKernel::poison_guarded(const BoundPlan& bound, const CaseGuards& guards,
                                      std::span<const std::byte> poison) {
  const std::string context = "poisoning the guarded outputs of " + generated_.kernel_id;
  for (std::size_t index = 0; index < bound.plan_.buffers.size(); ++index) {
    const kernels::BufferPlan& buffer = bound.plan_.buffers[index];
    if (buffer.role == kernels::BufferRole::kInput) continue;
    const gpu::Buffer& target = bound.buffer(buffer.name);
    const std::uint64_t guard = bound.guarded_.at(buffer.name).guard;
    const std::vector<std::byte> pattern = guard_pattern(guards, index, guard);
    WF_TRY_CONTEXT(device_->write_buffer(target, 0, pattern), context);
    WF_TRY_CONTEXT(device_->write_buffer(target, guard, poison.first(buffer.bytes)), context);
    WF_TRY_CONTEXT(device_->write_buffer(target, guard + buffer.bytes, pattern), context);
  }
  return Ok{};
}

Result<GuardedOutputs> PreparedKernel::read_guarded(const BoundPlan& bound,
                                                    const CaseGuards& guards,
                                                    const BufferContents* earlier,
                                                    std::uint32_t run) {
  const std::string context = "reading the outputs and guards of " + generated_.kernel_id +
                              " with schedule " + generated_.schedule.to_string();
  // Per output and scratch buffer: its guard before, its contents (outputs only: scratch is
  // the kernel's own), its guard after. An input is bound read-only: WGSL cannot write it.
  struct Read {
    std::size_t index;
    enum class Part { kGuardBefore, kContents, kGuardAfter } part;
  };
  std::vector<gpu::BufferRegion> regions;
  std::vector<Read> reads;
  for (std::size_t index = 0; index < bound.plan_.buffers.size(); ++index) {
    const kernels::BufferPlan& buffer = bound.plan_.buffers[index];
    if (buffer.role == kernels::BufferRole::kInput) continue;
    const gpu::Buffer* target = &bound.buffer(buffer.name);
    const std::uint64_t guard = bound.guarded_.at(buffer.name).guard;
    regions.push_back({target, 0, guard});
    reads.push_back({index, Read::Part::kGuardBefore});
    if (buffer.role == kernels::BufferRole::kOutput) {
      regions.push_back({target, guard, buffer.bytes});
      reads.push_back({index, Read::Part::kContents});
    }
    regions.push_back({target, guard + buffer.bytes, guard});
    reads.push_back({index, Read::Part::kGuardAfter});
  }
  GuardedOutputs result;
  auto visit = [&](std::size_t i, std::span<const std::byte> found) {
    const kernels::BufferPlan& buffer = bound.plan_.buffers[reads[i].index];
    if (reads[i].part == Read::Part::kContents) {
      if (earlier == nullptr) {
        result.outputs.emplace(buffer.name, std::vector<std::byte>(found.begin(), found.end()));
      } else if (std::optional<std::string> differs =
                     differing_output(buffer.name, earlier->at(buffer.name), found, run)) {
        result.violations.push_back(std::move(*differs));
      }
      return;
    }
    const bool after = reads[i].part == Read::Part::kGuardAfter;
    const std::vector<std::byte> pattern = guard_pattern(guards, reads[i].index, found.size());
    const std::int64_t start =
        after ? static_cast<std::int64_t>(buffer.bytes) : -static_cast<std::int64_t>(found.size());
    if (std::optional<std::string> violation =
            guard_violation(generated_.kernel_id, buffer, after, start, found, pattern)) {
      result.violations.push_back(std::move(*violation));
    }
  };
  WF_TRY_CONTEXT(device_->read_regions(regions, visit), context);
  return result;
}

}  // namespace wgsl_forge::forge
