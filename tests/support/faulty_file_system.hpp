#pragma once
// A FileSystem that counts the cache's file operations and does something to exactly one of them:
// fails it (ENOSPC, EIO), turns a write into a short write on a disk that is then full, or kills
// the process with SIGKILL just before or just after it. Everything else goes to the real calls.

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "wgsl_forge/file_system.hpp"

namespace wgsl_forge::testing {

enum class Fault {
  kNone,
  kNoSpace,     // fails with ENOSPC
  kIoError,     // fails with EIO
  kShortWrite,  // a write stores half its bytes; every later write fails with ENOSPC
  kKillBefore,  // SIGKILL before the operation runs
  kKillAfter,   // SIGKILL after it ran
};
const char* fault_name(Fault fault);

class FaultyFileSystem final : public FileSystem {
 public:
  // `at` counts from 1; 0 never fires. Without renameat2, moves take the link-and-unlink path.
  FaultyFileSystem(Fault fault, std::size_t at, bool has_renameat2 = true);

  // Operations seen so far, by name ("open", "write", ...), in order.
  const std::vector<std::string>& operations() const { return operations_; }
  // The name of the operation the fault hit; empty when it did not fire (a short write fault on
  // an operation that is not a write does nothing).
  const std::string& faulted_operation() const { return faulted_; }

  int open(const char* path, int flags, mode_t mode) override;
  ssize_t read(int fd, void* buffer, std::size_t size) override;
  ssize_t write(int fd, const void* data, std::size_t size) override;
  int fstat(int fd, struct stat* status) override;
  int fsync(int fd) override;
  int close(int fd) override;
  int mkdir(const char* path, mode_t mode) override;
  int rename_no_replace(const char* from, const char* to) override;
  int rename_replacing(const char* from, const char* to) override;
  int link(const char* from, const char* to) override;
  int unlink(const char* path) override;

 private:
  // Counts the operation; true when it must fail (errno is set then).
  bool inject(const char* name);
  // Counts the operation, then fails it or runs `call`, then kills the process if the fault says
  // so.
  template <typename Call>
  auto pass(const char* name, Call call) -> decltype(call());

  Fault fault_;
  std::size_t at_;
  bool has_renameat2_;
  bool disk_full_ = false;
  bool kill_pending_ = false;
  std::vector<std::string> operations_;
  std::string faulted_;
  std::shared_ptr<FileSystem> real_ = posix_file_system();
};

}  // namespace wgsl_forge::testing
