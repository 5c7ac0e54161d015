#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "wgsl_forge/file_system.hpp"

namespace wgsl_forge {

namespace {

class PosixFileSystem final : public FileSystem {
 public:
  int open(const char* path, int flags, mode_t mode) override { return ::open(path, flags, mode); }
  ssize_t read(int fd, void* buffer, std::size_t size) override { return ::read(fd, buffer, size); }
  ssize_t write(int fd, const void* data, std::size_t size) override {
    return ::write(fd, data, size);
  }
  int fstat(int fd, struct stat* status) override { return ::fstat(fd, status); }
  int fsync(int fd) override { return ::fsync(fd); }
  int close(int fd) override { return ::close(fd); }
  int mkdir(const char* path, mode_t mode) override { return ::mkdir(path, mode); }
  int rename_no_replace(const char* from, const char* to) override {
    return ::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
  }
  int rename_replacing(const char* from, const char* to) override { return ::rename(from, to); }
  int link(const char* from, const char* to) override { return ::link(from, to); }
  int unlink(const char* path) override { return ::unlink(path); }
};

}  // namespace

std::shared_ptr<FileSystem> posix_file_system() {
  static const std::shared_ptr<FileSystem> instance = std::make_shared<PosixFileSystem>();
  return instance;
}

}  // namespace wgsl_forge
