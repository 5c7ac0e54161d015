#include "forge_commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "adapter_workers.hpp"
#include "util/closest_match.hpp"
#include "util/try.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge::cli {

namespace {

namespace fs = std::filesystem;

// The kernel's tuning problem resized by --size: n elements, or m = n = k for GEMM, whose
// dimensions are u32 (a larger size is refused, never truncated).
Result<kernels::Problem> problem_of_size(const kernels::KernelDefinition& kernel,
                                         std::uint64_t size) {
  kernels::Problem problem = kernel.tuning_problem(false);
  if (problem.m == 0) {
    // Segments keep the tuning problem's length (segmented_reduce_sum_f32).
    if (problem.segments != 0) problem.segments = size / (problem.elements / problem.segments);
    problem.elements = size;
    return problem;
  }
  constexpr std::uint64_t kLargest = std::numeric_limits<std::uint32_t>::max();
  if (size > kLargest) {
    return Error(ErrorKind::kInvalidInput, "--size (" + std::to_string(size) +
                                               ") exceeds the largest m = n = k of " +
                                               std::string(kernel.id()) + " (" +
                                               std::to_string(kLargest) + ", u32 dimensions).");
  }
  problem.m = problem.n = problem.k = static_cast<std::uint32_t>(size);
  return problem;
}

// The problem of --size for `kernel`, checked against every limit before anything is allocated.
Result<kernels::Problem> checked_problem_of_size(const gpu::Device& device,
                                                 const kernels::KernelDefinition& kernel,
                                                 std::uint64_t size) {
  Result<kernels::Problem> problem = problem_of_size(kernel, size);
  if (!problem) return problem;
  WF_TRY(forge::check_problem_fits(device, kernel, *problem));
  return problem;
}

// --size as digits only: an unsigned option would otherwise take "-1" as 2^64 - 1.
CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) return "";
        return "(" + text + ") is not a whole number";
      },
      "N");
}

bool is_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();  // the strict dump refuses invalid UTF-8
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// A user's WGSL file: it must exist, be non-empty text.
Result<std::string> read_source(const fs::path& path) {
  std::error_code error;
  if (!fs::exists(path, error)) {
    return Error(ErrorKind::kInvalidInput, "Source file " + path.string() + " does not exist.");
  }
  if (!fs::is_regular_file(path, error)) {
    return Error(ErrorKind::kInvalidInput, "Source " + path.string() + " is not a regular file.");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in && !in.eof()) {
    return Error(ErrorKind::kInvalidInput, "Source file " + path.string() + " cannot be read.");
  }
  std::string text = bytes.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Error(ErrorKind::kInvalidInput, "Source file " + path.string() + " is empty.");
  }
  if (text.find('\0') != std::string::npos || !is_utf8(text)) {
    return Error(ErrorKind::kInvalidInput, "Source file " + path.string() +
                                               " is not WGSL text (it holds NUL bytes or is not "
                                               "UTF-8).");
  }
  return text;
}

// Progress on a terminal: one line rewritten in place; nothing when stderr is not a terminal.
class ProgressLine {
 public:
  // `tunes`: how many (kernel, size bucket) entries will be tuned, for the estimate.
  explicit ProgressLine(std::size_t tunes)
      : enabled_(::isatty(STDERR_FILENO) != 0), estimate_(tunes, Clock::now()) {}
  ~ProgressLine() { clear(); }

  void kernel(std::size_t index, std::size_t count) {
    kernel_index_ = index;
    kernel_count_ = count;
  }
  void update(const forge::TuneProgress& progress) {
    const Clock::time_point now = Clock::now();
    estimate_.observe(progress, now);
    if (!enabled_ || progress.stage == "warning") return;
    const std::optional<double> left = estimate_.seconds_left(now);
    char eta[48];
    if (left) {
      std::snprintf(eta, sizeof eta, "ETA %.0f s", *left);
    } else {
      std::snprintf(eta, sizeof eta, "ETA after the first tune");
    }
    std::fprintf(stderr, "\r\033[K[%zu/%zu] %s: candidate %zu/%zu, %s  (%s)", kernel_index_ + 1,
                 kernel_count_, progress.kernel_id.c_str(), progress.candidate, progress.candidates,
                 progress.stage.c_str(), eta);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool shown_ = false;
  forge::RunEstimate estimate_;
  std::size_t kernel_index_ = 0;
  std::size_t kernel_count_ = 1;
};

struct CertifyArguments {
  std::string kernel;
  std::string schedule;
  std::string source;
  std::uint64_t seed = 0;
  bool json = false;
};

int run_certify(const GlobalOptions& options, const CertifyArguments& arguments) {
  Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(arguments.kernel);
  if (!kernel) return report_error(kernel.error());
  Result<Schedule> schedule = kernels::parse_schedule_overrides(**kernel, arguments.schedule);
  if (!schedule) return report_error(schedule.error());
  forge::CertifyOptions certify_options;
  certify_options.seed = arguments.seed;
  if (!arguments.source.empty()) {
    Result<std::string> source = read_source(arguments.source);
    if (!source) return report_error(source.error());
    certify_options.source = *source;
  }
  Result<ManifestCache> cache = open_cache(options, CacheUse::kWrite);
  if (!cache) return report_error(cache.error());
  Result<OpenDevice> device = open_device(options);
  if (!device) return report_error(device.error());
  Result<CertificationManifest> manifest =
      forge::certify(**device, **kernel, *schedule, certify_options);
  if (!manifest) {
    // WGSL that a user wrote and that does not compile is bad input, not a machine failure.
    if (certify_options.source && manifest.error().kind() == ErrorKind::kCompilation) {
      report_error(manifest.error());
      return kExitBadInput;
    }
    // A user's WGSL that does not finish within the watchdog is rejected: the answer is "no".
    if (certify_options.source && (*device)->has_unfinished_work()) {
      report_error(manifest.error());
      return kExitRejected;
    }
    return report_error(manifest.error());
  }
  Result<fs::path> stored = forge::store_certification_evidence(*cache, *manifest);
  if (arguments.json) {
    std::cout << serialize_manifest(*manifest).value();
  } else {
    std::size_t passed = 0;
    for (const CertificationCase& one : manifest->cases) {
      if (one.passed()) ++passed;
    }
    std::cout << manifest->kernel_id << " " << manifest->schedule.to_string() << ": "
              << verdict_name(manifest->verdict) << " (" << passed << " of "
              << manifest->cases.size() << " cases passed; tolerance: " << manifest->tolerance
              << ")\n";
    if (manifest->verdict == Verdict::kRejected) {
      std::cout << "first mismatch: " << forge::first_failure(*manifest) << "\n";
    }
    if (stored) std::cout << "evidence: " << stored->string() << "\n";
  }
  if (!stored) return report_error(stored.error());
  return manifest->verdict == Verdict::kCertified ? kExitOk : kExitRejected;
}

struct TuneArguments {
  std::vector<std::string> kernels;  // auto-tune-all: only these (default: every builtin)
  // Size buckets by label, "main" or "all" (default: auto-tune-all every bucket, tune the main).
  std::vector<std::string> sizes;
  std::uint32_t budget = 12;
  std::uint64_t size = 0;
  std::uint64_t seed = 0;
  bool json = false;
  bool retune = false;
  bool force = false;         // tune --force: replace the entry without the stored winner competing
  bool trace = false;         // one line per candidate on stderr
  double lease_seconds = 30;  // auto-tune-all: AutoTuneOptions::lease_duration
  std::string adapters;       // auto-tune-all --adapters: "all" or indices (adapter_workers.hpp)
};

// auto-tune-all's own command line for one worker of --adapters (the global options and
// --adapter are the workers' runner's): the same kernels, sizes and search, as JSON.
std::vector<std::string> worker_arguments(const TuneArguments& arguments) {
  std::vector<std::string> line = {"auto-tune-all"};
  line.insert(line.end(), arguments.kernels.begin(), arguments.kernels.end());
  char lease[32];
  std::snprintf(lease, sizeof lease, "%.3f", arguments.lease_seconds);
  line.insert(line.end(), {"--budget", std::to_string(arguments.budget), "--seed",
                           std::to_string(arguments.seed), "--lease", lease, "--json"});
  if (!arguments.sizes.empty()) {
    std::string sizes;
    for (const std::string& size : arguments.sizes) sizes += (sizes.empty() ? "" : ",") + size;
    line.insert(line.end(), {"--sizes", sizes});
  }
  if (arguments.retune) line.push_back("--retune");
  if (arguments.trace) line.push_back("--trace");
  return line;
}

// A candidate's outcome as one line: its first timing, or the stage it failed at and why.
std::string trace_line(const forge::TuneProgress& step) {
  char head[160];
  std::snprintf(head, sizeof head, "trace: %s candidate %zu/%zu ", step.kernel_id.c_str(),
                step.candidate, step.candidates);
  std::string line = head + step.schedule->to_string() + ": ";
  if (step.stage == "resumed") line += "resumed, measured by an earlier tune: ";
  if (step.stage == "failed before") line += "not tried, it failed in an earlier tune: ";
  if (step.timing) {
    char timing[160];
    std::snprintf(timing, sizeof timing, "median %.1f us (p10 %.1f, p90 %.1f, %llu samples)",
                  step.timing->median_ns / 1e3, step.timing->p10_ns / 1e3,
                  step.timing->p90_ns / 1e3,
                  static_cast<unsigned long long>(step.timing->sample_count));
    return line + timing;
  }
  return line + "failed at " + failure_stage_name(step.failure->stage) + ": " +
         one_line(step.failure->message);
}

// Where a tune's time went, one line: "trace: affine_f32 took 8.1 s: inputs 0.3, oracle 1.2, ...",
// each phase the wall time the tune spent in it (TimeBreakdown), the rest as "other".
std::string breakdown_line(const std::string& kernel_id, const forge::TimeBreakdown& time) {
  char text[400];
  std::snprintf(text, sizeof text,
                "trace: %s took %.2f s: inputs %.2f, oracle %.2f, compile %.2f, certification "
                "runs %.2f, upload %.2f, bind %.2f, warm-up %.2f, timing %.2f, bookkeeping %.2f, "
                "other %.2f",
                kernel_id.c_str(), time.total, time.inputs, time.oracle, time.compile,
                time.gpu_runs, time.upload, time.bind, time.warmup, time.timing, time.bookkeeping,
                time.unattributed());
  return text;
}

nlohmann::json breakdown_json(const forge::TimeBreakdown& time) {
  return {
      {"inputs", time.inputs},        {"oracle", time.oracle}, {"compile", time.compile},
      {"gpu_runs", time.gpu_runs},    {"upload", time.upload}, {"bind", time.bind},
      {"warmup", time.warmup},        {"timing", time.timing}, {"bookkeeping", time.bookkeeping},
      {"other", time.unattributed()}, {"total", time.total}};
}

// A schedule in JSON output: an object of its knobs, as in the manifests.
nlohmann::json schedule_json(const Schedule& schedule) {
  return nlohmann::json::parse(canonical_json(schedule).value());
}

// A rate with at least three significant digits and its unit ("2880 GB/s", "0.0123 G keys/s").
std::string rate_text(const std::pair<double, std::string>& rate) {
  char text[48];
  const double value = rate.first;
  const char* format = value >= 100 ? "%.0f %s" : value >= 10 ? "%.1f %s" : "%.3g %s";
  std::snprintf(text, sizeof text, format, value, rate.second.c_str());
  return text;
}

// A speed-up such as "1.84x" or "124.3x".
std::string speedup_text(double speedup) {
  char text[32];
  std::snprintf(text, sizeof text, speedup < 10 ? "%.2fx" : "%.1fx", speedup);
  return text;
}

TextTable auto_tune_table() {
  using Align = TextTable::Align;
  return TextTable({{"kernel"},
                    {"size", Align::kRight},
                    {"status"},
                    {"winner schedule"},
                    {"median", Align::kRight},
                    {"throughput", Align::kRight},
                    {"vs default", Align::kRight},
                    {"cases", Align::kRight}});
}

// The problem a tuning manifest's winner was timed at. GEMM problems are recorded as m * n * k
// and tuned square.
kernels::Problem tuned_problem(const kernels::KernelDefinition& kernel,
                               const TuningManifest& manifest) {
  const bool gemm = kernel.tuning_problem(false).m != 0;
  const std::uint64_t recorded = manifest.context.problem_size;
  return problem_of_size(kernel, gemm ? static_cast<std::uint64_t>(
                                            std::llround(std::cbrt(static_cast<double>(recorded))))
                                      : recorded)
      .value();  // a recorded m * n * k has a cube root that fits u32
}

std::vector<std::string> row_cells(const kernels::KernelDefinition& kernel,
                                   const std::string& bucket, const TuningManifest& manifest,
                                   const char* status, std::size_t certified_cases) {
  const kernels::Problem problem = tuned_problem(kernel, manifest);
  const double median = manifest.result.winner.timing.median_ns;
  std::optional<double> speedup = manifest.speedup_over_baseline();
  return {manifest.kernel_id,
          bucket,
          status,
          manifest.result.winner.schedule.to_string(),
          format_time(median),
          rate_text(forge::throughput(kernel, problem, median)),
          speedup ? speedup_text(*speedup) : "-",
          std::to_string(certified_cases)};
}

// The status column of a row that did not fail.
const char* row_status_column(forge::AutoTuneRow::Status status) {
  return status == forge::AutoTuneRow::Status::kTunedElsewhere
             ? "other"
             : forge::auto_tune_status_name(status);
}

// A tuned row in JSON, with the field names and units of `bench --json` (problem, unit,
// tuned_* and default_*), so that the two read alike.
nlohmann::json row_json(const forge::AutoTuneRow& row) {
  nlohmann::json json = {
      {"kernel", row.kernel_id}, {"bucket", row.bucket}, {"certified_cases", row.certified_cases}};
  json["status"] = forge::auto_tune_status_name(row.status);
  if (!row.decision.empty()) json["decision"] = row.decision;
  Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(row.kernel_id);
  if (row.manifest && kernel) {
    const TuningManifest& manifest = *row.manifest;
    const kernels::Problem problem = tuned_problem(**kernel, manifest);
    const CandidateResult& winner = manifest.result.winner;
    const std::pair<double, std::string> rate =
        forge::throughput(**kernel, problem, winner.timing.median_ns);
    json["cache_key"] = manifest.cache_key;
    json["problem"] = problem.to_string();
    json["unit"] = rate.second;
    json["tuned_schedule"] = schedule_json(winner.schedule);
    json["tuned_median_ns"] = winner.timing.median_ns;
    json["tuned_rate"] = rate.first;
    json["timing_source"] = timing_source_name(winner.timing.source);
    if (const std::optional<CandidateResult>& baseline = manifest.context.baseline) {
      json["default_schedule"] = schedule_json(baseline->schedule);
      json["default_median_ns"] = baseline->timing.median_ns;
      json["default_rate"] = forge::throughput(**kernel, problem, baseline->timing.median_ns).first;
    }
    if (auto speedup = manifest.speedup_over_baseline()) json["speedup_over_default"] = *speedup;
  }
  if (row.breakdown) json["time_breakdown_s"] = breakdown_json(*row.breakdown);
  if (!row.message.empty()) json["error"] = row.message;
  return json;
}

// The size buckets to tune, as AutoTuneOptions::sizes: --size N takes the bucket nearest to N
// (tuned at N itself); otherwise --sizes, where "all" is every bucket, and each other label must
// name a bucket of at least one requested kernel (or be "main").
Result<std::vector<std::string>> chosen_sizes(
    const gpu::Device& device, const TuneArguments& arguments,
    const std::vector<const kernels::KernelDefinition*>& requested) {
  if (arguments.size != 0 && requested.size() == 1) {
    Result<kernels::Problem> problem = problem_of_size(*requested.front(), arguments.size);
    if (!problem) return std::move(problem).error();
    const std::vector<kernels::SizeBucket> buckets =
        forge::size_buckets(device, *requested.front());
    return std::vector<std::string>{buckets[kernels::nearest_bucket(buckets, *problem)].label};
  }
  if (std::find(arguments.sizes.begin(), arguments.sizes.end(), "all") != arguments.sizes.end()) {
    return std::vector<std::string>{};
  }
  std::vector<std::string> labels = {"main", "all"};
  for (const kernels::KernelDefinition* kernel : requested) {
    for (const kernels::SizeBucket& bucket : forge::size_buckets(device, *kernel)) {
      if (std::find(labels.begin(), labels.end(), bucket.label) == labels.end()) {
        labels.push_back(bucket.label);
      }
    }
  }
  for (const std::string& size : arguments.sizes) {
    if (std::find(labels.begin(), labels.end(), size) != labels.end()) continue;
    std::string known;
    for (const std::string& label : labels) known += (known.empty() ? "" : ", ") + label;
    const std::vector<std::string_view> names(labels.begin(), labels.end());
    const std::optional<std::string> meant = closest_match(size, names);
    return Error(ErrorKind::kInvalidInput, "--sizes: no kernel asked for has a size bucket '" +
                                               size + "'" +
                                               (meant ? " (did you mean '" + *meant + "'?)" : "") +
                                               "; the buckets on this "
                                               "adapter are: " +
                                               known + ".");
  }
  return arguments.sizes;
}

int run_auto_tune(const GlobalOptions& options, const TuneArguments& arguments,
                  const std::vector<const kernels::KernelDefinition*>& only) {
  // Read-only until it is known that something will be tuned: a cache that holds every kernel
  // serves a read-only directory.
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  Result<OpenDevice> device = open_device(options);
  if (!device) return report_error(device.error());
  forge::AutoTuneOptions tune_options;
  tune_options.retune = arguments.retune;
  tune_options.force = arguments.force;
  tune_options.tune.budget = arguments.budget;
  tune_options.tune.seed = arguments.seed;
  tune_options.lease_duration =
      std::chrono::milliseconds(static_cast<std::int64_t>(arguments.lease_seconds * 1000));
  // --timeout bounds every GPU wait, also the wait for a timed-out candidate to leave the GPU.
  if (options.timeout) tune_options.tune.drain_timeout = *options.timeout;
  const std::vector<const kernels::KernelDefinition*>& requested =
      only.empty() ? kernels::builtin_kernels() : only;
  Result<std::vector<std::string>> sizes = chosen_sizes(**device, arguments, requested);
  if (!sizes) return report_error(sizes.error());
  tune_options.sizes = std::move(*sizes);
  if (arguments.size != 0 && only.size() == 1) {
    Result<kernels::Problem> problem =
        checked_problem_of_size(**device, *only.front(), arguments.size);
    if (!problem) return report_error(problem.error());
    tune_options.tune.problem = *problem;
  }
  // Proving the cache writable still comes before any GPU work is spent on tuning.
  std::size_t tunes = 0;
  for (const kernels::KernelDefinition* kernel : requested) {
    for (const kernels::SizeBucket& bucket :
         forge::selected_buckets(**device, *kernel, tune_options.sizes)) {
      if (forge::would_tune(**device, *cache, *kernel, bucket, tune_options)) ++tunes;
    }
  }
  if (tunes > 0) {
    if (Status writable = check_cache_writable(*cache); !writable) {
      return report_error(writable.error());
    }
  }
  ProgressLine progress(tunes);
  tune_options.tune.progress = [&progress,
                                trace = arguments.trace](const forge::TuneProgress& step) {
    if (trace && (step.stage == "timed" || step.stage == "failed" || step.stage == "resumed" ||
                  step.stage == "failed before")) {
      progress.clear();
      std::fprintf(stderr, "%s\n", trace_line(step).c_str());
    }
    if (step.stage == "warning") {
      progress.clear();
      std::fprintf(stderr, "wgsl-forge: warning: %s: %s\n", step.kernel_id.c_str(),
                   one_line(step.message).c_str());
    }
    if (trace && step.breakdown) {
      progress.clear();
      std::fprintf(stderr, "%s\n", breakdown_line(step.kernel_id, *step.breakdown).c_str());
    }
    progress.update(step);
  };
  tune_options.on_kernel = [&progress](std::size_t index, std::size_t count, const std::string&) {
    progress.kernel(index, count);
  };
  const std::vector<forge::AutoTuneRow> rows =
      forge::auto_tune_all(**device, *cache, requested, tune_options);
  progress.clear();
  bool failed = false;
  if (arguments.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const forge::AutoTuneRow& row : rows) list.push_back(row_json(row));
    std::cout << nlohmann::json{{"adapter", (*device)->adapter().identity.name},
                                {"topology_hash", (*device)->adapter().topology_hash},
                                {"cache", cache->root().string()},
                                {"kernels", list}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("adapter %s, topology %s, cache %s\n", (*device)->adapter().identity.name.c_str(),
                (*device)->adapter().topology_hash.substr(0, 16).c_str(), cache->root().c_str());
  }
  TextTable table = auto_tune_table();
  for (const forge::AutoTuneRow& row : rows) {
    if (row.status == forge::AutoTuneRow::Status::kFailed) {
      failed = true;
      std::fprintf(stderr, "wgsl-forge: error: %s (size bucket %s): %s\n", row.kernel_id.c_str(),
                   row.bucket.c_str(), one_line(row.message).c_str());
      table.add_row({row.kernel_id, row.bucket, "FAILED", "(see the error above)"});
      continue;
    }
    const kernels::KernelDefinition& kernel = *kernels::find_kernel(row.kernel_id).value();
    table.add_row(row_cells(kernel, row.bucket, *row.manifest, row_status_column(row.status),
                            row.certified_cases));
    if (!row.decision.empty()) {
      table.add_note(row.kernel_id + " " + row.bucket + ": " + row.decision);
    }
  }
  if (!arguments.json) std::printf("%s", table.to_string().c_str());
  return failed ? kExitRuntime : kExitOk;
}

struct BenchArguments {
  std::vector<std::string> kernels;
  std::uint64_t size = 0;
  std::uint32_t bins = 0;        // histogram_u32's bin count; 0: the tuning problem's
  std::uint64_t build_size = 0;  // hash_join_u32's build rows; 0: the tuning problem's
  std::uint64_t groups = 0;      // group_by_sum_f32's distinct keys; 0: the tuning problem's
  // segmented_reduce_sum_f32's segment length (n / length segments); 0: the tuning problem's
  std::uint64_t segment = 0;
  std::string schedule;  // knobs to time instead of the tuned schedule (one kernel only)
  std::string source;    // WGSL to time with that schedule's plan instead of its generated code
  std::uint32_t samples = 20;
  bool json = false;
  bool passes = false;  // also time each pass of the tuned (else default) schedule
};

nlohmann::json passes_json(const std::vector<forge::PassTime>& passes) {
  nlohmann::json list = nlohmann::json::array();
  for (const forge::PassTime& pass : passes) {
    list.push_back({{"entry_point", pass.entry_point},
                    {"workgroups", pass.workgroups},
                    {"median_ns", pass.median_ns},
                    {"cumulative_median_ns", pass.cumulative_median_ns}});
  }
  return list;
}

// The passes' times summed per entry point, in plan order, with their share of the plan: the
// notes under a bench row.
std::vector<std::string> passes_lines(const std::vector<forge::PassTime>& passes,
                                      const char* schedule_label) {
  struct Total {
    std::string entry_point;
    std::size_t count = 0;
    double median_ns = 0;
  };
  std::vector<Total> totals;
  double all = 0;
  for (const forge::PassTime& pass : passes) {
    auto total = std::find_if(totals.begin(), totals.end(), [&](const Total& one) {
      return one.entry_point == pass.entry_point;
    });
    if (total == totals.end()) total = totals.insert(totals.end(), {pass.entry_point, 0, 0});
    ++total->count;
    total->median_ns += pass.median_ns;
    all += pass.median_ns;
  }
  std::vector<std::string> lines = {
      std::string("passes of the ") + schedule_label +
      " schedule (each timed as the plan up to it minus the plan before it):"};
  for (const Total& total : totals) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-24s %4zu pass%s %11s %6.1f%%", total.entry_point.c_str(),
                  total.count, total.count == 1 ? "  " : "es", format_time(total.median_ns).c_str(),
                  all > 0 ? 100 * total.median_ns / all : 0.0);
    lines.push_back(line);
  }
  return lines;
}

// Which schedule a row's passes were timed on.
const char* passes_schedule(const forge::BenchRow& row) {
  if (row.given) return "given";
  return row.tuned ? "tuned" : "default";
}

// What bench times: the kernels, and the schedule and WGSL source the user gave, if any.
struct BenchSelection {
  std::vector<const kernels::KernelDefinition*> kernels;
  std::optional<Schedule> schedule;
  std::optional<std::string> source;
};

Result<BenchSelection> select_bench(const BenchArguments& arguments) {
  BenchSelection selection;
  for (const std::string& id : arguments.kernels) {
    WF_TRY_ASSIGN(const kernels::KernelDefinition* kernel, kernels::find_kernel(id));
    selection.kernels.push_back(kernel);
  }
  if (selection.kernels.empty()) selection.kernels = kernels::builtin_kernels();
  if (!arguments.schedule.empty()) {
    if (selection.kernels.size() != 1) {
      return Error(ErrorKind::kInvalidInput,
                   "--schedule needs exactly one KERNEL, since knobs are per kernel.");
    }
    WF_TRY_ASSIGN(selection.schedule, kernels::parse_schedule_overrides(*selection.kernels.front(),
                                                                        arguments.schedule));
  }
  if (!arguments.source.empty()) {
    if (!selection.schedule) {
      return Error(ErrorKind::kInvalidInput,
                   "--source needs --schedule: the knobs of the plan (buffers, passes, grid) that "
                   "the WGSL is written to.");
    }
    WF_TRY_ASSIGN(selection.source, read_source(arguments.source));
  }
  return selection;
}

// One kernel timed, with the copy ceiling its rate is compared with.
struct BenchLine {
  const kernels::KernelDefinition* kernel = nullptr;
  kernels::Problem problem;
  std::string problem_text;
  forge::BenchRow row;
  forge::CopyCeiling ceiling;
};

struct BenchRates {
  std::pair<double, std::string> tuned;     // the kernel's own unit (GB/s, G keys/s, TFLOP/s)
  std::pair<double, std::string> fallback;  // of the default schedule
  double fraction_of_copy = 0;              // bytes per second of the faster, over the copy's
};

BenchRates rates_of(const BenchLine& line) {
  const forge::BenchRow& row = line.row;
  const double best_ns = row.tuned ? row.tuned->median_ns : row.default_timing.median_ns;
  const double ceiling_rate = static_cast<double>(line.ceiling.bytes) / line.ceiling.median_ns;
  const double bytes_rate = static_cast<double>(line.kernel->work(line.problem).bytes) / best_ns;
  return {forge::throughput(*line.kernel, line.problem, row.tuned ? row.tuned->median_ns : 0),
          forge::throughput(*line.kernel, line.problem, row.default_timing.median_ns),
          bytes_rate / ceiling_rate};
}

nlohmann::json bench_line_json(const BenchLine& line, bool with_passes) {
  const forge::BenchRow& row = line.row;
  const BenchRates rates = rates_of(line);
  const kernels::WorkAmount work = line.kernel->work(line.problem);
  nlohmann::json json = {
      {"kernel", line.kernel->id()},
      {"problem", line.problem_text},
      {"bytes_moved", work.bytes},
      {"flops", work.flops},
      {"unit", rates.tuned.second},
      {"default_schedule", schedule_json(row.default_schedule)},
      {"default_median_ns", row.default_timing.median_ns},
      {"default_rate", rates.fallback.first},
      {"copy_ceiling_gbps", static_cast<double>(line.ceiling.bytes) / line.ceiling.median_ns},
      {"copy_ceiling_kernel", line.ceiling.description},
      {"fraction_of_copy_ceiling", rates.fraction_of_copy},
      {"timing_source", timing_source_name(row.default_timing.source)}};
  if (row.tuned) {
    json["tuned_schedule"] = schedule_json(*row.tuned_schedule);
    json["tuned_source"] = row.given_source ? "given source" : (row.given ? "given" : "cache");
    json["tuned_median_ns"] = row.tuned->median_ns;
    json["tuned_rate"] = rates.tuned.first;
    json["speedup_over_default"] = row.default_timing.median_ns / row.tuned->median_ns;
  }
  if (with_passes) {
    json["passes_schedule"] = passes_schedule(row);
    json["passes"] = passes_json(row.passes);
  }
  return json;
}

// The tuned schedule's gain over the default, marked when the two medians are closer than the
// larger of their MADs and 1 % (the re-tune rule's noise): such a gain is not a difference.
std::string gain_text(const forge::BenchRow& row) {
  if (!row.tuned) return "-";
  const double tuned = row.tuned->median_ns;
  const double fallback = row.default_timing.median_ns;
  const double noise = std::max({row.tuned->mad_ns, row.default_timing.mad_ns, 0.01 * fallback});
  return speedup_text(fallback / tuned) + (std::abs(fallback - tuned) <= noise ? " (noise)" : "");
}

TextTable bench_table() {
  using Align = TextTable::Align;
  return TextTable({{"kernel"},
                    {"problem"},
                    {"tuned", Align::kRight},
                    {"tuned rate", Align::kRight},
                    {"default", Align::kRight},
                    {"default rate", Align::kRight},
                    {"of copy", Align::kRight},
                    {"gain", Align::kRight}});
}

void add_bench_line(TextTable& table, const BenchLine& line, const BenchArguments& arguments) {
  const forge::BenchRow& row = line.row;
  const BenchRates rates = rates_of(line);
  char of_copy[16];
  std::snprintf(of_copy, sizeof of_copy, "%.0f%%", 100 * rates.fraction_of_copy);
  table.add_row({std::string(line.kernel->id()), line.problem_text,
                 row.tuned ? format_time(row.tuned->median_ns) : "-",
                 row.tuned ? rate_text(rates.tuned) : "(not tuned)",
                 format_time(row.default_timing.median_ns), rate_text(rates.fallback), of_copy,
                 gain_text(row)});
  if (row.given_source) {
    table.add_note("timed as tuned: " + arguments.source + " (uncertified) with the plan of " +
                   row.tuned_schedule->to_string());
  } else if (row.given) {
    table.add_note("timed as tuned: the given " + row.tuned_schedule->to_string());
  }
  if (arguments.passes) {
    for (const std::string& note : passes_lines(row.passes, passes_schedule(row)))
      table.add_note(note);
  }
}

void print_bench_header(const gpu::AdapterInfo& adapter) {
  std::printf("adapter %s (%s %s), topology %s\n", adapter.identity.name.c_str(),
              adapter.identity.driver.c_str(), adapter.identity.driver_info.c_str(),
              adapter.topology_hash.substr(0, 16).c_str());
}

void print_bench_json(const gpu::AdapterInfo& adapter, const nlohmann::json& rows) {
  std::cout << nlohmann::json{{"adapter", adapter.identity.name},
                              {"driver", adapter.identity.driver_info},
                              {"topology_hash", adapter.topology_hash},
                              {"library_blake3", adapter.library_blake3},
                              {"kernels", rows}}
                   .dump(2)
            << "\n";
}

int run_bench(const GlobalOptions& options, const BenchArguments& arguments) {
  Result<BenchSelection> selection = select_bench(arguments);
  if (!selection) return report_error(selection.error());
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  Result<OpenDevice> device = open_device(options);
  if (!device) return report_error(device.error());
  const gpu::AdapterInfo& adapter = (*device)->adapter();
  if (selection->schedule) {
    Status legal = selection->kernels.front()->check_schedule(*selection->schedule,
                                                              forge::capabilities_of(adapter));
    if (!legal) return report_error(legal.error());
  }
  // Every kernel's problem is checked before anything is printed or allocated.
  std::vector<kernels::Problem> problems;
  for (const kernels::KernelDefinition* kernel : selection->kernels) {
    Result<kernels::Problem> problem =
        kernel->tuning_problem(adapter.identity.device_type == "Cpu");
    if (arguments.size != 0) problem = checked_problem_of_size(**device, *kernel, arguments.size);
    if (!problem) return report_error(problem.error());
    if (arguments.segment != 0 && problem->segments != 0) {
      problem->segments = std::max<std::uint64_t>(1, problem->elements / arguments.segment);
      if (Status fits = forge::check_problem_fits(**device, *kernel, *problem); !fits) {
        return report_error(fits.error());
      }
    }
    problems.push_back(*problem);
  }
  if (!arguments.json) print_bench_header(adapter);
  TextTable table = bench_table();
  gpu::TimingOptions timing;
  timing.samples = arguments.samples;
  std::map<std::uint64_t, forge::CopyCeiling> ceilings;
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < selection->kernels.size(); ++i) {
    BenchLine line{selection->kernels[i], problems[i], problems[i].to_string(), {}, {}};
    if (arguments.build_size != 0 && line.kernel->id() == "hash_join_u32") {
      line.problem.build_elements = arguments.build_size;
      line.problem_text = line.problem.to_string();
    }
    if (arguments.groups != 0 && line.kernel->id() == "group_by_sum_f32") {
      line.problem.max_groups = arguments.groups;
      line.problem_text = line.problem.to_string();
    }
    if (arguments.bins != 0 && line.kernel->id() == "histogram_u32") {
      line.problem.bins = arguments.bins;
      line.problem_text += " bins=" + std::to_string(arguments.bins);
    }
    Result<forge::BenchRow> row =
        forge::bench_kernel(**device, *cache, *line.kernel, line.problem, timing, arguments.passes,
                            selection->schedule, selection->source);
    if (!row) {
      const int exit_code = report_error(row.error());
      // WGSL that a user wrote and that does not compile is bad input, not a machine failure.
      return selection->source && row.error().kind() == ErrorKind::kCompilation ? kExitBadInput
                                                                                : exit_code;
    }
    line.row = std::move(row).value();
    const std::uint64_t bytes = line.kernel->work(line.problem).bytes;
    if (!ceilings.count(bytes)) {
      Result<forge::CopyCeiling> ceiling = forge::measure_copy_ceiling(**device, bytes, timing);
      if (!ceiling) return report_error(ceiling.error());
      ceilings[bytes] = *ceiling;
    }
    line.ceiling = ceilings[bytes];
    rows.push_back(bench_line_json(line, arguments.passes));
    add_bench_line(table, line, arguments);
  }
  if (arguments.json) {
    print_bench_json(adapter, rows);
    return kExitOk;
  }
  std::printf("%s", table.to_string().c_str());
  for (const auto& [bytes, ceiling] : ceilings) {
    std::printf(
        "copy ceiling for %llu bytes: %.1f GB/s (%s)\n", static_cast<unsigned long long>(bytes),
        static_cast<double>(ceiling.bytes) / ceiling.median_ns, ceiling.description.c_str());
  }
  return kExitOk;
}

}  // namespace

namespace {

void add_certify(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  auto certify_arguments = std::make_shared<CertifyArguments>();
  CLI::App* certify = app.add_subcommand(
      "certify", "Run a kernel against its CPU oracle on the adapter; store the evidence");
  certify->add_option("KERNEL", certify_arguments->kernel, "Kernel id")->required();
  certify->add_option("--schedule", certify_arguments->schedule, "Knobs to change, k=v,...");
  certify->add_option("--source", certify_arguments->source,
                      "Certify this WGSL file instead (same bindings, entry points and plan)");
  certify->add_option("--seed", certify_arguments->seed, "Seed of the inputs (default: fresh)");
  certify->add_flag("--json", certify_arguments->json, "Print the certification manifest");
  certify->callback([&run, &options, certify_arguments] {
    run = [&options, certify_arguments] { return run_certify(options, *certify_arguments); };
  });
}

void add_tune(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  auto tune_arguments = std::make_shared<TuneArguments>();
  auto tune_kernel = std::make_shared<std::string>();
  CLI::App* tune = app.add_subcommand("tune", "Find the fastest certified schedule of a kernel");
  tune->add_option("KERNEL", *tune_kernel, "Kernel id")->required();
  tune->add_option("--budget", tune_arguments->budget, "Most candidates to time (default 12)")
      ->check(CLI::Range(1u, 100000u));
  tune->add_option("--size", tune_arguments->size,
                   "Problem size: elements (GEMM: m = n = k); default: the kernel's own")
      ->check(whole_number());
  tune->add_option("--sizes", tune_arguments->sizes,
                   "Size buckets to tune, by label (2^20, 1024^3), main or all; default: main. "
                   "--size N tunes the bucket nearest to N, at N")
      ->delimiter(',')
      // One word per --sizes (comma-separated or repeated): the words after it are kernels.
      ->allow_extra_args(false);
  tune->add_option("--seed", tune_arguments->seed, "Seed of the search and inputs");
  tune->add_flag("--json", tune_arguments->json, "Print JSON");
  tune->add_flag("--trace", tune_arguments->trace,
                 "Print each candidate's first timing or failure on stderr");
  tune->add_flag("--force", tune_arguments->force,
                 "Replace the cached entry with this search's winner even when the stored winner "
                 "is faster (by default the stored winner competes and is replaced only by a "
                 "certified schedule faster beyond noise)");
  tune->callback([&run, &options, tune_arguments, tune_kernel] {
    run = [&options, tune_arguments, tune_kernel] {
      Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(*tune_kernel);
      if (!kernel) return report_error(kernel.error());
      TuneArguments arguments = *tune_arguments;
      arguments.retune = true;  // `tune` always searches again; see --force
      if (arguments.sizes.empty()) arguments.sizes = {"main"};
      return run_auto_tune(options, arguments, {*kernel});
    };
  });
}

void add_bench(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  auto bench_arguments = std::make_shared<BenchArguments>();
  CLI::App* bench = app.add_subcommand(
      "bench", "Time tuned and default schedules against the adapter's copy ceiling");
  bench->add_option("KERNEL", bench_arguments->kernels, "Kernel ids (default: all)");
  bench
      ->add_option("--size", bench_arguments->size,
                   "Problem size: elements (GEMM: m = n = k); default: the kernel's tuning size")
      ->check(whole_number());
  bench
      ->add_option("--bins", bench_arguments->bins,
                   "Bins of histogram_u32 (default: its tuning problem's 256)")
      ->check(CLI::Range(1u, 4096u));
  bench
      ->add_option("--build-size", bench_arguments->build_size,
                   "Build rows of hash_join_u32 (default: its tuning problem's, n / 256)")
      ->check(whole_number());
  bench
      ->add_option("--groups", bench_arguments->groups,
                   "Distinct keys of group_by_sum_f32, its max_groups (default: its tuning "
                   "problem's 4096)")
      ->check(whole_number());
  bench
      ->add_option("--segment", bench_arguments->segment,
                   "Segment length of segmented_reduce_sum_f32: n / LENGTH even segments "
                   "(default: its tuning problem's 256)")
      ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()));
  bench->add_option("--schedule", bench_arguments->schedule,
                    "Time these knobs (k=v,...; the rest default) in place of the tuned schedule; "
                    "uncertified: certify it first");
  bench->add_option("--source", bench_arguments->source,
                    "With --schedule: time this WGSL file, written to that schedule's plan, in "
                    "place of its generated code (uncertified: certify --source checks it)");
  bench->add_option("--samples", bench_arguments->samples, "Samples per measurement (default 20)")
      ->check(CLI::Range(1u, 2000u));
  bench->add_flag("--json", bench_arguments->json, "Print JSON");
  bench->add_flag("--passes", bench_arguments->passes,
                  "Also time each pass of the tuned (else default) schedule");
  bench->callback([&run, &options, bench_arguments] {
    run = [&options, bench_arguments] { return run_bench(options, *bench_arguments); };
  });
}

void add_auto_tune_all(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  auto all_arguments = std::make_shared<TuneArguments>();
  CLI::App* all = app.add_subcommand("auto-tune-all",
                                     "Tune every builtin kernel not yet tuned for this adapter");
  all->add_option("KERNEL", all_arguments->kernels, "Only these kernels (default: all)");
  all->add_option("--budget", all_arguments->budget, "Most candidates to time per kernel")
      ->check(CLI::Range(1u, 100000u));
  all->add_option("--sizes", all_arguments->sizes,
                  "Only these size buckets, by label (2^20, 1024^3) or main; default: all of "
                  "each kernel's buckets (wgsl-forge kernels lists them); comma-separated "
                  "or repeated")
      ->delimiter(',')
      // One word per --sizes: the words after it are kernel ids.
      ->allow_extra_args(false);
  all->add_option("--seed", all_arguments->seed, "Seed of the search and inputs");
  all->add_flag("--retune", all_arguments->retune,
                "Tune again where the cache has a result; the stored winner competes and is "
                "replaced only by a certified schedule faster beyond noise");
  all->add_option("--lease", all_arguments->lease_seconds,
                  "Seconds a claim on a (kernel, size bucket) lasts unless renewed (on the remote "
                  "store, else in the cache directory); a node that dies mid-tune holds its entry "
                  "up this long (a dead process of this host holds no local lease; default 30)")
      ->check(CLI::Range(0.2, 3600.0));
  all->add_option("--adapters", all_arguments->adapters,
                  "Run one worker process per adapter: 'all' or indices such as 0,2 (wgsl-forge "
                  "adapters numbers them; one may repeat). Workers of one topology split the "
                  "work by the leases; one table of every worker's rows");
  all->add_flag("--json", all_arguments->json, "Print JSON");
  all->add_flag("--trace", all_arguments->trace,
                "Print each candidate's first timing or failure on stderr");
  all->callback([&run, &options, all_arguments] {
    run = [&options, all_arguments] {
      std::vector<const kernels::KernelDefinition*> only;
      for (const std::string& id : all_arguments->kernels) {
        Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(id);
        if (!kernel) return report_error(kernel.error());
        only.push_back(*kernel);
      }
      if (!all_arguments->adapters.empty()) {
        if (options.adapter_index) {
          return report_error(Error(ErrorKind::kInvalidInput,
                                    "--adapter and --adapters cannot be given together (each "
                                    "worker of --adapters gets its own --adapter)."));
        }
        Result<std::vector<std::size_t>> adapters =
            parse_adapter_list(options, all_arguments->adapters);
        if (!adapters) return report_error(adapters.error());
        Result<ManifestCache> cache = open_cache(options);
        if (!cache) return report_error(cache.error());
        return run_adapter_workers(options, cache->root(), *adapters,
                                   worker_arguments(*all_arguments), all_arguments->json);
      }
      return run_auto_tune(options, *all_arguments, only);
    };
  });
}

}  // namespace

void add_forge_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  add_certify(app, options, run);
  add_tune(app, options, run);
  add_bench(app, options, run);
  add_auto_tune_all(app, options, run);
}

}  // namespace wgsl_forge::cli
