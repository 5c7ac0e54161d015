#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "cli_support.hpp"

namespace wgsl_forge::cli {

// Registers `kernels` (the catalog with each knob's legal values and default) and `generate`
// (the WGSL of one kernel for a schedule).
void add_kernel_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run);

}  // namespace wgsl_forge::cli
