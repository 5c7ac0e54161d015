#pragma once
// The state shared by a Device and every object it created: the Dawn handles, the callbacks'
// records and the helpers that wait for the GPU. Internal to the gpu layer.

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "library.hpp"
#include "webgpu_abi.hpp"
#include "wgsl_forge/error.hpp"
#include "wgsl_forge/gpu.hpp"

namespace wgsl_forge::gpu {

std::string to_string(abi::WGPUStringView view);
abi::WGPUStringView to_view(std::string_view text);

// Reply of one asynchronous call. Callbacks run inside InstanceProcessEvents on the waiting
// thread; when a wait times out the record is abandoned and the late callback frees it.
template <typename Payload>
struct PendingReply {
  bool done = false;
  bool abandoned = false;
  Payload payload{};

  // Called by the callback with userdata1; returns the record to fill, or null when abandoned
  // (the record is then deleted).
  static PendingReply* receive(void* userdata) {
    auto* reply = static_cast<PendingReply*>(userdata);
    if (reply->abandoned) {
      delete reply;
      return nullptr;
    }
    reply->done = true;
    return reply;
  }
};

struct DeviceState : std::enable_shared_from_this<DeviceState> {
  std::shared_ptr<const WebGpuLibrary> library;
  const abi::WebGpuFunctions* api = nullptr;
  abi::WGPUInstance instance = nullptr;
  abi::WGPUAdapter adapter = nullptr;
  abi::WGPUDevice device = nullptr;
  abi::WGPUQueue queue = nullptr;
  std::chrono::milliseconds wait_timeout{0};
  // Set when a wait times out, cleared when the device is seen idle again (Device::wait_for_idle).
  std::atomic<bool> unfinished_work{false};
  AdapterInfo info;
  bool gpu_timestamps = false;
  // The program's own device (Device::adopt): released, never destroyed.
  bool adopted = false;
  // When Device::time last finished keeping the GPU busy (its samples): how long the GPU has
  // idled since says how much warm-up the next timing needs.
  std::chrono::steady_clock::time_point last_sustained_work{};

  // Written by Dawn's spontaneous device-lost callback, possibly from another thread.
  mutable std::mutex mutex;
  std::optional<std::string> lost_reason;
  std::vector<std::string> uncaptured_errors;

  ~DeviceState();

  // An error when the device is lost; otherwise Ok.
  Status check_alive() const;

  // Processes events until `done()` or the timeout; `what` names the wait in the error.
  Status wait_until(const std::function<bool()>& done, std::string_view what);

  // Waits for an asynchronous call started by `start(userdata)`; see PendingReply.
  template <typename Payload>
  Result<Payload> await(std::string_view what,
                        const std::function<void(PendingReply<Payload>*)>& start) {
    auto* reply = new PendingReply<Payload>();
    start(reply);
    Status waited = wait_until([reply] { return reply->done; }, what);
    if (!waited) {
      reply->abandoned = true;
      return std::move(waited).error();
    }
    Payload payload = std::move(reply->payload);
    delete reply;
    return payload;
  }

  // Runs `operation` inside validation, out-of-memory and internal error scopes; any error it
  // raised comes back with Dawn's message, with `what` as context.
  Status capture_errors(std::string_view what, const std::function<void()>& operation);

  // Submits the command buffer and waits until the GPU has finished it.
  Status submit_and_wait(abi::WGPUCommandBuffer commands, std::string_view what);
  // Waits until everything submitted so far has finished.
  Status wait_for_submitted_work(std::string_view what);

  // Records commands with `encode`, then submits them and waits; encoding errors come back as
  // validation errors with Dawn's message.
  Status run_encoded(std::string_view what,
                     const std::function<void(abi::WGPUCommandEncoder)>& encode);
  // run_encoded without the wait, for work whose end something else waits for (a mapping).
  Status submit_encoded(std::string_view what,
                        const std::function<void(abi::WGPUCommandEncoder)>& encode);

  // Copies `size` bytes of `buffer` from `offset` into host memory.
  Result<std::vector<std::byte>> read_back(const Buffer& buffer, std::uint64_t offset,
                                           std::uint64_t size);
  // Maps `size` bytes of `buffer` from offset 0 with `mode`, waiting for the GPU's use of it; an
  // error names `which` buffer and `purpose` ("for reading", "for writing").
  Status map_buffer(abi::WGPUBuffer buffer, std::uint32_t mode, std::uint64_t size,
                    std::string_view which, std::string_view purpose);
  // Device::read_regions, the regions checked.
  Status read_back_regions(
      std::span<const BufferRegion> regions,
      const std::function<void(std::size_t, std::span<const std::byte>)>& visit);

  // Uploads of more than kUploadStagingBytes (Device::create_buffer_with_contents) go through two
  // staging buffers of that size, made at the first and kept: one is filled while the GPU copies
  // the other. Creating a mapped buffer of a gigabyte allocated a gigabyte of host-visible memory
  // each time, most of an upload's time.
  static constexpr std::uint64_t kUploadStagingBytes = std::uint64_t{64} << 20;
  struct UploadStaging {
    abi::WGPUBuffer buffer = nullptr;
    bool mapped = false;
  };
  std::array<UploadStaging, 2> upload_staging{};
  // Writes `contents`, zero-padded to whole words, into `target` from offset 0.
  Status upload_staged(abi::WGPUBuffer target, std::span<const std::byte> contents);
  // Maps `staging` for writing (made, mapped, on first use), waiting for its last copy.
  Status ready_for_writing(UploadStaging& staging);

  // Durations (ns) of `spans` timed spans of `batch` executions each, from GPU timestamps or
  // from the host clock around each completed submission.
  Result<std::vector<std::uint64_t>> timestamp_spans(std::span<const DispatchStep> steps,
                                                     std::uint32_t batch, std::uint32_t spans);
  Result<std::vector<std::uint64_t>> host_clock_spans(std::span<const DispatchStep> steps,
                                                      std::uint32_t batch, std::uint32_t spans);
};

}  // namespace wgsl_forge::gpu
