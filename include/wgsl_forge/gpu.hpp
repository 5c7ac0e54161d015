#pragma once
// The WebGPU runtime: Dawn's C API loaded at run time, one adapter and device, storage buffers,
// WGSL compute pipelines, dispatch and GPU timing. Every failure is an Error value with Dawn's own
// message; a lost device fails every later call cleanly.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wgsl_forge/error.hpp"
#include "wgsl_forge/model.hpp"

namespace wgsl_forge::gpu {

class WebGpuLibrary;
struct DeviceState;

enum class PowerPreference { kHighPerformance, kLowPower };

struct RuntimeOptions {
  // The webgpu.h library: this path, else $WGSL_FORGE_WEBGPU_LIB, else the one installed beside
  // the wgsl_forge code, else the one setup installed in the build's tree (see
  // webgpu_library_search()).
  std::optional<std::filesystem::path> library_path;
  // "vulkan" (the default, and the only backend this project tests) or "any".
  std::string backend = "vulkan";
  PowerPreference power_preference = PowerPreference::kHighPerformance;
  // Request timestamp queries when the adapter has them, with Dawn's quantization switched off.
  bool gpu_timestamps = true;
  // Dawn clamps every array index in a kernel that it cannot prove in range (its robustness).
  // false switches the clamps off (Dawn toggle disable_robustness): an index out of range then
  // reads or writes outside its array, which certification cannot rule out for every input.
  // Some kernels run faster without them and some slower (measured per kernel in
  // docs/performance.md). The toggle is part of the topology hash, so kernels tuned with and
  // without the clamps are cached apart.
  bool bounds_checks = true;
  // Which adapter of the backend, by its place in the driver's order (count_adapters; Dawn's
  // enumeration, the order `wgsl-forge adapters` lists). Unset: the one Dawn's RequestAdapter
  // picks for the power preference. Identical GPUs have one topology hash, so they share tunings.
  std::optional<std::size_t> adapter_index;
  // How long one wait for the GPU (a submission, a map, a compile) may take before it is an
  // error; a watchdog for kernels that never finish.
  std::chrono::milliseconds wait_timeout{std::chrono::minutes(2)};
};

// WebGPU objects a program created itself through webgpu.h (a database that already has its
// device), handed to Device::adopt. They must come from the same webgpu.h library that
// `library_path` resolves to (as RuntimeOptions::library_path does), loaded once per process.
// The forge takes a reference to each and releases only that: the program keeps ownership, and
// the forge never destroys the device.
struct ExternalDevice {
  std::optional<std::filesystem::path> library_path;
  void* instance = nullptr;  // WGPUInstance: the forge processes its events while it waits
  void* adapter = nullptr;   // WGPUAdapter the device came from: the topology hash is its own
  void* device = nullptr;    // WGPUDevice
  // false when the device was created with Dawn's disable_robustness toggle (no bounds clamps),
  // which the forge cannot read back from a device; it selects the kernels tuned that way.
  bool bounds_checks = true;
  std::chrono::milliseconds wait_timeout{std::chrono::minutes(2)};
};

// The places a webgpu.h library is looked for, in order; the first that is set (explicit_path,
// variable) or that exists (installed, build_tree) wins.
struct WebGpuLibrarySearch {
  std::optional<std::filesystem::path> explicit_path;  // RuntimeOptions::library_path
  std::optional<std::filesystem::path> variable;       // $WGSL_FORGE_WEBGPU_LIB
  // Where cmake --install puts Dawn, next to the file holding the wgsl_forge code
  // (libwgsl_forge.so, or the program that links the layers): <dir>/wgsl_forge/ and, for a
  // program in <prefix>/bin, <dir>/../lib/wgsl_forge/.
  std::vector<std::filesystem::path> installed;
  // Where scripts/setup.sh put Dawn for this build, and node_modules above the executable (a
  // build copied with its repository); they matter only to a build that is not installed.
  std::vector<std::filesystem::path> build_tree;
};

// This process's search: explicit_path, $WGSL_FORGE_WEBGPU_LIB (unset when empty), the places
// beside the loaded wgsl_forge code, the build tree's.
WebGpuLibrarySearch webgpu_library_search(
    const std::optional<std::filesystem::path>& explicit_path);

// The library `search` finds; an explicit path or variable that names no file is an error, and
// so is finding nothing, with every place that was tried.
Result<std::filesystem::path> resolve_webgpu_library(const WebGpuLibrarySearch& search);
// resolve_webgpu_library(webgpu_library_search(explicit_path)).
Result<std::filesystem::path> resolve_webgpu_library(
    const std::optional<std::filesystem::path>& explicit_path);

// The limits that decide what a kernel schedule may use.
struct AdapterLimits {
  std::uint32_t max_compute_invocations_per_workgroup = 0;
  std::uint32_t max_compute_workgroup_size_x = 0;
  std::uint32_t max_compute_workgroup_size_y = 0;
  std::uint32_t max_compute_workgroup_size_z = 0;
  std::uint32_t max_compute_workgroups_per_dimension = 0;
  std::uint32_t max_compute_workgroup_storage_size = 0;
  std::uint32_t max_storage_buffers_per_shader_stage = 0;
  std::uint32_t max_uniform_buffers_per_shader_stage = 0;
  std::uint32_t max_bind_groups = 0;
  std::uint32_t min_storage_buffer_offset_alignment = 0;
  std::uint32_t min_uniform_buffer_offset_alignment = 0;
  std::uint64_t max_storage_buffer_binding_size = 0;
  std::uint64_t max_uniform_buffer_binding_size = 0;
  std::uint64_t max_buffer_size = 0;
};

struct AdapterInfo {
  AdapterIdentity identity;
  std::string vendor_name;
  std::string architecture;
  std::string description;
  std::uint32_t subgroup_min_size = 0;
  std::uint32_t subgroup_max_size = 0;
  AdapterLimits limits;               // the device's limits (requested as the adapter's own)
  std::vector<std::string> features;  // of the device: "timestamp-query", "subgroups", ...
  std::vector<std::string>
      toggles;  // Dawn toggles in force, e.g. "disabled:timestamp_quantization"
  std::filesystem::path library_path;
  std::string library_blake3;  // BLAKE3 of the webgpu.h library file: the Dawn build
  std::string topology_hash;   // see compute_topology_hash()
};

// BLAKE3 over the canonical JSON of everything that can change a tuning winner: the identity
// (name, vendor and device ids, type, backend, driver, driver info), vendor name, architecture,
// description, subgroup sizes, every limit in AdapterLimits, the device features, the toggles and
// the library's BLAKE3. Not included: paths, times, anything that varies between runs.
std::string compute_topology_hash(const AdapterInfo& info);

// Canonical JSON of an AdapterInfo (what `wgsl-forge adapters --json` prints).
std::string adapter_info_json(const AdapterInfo& info);

enum class BufferUsage { kStorage, kUniform };

// A storage or uniform buffer: one the device created (destroyed with this object), or a
// program's own WGPUBuffer wrapped by Device::wrap_buffer (only the reference taken is released).
class Buffer {
 public:
  Buffer(std::shared_ptr<DeviceState> device, void* handle, std::uint64_t size, bool owned = true)
      : device_(std::move(device)), handle_(handle), size_(size), owned_(owned) {}
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer();

  std::uint64_t size() const { return size_; }
  void* handle() const { return handle_; }

 private:
  std::shared_ptr<DeviceState> device_;
  void* handle_ = nullptr;
  std::uint64_t size_ = 0;
  bool owned_ = true;
};

// A command encoder that dispatches are recorded into: the device's own
// (Device::create_command_encoder, run by Device::submit_and_wait), or a program's
// WGPUCommandEncoder (Device::borrow_command_encoder), which the program finishes and submits.
class CommandEncoder {
 public:
  CommandEncoder() = default;
  CommandEncoder(CommandEncoder&& other) noexcept;
  CommandEncoder& operator=(CommandEncoder&& other) noexcept;
  ~CommandEncoder();

  void* handle() const { return handle_; }
  bool borrowed() const { return borrowed_; }

 private:
  friend class Device;
  std::shared_ptr<DeviceState> device_;
  void* handle_ = nullptr;
  bool borrowed_ = false;
};

class ComputePipeline {
 public:
  ComputePipeline() = default;
  ComputePipeline(ComputePipeline&& other) noexcept;
  ComputePipeline& operator=(ComputePipeline&& other) noexcept;
  ~ComputePipeline();

  const std::string& label() const { return label_; }
  const std::vector<KernelBinding>& bindings() const { return bindings_; }
  void* handle() const { return pipeline_; }

 private:
  friend class Device;
  // Not built yet: the device sets the bind group layout and the pipeline.
  ComputePipeline(std::shared_ptr<DeviceState> device, std::string_view label,
                  std::span<const KernelBinding> bindings);
  std::shared_ptr<DeviceState> device_;
  void* pipeline_ = nullptr;
  void* bind_group_layout_ = nullptr;
  std::string label_;
  std::vector<KernelBinding> bindings_;
};

// One pipeline of Device::create_compute_pipelines: what create_compute_pipeline takes, plus
// `error_context`, a line added to this request's error (what the pipeline is for); the views
// must stay valid during the call.
struct ComputePipelineRequest {
  std::string_view wgsl;
  std::string_view entry_point;
  std::span<const KernelBinding> bindings;
  std::string_view label;
  std::string_view error_context;
};

// Bytes of a buffer to read (Device::read_regions): offset and size are multiples of 4.
struct BufferRegion {
  const Buffer* buffer = nullptr;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

struct BufferBinding {
  std::uint32_t binding = 0;
  const Buffer* buffer = nullptr;
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> size;  // default: from offset to the end of the buffer
};

class BindGroup {
 public:
  BindGroup() = default;
  BindGroup(BindGroup&& other) noexcept;
  BindGroup& operator=(BindGroup&& other) noexcept;
  ~BindGroup();

  void* handle() const { return handle_; }

 private:
  friend class Device;
  std::shared_ptr<DeviceState> device_;
  void* handle_ = nullptr;
};

// Workgroups to dispatch in each dimension.
struct WorkgroupGrid {
  std::uint32_t x = 1;
  std::uint32_t y = 1;
  std::uint32_t z = 1;

  std::uint64_t count() const { return std::uint64_t{x} * y * z; }
};

// Lays `workgroups` out as x * y with x <= max_per_dimension, so grids of more than 65535
// workgroups fit; the kernel recovers its linear index as id.x + id.y * num_workgroups.x and
// skips indices past `workgroups`. An error when even max_per_dimension^2 is too small.
Result<WorkgroupGrid> plan_workgroup_grid(std::uint64_t workgroups,
                                          std::uint32_t max_per_dimension);

// One compute pass: a pipeline with its bind group over a grid.
struct DispatchStep {
  const ComputePipeline* pipeline = nullptr;
  const BindGroup* bind_group = nullptr;
  WorkgroupGrid grid;
};

struct TimingOptions {
  std::uint32_t warmup_runs = 2;
  // Then, on a GPU (not a CPU adapter), back-to-back work for up to this long before the
  // samples: GPUs lower their clocks when idle and raise them only under sustained load. Measured
  // on the H200: the SM clock sits at 345 MHz when idle and reaches 1980 MHz 0.2-0.4 s into
  // sustained work, and falls over 1-2 s after it; after 2 warm-up runs a copy of 1 GiB buffers
  // ran at 1.57 TB/s, after 1000 (about 0.5 s) at 4.25 TB/s. The warm-up lasts no longer than
  // the GPU idled since the device's last timing ended, so timings back to back warm up once;
  // the warm-up runs and the calibration count towards it.
  // 0 turns this off.
  std::chrono::nanoseconds warmup_duration{std::chrono::milliseconds(500)};
  std::uint32_t samples = 15;
  // With a value: fewer samples when `samples` of them would take longer than this on the GPU
  // (as the calibration predicts), but never fewer than kMinBudgetedSamples. A tune sets it: a
  // candidate whose one run lasts 100 ms (a 2^28-pair u64 sort on the H200) would otherwise spend
  // 1.5 s per timing, and its finals three times that, with no change to who wins.
  std::optional<std::chrono::nanoseconds> sampling_budget;
  static constexpr std::uint32_t kMinBudgetedSamples = 5;
  // A sample covers enough back-to-back executions of the sequence to last at least this long,
  // so that it is far above the timer's resolution and the per-submission overhead.
  std::chrono::nanoseconds min_sample_duration{std::chrono::microseconds(200)};
  std::uint32_t max_batch = 4096;
  // With a value: after kGiveUpSamples samples whose median is above it (ns per execution), the
  // timing stops there (TimedRun::gave_up): a tuning candidate clearly slower than the leader
  // cannot win, and more samples would not change that.
  std::optional<double> give_up_above_ns;
  static constexpr std::uint32_t kGiveUpSamples = 3;
};

struct TimedRun {
  TimingSummary summary;                  // per execution of the sequence, in ns
  std::vector<std::uint64_t> samples_ns;  // the samples the summary was made from
  std::uint32_t executions_per_sample = 1;
  std::uint64_t resolution_ns = 0;  // the finest step seen in the clock's readings
  // Wall time on the host: keeping the GPU busy before the samples (warm-up runs, calibration
  // and TimingOptions::warmup_duration), then taking the samples.
  std::chrono::nanoseconds warmup_wall{0};
  std::chrono::nanoseconds sampling_wall{0};
  bool gave_up = false;  // TimingOptions::give_up_above_ns stopped the samples early
};

// How many adapters the backend of `options` has (those RuntimeOptions::adapter_index numbers);
// an error when the library cannot list them (it is not Dawn).
Result<std::size_t> count_adapters(const RuntimeOptions& options);

class Device {
 public:
  static Result<std::unique_ptr<Device>> open(const RuntimeOptions& options);
  // A device the program created itself (see ExternalDevice). Its topology hash is the one a
  // device opened by the forge on the same adapter has (the adapter's identity, limits and
  // features, and the toggles the forge would set), so it finds the kernels tuned there; what
  // the device itself allows (its limits and features) decides which schedules can run on it.
  // Device loss is seen through failing operations: the program owns the loss callback.
  static Result<std::unique_ptr<Device>> adopt(const ExternalDevice& external);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const AdapterInfo& adapter() const;
  bool has_gpu_timestamps() const;
  bool has_feature(std::string_view feature) const;

  // Storage buffers can be copied to and from; uniform buffers can be written.
  Result<Buffer> create_buffer(std::uint64_t size, BufferUsage usage, std::string_view label);
  // A storage buffer holding `contents` (zero-padded to whole words), filled on every core: for
  // inputs of up to gigabytes (a tune's), which write_buffer copies on one thread into a staging
  // buffer first. Up to 64 MiB it is created mapped; larger contents go through two 64 MiB
  // staging buffers that the device makes at the first such upload and keeps.
  Result<Buffer> create_buffer_with_contents(std::span<const std::byte> contents,
                                             std::string_view label);
  // A program's own WGPUBuffer of this device, for binding to kernels: it needs Storage usage
  // (and CopySrc/CopyDst for read_buffer/write_buffer). An error names `label` and the usage.
  Result<Buffer> wrap_buffer(void* wgpu_buffer, std::string_view label);
  Status write_buffer(const Buffer& buffer, std::uint64_t offset, std::span<const std::byte> bytes);
  Result<std::vector<std::byte>> read_buffer(const Buffer& buffer, std::uint64_t offset,
                                             std::uint64_t size);
  // Reads every region in one submission and one mapping (one wait for the GPU, however many
  // regions), calling `visit(i, bytes)` for region i, in order, while its bytes are mapped: they
  // are valid during that call only, so a caller that only compares them copies nothing.
  Status read_regions(std::span<const BufferRegion> regions,
                      const std::function<void(std::size_t, std::span<const std::byte>)>& visit);

  // Compiles `wgsl` and builds a compute pipeline whose bind group 0 has `bindings`. A WGSL
  // error gives "label:line:column: message" for every error the compiler reports.
  Result<ComputePipeline> create_compute_pipeline(std::string_view wgsl,
                                                  std::string_view entry_point,
                                                  std::span<const KernelBinding> bindings,
                                                  std::string_view label);
  // Builds every pipeline at once: each is compiled on Dawn's worker threads while the next
  // request's WGSL is parsed, and all are awaited together. Requests with the same WGSL share one
  // shader module. The pipelines in request order, or the error create_compute_pipeline gives for
  // the first request that fails (with its error_context); then no pipeline is kept.
  Result<std::vector<ComputePipeline>> create_compute_pipelines(
      std::span<const ComputePipelineRequest> requests);
  Result<BindGroup> create_bind_group(const ComputePipeline& pipeline,
                                      std::span<const BufferBinding> buffers);

  // Encodes each step as a compute pass, submits them as one command buffer, waits for the GPU.
  Status run(std::span<const DispatchStep> steps);

  // Recording several kernels into one submission.
  Result<CommandEncoder> create_command_encoder();
  CommandEncoder borrow_command_encoder(void* wgpu_command_encoder);
  // Records each step as a compute pass; nothing runs until the encoder is submitted.
  Status encode(const CommandEncoder& encoder, std::span<const DispatchStep> steps);
  // Records a copy of `size` bytes (a multiple of 4, at offsets that are multiples of 4).
  Status encode_copy(const CommandEncoder& encoder, const Buffer& source,
                     std::uint64_t source_offset, const Buffer& target, std::uint64_t target_offset,
                     std::uint64_t size);
  // Finishes the device's own encoder, submits it and waits for the GPU; `what` names it in
  // errors. A borrowed encoder is the program's to submit (an error here).
  Status submit_and_wait(CommandEncoder encoder, std::string_view what);
  // Times the sequence: GPU timestamps around it when the device has them, else the host clock
  // around a completed submission.
  Result<TimedRun> time(std::span<const DispatchStep> steps, const TimingOptions& options);

  // How long one wait for the GPU may take from now on (see RuntimeOptions::wait_timeout).
  void set_wait_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds wait_timeout() const;
  // Waits up to `timeout` for all submitted work to finish, e.g. a kernel whose wait timed out:
  // WebGPU cannot preempt it, so the next work would queue behind it.
  Status wait_for_idle(std::chrono::milliseconds timeout);
  // True once a wait for the GPU timed out, until wait_for_idle sees the device idle again: work
  // that may never finish still occupies the driver, and destroying the device waits for it
  // (with a hung kernel on lavapipe, forever). A program that must end then gives up on the
  // device's teardown (the CLI does, see cli_support.hpp).
  bool has_unfinished_work() const;

  // Makes Dawn lose the device, as a driver crash would (for tests of the failure path); an error
  // for a webgpu.h library other than Dawn, which has no such call.
  Status force_loss_for_testing(std::string_view message);
  // Why the device was lost, once it was.
  std::optional<std::string> lost_reason() const;

 private:
  explicit Device(std::shared_ptr<DeviceState> state);
  // An error when `allocated` bytes exceed maxBufferSize.
  Status check_buffer_size(std::uint64_t allocated) const;
  std::shared_ptr<DeviceState> state_;
};

}  // namespace wgsl_forge::gpu
