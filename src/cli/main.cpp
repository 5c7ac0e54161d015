// wgsl-forge: the command-line tool. It parses arguments, calls the library and prints; the
// work itself lives in the library layers (see ARCHITECTURE.md).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <string>

#include "adapter_commands.hpp"
#include "cache_commands.hpp"
#include "cli_support.hpp"
#include "forge_commands.hpp"
#include "kernel_commands.hpp"
#include "report_command.hpp"
#include "util/closest_match.hpp"
#include "wgsl_forge/version.hpp"

namespace {

// Why writing standard output failed, or nullopt when everything written reached it. The errno
// of a write that failed in the middle of a command is gone by then (the stream keeps only its
// error flag), so the output is asked once more with one newline: it is incomplete already, and
// a trailing newline cannot make it look whole.
std::optional<std::string> output_failure() {
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  if (std::cout && flushed && !std::ferror(stdout)) return std::nullopt;
  if (errno != 0) return std::strerror(errno);
  std::clearerr(stdout);
  if (std::fputc('\n', stdout) == EOF || std::fflush(stdout) != 0) {
    if (errno != 0) return std::strerror(errno);
  }
  return "a write to standard output failed";
}

// A command whose output went nowhere (a full disk, a closed file) has failed, whatever it
// computed: otherwise a script takes the empty or cut file for the answer.
int check_output_written(int exit_code) {
  std::optional<std::string> failure = output_failure();
  if (!failure) return exit_code;
  return wgsl_forge::cli::report_error(
      wgsl_forge::Error(wgsl_forge::ErrorKind::kIo, "Cannot write the output (" + *failure + ")."));
}

// Every subcommand's name, nested ones included ("cache" and its "list", "show", ...).
void collect_subcommand_names(const CLI::App& app, std::vector<std::string>& names) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
    collect_subcommand_names(*sub, names);
  }
}

// "; did you mean 'tune'?" for an argument near one of the subcommands' names that the parser
// did not take for one; empty otherwise.
std::string did_you_mean(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  // A mistyped subcommand is "not expected" (ExtrasError, naming it) or leaves a required
  // subcommand missing (RequiredError, not naming it).
  const bool extra = dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr;
  if (!extra && dynamic_cast<const CLI::RequiredError*>(&error) == nullptr) return "";
  std::vector<std::string> names;
  collect_subcommand_names(app, names);
  const std::vector<std::string_view> known(names.begin(), names.end());
  const std::string message = error.what();
  for (int i = 1; i < argc; ++i) {
    const std::string_view given = argv[i];
    if (given.starts_with('-') || (extra && message.find(given) == std::string::npos)) continue;
    if (std::find(names.begin(), names.end(), given) != names.end()) continue;
    if (std::optional<std::string> meant = wgsl_forge::closest_match(given, known)) {
      return "; did you mean '" + *meant + "'?";
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace wgsl_forge::cli;
  CLI::App app("wgsl-forge: generates, certifies and tunes WGSL compute kernels", "wgsl-forge");
  app.set_version_flag("--version", std::string("wgsl-forge ") + wgsl_forge::kVersion);
  app.require_subcommand(1);
  // Global options (--cache, --remote, --webgpu-lib, --backend, --adapter, --no-bounds-checks,
  // --timeout) may also follow the subcommand.
  app.fallthrough();

  GlobalOptions options;
  std::string cache_dir;
  app.add_option("--cache", cache_dir,
                 "Cache directory (default: $WGSL_FORGE_CACHE, $XDG_CACHE_HOME/wgsl-forge or "
                 "~/.cache/wgsl-forge)");

  std::string remote;
  app.add_option("--remote", remote,
                 "Shared store of a fleet, redis://HOST[:PORT][/DB] (default: $WGSL_FORGE_REMOTE): "
                 "entries missing here are taken from it (checked) and new ones published to "
                 "it; auto-tune-all splits the work with the other nodes. A remote that is down "
                 "or silent costs at most 2 s, a warning, and local-only operation");

  std::string webgpu_library;
  app.add_option("--webgpu-lib", webgpu_library,
                 "webgpu.h library to load (default: $WGSL_FORGE_WEBGPU_LIB, else the Dawn build "
                 "that scripts/setup.sh installed)");
  app.add_option("--backend", options.backend, "WebGPU backend: vulkan (default) or any");
  std::size_t adapter_index = 0;
  CLI::Option* adapter_option =
      app.add_option("--adapter", adapter_index,
                     "Use the I-th adapter of the backend, as `wgsl-forge adapters` numbers them "
                     "(default: the one Dawn picks for high performance)");
  double timeout_seconds = 0;
  app.add_option("--timeout", timeout_seconds,
                 "Watchdog of every wait for the GPU, in seconds (default: 120): a kernel that "
                 "has not finished by then fails (exit 3; exit 1 for certify --source), and the "
                 "command ends even if the driver never gives the device back")
      ->check(CLI::Range(0.001, 86400.0));
  app.add_flag("!--no-bounds-checks", options.bounds_checks,
               "Run kernels without Dawn's bounds clamps (toggle disable_robustness): faster for "
               "some kernels, slower for others, unsafe for a kernel that indexes out of range; "
               "kernels are tuned and cached apart from those with clamps");

  std::function<int()> run;
  add_cache_commands(app, options, run);
  add_adapter_commands(app, options, run);
  add_kernel_commands(app, options, run);
  add_forge_commands(app, options, run);
  add_report_command(app, options, run);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0)
      return check_output_written(app.exit(error));  // --help, --version
    return report_error(
        wgsl_forge::Error(wgsl_forge::ErrorKind::kInvalidInput,
                          std::string(error.what()) + did_you_mean(app, error, argc, argv) +
                              " (wgsl-forge --help lists the commands and options)"));
  }
  if (!cache_dir.empty()) options.cache_dir = cache_dir;
  if (!remote.empty()) options.remote = remote;
  if (adapter_option->count() > 0) options.adapter_index = adapter_index;
  if (!webgpu_library.empty()) options.webgpu_library = webgpu_library;
  if (timeout_seconds > 0) {
    options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_seconds * 1000));
  }
  const int exit_code = check_output_written(run ? run() : kExitBadInput);
  // A device's teardown was abandoned (see BoundedTeardown): exit handlers and static
  // destructors would wait for the same driver, so they are skipped; the output is flushed.
  if (teardown_abandoned()) {
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
  return exit_code;
}
