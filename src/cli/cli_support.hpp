#pragma once
// Shared by the wgsl-forge subcommands: exit codes, error printing, the global options.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/error.hpp"
#include "wgsl_forge/gpu.hpp"

namespace wgsl_forge::cli {

// Exit codes of every subcommand.
enum ExitCode : int {
  kExitOk = 0,
  kExitRejected = 1,  // the command ran and the answer is "no" (rejected, verify found damage)
  kExitBadInput = 2,  // the user gave something wrong (flag, kernel, key, file)
  kExitRuntime = 3,   // the machine failed (disk, GPU, library)
};

struct GlobalOptions {
  std::optional<std::filesystem::path> cache_dir;
  std::optional<std::filesystem::path> webgpu_library;
  std::string backend = "vulkan";
  bool bounds_checks = true;  // false: --no-bounds-checks (gpu::RuntimeOptions::bounds_checks)
};

// Prints "wgsl-forge: error: <message and context>" to stderr, on one line (a compiler's
// diagnostics are joined); returns the exit code of its kind.
int report_error(const Error& error);
// `text` with its line breaks turned into spaces, for one-line error reports.
std::string one_line(std::string text);

// The device and the cache that the global options (--webgpu-lib, --backend,
// --no-bounds-checks, --cache) name.
Result<std::unique_ptr<gpu::Device>> open_device(const GlobalOptions& options);
// kWrite also proves the cache directory writable, before any GPU work is spent.
enum class CacheUse { kRead, kWrite };
Result<ManifestCache> open_cache(const GlobalOptions& options, CacheUse use = CacheUse::kRead);

}  // namespace wgsl_forge::cli
