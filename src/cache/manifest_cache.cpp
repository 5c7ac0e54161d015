#include "wgsl_forge/cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <set>
#include <utility>

#include "cache/file_io.hpp"
#include "util/try.hpp"
#include "wgsl_forge/file_system.hpp"
#include "wgsl_forge/hash.hpp"
#include "wgsl_forge/leases.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {

namespace fs = std::filesystem;
using file_io::errno_text;
using file_io::FileDescriptor;
using file_io::io_error;
using file_io::is_temporary_name;
using file_io::lowercase;
using file_io::make_directories;
using file_io::move_without_replacing;
using file_io::temporary_name;
using file_io::write_temporary;

// What an entry's file must be: a manifest, at most kMaxManifestBytes (manifest_json.hpp).
constexpr file_io::FileRole kEntryFile{"Cache entry", "a manifest", kMaxManifestBytes};

namespace {

// "2026-12-02T15:33:31Z", as TuningContext::tuned_at is written.
std::string utc_time_text(time_t seconds) {
  struct tm parts {};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

// Reads an entry's file (see file_io::read_regular_file); nullopt when there is none.
Result<std::optional<std::string>> read_file(FileSystem& files, const fs::path& path) {
  WF_TRY_ASSIGN(std::optional<file_io::FileContent> content,
                file_io::read_regular_file(files, path, kEntryFile));
  if (!content) return std::optional<std::string>();
  return std::optional<std::string>(std::move(content->bytes));
}

Error corruption(const fs::path& path, const Error& cause) {
  return Error(ErrorKind::kCorruption,
               "Cache entry " + path.string() + " is corrupt: " + cause.message() +
                   " Remove the file (wgsl-forge cache verify lists every such entry) and "
                   "tune or certify again.");
}

// The checks a reader makes of an entry's bytes before it uses them: the manifest parses (canonical
// bytes, content hash, the invariants of its create()) and belongs to the key it is stored under.
// The error is the cause alone; decode_entry names the file.
template <typename Manifest>
Result<Manifest> decode_content(std::string_view key, std::string_view bytes);

bool tuning_belongs_to(const TuningManifest& manifest, std::string_view key) {
  if (manifest.cache_key == key) return true;
  return manifest.context.topology_hash &&
         ManifestCache::bucket_key(*manifest.context.topology_hash, manifest.kernel_id,
                                   manifest.context.bucket.value_or("")) == key;
}

template <>
Result<TuningManifest> decode_content<TuningManifest>(std::string_view key,
                                                      std::string_view bytes) {
  WF_TRY_ASSIGN(TuningManifest manifest, parse_tuning_manifest(bytes));
  if (!tuning_belongs_to(manifest, key)) {
    return Error(ErrorKind::kCorruption,
                 "It holds the tuning manifest of " + manifest.kernel_id + " with cache key " +
                     manifest.cache_key +
                     ", which belongs to neither this key nor the topology key of its bucket.");
  }
  return manifest;
}

template <>
Result<CertificationManifest> decode_content<CertificationManifest>(std::string_view key,
                                                                    std::string_view bytes) {
  WF_TRY_ASSIGN(CertificationManifest manifest, parse_certification_manifest(bytes));
  if (manifest.cache_key != key) {
    return Error(ErrorKind::kCorruption, "It holds the certification manifest of " +
                                             manifest.kernel_id + " with cache key " +
                                             manifest.cache_key.value_or("null") + ".");
  }
  return manifest;
}

template <>
Result<MeasurementRecord> decode_content<MeasurementRecord>(std::string_view key,
                                                            std::string_view bytes) {
  WF_TRY_ASSIGN(MeasurementRecord record, parse_measurement_record(bytes));
  if (record.cache_key != key) {
    return Error(ErrorKind::kCorruption, "It holds a measurement of " + record.kernel_id +
                                             " with cache key " + record.cache_key + ".");
  }
  return record;
}

// decode_content, with a failure reported as the corruption of the file at `path`.
template <typename Manifest>
Result<Manifest> decode_entry(std::string_view key, const fs::path& path,
                              const std::string& bytes) {
  Result<Manifest> manifest = decode_content<Manifest>(key, bytes);
  if (!manifest) return corruption(path, manifest.error());
  return manifest;
}

EntrySummary summary_of(std::string_view key, const TuningManifest& manifest) {
  EntrySummary summary;
  summary.kind = ManifestKind::kTuning;
  summary.key = std::string(key);
  summary.kernel_id = manifest.kernel_id;
  summary.kernel_revision = manifest.kernel_revision;
  summary.bucket = manifest.context.bucket;
  summary.problem_size = manifest.context.problem_size;
  summary.schedule = manifest.result.winner.schedule;
  summary.median_ns = manifest.result.winner.timing.median_ns;
  summary.date = manifest.context.tuned_at;
  return summary;
}

EntrySummary summary_of(std::string_view key, const CertificationManifest& manifest) {
  EntrySummary summary;
  summary.kind = ManifestKind::kCertification;
  summary.key = std::string(key);
  summary.kernel_id = manifest.kernel_id;
  summary.kernel_revision = manifest.kernel_revision;
  summary.schedule = manifest.schedule;
  summary.verdict = manifest.verdict;
  summary.certification_cases = manifest.cases.size();
  return summary;
}

EntrySummary summary_of(std::string_view key, const MeasurementRecord& record) {
  EntrySummary summary;
  summary.kind = ManifestKind::kMeasurement;
  summary.key = std::string(key);
  summary.kernel_id = record.kernel_id;
  summary.kernel_revision = record.kernel_revision;
  summary.problem = record.problem;
  summary.schedule = record.candidate.schedule;
  if (record.candidate.timing) summary.median_ns = record.candidate.timing->median_ns;
  if (record.candidate.failure) summary.failed_at = record.candidate.failure->stage;
  summary.date = record.recorded_at;
  return summary;
}

template <typename Manifest>
Result<EntrySummary> summarize_content(std::string_view key, std::string_view bytes) {
  WF_TRY_ASSIGN(Manifest manifest, decode_content<Manifest>(key, bytes));
  return summary_of(key, manifest);
}

Status check_entry(ManifestKind kind, std::string_view key, const fs::path& path,
                   const std::string& bytes) {
  Result<EntrySummary> checked = check_entry_content(kind, key, bytes);
  if (!checked) return corruption(path, checked.error());
  return Ok{};
}

// "tuning-<64 hex>.json" -> (kind, key); nullopt for any other name.
std::optional<CacheEntry> parse_entry_name(const fs::path& path) {
  std::string name = path.filename().string();
  constexpr std::string_view kSuffix = ".json";
  for (ManifestKind kind :
       {ManifestKind::kTuning, ManifestKind::kCertification, ManifestKind::kMeasurement}) {
    std::string prefix = std::string(manifest_kind_name(kind)) + "-";
    if (name.size() != prefix.size() + 64 + kSuffix.size()) continue;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) continue;
    std::string key = name.substr(prefix.size(), 64);
    if (!is_hex_digest(key) || key != lowercase(key)) continue;
    return CacheEntry{kind, key, path};
  }
  return std::nullopt;
}

// The files in the cache root, unsorted; none when the root does not exist.
Result<std::vector<fs::directory_entry>> files_in(const fs::path& root) {
  std::error_code error;
  std::vector<fs::directory_entry> files;
  if (!fs::exists(root, error)) return files;
  fs::directory_iterator iterator(root, error);
  for (; !error && iterator != fs::directory_iterator(); iterator.increment(error)) {
    files.push_back(*iterator);
  }
  if (error) {
    return Error(ErrorKind::kIo,
                 "Cannot list cache directory " + root.string() + " (" + error.message() + ").");
  }
  return files;
}

}  // namespace

const char* manifest_kind_name(ManifestKind kind) {
  switch (kind) {
    case ManifestKind::kTuning:
      return "tuning";
    case ManifestKind::kCertification:
      return "certification";
    case ManifestKind::kMeasurement:
      return "measurement";
  }
  return "unknown";
}

const char* entry_health_name(EntryHealth health) {
  switch (health) {
    case EntryHealth::kValid:
      return "valid";
    case EntryHealth::kCorrupt:
      return "corrupt";
    case EntryHealth::kUnreadable:
      return "unreadable";
    case EntryHealth::kForeign:
      return "foreign";
    case EntryHealth::kTemporary:
      return "temporary";
    case EntryHealth::kStale:
      return "stale";
    case EntryHealth::kIllegalSchedule:
      return "illegal_schedule";
    case EntryHealth::kSourceMismatch:
      return "source_mismatch";
  }
  return "unknown";
}

Result<EntrySummary> check_entry_content(ManifestKind kind, std::string_view key,
                                         std::string_view bytes) {
  switch (kind) {
    case ManifestKind::kTuning:
      return summarize_content<TuningManifest>(key, bytes);
    case ManifestKind::kCertification:
      return summarize_content<CertificationManifest>(key, bytes);
    case ManifestKind::kMeasurement:
      return summarize_content<MeasurementRecord>(key, bytes);
  }
  return Error(ErrorKind::kInvalidInput, "Unknown manifest kind.");
}

Status validate_cache_key(std::string_view key) {
  if (!is_hex_digest(key)) {
    std::string shown(key.substr(0, 80));
    if (key.size() > 80) shown += "...";
    return Error(ErrorKind::kInvalidKey, "Cache key (" + shown +
                                             ") is not exactly 64 hexadecimal characters (it has " +
                                             std::to_string(key.size()) + " characters).");
  }
  return Ok{};
}

bool VerifyReport::clean() const {
  return std::all_of(checks.begin(), checks.end(), [](const EntryCheck& check) {
    return check.health == EntryHealth::kValid || check.health == EntryHealth::kTemporary;
  });
}

fs::path ManifestCache::path_for(ManifestKind kind, std::string_view key) const {
  return root_ / (std::string(manifest_kind_name(kind)) + "-" + lowercase(key) + ".json");
}

std::string ManifestCache::topology_key(std::string_view topology_hash,
                                        std::string_view kernel_id) {
  std::string material(topology_hash);
  material.push_back('\0');
  material.append(kernel_id);
  return blake3_hex(material);
}

std::string ManifestCache::bucket_key(std::string_view topology_hash, std::string_view kernel_id,
                                      std::string_view bucket) {
  if (bucket.empty()) return topology_key(topology_hash, kernel_id);
  std::string material(topology_hash);
  material.push_back('\0');
  material.append(kernel_id);
  material.push_back('\0');
  material.append(bucket);
  return blake3_hex(material);
}

Result<fs::path> ManifestCache::store_certification(const CertificationManifest& manifest) const {
  if (!manifest.cache_key) {
    return Error(ErrorKind::kSerialization,
                 "Certification manifest of " + manifest.kernel_id +
                     " has no adapter cache key (it was made without a topology hash) and cannot "
                     "be cached.");
  }
  WF_TRY_ASSIGN(std::string bytes, serialize_manifest(manifest));
  return store_bytes(ManifestKind::kCertification, *manifest.cache_key, bytes);
}

Result<fs::path> ManifestCache::store_certification_replacing_damaged(
    const CertificationManifest& manifest) const {
  if (!manifest.cache_key) return store_certification(manifest);
  WF_TRY_ASSIGN(std::string bytes, serialize_manifest(manifest));
  return store_replacing_damaged(ManifestKind::kCertification, *manifest.cache_key, bytes);
}

Result<fs::path> ManifestCache::store_measurement(const MeasurementRecord& record) const {
  WF_TRY_ASSIGN(std::string bytes, serialize_manifest(record));
  return store_replacing_damaged(ManifestKind::kMeasurement, record.cache_key, bytes);
}

Result<fs::path> ManifestCache::store_replacing_damaged(ManifestKind kind, std::string_view key,
                                                        const std::string& bytes) const {
  Result<fs::path> stored = store_bytes(kind, key, bytes);
  if (stored || stored.error().kind() != ErrorKind::kCorruption) return stored;
  // What is there does not read as an entry (another schema version, a torn or edited file, not
  // a regular file): it is replaced, unless another writer replaces it first. A name that cannot
  // be read at all is replaced without that comparison.
  Result<Snapshot> damaged = snapshot(kind, key);
  return replace_bytes(kind, key, bytes, damaged ? std::optional(*damaged) : std::nullopt);
}

Result<fs::path> ManifestCache::store_tuning(const TuningManifest& manifest) const {
  WF_TRY_ASSIGN(std::string bytes, serialize_manifest(manifest));
  return store_bytes(ManifestKind::kTuning, manifest.cache_key, bytes);
}

Result<std::string> ManifestCache::topology_entry_bytes(std::string_view topology_hash,
                                                        std::string_view kernel_id,
                                                        const TuningManifest& manifest) {
  if (manifest.kernel_id != kernel_id || manifest.context.topology_hash != topology_hash) {
    return Error(ErrorKind::kInvalidInput,
                 "Tuning manifest of " + manifest.kernel_id + " on topology " +
                     manifest.context.topology_hash.value_or("(none)") +
                     " cannot be stored under the topology key of " + std::string(kernel_id) +
                     " on " + std::string(topology_hash) +
                     "; build it with that kernel and topology hash.");
  }
  return serialize_manifest(manifest);
}

Result<fs::path> ManifestCache::store_tuning_for_topology(std::string_view topology_hash,
                                                          std::string_view kernel_id,
                                                          const TuningManifest& manifest) const {
  WF_TRY_ASSIGN(std::string bytes, topology_entry_bytes(topology_hash, kernel_id, manifest));
  return store_bytes(ManifestKind::kTuning, entry_key(topology_hash, kernel_id, manifest), bytes);
}

Result<ManifestCache::Snapshot> ManifestCache::snapshot(ManifestKind kind,
                                                        std::string_view key) const {
  WF_TRY_ASSIGN(std::optional<std::string> bytes, read_entry(kind, key));
  return Snapshot{std::move(bytes)};
}

Result<fs::path> ManifestCache::replace_tuning_for_topology(
    std::string_view topology_hash, std::string_view kernel_id, const TuningManifest& manifest,
    const std::optional<Snapshot>& expected) const {
  WF_TRY_ASSIGN(std::string bytes, topology_entry_bytes(topology_hash, kernel_id, manifest));
  return replace_bytes(ManifestKind::kTuning, entry_key(topology_hash, kernel_id, manifest), bytes,
                       expected);
}

Result<fs::path> ManifestCache::replace_bytes(ManifestKind kind, std::string_view key,
                                              const std::string& bytes,
                                              const std::optional<Snapshot>& expected) const {
  WF_TRY(validate_cache_key(key));
  if (expected && !expected->bytes) return store_bytes(kind, key, bytes);
  const fs::path final_path = path_for(kind, key);
  auto fail = [&](Error cause) -> Result<fs::path> {
    return std::move(cause).with_context("replacing " + std::string(manifest_kind_name(kind)) +
                                         " manifest " + final_path.string());
  };
  Result<Directory> directory = open_root_for_writing();
  if (!directory) return fail(std::move(directory).error());
  FileDescriptor directory_fd(*files_, directory->fd);
  if (expected) {
    Result<std::optional<std::string>> current = read_file(*files_, final_path);
    if (!current) return fail(std::move(current).error());
    if (*current == bytes) return final_path;
    if (*current != expected->bytes) {
      return fail(Error(ErrorKind::kCollision,
                        "Cache entry " + final_path.string() +
                            " changed while this process was writing it (another writer replaced "
                            "it); that writer's entry is kept."));
    }
  }
  if (shares(kind)) {
    // The remote value replaced is the one this process saw (the snapshot, which a local miss
    // filled from the remote); without one (a forced re-tune), whatever the remote holds now.
    const std::optional<std::string> seen =
        expected ? expected->bytes : remote_->fetch(kind, lowercase(key));
    if (Status published = publish_remote(kind, key, bytes, seen); !published) {
      return fail(std::move(published).error());
    }
  }
  const fs::path temporary_path =
      root_ / temporary_name(std::string(manifest_kind_name(kind)) + "-" + lowercase(key));
  if (Status written = write_temporary(*files_, temporary_path, bytes); !written) {
    return fail(std::move(written).error());
  }
  if (files_->rename_replacing(temporary_path.c_str(), final_path.c_str()) != 0) {
    const int error_number = errno;
    files_->unlink(temporary_path.c_str());
    return fail(io_error("move into place", final_path, error_number));
  }
  if (files_->fsync(directory_fd.get()) != 0) {
    return fail(io_error("flush directory", root_, errno));
  }
  return final_path;
}

Result<std::optional<TuningManifest>> ManifestCache::load_tuning(std::string_view key) const {
  WF_TRY_ASSIGN(std::optional<std::string> bytes, read_entry(ManifestKind::kTuning, key));
  if (!bytes.has_value()) return std::optional<TuningManifest>();
  WF_TRY_ASSIGN(
      TuningManifest manifest,
      decode_entry<TuningManifest>(lowercase(key), path_for(ManifestKind::kTuning, key), *bytes));
  return std::optional<TuningManifest>(std::move(manifest));
}

Result<std::optional<CertificationManifest>> ManifestCache::load_certification(
    std::string_view key) const {
  WF_TRY_ASSIGN(std::optional<std::string> bytes, read_entry(ManifestKind::kCertification, key));
  if (!bytes.has_value()) return std::optional<CertificationManifest>();
  WF_TRY_ASSIGN(CertificationManifest manifest,
                decode_entry<CertificationManifest>(
                    lowercase(key), path_for(ManifestKind::kCertification, key), *bytes));
  return std::optional<CertificationManifest>(std::move(manifest));
}

Result<std::optional<MeasurementRecord>> ManifestCache::load_measurement(
    std::string_view key) const {
  WF_TRY_ASSIGN(std::optional<std::string> bytes, read_entry(ManifestKind::kMeasurement, key));
  if (!bytes.has_value()) return std::optional<MeasurementRecord>();
  WF_TRY_ASSIGN(MeasurementRecord record,
                decode_entry<MeasurementRecord>(lowercase(key),
                                                path_for(ManifestKind::kMeasurement, key), *bytes));
  return std::optional<MeasurementRecord>(std::move(record));
}

Result<std::optional<TuningManifest>> ManifestCache::load_tuning_for_topology(
    std::string_view topology_hash, std::string_view kernel_id, std::string_view bucket) const {
  return load_tuning(bucket_key(topology_hash, kernel_id, bucket));
}

Result<std::optional<std::string>> ManifestCache::read_entry(ManifestKind kind,
                                                             std::string_view key) const {
  WF_TRY(validate_cache_key(key));
  WF_TRY_ASSIGN(std::optional<std::string> local, read_file(*files_, path_for(kind, key)));
  if (local || !shares(kind)) return local;
  return fetch_remote(kind, lowercase(key));
}

Result<std::optional<std::string>> ManifestCache::fetch_remote(ManifestKind kind,
                                                               std::string_view key) const {
  std::optional<std::string> bytes = remote_->fetch(kind, key);
  if (!bytes) return std::optional<std::string>();
  if (Result<EntrySummary> valid = check_entry_content(kind, key, *bytes); !valid) {
    return Error(ErrorKind::kCorruption,
                 "Remote entry " + RemoteStore::entry_name(kind, key) + " on " +
                     remote_->address().to_string() + " is refused: " + valid.error().message() +
                     " It is not stored locally; a tune of this entry replaces it.");
  }
  // A local copy spares the next start-up the remote. A root that cannot be written (a read-only
  // cache, a full disk) or that another writer filled meanwhile costs only that: the bytes are
  // checked and are what this load returns either way.
  (void)store_local(kind, key, *bytes);
  return bytes;
}

Status ManifestCache::publish_remote(ManifestKind kind, std::string_view key,
                                     const std::string& bytes,
                                     const std::optional<std::string>& seen) const {
  const std::string lower = lowercase(key);
  RemoteStore::PublishResult published =
      seen ? remote_->replace(kind, lower, bytes, *seen) : remote_->publish(kind, lower, bytes);
  if (published.outcome != RemoteStore::Outcome::kDifferent) return Ok{};
  const std::string name = "Remote entry " + RemoteStore::entry_name(kind, lower) + " on " +
                           remote_->address().to_string();
  if (Result<EntrySummary> valid = check_entry_content(kind, lower, published.existing); !valid) {
    return Error(ErrorKind::kCorruption, name + " is corrupt: " + valid.error().message());
  }
  return Error(ErrorKind::kCollision,
               name + " already holds a different " + manifest_kind_name(kind) + " manifest (" +
                   std::to_string(published.existing.size()) + " bytes stored, " +
                   std::to_string(bytes.size()) + " bytes offered); entries are immutable.");
}

Result<ManifestCache::Directory> ManifestCache::open_root_for_writing() const {
  auto unusable = [&](int error_number) {
    return Error(ErrorKind::kIo, "Cannot use " + root_.string() + " as the cache directory (" +
                                     errno_text(error_number) + ").");
  };
  if (int error = make_directories(*files_, root_); error != 0) return unusable(error);
  int fd = files_->open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return unusable(errno);
  return Directory{fd};
}

Status ManifestCache::check_writable() const {
  WF_TRY_ASSIGN(Directory directory, open_root_for_writing());
  FileDescriptor directory_fd(*files_, directory.fd);
  const fs::path probe = root_ / temporary_name("probe");
  if (Status written = write_temporary(*files_, probe, ""); !written) {
    return Error(ErrorKind::kIo, "Cannot write in the cache directory " + root_.string() + ": " +
                                     written.error().message());
  }
  files_->unlink(probe.c_str());
  return Ok{};
}

std::optional<Result<fs::path>> ManifestCache::compare_with_existing(
    ManifestKind kind, std::string_view key, const std::string& bytes) const {
  const fs::path path = path_for(kind, key);
  Result<std::optional<std::string>> existing = read_file(*files_, path);
  if (!existing) return Result<fs::path>(std::move(existing).error());
  if (!existing->has_value()) return std::nullopt;
  if (**existing == bytes) return Result<fs::path>(path);
  if (Status valid = check_entry(kind, lowercase(key), path, **existing); !valid) {
    return Result<fs::path>(std::move(valid).error());
  }
  return Result<fs::path>(
      Error(ErrorKind::kCollision,
            "Cache entry " + path.string() + " already holds a different " +
                manifest_kind_name(kind) + " manifest (" + std::to_string((*existing)->size()) +
                " bytes stored, " + std::to_string(bytes.size()) +
                " bytes offered); entries are immutable. Remove the entry to replace it."));
}

Result<fs::path> ManifestCache::store_bytes(ManifestKind kind, std::string_view key,
                                            const std::string& bytes) const {
  WF_TRY(validate_cache_key(key));
  if (shares(kind)) {
    // The local entry decides first (the same bytes: done; others: a collision), then the fleet's.
    if (auto outcome = compare_with_existing(kind, key, bytes)) return std::move(*outcome);
    WF_TRY_CONTEXT(publish_remote(kind, key, bytes, std::nullopt),
                   "storing " + std::string(manifest_kind_name(kind)) + " manifest " +
                       path_for(kind, key).string());
  }
  return store_local(kind, key, bytes);
}

Result<fs::path> ManifestCache::store_local(ManifestKind kind, std::string_view key,
                                            const std::string& bytes) const {
  const fs::path final_path = path_for(kind, key);
  auto fail = [&](Error cause) -> Result<fs::path> {
    return std::move(cause).with_context("storing " + std::string(manifest_kind_name(kind)) +
                                         " manifest " + final_path.string());
  };
  Result<Directory> directory = open_root_for_writing();
  if (!directory) return fail(std::move(directory).error());
  FileDescriptor directory_fd(*files_, directory->fd);

  // An existing entry is never rewritten: same bytes is success, anything else a collision.
  if (auto outcome = compare_with_existing(kind, key, bytes)) return std::move(*outcome);

  const fs::path temporary_path =
      root_ / temporary_name(std::string(manifest_kind_name(kind)) + "-" + lowercase(key));
  if (Status written = write_temporary(*files_, temporary_path, bytes); !written) {
    return fail(std::move(written).error());
  }
  if (int move_error = move_without_replacing(*files_, temporary_path, final_path);
      move_error != 0) {
    files_->unlink(temporary_path.c_str());
    if (move_error != EEXIST) return fail(io_error("move into place", final_path, move_error));
    // Another writer got there first: success if it wrote the same bytes.
    if (auto outcome = compare_with_existing(kind, key, bytes)) return std::move(*outcome);
    return fail(io_error("move into place", final_path, EEXIST));
  }
  // The entry is complete and in place; this makes its name survive a power cut.
  if (files_->fsync(directory_fd.get()) != 0) {
    return fail(io_error("flush directory", root_, errno));
  }
  return final_path;
}

Result<bool> ManifestCache::remove(ManifestKind kind, std::string_view key) const {
  WF_TRY(validate_cache_key(key));
  const fs::path path = path_for(kind, key);
  if (files_->unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return false;
    return io_error("remove", path, errno);
  }
  FileDescriptor directory(*files_, files_->open(root_.c_str(), O_RDONLY | O_DIRECTORY, 0));
  if (directory.get() < 0) return io_error("open directory", root_, errno);
  if (files_->fsync(directory.get()) != 0) return io_error("flush directory", root_, errno);
  return true;
}

Result<PruneReport> ManifestCache::remove_stale_temporaries(std::chrono::seconds older_than) const {
  if (older_than > kLongestTemporaryAge) {
    return Error(ErrorKind::kInvalidInput,
                 "Age of a stale temporary file (" + std::to_string(older_than.count()) +
                     " s) exceeds the longest the file clock can measure (" +
                     std::to_string(kLongestTemporaryAge.count()) + " s).");
  }
  PruneReport report;
  WF_TRY_ASSIGN(std::vector<fs::directory_entry> files, files_in(root_));
  const auto now = fs::file_time_type::clock::now();
  for (const fs::directory_entry& item : files) {
    if (!is_temporary_name(item.path().filename().string())) continue;
    std::error_code error;
    const fs::file_status status = item.symlink_status(error);
    if (error) continue;  // gone already: its writer finished or another cleaner removed it
    if (status.type() != fs::file_type::regular) {
      report.skipped.push_back(
          {item.path(),
           std::string("is ") +
               (status.type() == fs::file_type::directory ? "a directory" : "not a regular file") +
               ", not a writer's temporary file"});
      continue;
    }
    fs::file_time_type modified = item.last_write_time(error);
    if (error) continue;
    if (now - modified < older_than) continue;
    if (files_->unlink(item.path().c_str()) != 0) {
      if (errno == ENOENT) continue;
      return io_error("remove temporary file", item.path(), errno);
    }
    report.removed.push_back(item.path());
  }
  std::sort(report.removed.begin(), report.removed.end());
  std::sort(
      report.skipped.begin(), report.skipped.end(),
      [](const PruneReport::Skipped& a, const PruneReport::Skipped& b) { return a.path < b.path; });
  return report;
}

Result<std::vector<CacheEntry>> ManifestCache::list() const {
  std::vector<CacheEntry> entries;
  WF_TRY_ASSIGN(std::vector<fs::directory_entry> files, files_in(root_));
  for (const fs::directory_entry& item : files) {
    if (auto entry = parse_entry_name(item.path())) entries.push_back(std::move(*entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const CacheEntry& a, const CacheEntry& b) { return a.path < b.path; });
  return entries;
}

Result<std::vector<DescribedEntry>> ManifestCache::describe() const {
  WF_TRY_ASSIGN(std::vector<CacheEntry> entries, list());
  std::vector<DescribedEntry> described;
  described.reserve(entries.size());
  for (CacheEntry& entry : entries) {
    DescribedEntry one;
    Result<std::optional<file_io::FileContent>> content =
        file_io::read_regular_file(*files_, entry.path, kEntryFile);
    if (!content) {
      one.damage = content.error().message();
    } else if (!content->has_value()) {
      one.damage = "The file disappeared while it was being read.";
    } else {
      one.stored_at = utc_time_text((*content)->modified.tv_sec);
      Result<EntrySummary> summary = check_entry_content(entry.kind, entry.key, (*content)->bytes);
      if (summary) {
        one.summary = std::move(*summary);
      } else {
        one.damage = summary.error().message();
      }
    }
    one.entry = std::move(entry);
    described.push_back(std::move(one));
  }
  return described;
}

Result<StoreAllReport> ManifestCache::store_all_or_none(
    const std::vector<EntryBytes>& entries) const {
  std::set<std::pair<ManifestKind, std::string>> seen;
  for (const EntryBytes& entry : entries) {
    WF_TRY(validate_cache_key(entry.key));
    const char* kind = manifest_kind_name(entry.kind);
    if (!seen.emplace(entry.kind, lowercase(entry.key)).second) {
      return Error(ErrorKind::kInvalidInput, "The " + std::string(kind) + " entry " + entry.key +
                                                 " is given twice; a set of entries to store "
                                                 "holds each kind and key once.");
    }
    if (Result<EntrySummary> checked =
            check_entry_content(entry.kind, lowercase(entry.key), entry.bytes);
        !checked) {
      return Error(ErrorKind::kCorruption, "The " + std::string(kind) + " entry " + entry.key +
                                               " is corrupt: " + checked.error().message());
    }
  }
  const std::string attempt =
      "storing " + std::to_string(entries.size()) + " entries in " + root_.string();
  auto fail = [&](Error cause) -> Result<StoreAllReport> {
    return std::move(cause).with_context(attempt + "; nothing was stored");
  };
  Result<Directory> directory = open_root_for_writing();
  if (!directory) return fail(std::move(directory).error());
  FileDescriptor directory_fd(*files_, directory->fd);

  // Everything that could refuse the set is decided before anything is written.
  StoreAllReport report;
  std::vector<const EntryBytes*> missing;
  for (const EntryBytes& entry : entries) {
    std::optional<Result<fs::path>> outcome =
        compare_with_existing(entry.kind, entry.key, entry.bytes);
    if (!outcome) {
      missing.push_back(&entry);
    } else if (!*outcome) {
      return fail(std::move(*outcome).error());
    } else {
      ++report.already_present;
    }
  }

  // Every new entry is written and flushed before the first one appears, so that a full disk or
  // an I/O error, the likely failures, leave no entry behind.
  std::vector<fs::path> temporaries;
  auto remove_temporaries_from = [&](std::size_t first) {
    for (std::size_t i = first; i < temporaries.size(); ++i) files_->unlink(temporaries[i].c_str());
  };
  for (const EntryBytes* entry : missing) {
    const fs::path temporary = root_ / temporary_name(std::string(manifest_kind_name(entry->kind)) +
                                                      "-" + lowercase(entry->key));
    if (Status written = write_temporary(*files_, temporary, entry->bytes); !written) {
      remove_temporaries_from(0);
      return fail(std::move(written).error());
    }
    temporaries.push_back(temporary);
  }

  // Undoes the moves of this call; what could not be undone is named in the error.
  std::vector<fs::path> moved;
  auto roll_back = [&](Error cause) -> Result<StoreAllReport> {
    std::string left;
    for (const fs::path& path : moved) {
      if (files_->unlink(path.c_str()) != 0 && errno != ENOENT) {
        left += (left.empty() ? "" : ", ") + path.string() + " (" + errno_text(errno) + ")";
      }
    }
    files_->fsync(directory_fd.get());
    if (left.empty()) return fail(std::move(cause));
    return std::move(cause).with_context(attempt +
                                         "; the entries it had stored were removed except " + left);
  };
  for (std::size_t i = 0; i < missing.size(); ++i) {
    const EntryBytes& entry = *missing[i];
    const fs::path final_path = path_for(entry.kind, entry.key);
    const int move_error = move_without_replacing(*files_, temporaries[i], final_path);
    if (move_error == 0) {
      moved.push_back(final_path);
      continue;
    }
    files_->unlink(temporaries[i].c_str());
    std::optional<Result<fs::path>> outcome;
    if (move_error == EEXIST) {
      // Another writer stored this entry meanwhile: the same bytes are as good as ours.
      outcome = compare_with_existing(entry.kind, entry.key, entry.bytes);
      if (outcome && *outcome) {
        ++report.already_present;
        continue;
      }
    }
    remove_temporaries_from(i + 1);
    if (outcome) return roll_back(std::move(*outcome).error());
    return roll_back(io_error("move into place", final_path, move_error));
  }
  if (files_->fsync(directory_fd.get()) != 0) {
    return roll_back(io_error("flush directory", root_, errno));
  }
  report.stored = moved.size();
  return report;
}

Result<VerifyReport> ManifestCache::verify() const {
  VerifyReport report;
  WF_TRY_ASSIGN(std::vector<fs::directory_entry> files, files_in(root_));
  for (const fs::directory_entry& item : files) {
    // auto-tune-all's local leases (leases.hpp), not entries.
    std::error_code type_error;
    if (item.path() == LocalLeases::directory_of(root_) && item.is_directory(type_error)) continue;
    EntryCheck check;
    check.path = item.path();
    check.entry = parse_entry_name(item.path());
    if (is_temporary_name(item.path().filename().string())) {
      check.health = EntryHealth::kTemporary;
      check.message = "temporary file of a writer (or of one that crashed)";
    } else if (!check.entry) {
      check.health = EntryHealth::kForeign;
      check.message =
          "not a cache entry: the name is not <tuning|certification|measurement>-<64 hex>.json";
    } else {
      Result<std::optional<std::string>> bytes = read_file(*files_, item.path());
      Status valid = Ok{};
      if (!bytes) {
        valid = std::move(bytes).error();
      } else if (!bytes->has_value()) {
        valid = Error(ErrorKind::kIo, "The file disappeared while it was being verified.");
      } else {
        valid = check_entry(check.entry->kind, check.entry->key, item.path(), **bytes);
      }
      if (!valid) {
        check.health = valid.error().kind() == ErrorKind::kIo ? EntryHealth::kUnreadable
                                                              : EntryHealth::kCorrupt;
        check.message = valid.error().message();
      }
    }
    report.checks.push_back(std::move(check));
  }
  std::sort(report.checks.begin(), report.checks.end(),
            [](const EntryCheck& a, const EntryCheck& b) { return a.path < b.path; });
  return report;
}

Result<fs::path> resolve_cache_root(const std::optional<fs::path>& explicit_root) {
  if (explicit_root && !explicit_root->empty()) return *explicit_root;
  auto variable = [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
  if (auto dir = variable("WGSL_FORGE_CACHE")) return fs::path(*dir);
  // The XDG Base Directory specification: a relative path in XDG_CACHE_HOME is invalid and is
  // ignored (it would name a different cache from every working directory).
  if (auto dir = variable("XDG_CACHE_HOME"); dir && fs::path(*dir).is_absolute()) {
    return fs::path(*dir) / "wgsl-forge";
  }
  if (auto home = variable("HOME")) return fs::path(*home) / ".cache" / "wgsl-forge";
  return Error(ErrorKind::kInvalidInput,
               "Cannot find a cache directory: none of --cache, WGSL_FORGE_CACHE, XDG_CACHE_HOME "
               "or HOME is set.");
}

}  // namespace wgsl_forge
