#pragma once
// Loading a webgpu.h library with dlopen and resolving the functions wgsl-forge calls.

#include <filesystem>
#include <memory>
#include <string>

#include "webgpu_abi.hpp"
#include "wgsl_forge/error.hpp"

namespace wgsl_forge::gpu {

class WebGpuLibrary {
 public:
  // Loads (once per process: Dawn keeps threads, so it is never unloaded) and resolves every
  // function; a missing file or symbol is an error that says what to install or set.
  static Result<std::shared_ptr<const WebGpuLibrary>> load(const std::filesystem::path& path);

  const abi::WebGpuFunctions& functions() const { return functions_; }
  const std::filesystem::path& path() const { return path_; }
  const std::string& blake3() const { return blake3_; }
  // Dawn's adapter enumeration (abi::kDawnEnumerateAdaptersSymbol); null in other libraries.
  abi::DawnEnumerateAdapters enumerate_adapters() const { return enumerate_adapters_; }

 private:
  abi::WebGpuFunctions functions_;
  std::filesystem::path path_;
  std::string blake3_;
  abi::DawnEnumerateAdapters enumerate_adapters_ = nullptr;
};

}  // namespace wgsl_forge::gpu
