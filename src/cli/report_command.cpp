#include "report_command.hpp"

#include <iostream>
#include <memory>

#include "report_page.hpp"
#include "wgsl_forge/tuning_report.hpp"
#include "wgsl_forge/version.hpp"

namespace wgsl_forge::cli {

namespace {

struct ReportArguments {
  std::vector<std::string> kernels;
  std::string html;
  bool copy_ceiling = false;
  std::uint32_t samples = 20;
};

// "of affine_f32, gemm_f32" or "of any kernel": what an empty report was asked about.
std::string asked_about(const std::vector<const kernels::KernelDefinition*>& kernels) {
  if (kernels.empty()) return "of any kernel";
  std::string names;
  for (const kernels::KernelDefinition* kernel : kernels) {
    names += (names.empty() ? "" : ", ") + std::string(kernel->id());
  }
  return "of " + names;
}

int run_report(const GlobalOptions& options, const ReportArguments& arguments) {
  std::vector<const kernels::KernelDefinition*> selected;
  for (const std::string& id : arguments.kernels) {
    Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(id);
    if (!kernel) return report_error(kernel.error());
    selected.push_back(*kernel);
  }
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  Result<forge::TuningReport> report = forge::gather_tuning_report(*cache, selected);
  if (!report) return report_error(report.error());
  for (const forge::TuningReport::Unreadable& file : report->unreadable) {
    std::cerr << "wgsl-forge: warning: " << file.path.string() << ": " << one_line(file.reason)
              << "\n";
  }
  // A page with nothing on it would look like a report of nothing found; say so instead.
  if (report->bucket_count() == 0) {
    std::cerr << "wgsl-forge: the cache " << cache->root().string() << " holds no tuning "
              << asked_about(selected)
              << "; nothing to report, no page written (wgsl-forge auto-tune-all, or tune "
                 "KERNEL, tunes on this adapter).\n";
    return kExitRejected;
  }
  // Kernels asked for by name that have no tuning; without names, the page lists them.
  for (const forge::KernelReport& kernel : report->kernels) {
    if (kernel.buckets.empty() && !selected.empty()) {
      std::cerr << "wgsl-forge: note: " << kernel.kernel_id << " has no tuning in the cache\n";
    }
  }
  if (arguments.copy_ceiling) {
    Result<OpenDevice> device = open_device(options);
    if (!device) return report_error(device.error());
    gpu::TimingOptions timing;
    timing.samples = arguments.samples;
    Status measured = forge::measure_copy_ceilings(**device, *report, timing);
    if (!measured) return report_error(measured.error());
  }
  const std::string page = render_report_page(*report, kVersion);
  Status written = write_file_atomically(arguments.html, page, *posix_file_system());
  if (!written) return report_error(written.error());
  std::cout << "wrote " << arguments.html << ": tuning entries " << report->bucket_count()
            << ", candidates " << report->candidate_count() << ", kernels "
            << report->kernels.size() << "\n";
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  auto arguments = std::make_shared<ReportArguments>();
  CLI::App* report = app.add_subcommand(
      "report", "Write the cache's tuning evidence as one self-contained HTML page");
  report->add_option("KERNEL", arguments->kernels, "Only these kernels (default: all)");
  report->add_option("--html", arguments->html, "The page to write (replaced atomically)")
      ->required();
  report->add_flag("--copy-ceiling", arguments->copy_ceiling,
                   "Measure the adapter's copy ceiling for the entries tuned on it (the cache "
                   "records none)");
  report
      ->add_option("--samples", arguments->samples,
                   "Samples per copy-ceiling measurement (default 20)")
      ->check(CLI::Range(1u, 2000u));
  report->callback([&run, &options, arguments] {
    run = [&options, arguments] { return run_report(options, *arguments); };
  });
}

}  // namespace wgsl_forge::cli
