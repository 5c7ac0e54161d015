#include "wgsl_forge/kernel_runner.hpp"

#include <algorithm>
#include <cstring>

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
  Result<std::vector<PreparedKernel>> prepared = prepare_all(device, std::span(&one, 1));
  if (!prepared) return std::move(prepared).error();
  return std::move(prepared->front());
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
  Result<std::vector<gpu::ComputePipeline>> pipelines = device.create_compute_pipelines(requests);
  if (!pipelines) return std::move(pipelines).error();

  std::vector<PreparedKernel> prepared(kernels.size());
  std::size_t next = 0;
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    prepared[k].device_ = &device;
    prepared[k].kernel_ = kernels[k].kernel;
    prepared[k].generated_ = *kernels[k].generated;
    for (const std::string& entry_point : kernels[k].generated->entry_points)
      prepared[k].pipelines_.emplace(entry_point, std::move((*pipelines)[next++]));
  }
  return prepared;
}

const gpu::Buffer& BoundPlan::buffer(const std::string& name) const {
  if (auto it = external_.find(name); it != external_.end()) return *it->second.buffer;
  return *buffers_.at(name);
}

std::uint64_t BoundPlan::offset(const std::string& name) const {
  auto it = external_.find(name);
  return it != external_.end() ? it->second.offset : 0;
}

Result<std::shared_ptr<gpu::Buffer>> ScratchPool::acquire(gpu::Device& device,
                                                          const std::string& name,
                                                          std::uint64_t bytes) {
  std::shared_ptr<gpu::Buffer>& pooled = buffers_[name];
  if (pooled == nullptr || pooled->size() < bytes) {
    // Plans bound earlier keep the smaller buffer alive as long as they need it.
    Result<gpu::Buffer> created = device.create_buffer(bytes, gpu::BufferUsage::kStorage, name);
    if (!created) return std::move(created).error();
    pooled = std::make_shared<gpu::Buffer>(std::move(created).value());
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
  const std::string context = "binding " + generated_.kernel_id + " with schedule " +
                              generated_.schedule.to_string() + " for " + problem.to_string();
  Result<kernels::DispatchPlan> plan =
      kernel_->plan(generated_.schedule, problem, capabilities_of(device_->adapter()));
  if (!plan) return std::move(plan).error().with_context(context);
  auto bound = std::make_unique<BoundPlan>();
  bound->plan_ = std::move(plan).value();
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
      if (Status fits = check_external(spec, planned, given->second, alignment); !fits) {
        return std::move(fits).error().with_context(context);
      }
      bound->external_.emplace(spec.name, given->second);
      continue;
    }
    if (!external.empty() && spec.role == kernels::BufferRole::kInput) {
      return Error(ErrorKind::kInvalidInput,
                   "Input buffer " + spec.name + " is not given (" + spec.size_rule + ").")
          .with_context(context);
    }
    if (scratch != nullptr && spec.role == kernels::BufferRole::kScratch) {
      Result<std::shared_ptr<gpu::Buffer>> pooled =
          scratch->acquire(*device_, spec.name, planned.bytes);
      if (!pooled) return std::move(pooled).error().with_context(context);
      bound->buffers_.emplace(spec.name, std::move(pooled).value());
      continue;
    }
    Result<gpu::Buffer> created =
        device_->create_buffer(planned.bytes, gpu::BufferUsage::kStorage, spec.name);
    if (!created) return std::move(created).error().with_context(context);
    bound->buffers_.emplace(spec.name, std::make_shared<gpu::Buffer>(std::move(created).value()));
  }
  if (Status passes = bind_passes(*bound); !passes) {
    return std::move(passes).error().with_context(context);
  }
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
    Result<gpu::Buffer> uniform = device_->create_buffer(
        round_up_16(words.size() * 4), gpu::BufferUsage::kUniform, pass.entry_point + ".params");
    if (!uniform) return std::move(uniform).error();
    if (Status written = device_->write_buffer(*uniform, 0, std::as_bytes(std::span(words)));
        !written) {
      return written;
    }
    std::vector<gpu::BufferBinding> bindings;
    gpu::BufferBinding params;
    params.binding = 0;
    params.buffer = &*uniform;
    bindings.push_back(params);
    for (const auto& [binding, name] : pass.buffers) {
      // Exactly the planned bytes: a kernel that strays past them cannot reach a caller's
      // neighbouring data in the same allocation.
      gpu::BufferBinding one;
      one.binding = binding;
      one.buffer = &bound.buffer(name);
      one.offset = bound.offset(name);
      one.size = planned_bytes.at(name);
      bindings.push_back(one);
    }
    Result<gpu::BindGroup> group = device_->create_bind_group(pipeline->second, bindings);
    if (!group) return std::move(group).error();
    Result<gpu::WorkgroupGrid> grid = gpu::plan_workgroup_grid(pass.workgroups, max_per_dimension);
    if (!grid) return std::move(grid).error();
    bound.uniforms_.push_back(std::move(uniform).value());
    bound.groups_.push_back(std::move(group).value());
    bound.steps_.push_back({&pipeline->second, &bound.groups_.back(), *grid});
  }
  return Ok{};
}

Status PreparedKernel::load_inputs(const BoundPlan& bound, const BufferContents& inputs) {
  const std::string context = "loading the inputs of " + generated_.kernel_id;
  for (const kernels::BufferPlan& buffer : bound.plan_.buffers) {
    const gpu::Buffer& target = bound.buffer(buffer.name);
    std::vector<std::byte> contents;
    if (buffer.role == kernels::BufferRole::kInput) {
      auto given = inputs.find(buffer.name);
      if (given == inputs.end()) {
        return Error(ErrorKind::kInvalidInput, "No contents are given for input " + buffer.name +
                                                   " of " + generated_.kernel_id + ".")
            .with_context(context);
      }
      if (given->second.size() > buffer.bytes) {
        return Error(ErrorKind::kInvalidInput,
                     "Input " + buffer.name + " has " + std::to_string(given->second.size()) +
                         " bytes; the plan's buffer holds " + std::to_string(buffer.bytes) + ".")
            .with_context(context);
      }
      contents.assign(buffer.bytes, std::byte{0});
      if (!given->second.empty())
        std::memcpy(contents.data(), given->second.data(), given->second.size());
    } else {
      contents = poison_bytes(buffer.bytes);
    }
    if (Status written = device_->write_buffer(target, bound.offset(buffer.name), contents);
        !written) {
      return std::move(written).error().with_context(context);
    }
  }
  return Ok{};
}

Result<BufferContents> PreparedKernel::run(BoundPlan& bound, const BufferContents& inputs) {
  const std::string context =
      "running " + generated_.kernel_id + " with schedule " + generated_.schedule.to_string();
  if (Status loaded = load_inputs(bound, inputs); !loaded) return std::move(loaded).error();
  if (Status ran = execute(bound); !ran) return std::move(ran).error();
  BufferContents outputs;
  for (const kernels::BufferPlan& buffer : bound.plan_.buffers) {
    if (buffer.role != kernels::BufferRole::kOutput) continue;
    const gpu::Buffer& source = bound.buffer(buffer.name);
    Result<std::vector<std::byte>> bytes =
        device_->read_buffer(source, bound.offset(buffer.name), buffer.bytes);
    if (!bytes) return std::move(bytes).error().with_context(context);
    outputs.emplace(buffer.name, std::move(bytes).value());
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
  Result<std::unique_ptr<BoundPlan>> bound = bind(inputs.problem);
  if (!bound) return std::move(bound).error();
  return run(**bound, inputs.buffers);
}

}  // namespace wgsl_forge::forge
