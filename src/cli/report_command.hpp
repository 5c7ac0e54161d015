#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "cli_support.hpp"

namespace wgsl_forge::cli {

// Registers `report`: the cache's tuning evidence as one self-contained HTML page.
void add_report_command(CLI::App& app, const GlobalOptions& options, std::function<int()>& run);

}  // namespace wgsl_forge::cli
