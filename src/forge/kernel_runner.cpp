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
  PreparedKernel prepared;
  prepared.device_ = &device;
  prepared.kernel_ = &kernel;
  prepared.generated_ = generated;
  for (const std::string& entry_point : generated.entry_points) {
    Result<gpu::ComputePipeline> pipeline = device.create_compute_pipeline(
        generated.source, entry_point, generated.bindings, generated.kernel_id + "." + entry_point);
    if (!pipeline) {
      return std::move(pipeline).error().with_context(
          "preparing " + generated.kernel_id + " with schedule " + generated.schedule.to_string());
    }
    prepared.pipelines_.emplace(entry_point, std::move(pipeline).value());
  }
  return prepared;
}

const gpu::Buffer& BoundPlan::buffer(const std::string& name) const {
  if (auto it = external_.find(name); it != external_.end()) return *it->second;
  return buffers_.at(name);
}

Result<std::unique_ptr<BoundPlan>> PreparedKernel::bind(const kernels::Problem& problem,
                                                        const ExternalBuffers& external) {
  const std::string context = "running " + generated_.kernel_id + " with schedule " +
                              generated_.schedule.to_string() + " on " + problem.to_string();
  Result<kernels::DispatchPlan> plan =
      kernel_->plan(generated_.schedule, problem, capabilities_of(device_->adapter()));
  if (!plan) return std::move(plan).error().with_context(context);
  auto bound = std::make_unique<BoundPlan>();
  bound->plan_ = std::move(plan).value();
  for (const kernels::BufferPlan& buffer : bound->plan_.buffers) {
    if (auto given = external.find(buffer.name); given != external.end()) {
      if (given->second == nullptr || given->second->size() < buffer.bytes) {
        return Error(ErrorKind::kInvalidInput,
                     "Buffer " + buffer.name + " holds " +
                         std::to_string(given->second ? given->second->size() : 0) +
                         " bytes; the plan needs " + std::to_string(buffer.bytes) + ".")
            .with_context(context);
      }
      bound->external_.emplace(buffer.name, given->second);
      continue;
    }
    Result<gpu::Buffer> created =
        device_->create_buffer(buffer.bytes, gpu::BufferUsage::kStorage, buffer.name);
    if (!created) return std::move(created).error().with_context(context);
    bound->buffers_.emplace(buffer.name, std::move(created).value());
  }
  const std::uint32_t max_per_dimension =
      device_->adapter().limits.max_compute_workgroups_per_dimension;
  bound->groups_.reserve(bound->plan_.passes.size());
  bound->uniforms_.reserve(bound->plan_.passes.size());
  for (const kernels::PassPlan& pass : bound->plan_.passes) {
    auto pipeline = pipelines_.find(pass.entry_point);
    if (pipeline == pipelines_.end()) {
      return Error(ErrorKind::kInvalidInput,
                   "The plan uses entry point " + pass.entry_point + ", which the WGSL lacks.")
          .with_context(context);
    }
    std::vector<std::uint32_t> words = pass.params;
    if (words.empty()) words.push_back(0);
    Result<gpu::Buffer> uniform = device_->create_buffer(
        round_up_16(words.size() * 4), gpu::BufferUsage::kUniform, pass.entry_point + ".params");
    if (!uniform) return std::move(uniform).error().with_context(context);
    if (Status written = device_->write_buffer(*uniform, 0, std::as_bytes(std::span(words)));
        !written) {
      return std::move(written).error().with_context(context);
    }
    std::vector<gpu::BufferBinding> bindings;
    gpu::BufferBinding params;
    params.binding = 0;
    params.buffer = &*uniform;
    bindings.push_back(params);
    for (const auto& [binding, name] : pass.buffers) {
      gpu::BufferBinding one;
      one.binding = binding;
      one.buffer = &bound->buffer(name);
      bindings.push_back(one);
    }
    Result<gpu::BindGroup> group = device_->create_bind_group(pipeline->second, bindings);
    if (!group) return std::move(group).error().with_context(context);
    Result<gpu::WorkgroupGrid> grid = gpu::plan_workgroup_grid(pass.workgroups, max_per_dimension);
    if (!grid) return std::move(grid).error().with_context(context);
    bound->uniforms_.push_back(std::move(uniform).value());
    bound->groups_.push_back(std::move(group).value());
    bound->steps_.push_back({&pipeline->second, &bound->groups_.back(), *grid});
  }
  return bound;
}

Status PreparedKernel::load_inputs(const BoundPlan& bound, const BufferContents& inputs) {
  const std::string context = "loading the inputs of " + generated_.kernel_id;
  for (const kernels::BufferPlan& buffer : bound.plan_.buffers) {
    const gpu::Buffer& target = bound.buffer(buffer.name);
    std::vector<std::byte> contents;
    if (buffer.role == kernels::BufferRole::kInput) {
      auto given = inputs.find(buffer.name);
      contents.assign(target.size(), std::byte{0});
      if (given != inputs.end()) {
        if (given->second.size() > target.size()) {
          return Error(ErrorKind::kInvalidInput,
                       "Input " + buffer.name + " has " + std::to_string(given->second.size()) +
                           " bytes; the plan's buffer holds " + std::to_string(target.size()) + ".")
              .with_context(context);
        }
        if (!given->second.empty())
          std::memcpy(contents.data(), given->second.data(), given->second.size());
      }
    } else {
      contents = poison_bytes(target.size());
    }
    if (Status written = device_->write_buffer(target, 0, contents); !written) {
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
    Result<std::vector<std::byte>> bytes = device_->read_buffer(source, 0, source.size());
    if (!bytes) return std::move(bytes).error().with_context(context);
    outputs.emplace(buffer.name, std::move(bytes).value());
  }
  return outputs;
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
