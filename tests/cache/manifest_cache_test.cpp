#include "wgsl_forge/cache.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <random>
#include <thread>

#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::TempDir;
using testing::write_text;

class ManifestCacheTest : public testing::SeededTest {
 protected:
  fs::path cache_root() const { return temp_.path() / "cache"; }
  std::size_t file_count() const {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& item : fs::directory_iterator(cache_root())) ++count;
    return count;
  }

  TempDir temp_;
};

// The test of the original cache.rs, kept as it was: round trip by adapter key, same path twice.
TEST_F(ManifestCacheTest, TuningCacheRoundTripsByAdapterKey) {
  Schedule schedule = testing::default_affine_schedule();
  GeneratedKernel generated = testing::affine_kernel(schedule);
  std::uint64_t samples[] = {10};
  CandidateResult winner{schedule, ComparisonReport{1, 0, std::nullopt, 0.0, 0.0},
                         TimingSummary::from_samples(TimingSource::kSynthetic, samples).value()};
  TuningManifest manifest = TuningManifest::create(generated, testing::test_adapter(),
                                                   testing::single_winner_result(winner))
                                .value();
  ManifestCache cache(cache_root());
  fs::path first_path = cache.store_tuning(manifest).value();
  fs::path second_path = cache.store_tuning(manifest).value();
  EXPECT_EQ(first_path, second_path);
  EXPECT_EQ(first_path, cache_root() / ("tuning-" + manifest.cache_key + ".json"));
  EXPECT_EQ(cache.load_tuning(manifest.cache_key).value(), std::optional(manifest));
}

TEST_F(ManifestCacheTest, RandomManifestsRoundTripThroughTheDisk) {
  SCOPED_TRACE(trace());
  ManifestCache cache(cache_root());
  for (int round = 0; round < 40; ++round) {
    TuningManifest tuning = testing::random_tuning_manifest(random_);
    ASSERT_TRUE(cache.store_tuning(tuning).ok());
    EXPECT_EQ(cache.load_tuning(tuning.cache_key).value(), std::optional(tuning));
    CertificationManifest certification = testing::random_certification_manifest(random_);
    if (!certification.cache_key) continue;
    fs::path path = cache.store_certification(certification).value();
    EXPECT_EQ(read_text(path), serialize_manifest(certification).value());
    EXPECT_EQ(cache.load_certification(*certification.cache_key).value(),
              std::optional(certification));
  }
}

TEST_F(ManifestCacheTest, MeasurementsRoundTripAndAreVerifiedLikeEveryEntry) {
  SCOPED_TRACE(trace());
  ManifestCache cache(cache_root());
  std::vector<MeasurementRecord> records;
  for (int round = 0; round < 20; ++round) {
    MeasurementRecord record = testing::random_measurement_record(random_);
    const fs::path path = cache.store_measurement(record).value();
    EXPECT_EQ(path, cache_root() / ("measurement-" + record.cache_key + ".json"));
    EXPECT_EQ(cache.load_measurement(record.cache_key).value(), std::optional(record));
    records.push_back(std::move(record));
  }
  const VerifyReport report = cache.verify().value();
  EXPECT_TRUE(report.clean());
  EXPECT_EQ(report.checks.size(), records.size());
  for (const EntryCheck& check : report.checks) {
    EXPECT_EQ(check.entry->kind, ManifestKind::kMeasurement);
  }
  // A measurement under another record's key belongs to neither.
  const MeasurementRecord& first = records.front();
  write_text(cache.path_for(ManifestKind::kMeasurement, records.back().cache_key),
             serialize_manifest(first).value());
  Result<std::optional<MeasurementRecord>> moved = cache.load_measurement(records.back().cache_key);
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.error().kind(), ErrorKind::kCorruption);
}

TEST_F(ManifestCacheTest, ADamagedEntryIsReplacedWhereAValidOneIsAnImmutableCollision) {
  SCOPED_TRACE(trace());
  ManifestCache cache(cache_root());
  // A certification of an older schema version, say: it reads as corrupt, and new evidence for
  // the same kernel replaces it.
  CertificationManifest certification = testing::random_certification_manifest(random_);
  while (!certification.cache_key) {
    certification = testing::random_certification_manifest(random_);
  }
  const fs::path path = cache.path_for(ManifestKind::kCertification, *certification.cache_key);
  fs::create_directories(cache_root());
  std::string old_version = serialize_manifest(certification).value();
  old_version.replace(old_version.find("\"schema_version\": 2"), 19, "\"schema_version\": 1");
  write_text(path, old_version);
  EXPECT_EQ(cache.load_certification(*certification.cache_key).error().kind(),
            ErrorKind::kCorruption);
  EXPECT_EQ(cache.store_certification_replacing_damaged(certification).value(), path);
  EXPECT_EQ(cache.load_certification(*certification.cache_key).value(),
            std::optional(certification));
  // A valid entry with other bytes stays, and the store is a collision.
  CertificationManifest other = certification;
  other.cases.front().seed ^= 1;
  Result<fs::path> collision = cache.store_certification_replacing_damaged(other);
  ASSERT_FALSE(collision.ok());
  EXPECT_EQ(collision.error().kind(), ErrorKind::kCollision);
  EXPECT_EQ(read_text(path), serialize_manifest(certification).value());

  // The same for measurements, whatever the damage: a torn file, or a directory of its name.
  MeasurementRecord record = testing::random_measurement_record(random_);
  const fs::path record_path = cache.path_for(ManifestKind::kMeasurement, record.cache_key);
  write_text(record_path, serialize_manifest(record).value().substr(0, 40));
  EXPECT_EQ(cache.store_measurement(record).value(), record_path);
  EXPECT_EQ(cache.load_measurement(record.cache_key).value(), std::optional(record));
  fs::remove(record_path);
  fs::create_directory(record_path);
  EXPECT_FALSE(cache.store_measurement(record).ok());
  EXPECT_TRUE(fs::is_directory(record_path));
}

TEST_F(ManifestCacheTest, InvalidKeysAreRefusedBeforeTouchingTheDisk) {
  ManifestCache cache(cache_root());
  const std::string valid(64, 'a');
  for (const std::string& key :
       {std::string(63, 'a'), std::string(65, 'a'), std::string(63, 'a') + "g", std::string(""),
        "../" + valid.substr(3), valid.substr(1) + "/", std::string(64, ' '),
        valid.substr(0, 63) + '\0'}) {
    SCOPED_TRACE("key '" + key + "'");
    Result<std::optional<TuningManifest>> loaded = cache.load_tuning(key);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.error().kind(), ErrorKind::kInvalidKey);
    EXPECT_NE(loaded.error().message().find("is not exactly 64 hexadecimal characters"),
              std::string::npos);
    EXPECT_EQ(cache.load_certification(key).error().kind(), ErrorKind::kInvalidKey);
  }
  EXPECT_EQ(validate_cache_key("abc").error().message(),
            "Cache key (abc) is not exactly 64 hexadecimal characters (it has 3 characters).");

  TuningManifest manifest = testing::random_tuning_manifest(random_);
  manifest.cache_key = "../" + valid.substr(3);
  Result<fs::path> stored = cache.store_tuning(manifest);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().kind(), ErrorKind::kInvalidKey);
  EXPECT_FALSE(fs::exists(cache_root())) << "an invalid key must not create the cache directory";
}

TEST_F(ManifestCacheTest, MissingEntryIsNoneNotAnError) {
  ManifestCache cache(cache_root());
  EXPECT_EQ(cache.load_tuning(std::string(64, 'a')).value(), std::nullopt);
  EXPECT_EQ(cache.load_certification(std::string(64, 'b')).value(), std::nullopt);
  EXPECT_TRUE(cache.list().value().empty());
}

TEST_F(ManifestCacheTest, CollisionIsAnErrorAndLeavesTheOldBytes) {
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  fs::path path = cache.store_tuning(manifest).value();
  const std::string old_bytes = read_text(path);

  TuningManifest retimed = manifest;  // same identity (key), different evidence
  retimed.result.winner.timing.median_ns += 1;
  retimed.result.finalists.back() = retimed.result.winner;
  ASSERT_EQ(retimed.compute_cache_key(), manifest.cache_key);
  Result<fs::path> stored = cache.store_tuning(retimed);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().kind(), ErrorKind::kCollision);
  EXPECT_NE(stored.error().message().find(path.string()), std::string::npos);
  EXPECT_NE(stored.error().message().find("entries are immutable"), std::string::npos);
  EXPECT_EQ(read_text(path), old_bytes);
  EXPECT_EQ(file_count(), 1u) << "no temporary file may be left behind";
}

TEST_F(ManifestCacheTest, UppercaseKeysNameTheSameEntry) {
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  ASSERT_TRUE(cache.store_tuning(manifest).ok());
  std::string upper = manifest.cache_key;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(cache.load_tuning(upper).value(), std::optional(manifest));
}

TEST_F(ManifestCacheTest, CertificationWithoutCacheKeyCannotBeStored) {
  ManifestCache cache(cache_root());
  CertificationManifest manifest = testing::random_certification_manifest(random_);
  manifest.cache_key.reset();
  Result<fs::path> stored = cache.store_certification(manifest);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().kind(), ErrorKind::kSerialization);
  EXPECT_EQ(stored.error().message(),
            "Certification manifest of affine_f32 has no adapter cache key (it was made without "
            "a topology hash) and cannot be cached.");
}

TEST_F(ManifestCacheTest, TopologyKeyIsBlake3OfHashNulKernelId) {
  // Computed independently with BLAKE3's own example program:
  //   printf '<empty-input hash>\0affine_f32' | ./example
  EXPECT_EQ(ManifestCache::topology_key(
                "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262", "affine_f32"),
            "b9fbe594e478f688da492084109ec341bbde8cbb3d791b72275feb17080bbb36");
  std::string topology(64, 'a');
  EXPECT_EQ(ManifestCache::topology_key(topology, "affine_f32"),
            ManifestCache::topology_key(topology, "affine_f32"));
  EXPECT_NE(ManifestCache::topology_key(topology, "affine_f32"),
            ManifestCache::topology_key(topology, "gemm_f32"));
  EXPECT_NE(ManifestCache::topology_key(topology, "affine_f32"),
            ManifestCache::topology_key(std::string(64, 'b'), "affine_f32"));
  // The NUL separator keeps (hash + "a", "b") apart from (hash, "ab").
  EXPECT_NE(ManifestCache::topology_key("x", "ab"), ManifestCache::topology_key("xa", "b"));
}

TEST_F(ManifestCacheTest, BucketKeyIsTheTopologyKeyForTheMainBucketAndDerivedForOthers) {
  const std::string topology = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";
  EXPECT_EQ(ManifestCache::bucket_key(topology, "affine_f32", ""),
            ManifestCache::topology_key(topology, "affine_f32"));
  // Computed independently with BLAKE3's own example program:
  //   printf '<empty-input hash>\0affine_f32\0002^20' | ./example
  EXPECT_EQ(ManifestCache::bucket_key(topology, "affine_f32", "2^20"),
            "c405bcbd9c0bfb58f18810a5fcdcae693be4f4ea247fc46e29e0d23d1f279a18");
  EXPECT_NE(ManifestCache::bucket_key(topology, "affine_f32", "2^20"),
            ManifestCache::bucket_key(topology, "affine_f32", "2^24"));
}

TEST_F(ManifestCacheTest, EachBucketHasItsOwnEntryAndAMovedEntryIsCorrupt) {
  ManifestCache cache(cache_root());
  TuningManifest main = testing::random_tuning_manifest(random_);
  main.context.topology_hash = testing::random_topology_hash(random_);
  main.context.bucket.reset();
  main.cache_key = main.compute_cache_key();
  TuningManifest small = main;
  small.context.bucket = "2^16";
  small.cache_key = small.compute_cache_key();
  const std::string topology = *main.context.topology_hash;

  const fs::path main_path = cache.store_tuning_for_topology(topology, "affine_f32", main).value();
  const fs::path small_path =
      cache.store_tuning_for_topology(topology, "affine_f32", small).value();
  EXPECT_EQ(main_path.filename().string(),
            "tuning-" + ManifestCache::topology_key(topology, "affine_f32") + ".json");
  EXPECT_EQ(small_path.filename().string(),
            "tuning-" + ManifestCache::bucket_key(topology, "affine_f32", "2^16") + ".json");
  EXPECT_EQ(cache.load_tuning_for_topology(topology, "affine_f32").value(), std::optional(main));
  EXPECT_EQ(cache.load_tuning_for_topology(topology, "affine_f32", "2^16").value(),
            std::optional(small));
  EXPECT_EQ(cache.load_tuning_for_topology(topology, "affine_f32", "2^20").value(), std::nullopt);

  // A writer of the directory who copies the small bucket's entry over the main one makes the
  // main entry corrupt, named, not a tuning the main size would use.
  fs::copy_file(small_path, main_path, fs::copy_options::overwrite_existing);
  Result<std::optional<TuningManifest>> moved =
      cache.load_tuning_for_topology(topology, "affine_f32");
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.error().kind(), ErrorKind::kCorruption);
  EXPECT_NE(moved.error().message().find("topology key of its bucket"), std::string::npos)
      << moved.error().message();
}

TEST_F(ManifestCacheTest, TuningIsStoredAndFoundByTopology) {
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  manifest.context.topology_hash = testing::random_topology_hash(random_);
  manifest.cache_key = manifest.compute_cache_key();
  const std::string topology = *manifest.context.topology_hash;

  EXPECT_EQ(cache.load_tuning_for_topology(topology, "affine_f32").value(), std::nullopt);
  fs::path path = cache.store_tuning_for_topology(topology, "affine_f32", manifest).value();
  EXPECT_EQ(path.filename().string(),
            "tuning-" + ManifestCache::topology_key(topology, "affine_f32") + ".json");
  EXPECT_EQ(cache.load_tuning_for_topology(topology, "affine_f32").value(),
            std::optional(manifest));
  EXPECT_EQ(cache.load_tuning_for_topology(topology, "gemm_f32").value(), std::nullopt);

  Result<fs::path> wrong =
      cache.store_tuning_for_topology(std::string(64, 'f'), "affine_f32", manifest);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_FALSE(cache.store_tuning_for_topology(topology, "gemm_f32", manifest).ok());
}

// Writes `text` over the entry that `manifest` was stored in, then expects every reader to
// report corruption naming that file.
void expect_corruption_reported(const ManifestCache& cache, const TuningManifest& manifest,
                                const fs::path& path) {
  Result<std::optional<TuningManifest>> loaded = cache.load_tuning(manifest.cache_key);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().kind(), ErrorKind::kCorruption);
  EXPECT_NE(loaded.error().message().find(path.string()), std::string::npos)
      << loaded.error().message();
  VerifyReport report = cache.verify().value();
  EXPECT_FALSE(report.clean());
  // Storing the genuine manifest again must not overwrite the damaged file silently.
  Result<fs::path> stored = cache.store_tuning(manifest);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().kind(), ErrorKind::kCorruption);
}

TEST_F(ManifestCacheTest, DamagedEntriesAreReportedAsCorruptionNamingTheFile) {
  SCOPED_TRACE(trace());
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  TuningManifest other = testing::random_tuning_manifest(random_);
  fs::path path = cache.store_tuning(manifest).value();
  const std::string bytes = read_text(path);

  std::vector<std::string> damages = {"", "not json", bytes.substr(0, bytes.size() / 2),
                                      bytes.substr(0, bytes.size() - 1),
                                      serialize_manifest(other).value()};
  std::string flipped = bytes;
  flipped[random_() % flipped.size()] ^= 0x20;
  damages.push_back(flipped);
  for (const std::string& damage : damages) {
    write_text(path, damage);
    SCOPED_TRACE("content: " + damage.substr(0, 60));
    expect_corruption_reported(cache, manifest, path);
  }
  fs::remove(path);
  fs::create_directory(path);
  expect_corruption_reported(cache, manifest, path);
}

// A writer who knows the format edits an entry into evidence create() refuses and recomputes
// both hashes: it is still corruption naming the file and the field, for loads and for verify.
TEST_F(ManifestCacheTest, AnEntryThatBreaksAnInvariantIsCorruptEvenWithRecomputedHashes) {
  SCOPED_TRACE(trace());
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  const fs::path path = cache.store_tuning(manifest).value();
  manifest.result.winner.oracle.mismatch_count = 5;
  manifest.result.finalists = {manifest.result.winner};
  write_text(path, serialize_manifest(manifest).value());

  Result<std::optional<TuningManifest>> loaded = cache.load_tuning(manifest.cache_key);
  ASSERT_FALSE(loaded.ok()) << "the edited entry was read as valid";
  EXPECT_EQ(loaded.error().kind(), ErrorKind::kCorruption);
  EXPECT_EQ(loaded.error().message().rfind("Cache entry " + path.string() +
                                               " is corrupt: Field 'result.winner.oracle' breaks "
                                               "an invariant of tuning manifests: The winner ",
                                           0),
            0u)
      << loaded.error().message();
  VerifyReport report = cache.verify().value();
  ASSERT_EQ(report.checks.size(), 1u);
  EXPECT_EQ(report.checks[0].health, EntryHealth::kCorrupt);
  EXPECT_FALSE(report.clean());
}

// Every prefix of a manifest, and the manifest with each byte changed in turn: every one is
// corruption naming the file, and `cache verify` lists it as corrupt.
TEST_F(ManifestCacheTest, EveryTruncationAndEveryByteFlipIsCorruption) {
  SCOPED_TRACE(trace());
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  const fs::path path = cache.store_tuning(manifest).value();
  const std::string bytes = read_text(path);
  auto expect_corrupt = [&](const std::string& damaged, const std::string& what) {
    write_text(path, damaged);
    Result<std::optional<TuningManifest>> loaded = cache.load_tuning(manifest.cache_key);
    ASSERT_FALSE(loaded.ok()) << what << " was read as a valid manifest";
    EXPECT_EQ(loaded.error().kind(), ErrorKind::kCorruption) << what;
    EXPECT_NE(loaded.error().message().find(path.string()), std::string::npos) << what;
    VerifyReport report = cache.verify().value();
    ASSERT_EQ(report.checks.size(), 1u) << what;
    EXPECT_EQ(report.checks[0].health, EntryHealth::kCorrupt) << what;
  };
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    expect_corrupt(bytes.substr(0, length), "the first " + std::to_string(length) + " bytes");
  }
  std::uniform_int_distribution<int> bit(0, 7);
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ (1 << bit(random_)));
    expect_corrupt(flipped, "a flipped bit in byte " + std::to_string(at));
  }
}

TEST_F(ManifestCacheTest, ListAndVerifyClassifyEveryFile) {
  ManifestCache cache(cache_root());
  TuningManifest tuning = testing::random_tuning_manifest(random_);
  CertificationManifest certification = testing::random_certification_manifest(random_);
  certification.topology_hash = std::string(64, '1');
  certification.cache_key = certification.compute_cache_key();
  fs::path tuning_path = cache.store_tuning(tuning).value();
  fs::path certification_path = cache.store_certification(certification).value();

  std::vector<CacheEntry> entries = cache.list().value();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_TRUE(cache.verify().value().clean());

  write_text(cache_root() / "notes.txt", "hello");
  write_text(cache_root() / ".tuning-abc.123.0.deadbeef.tmp", "partial");
  fs::path corrupt_path = cache_root() / ("tuning-" + std::string(64, 'e') + ".json");
  write_text(corrupt_path, read_text(tuning_path));  // someone else's content

  VerifyReport report = cache.verify().value();
  EXPECT_FALSE(report.clean());
  std::map<std::string, EntryHealth> health;
  for (const EntryCheck& check : report.checks)
    health[check.path.filename().string()] = check.health;
  EXPECT_EQ(health.size(), 5u);
  EXPECT_EQ(health["notes.txt"], EntryHealth::kForeign);
  EXPECT_EQ(health[".tuning-abc.123.0.deadbeef.tmp"], EntryHealth::kTemporary);
  EXPECT_EQ(health[corrupt_path.filename().string()], EntryHealth::kCorrupt);
  EXPECT_EQ(health[tuning_path.filename().string()], EntryHealth::kValid);
  EXPECT_EQ(health[certification_path.filename().string()], EntryHealth::kValid);
  EXPECT_EQ(cache.list().value().size(), 3u);
}

TEST_F(ManifestCacheTest, CacheRootThatIsAFileIsAClearError) {
  write_text(cache_root(), "I am a file");
  ManifestCache cache(cache_root());
  Result<fs::path> stored = cache.store_tuning(testing::random_tuning_manifest(random_));
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().kind(), ErrorKind::kIo);
  EXPECT_NE(stored.error().message().find("Cannot use " + cache_root().string()),
            std::string::npos);
}

// Runs `read` and returns what it returned, or nullopt when it was still blocked on the FIFO at
// `fifo` after five seconds; a writer then opens and closes the FIFO, so that the blocked read
// ends and the test fails instead of hanging.
template <typename Read>
auto unless_blocked_on(const fs::path& fifo, Read read) -> std::optional<decltype(read())> {
  std::packaged_task<decltype(read())()> task(read);
  auto outcome = task.get_future();
  std::thread reader(std::move(task));
  const bool finished = outcome.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!finished) {
    int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) ::close(writer);
  }
  reader.join();
  if (!finished) return std::nullopt;
  return outcome.get();
}

TEST_F(ManifestCacheTest, AFifoNamedLikeAnEntryIsRefusedAtOnceByEveryReader) {
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  fs::create_directories(cache_root());
  const fs::path fifo = cache.path_for(ManifestKind::kTuning, manifest.cache_key);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string expected = "Cache entry " + fifo.string() + " is a FIFO, not a regular file.";

  auto loaded = unless_blocked_on(fifo, [&] { return cache.load_tuning(manifest.cache_key); });
  ASSERT_TRUE(loaded.has_value()) << "load_tuning blocked on a FIFO";
  ASSERT_FALSE(loaded->ok());
  EXPECT_EQ(loaded->error().kind(), ErrorKind::kCorruption);
  EXPECT_EQ(loaded->error().message(), expected);

  auto report = unless_blocked_on(fifo, [&] { return cache.verify(); });
  ASSERT_TRUE(report.has_value()) << "verify blocked on a FIFO";
  ASSERT_EQ(report->value().checks.size(), 1u);
  EXPECT_EQ(report->value().checks[0].health, EntryHealth::kCorrupt);
  EXPECT_EQ(report->value().checks[0].message, expected);

  auto stored = unless_blocked_on(fifo, [&] { return cache.store_tuning(manifest); });
  ASSERT_TRUE(stored.has_value()) << "store_tuning blocked on a FIFO";
  ASSERT_FALSE(stored->ok());
  EXPECT_EQ(stored->error().kind(), ErrorKind::kCorruption);
  EXPECT_EQ(cache.list().value().size(), 1u);  // listing reads no file
}

// A symbolic link is never followed, even to a valid entry: the cache holds only files its writers
// made, and a link could name anything (a FIFO, a device, another user's file).
TEST_F(ManifestCacheTest, ASymbolicLinkNamedLikeAnEntryIsRefused) {
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  const fs::path genuine = cache.store_tuning(manifest).value();
  const fs::path elsewhere = temp_.path() / "elsewhere.json";
  fs::rename(genuine, elsewhere);
  fs::create_symlink(elsewhere, genuine);

  Result<std::optional<TuningManifest>> loaded = cache.load_tuning(manifest.cache_key);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().kind(), ErrorKind::kCorruption);
  EXPECT_EQ(loaded.error().message(),
            "Cache entry " + genuine.string() + " is a symbolic link, not a regular file.");
  VerifyReport report = cache.verify().value();
  ASSERT_EQ(report.checks.size(), 1u);
  EXPECT_EQ(report.checks[0].health, EntryHealth::kCorrupt);
}

// A 200 KB entry with one field nested 100,000 levels deep overflowed the stack of every reader.
TEST_F(ManifestCacheTest, AnEntryNestedTooDeeplyIsCorruptionNotACrash) {
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  const fs::path path = cache.store_tuning(manifest).value();
  constexpr std::size_t kDepth = 100000;
  write_text(path, "{\"deep\": " + std::string(kDepth, '[') + std::string(kDepth, ']') + "," +
                       read_text(path).substr(1));

  Result<std::optional<TuningManifest>> loaded = cache.load_tuning(manifest.cache_key);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().kind(), ErrorKind::kCorruption);
  EXPECT_NE(loaded.error().message().find("(100001 levels, the limit is 64)"), std::string::npos)
      << loaded.error().message();
  VerifyReport report = cache.verify().value();
  ASSERT_EQ(report.checks.size(), 1u);
  EXPECT_EQ(report.checks[0].health, EntryHealth::kCorrupt);
}

// An entry larger than kMaxManifestBytes is refused from its size (fstat), before reading it.
TEST_F(ManifestCacheTest, AnEntryLargerThanTheLimitIsRefusedWithoutReadingIt) {
  ManifestCache cache(cache_root());
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  const fs::path path = cache.store_tuning(manifest).value();
  fs::resize_file(path, kMaxManifestBytes + 1);  // sparse: no disk space, no memory

  Result<std::optional<TuningManifest>> loaded = cache.load_tuning(manifest.cache_key);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().kind(), ErrorKind::kCorruption);
  EXPECT_EQ(loaded.error().message(), "Cache entry " + path.string() +
                                          " is too large to be a manifest (16777217 bytes, the "
                                          "limit is 16777216).");
}

// Starts `writers` processes that each store manifest_for(i) at the same moment; returns the
// exit code of each (0 stored, 1 collision, 2 anything else).
std::vector<int> store_concurrently(const fs::path& root, int writers,
                                    const std::function<TuningManifest(int)>& manifest_for) {
  int start_gate[2];
  EXPECT_EQ(::pipe(start_gate), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < writers; ++i) {
    TuningManifest manifest = manifest_for(i);
    pid_t child = ::fork();
    if (child == 0) {
      ::close(start_gate[1]);
      char byte;
      while (::read(start_gate[0], &byte, 1) < 0) {
      }
      Result<fs::path> stored = ManifestCache(root).store_tuning(manifest);
      ::_exit(stored.ok() ? 0 : stored.error().kind() == ErrorKind::kCollision ? 1 : 2);
    }
    children.push_back(child);
  }
  ::close(start_gate[0]);
  ::close(start_gate[1]);  // opens the gate: every child's read returns at once
  std::vector<int> codes;
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
  }
  return codes;
}

TEST_F(ManifestCacheTest, IdenticalConcurrentStoresAllSucceedWithOneFile) {
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  std::vector<int> codes = store_concurrently(cache_root(), 16, [&](int) { return manifest; });
  for (int code : codes) EXPECT_EQ(code, 0);
  EXPECT_EQ(file_count(), 1u) << "one entry, no leftover temporary files";
  EXPECT_TRUE(ManifestCache(cache_root()).verify().value().clean());
  EXPECT_EQ(ManifestCache(cache_root()).load_tuning(manifest.cache_key).value(),
            std::optional(manifest));
}

TEST_F(ManifestCacheTest, DifferentConcurrentStoresGiveOneWinnerAndCleanCollisions) {
  TuningManifest manifest = testing::random_tuning_manifest(random_);
  std::vector<int> codes = store_concurrently(cache_root(), 16, [&](int i) {
    TuningManifest variant = manifest;
    variant.result.winner.timing.median_ns += i;
    variant.result.finalists.back() = variant.result.winner;
    return variant;
  });
  EXPECT_EQ(std::count(codes.begin(), codes.end(), 0), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), 1), 15);
  EXPECT_EQ(file_count(), 1u);
  ManifestCache cache(cache_root());
  EXPECT_TRUE(cache.load_tuning(manifest.cache_key).ok());
  EXPECT_TRUE(cache.verify().value().clean());
}

class CacheRootResolutionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name, value->c_str(), 1);
      else
        ::unsetenv(name);
    }
  }
  static constexpr const char* kVariables[] = {"WGSL_FORGE_CACHE", "XDG_CACHE_HOME", "HOME"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(CacheRootResolutionTest, FlagThenVariablesThenHome) {
  EXPECT_FALSE(resolve_cache_root(std::nullopt).ok());
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(resolve_cache_root(std::nullopt).value(), fs::path("/home/u/.cache/wgsl-forge"));
  ::setenv("XDG_CACHE_HOME", "", 1);  // empty counts as unset
  EXPECT_EQ(resolve_cache_root(std::nullopt).value(), fs::path("/home/u/.cache/wgsl-forge"));
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(resolve_cache_root(std::nullopt).value(), fs::path("/xdg/wgsl-forge"));
  ::setenv("WGSL_FORGE_CACHE", "/forge", 1);
  EXPECT_EQ(resolve_cache_root(std::nullopt).value(), fs::path("/forge"));
  EXPECT_EQ(resolve_cache_root(fs::path("/flag")).value(), fs::path("/flag"));
}

TEST_F(CacheRootResolutionTest, ARelativeXdgCacheHomeIsIgnored) {
  ::setenv("HOME", "/home/u", 1);
  for (const char* relative : {"cache", "./cache", "../cache", "~/.cache"}) {
    ::setenv("XDG_CACHE_HOME", relative, 1);
    EXPECT_EQ(resolve_cache_root(std::nullopt).value(), fs::path("/home/u/.cache/wgsl-forge"))
        << relative;
  }
}

}  // namespace
}  // namespace wgsl_forge
