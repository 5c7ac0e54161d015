// Compute pipelines on an open Device: WGSL compiled into a shader module, the bind group and
// pipeline layouts, and the pipeline, one at a time (DeviceCreateComputePipeline) or many at once
// (DeviceCreateComputePipelineAsync, whose work Dawn's Vulkan backend posts to its worker
// threads, so that the pipelines of a start-up compile side by side).

#include <map>
#include <optional>
#include <utility>

#include "device_state.hpp"
#include "util/try.hpp"

namespace wgsl_forge::gpu {

using namespace abi;

namespace {

std::uint32_t buffer_binding_type(BindingKind kind) {
  switch (kind) {
    case BindingKind::kStorageRead:
      return kBufferBindingTypeReadOnlyStorage;
    case BindingKind::kStorageReadWrite:
      return kBufferBindingTypeStorage;
    case BindingKind::kUniform:
      return kBufferBindingTypeUniform;
  }
  return kBufferBindingTypeStorage;
}

Status check_bind_group_zero(std::span<const KernelBinding> bindings, const std::string& context) {
  for (const KernelBinding& binding : bindings) {
    if (binding.group != 0) {
      return Error(ErrorKind::kInvalidInput, "Binding " + binding.name + " is in bind group " +
                                                 std::to_string(binding.group) +
                                                 "; kernels use bind group 0 only.")
          .with_context(context);
    }
  }
  return Ok{};
}

struct CompileReply {
  std::uint32_t status = 0;
  std::vector<std::string> errors;  // "line:column: message"
};

Result<CompileReply> compilation_messages(DeviceState& state, WGPUShaderModule module) {
  return state.await<CompileReply>("the WGSL compiler", [&](PendingReply<CompileReply>* pending) {
    state.api->ShaderModuleGetCompilationInfo(
        module,
        WGPUCallbackInfo<WGPUCompilationInfoCallback>{
            nullptr, kCallbackModeAllowProcessEvents,
            [](std::uint32_t status, const WGPUCompilationInfo* info, void* userdata1, void*) {
              auto* r = PendingReply<CompileReply>::receive(userdata1);
              if (r == nullptr) return;
              r->payload.status = status;
              if (info == nullptr) return;
              for (std::size_t i = 0; i < info->messageCount; ++i) {
                const WGPUCompilationMessage& message = info->messages[i];
                if (message.type != kCompilationMessageTypeError) continue;
                r->payload.errors.push_back(std::to_string(message.lineNum) + ":" +
                                            std::to_string(message.linePos) +
                                            ": error: " + to_string(message.message));
              }
            },
            pending, nullptr});
  });
}

// A shader module, released when it goes out of scope (pipelines made from it keep their own
// reference inside Dawn).
class ShaderModule {
 public:
  ShaderModule(const WebGpuFunctions* api, WGPUShaderModule handle) : api_(api), handle_(handle) {}
  ShaderModule(ShaderModule&& other) noexcept
      : api_(other.api_), handle_(std::exchange(other.handle_, nullptr)) {}
  ShaderModule& operator=(ShaderModule&&) = delete;
  ~ShaderModule() {
    if (handle_ != nullptr) api_->ShaderModuleRelease(handle_);
  }

  WGPUShaderModule handle() const { return handle_; }

 private:
  const WebGpuFunctions* api_;
  WGPUShaderModule handle_;
};

// Compiles `wgsl`; a WGSL error gives "label:line:column: message" for every error the compiler
// reports.
Result<ShaderModule> compile_shader_module(DeviceState& state, std::string_view wgsl,
                                           std::string_view label, const std::string& context) {
  WGPUShaderSourceWGSL source{};
  source.chain.sType = kSTypeShaderSourceWGSL;
  source.code = to_view(wgsl);
  WGPUShaderModuleDescriptor module_descriptor{};
  module_descriptor.nextInChain = &source.chain;
  module_descriptor.label = to_view(label);
  WGPUShaderModule handle = nullptr;
  Status created = state.capture_errors(context, [&] {
    handle = state.api->DeviceCreateShaderModule(state.device, &module_descriptor);
  });
  ShaderModule module(state.api, handle);
  if (handle == nullptr) {
    if (!created) return std::move(created).error();
    return Error(ErrorKind::kRuntime, "Dawn returned no shader module.").with_context(context);
  }
  WF_TRY_ASSIGN_CONTEXT(CompileReply compiled, compilation_messages(state, handle), context);
  if (!compiled.errors.empty()) {
    std::string text = "WGSL of " + std::string(label) + " does not compile:";
    for (const std::string& error : compiled.errors)
      text += "\n" + std::string(label) + ":" + error;
    return Error(ErrorKind::kCompilation, text).with_context(context);
  }
  if (!created) return std::move(created).error();
  return module;
}

// Under one set of error scopes: the bind group layout of `bindings` (stored in
// `bind_group_layout`, which the pipeline owns), a pipeline layout of it alone, and `create`
// called with the pipeline's descriptor.
Status create_with_layout(DeviceState& state, std::span<const KernelBinding> bindings,
                          WGPUShaderModule module, std::string_view entry_point,
                          std::string_view label, const std::string& context,
                          void*& bind_group_layout,
                          const std::function<void(const WGPUComputePipelineDescriptor&)>& create) {
  std::vector<WGPUBindGroupLayoutEntry> entries(bindings.size());
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    entries[i].binding = bindings[i].binding;
    entries[i].visibility = kShaderStageCompute;
    entries[i].buffer.type = buffer_binding_type(bindings[i].kind);
  }
  return state.capture_errors(context, [&] {
    WGPUBindGroupLayoutDescriptor layout_descriptor{};
    layout_descriptor.label = to_view(label);
    layout_descriptor.entryCount = entries.size();
    layout_descriptor.entries = entries.data();
    auto layout = state.api->DeviceCreateBindGroupLayout(state.device, &layout_descriptor);
    bind_group_layout = layout;
    WGPUPipelineLayoutDescriptor pipeline_layout_descriptor{};
    pipeline_layout_descriptor.label = to_view(label);
    pipeline_layout_descriptor.bindGroupLayoutCount = 1;
    pipeline_layout_descriptor.bindGroupLayouts = &layout;
    WGPUPipelineLayout pipeline_layout =
        state.api->DeviceCreatePipelineLayout(state.device, &pipeline_layout_descriptor);
    WGPUComputePipelineDescriptor descriptor{};
    descriptor.label = to_view(label);
    descriptor.layout = pipeline_layout;
    descriptor.compute.module = module;
    descriptor.compute.entryPoint = to_view(entry_point);
    create(descriptor);
    state.api->PipelineLayoutRelease(pipeline_layout);
  });
}

// Dawn's answer to one DeviceCreateComputePipelineAsync. Its callback runs inside
// InstanceProcessEvents on the waiting thread, or, when the instance is dropped first, while it
// is released.
struct AsyncPipelineReply {
  const WebGpuFunctions* api = nullptr;
  bool done = false;
  // The caller stopped waiting: the callback releases what comes and deletes the record.
  bool abandoned = false;
  std::uint32_t status = 0;
  WGPUComputePipeline pipeline = nullptr;
  std::string message;
};

void on_compute_pipeline_created(std::uint32_t status, WGPUComputePipeline pipeline,
                                 WGPUStringView message, void* userdata1, void*) {
  auto* reply = static_cast<AsyncPipelineReply*>(userdata1);
  if (reply->abandoned) {
    if (pipeline != nullptr) reply->api->ComputePipelineRelease(pipeline);
    delete reply;
    return;
  }
  reply->done = true;
  reply->status = status;
  reply->pipeline = pipeline;
  reply->message = to_string(message);
}

// The replies of the pipelines requested so far. Pipelines not taken are released, and replies
// still to come are abandoned, when this goes out of scope: a failed call keeps nothing.
class PendingPipelines {
 public:
  explicit PendingPipelines(const WebGpuFunctions* api) : api_(api) {}
  PendingPipelines(const PendingPipelines&) = delete;
  PendingPipelines& operator=(const PendingPipelines&) = delete;
  ~PendingPipelines() {
    for (AsyncPipelineReply* reply : replies_) {
      if (!reply->done) {
        reply->abandoned = true;
        continue;
      }
      if (reply->pipeline != nullptr) api_->ComputePipelineRelease(reply->pipeline);
      delete reply;
    }
  }

  AsyncPipelineReply* add() {
    auto* reply = new AsyncPipelineReply();
    reply->api = api_;
    replies_.push_back(reply);
    return reply;
  }
  bool all_done() const {
    for (const AsyncPipelineReply* reply : replies_) {
      if (!reply->done) return false;
    }
    return true;
  }
  std::size_t size() const { return replies_.size(); }

  // The pipeline of request `index` (done), handed to the caller, or why Dawn made none.
  Result<WGPUComputePipeline> take(std::size_t index) {
    AsyncPipelineReply& reply = *replies_[index];
    if (reply.status == kCreatePipelineAsyncStatusSuccess && reply.pipeline != nullptr) {
      return std::exchange(reply.pipeline, nullptr);
    }
    std::string message = reply.message;
    // Trim Dawn's trailing newlines so that our context lines follow directly.
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    switch (reply.status) {
      case kCreatePipelineAsyncStatusSuccess:
        return Error(ErrorKind::kRuntime, "Dawn returned no compute pipeline.");
      case kCreatePipelineAsyncStatusValidationError:
        return Error(ErrorKind::kValidation, "Validation error: " + message);
      case kCreatePipelineAsyncStatusInternalError:
        return Error(ErrorKind::kRuntime, "Internal error: " + message);
      case kCreatePipelineAsyncStatusCallbackCancelled:
        return Error(ErrorKind::kRuntime,
                     "The pipeline's creation was cancelled (" + message + ").");
      default:
        return Error(ErrorKind::kRuntime, "Dawn's pipeline creation ended with status " +
                                              std::to_string(reply.status) + " (" + message + ").");
    }
  }

 private:
  const WebGpuFunctions* api_;
  std::vector<AsyncPipelineReply*> replies_;
};

Error with_request_context(Error error, const ComputePipelineRequest& request) {
  if (request.error_context.empty()) return error;
  return std::move(error).with_context(std::string(request.error_context));
}

}  // namespace

ComputePipeline::ComputePipeline(std::shared_ptr<DeviceState> device, std::string_view label,
                                 std::span<const KernelBinding> bindings)
    : device_(std::move(device)), label_(label), bindings_(bindings.begin(), bindings.end()) {}

Result<ComputePipeline> Device::create_compute_pipeline(std::string_view wgsl,
                                                        std::string_view entry_point,
                                                        std::span<const KernelBinding> bindings,
                                                        std::string_view label) {
  const std::string context = "creating compute pipeline " + std::string(label);
  WF_TRY(check_bind_group_zero(bindings, context));
  WF_TRY_ASSIGN(ShaderModule module, compile_shader_module(*state_, wgsl, label, context));
  ComputePipeline pipeline(state_, label, bindings);
  Status built = create_with_layout(
      *state_, bindings, module.handle(), entry_point, label, context, pipeline.bind_group_layout_,
      [&](const WGPUComputePipelineDescriptor& d) {
        pipeline.pipeline_ = state_->api->DeviceCreateComputePipeline(state_->device, &d);
      });
  if (!built) return std::move(built).error();
  return pipeline;
}

Result<std::vector<ComputePipeline>> Device::create_compute_pipelines(
    std::span<const ComputePipelineRequest> requests) {
  std::vector<ComputePipeline> pipelines;
  pipelines.reserve(requests.size());
  PendingPipelines pending(state_->api);
  std::map<std::string_view, ShaderModule> modules;  // by WGSL
  // A request that failed before its pipeline was requested: the ones after it are not made.
  std::optional<Error> stopped;
  for (const ComputePipelineRequest& request : requests) {
    const std::string context = "creating compute pipeline " + std::string(request.label);
    if (Status in_group_zero = check_bind_group_zero(request.bindings, context); !in_group_zero) {
      stopped = with_request_context(std::move(in_group_zero).error(), request);
      break;
    }
    auto module = modules.find(request.wgsl);
    if (module == modules.end()) {
      Result<ShaderModule> compiled =
          compile_shader_module(*state_, request.wgsl, request.label, context);
      if (!compiled) {
        stopped = with_request_context(std::move(compiled).error(), request);
        break;
      }
      module = modules.emplace(request.wgsl, std::move(compiled).value()).first;
    }
    ComputePipeline& pipeline =
        pipelines.emplace_back(ComputePipeline(state_, request.label, request.bindings));
    Status requested = create_with_layout(
        *state_, request.bindings, module->second.handle(), request.entry_point, request.label,
        context, pipeline.bind_group_layout_, [&](const WGPUComputePipelineDescriptor& d) {
          state_->api->DeviceCreateComputePipelineAsync(
              state_->device, &d,
              WGPUCallbackInfo<WGPUCreateComputePipelineAsyncCallback>{
                  nullptr, kCallbackModeAllowProcessEvents, &on_compute_pipeline_created,
                  pending.add(), nullptr});
        });
    if (!requested) {
      stopped = with_request_context(std::move(requested).error(), request);
      break;
    }
  }
  const std::string what =
      "Dawn to compile " + std::to_string(pending.size()) + " compute pipelines";
  WF_TRY(state_->wait_until([&] { return pending.all_done(); }, what));
  // Dawn answers Success with an unusable pipeline once the device is lost.
  WF_TRY(state_->check_alive());
  for (std::size_t i = 0; i < pending.size(); ++i) {
    Result<WGPUComputePipeline> created = pending.take(i);
    if (!created) {
      const ComputePipelineRequest& request = requests[i];
      return with_request_context(std::move(created).error().with_context(
                                      "creating compute pipeline " + std::string(request.label)),
                                  request);
    }
    pipelines[i].pipeline_ = *created;
  }
  if (stopped) return std::move(*stopped);
  return pipelines;
}

}  // namespace wgsl_forge::gpu
