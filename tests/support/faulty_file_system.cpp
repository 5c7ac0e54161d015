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

template <typename Call>
auto FaultyFileSystem::pass(const char* name, Call call) -> decltype(call()) {
  if (inject(name)) return -1;
  auto result = call();
  if (kill_pending_) ::raise(SIGKILL);
  return result;
}

int FaultyFileSystem::open(const char* path, int flags, mode_t mode) {
  return pass("open", [&] { return real_->open(path, flags, mode); });
}

ssize_t FaultyFileSystem::read(int fd, void* buffer, std::size_t size) {
  return pass("read", [&] { return real_->read(fd, buffer, size); });
}

ssize_t FaultyFileSystem::write(int fd, const void* data, std::size_t size) {
  return pass("write", [&]() -> ssize_t {
    if (disk_full_) {
      errno = ENOSPC;
      return -1;
    }
    if (fault_ == Fault::kShortWrite && operations_.size() == at_ && size > 1) {
      faulted_ = "write";
      disk_full_ = true;
      return real_->write(fd, data, size / 2);
    }
    return real_->write(fd, data, size);
  });
}

int FaultyFileSystem::fstat(int fd, struct stat* status) {
  return pass("fstat", [&] { return real_->fstat(fd, status); });
}

int FaultyFileSystem::fsync(int fd) {
  return pass("fsync", [&] { return real_->fsync(fd); });
}

int FaultyFileSystem::close(int fd) {
  // Linux releases the descriptor even when close() reports an error; so does this.
  bool fail = inject("close");
  int result = real_->close(fd);
  if (kill_pending_) ::raise(SIGKILL);
  return fail ? -1 : result;
}

int FaultyFileSystem::mkdir(const char* path, mode_t mode) {
  return pass("mkdir", [&] { return real_->mkdir(path, mode); });
}

int FaultyFileSystem::rename_no_replace(const char* from, const char* to) {
  return pass("rename", [&] {
    if (has_renameat2_) return real_->rename_no_replace(from, to);
    errno = EINVAL;
    return -1;
  });
}

int FaultyFileSystem::rename_replacing(const char* from, const char* to) {
  return pass("rename", [&] { return real_->rename_replacing(from, to); });
}

int FaultyFileSystem::link(const char* from, const char* to) {
  return pass("link", [&] { return real_->link(from, to); });
}

int FaultyFileSystem::unlink(const char* path) {
  return pass("unlink", [&] { return real_->unlink(path); });
}

}  // namespace wgsl_forge::testing
