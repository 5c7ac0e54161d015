#pragma once
// The file operations the manifest cache performs, behind one interface, so that a test can make
// any one of them fail (ENOSPC, EIO, a short write) or kill the process at it, the way SQLite
// tests its atomic commit through a fault-injecting VFS.
//
// Each function behaves like the POSIX call it names: -1 (or a negative count) with errno set on
// failure. The cache never calls the operating system for entry files in any other way.

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <memory>

namespace wgsl_forge {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  virtual int open(const char* path, int flags, mode_t mode) = 0;
  virtual ssize_t read(int fd, void* buffer, std::size_t size) = 0;
  virtual ssize_t write(int fd, const void* data, std::size_t size) = 0;
  virtual int fstat(int fd, struct stat* status) = 0;
  virtual int fsync(int fd) = 0;
  virtual int close(int fd) = 0;
  virtual int mkdir(const char* path, mode_t mode) = 0;
  // Moves `from` to `to`, failing with EEXIST instead of replacing `to` (renameat2 with
  // RENAME_NOREPLACE); EINVAL, ENOSYS or ENOTSUP where the file system cannot do that.
  virtual int rename_no_replace(const char* from, const char* to) = 0;
  // Moves `from` to `to`, replacing `to` atomically when it exists (rename(2)).
  virtual int rename_replacing(const char* from, const char* to) = 0;
  virtual int link(const char* from, const char* to) = 0;
  virtual int unlink(const char* path) = 0;
};

// The operating system's calls; shared, stateless.
std::shared_ptr<FileSystem> posix_file_system();

}  // namespace wgsl_forge
