#include "cache_commands.hpp"

#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/forge.hpp"
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

int run_list(const GlobalOptions& options, bool as_json) {
  Result<ManifestCache> cache = open_cache(options);
  if (!cache) return report_error(cache.error());
  Result<std::vector<CacheEntry>> entries = cache->list();
  if (!entries) return report_error(entries.error());
  if (as_json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const CacheEntry& entry : *entries) {
      rows.push_back({{"kind", manifest_kind_name(entry.kind)},
                      {"key", entry.key},
                      {"path", entry.path.string()}});
    }
    std::cout << rows.dump(2) << "\n";
    return kExitOk;
  }
  for (const CacheEntry& entry : *entries) {
    std::cout << manifest_kind_name(entry.kind) << "  " << entry.key << "\n";
  }
  std::cerr << entries->size() << " entries in " << cache->root().string() << "\n";
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

}  // namespace

void add_cache_commands(CLI::App& app, const GlobalOptions& options, std::function<int()>& run) {
  CLI::App* info = app.add_subcommand("info", "Print the version and the cache location");
  info->callback([&run, &options] { run = [&options] { return run_info(options); }; });

  CLI::App* cache = app.add_subcommand("cache", "Inspect the manifest cache");
  cache->require_subcommand(1);

  auto list_json = std::make_shared<bool>(false);
  CLI::App* list = cache->add_subcommand("list", "List entries by kind and key");
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
