// Tuning entries edited by a writer who knows the format (both hashes recomputed): entries that
// parse but that this build must not use (a winner outside the kernel's schedule space, a source
// hash that is not that of the regenerated WGSL, another kernel revision) and entries that break
// an invariant of TuningManifest::create. `cache verify` names each by kind, KernelLibrary falls
// back to the default schedule with the reason, auto-tune-all tunes again; and KernelLibrary's
// load-time re-certification of winners.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "gpu/gpu_test_support.hpp"
#include "support/delegating_kernel.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/hash.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;

const kernels::KernelDefinition& affine() { return *kernels::find_kernel("affine_f32").value(); }

// The tuning manifest tune would store for `kernel` with winner `schedule` on an adapter of
// `topology`.
TuningManifest tuned_manifest(const kernels::KernelDefinition& kernel, const Schedule& schedule,
                              const AdapterIdentity& adapter, const std::string& topology) {
  GeneratedKernel generated =
      kernels::generate_builtin(kernel, schedule, TargetBackend::kWgsl, {}).value();
  CandidateResult winner = testing::certified_candidate(schedule, 1000);
  TuningContext context;
  context.topology_hash = topology;
  context.problem_size = 5000;
  return TuningManifest::create(generated, adapter, testing::single_winner_result(winner), context)
      .value();
}

// Writes `manifest` where it is found for its kernel and topology, after recomputing its cache
// key; serializing recomputes the content hash. What a hostile edit leaves behind.
fs::path write_entry(const fs::path& root, TuningManifest manifest) {
  manifest.cache_key = manifest.compute_cache_key();
  const std::string key =
      ManifestCache::topology_key(manifest.context.topology_hash.value(), manifest.kernel_id);
  const fs::path path = ManifestCache(root).path_for(ManifestKind::kTuning, key);
  fs::create_directories(root);
  testing::write_text(path, serialize_manifest(manifest).value());
  return path;
}

struct HostileEdit {
  const char* name;
  std::function<void(TuningManifest&)> edit;
  EntryHealth health;
  std::string reason_start;
};

// The edits only the kernel can tell: each parses, and find_unusable_tuning refuses it.
std::vector<HostileEdit> unusable_edits() {
  return {
      {"a winner with workgroup_size=7",
       [](TuningManifest& m) {
         m.result.winner.schedule.set("workgroup_size", 7);
         m.result = testing::single_winner_result(m.result.winner);
       },
       EntryHealth::kIllegalSchedule,
       "The tuning of affine_f32 has a winner that is not a legal schedule: Knob workgroup_size "
       "(7) is not one of "},
      {"a made-up source hash", [](TuningManifest& m) { m.source_hash = blake3_hex("made up"); },
       EntryHealth::kSourceMismatch,
       "The tuning of affine_f32 records source hash " + blake3_hex("made up") +
           ", but its winner " + affine().default_schedule().to_string() + " generates "},
      {"a stale revision", [](TuningManifest& m) { m.kernel_revision = affine().revision() - 1; },
       EntryHealth::kStale,
       "The tuning of affine_f32 is for revision " + std::to_string(affine().revision() - 1) +
           "; the generator is now revision " + std::to_string(affine().revision()) + "."},
  };
}

// The edits the parser refuses, as the issue saw them run at start-up as 'tuned'.
std::vector<HostileEdit> invariant_edits() {
  const Schedule other = kernels::parse_schedule_overrides(affine(), "workgroup_size=64").value();
  return {
      {"a winner that is not among the finalists",
       [other](TuningManifest& m) {
         m.result.finalists = {testing::certified_candidate(other, 900)};
       },
       EntryHealth::kCorrupt, "Field 'result.finalists' breaks an invariant"},
      {"a winner with 5 mismatches",
       [](TuningManifest& m) {
         m.result.winner.oracle.mismatch_count = 5;
         m.result.finalists = {m.result.winner};
       },
       EntryHealth::kCorrupt, "Field 'result.winner.oracle' breaks an invariant"},
      {"a winner outside the finalists with 5 mismatches and a made-up source hash",
       [other](TuningManifest& m) {
         m.result.winner.oracle.mismatch_count = 5;
         m.result.finalists = {testing::certified_candidate(other, 900)};
         m.source_hash = blake3_hex("made up");
       },
       EntryHealth::kCorrupt, "Field 'result.winner.oracle' breaks an invariant"},
  };
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(TuningEntriesTest, FindUnusableTuningNamesEachEditTheParserCannotSee) {
  const std::string topology = blake3_hex("a topology");
  const TuningManifest intact =
      tuned_manifest(affine(), affine().default_schedule(), testing::test_adapter(), topology);
  const kernels::DeviceCapabilities device;
  EXPECT_FALSE(forge::find_unusable_tuning(affine(), intact, &device).has_value());
  for (const HostileEdit& hostile : unusable_edits()) {
    SCOPED_TRACE(hostile.name);
    TuningManifest edited = intact;
    hostile.edit(edited);
    edited.cache_key = edited.compute_cache_key();
    ASSERT_TRUE(parse_tuning_manifest(serialize_manifest(edited).value()).ok());
    const std::vector<const kernels::DeviceCapabilities*> with_and_without_device = {&device,
                                                                                     nullptr};
    for (const kernels::DeviceCapabilities* limits : with_and_without_device) {
      std::optional<forge::UnusableTuning> unusable =
          forge::find_unusable_tuning(affine(), edited, limits);
      ASSERT_TRUE(unusable.has_value());
      EXPECT_EQ(unusable->health, hostile.health);
      EXPECT_TRUE(starts_with(unusable->reason, hostile.reason_start)) << unusable->reason;
    }
  }
}

// Only with the device's limits: a winner of the kernel's space that this adapter cannot run.
TEST(TuningEntriesTest, AWinnerBeyondTheDevicesLimitsIsIllegalOnlyOnThatDevice) {
  const Schedule wide = kernels::parse_schedule_overrides(affine(), "workgroup_size=256").value();
  const TuningManifest manifest =
      tuned_manifest(affine(), wide, testing::test_adapter(), blake3_hex("a topology"));
  kernels::DeviceCapabilities small;
  small.max_invocations_per_workgroup = 64;
  std::optional<forge::UnusableTuning> unusable =
      forge::find_unusable_tuning(affine(), manifest, &small);
  ASSERT_TRUE(unusable.has_value());
  EXPECT_EQ(unusable->health, EntryHealth::kIllegalSchedule);
  EXPECT_NE(unusable->reason.find("exceeds maxComputeInvocationsPerWorkgroup (64)"),
            std::string::npos)
      << unusable->reason;
  EXPECT_FALSE(forge::find_unusable_tuning(affine(), manifest, nullptr).has_value());
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult run_cli(const std::string& arguments) {
  FILE* pipe = ::popen((std::string(WGSL_FORGE_CLI_PATH) + " " + arguments + " 2>&1").c_str(), "r");
  CommandResult result;
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (std::size_t count = std::fread(buffer, 1, sizeof buffer, pipe)) {
    result.output.append(buffer, count);
  }
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Each edit on its own topology, so that all of them sit in one cache: `cache verify` (the
// library call and the command) names each by kind, and is not clean.
TEST(TuningEntriesTest, CacheVerifyNamesEveryEntryThisBuildDoesNotUseByKind) {
  testing::TempDir temp;
  const fs::path root = temp.path() / "cache";
  std::map<fs::path, const HostileEdit*> written;
  std::vector<HostileEdit> edits = unusable_edits();
  for (const HostileEdit& hostile : edits) {
    TuningManifest manifest = tuned_manifest(affine(), affine().default_schedule(),
                                             testing::test_adapter(), blake3_hex(hostile.name));
    hostile.edit(manifest);
    written[write_entry(root, manifest)] = &hostile;
  }
  TuningManifest retired = tuned_manifest(affine(), affine().default_schedule(),
                                          testing::test_adapter(), blake3_hex("retired"));
  retired.kernel_id = "retired_kernel";
  const fs::path retired_path = write_entry(root, retired);
  const fs::path intact_path =
      write_entry(root, tuned_manifest(affine(), affine().default_schedule(),
                                       testing::test_adapter(), blake3_hex("intact")));

  const ManifestCache cache(root);
  EXPECT_TRUE(cache.verify().value().clean()) << "the cache alone cannot tell";
  VerifyReport report = forge::verify_cache(cache).value();
  EXPECT_FALSE(report.clean());
  ASSERT_EQ(report.checks.size(), edits.size() + 2);
  for (const EntryCheck& check : report.checks) {
    SCOPED_TRACE(check.path.string());
    if (check.path == intact_path) {
      EXPECT_EQ(check.health, EntryHealth::kValid) << check.message;
    } else if (check.path == retired_path) {
      EXPECT_EQ(check.health, EntryHealth::kStale);
      EXPECT_EQ(check.message,
                "The tuning of retired_kernel is for a kernel this build does not have.");
    } else {
      const HostileEdit& hostile = *written.at(check.path);
      EXPECT_EQ(check.health, hostile.health) << hostile.name;
      EXPECT_TRUE(starts_with(check.message, hostile.reason_start)) << check.message;
    }
  }

  CommandResult text = run_cli("cache verify --cache " + root.string());
  EXPECT_EQ(text.exit_code, 1) << text.output;
  for (const auto& [path, hostile] : written) {
    EXPECT_NE(text.output.find(std::string(entry_health_name(hostile->health)) + "  " +
                               path.string() + "\n    " + hostile->reason_start),
              std::string::npos)
        << text.output;
  }
  EXPECT_NE(text.output.find("1 valid entries, 4 other files"), std::string::npos) << text.output;
  CommandResult json = run_cli("cache verify --json --cache " + root.string());
  EXPECT_EQ(json.exit_code, 1) << json.output;
  nlohmann::json parsed = nlohmann::json::parse(json.output);
  EXPECT_EQ(parsed["clean"], false);
  std::map<std::string, std::string> health;
  for (const auto& row : parsed["entries"]) {
    health[row["path"].get<std::string>()] = row["health"].get<std::string>();
  }
  EXPECT_EQ(health[retired_path.string()], "stale");
  EXPECT_EQ(health[intact_path.string()], "valid");
  for (const auto& [path, hostile] : written) {
    EXPECT_EQ(health[path.string()], entry_health_name(hostile->health));
  }
}

// The tuning entry of `kernel` on the shared device, as tune would write it.
TuningManifest tuned_here(const kernels::KernelDefinition& kernel, const Schedule& schedule) {
  gpu::Device& device = testing::shared_device();
  return tuned_manifest(kernel, schedule, device.adapter().identity,
                        device.adapter().topology_hash);
}

// Every hostile edit, alone in a cache: the library loads the default schedule and says why,
// naming the entry and what is wrong; the intact entry is used.
TEST(TuningEntriesTest, KernelLibraryFallsBackFromEachHostileEntryWithTheReason) {
  gpu::Device& device = testing::shared_device();
  const TuningManifest intact = tuned_here(
      affine(), kernels::parse_schedule_overrides(affine(), "workgroup_size=64").value());
  {
    testing::TempDir temp;
    write_entry(temp.path(), intact);
    forge::KernelLibrary library(device, ManifestCache(temp.path()));
    Result<forge::KernelLibrary::ReadyKernel> ready = library.load("affine_f32");
    ASSERT_TRUE(ready.ok()) << ready.error().to_string();
    EXPECT_TRUE(ready->tuned) << ready->origin;
  }
  std::vector<HostileEdit> edits = unusable_edits();
  for (HostileEdit& hostile : invariant_edits()) edits.push_back(std::move(hostile));
  for (const HostileEdit& hostile : edits) {
    SCOPED_TRACE(hostile.name);
    testing::TempDir temp;
    TuningManifest edited = tuned_here(affine(), affine().default_schedule());
    hostile.edit(edited);
    const fs::path path = write_entry(temp.path(), edited);
    forge::KernelLibrary library(device, ManifestCache(temp.path()));
    Result<forge::KernelLibrary::ReadyKernel> ready = library.load("affine_f32");
    ASSERT_TRUE(ready.ok()) << ready.error().to_string();
    EXPECT_FALSE(ready->tuned) << ready->origin;
    EXPECT_EQ(ready->prepared.generated().schedule, affine().default_schedule());
    const std::string expected =
        hostile.health == EntryHealth::kCorrupt
            ? "default schedule: the cache entry cannot be used (Cache entry " + path.string() +
                  " is corrupt: " + hostile.reason_start
            : "default schedule: cache entry " + path.string() + " is " +
                  entry_health_name(hostile.health) + ": " + hostile.reason_start;
    EXPECT_TRUE(starts_with(ready->origin, expected)) << ready->origin;
  }
}

forge::AutoTuneOptions quick_tuning() {
  forge::AutoTuneOptions options;
  options.tune.budget = 1;
  options.tune.seed = testing::test_seed();
  kernels::Problem problem;
  problem.elements = 5000;
  options.tune.problem = problem;
  return options;
}

// An entry this build does not use counts as not tuned: auto-tune-all replaces it with one the
// library uses.
TEST(TuningEntriesTest, AutoTuneAllTunesAgainOverEachEntryThisBuildDoesNotUse) {
  gpu::Device& device = testing::shared_device();
  for (const HostileEdit& hostile : unusable_edits()) {
    SCOPED_TRACE(hostile.name);
    testing::TempDir temp;
    const ManifestCache cache(temp.path());
    TuningManifest edited = tuned_here(affine(), affine().default_schedule());
    hostile.edit(edited);
    write_entry(temp.path(), edited);
    EXPECT_TRUE(forge::would_tune(device, cache, affine(), {}));
    forge::AutoTuneRow row = forge::tune_and_store(device, cache, affine(), quick_tuning());
    ASSERT_EQ(row.status, forge::AutoTuneRow::Status::kTuned) << row.message;
    EXPECT_FALSE(forge::would_tune(device, cache, affine(), {}));
    forge::KernelLibrary library(device, cache);
    Result<forge::KernelLibrary::ReadyKernel> ready = library.load("affine_f32");
    ASSERT_TRUE(ready.ok()) << ready.error().to_string();
    EXPECT_TRUE(ready->tuned) << ready->origin;
  }
}

// affine_f32 whose WGSL has `from` replaced by `to` when workgroup_size is 64: a legal schedule
// whose recorded certification is a lie, as a hostile writer could leave it.
class MutatedAffine final : public testing::DelegatingKernel {
 public:
  MutatedAffine(std::string id, std::string from, std::string to)
      : DelegatingKernel("affine_f32"),
        id_(std::move(id)),
        from_(std::move(from)),
        to_(std::move(to)) {}
  std::string_view id() const override { return id_; }
  std::uint32_t revision() const override { return 1; }
  std::string_view summary() const override { return "affine_f32, wrong at workgroup_size=64"; }
  std::string generate_wgsl(const Schedule& schedule) const override {
    std::string source = base_.generate_wgsl(schedule);
    if (schedule.get("workgroup_size") == 64 && source.find(from_) != std::string::npos) {
      source.replace(source.find(from_), from_.size(), to_);
    }
    return source;
  }

 private:
  std::string id_;
  std::string from_;
  std::string to_;
};

TEST(TuningEntriesTest, RecertifyingLoadFallsBackFromAWinnerThatFailsItsQuickCases) {
  gpu::Device& device = testing::shared_device();
  const MutatedAffine kernel("miscomputing_affine", "params.a * x[i] + params.b",
                             "params.a * x[i] - params.b");
  const Schedule wrong = kernels::parse_schedule_overrides(kernel, "workgroup_size=64").value();
  ASSERT_NE(kernel.generate_wgsl(wrong), affine().generate_wgsl(wrong));
  testing::TempDir temp;
  write_entry(temp.path(), tuned_here(kernel, wrong));

  // Trusted as recorded by default: the schedule is legal and its source hash is right.
  forge::KernelLibrary trusting(device, ManifestCache(temp.path()));
  Result<forge::KernelLibrary::ReadyKernel> ready = trusting.load(kernel);
  ASSERT_TRUE(ready.ok()) << ready.error().to_string();
  EXPECT_TRUE(ready->tuned) << ready->origin;

  forge::KernelLibrary recertifying(device, ManifestCache(temp.path()),
                                    {.recertify_winners = true});
  ready = recertifying.load(kernel);
  ASSERT_TRUE(ready.ok()) << ready.error().to_string();
  EXPECT_FALSE(ready->tuned) << ready->origin;
  EXPECT_EQ(ready->prepared.generated().schedule, kernel.default_schedule());
  EXPECT_TRUE(starts_with(ready->origin, "default schedule: the tuned winner " + wrong.to_string() +
                                             " fails its quick re-certification: case '"))
      << ready->origin;
}

// The quick re-certification runs between the certification's guards: a winner that writes one
// element past its output (issue 29's affine mutant), which the output's padding would hide,
// gives way to the default schedule, and the reason names the guard.
TEST(TuningEntriesTest, RecertifyingLoadFallsBackFromAWinnerThatWritesPastItsOutput) {
  gpu::Device& device = testing::shared_device();
  const MutatedAffine kernel("straying_affine", "if (i < params.vectors)",
                             "if (i <= params.vectors)");
  const Schedule straying = kernels::parse_schedule_overrides(kernel, "workgroup_size=64").value();
  ASSERT_NE(kernel.generate_wgsl(straying), affine().generate_wgsl(straying));
  testing::TempDir temp;
  write_entry(temp.path(), tuned_here(kernel, straying));
  forge::KernelLibrary library(device, ManifestCache(temp.path()), {.recertify_winners = true});
  Result<forge::KernelLibrary::ReadyKernel> ready = library.load(kernel);
  ASSERT_TRUE(ready.ok()) << ready.error().to_string();
  EXPECT_FALSE(ready->tuned) << ready->origin;
  EXPECT_NE(ready->origin.find("straying_affine writes past the end of output y ("),
            std::string::npos)
      << ready->origin;
}

TEST(TuningEntriesTest, RecertifyingLoadKeepsAWinnerThatPassesItsQuickCases) {
  gpu::Device& device = testing::shared_device();
  testing::TempDir temp;
  const Schedule winner = kernels::parse_schedule_overrides(affine(), "workgroup_size=64").value();
  write_entry(temp.path(), tuned_here(affine(), winner));
  forge::KernelLibrary library(device, ManifestCache(temp.path()), {.recertify_winners = true});
  Result<forge::KernelLibrary::ReadyKernel> ready = library.load("affine_f32");
  ASSERT_TRUE(ready.ok()) << ready.error().to_string();
  EXPECT_TRUE(ready->tuned) << ready->origin;
  EXPECT_EQ(ready->prepared.generated().schedule, winner);
  EXPECT_NE(ready->origin.find("; re-certified on "), std::string::npos) << ready->origin;
}

}  // namespace
}  // namespace wgsl_forge
