#pragma once
// Shared by the wgsl-forge subcommands: exit codes, error printing, the global options.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  // --timeout: the watchdog of every wait for the GPU (RuntimeOptions::wait_timeout), and of a
  // tuning candidate's drain; unset: the library's defaults.
  std::optional<std::chrono::milliseconds> timeout;
  // --remote: redis://HOST[:PORT][/DB] of the fleet's shared store; unset: $WGSL_FORGE_REMOTE.
  std::optional<std::string> remote;
  // --adapter I: the I-th adapter of the backend (gpu::RuntimeOptions::adapter_index).
  std::optional<std::size_t> adapter_index;
};

// The runtime options that the global options name.
gpu::RuntimeOptions runtime_options(const GlobalOptions& options);

// Prints "wgsl-forge: error: <message and context>" to stderr, on one line (a compiler's
// diagnostics are joined); returns the exit code of its kind.
int report_error(const Error& error);
// `text` with its line breaks turned into spaces, for one-line error reports.
std::string one_line(std::string text);

// A device whose teardown is bounded. After a wait for the GPU timed out (the watchdog fired on
// a kernel that may never finish), destroying the device waits for the driver, which may never
// return it: a hung kernel on lavapipe keeps its threads busy for good. The deleter then gives
// the teardown kTeardownGrace on another thread and, if it has not finished by then, abandons
// it; main() sees that (teardown_abandoned) and ends the process with std::_Exit after flushing
// its output, so the command still exits with its code in bounded time.
struct BoundedTeardown {
  void operator()(gpu::Device* device) const;
};
using OpenDevice = std::unique_ptr<gpu::Device, BoundedTeardown>;
inline constexpr std::chrono::seconds kTeardownGrace{2};
// True once a device's teardown was abandoned: the process must end without running static
// destructors or exit handlers, which would wait for the same driver.
bool teardown_abandoned();

// The device and the cache that the global options (--webgpu-lib, --backend,
// --no-bounds-checks, --timeout, --cache, --remote) name. A malformed remote URL is an error; an
// unreachable remote is a warning and a cache without it (remote_store.hpp).
Result<OpenDevice> open_device(const GlobalOptions& options);
// kWrite also proves the cache directory writable, before any GPU work is spent.
enum class CacheUse { kRead, kWrite };
Result<ManifestCache> open_cache(const GlobalOptions& options, CacheUse use = CacheUse::kRead);
// ManifestCache::check_writable, with the flag that picks another directory in its message.
Status check_cache_writable(const ManifestCache& cache);

// A median for a table: "812.4 us", "3.07 ms".
std::string format_time(double ns);

// A table for a terminal: each column as wide as its widest cell (header included), numbers
// right-aligned, two spaces between columns. A note is a line of its own under the row before it
// (a re-tune's decision, a given schedule), indented, outside the columns.
class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };
  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // One cell per column (fewer leave the rest empty: a failed kernel's row).
  void add_row(std::vector<std::string> cells);
  void add_note(std::string line);
  std::string to_string() const;

 private:
  struct Line {
    std::vector<std::string> cells;  // empty for a note
    std::string note;
  };
  std::vector<Column> columns_;
  std::vector<Line> lines_;
};

}  // namespace wgsl_forge::cli
