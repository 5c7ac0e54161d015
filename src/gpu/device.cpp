// Opening the adapter and device, and describing them.

#include <algorithm>
#include <nlohmann/json.hpp>

#include "device_state.hpp"
#include "util/try.hpp"
#include "wgsl_forge/hash.hpp"

namespace wgsl_forge::gpu {

using namespace abi;

namespace {

const char* backend_name(std::uint32_t backend) {
  switch (backend) {
    case kBackendTypeNull:
      return "Null";
    case kBackendTypeWebGPU:
      return "WebGPU";
    case kBackendTypeD3D11:
      return "D3D11";
    case kBackendTypeD3D12:
      return "D3D12";
    case kBackendTypeMetal:
      return "Metal";
    case kBackendTypeVulkan:
      return "Vulkan";
    case kBackendTypeOpenGL:
      return "OpenGL";
    case kBackendTypeOpenGLES:
      return "OpenGLES";
    default:
      return "Undefined";
  }
}

const char* adapter_type_name(std::uint32_t type) {
  switch (type) {
    case kAdapterTypeDiscreteGPU:
      return "DiscreteGpu";
    case kAdapterTypeIntegratedGPU:
      return "IntegratedGpu";
    case kAdapterTypeCPU:
      return "Cpu";
    default:
      return "Unknown";
  }
}

const char* lost_reason_name(std::uint32_t reason) {
  switch (reason) {
    case kDeviceLostReasonDestroyed:
      return "destroyed";
    case kDeviceLostReasonCallbackCancelled:
      return "instance released";
    case kDeviceLostReasonFailedCreation:
      return "creation failed";
    default:
      return "lost";
  }
}

std::vector<std::string> forge_toggles(bool timestamps, bool bounds_checks);

// The features wgsl-forge may use, by their WebGPU names.
struct KnownFeature {
  std::uint32_t value;
  const char* name;
};
constexpr KnownFeature kUsefulFeatures[] = {
    {kFeatureTimestampQuery, "timestamp-query"},
    {kFeatureSubgroups, "subgroups"},
    {kFeatureShaderF16, "shader-f16"},
};

AdapterLimits convert_limits(const WGPULimits& raw) {
  AdapterLimits limits;
  limits.max_compute_invocations_per_workgroup = raw.maxComputeInvocationsPerWorkgroup;
  limits.max_compute_workgroup_size_x = raw.maxComputeWorkgroupSizeX;
  limits.max_compute_workgroup_size_y = raw.maxComputeWorkgroupSizeY;
  limits.max_compute_workgroup_size_z = raw.maxComputeWorkgroupSizeZ;
  limits.max_compute_workgroups_per_dimension = raw.maxComputeWorkgroupsPerDimension;
  limits.max_compute_workgroup_storage_size = raw.maxComputeWorkgroupStorageSize;
  limits.max_storage_buffers_per_shader_stage = raw.maxStorageBuffersPerShaderStage;
  limits.max_uniform_buffers_per_shader_stage = raw.maxUniformBuffersPerShaderStage;
  limits.max_bind_groups = raw.maxBindGroups;
  limits.min_storage_buffer_offset_alignment = raw.minStorageBufferOffsetAlignment;
  limits.min_uniform_buffer_offset_alignment = raw.minUniformBufferOffsetAlignment;
  limits.max_storage_buffer_binding_size = raw.maxStorageBufferBindingSize;
  limits.max_uniform_buffer_binding_size = raw.maxUniformBufferBindingSize;
  limits.max_buffer_size = raw.maxBufferSize;
  return limits;
}

nlohmann::json limits_json(const AdapterLimits& limits) {
  return {{"max_compute_invocations_per_workgroup", limits.max_compute_invocations_per_workgroup},
          {"max_compute_workgroup_size_x", limits.max_compute_workgroup_size_x},
          {"max_compute_workgroup_size_y", limits.max_compute_workgroup_size_y},
          {"max_compute_workgroup_size_z", limits.max_compute_workgroup_size_z},
          {"max_compute_workgroups_per_dimension", limits.max_compute_workgroups_per_dimension},
          {"max_compute_workgroup_storage_size", limits.max_compute_workgroup_storage_size},
          {"max_storage_buffers_per_shader_stage", limits.max_storage_buffers_per_shader_stage},
          {"max_uniform_buffers_per_shader_stage", limits.max_uniform_buffers_per_shader_stage},
          {"max_bind_groups", limits.max_bind_groups},
          {"min_storage_buffer_offset_alignment", limits.min_storage_buffer_offset_alignment},
          {"min_uniform_buffer_offset_alignment", limits.min_uniform_buffer_offset_alignment},
          {"max_storage_buffer_binding_size", limits.max_storage_buffer_binding_size},
          {"max_uniform_buffer_binding_size", limits.max_uniform_buffer_binding_size},
          {"max_buffer_size", limits.max_buffer_size}};
}

nlohmann::json identity_json(const AdapterIdentity& identity) {
  return {{"name", identity.name},
          {"vendor", identity.vendor},
          {"device", identity.device},
          {"device_type", identity.device_type},
          {"backend", identity.backend},
          {"driver", identity.driver},
          {"driver_info", identity.driver_info}};
}

// The fields of the topology hash, as documented on compute_topology_hash().
nlohmann::json topology_json(const AdapterInfo& info) {
  return {{"identity", identity_json(info.identity)},
          {"vendor_name", info.vendor_name},
          {"architecture", info.architecture},
          {"description", info.description},
          {"subgroup_min_size", info.subgroup_min_size},
          {"subgroup_max_size", info.subgroup_max_size},
          {"limits", limits_json(info.limits)},
          {"features", info.features},
          {"toggles", info.toggles},
          {"library_blake3", info.library_blake3}};
}

// Dawn's description reads "<driver>: <driver info>" on Vulkan ("NVIDIA: 580.159.04 ...",
// "llvmpipe: Mesa 25.0.7 ..."); the seed's AdapterIdentity keeps the two apart.
void split_driver(const std::string& description, AdapterIdentity& identity) {
  std::size_t colon = description.find(": ");
  if (colon == std::string::npos) {
    identity.driver = description;
    identity.driver_info.clear();
    return;
  }
  identity.driver = description.substr(0, colon);
  identity.driver_info = description.substr(colon + 2);
}

Result<WGPURequestAdapterOptions> adapter_options_of(const RuntimeOptions& options) {
  std::uint32_t backend = kBackendTypeUndefined;
  if (options.backend == "vulkan") {
    backend = kBackendTypeVulkan;
  } else if (options.backend != "any") {
    return Error(ErrorKind::kInvalidInput,
                 "Unknown backend '" + options.backend + "' (known: vulkan, any).");
  }
  WGPURequestAdapterOptions adapter_options{};
  adapter_options.featureLevel = kFeatureLevelCore;
  adapter_options.powerPreference = options.power_preference == PowerPreference::kLowPower
                                        ? kPowerPreferenceLowPower
                                        : kPowerPreferenceHighPerformance;
  adapter_options.backendType = backend;
  return adapter_options;
}

// Every adapter of the options' backend, in the driver's order, each holding one reference the
// caller releases. The vector's own storage belongs to the library's allocator and is left to
// it (a few bytes, once per device opened).
Result<std::vector<WGPUAdapter>> enumerate_adapters(DeviceState& state,
                                                    const WGPURequestAdapterOptions& options) {
  const DawnEnumerateAdapters enumerate = state.library->enumerate_adapters();
  if (enumerate == nullptr) {
    return Error(ErrorKind::kRuntime, "The WebGPU library " + state.library->path().string() +
                                          " cannot list its adapters (it is not Dawn), so it "
                                          "serves only the adapter it picks itself: leave out "
                                          "--adapter and --adapters.");
  }
  DawnAdapterVector found;
  const DawnInstance instance{state.instance};
  enumerate(&found, &instance, &options);
  return std::vector<WGPUAdapter>(found.begin, found.end);
}

Result<WGPUAdapter> request_adapter(DeviceState& state, const RuntimeOptions& options) {
  WF_TRY_ASSIGN(WGPURequestAdapterOptions adapter_options, adapter_options_of(options));
  if (options.adapter_index) {
    WF_TRY_ASSIGN(std::vector<WGPUAdapter> adapters, enumerate_adapters(state, adapter_options));
    const std::size_t index = *options.adapter_index;
    WGPUAdapter chosen = index < adapters.size() ? adapters[index] : nullptr;
    if (chosen != nullptr) state.api->AdapterAddRef(chosen);
    for (WGPUAdapter adapter : adapters) state.api->AdapterRelease(adapter);
    if (chosen == nullptr) {
      return Error(ErrorKind::kInvalidInput,
                   "Adapter " + std::to_string(index) + " does not exist: this machine has " +
                       std::to_string(adapters.size()) + " " + options.backend +
                       " adapter(s), numbered from 0 (wgsl-forge adapters lists them).");
    }
    return chosen;
  }
  struct AdapterReply {
    std::uint32_t status = 0;
    WGPUAdapter adapter = nullptr;
    std::string message;
  };
  Result<AdapterReply> reply =
      state.await<AdapterReply>("an adapter", [&](PendingReply<AdapterReply>* pending) {
        state.api->InstanceRequestAdapter(
            state.instance, &adapter_options,
            WGPUCallbackInfo<WGPURequestAdapterCallback>{
                nullptr, kCallbackModeAllowProcessEvents,
                [](std::uint32_t status, WGPUAdapter adapter, WGPUStringView message,
                   void* userdata1, void*) {
                  if (auto* r = PendingReply<AdapterReply>::receive(userdata1)) {
                    r->payload = AdapterReply{status, adapter, to_string(message)};
                  }
                },
                pending, nullptr});
      });
  if (!reply) return std::move(reply).error();
  if (reply->status != kRequestAdapterStatusSuccess || reply->adapter == nullptr) {
    return Error(ErrorKind::kRuntime,
                 "No " + std::string(options.backend == "vulkan" ? "Vulkan " : "") +
                     "adapter is available (Dawn: " +
                     (reply->message.empty() ? "no message" : reply->message) +
                     "). Without a GPU, install Mesa's lavapipe driver (mesa-vulkan-drivers >= "
                     "25 from bookworm-backports; scripts/setup.sh does it); on an NVIDIA "
                     "machine, set VK_DRIVER_FILES to the driver's ICD JSON.");
  }
  return reply->adapter;
}

void on_device_lost(const WGPUDevice*, std::uint32_t reason, WGPUStringView message,
                    void* userdata1, void*) {
  auto* state = static_cast<DeviceState*>(userdata1);
  std::lock_guard lock(state->mutex);
  if (!state->lost_reason) {
    state->lost_reason = std::string(lost_reason_name(reason)) + ": " + to_string(message);
  }
}

void on_uncaptured_error(const WGPUDevice*, std::uint32_t, WGPUStringView message, void* userdata1,
                         void*) {
  auto* state = static_cast<DeviceState*>(userdata1);
  std::lock_guard lock(state->mutex);
  state->uncaptured_errors.push_back(to_string(message));
}

Status request_device(DeviceState& state, const RuntimeOptions& options) {
  LimitsStorage adapter_limits{};
  if (state.api->AdapterGetLimits(state.adapter, &adapter_limits.limits) != kStatusSuccess) {
    return Error(ErrorKind::kRuntime, "The adapter does not report its limits.");
  }
  std::vector<std::uint32_t> features;
  for (const KnownFeature& feature : kUsefulFeatures) {
    if (feature.value == kFeatureTimestampQuery && !options.gpu_timestamps) continue;
    if (state.api->AdapterHasFeature(state.adapter, feature.value))
      features.push_back(feature.value);
  }
  const bool timestamps =
      std::find(features.begin(), features.end(), kFeatureTimestampQuery) != features.end();
  // Dawn rounds timestamps down to 65.536 us unless this toggle is off; the toggle is part of the
  // topology hash, so timings taken with and without it are never mixed.
  static const char* const kDisabledToggles[] = {"timestamp_quantization"};
  static const char* const kEnabledToggles[] = {"disable_robustness"};
  WGPUDawnTogglesDescriptor toggles{};
  toggles.chain.sType = kSTypeDawnTogglesDescriptor;
  toggles.disabledToggleCount = timestamps ? 1 : 0;
  toggles.disabledToggles = kDisabledToggles;
  toggles.enabledToggleCount = options.bounds_checks ? 0 : 1;
  toggles.enabledToggles = kEnabledToggles;

  WGPUDeviceDescriptor descriptor{};
  const bool any_toggle = toggles.disabledToggleCount + toggles.enabledToggleCount > 0;
  descriptor.nextInChain = any_toggle ? &toggles.chain : nullptr;
  descriptor.label = to_view("wgsl-forge");
  descriptor.requiredFeatureCount = features.size();
  descriptor.requiredFeatures = features.data();
  descriptor.requiredLimits = &adapter_limits.limits;  // the adapter's own, not WebGPU's defaults
  descriptor.deviceLostCallbackInfo = {nullptr, kCallbackModeAllowSpontaneous, &on_device_lost,
                                       &state, nullptr};
  descriptor.uncapturedErrorCallbackInfo = {nullptr, &on_uncaptured_error, &state, nullptr};

  struct DeviceReply {
    std::uint32_t status = 0;
    WGPUDevice device = nullptr;
    std::string message;
  };
  Result<DeviceReply> reply =
      state.await<DeviceReply>("a device", [&](PendingReply<DeviceReply>* pending) {
        state.api->AdapterRequestDevice(
            state.adapter, &descriptor,
            WGPUCallbackInfo<WGPURequestDeviceCallback>{
                nullptr, kCallbackModeAllowProcessEvents,
                [](std::uint32_t status, WGPUDevice device, WGPUStringView message, void* userdata1,
                   void*) {
                  if (auto* r = PendingReply<DeviceReply>::receive(userdata1)) {
                    r->payload = DeviceReply{status, device, to_string(message)};
                  }
                },
                pending, nullptr});
      });
  if (!reply) return std::move(reply).error();
  if (reply->status != kRequestDeviceStatusSuccess || reply->device == nullptr) {
    return Error(ErrorKind::kRuntime,
                 "The adapter refused to create a device (Dawn: " + reply->message + ").");
  }
  state.device = reply->device;
  state.queue = state.api->DeviceGetQueue(state.device);
  state.gpu_timestamps = timestamps;
  state.info.toggles = forge_toggles(timestamps, options.bounds_checks);
  return Ok{};
}

Status describe(DeviceState& state) {
  WGPUAdapterInfo raw{};
  if (state.api->AdapterGetInfo(state.adapter, &raw) != kStatusSuccess) {
    return Error(ErrorKind::kRuntime, "The adapter does not describe itself (AdapterGetInfo).");
  }
  AdapterInfo& info = state.info;
  info.identity.name = to_string(raw.device);
  info.identity.vendor = raw.vendorID;
  info.identity.device = raw.deviceID;
  info.identity.device_type = adapter_type_name(raw.adapterType);
  info.identity.backend = backend_name(raw.backendType);
  info.description = to_string(raw.description);
  split_driver(info.description, info.identity);
  info.vendor_name = to_string(raw.vendor);
  info.architecture = to_string(raw.architecture);
  info.subgroup_min_size = raw.subgroupMinSize;
  info.subgroup_max_size = raw.subgroupMaxSize;
  state.api->AdapterInfoFreeMembers(raw);

  LimitsStorage device_limits{};
  if (state.api->DeviceGetLimits(state.device, &device_limits.limits) != kStatusSuccess) {
    return Error(ErrorKind::kRuntime, "The device does not report its limits.");
  }
  info.limits = convert_limits(device_limits.limits);
  for (const KnownFeature& feature : kUsefulFeatures) {
    if (state.api->DeviceHasFeature(state.device, feature.value))
      info.features.push_back(feature.name);
  }
  info.library_path = state.library->path();
  info.library_blake3 = state.library->blake3();
  info.topology_hash = compute_topology_hash(info);
  return Ok{};
}

// The toggles Device::open sets (request_device), which an adopted device's key assumes.
std::vector<std::string> forge_toggles(bool timestamps, bool bounds_checks) {
  std::vector<std::string> toggles;
  if (timestamps) toggles.emplace_back("disabled:timestamp_quantization");
  if (!bounds_checks) toggles.emplace_back("enabled:disable_robustness");
  return toggles;
}

// The topology hash of a device the forge would open on the same adapter: it asks for the
// adapter's limits and every useful feature the adapter has.
Result<std::string> adapter_topology_hash(const DeviceState& state, bool bounds_checks) {
  AdapterInfo keyed = state.info;
  LimitsStorage adapter_limits{};
  if (state.api->AdapterGetLimits(state.adapter, &adapter_limits.limits) != kStatusSuccess) {
    return Error(ErrorKind::kRuntime, "The adapter does not report its limits.");
  }
  keyed.limits = convert_limits(adapter_limits.limits);
  keyed.features.clear();
  for (const KnownFeature& feature : kUsefulFeatures) {
    if (state.api->AdapterHasFeature(state.adapter, feature.value))
      keyed.features.push_back(feature.name);
  }
  const bool timestamps = std::find(keyed.features.begin(), keyed.features.end(),
                                    "timestamp-query") != keyed.features.end();
  keyed.toggles = forge_toggles(timestamps, bounds_checks);
  return compute_topology_hash(keyed);
}

}  // namespace

std::string compute_topology_hash(const AdapterInfo& info) {
  return blake3_hex(
      topology_json(info).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string adapter_info_json(const AdapterInfo& info) {
  nlohmann::json document = topology_json(info);
  document["library_path"] = info.library_path.string();
  document["topology_hash"] = info.topology_hash;
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Device::Device(std::shared_ptr<DeviceState> state) : state_(std::move(state)) {}
Device::~Device() = default;

namespace {

// The state of a device on the webgpu.h library that `library_path` resolves to; no handles yet.
Result<std::shared_ptr<DeviceState>> state_on_library(
    const std::optional<std::filesystem::path>& library_path,
    std::chrono::milliseconds wait_timeout) {
  WF_TRY_ASSIGN(std::filesystem::path path, resolve_webgpu_library(library_path));
  WF_TRY_ASSIGN(std::shared_ptr<const WebGpuLibrary> library, WebGpuLibrary::load(path));
  auto state = std::make_shared<DeviceState>();
  state->library = library;
  state->api = &library->functions();
  state->wait_timeout = wait_timeout;
  return state;
}

}  // namespace

Result<std::unique_ptr<Device>> Device::open(const RuntimeOptions& options) {
  WF_TRY_ASSIGN(std::shared_ptr<DeviceState> created,
                state_on_library(options.library_path, options.wait_timeout));
  std::shared_ptr<DeviceState> state = std::move(created);
  state->instance = state->api->CreateInstance(nullptr);
  if (state->instance == nullptr) {
    return Error(ErrorKind::kRuntime, "The WebGPU library " + state->library->path().string() +
                                          " could not create an instance.");
  }
  WF_TRY_ASSIGN(WGPUAdapter adapter, request_adapter(*state, options));
  state->adapter = adapter;
  WF_TRY(request_device(*state, options));
  WF_TRY(describe(*state));
  return std::unique_ptr<Device>(new Device(std::move(state)));
}

Result<std::size_t> count_adapters(const RuntimeOptions& options) {
  WF_TRY_ASSIGN(std::shared_ptr<DeviceState> state,
                state_on_library(options.library_path, options.wait_timeout));
  state->instance = state->api->CreateInstance(nullptr);
  if (state->instance == nullptr) {
    return Error(ErrorKind::kRuntime, "The WebGPU library " + state->library->path().string() +
                                          " could not create an instance.");
  }
  WF_TRY_ASSIGN(WGPURequestAdapterOptions adapter_options, adapter_options_of(options));
  WF_TRY_ASSIGN(std::vector<WGPUAdapter> adapters, enumerate_adapters(*state, adapter_options));
  for (WGPUAdapter adapter : adapters) state->api->AdapterRelease(adapter);
  return adapters.size();
}

Result<std::unique_ptr<Device>> Device::adopt(const ExternalDevice& external) {
  const char* missing = external.instance == nullptr  ? "instance"
                        : external.adapter == nullptr ? "adapter"
                        : external.device == nullptr  ? "device"
                                                      : nullptr;
  if (missing != nullptr) {
    return Error(ErrorKind::kInvalidInput,
                 "The program's WebGPU " + std::string(missing) + " is null (adopting a device).");
  }
  WF_TRY_ASSIGN(std::shared_ptr<DeviceState> created,
                state_on_library(external.library_path, external.wait_timeout));
  std::shared_ptr<DeviceState> state = std::move(created);
  state->adopted = true;
  state->instance = static_cast<WGPUInstance>(external.instance);
  state->adapter = static_cast<WGPUAdapter>(external.adapter);
  state->device = static_cast<WGPUDevice>(external.device);
  state->api->InstanceAddRef(state->instance);
  state->api->AdapterAddRef(state->adapter);
  state->api->DeviceAddRef(state->device);
  state->queue = state->api->DeviceGetQueue(state->device);
  WF_TRY(describe(*state));
  state->gpu_timestamps = state->api->DeviceHasFeature(state->device, kFeatureTimestampQuery);
  WF_TRY_ASSIGN(std::string topology, adapter_topology_hash(*state, external.bounds_checks));
  state->info.topology_hash = topology;
  // The toggles the key stands for; the program's device may run with others (for example
  // timestamp quantization), which changes timing precision, not which schedule is fastest.
  state->info.toggles =
      forge_toggles(std::find(state->info.features.begin(), state->info.features.end(),
                              "timestamp-query") != state->info.features.end(),
                    external.bounds_checks);
  return std::unique_ptr<Device>(new Device(std::move(state)));
}

const AdapterInfo& Device::adapter() const { return state_->info; }
bool Device::has_gpu_timestamps() const { return state_->gpu_timestamps; }
bool Device::has_feature(std::string_view feature) const {
  const auto& features = state_->info.features;
  return std::find(features.begin(), features.end(), feature) != features.end();
}

void Device::set_wait_timeout(std::chrono::milliseconds timeout) { state_->wait_timeout = timeout; }

std::chrono::milliseconds Device::wait_timeout() const { return state_->wait_timeout; }

Status Device::wait_for_idle(std::chrono::milliseconds timeout) {
  const std::chrono::milliseconds usual = state_->wait_timeout;
  state_->wait_timeout = timeout;
  Status idle = state_->wait_for_submitted_work("work submitted earlier");
  state_->wait_timeout = usual;
  if (idle) state_->unfinished_work = false;
  return idle;
}

bool Device::has_unfinished_work() const { return state_->unfinished_work; }

Status Device::force_loss_for_testing(std::string_view message) {
  if (state_->api->DeviceForceLoss == nullptr) {
    return Error(ErrorKind::kInvalidInput,
                 "The WebGPU library " + state_->library->path().string() +
                     " does not export wgpuDeviceForceLoss (a Dawn function), so a device loss "
                     "cannot be simulated with it.");
  }
  state_->api->DeviceForceLoss(state_->device, kDeviceLostReasonUnknown, to_view(message));
  state_->api->InstanceProcessEvents(state_->instance);
  return Ok{};
}

std::optional<std::string> Device::lost_reason() const {
  std::lock_guard lock(state_->mutex);
  return state_->lost_reason;
}

}  // namespace wgsl_forge::gpu
