#include "cli_support.hpp"

#include <iostream>

namespace wgsl_forge::cli {

Result<std::unique_ptr<gpu::Device>> open_device(const GlobalOptions& options) {
  gpu::RuntimeOptions runtime;
  runtime.library_path = options.webgpu_library;
  runtime.backend = options.backend;
  return gpu::Device::open(runtime);
}

Result<ManifestCache> open_cache(const GlobalOptions& options) {
  Result<std::filesystem::path> root = resolve_cache_root(options.cache_dir);
  if (!root) return std::move(root).error();
  return ManifestCache(*root);
}

int report_error(const Error& error) {
  std::cerr << "wgsl-forge: error: " << error.to_string() << "\n";
  switch (error.kind()) {
    case ErrorKind::kInvalidInput:
    case ErrorKind::kInvalidKey:
      return kExitBadInput;
    case ErrorKind::kCollision:
    case ErrorKind::kCorruption:
    case ErrorKind::kSerialization:
    case ErrorKind::kIo:
    case ErrorKind::kCompilation:
    case ErrorKind::kValidation:
    case ErrorKind::kRuntime:
      return kExitRuntime;
  }
  return kExitRuntime;
}

}  // namespace wgsl_forge::cli
