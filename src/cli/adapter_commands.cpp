#include "adapter_commands.hpp"

#include <iostream>
#include <memory>

#include "wgsl_forge/gpu.hpp"

namespace wgsl_forge::cli {

namespace {

void print_adapter(const gpu::AdapterInfo& info) {
  const gpu::AdapterLimits& limits = info.limits;
  auto hex = [](std::uint32_t value) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%04x", value);
    return std::string(text);
  };
  auto joined = [](const std::vector<std::string>& items) {
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
    return text.empty() ? std::string("(none)") : text;
  };
  std::cout << "adapter:       " << info.identity.name << "\n"
            << "vendor/device: " << hex(info.identity.vendor) << " / " << hex(info.identity.device)
            << " (" << info.vendor_name
            << (info.architecture.empty() ? "" : ", " + info.architecture) << ")\n"
            << "type:          " << info.identity.device_type << " on " << info.identity.backend
            << "\n"
            << "driver:        " << info.identity.driver << " " << info.identity.driver_info << "\n"
            << "subgroups:     " << info.subgroup_min_size << ".." << info.subgroup_max_size << "\n"
            << "features:      " << joined(info.features) << "\n"
            << "toggles:       " << joined(info.toggles) << "\n"
            << "limits:        " << limits.max_compute_invocations_per_workgroup
            << " invocations/workgroup, " << limits.max_compute_workgroups_per_dimension
            << " workgroups/dimension, " << limits.max_compute_workgroup_storage_size
            << " B workgroup memory,\n               " << limits.max_storage_buffer_binding_size
            << " B per storage binding, " << limits.max_buffer_size << " B per buffer\n"
            << "library:       " << info.library_path.string() << " (blake3 "
            << info.library_blake3.substr(0, 16) << "...)\n"
            << "topology hash: " << info.topology_hash << "\n";
}

// Text: every adapter of the backend, numbered as --adapter and auto-tune-all --adapters take
// them (only the default one when the library cannot list them); JSON and --adapter: one.
int run_adapters(const GlobalOptions& options, bool as_json) {
  Result<std::size_t> count = gpu::count_adapters(runtime_options(options));
  if (as_json || options.adapter_index || !count) {
    Result<OpenDevice> device = open_device(options);
    if (!device) return report_error(device.error());
    if (as_json) {
      std::cout << gpu::adapter_info_json((*device)->adapter());
    } else {
      print_adapter((*device)->adapter());
    }
    return kExitOk;
  }
  for (std::size_t index = 0; index < *count; ++index) {
    GlobalOptions this_one = options;
    this_one.adapter_index = index;
    Result<OpenDevice> device = open_device(this_one);
    if (!device) return report_error(device.error());
    std::cout << (index == 0 ? "" : "\n") << "index:         " << index << " of " << *count << "\n";
    print_adapter((*device)->adapter());
  }
  return kExitOk;
}

}  // namespace

void add_adapter_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* adapters = app.add_subcommand(
      "adapters",
      "Describe each adapter, numbered: identity, driver, limits, features, topology hash");
  adapters->add_flag("--json", *as_json, "Print JSON");
  adapters->callback([&run, &options, as_json] {
    run = [&options, as_json] { return run_adapters(options, *as_json); };
  });
}

}  // namespace wgsl_forge::cli
