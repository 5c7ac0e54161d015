#pragma once
// Internal to the cache layer: the file operations that the manifest cache and bundles share,
// each done through a FileSystem (file_system.hpp) so that tests can fail any one of them.
// Reads refuse anything that is not a regular file without waiting on it; writes go to a
// temporary file that is flushed before it is moved into place, so that a reader and a process
// killed at any point see the whole file or none of it.

#include <time.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "wgsl_forge/error.hpp"
#include "wgsl_forge/file_system.hpp"

namespace wgsl_forge::file_io {

// "Cannot <what> <path> (<strerror>)."; kind kIo.
Error io_error(const std::string& what, const std::filesystem::path& path, int error_number);
std::string errno_text(int error_number);
std::string lowercase(std::string_view text);

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
  // Closes now and returns 0 or the errno of close() (a deferred write error shows up here).
  int close();

 private:
  FileSystem* files_;
  int fd_;
};

// mkdir -p through `files`: creates the missing components from the top down. 0 or an errno.
int make_directories(FileSystem& files, const std::filesystem::path& directory);

// What a file that is read is, for the errors that refuse it: "Cache entry", "a manifest".
struct FileRole {
  const char* noun;
  const char* what_it_must_be;
  std::uint64_t max_bytes;
};

struct FileContent {
  std::string bytes;
  timespec modified{};  // the file's modification time
};

// Reads a whole regular file. nullopt when it does not exist; kCorruption ("<noun> <path> is a
// FIFO, not a regular file.", "... is too large to be <what_it_must_be> ...") when it is not a
// regular file or exceeds the role's size; kIo when the system refuses. O_NONBLOCK makes opening
// a FIFO return at once instead of waiting for a writer, O_NOFOLLOW refuses a symbolic link, and
// the type and size are checked on the opened descriptor, before anything is read.
Result<std::optional<FileContent>> read_regular_file(FileSystem& files,
                                                     const std::filesystem::path& path,
                                                     const FileRole& role);

// True for the names temporary_name makes.
bool is_temporary_name(const std::string& name);
// A name no other writer can pick: "." + what + process id, a per-process sequence and random
// bits (the sequence alone repeats across processes that share a pid namespace) + ".tmp".
std::string temporary_name(std::string_view what);

// Writes `bytes` to a new file at `path` and flushes it to disk; on failure the file is gone.
Status write_temporary(FileSystem& files, const std::filesystem::path& path,
                       std::string_view bytes);

// Moves `from` to `to` unless `to` exists (EEXIST then). renameat2(RENAME_NOREPLACE) where the
// file system has it, else a hard link (which also refuses to replace) followed by an unlink; a
// failed unlink then leaves only a temporary name behind, which readers ignore. 0 or an errno.
int move_without_replacing(FileSystem& files, const std::filesystem::path& from,
                           const std::filesystem::path& to);

}  // namespace wgsl_forge::file_io
