#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "cli_support.hpp"

namespace wgsl_forge::cli {

// Registers `adapters`: the adapter's identity, driver, key limits, features and topology hash.
void add_adapter_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run);

}  // namespace wgsl_forge::cli
