#pragma once
// auto-tune-all --adapters: one worker process per listed adapter, each the same wgsl-forge
// binary run as `wgsl-forge --adapter I ... auto-tune-all ... --json` on the one cache
// directory. A process per adapter keeps a lost device (or a driver that hangs or crashes) to
// its own worker, and needs nothing shared in memory: workers of one topology split the
// (kernel, size bucket) work by the same leases as a fleet (leases.hpp: the remote's while it
// answers, else lease files in the cache directory); workers of different topologies tune
// under their own keys. The parent opens no device: it prints one table (or one JSON document)
// of every worker's rows, forwards each worker's stderr with its name once the worker has ended (so
// a worker's --trace comes at its end, not live), and fails when any worker failed, naming it and
// its error.

#include <string>
#include <vector>

#include "cli_support.hpp"

namespace wgsl_forge::cli {

// "all" (every adapter of the backend, gpu::count_adapters) or indices "0,2" (one may repeat:
// two workers on one adapter, as the tests run on lavapipe).
Result<std::vector<std::size_t>> parse_adapter_list(const GlobalOptions& options,
                                                    const std::string& text);

// Runs the workers: `worker_arguments` is the command line after the global options and
// `--adapter I` (the subcommand and its options, --json included), `cache_root` the directory
// they share.
int run_adapter_workers(const GlobalOptions& options, const std::filesystem::path& cache_root,
                        const std::vector<std::size_t>& adapters,
                        const std::vector<std::string>& worker_arguments, bool json);

}  // namespace wgsl_forge::cli
