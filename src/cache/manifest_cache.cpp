#include "wgsl_forge/cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "util/try.hpp"
#include "wgsl_forge/file_system.hpp"
#include "wgsl_forge/hash.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int error_number) { return std::strerror(error_number); }

Error io_error(const std::string& what, const fs::path& path, int error_number) {
  return Error(ErrorKind::kIo,
               "Cannot " + what + " " + path.string() + " (" + errno_text(error_number) + ").");
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

// Closes a descriptor when it leaves scope; the store path closes explicitly to see the error.
class FileDescriptor {
 public:
  FileDescriptor(FileSystem& files, int fd) : files_(&files), fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept
      : files_(other.files_), fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) files_->close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports what close() said (a deferred write error shows up here).
  int close() {
    int result = files_->close(std::exchange(fd_, -1));
    return result == 0 ? 0 : errno;
  }

 private:
  FileSystem* files_;
  int fd_;
};

Status write_all(FileSystem& files, int fd, std::string_view bytes, const fs::path& path) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    ssize_t count = files.write(fd, bytes.data() + written, bytes.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) return io_error("write", path, errno);
    if (count == 0) return io_error("write", path, ENOSPC);
    written += static_cast<std::size_t>(count);
  }
  return Ok{};
}

// mkdir -p through `files`: creates the missing components from the top down. 0 or an errno.
int make_directories(FileSystem& files, const fs::path& directory) {
  if (files.mkdir(directory.c_str(), 0755) == 0 || errno == EEXIST) return 0;
  if (errno != ENOENT || !directory.has_parent_path() || directory.parent_path() == directory) {
    return errno;
  }
  if (int error = make_directories(files, directory.parent_path()); error != 0) return error;
  if (files.mkdir(directory.c_str(), 0755) == 0 || errno == EEXIST) return 0;
  return errno;
}

// What a file that is not a regular file is, for the error that refuses it.
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown file type";
}

Error not_a_regular_file(const fs::path& path, const char* what) {
  return Error(ErrorKind::kCorruption,
               "Cache entry " + path.string() + " is " + what + ", not a regular file.");
}

// Reads a whole file. nullopt when it does not exist; kCorruption when it is not a regular file
// or is implausibly large; kIo when the system refuses. O_NONBLOCK makes opening a FIFO return at
// once instead of waiting for a writer (it changes nothing for a regular file), O_NOFOLLOW refuses
// a symbolic link (ELOOP), and the type is then checked on the opened descriptor, so that nothing
// swapped in between a check and the open can make a reader block.
Result<std::optional<std::string>> read_file(FileSystem& files, const fs::path& path) {
  FileDescriptor fd(files,
                    files.open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    if (errno == ELOOP) return not_a_regular_file(path, "a symbolic link");
    return io_error("open", path, errno);
  }
  struct stat status {};
  if (files.fstat(fd.get(), &status) != 0) return io_error("inspect", path, errno);
  if (!S_ISREG(status.st_mode)) return not_a_regular_file(path, file_type_name(status.st_mode));
  // The size limit of manifest_json.hpp, checked before reading: a huge file costs no memory.
  if (static_cast<std::uint64_t>(status.st_size) > kMaxManifestBytes) {
    return Error(ErrorKind::kCorruption,
                 "Cache entry " + path.string() + " is too large to be a manifest (" +
                     std::to_string(status.st_size) + " bytes, the limit is " +
                     std::to_string(kMaxManifestBytes) + ").");
  }
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(status.st_size));
  char buffer[65536];
  while (true) {
    ssize_t count = files.read(fd.get(), buffer, sizeof buffer);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) return io_error("read", path, errno);
    if (count == 0) break;
    bytes.append(buffer, static_cast<std::size_t>(count));
    if (bytes.size() > kMaxManifestBytes) {  // it grew while being read
      return Error(ErrorKind::kCorruption, "Cache entry " + path.string() +
                                               " is too large to be a manifest (more than " +
                                               std::to_string(kMaxManifestBytes) + " bytes).");
    }
  }
  return std::optional<std::string>(std::move(bytes));
}

Error corruption(const fs::path& path, const Error& cause) {
  return Error(ErrorKind::kCorruption,
               "Cache entry " + path.string() + " is corrupt: " + cause.message() +
                   " Remove the file (wgsl-forge cache verify lists every such entry) and "
                   "tune or certify again.");
}

// Parses an entry's bytes and checks that the manifest belongs to the key it is stored under;
// the error is the cause alone, which decode_entry wraps for a file of the root and
// ManifestCache::fetch_remote for an entry of the remote store.
template <typename Manifest>
Result<Manifest> decode_manifest(std::string_view key, const std::string& bytes);

bool tuning_belongs_to(const TuningManifest& manifest, std::string_view key) {
  if (manifest.cache_key == key) return true;
  return manifest.context.topology_hash &&
         ManifestCache::bucket_key(*manifest.context.topology_hash, manifest.kernel_id,
                                   manifest.context.bucket.value_or("")) == key;
}

template <>
Result<TuningManifest> decode_manifest<TuningManifest>(std::string_view key,
                                                       const std::string& bytes) {
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
Result<CertificationManifest> decode_manifest<CertificationManifest>(std::string_view key,
                                                                     const std::string& bytes) {
  WF_TRY_ASSIGN(CertificationManifest manifest, parse_certification_manifest(bytes));
  if (manifest.cache_key != key) {
    return Error(ErrorKind::kCorruption, "It holds the certification manifest of " +
                                             manifest.kernel_id + " with cache key " +
                                             manifest.cache_key.value_or("null") + ".");
  }
  return manifest;
}

template <>
Result<MeasurementRecord> decode_manifest<MeasurementRecord>(std::string_view key,
                                                             const std::string& bytes) {
  WF_TRY_ASSIGN(MeasurementRecord record, parse_measurement_record(bytes));
  if (record.cache_key != key) {
    return Error(ErrorKind::kCorruption, "It holds a measurement of " + record.kernel_id +
                                             " with cache key " + record.cache_key + ".");
  }
  return record;
}

template <typename Manifest>
Result<Manifest> decode_entry(std::string_view key, const fs::path& path,
                              const std::string& bytes) {
  Result<Manifest> manifest = decode_manifest<Manifest>(key, bytes);
  if (!manifest) return corruption(path, manifest.error());
  return manifest;
}

// Ok when `bytes` decode as an entry of `kind` under `key`; the cause otherwise.
Status check_manifest(ManifestKind kind, std::string_view key, const std::string& bytes) {
  switch (kind) {
    case ManifestKind::kTuning:
      WF_TRY(decode_manifest<TuningManifest>(key, bytes));
      break;
    case ManifestKind::kCertification:
      WF_TRY(decode_manifest<CertificationManifest>(key, bytes));
      break;
    case ManifestKind::kMeasurement:
      WF_TRY(decode_manifest<MeasurementRecord>(key, bytes));
      break;
  }
  return Ok{};
}

Status check_entry(ManifestKind kind, std::string_view key, const fs::path& path,
                   const std::string& bytes) {
  Status valid = check_manifest(kind, key, bytes);
  if (!valid) return corruption(path, valid.error());
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

bool is_temporary_name(const std::string& name) {
  return name.starts_with('.') && name.ends_with(".tmp");
}

// A name no other writer can pick: "." + what + process id, a per-process sequence and random
// bits (the sequence alone repeats across processes that share a pid namespace) + ".tmp", which
// is_temporary_name recognises.
std::string temporary_name(std::string_view what) {
  static std::atomic<std::uint64_t> sequence{0};
  thread_local std::mt19937_64 random_bits{std::random_device{}()};
  char random_hex[17];
  std::snprintf(random_hex, sizeof random_hex, "%016llx",
                static_cast<unsigned long long>(random_bits()));
  return "." + std::string(what) + "." + std::to_string(::getpid()) + "." +
         std::to_string(sequence.fetch_add(1)) + "." + random_hex + ".tmp";
}

// Moves `from` to `to` unless `to` exists (EEXIST then). renameat2(RENAME_NOREPLACE) where the
// file system has it, else a hard link (which also refuses to replace) followed by an unlink; a
// failed unlink then leaves only a temporary name behind, which readers ignore.
int move_without_replacing(FileSystem& files, const fs::path& from, const fs::path& to) {
  if (files.rename_no_replace(from.c_str(), to.c_str()) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return errno;
  if (files.link(from.c_str(), to.c_str()) != 0) return errno;
  files.unlink(from.c_str());
  return 0;
}

// Writes `bytes` to a new file at `path` and flushes it to disk; on failure the file is gone.
Status write_temporary(FileSystem& files, const fs::path& path, std::string_view bytes) {
  FileDescriptor fd(files, files.open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return io_error("create", path, errno);
  Status written = write_all(files, fd.get(), bytes, path);
  if (written && files.fsync(fd.get()) != 0) written = io_error("flush", path, errno);
  if (int closed = fd.close(); written && closed != 0) written = io_error("close", path, closed);
  if (!written) files.unlink(path.c_str());
  return written;
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
  if (Status valid = check_manifest(kind, key, *bytes); !valid) {
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
  if (Status valid = check_manifest(kind, lower, published.existing); !valid) {
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

Result<VerifyReport> ManifestCache::verify() const {
  VerifyReport report;
  WF_TRY_ASSIGN(std::vector<fs::directory_entry> files, files_in(root_));
  for (const fs::directory_entry& item : files) {
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
