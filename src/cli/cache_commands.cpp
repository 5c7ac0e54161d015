#include "cache_commands.hpp"

#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "wgsl_forge/bundle.hpp"
#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/kernels.hpp"
#include "wgsl_forge/manifest_json.hpp"
#include "wgsl_forge/version.hpp"

namespace wgsl_forge::cli {

namespace {

namespace fs = std::filesystem;

int run_info(const GlobalOptions& options) {
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  std::cout << "wgsl-forge " << kVersion << "\n"
            << "manifest schema: tuning v" << TuningManifest::kSchemaVersion << ", certification v"
            << CertificationManifest::kSchemaVersion << "\n"
            << "cache: " << cache->root().string() << "\n";
  return kExitOk;
}

// The size column of `cache list`: a tuning entry's bucket ("main" for the kernel's main one), a
// measurement's problem.
std::string size_text(const EntrySummary& summary) {
  switch (summary.kind) {
    case ManifestKind::kTuning:
      return summary.bucket.value_or("main");
    case ManifestKind::kMeasurement:
      return summary.problem;
    case ManifestKind::kCertification:
      return "-";
  }
  return "-";
}

// The time column: a median, where a measurement failed, or a certification's verdict.
std::string outcome_text(const EntrySummary& summary) {
  if (summary.failed_at) return std::string("failed at ") + failure_stage_name(*summary.failed_at);
  if (summary.median_ns) return format_time(*summary.median_ns);
  if (summary.verdict) {
    return std::string(verdict_name(*summary.verdict)) + ", " +
           std::to_string(summary.certification_cases) + " cases";
  }
  return "-";
}

// A certification manifest records no date: its file's time says when it was stored here.
std::pair<std::string, const char*> date_of(const DescribedEntry& described) {
  if (described.summary->kind == ManifestKind::kCertification) {
    return {described.stored_at, "stored"};
  }
  return {described.summary->date,
          described.summary->kind == ManifestKind::kTuning ? "tuned_at" : "recorded_at"};
}

nlohmann::json list_row_json(const DescribedEntry& described) {
  nlohmann::json row = {{"kind", manifest_kind_name(described.entry.kind)},
                        {"key", described.entry.key},
                        {"path", described.entry.path.string()}};
  if (!described.summary) {
    row["damage"] = described.damage;
    return row;
  }
  const EntrySummary& summary = *described.summary;
  const auto [date, date_source] = date_of(described);
  row["kernel"] = summary.kernel_id;
  row["revision"] = summary.kernel_revision;
  row["bucket"] = summary.kind == ManifestKind::kTuning ? nlohmann::json(size_text(summary))
                                                        : nlohmann::json(nullptr);
  row["problem_size"] = summary.kind == ManifestKind::kTuning ? nlohmann::json(summary.problem_size)
                                                              : nlohmann::json(nullptr);
  row["problem"] = summary.kind == ManifestKind::kMeasurement ? nlohmann::json(summary.problem)
                                                              : nlohmann::json(nullptr);
  row["schedule"] = summary.schedule.knobs();
  row["median_ns"] =
      summary.median_ns ? nlohmann::json(*summary.median_ns) : nlohmann::json(nullptr);
  row["failed_at"] = summary.failed_at ? nlohmann::json(failure_stage_name(*summary.failed_at))
                                       : nlohmann::json(nullptr);
  row["verdict"] =
      summary.verdict ? nlohmann::json(verdict_name(*summary.verdict)) : nlohmann::json(nullptr);
  row["date"] = date;
  row["date_source"] = date_source;
  return row;
}

int run_list(const GlobalOptions& options, bool as_json) {
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  Result<std::vector<DescribedEntry>> entries = cache->describe();
  if (!entries) return report_error(entries.error());
  if (as_json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const DescribedEntry& described : *entries) rows.push_back(list_row_json(described));
    std::cout << rows.dump(2) << "\n";
    return kExitOk;
  }
  using Align = TextTable::Align;
  TextTable table({{"kind"},
                   {"kernel"},
                   {"rev", Align::kRight},
                   {"size"},
                   {"schedule"},
                   {"time", Align::kRight},
                   {"date"},
                   {"key"}});
  std::size_t damaged = 0;
  for (const DescribedEntry& described : *entries) {
    const char* kind = manifest_kind_name(described.entry.kind);
    if (!described.summary) {
      ++damaged;
      table.add_row({kind, "(damaged)", "", "", "", "", "", described.entry.key});
      table.add_note(one_line(described.damage) + " (wgsl-forge cache verify)");
      continue;
    }
    const EntrySummary& summary = *described.summary;
    const auto [date, date_source] = date_of(described);
    table.add_row({kind, summary.kernel_id, std::to_string(summary.kernel_revision),
                   size_text(summary), summary.schedule.to_string(), outcome_text(summary),
                   date_source == std::string_view("stored") ? date + " (stored)" : date,
                   described.entry.key});
  }
  std::cout << table.to_string();
  std::cerr << entries->size() << " entries in " << cache->root().string();
  if (damaged > 0) std::cerr << ", " << damaged << " of them damaged";
  std::cerr << "\n";
  return kExitOk;
}

int run_show(const GlobalOptions& options, const std::string& key) {
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  Result<std::optional<TuningManifest>> tuning = cache->load_tuning(key);
  if (!tuning) return report_error(tuning.error());
  if (tuning->has_value()) {
    Result<std::string> bytes = serialize_manifest(**tuning);
    if (!bytes) return report_error(bytes.error());
    std::cout << *bytes;
    return kExitOk;
  }
  Result<std::optional<CertificationManifest>> certification = cache->load_certification(key);
  if (!certification) return report_error(certification.error());
  if (certification->has_value()) {
    Result<std::string> bytes = serialize_manifest(**certification);
    if (!bytes) return report_error(bytes.error());
    std::cout << *bytes;
    return kExitOk;
  }
  return report_error(Error(ErrorKind::kInvalidInput, "No tuning or certification entry has key " +
                                                          key + " in " + cache->root().string() +
                                                          " (wgsl-forge cache list shows them)."));
}

// What to run about an entry verify reports; empty when there is nothing to run.
std::string advice_for(EntryHealth health) {
  switch (health) {
    case EntryHealth::kCorrupt:
    case EntryHealth::kStale:
    case EntryHealth::kIllegalSchedule:
    case EntryHealth::kSourceMismatch:
      return " (wgsl-forge auto-tune-all tunes it again and replaces it)";
    case EntryHealth::kTemporary:
      return " (wgsl-forge cache prune removes it once it is an hour old)";
    case EntryHealth::kValid:
    case EntryHealth::kUnreadable:
    case EntryHealth::kForeign:
      return "";
  }
  return "";
}

int run_verify(const GlobalOptions& options, bool as_json) {
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  Result<VerifyReport> report = forge::verify_cache(*cache);
  if (!report) return report_error(report.error());
  if (as_json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const EntryCheck& check : report->checks) {
      rows.push_back({{"path", check.path.string()},
                      {"health", entry_health_name(check.health)},
                      {"message", check.message}});
    }
    std::cout << nlohmann::json{{"clean", report->clean()}, {"entries", rows}}.dump(2) << "\n";
  } else {
    std::size_t valid = 0;
    for (const EntryCheck& check : report->checks) {
      if (check.health == EntryHealth::kValid) {
        ++valid;
        continue;
      }
      std::cout << entry_health_name(check.health) << "  " << check.path.string() << "\n    "
                << check.message << advice_for(check.health) << "\n";
    }
    std::cout << valid << " valid entries, " << (report->checks.size() - valid)
              << " other files in " << cache->root().string() << "\n";
  }
  return report->clean() ? kExitOk : kExitRejected;
}

int run_prune(const GlobalOptions& options, std::int64_t older_than_seconds, bool as_json) {
  const std::int64_t longest = ManifestCache::kLongestTemporaryAge.count();
  if (older_than_seconds < 0 || older_than_seconds > longest) {
    return report_error(Error(ErrorKind::kInvalidInput,
                              "--older-than (" + std::to_string(older_than_seconds) +
                                  ") must be from 0 to " + std::to_string(longest) +
                                  " seconds (about 292 years, what the file clock can measure)."));
  }
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  Result<PruneReport> report =
      cache->remove_stale_temporaries(std::chrono::seconds(older_than_seconds));
  if (!report) return report_error(report.error());
  for (const PruneReport::Skipped& skipped : report->skipped) {
    std::cerr << "wgsl-forge: warning: skipped " << skipped.path.string() << ": " << skipped.reason
              << "\n";
  }
  if (as_json) {
    nlohmann::json removed = nlohmann::json::array();
    for (const fs::path& path : report->removed) removed.push_back(path.string());
    nlohmann::json skipped = nlohmann::json::array();
    for (const PruneReport::Skipped& one : report->skipped) {
      skipped.push_back({{"path", one.path.string()}, {"reason", one.reason}});
    }
    std::cout << nlohmann::json{{"removed", removed}, {"skipped", skipped}}.dump(2) << "\n";
  } else {
    for (const fs::path& path : report->removed) std::cout << "removed " << path.string() << "\n";
    std::cout << report->removed.size() << " temporary files older than " << older_than_seconds
              << " s removed from " << cache->root().string() << "\n";
  }
  return kExitOk;
}

int run_export(const GlobalOptions& options, const fs::path& file,
               const std::vector<std::string>& kernels, bool as_json) {
  for (const std::string& kernel : kernels) {
    if (Result<const kernels::KernelDefinition*> known = kernels::find_kernel(kernel); !known) {
      return report_error(known.error());
    }
  }
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  BundleExportOptions export_options;
  export_options.kernels = kernels;
  Result<BundleExportReport> report = export_bundle(*cache, file, export_options);
  if (!report) return report_error(report.error());
  for (const BundleExportReport::Skipped& skipped : report->damaged) {
    std::cerr << "wgsl-forge: warning: left out damaged entry " << skipped.path.string() << ": "
              << one_line(skipped.reason) << " (wgsl-forge cache verify)\n";
  }
  if (as_json) {
    nlohmann::json damaged = nlohmann::json::array();
    for (const BundleExportReport::Skipped& skipped : report->damaged) {
      damaged.push_back({{"path", skipped.path.string()}, {"reason", skipped.reason}});
    }
    std::cout << nlohmann::json{{"file", file.string()},
                                {"tuning", report->tuning},
                                {"certification", report->certification},
                                {"measurements_left_out", report->measurements_left_out},
                                {"damaged", damaged},
                                {"bytes", report->bytes}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "exported " << report->tuning << " tuning and " << report->certification
              << " certification entries (" << report->bytes << " bytes) to " << file.string()
              << "\n";
    if (report->measurements_left_out > 0) {
      std::cout << report->measurements_left_out
                << " measurement records left out (a machine's own search journal)\n";
    }
  }
  return kExitOk;
}

int run_import(const GlobalOptions& options, const fs::path& file, bool as_json) {
  Result<ManifestCache> cache = open_cache(options, CacheUse::kWrite);
  if (!cache) return report_error(cache.error());
  Result<StoreAllReport> report = import_bundle(*cache, file);
  if (!report) {
    const int code = report_error(report.error());
    // A damaged or hostile bundle, or one that contradicts the cache, is refused: an answer, not
    // a failure of the machine.
    const ErrorKind kind = report.error().kind();
    return kind == ErrorKind::kCorruption || kind == ErrorKind::kCollision ? kExitRejected : code;
  }
  if (as_json) {
    std::cout << nlohmann::json{{"file", file.string()},
                                {"stored", report->stored},
                                {"already_present", report->already_present}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "imported " << file.string() << ": " << report->stored << " entries stored, "
              << report->already_present << " already present in " << cache->root().string()
              << "\n";
  }
  return kExitOk;
}

}  // namespace

void add_cache_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  CLI::App* info = app.add_subcommand("info", "Print the version and the cache location");
  info->callback([&run, &options] { run = [&options] { return run_info(options); }; });

  CLI::App* cache = app.add_subcommand("cache", "Inspect, export and import the manifest cache");
  cache->require_subcommand(1);

  auto list_json = std::make_shared<bool>(false);
  CLI::App* list = cache->add_subcommand(
      "list", "List entries: kernel, revision, size bucket, schedule, time, date and key");
  list->add_flag("--json", *list_json, "Print JSON");
  list->callback([&run, &options, list_json] {
    run = [&options, list_json] { return run_list(options, *list_json); };
  });

  auto show_key = std::make_shared<std::string>();
  CLI::App* show = cache->add_subcommand("show", "Print one entry's manifest (canonical JSON)");
  show->add_option("KEY", *show_key, "64 hexadecimal characters")->required();
  show->callback([&run, &options, show_key] {
    run = [&options, show_key] { return run_show(options, *show_key); };
  });

  auto verify_json = std::make_shared<bool>(false);
  CLI::App* verify =
      cache->add_subcommand("verify",
                            "Read every entry; exit 1 if any is corrupt, foreign or one this build "
                            "does not use (stale, illegal schedule, source mismatch)");
  verify->add_flag("--json", *verify_json, "Print JSON");
  verify->callback([&run, &options, verify_json] {
    run = [&options, verify_json] { return run_verify(options, *verify_json); };
  });

  struct ExportArguments {
    std::string file;
    std::vector<std::string> kernels;
    bool json = false;
  };
  auto export_arguments = std::make_shared<ExportArguments>();
  CLI::App* export_command = cache->add_subcommand(
      "export",
      "Write the valid tuning and certification entries to one verified bundle file "
      "(replaced atomically; measurement records stay local)");
  export_command->add_option("FILE", export_arguments->file, "The bundle to write")->required();
  export_command->add_option("--kernel", export_arguments->kernels,
                             "Only this kernel's entries (repeatable)");
  export_command->add_flag("--json", export_arguments->json, "Print JSON");
  export_command->callback([&run, &options, export_arguments] {
    run = [&options, export_arguments] {
      return run_export(options, export_arguments->file, export_arguments->kernels,
                        export_arguments->json);
    };
  });

  struct ImportArguments {
    std::string file;
    bool json = false;
  };
  auto import_arguments = std::make_shared<ImportArguments>();
  CLI::App* import_command = cache->add_subcommand(
      "import",
      "Check every entry of a bundle, then store them all or none; exit 1 if the bundle is "
      "damaged or an entry differs from the cache's");
  import_command->add_option("FILE", import_arguments->file, "The bundle to read")->required();
  import_command->add_flag("--json", import_arguments->json, "Print JSON");
  import_command->callback([&run, &options, import_arguments] {
    run = [&options, import_arguments] {
      return run_import(options, import_arguments->file, import_arguments->json);
    };
  });

  struct PruneArguments {
    std::int64_t older_than = ManifestCache::kStaleTemporaryAge.count();
    bool json = false;
  };
  auto prune_arguments = std::make_shared<PruneArguments>();
  CLI::App* prune = cache->add_subcommand(
      "prune", "Remove temporary files left by writers that crashed (entries are never touched)");
  prune
      ->add_option("--older-than", prune_arguments->older_than,
                   "Only files at least this many seconds old, so that no live writer loses its "
                   "file (default 3600)")
      ->capture_default_str();
  prune->add_flag("--json", prune_arguments->json, "Print JSON");
  prune->callback([&run, &options, prune_arguments] {
    run = [&options, prune_arguments] {
      return run_prune(options, prune_arguments->older_than, prune_arguments->json);
    };
  });
}

}  // namespace wgsl_forge::cli
