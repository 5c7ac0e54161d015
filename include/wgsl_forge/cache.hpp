#pragma once
// ManifestCache: immutable, adapter-keyed storage of tuning and certification manifests.
//
// Layout: one file per entry, `<root>/<kind>-<key>.json`, kind "tuning", "certification" or
// "measurement", key 64
// lowercase hexadecimal characters (keys given in upper case name the same entry). Contents are
// canonical JSON (manifest_json.hpp). Files whose names start with '.' are temporary files of
// writers and are never read as entries. The directory `leases` holds auto-tune-all's local
// leases (leases.hpp), not entries.
//
// Contract (from the original cache.rs, plus crash safety):
//   - a key that is not exactly 64 hex characters is an error before the disk is touched;
//   - a store writes a uniquely named temporary file in the root, flushes it to disk, moves it into
//     place without replacing anything that is there, then flushes the directory;
//   - entries are immutable: storing identical bytes again succeeds with the same path; different
//     bytes under an existing key are a collision error and the old entry stays untouched; losing
//     a race to an identical writer is success, to a different writer a collision; the one
//     exception is an explicit re-tune (replace_tuning_for_topology), which renames a complete
//     new entry over the old one, atomically;
//   - a missing entry loads as std::nullopt; a file that does not parse, or whose content does not
//     belong to its key, is a corruption error naming the file;
//   - a name of an entry that is not a regular file (a FIFO, a socket, a device, a directory) or is
//     a symbolic link is a corruption error naming the file and what it is, at once: entries are
//     opened with O_NONBLOCK | O_NOFOLLOW and the type is checked on the opened descriptor, so no
//     file can make a reader wait. Links are refused, not followed, even to a valid entry: writers
//     only ever make regular files, and a link may name anything (a FIFO, a device, /dev/zero);
//   - topology_key(topology_hash, kernel_id) = BLAKE3(topology_hash + "\0" + kernel_id), hex.
//   - size buckets (kernels::SizeBucket): a kernel is tuned at a few sizes. The entry of its main
//     bucket stays at topology_key; the entry of another bucket, labelled L ("2^20", "1024^3"),
//     is at bucket_key = BLAKE3(topology_hash + "\0" + kernel_id + "\0" + L), hex. Each tuning
//     manifest records its bucket (context.bucket, null for the main one), so that a reader
//     checks the entry belongs to the key it is stored under.
//
// Trust model. Whoever can write the root can change what every reader of it runs: the cache is
// as trusted as the least trusted writer of its directory, so it belongs to one user (the default
// roots under $HOME and $XDG_CACHE_HOME are; a --cache or WGSL_FORGE_CACHE shared with others
// gives them that power). The hashes in an entry detect damage (a torn write, a flipped bit, a
// hand edit that did not recompute them), not malice: anyone who can write a file can write one
// whose hashes match. So readers trust nothing in the root, neither the type nor the content of
// a file, and every such file is reported, never a hang; and what a writer can achieve is
// bounded by what is checked before an entry is used:
//   - the parser accepts only what the manifest's create() would make (model.hpp,
//     broken_invariant): a winner that is certified and among the finalists, consistent counts,
//     the cache key of the identity; anything else is corruption naming the field and the rule;
//   - using a tuning entry (forge::find_unusable_tuning: KernelLibrary, auto-tune-all, bench,
//     cache verify) requires its kernel's current revision, a winner that is a legal schedule of
//     that revision (and fits the device, where one is open) and a source hash equal to that of
//     the WGSL regenerated for the winner; otherwise the default schedule runs (or auto-tune-all
//     tunes again) and the reason names the entry. The WGSL that runs is always regenerated,
//     never read from the cache;
//   - so an edit can at most pick another legal schedule of the kernel (a slower one, or one
//     that computes wrong results on this adapter: the winner's certification is recorded, not
//     re-run, unless KernelLibraryOptions::recertify re-runs its quick cases at load), make a
//     kernel fall back to its default schedule, or make auto-tune-all tune again. It cannot make
//     a reader run WGSL that the generator did not write, run a schedule outside the kernel's
//     space, crash, hang or exhaust memory (the size and nesting limits of manifest_json.hpp).
// Certification entries are evidence keyed by everything they certify (including the source
// hash, which --source may make that of hand-written WGSL); nothing runs because of one, and
// auto-tune-all only counts their cases.
//
// Crash safety: a process killed at any point of a store leaves either no entry or the complete
// one, plus at most its temporary file, which readers never see; remove_stale_temporaries (the
// `wgsl-forge cache prune` command) deletes those once they are older than any live store. Every
// file operation goes through a FileSystem (file_system.hpp), so tests fail each one in turn.
//
// A remote store (set_remote; remote_store.hpp has its key layout, timeouts and failure rule)
// shares tuning and certification entries across a fleet. A load that finds no local entry asks
// it, checks the bytes exactly as a file of the root (decode: content hash, invariants, key and
// topology) and stores them locally before returning them; bytes that fail the checks are a
// kCorruption error naming the remote entry, and nothing is stored locally. A store publishes to
// the remote before it writes locally: SET NX, so a different valid value there is a kCollision
// (and nothing is written locally), a damaged one a kCorruption error; the replacing stores
// (store_certification_replacing_damaged, replace_tuning_for_topology) replace on the remote
// what they replace locally, by compare-and-set. A remote that is offline is skipped.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wgsl_forge/error.hpp"
#include "wgsl_forge/file_system.hpp"
#include "wgsl_forge/model.hpp"
#include "wgsl_forge/remote_store.hpp"

namespace wgsl_forge {

// Tuning and certification manifests, and measurement records (one candidate's outcome in a
// search, from which an interrupted search resumes; model.hpp, MeasurementRecord).
enum class ManifestKind { kTuning, kCertification, kMeasurement };
const char* manifest_kind_name(ManifestKind kind);

// Ok when `key` is exactly 64 hexadecimal characters; an kInvalidKey error naming it otherwise.
Status validate_cache_key(std::string_view key);

struct CacheEntry {
  ManifestKind kind = ManifestKind::kTuning;
  std::string key;
  std::filesystem::path path;
};

// What an entry says about itself, for listing and for choosing entries by kernel.
struct EntrySummary {
  ManifestKind kind = ManifestKind::kTuning;
  std::string key;
  std::string kernel_id;
  std::uint32_t kernel_revision = 0;
  // Tuning: the size bucket's label (context.bucket), nullopt for the kernel's main bucket, and
  // the problem size tuned at (0: not recorded).
  std::optional<std::string> bucket;
  std::uint64_t problem_size = 0;
  // Measurement: the problem it ran ("n=1048576").
  std::string problem;
  // Tuning: the winner; certification: the schedule certified; measurement: the candidate.
  Schedule schedule;
  // Tuning: the winner's median; measurement: the candidate's, when it was timed.
  std::optional<double> median_ns;
  std::optional<FailureStage> failed_at;  // measurement of a failure: where it failed
  std::optional<Verdict> verdict;         // certification
  std::size_t certification_cases = 0;    // certification
  // Tuning: tuned_at; measurement: recorded_at; certification: empty (a certification manifest
  // records no date; ManifestCache::describe gives the time its file was stored).
  std::string date;
};

// The checks every reader of the cache makes of an entry's bytes before it uses them, in one
// place: the manifest of `kind` parses (canonical bytes, content hash, the invariants of its
// create(); manifest_json.hpp) and belongs to `key` (its cache key, or for tuning the topology
// key of its bucket). Bundles (bundle.hpp) check every entry with this. kCorruption or
// kSerialization errors carry the cause, without a file name.
Result<EntrySummary> check_entry_content(ManifestKind kind, std::string_view key,
                                         std::string_view bytes);

// An entry as bytes: what a store writes and a bundle carries.
struct EntryBytes {
  ManifestKind kind = ManifestKind::kTuning;
  std::string key;  // 64 lowercase hexadecimal characters
  std::string bytes;

  bool operator==(const EntryBytes&) const = default;
};

// One file of the root named like an entry, read and checked.
struct DescribedEntry {
  CacheEntry entry;
  std::optional<EntrySummary> summary;  // set when the entry is valid
  std::string damage;                   // why it is not, when it is not
  std::string stored_at;  // the file's modification time, UTC ("2026-12-02T15:33:31Z")
};

struct StoreAllReport {
  std::size_t stored = 0;           // written by this call
  std::size_t already_present = 0;  // the cache held the same bytes
};

enum class EntryHealth {
  kValid,       // parses and belongs to its key
  kCorrupt,     // an entry name whose content does not parse, breaks an invariant of its
                // manifest's create() or belongs to another key
  kUnreadable,  // the operating system refused to read it
  kForeign,     // a file in the root that is not named like an entry
  kTemporary,   // a writer's temporary file (left by a crash when no writer is running)
  // Set by forge::verify_cache, which knows the kernels (ManifestCache::verify does not): a
  // tuning entry that parses but that this build does not use.
  kStale,            // tuned for another revision of its kernel, or a kernel not in the catalog
  kIllegalSchedule,  // its winner is not a legal schedule of its kernel's current revision
  kSourceMismatch,   // its source hash is not that of the WGSL its winner generates now
};
const char* entry_health_name(EntryHealth health);

struct EntryCheck {
  std::filesystem::path path;
  EntryHealth health = EntryHealth::kValid;
  std::optional<CacheEntry> entry;  // set for files named like an entry
  std::string message;              // why it is not valid; empty when valid
};

struct PruneReport {
  struct Skipped {
    std::filesystem::path path;
    std::string reason;
  };
  std::vector<std::filesystem::path> removed;  // in file name order
  // Files with a temporary name that no writer made (a directory, a FIFO, a link): left alone.
  std::vector<Skipped> skipped;
};

struct VerifyReport {
  std::vector<EntryCheck> checks;  // in file name order

  // True when every file is a valid entry or a temporary file.
  bool clean() const;
};

class ManifestCache {
 public:
  explicit ManifestCache(std::filesystem::path root,
                         std::shared_ptr<FileSystem> files = posix_file_system())
      : root_(std::move(root)), files_(std::move(files)) {}

  const std::filesystem::path& root() const { return root_; }

  // The shared store behind this cache (null: none). See the top of this file.
  void set_remote(std::shared_ptr<RemoteStore> remote) { remote_ = std::move(remote); }
  const std::shared_ptr<RemoteStore>& remote() const { return remote_; }

  // A certification manifest without a cache key cannot be stored (kSerialization error).
  Result<std::filesystem::path> store_certification(const CertificationManifest& manifest) const;
  Result<std::filesystem::path> store_tuning(const TuningManifest& manifest) const;
  // As store_certification, except that an entry under the key that is damaged (it reads as
  // corrupt: another schema version, a torn or edited file, not a regular file) is replaced,
  // atomically, as auto-tune-all replaces a damaged tuning entry. A valid entry with other bytes
  // is still a collision, and stays.
  Result<std::filesystem::path> store_certification_replacing_damaged(
      const CertificationManifest& manifest) const;
  // A measurement record, under its cache key; a damaged entry there is replaced likewise.
  Result<std::filesystem::path> store_measurement(const MeasurementRecord& record) const;

  Result<std::optional<TuningManifest>> load_tuning(std::string_view key) const;
  Result<std::optional<CertificationManifest>> load_certification(std::string_view key) const;
  Result<std::optional<MeasurementRecord>> load_measurement(std::string_view key) const;

  // Keys a tuning record by (topology, kernel) rather than by the winning schedule, so
  // auto-tune-all can ask "has this kernel been tuned on this hardware?" before searching.
  static std::string topology_key(std::string_view topology_hash, std::string_view kernel_id);
  // The key of the kernel's tuning for a size bucket: topology_key for the main bucket (an
  // empty `bucket`), else BLAKE3(topology_hash + "\0" + kernel_id + "\0" + bucket), hex.
  static std::string bucket_key(std::string_view topology_hash, std::string_view kernel_id,
                                std::string_view bucket);

  // The entry of `bucket` (empty: the main one).
  Result<std::optional<TuningManifest>> load_tuning_for_topology(
      std::string_view topology_hash, std::string_view kernel_id,
      std::string_view bucket = {}) const;
  // The manifest must describe `kernel_id` and carry `topology_hash` in its context, so that a
  // reader can check that the entry belongs to its key; it is stored under the key of the
  // bucket it records (context.bucket).
  Result<std::filesystem::path> store_tuning_for_topology(std::string_view topology_hash,
                                                          std::string_view kernel_id,
                                                          const TuningManifest& manifest) const;

  // What an entry's file holds now, byte for byte (nullopt: there is none), read without
  // parsing it, so that a later replace_tuning_for_topology can tell whether another writer came
  // in between. A name that is not a regular file is a corruption error, as for a load.
  struct Snapshot {
    std::optional<std::string> bytes;
  };
  Result<Snapshot> snapshot(ManifestKind kind, std::string_view key) const;

  // The one way an entry changes (a re-tune): the new manifest is written to a temporary file and
  // flushed, then renamed over the entry, so that a reader, and a process killed at any point,
  // sees the old entry byte for byte or the new one, never neither. With `expected` (a snapshot
  // taken before the re-tune), an entry that holds anything else by then was written by another
  // process: that is a kCollision error and its entry stays (the check and the rename are two
  // steps; a writer that lands between them within microseconds is replaced, which leaves a
  // valid entry either way). Without `expected`, whatever is there is replaced. An entry that
  // did not exist when the snapshot was taken is stored as store_tuning_for_topology does.
  Result<std::filesystem::path> replace_tuning_for_topology(
      std::string_view topology_hash, std::string_view kernel_id, const TuningManifest& manifest,
      const std::optional<Snapshot>& expected) const;

  // Creates the root if needed and proves that a store could write there (a temporary file is
  // created, flushed and removed), so that a command fails before its GPU work rather than after.
  Status check_writable() const;

  // Deletes an entry; false when there was none. The removal is flushed
  // to disk before it returns.
  Result<bool> remove(ManifestKind kind, std::string_view key) const;

  // Deletes the temporary files of writers that are older than `older_than` (by modification
  // time) and returns their paths. A store finishes its temporary file within milliseconds, so
  // one that is minutes old belongs to a writer that crashed; a live writer's file is younger.
  // Anything with a temporary name that is not a regular file is skipped and reported. An age
  // above kLongestTemporaryAge is a kInvalidInput error: the file clock counts nanoseconds in 64
  // bits, and a longer age would wrap around and make a live writer's file look stale.
  Result<PruneReport> remove_stale_temporaries(
      std::chrono::seconds older_than = kStaleTemporaryAge) const;
  static constexpr std::chrono::seconds kStaleTemporaryAge{3600};
  static constexpr std::chrono::seconds kLongestTemporaryAge =
      std::chrono::duration_cast<std::chrono::seconds>(
          std::filesystem::file_time_type::duration::max());

  // Entries by kind and key, in file name order, without reading them. A missing root is empty.
  Result<std::vector<CacheEntry>> list() const;
  // Every entry, read and checked as a load checks it, in file name order; a damaged one is
  // described by its damage, not an error. An error only when the root cannot be listed.
  Result<std::vector<DescribedEntry>> describe() const;

  // Stores every entry or none (a bundle's import, bundle.hpp). Each entry is checked with
  // check_entry_content first, and compared with what the cache holds under its key: the same
  // bytes count as already present, other bytes are a kCollision error (entries are immutable)
  // and a damaged entry there a kCorruption error, both before anything is written; two entries
  // with one kind and key are a kInvalidInput error. Then every new entry is written to its own
  // temporary file and flushed, and only when all are written are they moved into place,
  // without replacing anything, and the directory flushed. A failure at any step (a full disk,
  // an I/O error, another writer that stored a different entry meanwhile) removes the temporary
  // files and the entries this call moved into place, so that the cache is left as it was. A
  // process killed while moving leaves some of the entries, each whole and valid; storing them
  // again completes the set.
  Result<StoreAllReport> store_all_or_none(const std::vector<EntryBytes>& entries) const;

  // The file operations every store and read goes through.
  const std::shared_ptr<FileSystem>& files() const { return files_; }
  // Reads every file in the root and says which are valid, corrupt, unreadable or foreign.
  Result<VerifyReport> verify() const;

  // `<root>/<kind>-<lowercase key>.json`; `key` must be valid.
  std::filesystem::path path_for(ManifestKind kind, std::string_view key) const;

 private:
  struct Directory {
    int fd;
  };
  // Creates the root if needed and opens it, for the flush that makes a new name durable.
  Result<Directory> open_root_for_writing() const;
  // What storing `bytes` under `key` amounts to given what is already there: nullopt when there
  // is nothing, the path when it holds the same bytes, a collision or corruption error otherwise.
  std::optional<Result<std::filesystem::path>> compare_with_existing(
      ManifestKind kind, std::string_view key, const std::string& bytes) const;
  Result<std::filesystem::path> store_bytes(ManifestKind kind, std::string_view key,
                                            const std::string& bytes) const;
  // store_bytes, but a damaged entry under the key is replaced (replace_bytes).
  Result<std::filesystem::path> store_replacing_damaged(ManifestKind kind, std::string_view key,
                                                        const std::string& bytes) const;
  // Renames a complete new file over the entry (see replace_tuning_for_topology).
  Result<std::filesystem::path> replace_bytes(ManifestKind kind, std::string_view key,
                                              const std::string& bytes,
                                              const std::optional<Snapshot>& expected) const;
  Result<std::optional<std::string>> read_entry(ManifestKind kind, std::string_view key) const;
  // The local store_bytes, without the remote.
  Result<std::filesystem::path> store_local(ManifestKind kind, std::string_view key,
                                            const std::string& bytes) const;
  // Whether the remote is a store for `kind` (measurements stay local).
  bool shares(ManifestKind kind) const { return remote_ && kind != ManifestKind::kMeasurement; }
  // A local miss: the remote's entry, checked, then stored locally (see the top of this file).
  Result<std::optional<std::string>> fetch_remote(ManifestKind kind, std::string_view key) const;
  // Publishes `bytes` (SET NX), or with `seen` replaces exactly that value (compare-and-set).
  Status publish_remote(ManifestKind kind, std::string_view key, const std::string& bytes,
                        const std::optional<std::string>& seen) const;
  // The canonical bytes of a manifest stored under the topology key of (topology_hash,
  // kernel_id); kInvalidInput when it describes another kernel or topology.
  static Result<std::string> topology_entry_bytes(std::string_view topology_hash,
                                                  std::string_view kernel_id,
                                                  const TuningManifest& manifest);
  // The key a topology entry of `manifest` is stored under: that of its recorded bucket.
  static std::string entry_key(std::string_view topology_hash, std::string_view kernel_id,
                               const TuningManifest& manifest) {
    return bucket_key(topology_hash, kernel_id, manifest.context.bucket.value_or(""));
  }

  std::filesystem::path root_;
  std::shared_ptr<FileSystem> files_;
  std::shared_ptr<RemoteStore> remote_;
};

// Where the cache lives: `explicit_root` (the --cache flag) if given, else $WGSL_FORGE_CACHE,
// else $XDG_CACHE_HOME/wgsl-forge, else $HOME/.cache/wgsl-forge. Empty variables count as unset,
// and so does a relative XDG_CACHE_HOME (the XDG Base Directory rule).
Result<std::filesystem::path> resolve_cache_root(
    const std::optional<std::filesystem::path>& explicit_root);

}  // namespace wgsl_forge
