#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "cli_support.hpp"

namespace wgsl_forge::cli {

// Registers `certify`, `tune` and `auto-tune-all`.
void add_forge_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run);

}  // namespace wgsl_forge::cli
