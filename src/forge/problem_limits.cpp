// Whether a problem can run at all, decided before anything is allocated (see forge.hpp).

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "util/try.hpp"
#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::forge {

namespace {

// Bytes the host can still give without swapping: MemAvailable of /proc/meminfo, else the free
// physical pages; nullopt when neither can be read (the check is then skipped).
std::optional<std::uint64_t> available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string name;
    std::uint64_t kibibytes = 0;
    if (fields >> name >> kibibytes && name == "MemAvailable:") return kibibytes * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return std::nullopt;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

Error too_large(const kernels::KernelDefinition& kernel, const kernels::Problem& problem,
                const std::string& what) {
  return Error(ErrorKind::kInvalidInput, what)
      .with_context("checking " + std::string(kernel.id()) + " at " + problem.to_string());
}

}  // namespace

Status check_problem_fits(const gpu::Device& device, const kernels::KernelDefinition& kernel,
                          const kernels::Problem& problem) {
  WF_TRY(kernel.check_problem(problem));
  const kernels::DeviceCapabilities capabilities = capabilities_of(device.adapter());
  // The space's first schedule is the default whenever the default fits this adapter; the space
  // itself (tens of thousands of schedules for some kernels) is made only when it does not.
  Schedule schedule = kernel.default_schedule();
  if (!kernel.check_schedule(schedule, capabilities)) {
    const std::vector<Schedule> space = kernel.schedule_space(capabilities);
    if (!space.empty()) schedule = space.front();
  }
  WF_TRY_ASSIGN(kernels::DispatchPlan plan, kernel.plan(schedule, problem, capabilities));
  const gpu::AdapterLimits& limits = device.adapter().limits;
  std::uint64_t total = 0;
  for (const kernels::BufferPlan& buffer : plan.buffers) {
    const std::string named = "Buffer " + buffer.name + " (" + std::to_string(buffer.bytes) +
                              " bytes) exceeds the adapter's ";
    if (buffer.bytes > limits.max_buffer_size) {
      return too_large(kernel, problem,
                       named + "maxBufferSize (" + std::to_string(limits.max_buffer_size) + ").");
    }
    if (buffer.bytes > limits.max_storage_buffer_binding_size) {
      return too_large(kernel, problem,
                       named + "maxStorageBufferBindingSize (" +
                           std::to_string(limits.max_storage_buffer_binding_size) + ").");
    }
    total += buffer.bytes;
  }
  // Tuning and benchmarks keep a host copy of every buffer's contents (the inputs, the poison
  // written to the others); on a CPU adapter the buffers themselves are host memory too.
  const bool cpu = device.adapter().identity.device_type == "Cpu";
  const std::uint64_t host_bytes = cpu ? 2 * total : total;
  if (std::optional<std::uint64_t> available = available_host_memory();
      available && host_bytes > *available) {
    return too_large(kernel, problem,
                     "The problem needs about " + std::to_string(host_bytes) +
                         " bytes of host memory (a host copy of its buffers" +
                         (cpu ? std::string(", and the CPU adapter's buffers themselves") : "") +
                         "), more than the host has available (" + std::to_string(*available) +
                         " bytes, MemAvailable).");
  }
  return Ok{};
}

}  // namespace wgsl_forge::forge
