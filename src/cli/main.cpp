// wgsl-forge: the command-line tool. It parses arguments, calls the library and prints; the
// work itself lives in the library layers (see ARCHITECTURE.md).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "adapter_commands.hpp"
#include "cache_commands.hpp"
#include "cli_support.hpp"
#include "forge_commands.hpp"
#include "kernel_commands.hpp"
#include "wgsl_forge/version.hpp"

int main(int argc, char** argv) {
  using namespace wgsl_forge::cli;
  CLI::App app("wgsl-forge: generates, certifies and tunes WGSL compute kernels", "wgsl-forge");
  app.set_version_flag("--version", std::string("wgsl-forge ") + wgsl_forge::kVersion);
  app.require_subcommand(1);
  // Global options (--cache, --webgpu-lib, --backend, --no-bounds-checks) may also follow the
  // subcommand.
  app.fallthrough();

  GlobalOptions options;
  std::string cache_dir;
  app.add_option("--cache", cache_dir,
                 "Cache directory (default: $WGSL_FORGE_CACHE, $XDG_CACHE_HOME/wgsl-forge or "
                 "~/.cache/wgsl-forge)");

  std::string webgpu_library;
  app.add_option("--webgpu-lib", webgpu_library,
                 "webgpu.h library to load (default: $WGSL_FORGE_WEBGPU_LIB, else the Dawn build "
                 "that scripts/setup.sh installed)");
  app.add_option("--backend", options.backend, "WebGPU backend: vulkan (default) or any");
  app.add_flag("!--no-bounds-checks", options.bounds_checks,
               "Run kernels without Dawn's bounds clamps (toggle disable_robustness): faster for "
               "some kernels, slower for others, unsafe for a kernel that indexes out of range; "
               "kernels are tuned and cached apart from those with clamps");

  std::function<int()> run;
  add_cache_commands(app, options, run);
  add_adapter_commands(app, options, run);
  add_kernel_commands(app, options, run);
  add_forge_commands(app, options, run);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
    return report_error(wgsl_forge::Error(
        wgsl_forge::ErrorKind::kInvalidInput,
        std::string(error.what()) + " (wgsl-forge --help lists the commands and options)"));
  }
  if (!cache_dir.empty()) options.cache_dir = cache_dir;
  if (!webgpu_library.empty()) options.webgpu_library = webgpu_library;
  return run ? run() : kExitBadInput;
}
