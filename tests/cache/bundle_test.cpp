// Bundles (bundle.hpp): a cache exported and imported byte for byte; every damaged, hostile or
// contradicting bundle refused whole with its reason and nothing stored; an import that fails on
// any file operation leaves the cache as it was.

#include "wgsl_forge/bundle.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "support/faulty_file_system.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/hash.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::Fault;
using testing::FaultyFileSystem;

// Every file in `root` by name, with its bytes: what "the cache as it was" means.
std::map<std::string, std::string> files_of(const fs::path& root) {
  std::map<std::string, std::string> files;
  if (!fs::exists(root)) return files;
  for (const auto& item : fs::directory_iterator(root)) {
    files[item.path().filename().string()] = testing::read_text(item.path());
  }
  return files;
}

// The bundle's hashing rule, written out here as the header states it, so that a test can make a
// hostile bundle whose hash is right and see the check it aims at refuse it.
std::string sealed(Json bundle, int indent = 2) {
  bundle.erase("content_hash");
  bundle["content_hash"] = blake3_hex(bundle.dump(2) + "\n");
  return bundle.dump(indent) + "\n";
}

class BundleTest : public testing::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    ManifestCache source(source_root());
    for (int i = 0; i < 3; ++i) {
      tunings_.push_back(testing::random_tuning_manifest(random_));
      ASSERT_TRUE(source.store_tuning(tunings_.back())) << trace();
    }
    // One of another kernel, for --kernel.
    TuningManifest other = testing::random_tuning_manifest(random_);
    other.kernel_id = "reduce_sum_f32";
    other.cache_key = other.compute_cache_key();
    ASSERT_TRUE(source.store_tuning(other)) << trace();
    tunings_.push_back(other);
    while (certifications_.size() < 3) {
      CertificationManifest manifest = testing::random_certification_manifest(random_);
      if (!manifest.cache_key) continue;  // cannot be cached
      ASSERT_TRUE(source.store_certification(manifest)) << trace();
      certifications_.push_back(manifest);
    }
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(source.store_measurement(testing::random_measurement_record(random_))) << trace();
    }
    ASSERT_TRUE(export_bundle(source, bundle_path())) << trace();
    bundle_ = testing::read_text(bundle_path());
  }

  fs::path source_root() const { return temp_.path() / "source"; }
  fs::path target_root() const { return temp_.path() / "target"; }
  fs::path bundle_path() const { return temp_.path() / "release.bundle"; }
  fs::path write_bundle(const std::string& name, const std::string& bytes) const {
    const fs::path path = temp_.path() / name;
    testing::write_text(path, bytes);
    return path;
  }
  // Imports `bytes` into an empty target and expects a refusal that contains `reason` and
  // stores nothing.
  void expect_refused(const std::string& bytes, const std::string& reason) {
    SCOPED_TRACE(reason);
    ManifestCache target(target_root());
    Result<StoreAllReport> imported = import_bundle(target, write_bundle("hostile.bundle", bytes));
    ASSERT_FALSE(imported) << trace();
    EXPECT_EQ(imported.error().kind(), ErrorKind::kCorruption);
    EXPECT_NE(imported.error().message().find("is refused and nothing was imported: "),
              std::string::npos)
        << imported.error().message();
    EXPECT_NE(imported.error().message().find(reason), std::string::npos)
        << imported.error().message();
    EXPECT_TRUE(files_of(target_root()).empty());
  }

  testing::TempDir temp_;
  std::vector<TuningManifest> tunings_;
  std::vector<CertificationManifest> certifications_;
  std::string bundle_;
};

TEST_F(BundleTest, RoundTripCarriesEveryTuningAndCertificationEntryByteForByte) {
  ManifestCache target(target_root());
  Result<StoreAllReport> imported = import_bundle(target, bundle_path());
  ASSERT_TRUE(imported) << imported.error().to_string() << " " << trace();
  EXPECT_EQ(imported->stored, 7u);
  EXPECT_EQ(imported->already_present, 0u);

  std::map<std::string, std::string> shipped = files_of(source_root());
  std::erase_if(shipped, [](const auto& file) { return file.first.starts_with("measurement-"); });
  EXPECT_EQ(shipped.size(), 7u);
  EXPECT_EQ(files_of(target_root()), shipped) << trace();
  Result<VerifyReport> verified = target.verify();
  ASSERT_TRUE(verified);
  EXPECT_TRUE(verified->clean());
  for (const TuningManifest& manifest : tunings_) {
    EXPECT_EQ(target.load_tuning(manifest.cache_key).value(), manifest) << trace();
  }

  // Again: everything is there already; and the same entries make the same bundle.
  Result<StoreAllReport> again = import_bundle(target, bundle_path());
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->stored, 0u);
  EXPECT_EQ(again->already_present, 7u);
  const fs::path reexported = temp_.path() / "again.bundle";
  Result<BundleExportReport> report = export_bundle(target, reexported);
  ASSERT_TRUE(report);
  EXPECT_EQ(testing::read_text(reexported), bundle_);
  EXPECT_EQ(report->tuning, 4u);
  EXPECT_EQ(report->certification, 3u);
  EXPECT_EQ(report->bytes, bundle_.size());
}

TEST_F(BundleTest, ExportLeavesOutMeasurementsAndDamagedEntriesAndFiltersByKernel) {
  ManifestCache source(source_root());
  // A damaged entry: one byte of a stored certification changed.
  const fs::path damaged =
      source.path_for(ManifestKind::kCertification, *certifications_.front().cache_key);
  std::string bytes = testing::read_text(damaged);
  bytes[bytes.size() / 2] ^= 0x01;
  testing::write_text(damaged, bytes);

  Result<BundleExportReport> report = export_bundle(source, bundle_path());
  ASSERT_TRUE(report) << report.error().to_string();
  EXPECT_EQ(report->tuning, 4u);
  EXPECT_EQ(report->certification, 2u);
  EXPECT_EQ(report->measurements_left_out, 2u);
  ASSERT_EQ(report->damaged.size(), 1u);
  EXPECT_EQ(report->damaged[0].path, damaged);
  EXPECT_FALSE(report->damaged[0].reason.empty());

  BundleExportOptions only_reduce;
  only_reduce.kernels = {"reduce_sum_f32"};
  report = export_bundle(source, bundle_path(), only_reduce);
  ASSERT_TRUE(report) << report.error().to_string();
  EXPECT_EQ(report->tuning, 1u);
  EXPECT_EQ(report->certification, 0u);
  std::vector<EntryBytes> entries = parse_bundle(testing::read_text(bundle_path())).value();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].key, tunings_.back().cache_key);

  BundleExportOptions absent;
  absent.kernels = {"gemm_f32"};
  const std::string before = testing::read_text(bundle_path());
  report = export_bundle(source, bundle_path(), absent);
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(report.error().message().find("holds no valid tuning or certification entry of "
                                          "kernel gemm_f32"),
            std::string::npos)
      << report.error().message();
  EXPECT_EQ(testing::read_text(bundle_path()), before);  // the old bundle is untouched
}

// What `cache list` prints: every entry read and summarized, a damaged one by its damage.
TEST_F(BundleTest, DescribeSummarizesEveryKindAndNamesTheDamage) {
  ManifestCache source(source_root());
  const fs::path damaged = source.path_for(ManifestKind::kTuning, tunings_[2].cache_key);
  std::string bytes = testing::read_text(damaged);
  bytes[bytes.size() / 3] ^= 0x04;
  testing::write_text(damaged, bytes);

  Result<std::vector<DescribedEntry>> described = source.describe();
  ASSERT_TRUE(described) << described.error().to_string();
  ASSERT_EQ(described->size(), 9u);
  std::map<ManifestKind, int> kinds;
  for (const DescribedEntry& one : *described) {
    EXPECT_EQ(one.stored_at.size(), 20u) << one.stored_at;  // 2026-12-02T15:33:31Z
    if (one.entry.path == damaged) {
      EXPECT_FALSE(one.summary);
      EXPECT_FALSE(one.damage.empty());
      continue;
    }
    ASSERT_TRUE(one.summary) << one.damage;
    ++kinds[one.summary->kind];
    EXPECT_EQ(one.summary->key, one.entry.key);
    for (const TuningManifest& manifest : tunings_) {
      if (manifest.cache_key != one.entry.key) continue;
      EXPECT_EQ(one.summary->kernel_id, manifest.kernel_id);
      EXPECT_EQ(one.summary->kernel_revision, manifest.kernel_revision);
      EXPECT_EQ(one.summary->bucket, manifest.context.bucket);
      EXPECT_EQ(one.summary->schedule, manifest.result.winner.schedule);
      EXPECT_EQ(one.summary->median_ns, manifest.result.winner.timing.median_ns);
      EXPECT_EQ(one.summary->date, manifest.context.tuned_at);
    }
    for (const CertificationManifest& manifest : certifications_) {
      if (manifest.cache_key != one.entry.key) continue;
      EXPECT_EQ(one.summary->schedule, manifest.schedule);
      EXPECT_EQ(one.summary->verdict, manifest.verdict);
      EXPECT_EQ(one.summary->certification_cases, manifest.cases.size());
      EXPECT_TRUE(one.summary->date.empty());
    }
    if (one.summary->kind == ManifestKind::kMeasurement) {
      EXPECT_NE(one.summary->median_ns.has_value(), one.summary->failed_at.has_value());
      EXPECT_TRUE(one.summary->problem.starts_with("n="));
    }
  }
  EXPECT_EQ(kinds[ManifestKind::kTuning], 3);
  EXPECT_EQ(kinds[ManifestKind::kCertification], 3);
  EXPECT_EQ(kinds[ManifestKind::kMeasurement], 2);
}

TEST_F(BundleTest, EverySingleByteCorruptionIsRefusedAndStoresNothing) {
  for (int trial = 0; trial < 48; ++trial) {
    std::string damaged = bundle_;
    const std::size_t offset = random_() % damaged.size();
    const char original = damaged[offset];
    while (damaged[offset] == original) damaged[offset] = static_cast<char>(random_() % 256);
    SCOPED_TRACE("offset " + std::to_string(offset) + ", " + trace());
    expect_refused(damaged, "");
  }
}

TEST_F(BundleTest, ADamagedEntryIsNamedWithTheCheckItFails) {
  // The last digit of a seed inside the second entry's manifest: still valid JSON and a valid
  // number, so the entry's own check (its content hash) names it.
  Json bundle = Json::parse(bundle_);
  std::string manifest = bundle["entries"][1]["bytes"];
  const std::size_t seed = manifest.find("\"seed\": ") + 8;
  const std::size_t last_digit = manifest.find_first_not_of("0123456789", seed) - 1;
  ASSERT_GE(last_digit, seed) << manifest;
  manifest[last_digit] =
      manifest[last_digit] == '0' ? '1' : static_cast<char>(manifest[last_digit] - 1);
  bundle["entries"][1]["bytes"] = manifest;
  expect_refused(sealed(bundle), "Entry 2 of 7 (certification " +
                                     bundle["entries"][1]["key"].get<std::string>() +
                                     ") fails the check of a cache entry: Field 'content_hash'");
}

TEST_F(BundleTest, HostileBundlesAreRefusedWithThePreciseReason) {
  const Json valid = Json::parse(bundle_);
  const std::string first_key = valid["entries"][0]["key"];

  Json path_key = valid;
  path_key["entries"][0]["key"] = "../../../etc/passwd";
  expect_refused(sealed(path_key),
                 "Entry 1 of 7 has key '../../../etc/passwd', which is not 64 lowercase "
                 "hexadecimal characters.");

  Json upper_key = valid;
  std::string upper = first_key;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  upper_key["entries"][0]["key"] = upper;
  expect_refused(sealed(upper_key), "which is not 64 lowercase hexadecimal characters");

  Json huge_count = valid;
  huge_count["entry_count"] = 1000000000000000000ull;
  expect_refused(sealed(huge_count),
                 "Field 'entry_count' (1000000000000000000) exceeds the most entries a bundle "
                 "holds (65536).");

  Json short_count = valid;
  short_count["entry_count"] = 6;
  expect_refused(sealed(short_count), "It holds 7 entries, but field 'entry_count' says 6.");

  Json version_two = valid;
  version_two["format_version"] = 2;
  expect_refused(sealed(version_two),
                 "Field 'format_version' is 2; this wgsl-forge reads only bundles of version 1.");

  Json foreign = valid;
  foreign["format"] = "tar";
  expect_refused(sealed(foreign), "it is not a wgsl-forge bundle");

  Json duplicate = valid;
  duplicate["entries"][1] = duplicate["entries"][0];
  expect_refused(sealed(duplicate), "Entry 2 of 7 repeats entry 1 (" +
                                        valid["entries"][0]["kind"].get<std::string>() + " " +
                                        first_key + "); a bundle holds each kind and key once.");

  // A valid entry under the key of another: the cache's own key check refuses it.
  Json moved = valid;
  moved["entries"][0]["key"] = valid["entries"][1]["key"];
  moved["entries"][1]["key"] = first_key;
  expect_refused(sealed(moved), "Entry 1 of 7 (certification " +
                                    valid["entries"][1]["key"].get<std::string>() +
                                    ") fails the check of a cache entry: It holds the "
                                    "certification manifest of affine_f32 with cache key " +
                                    first_key + ".");

  Json measurement = valid;
  measurement["entries"][0]["kind"] = "measurement";
  expect_refused(sealed(measurement), "Entry 1 of 7 is a measurement record");

  Json extra = valid;
  extra["signature"] = "trust me";
  expect_refused(sealed(extra), "It has a field this format does not know ('signature').");
  Json extra_in_entry = valid;
  extra_in_entry["entries"][3]["path"] = "/etc/passwd";
  expect_refused(sealed(extra_in_entry),
                 "Entry 4 of 7 has a field this format does not know ('path').");

  Json missing = valid;
  missing.erase("entries");
  expect_refused(sealed(missing), "It has no field 'entries'.");

  // Two entries swapped: each is valid, the hash over the list is not.
  Json swapped = valid;
  std::swap(swapped["entries"][0], swapped["entries"][1]);
  std::string swapped_bytes = swapped.dump(2) + "\n";
  expect_refused(swapped_bytes, "Field 'content_hash' (" +
                                    valid["content_hash"].get<std::string>() +
                                    ") does not match the content");
  // Sealed again, the order is still not the canonical one.
  expect_refused(sealed(swapped), "not in canonical form");
  expect_refused(sealed(valid, 4), "not in canonical form");

  expect_refused(std::string(100, '[') + std::string(100, ']'),
                 "It nests arrays and objects 100 levels deep (a bundle nests 3).");
  expect_refused("{\"entries\": [", "It is not valid JSON (at byte 13 of 13).");
  expect_refused("", "It is not valid JSON");
  expect_refused("{\"entry_count\": 1e400}\n", "It holds a number too large for JSON's doubles.");
  expect_refused("[]\n", "It is not a JSON object.");
}

TEST_F(BundleTest, BundleFilesThatAreNotRegularOrTooLargeAreRefusedWithoutReadingThem) {
  ManifestCache target(target_root());
  const fs::path fifo = temp_.path() / "fifo.bundle";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result<StoreAllReport> imported = import_bundle(target, fifo);  // must not wait for a writer
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.error().message(),
            "Bundle " + fifo.string() + " is a FIFO, not a regular file.");

  const fs::path huge = temp_.path() / "huge.bundle";
  testing::write_text(huge, "");
  fs::resize_file(huge, kMaxBundleBytes + 1);  // sparse: costs no disk
  imported = import_bundle(target, huge);
  ASSERT_FALSE(imported);
  EXPECT_NE(imported.error().message().find("is too large to be a bundle ("), std::string::npos)
      << imported.error().message();

  imported = import_bundle(target, temp_.path() / "absent.bundle");
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_TRUE(files_of(target_root()).empty());
}

TEST_F(BundleTest, AnEntryThatDiffersFromTheCachesIsACollisionAndNothingIsStored) {
  ManifestCache target(target_root());
  // The same identity (so the same key), tuned at another time: other bytes.
  TuningManifest rival = tunings_[1];
  rival.context.tuned_at = "2001-01-01T00:00:00Z";
  ASSERT_TRUE(target.store_tuning(rival));
  const std::map<std::string, std::string> before = files_of(target_root());

  Result<StoreAllReport> imported = import_bundle(target, bundle_path());
  ASSERT_FALSE(imported) << trace();
  EXPECT_EQ(imported.error().kind(), ErrorKind::kCollision);
  EXPECT_NE(imported.error().to_string().find("already holds a different tuning manifest"),
            std::string::npos)
      << imported.error().to_string();
  EXPECT_NE(imported.error().to_string().find("nothing was stored"), std::string::npos)
      << imported.error().to_string();
  EXPECT_EQ(files_of(target_root()), before);
}

// Each file operation of an import fails in turn (a full disk, an I/O error, a short write;
// without renameat2 too): the import either fails and the cache is exactly as it was, no
// temporary file left, or it succeeded whole because the failed operation did not matter. The
// bundle holds three entries, one of them already in the cache, so that the import compares,
// writes two and moves two (and undoes the first move when the second fails).
TEST_F(BundleTest, AnImportThatFailsOnAnyFileOperationLeavesTheCacheAsItWas) {
  const fs::path small_root = temp_.path() / "small";
  ManifestCache small(small_root);
  ASSERT_TRUE(small.store_tuning(tunings_[0]));
  ASSERT_TRUE(small.store_tuning(tunings_[1]));
  ASSERT_TRUE(small.store_certification(certifications_[0]));
  const fs::path small_bundle = temp_.path() / "small.bundle";
  ASSERT_TRUE(export_bundle(small, small_bundle));
  const std::map<std::string, std::string> shipped = files_of(small_root);

  for (bool renameat2 : {true, false}) {
    auto counting = std::make_shared<FaultyFileSystem>(Fault::kNone, 0, renameat2);
    const fs::path counted_root = temp_.path() / "counted";
    fs::remove_all(counted_root);
    ASSERT_TRUE(ManifestCache(counted_root).store_tuning(tunings_[0]));
    ASSERT_TRUE(import_bundle(ManifestCache(counted_root, counting), small_bundle));
    const std::size_t operations = counting->operations().size();
    ASSERT_GT(operations, 20u);

    for (Fault fault : {Fault::kNoSpace, Fault::kIoError, Fault::kShortWrite}) {
      if (!renameat2 && fault != Fault::kIoError) continue;  // only the moves differ
      for (std::size_t at = 1; at <= operations; ++at) {
        const fs::path root = temp_.path() / "faulted";
        fs::remove_all(root);
        ASSERT_TRUE(ManifestCache(root).store_tuning(tunings_[0]));
        const std::map<std::string, std::string> before = files_of(root);
        auto faulty = std::make_shared<FaultyFileSystem>(fault, at, renameat2);
        Result<StoreAllReport> imported = import_bundle(ManifestCache(root, faulty), small_bundle);
        SCOPED_TRACE(std::string(testing::fault_name(fault)) + " at operation " +
                     std::to_string(at) + " (" + faulty->faulted_operation() + ")" +
                     (renameat2 ? "" : " without renameat2"));
        if (imported) {
          // A failed unlink after a hard link leaves a temporary name beside the entry, which
          // readers ignore (cache.hpp); everything else is the bundle's entries.
          EXPECT_EQ(imported->stored, 2u);
          EXPECT_EQ(imported->already_present, 1u);
          std::map<std::string, std::string> stored = files_of(root);
          std::erase_if(stored, [](const auto& file) { return file.first.ends_with(".tmp"); });
          EXPECT_EQ(stored, shipped);
        } else {
          EXPECT_EQ(files_of(root), before) << imported.error().to_string();
        }
      }
    }
  }
}

TEST_F(BundleTest, AFailedExportLeavesTheOldBundleAndNoTemporaryFile) {
  const std::string old = "an older bundle\n";
  testing::write_text(bundle_path(), old);
  auto counting = std::make_shared<FaultyFileSystem>(Fault::kNone, 0);
  ASSERT_TRUE(export_bundle(ManifestCache(source_root(), counting), bundle_path()));
  const std::size_t operations = counting->operations().size();
  for (std::size_t at = 1; at <= operations; ++at) {
    testing::write_text(bundle_path(), old);
    auto faulty = std::make_shared<FaultyFileSystem>(Fault::kNoSpace, at);
    Result<BundleExportReport> exported =
        export_bundle(ManifestCache(source_root(), faulty), bundle_path());
    SCOPED_TRACE("ENOSPC at operation " + std::to_string(at) + " (" + faulty->faulted_operation() +
                 ")");
    const std::string now = testing::read_text(bundle_path());
    // Either the old bundle or the whole new one, and nothing else beside it.
    EXPECT_TRUE(now == old || now == bundle_) << now.substr(0, 200);
    if (exported) {
      EXPECT_EQ(now, bundle_);
    }
    for (const auto& item : fs::directory_iterator(temp_.path())) {
      EXPECT_FALSE(item.path().filename().string().ends_with(".tmp")) << item.path();
    }
  }
}

}  // namespace
}  // namespace wgsl_forge
