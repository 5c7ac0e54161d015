// The cache under faults (SQLite's method): every file operation of a store is made to fail in
// turn, or the storing process is killed at it, and the cache must hold no partial entry, readers
// must never see a temporary file, and a later store must succeed.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <random>
#include <thread>

#include "support/faulty_file_system.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;
using testing::Fault;
using testing::FaultyFileSystem;

class CacheFaultTest : public testing::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    manifest_ = testing::random_tuning_manifest(random_);
    bytes_ = serialize_manifest(manifest_).value();
  }
  // A root two levels below the temporary directory, so that a store creates directories.
  fs::path fresh_root(const std::string& name) const { return temp_.path() / name / "cache"; }

  // The operations of a store that succeeds, by name.
  std::vector<std::string> clean_store_operations(bool has_renameat2) const {
    auto files = std::make_shared<FaultyFileSystem>(Fault::kNone, 0, has_renameat2);
    EXPECT_TRUE(ManifestCache(fresh_root("count"), files).store_tuning(manifest_).ok());
    fs::remove_all(temp_.path() / "count");
    return files->operations();
  }

  // What a reader must find after any fault: nothing, or exactly the stored bytes; no error.
  void expect_no_partial_entry(const fs::path& root, const std::string& context) const {
    ManifestCache cache(root);
    Result<std::optional<TuningManifest>> loaded = cache.load_tuning(manifest_.cache_key);
    ASSERT_TRUE(loaded.ok()) << context << ": " << loaded.error().to_string();
    if (loaded->has_value()) {
      EXPECT_EQ(**loaded, manifest_) << context;
    }
    Result<VerifyReport> report = cache.verify();
    ASSERT_TRUE(report.ok()) << context;
    EXPECT_TRUE(report->clean()) << context;
  }

  std::size_t temporary_files(const fs::path& root) const {
    std::size_t count = 0;
    if (!fs::exists(root)) return 0;
    for (const auto& item : fs::directory_iterator(root)) {
      if (item.path().filename().string().starts_with('.')) ++count;
    }
    return count;
  }

  void expect_later_store_succeeds(const fs::path& root, const std::string& context) const {
    ManifestCache cache(root);
    Result<fs::path> stored = cache.store_tuning(manifest_);
    ASSERT_TRUE(stored.ok()) << context << ": " << stored.error().to_string();
    EXPECT_EQ(testing::read_text(*stored), bytes_) << context;
    EXPECT_EQ(cache.load_tuning(manifest_.cache_key).value(), std::optional(manifest_)) << context;
  }

  testing::TempDir temp_;
  TuningManifest manifest_;
  std::string bytes_;
};

TEST_F(CacheFaultTest, EveryFileOperationOfAStoreCanFail) {
  for (bool has_renameat2 : {true, false}) {
    const std::vector<std::string> operations = clean_store_operations(has_renameat2);
    ASSERT_GE(operations.size(), 8u) << "mkdir, open, create, write, fsync, close, move, flush";
    for (Fault fault : {Fault::kNoSpace, Fault::kIoError, Fault::kShortWrite}) {
      for (std::size_t k = 1; k <= operations.size(); ++k) {
        const std::string context = std::string(testing::fault_name(fault)) + " at operation " +
                                    std::to_string(k) + " (" + operations[k - 1] + ")" +
                                    (has_renameat2 ? "" : " without renameat2") + ", " + trace();
        const fs::path root =
            fresh_root(std::to_string(has_renameat2) + "-" +
                       std::to_string(static_cast<int>(fault)) + "-" + std::to_string(k));
        auto files = std::make_shared<FaultyFileSystem>(fault, k, has_renameat2);
        Result<fs::path> stored = ManifestCache(root, files).store_tuning(manifest_);
        if (files->faulted_operation().empty()) {
          // A short write fault on an operation that is not a write: nothing happened.
          EXPECT_TRUE(stored.ok()) << context;
        } else if (stored.ok()) {
          // Only failures that come after the entry is complete may go unreported: removing the
          // temporary name after a link, or closing the directory after its flush.
          EXPECT_TRUE(files->faulted_operation() == "unlink" ||
                      (files->faulted_operation() == "close" && k == operations.size()))
              << context << ": the store succeeded although " << files->faulted_operation()
              << " failed";
          EXPECT_EQ(testing::read_text(*stored), bytes_) << context;
        } else {
          EXPECT_EQ(stored.error().kind(), ErrorKind::kIo) << context;
          const char* expected =
              fault == Fault::kIoError ? "Input/output error" : "No space left on device";
          EXPECT_NE(stored.error().message().find(expected), std::string::npos)
              << context << ": " << stored.error().to_string();
          EXPECT_EQ(temporary_files(root), 0u) << context << ": the temporary file was left";
        }
        expect_no_partial_entry(root, context);
        expect_later_store_succeeds(root, context);
      }
    }
  }
}

TEST_F(CacheFaultTest, FaultsWhileReadingAnExistingEntryLeaveItIntact) {
  const fs::path root = fresh_root("existing");
  ASSERT_TRUE(ManifestCache(root).store_tuning(manifest_).ok());
  TuningManifest different = manifest_;
  different.result.winner.timing.median_ns += 1;
  different.result.finalists.back() = different.result.winner;
  for (const TuningManifest* offered : {&manifest_, &different}) {
    auto counting = std::make_shared<FaultyFileSystem>(Fault::kNone, 0);
    (void)ManifestCache(root, counting).store_tuning(*offered);
    for (std::size_t k = 1; k <= counting->operations().size(); ++k) {
      const std::string context = "EIO at operation " + std::to_string(k) + " (" +
                                  counting->operations()[k - 1] + ") of a store " +
                                  (offered == &manifest_ ? "of the same bytes" : "that collides");
      auto files = std::make_shared<FaultyFileSystem>(Fault::kIoError, k);
      Result<fs::path> stored = ManifestCache(root, files).store_tuning(*offered);
      if (stored.ok()) {
        EXPECT_EQ(offered, &manifest_) << context;
        EXPECT_EQ(files->faulted_operation(), "close") << context;
      } else if (files->faulted_operation() != "close") {
        EXPECT_EQ(stored.error().kind(), ErrorKind::kIo) << context;
      }
      EXPECT_EQ(testing::read_text(
                    ManifestCache(root).path_for(ManifestKind::kTuning, manifest_.cache_key)),
                bytes_)
          << context;
      EXPECT_EQ(temporary_files(root), 0u) << context;
    }
  }
}

// Runs a store in a child process that the file system kills at operation `k`; returns how the
// child ended (true when it was killed).
bool store_killed_at(const fs::path& root, const TuningManifest& manifest, Fault when,
                     std::size_t k) {
  pid_t child = ::fork();
  if (child == 0) {
    auto files = std::make_shared<FaultyFileSystem>(when, k);
    Result<fs::path> stored = ManifestCache(root, files).store_tuning(manifest);
    ::_exit(stored.ok() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

TEST_F(CacheFaultTest, KilledAtEveryFileOperationLeavesNoEntryOrACompleteOne) {
  const std::vector<std::string> operations = clean_store_operations(true);
  for (Fault when : {Fault::kKillBefore, Fault::kKillAfter}) {
    for (std::size_t k = 1; k <= operations.size(); ++k) {
      const std::string context = std::string(testing::fault_name(when)) + " operation " +
                                  std::to_string(k) + " (" + operations[k - 1] + ")";
      const fs::path root =
          fresh_root("kill-" + std::to_string(static_cast<int>(when)) + "-" + std::to_string(k));
      ASSERT_TRUE(store_killed_at(root, manifest_, when, k)) << context << ": not killed";
      expect_no_partial_entry(root, context);
      // Its temporary file, if any, is not reported as damage and is pruned once stale.
      Result<PruneReport> pruned =
          ManifestCache(root).remove_stale_temporaries(std::chrono::seconds(0));
      ASSERT_TRUE(pruned.ok()) << context;
      EXPECT_EQ(temporary_files(root), 0u) << context;
      expect_later_store_succeeds(root, context);
    }
  }
}

TEST_F(CacheFaultTest, KilledAtRandomMomentsWhileStoringManyEntries) {
  const fs::path root = fresh_root("random-kills");
  std::vector<TuningManifest> manifests;
  for (int i = 0; i < 40; ++i) manifests.push_back(testing::random_tuning_manifest(random_));
  std::uniform_int_distribution<int> delay_us(0, 20000);
  for (int round = 0; round < 15; ++round) {
    pid_t child = ::fork();
    if (child == 0) {
      ManifestCache cache(root);
      for (int pass = 0;; ++pass) {
        for (const TuningManifest& manifest : manifests) (void)cache.store_tuning(manifest);
        (void)cache.remove(ManifestKind::kTuning,
                           manifests[static_cast<std::size_t>(pass) % manifests.size()].cache_key);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random_)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << trace();
  }
  ManifestCache cache(root);
  Result<VerifyReport> report = cache.verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean()) << trace();
  for (const TuningManifest& manifest : manifests) {
    Result<std::optional<TuningManifest>> loaded = cache.load_tuning(manifest.cache_key);
    ASSERT_TRUE(loaded.ok()) << loaded.error().to_string() << ", " << trace();
    if (loaded->has_value()) {
      EXPECT_EQ(**loaded, manifest) << trace();
    }
  }
}

void set_age(const fs::path& path, std::chrono::seconds age) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age.count();
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << std::strerror(errno);
}

TEST_F(CacheFaultTest, PruneRemovesOnlyTemporaryFilesOlderThanAnyLiveWriter) {
  const fs::path root = fresh_root("prune");
  ManifestCache cache(root);
  const fs::path entry = cache.store_tuning(manifest_).value();
  const fs::path stale = root / (".tuning-" + manifest_.cache_key + ".4242.0.00ff.tmp");
  const fs::path live = root / (".tuning-" + manifest_.cache_key + ".4243.0.00ff.tmp");
  const fs::path foreign = root / "notes.txt";
  for (const fs::path& path : {stale, live, foreign}) testing::write_text(path, "partial");
  set_age(stale, std::chrono::hours(2));
  set_age(foreign, std::chrono::hours(2));
  set_age(entry, std::chrono::hours(2));
  set_age(live, std::chrono::seconds(10));

  Result<PruneReport> pruned = cache.remove_stale_temporaries();
  ASSERT_TRUE(pruned.ok()) << pruned.error().to_string();
  EXPECT_EQ(pruned->removed, std::vector<fs::path>{stale});
  EXPECT_TRUE(pruned->skipped.empty());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(foreign));
  EXPECT_EQ(cache.load_tuning(manifest_.cache_key).value(), std::optional(manifest_));
  EXPECT_TRUE(ManifestCache(temp_.path() / "missing").remove_stale_temporaries()->removed.empty());
}

// An age beyond what the file clock can count in nanoseconds (about 292 years) used to wrap
// around to a negative age, and every temporary file, a live writer's too, counted as stale.
TEST_F(CacheFaultTest, PruneRefusesAnAgeTheFileClockCannotRepresent) {
  const fs::path root = fresh_root("prune-overflow");
  ManifestCache cache(root);
  cache.store_tuning(manifest_).value();
  const fs::path live = root / (".tuning-" + manifest_.cache_key + ".4243.0.00ff.tmp");
  testing::write_text(live, "partial");
  set_age(live, std::chrono::seconds(10));

  EXPECT_TRUE(cache.remove_stale_temporaries(ManifestCache::kLongestTemporaryAge).ok());
  EXPECT_TRUE(fs::exists(live));
  const std::chrono::seconds too_long =
      ManifestCache::kLongestTemporaryAge + std::chrono::seconds(1);
  Result<PruneReport> pruned = cache.remove_stale_temporaries(too_long);
  ASSERT_FALSE(pruned.ok());
  EXPECT_EQ(pruned.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(pruned.error().message(),
            "Age of a stale temporary file (9223372037 s) exceeds the longest the file clock can "
            "measure (9223372036 s).");
  EXPECT_TRUE(fs::exists(live));
}

// Writers only make regular files; anything else with a temporary name is reported, left alone,
// and the other files are still pruned.
TEST_F(CacheFaultTest, PruneSkipsADirectoryNamedLikeATemporaryFileAndGoesOn) {
  const fs::path root = fresh_root("prune-directory");
  ManifestCache cache(root);
  cache.store_tuning(manifest_).value();
  const fs::path directory = root / (".tuning-" + manifest_.cache_key + ".4244.0.00ff.tmp");
  const fs::path stale = root / (".tuning-" + manifest_.cache_key + ".4245.0.00ff.tmp");
  fs::create_directory(directory);
  testing::write_text(stale, "partial");
  set_age(directory, std::chrono::hours(2));
  set_age(stale, std::chrono::hours(2));

  Result<PruneReport> pruned = cache.remove_stale_temporaries();
  ASSERT_TRUE(pruned.ok()) << pruned.error().to_string();
  EXPECT_EQ(pruned->removed, std::vector<fs::path>{stale});
  ASSERT_EQ(pruned->skipped.size(), 1u);
  EXPECT_EQ(pruned->skipped[0].path, directory);
  EXPECT_EQ(pruned->skipped[0].reason, "is a directory, not a writer's temporary file");
  EXPECT_TRUE(fs::is_directory(directory));
}

// Many threads of one process share a cache object (what a database's start-up does).
TEST_F(CacheFaultTest, ThreadsStoringIntoOneCacheAgree) {
  const fs::path root = fresh_root("threads");
  const ManifestCache cache(root);
  constexpr std::size_t kThreads = 16;
  std::vector<TuningManifest> variants;
  for (std::size_t i = 0; i < kThreads; ++i) {
    TuningManifest variant = manifest_;
    variant.result.winner.timing.median_ns += static_cast<double>(i);
    variant.result.finalists.back() = variant.result.winner;
    variants.push_back(variant);
  }
  TuningManifest other = testing::random_tuning_manifest(random_);
  struct Outcome {
    Result<fs::path> identical = fs::path();
    Result<fs::path> differing = fs::path();
  };
  std::vector<Outcome> outcomes(kThreads);  // one element per thread: no sharing
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      outcomes[i].identical = cache.store_tuning(other);
      outcomes[i].differing = cache.store_tuning(variants[i]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::size_t winners = 0;
  for (const Outcome& outcome : outcomes) {
    EXPECT_TRUE(outcome.identical.ok()) << outcome.identical.error().to_string() << ", " << trace();
    if (outcome.differing.ok()) {
      ++winners;
    } else {
      EXPECT_EQ(outcome.differing.error().kind(), ErrorKind::kCollision)
          << outcome.differing.error().to_string();
    }
  }
  EXPECT_EQ(winners, 1u) << trace();
  EXPECT_EQ(cache.list().value().size(), 2u);
  EXPECT_TRUE(cache.verify().value().clean());
  EXPECT_EQ(temporary_files(root), 0u);
}

// A re-tune's replacement of a topology-keyed entry, old by new.
class ReplacementFaultTest : public CacheFaultTest {
 protected:
  void SetUp() override {
    CacheFaultTest::SetUp();
    // One that records its topology (the cache key covers it), as the tuner's always do.
    old_ = manifest_;
    while (!old_.context.topology_hash) old_ = testing::random_tuning_manifest(random_);
    topology_ = *old_.context.topology_hash;
    new_ = old_;
    new_.result.winner.timing.median_ns /= 2;
    new_.result.finalists.back() = new_.result.winner;
    old_bytes_ = serialize_manifest(old_).value();
    new_bytes_ = serialize_manifest(new_).value();
    ASSERT_NE(old_bytes_, new_bytes_);
  }
  // A root holding the old entry; returns its entry's path.
  fs::path root_with_old_entry(const fs::path& root) const {
    return ManifestCache(root).store_tuning_for_topology(topology_, old_.kernel_id, old_).value();
  }
  Result<fs::path> replace(const fs::path& root, std::shared_ptr<FileSystem> files) const {
    ManifestCache cache(root, std::move(files));
    const ManifestCache::Snapshot before{old_bytes_};
    return cache.replace_tuning_for_topology(topology_, old_.kernel_id, new_, before);
  }
  // What a reader must find after any fault: the old entry byte for byte, or the new one.
  void expect_old_or_new(const fs::path& entry, const std::string& context) const {
    ASSERT_TRUE(fs::exists(entry)) << context << ": the entry is gone";
    const std::string bytes = testing::read_text(entry);
    EXPECT_TRUE(bytes == old_bytes_ || bytes == new_bytes_) << context << ": " << bytes;
  }

  std::string topology_;
  TuningManifest old_;
  TuningManifest new_;
  std::string old_bytes_;
  std::string new_bytes_;
};

TEST_F(ReplacementFaultTest, EveryFailedOrKilledFileOperationLeavesTheOldEntryOrTheNewOne) {
  auto counting = std::make_shared<FaultyFileSystem>(Fault::kNone, 0);
  const fs::path counted = root_with_old_entry(fresh_root("count"));
  ASSERT_TRUE(replace(counted.parent_path(), counting).ok());
  EXPECT_EQ(testing::read_text(counted), new_bytes_);
  const std::vector<std::string> operations = counting->operations();
  for (Fault fault : {Fault::kNoSpace, Fault::kIoError, Fault::kShortWrite, Fault::kKillBefore,
                      Fault::kKillAfter}) {
    for (std::size_t k = 1; k <= operations.size(); ++k) {
      const std::string context = std::string(testing::fault_name(fault)) + " at operation " +
                                  std::to_string(k) + " (" + operations[k - 1] + "), " + trace();
      const fs::path entry = root_with_old_entry(fresh_root(
          "replace-" + std::to_string(static_cast<int>(fault)) + "-" + std::to_string(k)));
      const fs::path root = entry.parent_path();
      if (fault == Fault::kKillBefore || fault == Fault::kKillAfter) {
        pid_t child = ::fork();
        if (child == 0) {
          ::_exit(replace(root, std::make_shared<FaultyFileSystem>(fault, k)).ok() ? 0 : 1);
        }
        int status = 0;
        ::waitpid(child, &status, 0);
        ASSERT_TRUE(WIFSIGNALED(status)) << context << ": not killed";
      } else {
        Result<fs::path> replaced = replace(root, std::make_shared<FaultyFileSystem>(fault, k));
        if (!replaced.ok() && testing::read_text(entry) == old_bytes_) {
          EXPECT_EQ(temporary_files(root), 0u) << context << ": the temporary file was left";
        }
      }
      expect_old_or_new(entry, context);
      ManifestCache cache(root);
      ASSERT_TRUE(cache.remove_stale_temporaries(std::chrono::seconds(0)).ok()) << context;
      Result<VerifyReport> report = cache.verify();
      ASSERT_TRUE(report.ok()) << context;
      for (const EntryCheck& check : report->checks) {
        EXPECT_EQ(check.health, EntryHealth::kValid)
            << context << ": " << check.path << " " << check.message;
      }
    }
  }
}

TEST_F(ReplacementFaultTest, AnEntryAnotherWriterReplacedMeanwhileIsKept) {
  const fs::path entry = root_with_old_entry(fresh_root("raced"));
  ManifestCache cache(entry.parent_path());
  const ManifestCache::Snapshot before =
      cache.snapshot(ManifestKind::kTuning, ManifestCache::topology_key(topology_, old_.kernel_id))
          .value();
  ASSERT_EQ(before.bytes, std::optional(old_bytes_));
  TuningManifest other = new_;
  other.result.winner.timing.median_ns /= 2;
  other.result.finalists.back() = other.result.winner;
  ASSERT_TRUE(
      cache.replace_tuning_for_topology(topology_, old_.kernel_id, other, std::nullopt).ok());
  const std::string others_bytes = testing::read_text(entry);
  Result<fs::path> replaced =
      cache.replace_tuning_for_topology(topology_, old_.kernel_id, new_, before);
  ASSERT_FALSE(replaced.ok());
  EXPECT_EQ(replaced.error().kind(), ErrorKind::kCollision) << replaced.error().to_string();
  EXPECT_NE(replaced.error().message().find("changed while this process was writing it"),
            std::string::npos)
      << replaced.error().to_string();
  EXPECT_EQ(testing::read_text(entry), others_bytes);
  // The same bytes as the other writer's are success.
  EXPECT_EQ(cache.replace_tuning_for_topology(topology_, old_.kernel_id, other, before).value(),
            entry);
}

}  // namespace
}  // namespace wgsl_forge
