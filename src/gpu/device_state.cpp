#include "device_state.hpp"
#include "util/try.hpp"

#include <thread>

namespace wgsl_forge::gpu {

using namespace abi;

std::string to_string(WGPUStringView view) {
  if (view.data == nullptr) return {};
  if (view.length == kStrlen) return std::string(view.data);
  return std::string(view.data, view.length);
}

WGPUStringView to_view(std::string_view text) { return WGPUStringView{text.data(), text.size()}; }

DeviceState::~DeviceState() {
  for (const UploadStaging& staging : upload_staging) {
    if (staging.buffer != nullptr) api->BufferRelease(staging.buffer);
  }
  if (queue != nullptr) api->QueueRelease(queue);
  if (device != nullptr) {
    if (!adopted) api->DeviceDestroy(device);
    api->DeviceRelease(device);
  }
  if (adapter != nullptr) api->AdapterRelease(adapter);
  if (instance != nullptr) {
    api->InstanceProcessEvents(instance);
    api->InstanceRelease(instance);
  }
}

Status DeviceState::check_alive() const {
  std::lock_guard lock(mutex);
  if (lost_reason) {
    return Error(ErrorKind::kDeviceLost, "The GPU device is lost (" + *lost_reason +
                                             "); nothing more can run on it. Open a new device.");
  }
  return Ok{};
}

Status DeviceState::wait_until(const std::function<bool()>& done, std::string_view what) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + wait_timeout;
  while (true) {
    api->InstanceProcessEvents(instance);
    if (done()) return Ok{};
    WF_TRY_CONTEXT(check_alive(), "waiting for " + std::string(what));
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      unfinished_work = true;
      return Error(ErrorKind::kTimeout,
                   "Timed out after " + std::to_string(wait_timeout.count()) + " ms waiting for " +
                       std::string(what) +
                       " (the GPU did not answer; a kernel may run far too long or hang).");
    }
    // Spin briefly for short waits (keeps host-clock timing tight), then sleep.
    if (now - start < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

namespace {

const char* error_type_name(std::uint32_t type) {
  switch (type) {
    case kErrorTypeValidation:
      return "Validation error";
    case kErrorTypeOutOfMemory:
      return "Out-of-memory error";
    case kErrorTypeInternal:
      return "Internal error";
    default:
      return "Unknown error";
  }
}

struct ScopeErrors {
  int popped = 0;
  bool validation = false;  // a validation error was among them
  std::vector<std::string> messages;
};

void on_pop_error_scope(std::uint32_t status, std::uint32_t type, WGPUStringView message,
                        void* userdata1, void*) {
  auto* reply = static_cast<PendingReply<ScopeErrors>*>(userdata1);
  if (reply->abandoned) {
    if (++reply->payload.popped == 3) delete reply;
    return;
  }
  ScopeErrors& errors = reply->payload;
  if (status != kPopErrorScopeStatusSuccess) {
    errors.messages.push_back("The error scope could not be read (" + to_string(message) + ")");
  } else if (type != kErrorTypeNoError) {
    errors.validation |= type == kErrorTypeValidation;
    errors.messages.push_back(std::string(error_type_name(type)) + ": " + to_string(message));
  }
  if (++errors.popped == 3) reply->done = true;
}

}  // namespace

Status DeviceState::capture_errors(std::string_view what, const std::function<void()>& operation) {
  WF_TRY_CONTEXT(check_alive(), std::string(what));
  api->DevicePushErrorScope(device, kErrorFilterValidation);
  api->DevicePushErrorScope(device, kErrorFilterOutOfMemory);
  api->DevicePushErrorScope(device, kErrorFilterInternal);
  operation();
  auto* reply = new PendingReply<ScopeErrors>();
  for (int i = 0; i < 3; ++i) {
    api->DevicePopErrorScope(
        device, WGPUCallbackInfo<WGPUPopErrorScopeCallback>{
                    nullptr, kCallbackModeAllowProcessEvents, &on_pop_error_scope, reply, nullptr});
  }
  Status waited = wait_until([reply] { return reply->done; }, "the device's error scopes");
  if (!waited) {
    reply->abandoned = true;
    return std::move(waited).error().with_context(std::string(what));
  }
  std::vector<std::string> messages = std::move(reply->payload.messages);
  {
    // Errors raised outside any scope (by Dawn itself, between our operations) are reported with
    // the next operation rather than lost.
    std::lock_guard lock(mutex);
    for (std::string& uncaptured : uncaptured_errors)
      messages.push_back("Uncaptured error: " + uncaptured);
    uncaptured_errors.clear();
  }
  const ErrorKind kind = reply->payload.validation ? ErrorKind::kValidation : ErrorKind::kRuntime;
  delete reply;
  if (messages.empty()) return Ok{};
  std::string text = messages.front();
  for (std::size_t i = 1; i < messages.size(); ++i) text += "\n" + messages[i];
  // Trim Dawn's trailing newlines so that our context lines follow directly.
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return Error(kind, text).with_context(std::string(what));
}

Status DeviceState::submit_and_wait(WGPUCommandBuffer commands, std::string_view what) {
  Status submitted = capture_errors(what, [&] { api->QueueSubmit(queue, 1, &commands); });
  api->CommandBufferRelease(commands);
  if (!submitted) return submitted;
  return wait_for_submitted_work(what);
}

Status DeviceState::wait_for_submitted_work(std::string_view what) {
  struct WorkDone {
    std::uint32_t status = 0;
    std::string message;
  };
  Result<WorkDone> done =
      await<WorkDone>("the GPU to finish " + std::string(what), [&](PendingReply<WorkDone>* reply) {
        api->QueueOnSubmittedWorkDone(
            queue, WGPUCallbackInfo<WGPUQueueWorkDoneCallback>{
                       nullptr, kCallbackModeAllowProcessEvents,
                       [](std::uint32_t status, WGPUStringView message, void* userdata1, void*) {
                         if (auto* r = PendingReply<WorkDone>::receive(userdata1)) {
                           r->payload = WorkDone{status, to_string(message)};
                         }
                       },
                       reply, nullptr});
      });
  if (!done) return std::move(done).error();
  if (done->status != kQueueWorkDoneStatusSuccess) {
    WF_TRY_CONTEXT(check_alive(), std::string(what));
    return Error(ErrorKind::kRuntime,
                 "The GPU did not finish " + std::string(what) + " (" + done->message + ").");
  }
  return check_alive();
}

}  // namespace wgsl_forge::gpu
