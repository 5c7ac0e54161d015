#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "cli_support.hpp"

namespace wgsl_forge::cli {

// Registers `cache list|show|verify|prune|export|import` and `info`; the returned callbacks run the
// chosen command.
void add_cache_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run);

}  // namespace wgsl_forge::cli
