// Buffers, pipelines, bind groups, dispatch and timing on an open Device.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "device_state.hpp"
#include "util/try.hpp"

namespace wgsl_forge::gpu {

using namespace abi;

namespace {

// Copies and buffer writes move whole 4-byte words; buffers are never empty (a zero-sized
// binding is invalid), so a buffer holds at least one word.
std::uint64_t round_up_to_word(std::uint64_t size) {
  return std::max<std::uint64_t>(4, (size + 3) / 4 * 4);
}

}  // namespace

Result<WorkgroupGrid> plan_workgroup_grid(std::uint64_t workgroups,
                                          std::uint32_t max_per_dimension) {
  if (max_per_dimension == 0) {
    return Error(ErrorKind::kInvalidInput, "maxComputeWorkgroupsPerDimension is 0.");
  }
  if (workgroups <= max_per_dimension) {
    return WorkgroupGrid{static_cast<std::uint32_t>(workgroups), 1, 1};
  }
  std::uint64_t rows = (workgroups + max_per_dimension - 1) / max_per_dimension;
  if (rows > max_per_dimension) {
    return Error(ErrorKind::kInvalidInput,
                 "Workgroup count (" + std::to_string(workgroups) +
                     ") exceeds maxComputeWorkgroupsPerDimension squared (" +
                     std::to_string(std::uint64_t{max_per_dimension} * max_per_dimension) + ").");
  }
  std::uint64_t columns = (workgroups + rows - 1) / rows;
  return WorkgroupGrid{static_cast<std::uint32_t>(columns), static_cast<std::uint32_t>(rows), 1};
}

// --- Resource handles ---------------------------------------------------------------------

Buffer::Buffer(Buffer&& other) noexcept
    : device_(std::move(other.device_)),
      handle_(std::exchange(other.handle_, nullptr)),
      size_(other.size_),
      owned_(other.owned_) {}
Buffer& Buffer::operator=(Buffer&& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(handle_, other.handle_);
  std::swap(size_, other.size_);
  std::swap(owned_, other.owned_);
  return *this;
}
Buffer::~Buffer() {
  if (handle_ != nullptr) {
    // Destroy frees the memory once submitted work using it is done (WebGPU defers it).
    if (owned_) device_->api->BufferDestroy(static_cast<WGPUBuffer>(handle_));
    device_->api->BufferRelease(static_cast<WGPUBuffer>(handle_));
  }
}

CommandEncoder::CommandEncoder(CommandEncoder&& other) noexcept
    : device_(std::move(other.device_)),
      handle_(std::exchange(other.handle_, nullptr)),
      borrowed_(other.borrowed_) {}
CommandEncoder& CommandEncoder::operator=(CommandEncoder&& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(handle_, other.handle_);
  std::swap(borrowed_, other.borrowed_);
  return *this;
}
CommandEncoder::~CommandEncoder() {
  if (handle_ != nullptr) {
    device_->api->CommandEncoderRelease(static_cast<WGPUCommandEncoder>(handle_));
  }
}

ComputePipeline::ComputePipeline(ComputePipeline&& other) noexcept
    : device_(std::move(other.device_)),
      pipeline_(std::exchange(other.pipeline_, nullptr)),
      bind_group_layout_(std::exchange(other.bind_group_layout_, nullptr)),
      label_(std::move(other.label_)),
      bindings_(std::move(other.bindings_)) {}
ComputePipeline& ComputePipeline::operator=(ComputePipeline&& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(pipeline_, other.pipeline_);
  std::swap(bind_group_layout_, other.bind_group_layout_);
  std::swap(label_, other.label_);
  std::swap(bindings_, other.bindings_);
  return *this;
}
ComputePipeline::~ComputePipeline() {
  if (pipeline_ != nullptr)
    device_->api->ComputePipelineRelease(static_cast<WGPUComputePipeline>(pipeline_));
  if (bind_group_layout_ != nullptr) {
    device_->api->BindGroupLayoutRelease(static_cast<WGPUBindGroupLayout>(bind_group_layout_));
  }
}

BindGroup::BindGroup(BindGroup&& other) noexcept
    : device_(std::move(other.device_)), handle_(std::exchange(other.handle_, nullptr)) {}
BindGroup& BindGroup::operator=(BindGroup&& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(handle_, other.handle_);
  return *this;
}
BindGroup::~BindGroup() {
  if (handle_ != nullptr) device_->api->BindGroupRelease(static_cast<WGPUBindGroup>(handle_));
}

// --- Buffers ------------------------------------------------------------------------------

Result<Buffer> Device::create_buffer(std::uint64_t size, BufferUsage usage,
                                     std::string_view label) {
  const std::uint64_t allocated = round_up_to_word(size);
  WF_TRY_CONTEXT(check_buffer_size(allocated), "creating buffer " + std::string(label));
  WGPUBufferDescriptor descriptor{};
  descriptor.label = to_view(label);
  descriptor.size = allocated;
  descriptor.usage = usage == BufferUsage::kUniform
                         ? kBufferUsageUniform | kBufferUsageCopyDst
                         : kBufferUsageStorage | kBufferUsageCopySrc | kBufferUsageCopyDst;
  WGPUBuffer handle = nullptr;
  Status created = state_->capture_errors("creating buffer " + std::string(label), [&] {
    handle = state_->api->DeviceCreateBuffer(state_->device, &descriptor);
  });
  Buffer buffer(state_, handle, allocated);  // releases the error buffer on failure
  if (!created) return std::move(created).error();
  return buffer;
}

namespace {

// Copies `bytes` bytes in chunks of 4 MiB on up to every core: a tune's input is gigabytes,
// and a staging buffer's share of it 64 MiB.
void copy_on_every_core(std::byte* to, const std::byte* from, std::size_t bytes) {
  constexpr std::size_t kChunk = std::size_t{4} << 20;
  const std::size_t chunks = (bytes + kChunk - 1) / kChunk;
  const std::size_t threads =
      std::min<std::size_t>(chunks, std::max(1u, std::thread::hardware_concurrency()));
  auto copy_from = [&](std::size_t first) {
    for (std::size_t chunk = first; chunk < chunks; chunk += threads) {
      const std::size_t begin = chunk * kChunk;
      std::memcpy(to + begin, from + begin, std::min(kChunk, bytes - begin));
    }
  };
  std::vector<std::jthread> workers;
  for (std::size_t first = 1; first < threads; ++first) workers.emplace_back(copy_from, first);
  copy_from(0);
}

}  // namespace

Result<Buffer> Device::create_buffer_with_contents(std::span<const std::byte> contents,
                                                   std::string_view label) {
  const std::uint64_t allocated = round_up_to_word(contents.size());
  WF_TRY_CONTEXT(check_buffer_size(allocated), "creating buffer " + std::string(label));
  WGPUBufferDescriptor descriptor{};
  descriptor.label = to_view(label);
  descriptor.size = allocated;
  descriptor.usage = kBufferUsageStorage | kBufferUsageCopySrc | kBufferUsageCopyDst;
  if (allocated > DeviceState::kUploadStagingBytes) {
    // Through the device's staging buffers: a buffer mapped at creation of a gigabyte has Dawn
    // allocate a gigabyte of host-visible memory for it, and free it, every time.
    WGPUBuffer handle = nullptr;
    Status created = state_->capture_errors("creating buffer " + std::string(label), [&] {
      handle = state_->api->DeviceCreateBuffer(state_->device, &descriptor);
    });
    Buffer buffer(state_, handle, allocated);  // releases the error buffer on failure
    if (!created) return std::move(created).error();
    WF_TRY_CONTEXT(state_->upload_staged(handle, contents), "writing buffer " + std::string(label));
    return buffer;
  }
  descriptor.mappedAtCreation = 1;
  WGPUBuffer handle = nullptr;
  Status created = state_->capture_errors("creating buffer " + std::string(label), [&] {
    handle = state_->api->DeviceCreateBuffer(state_->device, &descriptor);
  });
  Buffer buffer(state_, handle, allocated);  // releases the error buffer on failure
  if (!created) return std::move(created).error();
  auto* mapped = static_cast<std::byte*>(state_->api->BufferGetMappedRange(handle, 0, allocated));
  if (mapped == nullptr) {
    return Error(ErrorKind::kRuntime, "Buffer " + std::string(label) + " of " +
                                          std::to_string(allocated) +
                                          " bytes was created without a mapped range.");
  }
  copy_on_every_core(mapped, contents.data(), contents.size());
  std::memset(mapped + contents.size(), 0, allocated - contents.size());
  WF_TRY(state_->capture_errors("unmapping buffer " + std::string(label),
                                [&] { state_->api->BufferUnmap(handle); }));
  return buffer;
}

Status Device::check_buffer_size(std::uint64_t allocated) const {
  const std::uint64_t limit = state_->info.limits.max_buffer_size;
  if (allocated > limit) {
    return Error(ErrorKind::kInvalidInput, "Buffer size (" + std::to_string(allocated) +
                                               ") exceeds maxBufferSize (" + std::to_string(limit) +
                                               ").");
  }
  return Ok{};
}

Result<Buffer> Device::wrap_buffer(void* wgpu_buffer, std::string_view label) {
  if (wgpu_buffer == nullptr) {
    return Error(ErrorKind::kInvalidInput, "Buffer " + std::string(label) + " is null.");
  }
  auto* handle = static_cast<WGPUBuffer>(wgpu_buffer);
  if ((state_->api->BufferGetUsage(handle) & kBufferUsageStorage) == 0) {
    return Error(ErrorKind::kInvalidInput,
                 "Buffer " + std::string(label) +
                     " lacks Storage usage (WGPUBufferUsage_Storage), which kernels bind.");
  }
  state_->api->BufferAddRef(handle);
  return Buffer(state_, handle, state_->api->BufferGetSize(handle), /*owned=*/false);
}

Status Device::write_buffer(const Buffer& buffer, std::uint64_t offset,
                            std::span<const std::byte> bytes) {
  if (offset % 4 != 0 || offset + bytes.size() > buffer.size()) {
    return Error(ErrorKind::kInvalidInput,
                 "Write of " + std::to_string(bytes.size()) + " bytes at offset " +
                     std::to_string(offset) + " does not fit a buffer of " +
                     std::to_string(buffer.size()) + " bytes (offsets are multiples of 4).");
  }
  if (bytes.empty()) return state_->check_alive();
  std::vector<std::byte> padded;
  std::span<const std::byte> words = bytes;
  if (bytes.size() % 4 != 0) {
    padded.assign(bytes.begin(), bytes.end());
    padded.resize(round_up_to_word(bytes.size()));
    words = padded;
  }
  return state_->capture_errors("writing a buffer", [&] {
    state_->api->QueueWriteBuffer(state_->queue, static_cast<WGPUBuffer>(buffer.handle()), offset,
                                  words.data(), words.size());
  });
}

namespace {

Status check_read(const Buffer& buffer, std::uint64_t offset, std::uint64_t size) {
  if (offset % 4 != 0 || offset + size > buffer.size()) {
    return Error(ErrorKind::kInvalidInput,
                 "Read of " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                     " does not fit a buffer of " + std::to_string(buffer.size()) +
                     " bytes (offsets are multiples of 4).");
  }
  return Ok{};
}

}  // namespace

Result<std::vector<std::byte>> Device::read_buffer(const Buffer& buffer, std::uint64_t offset,
                                                   std::uint64_t size) {
  WF_TRY(check_read(buffer, offset, size));
  return state_->read_back(buffer, offset, size);
}

Status Device::read_regions(
    std::span<const BufferRegion> regions,
    const std::function<void(std::size_t, std::span<const std::byte>)>& visit) {
  for (const BufferRegion& region : regions) {
    if (region.buffer == nullptr) {
      return Error(ErrorKind::kInvalidInput, "A region to read has no buffer.");
    }
    WF_TRY(check_read(*region.buffer, region.offset, region.size));
  }
  return state_->read_back_regions(regions, visit);
}

Result<std::vector<std::byte>> DeviceState::read_back(const Buffer& buffer, std::uint64_t offset,
                                                      std::uint64_t size) {
  std::vector<std::byte> bytes;
  const BufferRegion region{&buffer, offset, size};
  // Constructed from the mapped range: no zero-filling before the copy.
  WF_TRY(
      read_back_regions(std::span(&region, 1), [&](std::size_t, std::span<const std::byte> read) {
        bytes = std::vector<std::byte>(read.begin(), read.end());
      }));
  return bytes;
}

Status DeviceState::read_back_regions(
    std::span<const BufferRegion> regions,
    const std::function<void(std::size_t, std::span<const std::byte>)>& visit) {
  // Where each region lands in the staging buffer: whole words, one after the other.
  std::vector<std::uint64_t> placed;
  std::uint64_t copied = 0;
  for (const BufferRegion& region : regions) {
    placed.push_back(copied);
    copied += (region.size + 3) / 4 * 4;
  }
  if (copied == 0) {
    WF_TRY(check_alive());
    for (std::size_t i = 0; i < regions.size(); ++i) visit(i, {});
    return Ok{};
  }
  WGPUBufferDescriptor descriptor{};
  descriptor.label = to_view("readback");
  descriptor.size = copied;
  descriptor.usage = kBufferUsageMapRead | kBufferUsageCopyDst;
  WGPUBuffer staging = nullptr;
  Status created = capture_errors("creating a readback buffer",
                                  [&] { staging = api->DeviceCreateBuffer(device, &descriptor); });
  Buffer staging_owner(shared_from_this(), staging, copied);
  if (!created) return std::move(created).error();
  // The mapping waits for the copies: one wait for the GPU, not two.
  Status copied_ok = submit_encoded("copying buffers for reading", [&](WGPUCommandEncoder encoder) {
    for (std::size_t i = 0; i < regions.size(); ++i) {
      if (regions[i].size == 0) continue;
      api->CommandEncoderCopyBufferToBuffer(
          encoder, static_cast<WGPUBuffer>(regions[i].buffer->handle()), regions[i].offset, staging,
          placed[i], (regions[i].size + 3) / 4 * 4);
    }
  });
  if (!copied_ok) return std::move(copied_ok).error();
  WF_TRY(map_buffer(staging, kMapModeRead, copied, "a buffer", "for reading"));
  const auto* data =
      static_cast<const std::byte*>(api->BufferGetConstMappedRange(staging, 0, copied));
  if (data == nullptr) {
    return Error(ErrorKind::kRuntime, "The mapped buffer has no readable range.");
  }
  for (std::size_t i = 0; i < regions.size(); ++i) {
    visit(i, std::span(data + placed[i], regions[i].size));
  }
  api->BufferUnmap(staging);
  return Ok{};
}

Status DeviceState::map_buffer(WGPUBuffer buffer, std::uint32_t mode, std::uint64_t size,
                               std::string_view which, std::string_view purpose) {
  struct MapReply {
    std::uint32_t status = 0;
    std::string message;
  };
  Result<MapReply> mapped = await<MapReply>(
      std::string(which) + " to map " + std::string(purpose), [&](PendingReply<MapReply>* pending) {
        api->BufferMapAsync(
            buffer, mode, 0, size,
            WGPUCallbackInfo<WGPUBufferMapCallback>{
                nullptr, kCallbackModeAllowProcessEvents,
                [](std::uint32_t status, WGPUStringView message, void* userdata1, void*) {
                  if (auto* r = PendingReply<MapReply>::receive(userdata1)) {
                    r->payload = MapReply{status, to_string(message)};
                  }
                },
                pending, nullptr});
      });
  if (!mapped) return std::move(mapped).error();
  if (mapped->status != kMapAsyncStatusSuccess) {
    WF_TRY(check_alive());
    return Error(ErrorKind::kRuntime, "Mapping " + std::string(which) + " " + std::string(purpose) +
                                          " failed (" + mapped->message + ").");
  }
  return Ok{};
}

Status DeviceState::upload_staged(WGPUBuffer target, std::span<const std::byte> contents) {
  const std::uint64_t total = round_up_to_word(contents.size());
  for (std::uint64_t offset = 0, chunk = 0; offset < total;
       offset += kUploadStagingBytes, ++chunk) {
    UploadStaging& staging = upload_staging[chunk % upload_staging.size()];
    WF_TRY(ready_for_writing(staging));
    const std::uint64_t size = std::min(kUploadStagingBytes, total - offset);
    const std::uint64_t given =
        offset < contents.size() ? std::min(size, contents.size() - offset) : 0;
    auto* mapped = static_cast<std::byte*>(api->BufferGetMappedRange(staging.buffer, 0, size));
    if (mapped == nullptr) {
      return Error(ErrorKind::kRuntime, "The upload staging buffer has no writable range.");
    }
    copy_on_every_core(mapped, contents.data() + offset, given);
    std::memset(mapped + given, 0, size - given);
    WF_TRY(capture_errors("unmapping the upload staging buffer",
                          [&] { api->BufferUnmap(staging.buffer); }));
    staging.mapped = false;
    // The next mapping of this staging buffer waits for this copy; the other one is filled
    // meanwhile.
    WF_TRY(submit_encoded("copying an upload into its buffer", [&](WGPUCommandEncoder encoder) {
      api->CommandEncoderCopyBufferToBuffer(encoder, staging.buffer, 0, target, offset, size);
    }));
  }
  return Ok{};
}

Status DeviceState::ready_for_writing(UploadStaging& staging) {
  if (staging.buffer == nullptr) {
    WGPUBufferDescriptor descriptor{};
    descriptor.label = to_view("upload staging");
    descriptor.size = kUploadStagingBytes;
    descriptor.usage = kBufferUsageMapWrite | kBufferUsageCopySrc;
    descriptor.mappedAtCreation = 1;
    WGPUBuffer created_buffer = nullptr;
    Status created = capture_errors("creating the upload staging buffer", [&] {
      created_buffer = api->DeviceCreateBuffer(device, &descriptor);
    });
    // Kept only once it is valid; an error buffer is released here.
    if (!created) {
      if (created_buffer != nullptr) api->BufferRelease(created_buffer);
      return std::move(created).error();
    }
    staging.buffer = created_buffer;
    staging.mapped = true;
  }
  if (staging.mapped) return Ok{};
  WF_TRY(map_buffer(staging.buffer, kMapModeWrite, kUploadStagingBytes, "the upload staging buffer",
                    "for writing"));
  staging.mapped = true;
  return Ok{};
}

Status DeviceState::run_encoded(std::string_view what,
                                const std::function<void(WGPUCommandEncoder)>& encode) {
  WF_TRY(submit_encoded(what, encode));
  return wait_for_submitted_work(what);
}

Status DeviceState::submit_encoded(std::string_view what,
                                   const std::function<void(WGPUCommandEncoder)>& encode) {
  WGPUCommandBuffer commands = nullptr;
  Status encoded = capture_errors("encoding " + std::string(what), [&] {
    WGPUCommandEncoder encoder = api->DeviceCreateCommandEncoder(device, nullptr);
    encode(encoder);
    commands = api->CommandEncoderFinish(encoder, nullptr);
    api->CommandEncoderRelease(encoder);
  });
  if (!encoded) {
    if (commands != nullptr) api->CommandBufferRelease(commands);
    return encoded;
  }
  Status submitted = capture_errors(what, [&] { api->QueueSubmit(queue, 1, &commands); });
  api->CommandBufferRelease(commands);
  return submitted;
}

Result<BindGroup> Device::create_bind_group(const ComputePipeline& pipeline,
                                            std::span<const BufferBinding> buffers) {
  const std::string context = "binding buffers to " + pipeline.label();
  std::vector<WGPUBindGroupEntry> entries;
  for (const KernelBinding& binding : pipeline.bindings()) {
    auto it = std::find_if(buffers.begin(), buffers.end(), [&](const BufferBinding& buffer) {
      return buffer.binding == binding.binding;
    });
    if (it == buffers.end() || it->buffer == nullptr) {
      return Error(ErrorKind::kInvalidInput, "No buffer is given for binding " +
                                                 std::to_string(binding.binding) + " (" +
                                                 binding.name + ").")
          .with_context(context);
    }
    WGPUBindGroupEntry entry{};
    entry.binding = binding.binding;
    entry.buffer = static_cast<WGPUBuffer>(it->buffer->handle());
    entry.offset = it->offset;
    entry.size = it->size.value_or(kWholeSize);
    entries.push_back(entry);
  }
  BindGroup group;
  group.device_ = state_;
  Status created = state_->capture_errors(context, [&] {
    WGPUBindGroupDescriptor descriptor{};
    descriptor.label = to_view(pipeline.label());
    descriptor.layout = static_cast<WGPUBindGroupLayout>(pipeline.bind_group_layout_);
    descriptor.entryCount = entries.size();
    descriptor.entries = entries.data();
    group.handle_ = state_->api->DeviceCreateBindGroup(state_->device, &descriptor);
  });
  if (!created) return std::move(created).error();
  return group;
}

// --- Dispatch and timing -------------------------------------------------------------------

namespace {

// Where the timestamps of one timed span go: pass `first` of the span writes `begin`, pass
// `last` writes `end` (indices into the query set).
struct TimestampSpan {
  WGPUQuerySet query_set = nullptr;
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
};

// Encodes `repetitions` back-to-back executions of `steps`, one compute pass per step.
// A step of no workgroups (a pass of a plan whose size is 0) is not dispatched: it would do
// nothing, and leaving it out keeps the driver off a degenerate path (its pass stays, so that
// the timestamps still have a pass to be written in).
void encode_steps(const WebGpuFunctions& api, WGPUCommandEncoder encoder,
                  std::span<const DispatchStep> steps, std::uint32_t repetitions,
                  const std::optional<TimestampSpan>& span) {
  const std::size_t total = steps.size() * repetitions;
  for (std::size_t index = 0; index < total; ++index) {
    const DispatchStep& step = steps[index % steps.size()];
    WGPUPassTimestampWrites writes{nullptr, nullptr, kQuerySetIndexUndefined,
                                   kQuerySetIndexUndefined};
    WGPUComputePassDescriptor descriptor{};
    if (span && (index == 0 || index + 1 == total)) {
      writes.querySet = span->query_set;
      if (index == 0) writes.beginningOfPassWriteIndex = span->begin;
      if (index + 1 == total) writes.endOfPassWriteIndex = span->end;
      descriptor.timestampWrites = &writes;
    }
    WGPUComputePassEncoder pass = api.CommandEncoderBeginComputePass(encoder, &descriptor);
    api.ComputePassEncoderSetPipeline(pass,
                                      static_cast<WGPUComputePipeline>(step.pipeline->handle()));
    api.ComputePassEncoderSetBindGroup(
        pass, 0, static_cast<WGPUBindGroup>(step.bind_group->handle()), 0, nullptr);
    if (step.grid.count() != 0) {
      api.ComputePassEncoderDispatchWorkgroups(pass, step.grid.x, step.grid.y, step.grid.z);
    }
    api.ComputePassEncoderEnd(pass);
    api.ComputePassEncoderRelease(pass);
  }
}

// Encodes the steps as dispatches of one compute pass: WebGPU makes each dispatch's writes
// visible to the next, and one pass costs the host a fraction of a pass per step.
// Steps of no workgroups are left out, as in encode_steps.
void encode_one_pass(const WebGpuFunctions& api, WGPUCommandEncoder encoder,
                     std::span<const DispatchStep> steps) {
  WGPUComputePassDescriptor descriptor{};
  WGPUComputePassEncoder pass = api.CommandEncoderBeginComputePass(encoder, &descriptor);
  const ComputePipeline* current = nullptr;
  for (const DispatchStep& step : steps) {
    if (step.grid.count() == 0) continue;
    if (step.pipeline != current) {
      api.ComputePassEncoderSetPipeline(pass,
                                        static_cast<WGPUComputePipeline>(step.pipeline->handle()));
      current = step.pipeline;
    }
    api.ComputePassEncoderSetBindGroup(
        pass, 0, static_cast<WGPUBindGroup>(step.bind_group->handle()), 0, nullptr);
    api.ComputePassEncoderDispatchWorkgroups(pass, step.grid.x, step.grid.y, step.grid.z);
  }
  api.ComputePassEncoderEnd(pass);
  api.ComputePassEncoderRelease(pass);
}

Status check_steps(std::span<const DispatchStep> steps) {
  if (steps.empty()) return Error(ErrorKind::kInvalidInput, "No dispatch steps to run.");
  for (const DispatchStep& step : steps) {
    if (step.pipeline == nullptr || step.bind_group == nullptr) {
      return Error(ErrorKind::kInvalidInput, "A dispatch step has no pipeline or bind group.");
    }
  }
  return Ok{};
}

std::uint64_t gcd_all(std::span<const std::uint64_t> values) {
  std::uint64_t result = 0;
  for (std::uint64_t value : values) result = std::gcd(result, value);
  return result;
}

}  // namespace

Status Device::run(std::span<const DispatchStep> steps) {
  WF_TRY(check_steps(steps));
  return state_->run_encoded("a dispatch of " + steps.front().pipeline->label(),
                             [&](WGPUCommandEncoder encoder) {
                               encode_steps(*state_->api, encoder, steps, 1, std::nullopt);
                             });
}

Result<CommandEncoder> Device::create_command_encoder() {
  CommandEncoder encoder;
  encoder.device_ = state_;
  Status created = state_->capture_errors("creating a command encoder", [&] {
    encoder.handle_ = state_->api->DeviceCreateCommandEncoder(state_->device, nullptr);
  });
  if (!created) return std::move(created).error();
  return encoder;
}

CommandEncoder Device::borrow_command_encoder(void* wgpu_command_encoder) {
  CommandEncoder encoder;
  encoder.device_ = state_;
  encoder.borrowed_ = true;
  if (wgpu_command_encoder != nullptr) {
    encoder.handle_ = wgpu_command_encoder;
    state_->api->CommandEncoderAddRef(static_cast<WGPUCommandEncoder>(wgpu_command_encoder));
  }
  return encoder;
}

// Recording touches no GPU and waits for nothing: what is wrong in it (a binding, a limit) is
// reported by WebGPU when the encoder is finished, which submit_and_wait captures.
Status Device::encode(const CommandEncoder& encoder, std::span<const DispatchStep> steps) {
  if (encoder.handle() == nullptr) {
    return Error(ErrorKind::kInvalidInput, "The command encoder is null.");
  }
  WF_TRY(check_steps(steps));
  WF_TRY(state_->check_alive());
  encode_one_pass(*state_->api, static_cast<WGPUCommandEncoder>(encoder.handle()), steps);
  return Ok{};
}

Status Device::encode_copy(const CommandEncoder& encoder, const Buffer& source,
                           std::uint64_t source_offset, const Buffer& target,
                           std::uint64_t target_offset, std::uint64_t size) {
  if (encoder.handle() == nullptr) {
    return Error(ErrorKind::kInvalidInput, "The command encoder is null.");
  }
  if ((source_offset | target_offset | size) % 4 != 0 || source_offset + size > source.size() ||
      target_offset + size > target.size()) {
    return Error(ErrorKind::kInvalidInput,
                 "A copy of " + std::to_string(size) + " bytes from offset " +
                     std::to_string(source_offset) + " of " + std::to_string(source.size()) +
                     " bytes to offset " + std::to_string(target_offset) + " of " +
                     std::to_string(target.size()) +
                     " bytes does not fit (sizes and offsets are multiples of 4).");
  }
  if (size == 0) return Ok{};
  state_->api->CommandEncoderCopyBufferToBuffer(
      static_cast<WGPUCommandEncoder>(encoder.handle()), static_cast<WGPUBuffer>(source.handle()),
      source_offset, static_cast<WGPUBuffer>(target.handle()), target_offset, size);
  return Ok{};
}

Status Device::submit_and_wait(CommandEncoder encoder, std::string_view what) {
  if (encoder.borrowed()) {
    return Error(ErrorKind::kInvalidInput,
                 "A borrowed command encoder is submitted by its owner, not by the forge.");
  }
  if (encoder.handle() == nullptr) {
    return Error(ErrorKind::kInvalidInput, "The command encoder is null.");
  }
  WGPUCommandBuffer commands = nullptr;
  Status finished = state_->capture_errors("encoding " + std::string(what), [&] {
    commands = state_->api->CommandEncoderFinish(static_cast<WGPUCommandEncoder>(encoder.handle()),
                                                 nullptr);
  });
  if (!finished) {
    if (commands != nullptr) state_->api->CommandBufferRelease(commands);
    return finished;
  }
  return state_->submit_and_wait(commands, what);
}

namespace {

// Reads the clock's finest step: the smallest non-zero difference between successive readings.
std::uint64_t host_clock_resolution_ns() {
  using Clock = std::chrono::steady_clock;
  std::uint64_t finest = UINT64_MAX;
  for (int i = 0; i < 1000; ++i) {
    Clock::time_point first = Clock::now();
    Clock::time_point next = Clock::now();
    while (next == first) next = Clock::now();
    finest = std::min<std::uint64_t>(
        finest, static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(next - first).count()));
  }
  return finest;
}

}  // namespace

Result<std::vector<std::uint64_t>> DeviceState::timestamp_spans(std::span<const DispatchStep> steps,
                                                                std::uint32_t batch,
                                                                std::uint32_t spans) {
  const std::string what = "timing " + steps.front().pipeline->label();
  WGPUQuerySetDescriptor query_descriptor{};
  query_descriptor.label = to_view("timestamps");
  query_descriptor.type = kQueryTypeTimestamp;
  query_descriptor.count = 2 * spans;
  WGPUQuerySet query_set = nullptr;
  WGPUBuffer resolved = nullptr;
  const std::uint64_t bytes = std::uint64_t{2} * spans * sizeof(std::uint64_t);
  Status created = capture_errors(what, [&] {
    query_set = api->DeviceCreateQuerySet(device, &query_descriptor);
    WGPUBufferDescriptor descriptor{};
    descriptor.label = to_view("resolved timestamps");
    descriptor.size = bytes;
    descriptor.usage = kBufferUsageQueryResolve | kBufferUsageCopySrc;
    resolved = api->DeviceCreateBuffer(device, &descriptor);
  });
  struct QuerySetOwner {
    const WebGpuFunctions& api;
    WGPUQuerySet query_set;
    ~QuerySetOwner() {
      if (query_set != nullptr) {
        api.QuerySetDestroy(query_set);
        api.QuerySetRelease(query_set);
      }
    }
  } query_set_owner{*api, query_set};
  Buffer resolved_owner(shared_from_this(), resolved, bytes);
  if (!created) return std::move(created).error();
  Status ran = run_encoded(what, [&](WGPUCommandEncoder encoder) {
    for (std::uint32_t span = 0; span < spans; ++span) {
      encode_steps(*api, encoder, steps, batch, TimestampSpan{query_set, 2 * span, 2 * span + 1});
    }
    api->CommandEncoderResolveQuerySet(encoder, query_set, 0, 2 * spans, resolved, 0);
  });
  if (!ran) return std::move(ran).error();
  WF_TRY_ASSIGN(std::vector<std::byte> raw, read_back(resolved_owner, 0, bytes));
  std::vector<std::uint64_t> stamps(2 * spans);
  std::memcpy(stamps.data(), raw.data(), bytes);
  std::vector<std::uint64_t> durations;
  for (std::uint32_t span = 0; span < spans; ++span) {
    std::uint64_t begin = stamps[2 * span];
    std::uint64_t end = stamps[2 * span + 1];
    if (end < begin) {
      return Error(ErrorKind::kRuntime, "GPU timestamps went backwards (" + std::to_string(begin) +
                                            " then " + std::to_string(end) + ").")
          .with_context(what);
    }
    durations.push_back(end - begin);
  }
  return durations;
}

Result<std::vector<std::uint64_t>> DeviceState::host_clock_spans(
    std::span<const DispatchStep> steps, std::uint32_t batch, std::uint32_t spans) {
  const std::string what = "timing " + steps.front().pipeline->label();
  std::vector<std::uint64_t> durations;
  for (std::uint32_t span = 0; span < spans; ++span) {
    WGPUCommandBuffer commands = nullptr;
    Status encoded = capture_errors(what, [&] {
      WGPUCommandEncoder encoder = api->DeviceCreateCommandEncoder(device, nullptr);
      encode_steps(*api, encoder, steps, batch, std::nullopt);
      commands = api->CommandEncoderFinish(encoder, nullptr);
      api->CommandEncoderRelease(encoder);
    });
    if (!encoded) {
      api->CommandBufferRelease(commands);
      return std::move(encoded).error();
    }
    auto start = std::chrono::steady_clock::now();
    WF_TRY(submit_and_wait(commands, what));
    auto elapsed = std::chrono::steady_clock::now() - start;
    durations.push_back(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
  }
  return durations;
}

namespace {

// The median of a few spans, for the give-up test.
double median_of(std::vector<std::uint64_t> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1
             ? static_cast<double>(values[middle])
             : (static_cast<double>(values[middle - 1]) + static_cast<double>(values[middle])) / 2;
}

}  // namespace

Result<TimedRun> Device::time(std::span<const DispatchStep> steps, const TimingOptions& options) {
  WF_TRY(check_steps(steps));
  if (options.samples == 0) {
    return Error(ErrorKind::kInvalidInput, "Timing needs at least one sample (got 0).");
  }
  const bool gpu = state_->gpu_timestamps;
  auto measure = [&](std::uint32_t batch, std::uint32_t spans) {
    return gpu ? state_->timestamp_spans(steps, batch, spans)
               : state_->host_clock_spans(steps, batch, spans);
  };
  const auto target = static_cast<std::uint64_t>(options.min_sample_duration.count());
  std::vector<std::uint64_t> calibration;
  // How long one execution takes: one run tells when it is far above a sample's length (a batch
  // of one, then), otherwise the fastest of three, so that one slow run does not shrink batches.
  // `first`: a run measured already (the last warm-up run), which counts as the first.
  auto calibrate = [&](std::optional<std::uint64_t> first) -> Result<std::uint64_t> {
    if (first) {
      calibration = {*first};
    } else {
      WF_TRY_ASSIGN(calibration, measure(1, 1));
    }
    if (calibration.front() < 2 * target) {
      WF_TRY_ASSIGN(std::vector<std::uint64_t> more, measure(1, 2));
      calibration.insert(calibration.end(), more.begin(), more.end());
    }
    return std::max<std::uint64_t>(1, *std::min_element(calibration.begin(), calibration.end()));
  };
  const auto started = std::chrono::steady_clock::now();
  // The last warm-up run, when it is not the first run, is measured and is the calibration's
  // first run: a long kernel (100 ms a run) pays for one run less.
  std::optional<std::uint64_t> last_warmup;
  for (std::uint32_t i = 0; i < options.warmup_runs; ++i) {
    if (i == 0 || i + 1 < options.warmup_runs) {
      WF_TRY(run(steps));
    } else {
      WF_TRY_ASSIGN(std::vector<std::uint64_t> span, measure(1, 1));
      last_warmup = span.front();
    }
  }
  WF_TRY_ASSIGN(std::uint64_t single, calibrate(last_warmup));
  // A GPU's clocks fall while it idles and rise again under sustained work; they fall over a
  // second or two, so a GPU busy until a moment ago needs only as much warm-up as it idled (and
  // the tuner's finalists, timed back to back, need none). The warm-up runs and the calibration
  // were sustained work too, so they count.
  const auto idle = started - state_->last_sustained_work;
  const auto warm_for = std::min<std::chrono::nanoseconds>(
      options.warmup_duration, std::chrono::duration_cast<std::chrono::nanoseconds>(idle));
  const auto warm_until = started + warm_for;
  if (state_->info.identity.device_type != "Cpu" && std::chrono::steady_clock::now() < warm_until) {
    // Submissions of about 20 ms each keep the GPU busy until its clocks are up; then calibrate
    // again, at the clocks the samples will run at.
    const auto per_submission = static_cast<std::uint32_t>(
        std::clamp<std::uint64_t>(20'000'000 / single, 1, std::max(1u, options.max_batch)));
    while (std::chrono::steady_clock::now() < warm_until) {
      WF_TRY(measure(per_submission, 1));
    }
    WF_TRY_ASSIGN(single, calibrate(std::nullopt));
  }
  const auto batch = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
      (target + single - 1) / single, 1, std::max(1u, options.max_batch)));
  // As many samples as asked, or as fit the sampling budget at the calibrated span.
  std::uint32_t samples = options.samples;
  if (options.sampling_budget) {
    const std::uint64_t span = single * batch;
    const auto fitting = static_cast<std::uint64_t>(options.sampling_budget->count()) / span;
    samples = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
        fitting, std::min(options.samples, TimingOptions::kMinBudgetedSamples), options.samples));
  }

  const auto sampling_started = std::chrono::steady_clock::now();
  std::vector<std::uint64_t> spans;
  bool gave_up = false;
  if (options.give_up_above_ns && samples > TimingOptions::kGiveUpSamples) {
    WF_TRY_ASSIGN(spans, measure(batch, TimingOptions::kGiveUpSamples));
    gave_up = median_of(spans) / batch > *options.give_up_above_ns;
  }
  if (!gave_up) {
    WF_TRY_ASSIGN(std::vector<std::uint64_t> rest,
                  measure(batch, samples - static_cast<std::uint32_t>(spans.size())));
    spans.insert(spans.end(), rest.begin(), rest.end());
  }
  const auto sampled = std::chrono::steady_clock::now();
  state_->last_sustained_work = sampled;
  std::vector<std::uint64_t> per_execution;
  for (std::uint64_t span : spans) per_execution.push_back((span + batch / 2) / batch);

  TimedRun timed;
  timed.warmup_wall = sampling_started - started;
  timed.sampling_wall = sampled - sampling_started;
  timed.executions_per_sample = batch;
  timed.gave_up = gave_up;
  std::vector<std::uint64_t> all_spans = calibration;
  all_spans.insert(all_spans.end(), spans.begin(), spans.end());
  timed.resolution_ns = gpu ? gcd_all(all_spans) : host_clock_resolution_ns();
  WF_TRY_ASSIGN(TimingSummary summary,
                TimingSummary::from_samples(
                    gpu ? TimingSource::kGpuTimestamp : TimingSource::kHostClock, per_execution));
  timed.summary = summary;
  timed.samples_ns = std::move(per_execution);
  return timed;
}

}  // namespace wgsl_forge::gpu
