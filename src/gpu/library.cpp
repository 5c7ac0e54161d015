#include "library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "wgsl_forge/gpu.hpp"
#include "wgsl_forge/hash.hpp"

#ifndef WGSL_FORGE_DEFAULT_WEBGPU_LIB
#define WGSL_FORGE_DEFAULT_WEBGPU_LIB ""
#endif

namespace wgsl_forge::gpu {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLibraryRelativeToRepository =
    "node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so";

// The repository root seen from the running executable (build/<preset>/src/wgsl-forge or
// build/<preset>/tests/wgsl_forge_tests), so that a build copied elsewhere with its repository
// still finds the library setup installed there.
std::optional<fs::path> library_beside_executable() {
  std::error_code error;
  fs::path executable = fs::read_symlink("/proc/self/exe", error);
  if (error) return std::nullopt;
  for (fs::path dir = executable.parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    fs::path candidate = dir / kLibraryRelativeToRepository;
    if (fs::exists(candidate, error)) return candidate;
  }
  return std::nullopt;
}

Result<std::string> hash_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error(ErrorKind::kRuntime, "Cannot read the WebGPU library " + path.string() + ".");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return blake3_hex(bytes.str());
}

}  // namespace

Result<fs::path> resolve_webgpu_library(const std::optional<fs::path>& explicit_path) {
  auto must_exist = [](const fs::path& path, const std::string& source) -> Result<fs::path> {
    std::error_code error;
    if (fs::is_regular_file(path, error)) return path;
    return Error(ErrorKind::kInvalidInput,
                 "WebGPU library " + path.string() + " (from " + source +
                     ") does not exist. Point it at a webgpu.h library such as Dawn's "
                     "libwebgpu_wrapper.so, or run scripts/setup.sh to install it.");
  };
  if (explicit_path) return must_exist(*explicit_path, "--webgpu-lib");
  if (const char* variable = std::getenv("WGSL_FORGE_WEBGPU_LIB"); variable && *variable) {
    return must_exist(variable, "WGSL_FORGE_WEBGPU_LIB");
  }
  std::error_code error;
  fs::path built_in = WGSL_FORGE_DEFAULT_WEBGPU_LIB;
  if (!built_in.empty() && fs::is_regular_file(built_in, error)) return built_in;
  if (auto beside = library_beside_executable()) return *beside;
  return Error(ErrorKind::kRuntime,
               std::string("No WebGPU library found: --webgpu-lib and WGSL_FORGE_WEBGPU_LIB are "
                           "not set, and neither ") +
                   (built_in.empty() ? std::string("the build's default") : built_in.string()) +
                   " nor <repository>/" + kLibraryRelativeToRepository +
                   " exists. Run scripts/setup.sh (it installs Dawn with npm ci) or set "
                   "WGSL_FORGE_WEBGPU_LIB.");
}

Result<std::shared_ptr<const WebGpuLibrary>> WebGpuLibrary::load(const fs::path& path) {
  static std::mutex mutex;
  static std::map<fs::path, std::shared_ptr<const WebGpuLibrary>> loaded;
  std::lock_guard lock(mutex);
  std::error_code error;
  fs::path canonical = fs::weakly_canonical(path, error);
  if (error) canonical = path;
  if (auto it = loaded.find(canonical); it != loaded.end()) return it->second;

  void* handle = ::dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return Error(ErrorKind::kRuntime, "Cannot load the WebGPU library " + canonical.string() +
                                          " (" + ::dlerror() +
                                          "). Run scripts/setup.sh or set WGSL_FORGE_WEBGPU_LIB "
                                          "to a webgpu.h library built for this machine.");
  }
  auto library = std::make_shared<WebGpuLibrary>();
  library->path_ = canonical;
  std::string missing;
#define WGSL_FORGE_RESOLVE(name, result, ...)                                              \
  library->functions_.name =                                                               \
      reinterpret_cast<decltype(library->functions_.name)>(::dlsym(handle, "wgpu" #name)); \
  if (library->functions_.name == nullptr)                                                 \
    missing += std::string(missing.empty() ? "" : ", ") + "wgpu" #name;
  WGSL_FORGE_WEBGPU_FUNCTIONS(WGSL_FORGE_RESOLVE)
#undef WGSL_FORGE_RESOLVE
  if (!missing.empty()) {
    return Error(ErrorKind::kRuntime, "The library " + canonical.string() +
                                          " does not export the webgpu.h functions " + missing +
                                          "; it is not a (recent enough) webgpu.h library.");
  }
  Result<std::string> hash = hash_file(canonical);
  if (!hash) return std::move(hash).error();
  library->blake3_ = *hash;
  loaded.emplace(canonical, library);
  return std::shared_ptr<const WebGpuLibrary>(library);
}

}  // namespace wgsl_forge::gpu
