#include "kernel_commands.hpp"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "wgsl_forge/kernel_runner.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge::cli {

namespace {

std::string join(const std::vector<std::int64_t>& values) {
  std::string text;
  for (std::int64_t value : values) {
    // Appended in two steps: GCC 12's -Wrestrict misfires on `literal + std::string&&` at -O3.
    if (!text.empty()) text += ' ';
    text += std::to_string(value);
  }
  return text;
}

// "2^16 2^20 2^24 2^28*": the labels of the kernel's size buckets, the main one starred.
std::string bucket_labels(const std::vector<kernels::SizeBucket>& buckets) {
  std::string text;
  for (const kernels::SizeBucket& bucket : buckets) {
    if (!text.empty()) text += ' ';
    text += bucket.label;
    if (bucket.main) text += '*';
  }
  return text;
}

nlohmann::json buckets_json(const std::vector<kernels::SizeBucket>& buckets) {
  nlohmann::json list = nlohmann::json::array();
  for (const kernels::SizeBucket& bucket : buckets) {
    list.push_back({{"label", bucket.label},
                    {"problem", bucket.problem.to_string()},
                    {"measure", kernels::bucket_measure(bucket.problem)},
                    {"main", bucket.main}});
  }
  return list;
}

int run_kernels(bool as_json) {
  if (as_json) {
    nlohmann::json list = nlohmann::json::array();
    for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels()) {
      nlohmann::json knobs = nlohmann::json::array();
      for (const kernels::KnobSpec& knob : kernel->knobs()) {
        knobs.push_back({{"name", knob.name},
                         {"description", knob.description},
                         {"values", knob.values},
                         {"default", knob.default_value}});
      }
      list.push_back({{"id", kernel->id()},
                      {"revision", kernel->revision()},
                      {"summary", kernel->summary()},
                      {"tolerance", kernel->tolerance()},
                      {"knobs", knobs},
                      {"size_buckets",
                       {{"gpu", buckets_json(kernel->size_buckets(false))},
                        {"cpu", buckets_json(kernel->size_buckets(true))}}}});
    }
    std::cout << list.dump(2) << "\n";
    return kExitOk;
  }
  for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels()) {
    std::cout << kernel->id() << " (revision " << kernel->revision() << "): " << kernel->summary()
              << "\n";
    std::cout << "    size buckets (* main): " << bucket_labels(kernel->size_buckets(false))
              << "; on a CPU adapter " << bucket_labels(kernel->size_buckets(true)) << "\n";
    for (const kernels::KnobSpec& knob : kernel->knobs()) {
      std::cout << "    " << knob.name << " = " << knob.default_value << "  {" << join(knob.values)
                << "}  " << knob.description << "\n";
    }
  }
  return kExitOk;
}

int run_generate(const GlobalOptions& options, const std::string& kernel_id,
                 const std::string& schedule_text, bool offline) {
  Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(kernel_id);
  if (!kernel) return report_error(kernel.error());
  Result<Schedule> schedule = kernels::parse_schedule_overrides(**kernel, schedule_text);
  if (!schedule) return report_error(schedule.error());
  kernels::DeviceCapabilities capabilities;  // WebGPU's default limits
  OpenDevice device;
  if (!offline) {
    Result<OpenDevice> opened = open_device(options);
    if (!opened) {
      return report_error(std::move(opened).error().with_context(
          "checking the schedule against the adapter (--offline checks it against WebGPU's "
          "default limits instead)"));
    }
    device = std::move(opened).value();
    capabilities = forge::capabilities_of(device->adapter());
  }
  Result<GeneratedKernel> generated =
      kernels::generate_builtin(**kernel, *schedule, TargetBackend::kWgsl, capabilities);
  if (!generated) return report_error(generated.error());
  std::cout << "// " << generated->kernel_id << " revision " << generated->kernel_revision
            << ", schedule " << generated->schedule.to_string() << "\n"
            << "// source BLAKE3 of what follows: " << generated->source_hash << "\n"
            << generated->source;
  return kExitOk;
}

}  // namespace

void add_kernel_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* list = app.add_subcommand("kernels", "List the builtin kernels and their knobs");
  list->add_flag("--json", *as_json, "Print JSON");
  list->callback([&run, as_json] { run = [as_json] { return run_kernels(*as_json); }; });

  struct GenerateArguments {
    std::string kernel;
    std::string schedule;
    bool offline = false;
  };
  auto arguments = std::make_shared<GenerateArguments>();
  CLI::App* generate = app.add_subcommand("generate", "Print the WGSL of a kernel for a schedule");
  generate->add_option("KERNEL", arguments->kernel, "Kernel id (see wgsl-forge kernels)")
      ->required();
  generate->add_option("--schedule", arguments->schedule,
                       "Knobs to change from the default, e.g. workgroup_size=128,vector_width=4");
  generate->add_flag("--offline", arguments->offline,
                     "Check the schedule against WebGPU's default limits, not the adapter's");
  generate->callback([&run, &options, arguments] {
    run = [&options, arguments] {
      return run_generate(options, arguments->kernel, arguments->schedule, arguments->offline);
    };
  });
}

}  // namespace wgsl_forge::cli
