#pragma once
// One device per test binary for tests that only run kernels; tests of failure paths open their
// own. The device is the real adapter (lavapipe on machines without a GPU): never a fake.

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "wgsl_forge/gpu.hpp"

namespace wgsl_forge::testing {

gpu::Device& shared_device();

template <typename T>
std::span<const std::byte> as_bytes_of(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}

template <typename T>
std::vector<T> values_from_bytes(const std::vector<std::byte>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

}  // namespace wgsl_forge::testing
