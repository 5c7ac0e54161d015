#include "gpu/gpu_test_support.hpp"

#include <cstdlib>

namespace wgsl_forge::testing {

gpu::Device& shared_device() {
  static std::unique_ptr<gpu::Device> device = [] {
    Result<std::unique_ptr<gpu::Device>> opened = gpu::Device::open(gpu::RuntimeOptions{});
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
