#include "library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "util/try.hpp"
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

// The file that holds this code: libwgsl_forge.so when the shared library is loaded, else the
// program that links the static layers. The loader names the main program "" (dladdr would give
// argv[0], which need not be a path), so the program is /proc/self/exe.
std::optional<fs::path> file_of_this_code() {
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(reinterpret_cast<const void*>(&file_of_this_code), &info,
                reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return std::nullopt;
  }
  std::error_code error;
  fs::path file =
      map->l_name[0] != '\0' ? fs::path(map->l_name) : fs::read_symlink("/proc/self/exe", error);
  if (error) return std::nullopt;
  return fs::weakly_canonical(file, error);
}

// <repository>/node_modules/... in every directory above the running executable
// (build/<preset>/src/wgsl-forge or build/<preset>/tests/wgsl_forge_tests), so that a build
// copied elsewhere with its repository still finds the library setup installed there.
std::vector<fs::path> repositories_above_executable() {
  std::vector<fs::path> candidates;
  std::error_code error;
  fs::path executable = fs::read_symlink("/proc/self/exe", error);
  if (error) return candidates;
  for (fs::path dir = executable.parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    candidates.push_back(dir / kLibraryRelativeToRepository);
  }
  return candidates;
}

std::string joined(const std::vector<fs::path>& paths) {
  std::string text;
  for (const fs::path& path : paths) text += (text.empty() ? "" : ", ") + path.string();
  return text.empty() ? "none" : text;
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

WebGpuLibrarySearch webgpu_library_search(const std::optional<fs::path>& explicit_path) {
  WebGpuLibrarySearch search;
  search.explicit_path = explicit_path;
  if (const char* variable = std::getenv("WGSL_FORGE_WEBGPU_LIB"); variable && *variable) {
    search.variable = variable;
  }
  if (std::optional<fs::path> file = file_of_this_code()) {
    fs::path dir = file->parent_path();
    search.installed = {
        dir / WGSL_FORGE_INSTALLED_WEBGPU_LIB,
        (dir / WGSL_FORGE_BIN_TO_LIB / WGSL_FORGE_INSTALLED_WEBGPU_LIB).lexically_normal()};
  }
  fs::path built_in = WGSL_FORGE_DEFAULT_WEBGPU_LIB;
  if (!built_in.empty()) search.build_tree.push_back(built_in);
  for (fs::path& candidate : repositories_above_executable()) {
    search.build_tree.push_back(std::move(candidate));
  }
  return search;
}

Result<fs::path> resolve_webgpu_library(const WebGpuLibrarySearch& search) {
  auto must_exist = [](const fs::path& path, const std::string& source) -> Result<fs::path> {
    std::error_code error;
    if (fs::is_regular_file(path, error)) return path;
    return Error(ErrorKind::kInvalidInput,
                 "WebGPU library " + path.string() + " (from " + source +
                     ") does not exist. Point it at a webgpu.h library such as Dawn's "
                     "libwebgpu_wrapper.so, or run scripts/setup.sh to install it.");
  };
  if (search.explicit_path) return must_exist(*search.explicit_path, "--webgpu-lib");
  if (search.variable) return must_exist(*search.variable, "WGSL_FORGE_WEBGPU_LIB");
  for (const auto* candidates : {&search.installed, &search.build_tree}) {
    for (const fs::path& candidate : *candidates) {
      std::error_code error;
      if (fs::is_regular_file(candidate, error)) return candidate;
    }
  }
  return Error(ErrorKind::kRuntime,
               "No WebGPU library is found (--webgpu-lib or RuntimeOptions::library_path: not "
               "set; WGSL_FORGE_WEBGPU_LIB: not set; installed beside the wgsl_forge code: " +
                   joined(search.installed) + "; build tree: " + joined(search.build_tree) +
                   "). Set WGSL_FORGE_WEBGPU_LIB to Dawn's libwebgpu_wrapper.so, install "
                   "wgsl-forge with cmake --install (it copies Dawn), or run scripts/setup.sh.");
}

Result<fs::path> resolve_webgpu_library(const std::optional<fs::path>& explicit_path) {
  return resolve_webgpu_library(webgpu_library_search(explicit_path));
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
#define WGSL_FORGE_RESOLVE_OPTIONAL(name, result, ...) \
  library->functions_.name =                           \
      reinterpret_cast<decltype(library->functions_.name)>(::dlsym(handle, "wgpu" #name));
  WGSL_FORGE_DAWN_FUNCTIONS(WGSL_FORGE_RESOLVE_OPTIONAL)
#undef WGSL_FORGE_RESOLVE_OPTIONAL
  library->enumerate_adapters_ = reinterpret_cast<abi::DawnEnumerateAdapters>(
      ::dlsym(handle, abi::kDawnEnumerateAdaptersSymbol));
  if (!missing.empty()) {
    return Error(ErrorKind::kRuntime, "The library " + canonical.string() +
                                          " does not export the webgpu.h functions " + missing +
                                          "; it is not a (recent enough) webgpu.h library.");
  }
  WF_TRY_ASSIGN(std::string hash, hash_file(canonical));
  library->blake3_ = hash;
  loaded.emplace(canonical, library);
  return std::shared_ptr<const WebGpuLibrary>(library);
}

}  // namespace wgsl_forge::gpu
