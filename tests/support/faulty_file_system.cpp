#include "support/faulty_file_system.hpp"

#include <cerrno>
#include <csignal>

namespace wgsl_forge::testing {

const char* fault_name(Fault fault) {
  switch (fault) {
    case Fault::kNone:
      return "none";
    case Fault::kNoSpace:
      return "ENOSPC";
    case Fault::kIoError:
      return "EIO";
    case Fault::kShortWrite:
      return "short write";
    case Fault::kKillBefore:
      return "SIGKILL before";
    case Fault::kKillAfter:
      return "SIGKILL after";
  }
  return "unknown";
}

FaultyFileSystem::FaultyFileSystem(Fault fault, std::size_t at, bool has_renameat2)
    : fault_(fault), at_(at), has_renameat2_(has_renameat2) {}

bool FaultyFileSystem::inject(const char* name) {
  operations_.emplace_back(name);
  if (operations_.size() != at_) return false;
  switch (fault_) {
    case Fault::kNone:
      return false;
    case Fault::kNoSpace:
    case Fault::kIoError:
      faulted_ = name;
      errno = fault_ == Fault::kNoSpace ? ENOSPC : EIO;
      return true;
    case Fault::kShortWrite:
      return false;  // handled by write()
    case Fault::kKillBefore:
      faulted_ = name;
      ::raise(SIGKILL);
      return false;
    case Fault::kKillAfter:
      faulted_ = name;
      kill_pending_ = true;
      return false;
  }
  return false;
}

void FaultyFileSystem::kill_after() {
  if (kill_pending_) ::raise(SIGKILL);
}

int FaultyFileSystem::open(const char* path, int flags, mode_t mode) {
  if (inject("open")) return -1;
  int result = real_->open(path, flags, mode);
  kill_after();
  return result;
}

ssize_t FaultyFileSystem::read(int fd, void* buffer, std::size_t size) {
  if (inject("read")) return -1;
  ssize_t result = real_->read(fd, buffer, size);
  kill_after();
  return result;
}

ssize_t FaultyFileSystem::write(int fd, const void* data, std::size_t size) {
  if (inject("write")) return -1;
  if (disk_full_) {
    errno = ENOSPC;
    return -1;
  }
  if (fault_ == Fault::kShortWrite && operations_.size() == at_ && size > 1) {
    faulted_ = "write";
    disk_full_ = true;
    return real_->write(fd, data, size / 2);
  }
  ssize_t result = real_->write(fd, data, size);
  kill_after();
  return result;
}

int FaultyFileSystem::fstat(int fd, struct stat* status) {
  if (inject("fstat")) return -1;
  int result = real_->fstat(fd, status);
  kill_after();
  return result;
}

int FaultyFileSystem::fsync(int fd) {
  if (inject("fsync")) return -1;
  int result = real_->fsync(fd);
  kill_after();
  return result;
}

int FaultyFileSystem::close(int fd) {
  // Linux releases the descriptor even when close() reports an error; so does this.
  bool fail = inject("close");
  int result = real_->close(fd);
  kill_after();
  return fail ? -1 : result;
}

int FaultyFileSystem::mkdir(const char* path, mode_t mode) {
  if (inject("mkdir")) return -1;
  int result = real_->mkdir(path, mode);
  kill_after();
  return result;
}

int FaultyFileSystem::rename_no_replace(const char* from, const char* to) {
  if (inject("rename")) return -1;
  if (!has_renameat2_) {
    errno = EINVAL;
    return -1;
  }
  int result = real_->rename_no_replace(from, to);
  kill_after();
  return result;
}

int FaultyFileSystem::link(const char* from, const char* to) {
  if (inject("link")) return -1;
  int result = real_->link(from, to);
  kill_after();
  return result;
}

int FaultyFileSystem::unlink(const char* path) {
  if (inject("unlink")) return -1;
  int result = real_->unlink(path);
  kill_after();
  return result;
}

}  // namespace wgsl_forge::testing
