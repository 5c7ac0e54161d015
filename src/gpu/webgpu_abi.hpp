#pragma once
// Our own declarations of the part of the standard `webgpu.h` C ABI (webgpu-native/webgpu-headers,
// 2025 revision, as implemented by the Dawn build that setup installs) that wgsl-forge calls.
// No header ships with that library, and we load it with dlopen, so every struct, enum value and
// callback signature here must match the binary exactly: a mismatch fails silently (garbage or a
// hang), which is why the tests in tests/gpu/ use each one against the real library.
//
// Facts checked against bun-webgpu-linux-x64 0.1.7, the Dawn build scripts/setup.sh installs:
//   - strings are WGPUStringView {data, length}; WGPU_STRLEN (SIZE_MAX) means NUL-terminated;
//   - callbacks come in *CallbackInfo structs with mode, userdata1 and userdata2;
//   - the queue-work-done callback takes (status, message, userdata1, userdata2);
//   - the create-compute-pipeline-async callback takes (status, pipeline, message, userdata1,
//     userdata2); its statuses are Success 1, CallbackCancelled 2 (the instance was dropped),
//     ValidationError 3, InternalError 4 (the library's strings name "CallbackCancelled" and
//     "Instance dropped"; tests/gpu/pipeline_batch_test.cpp sees 1 and 3 from the library);
//   - feature numbers follow the header revision of early 2025, not the current one:
//     TimestampQuery 0x3, ShaderF16 0xA, Subgroups 0x11, CoreFeaturesAndLimits 0x12 (with the
//     current numbers, 0x9 asks for IndirectFirstInstance and timestamp queries then fail
//     validation; tests/gpu/runtime_test.cpp checks each feature by using it);
//   - WGPULimits: chained pointer, then the limits in the standard order. Dawn may know more
//     trailing limits than we declare, so limits are always read into LimitsStorage, which leaves
//     room for them.

#include <cstddef>
#include <cstdint>

namespace wgsl_forge::gpu::abi {

using WGPUBool = std::uint32_t;
using WGPUFlags = std::uint64_t;

inline constexpr std::size_t kStrlen = SIZE_MAX;
inline constexpr std::uint32_t kQuerySetIndexUndefined = UINT32_MAX;
inline constexpr std::uint64_t kWholeSize = UINT64_MAX;

struct Opaque;
using WGPUInstance = Opaque*;
using WGPUAdapter = Opaque*;
using WGPUDevice = Opaque*;
using WGPUQueue = Opaque*;
using WGPUBuffer = Opaque*;
using WGPUShaderModule = Opaque*;
using WGPUBindGroupLayout = Opaque*;
using WGPUBindGroup = Opaque*;
using WGPUPipelineLayout = Opaque*;
using WGPUComputePipeline = Opaque*;
using WGPUCommandEncoder = Opaque*;
using WGPUComputePassEncoder = Opaque*;
using WGPUCommandBuffer = Opaque*;
using WGPUQuerySet = Opaque*;

struct WGPUStringView {
  const char* data;
  std::size_t length;
};

struct WGPUChainedStruct {
  const WGPUChainedStruct* next;
  std::uint32_t sType;
};

struct WGPUFuture {
  std::uint64_t id;
};

// Enum values (standard header unless marked Dawn).
enum : std::uint32_t {
  kSTypeShaderSourceWGSL = 0x00000002,
  kSTypeDawnTogglesDescriptor = 0x0005000A,  // Dawn

  kCallbackModeAllowProcessEvents = 0x00000002,
  kCallbackModeAllowSpontaneous = 0x00000003,

  kStatusSuccess = 0x00000001,

  kRequestAdapterStatusSuccess = 0x00000001,
  kRequestDeviceStatusSuccess = 0x00000001,
  kMapAsyncStatusSuccess = 0x00000001,
  kQueueWorkDoneStatusSuccess = 0x00000001,
  kPopErrorScopeStatusSuccess = 0x00000001,
  kCompilationInfoRequestStatusSuccess = 0x00000001,
  kCreatePipelineAsyncStatusSuccess = 0x00000001,
  kCreatePipelineAsyncStatusCallbackCancelled = 0x00000002,
  kCreatePipelineAsyncStatusValidationError = 0x00000003,
  kCreatePipelineAsyncStatusInternalError = 0x00000004,

  kErrorFilterValidation = 0x00000001,
  kErrorFilterOutOfMemory = 0x00000002,
  kErrorFilterInternal = 0x00000003,

  kErrorTypeNoError = 0x00000001,
  kErrorTypeValidation = 0x00000002,
  kErrorTypeOutOfMemory = 0x00000003,
  kErrorTypeInternal = 0x00000004,
  kErrorTypeUnknown = 0x00000005,

  kDeviceLostReasonUnknown = 0x00000001,
  kDeviceLostReasonDestroyed = 0x00000002,
  kDeviceLostReasonCallbackCancelled = 0x00000003,
  kDeviceLostReasonFailedCreation = 0x00000004,

  kBackendTypeUndefined = 0x00000000,
  kBackendTypeNull = 0x00000001,
  kBackendTypeWebGPU = 0x00000002,
  kBackendTypeD3D11 = 0x00000003,
  kBackendTypeD3D12 = 0x00000004,
  kBackendTypeMetal = 0x00000005,
  kBackendTypeVulkan = 0x00000006,
  kBackendTypeOpenGL = 0x00000007,
  kBackendTypeOpenGLES = 0x00000008,

  kAdapterTypeDiscreteGPU = 0x00000001,
  kAdapterTypeIntegratedGPU = 0x00000002,
  kAdapterTypeCPU = 0x00000003,
  kAdapterTypeUnknown = 0x00000004,

  kFeatureLevelCore = 0x00000002,
  kPowerPreferenceUndefined = 0x00000000,
  kPowerPreferenceLowPower = 0x00000001,
  kPowerPreferenceHighPerformance = 0x00000002,

  kFeatureTimestampQuery = 0x00000003,
  kFeatureShaderF16 = 0x0000000A,
  kFeatureSubgroups = 0x00000011,

  kBufferBindingTypeUniform = 0x00000002,
  kBufferBindingTypeStorage = 0x00000003,
  kBufferBindingTypeReadOnlyStorage = 0x00000004,

  kQueryTypeTimestamp = 0x00000002,

  kCompilationMessageTypeError = 0x00000001,
};

// Flags (64-bit).
enum : WGPUFlags {
  kBufferUsageMapRead = 0x1,
  kBufferUsageMapWrite = 0x2,
  kBufferUsageCopySrc = 0x4,
  kBufferUsageCopyDst = 0x8,
  kBufferUsageUniform = 0x40,
  kBufferUsageStorage = 0x80,
  kBufferUsageQueryResolve = 0x200,
  kShaderStageCompute = 0x4,
  kMapModeRead = 0x1,
  kMapModeWrite = 0x2,
};

// Callbacks.
using WGPURequestAdapterCallback = void (*)(std::uint32_t status, WGPUAdapter adapter,
                                            WGPUStringView message, void* userdata1,
                                            void* userdata2);
using WGPURequestDeviceCallback = void (*)(std::uint32_t status, WGPUDevice device,
                                           WGPUStringView message, void* userdata1,
                                           void* userdata2);
using WGPUBufferMapCallback = void (*)(std::uint32_t status, WGPUStringView message,
                                       void* userdata1, void* userdata2);
using WGPUQueueWorkDoneCallback = void (*)(std::uint32_t status, WGPUStringView message,
                                           void* userdata1, void* userdata2);
using WGPUPopErrorScopeCallback = void (*)(std::uint32_t status, std::uint32_t type,
                                           WGPUStringView message, void* userdata1,
                                           void* userdata2);
struct WGPUCompilationInfo;
using WGPUCompilationInfoCallback = void (*)(std::uint32_t status,
                                             const WGPUCompilationInfo* compilation_info,
                                             void* userdata1, void* userdata2);
using WGPUCreateComputePipelineAsyncCallback = void (*)(std::uint32_t status,
                                                        WGPUComputePipeline pipeline,
                                                        WGPUStringView message, void* userdata1,
                                                        void* userdata2);
using WGPUDeviceLostCallback = void (*)(const WGPUDevice* device, std::uint32_t reason,
                                        WGPUStringView message, void* userdata1, void* userdata2);
using WGPUUncapturedErrorCallback = void (*)(const WGPUDevice* device, std::uint32_t type,
                                             WGPUStringView message, void* userdata1,
                                             void* userdata2);

// Every *CallbackInfo of the standard header has this shape, differing in the callback type.
template <typename Callback>
struct WGPUCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  std::uint32_t mode;
  Callback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUUncapturedErrorCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUUncapturedErrorCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPURequestAdapterOptions {
  const WGPUChainedStruct* nextInChain;
  std::uint32_t featureLevel;
  std::uint32_t powerPreference;
  WGPUBool forceFallbackAdapter;
  std::uint32_t backendType;
  void* compatibleSurface;
};

struct WGPUAdapterInfo {
  WGPUChainedStruct* nextInChain;
  WGPUStringView vendor;
  WGPUStringView architecture;
  WGPUStringView device;
  WGPUStringView description;
  std::uint32_t backendType;
  std::uint32_t adapterType;
  std::uint32_t vendorID;
  std::uint32_t deviceID;
  std::uint32_t subgroupMinSize;
  std::uint32_t subgroupMaxSize;
};

struct WGPULimits {
  WGPUChainedStruct* nextInChain;
  std::uint32_t maxTextureDimension1D;
  std::uint32_t maxTextureDimension2D;
  std::uint32_t maxTextureDimension3D;
  std::uint32_t maxTextureArrayLayers;
  std::uint32_t maxBindGroups;
  std::uint32_t maxBindGroupsPlusVertexBuffers;
  std::uint32_t maxBindingsPerBindGroup;
  std::uint32_t maxDynamicUniformBuffersPerPipelineLayout;
  std::uint32_t maxDynamicStorageBuffersPerPipelineLayout;
  std::uint32_t maxSampledTexturesPerShaderStage;
  std::uint32_t maxSamplersPerShaderStage;
  std::uint32_t maxStorageBuffersPerShaderStage;
  std::uint32_t maxStorageTexturesPerShaderStage;
  std::uint32_t maxUniformBuffersPerShaderStage;
  std::uint64_t maxUniformBufferBindingSize;
  std::uint64_t maxStorageBufferBindingSize;
  std::uint32_t minUniformBufferOffsetAlignment;
  std::uint32_t minStorageBufferOffsetAlignment;
  std::uint32_t maxVertexBuffers;
  std::uint64_t maxBufferSize;
  std::uint32_t maxVertexAttributes;
  std::uint32_t maxVertexBufferArrayStride;
  std::uint32_t maxInterStageShaderVariables;
  std::uint32_t maxColorAttachments;
  std::uint32_t maxColorAttachmentBytesPerSample;
  std::uint32_t maxComputeWorkgroupStorageSize;
  std::uint32_t maxComputeInvocationsPerWorkgroup;
  std::uint32_t maxComputeWorkgroupSizeX;
  std::uint32_t maxComputeWorkgroupSizeY;
  std::uint32_t maxComputeWorkgroupSizeZ;
  std::uint32_t maxComputeWorkgroupsPerDimension;
};

// Room for limits that this Dawn build appends after the ones we declare.
struct LimitsStorage {
  WGPULimits limits;
  std::uint32_t reserved[64];
};

struct WGPUDawnTogglesDescriptor {
  WGPUChainedStruct chain;
  std::size_t enabledToggleCount;
  const char* const* enabledToggles;
  std::size_t disabledToggleCount;
  const char* const* disabledToggles;
};

struct WGPUQueueDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUDeviceDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  std::size_t requiredFeatureCount;
  const std::uint32_t* requiredFeatures;
  const WGPULimits* requiredLimits;
  WGPUQueueDescriptor defaultQueue;
  WGPUCallbackInfo<WGPUDeviceLostCallback> deviceLostCallbackInfo;
  WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
};

struct WGPUBufferDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUFlags usage;
  std::uint64_t size;
  WGPUBool mappedAtCreation;
};

struct WGPUShaderSourceWGSL {
  WGPUChainedStruct chain;
  WGPUStringView code;
};

struct WGPUShaderModuleDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUCompilationMessage {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView message;
  std::uint32_t type;
  std::uint64_t lineNum;
  std::uint64_t linePos;
  std::uint64_t offset;
  std::uint64_t length;
};

struct WGPUCompilationInfo {
  const WGPUChainedStruct* nextInChain;
  std::size_t messageCount;
  const WGPUCompilationMessage* messages;
};

struct WGPUBufferBindingLayout {
  const WGPUChainedStruct* nextInChain;
  std::uint32_t type;
  WGPUBool hasDynamicOffset;
  std::uint64_t minBindingSize;
};

struct WGPUSamplerBindingLayout {
  const WGPUChainedStruct* nextInChain;
  std::uint32_t type;
};

struct WGPUTextureBindingLayout {
  const WGPUChainedStruct* nextInChain;
  std::uint32_t sampleType;
  std::uint32_t viewDimension;
  WGPUBool multisampled;
};

struct WGPUStorageTextureBindingLayout {
  const WGPUChainedStruct* nextInChain;
  std::uint32_t access;
  std::uint32_t format;
  std::uint32_t viewDimension;
};

struct WGPUBindGroupLayoutEntry {
  const WGPUChainedStruct* nextInChain;
  std::uint32_t binding;
  WGPUFlags visibility;
  std::uint32_t bindingArraySize;
  WGPUBufferBindingLayout buffer;
  WGPUSamplerBindingLayout sampler;
  WGPUTextureBindingLayout texture;
  WGPUStorageTextureBindingLayout storageTexture;
};

struct WGPUBindGroupLayoutDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  std::size_t entryCount;
  const WGPUBindGroupLayoutEntry* entries;
};

struct WGPUBindGroupEntry {
  const WGPUChainedStruct* nextInChain;
  std::uint32_t binding;
  WGPUBuffer buffer;
  std::uint64_t offset;
  std::uint64_t size;
  void* sampler;
  void* textureView;
};

struct WGPUBindGroupDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUBindGroupLayout layout;
  std::size_t entryCount;
  const WGPUBindGroupEntry* entries;
};

struct WGPUPipelineLayoutDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  std::size_t bindGroupLayoutCount;
  const WGPUBindGroupLayout* bindGroupLayouts;
  std::uint32_t immediateSize;
};

struct WGPUConstantEntry {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView key;
  double value;
};

struct WGPUComputeState {
  const WGPUChainedStruct* nextInChain;
  WGPUShaderModule module;
  WGPUStringView entryPoint;
  std::size_t constantCount;
  const WGPUConstantEntry* constants;
};

struct WGPUComputePipelineDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUPipelineLayout layout;
  WGPUComputeState compute;
};

struct WGPUCommandEncoderDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUPassTimestampWrites {
  const WGPUChainedStruct* nextInChain;
  WGPUQuerySet querySet;
  std::uint32_t beginningOfPassWriteIndex;
  std::uint32_t endOfPassWriteIndex;
};

struct WGPUComputePassDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  const WGPUPassTimestampWrites* timestampWrites;
};

struct WGPUCommandBufferDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUQuerySetDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  std::uint32_t type;
  std::uint32_t count;
};

// The functions of the standard webgpu.h we call, resolved by name from the loaded library: a
// library that lacks any of them is refused when it is loaded.
#define WGSL_FORGE_WEBGPU_FUNCTIONS(X)                                                            \
  X(CreateInstance, WGPUInstance, const void*)                                                    \
  X(InstanceAddRef, void, WGPUInstance)                                                           \
  X(InstanceRelease, void, WGPUInstance)                                                          \
  X(InstanceProcessEvents, void, WGPUInstance)                                                    \
  X(InstanceRequestAdapter, WGPUFuture, WGPUInstance, const WGPURequestAdapterOptions*,           \
    WGPUCallbackInfo<WGPURequestAdapterCallback>)                                                 \
  X(AdapterAddRef, void, WGPUAdapter)                                                             \
  X(AdapterRelease, void, WGPUAdapter)                                                            \
  X(AdapterGetInfo, std::uint32_t, WGPUAdapter, WGPUAdapterInfo*)                                 \
  X(AdapterInfoFreeMembers, void, WGPUAdapterInfo)                                                \
  X(AdapterGetLimits, std::uint32_t, WGPUAdapter, WGPULimits*)                                    \
  X(AdapterHasFeature, WGPUBool, WGPUAdapter, std::uint32_t)                                      \
  X(AdapterRequestDevice, WGPUFuture, WGPUAdapter, const WGPUDeviceDescriptor*,                   \
    WGPUCallbackInfo<WGPURequestDeviceCallback>)                                                  \
  X(DeviceAddRef, void, WGPUDevice)                                                               \
  X(DeviceRelease, void, WGPUDevice)                                                              \
  X(DeviceDestroy, void, WGPUDevice)                                                              \
  X(DeviceGetLimits, std::uint32_t, WGPUDevice, WGPULimits*)                                      \
  X(DeviceHasFeature, WGPUBool, WGPUDevice, std::uint32_t)                                        \
  X(DeviceGetQueue, WGPUQueue, WGPUDevice)                                                        \
  X(DevicePushErrorScope, void, WGPUDevice, std::uint32_t)                                        \
  X(DevicePopErrorScope, WGPUFuture, WGPUDevice, WGPUCallbackInfo<WGPUPopErrorScopeCallback>)     \
  X(DeviceCreateBuffer, WGPUBuffer, WGPUDevice, const WGPUBufferDescriptor*)                      \
  X(DeviceCreateShaderModule, WGPUShaderModule, WGPUDevice, const WGPUShaderModuleDescriptor*)    \
  X(DeviceCreateBindGroupLayout, WGPUBindGroupLayout, WGPUDevice,                                 \
    const WGPUBindGroupLayoutDescriptor*)                                                         \
  X(DeviceCreatePipelineLayout, WGPUPipelineLayout, WGPUDevice,                                   \
    const WGPUPipelineLayoutDescriptor*)                                                          \
  X(DeviceCreateComputePipeline, WGPUComputePipeline, WGPUDevice,                                 \
    const WGPUComputePipelineDescriptor*)                                                         \
  X(DeviceCreateComputePipelineAsync, WGPUFuture, WGPUDevice,                                     \
    const WGPUComputePipelineDescriptor*,                                                         \
    WGPUCallbackInfo<WGPUCreateComputePipelineAsyncCallback>)                                     \
  X(DeviceCreateBindGroup, WGPUBindGroup, WGPUDevice, const WGPUBindGroupDescriptor*)             \
  X(DeviceCreateCommandEncoder, WGPUCommandEncoder, WGPUDevice,                                   \
    const WGPUCommandEncoderDescriptor*)                                                          \
  X(DeviceCreateQuerySet, WGPUQuerySet, WGPUDevice, const WGPUQuerySetDescriptor*)                \
  X(QueueRelease, void, WGPUQueue)                                                                \
  X(QueueSubmit, void, WGPUQueue, std::size_t, const WGPUCommandBuffer*)                          \
  X(QueueWriteBuffer, void, WGPUQueue, WGPUBuffer, std::uint64_t, const void*, std::size_t)       \
  X(QueueOnSubmittedWorkDone, WGPUFuture, WGPUQueue, WGPUCallbackInfo<WGPUQueueWorkDoneCallback>) \
  X(BufferAddRef, void, WGPUBuffer)                                                               \
  X(BufferRelease, void, WGPUBuffer)                                                              \
  X(BufferGetSize, std::uint64_t, WGPUBuffer)                                                     \
  X(BufferGetUsage, WGPUFlags, WGPUBuffer)                                                        \
  X(BufferDestroy, void, WGPUBuffer)                                                              \
  X(BufferMapAsync, WGPUFuture, WGPUBuffer, WGPUFlags, std::size_t, std::size_t,                  \
    WGPUCallbackInfo<WGPUBufferMapCallback>)                                                      \
  X(BufferGetConstMappedRange, const void*, WGPUBuffer, std::size_t, std::size_t)                 \
  X(BufferGetMappedRange, void*, WGPUBuffer, std::size_t, std::size_t)                            \
  X(BufferUnmap, void, WGPUBuffer)                                                                \
  X(ShaderModuleRelease, void, WGPUShaderModule)                                                  \
  X(ShaderModuleGetCompilationInfo, WGPUFuture, WGPUShaderModule,                                 \
    WGPUCallbackInfo<WGPUCompilationInfoCallback>)                                                \
  X(BindGroupLayoutRelease, void, WGPUBindGroupLayout)                                            \
  X(BindGroupRelease, void, WGPUBindGroup)                                                        \
  X(PipelineLayoutRelease, void, WGPUPipelineLayout)                                              \
  X(ComputePipelineRelease, void, WGPUComputePipeline)                                            \
  X(CommandEncoderAddRef, void, WGPUCommandEncoder)                                               \
  X(CommandEncoderRelease, void, WGPUCommandEncoder)                                              \
  X(CommandEncoderBeginComputePass, WGPUComputePassEncoder, WGPUCommandEncoder,                   \
    const WGPUComputePassDescriptor*)                                                             \
  X(CommandEncoderCopyBufferToBuffer, void, WGPUCommandEncoder, WGPUBuffer, std::uint64_t,        \
    WGPUBuffer, std::uint64_t, std::uint64_t)                                                     \
  X(CommandEncoderResolveQuerySet, void, WGPUCommandEncoder, WGPUQuerySet, std::uint32_t,         \
    std::uint32_t, WGPUBuffer, std::uint64_t)                                                     \
  X(CommandEncoderFinish, WGPUCommandBuffer, WGPUCommandEncoder,                                  \
    const WGPUCommandBufferDescriptor*)                                                           \
  X(CommandBufferRelease, void, WGPUCommandBuffer)                                                \
  X(ComputePassEncoderSetPipeline, void, WGPUComputePassEncoder, WGPUComputePipeline)             \
  X(ComputePassEncoderSetBindGroup, void, WGPUComputePassEncoder, std::uint32_t, WGPUBindGroup,   \
    std::size_t, const std::uint32_t*)                                                            \
  X(ComputePassEncoderDispatchWorkgroups, void, WGPUComputePassEncoder, std::uint32_t,            \
    std::uint32_t, std::uint32_t)                                                                 \
  X(ComputePassEncoderEnd, void, WGPUComputePassEncoder)                                          \
  X(ComputePassEncoderRelease, void, WGPUComputePassEncoder)                                      \
  X(QuerySetRelease, void, WGPUQuerySet)                                                          \
  X(QuerySetDestroy, void, WGPUQuerySet)

// Dawn's own functions, outside webgpu.h: resolved when the library has them and null otherwise,
// so that another webgpu.h implementation loads; each use checks for null and says what is
// missing. (Dawn's toggles are a chained struct, not a function: they are chained only when a
// toggle is asked for.)
#define WGSL_FORGE_DAWN_FUNCTIONS(X) \
  X(DeviceForceLoss, void, WGPUDevice, std::uint32_t, WGPUStringView)

// Dawn's C++ dawn::native::Instance::EnumerateAdapters(const WGPURequestAdapterOptions*) const:
// every adapter of the options' backend, in the driver's order, which webgpu.h has no call for
// (its RequestAdapter picks one). Resolved by its mangled name (Itanium ABI: the returned
// std::vector<dawn::native::Adapter> is written through a hidden first argument; `this` is an
// Instance, one InstanceBase* that is the WGPUInstance; each Adapter is one AdapterBase* that is
// a WGPUAdapter holding one reference). Optional: a webgpu.h library without it serves only the
// adapter RequestAdapter picks.
inline constexpr const char* kDawnEnumerateAdaptersSymbol =
    "_ZNK4dawn6native8Instance17EnumerateAdaptersEPK25WGPURequestAdapterOptions";
struct DawnAdapterVector {
  WGPUAdapter* begin = nullptr;
  WGPUAdapter* end = nullptr;
  WGPUAdapter* capacity = nullptr;
};
struct DawnInstance {
  WGPUInstance instance;
};
using DawnEnumerateAdapters = void (*)(DawnAdapterVector* result, const DawnInstance* self,
                                       const WGPURequestAdapterOptions* options);

// A table of function pointers, one member per function above (e.g. `CreateInstance`).
struct WebGpuFunctions {
#define WGSL_FORGE_DECLARE_MEMBER(name, result, ...) result (*name)(__VA_ARGS__) = nullptr;
  WGSL_FORGE_WEBGPU_FUNCTIONS(WGSL_FORGE_DECLARE_MEMBER)
  WGSL_FORGE_DAWN_FUNCTIONS(WGSL_FORGE_DECLARE_MEMBER)
#undef WGSL_FORGE_DECLARE_MEMBER
};

}  // namespace wgsl_forge::gpu::abi
