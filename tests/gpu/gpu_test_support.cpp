#include "gpu/gpu_test_support.hpp"

#include <cstdlib>

namespace wgsl_forge::testing {

gpu::Device& shared_device() {
  static std::unique_ptr<gpu::Device> device = [] {
    // lavapipe compiles a pipeline's machine code at its first dispatch, inside the wait for
    // the GPU: a stack taken during a 200 s run of the radix sort's catalog test on a loaded
    // 2-core machine showed its queue thread in LLVM's coroutine splitting. The default 2-minute
    // watchdog once fired there in CI (ASan stage); 5 minutes still ends a hung kernel before
    // CTest's 10-minute limit.
    gpu::RuntimeOptions options;
    options.wait_timeout = std::chrono::minutes(5);
    Result<std::unique_ptr<gpu::Device>> opened = gpu::Device::open(options);
    if (!opened) {
      // Every GPU test needs the adapter; say why there is none instead of failing obscurely.
      ADD_FAILURE() << "Cannot open the WebGPU device: " << opened.error().to_string();
      std::abort();
    }
    return std::move(opened).value();
  }();
  return *device;
}

}  // namespace wgsl_forge::testing
