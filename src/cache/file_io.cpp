#include "cache/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace wgsl_forge::file_io {

namespace fs = std::filesystem;

namespace {

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

// What a file that is not a regular file is, for the error that refuses it.
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown file type";
}

Error not_a_regular_file(const FileRole& role, const fs::path& path, const char* what) {
  return Error(ErrorKind::kCorruption, std::string(role.noun) + " " + path.string() + " is " +
                                           what + ", not a regular file.");
}

}  // namespace

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

int FileDescriptor::close() {
  int result = files_->close(std::exchange(fd_, -1));
  return result == 0 ? 0 : errno;
}

int make_directories(FileSystem& files, const fs::path& directory) {
  if (files.mkdir(directory.c_str(), 0755) == 0 || errno == EEXIST) return 0;
  if (errno != ENOENT || !directory.has_parent_path() || directory.parent_path() == directory) {
    return errno;
  }
  if (int error = make_directories(files, directory.parent_path()); error != 0) return error;
  if (files.mkdir(directory.c_str(), 0755) == 0 || errno == EEXIST) return 0;
  return errno;
}

Result<std::optional<FileContent>> read_regular_file(FileSystem& files, const fs::path& path,
                                                     const FileRole& role) {
  FileDescriptor fd(files,
                    files.open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<FileContent>();
    if (errno == ELOOP) return not_a_regular_file(role, path, "a symbolic link");
    return io_error("open", path, errno);
  }
  struct stat status {};
  if (files.fstat(fd.get(), &status) != 0) return io_error("inspect", path, errno);
  if (!S_ISREG(status.st_mode)) {
    return not_a_regular_file(role, path, file_type_name(status.st_mode));
  }
  // The size limit, checked before reading: a huge file costs no memory.
  if (static_cast<std::uint64_t>(status.st_size) > role.max_bytes) {
    return Error(ErrorKind::kCorruption,
                 std::string(role.noun) + " " + path.string() + " is too large to be " +
                     role.what_it_must_be + " (" + std::to_string(status.st_size) +
                     " bytes, the limit is " + std::to_string(role.max_bytes) + ").");
  }
  FileContent content;
  content.modified = status.st_mtim;
  content.bytes.reserve(static_cast<std::size_t>(status.st_size));
  char buffer[65536];
  while (true) {
    ssize_t count = files.read(fd.get(), buffer, sizeof buffer);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) return io_error("read", path, errno);
    if (count == 0) break;
    content.bytes.append(buffer, static_cast<std::size_t>(count));
    if (content.bytes.size() > role.max_bytes) {  // it grew while being read
      return Error(ErrorKind::kCorruption, std::string(role.noun) + " " + path.string() +
                                               " is too large to be " + role.what_it_must_be +
                                               " (more than " + std::to_string(role.max_bytes) +
                                               " bytes).");
    }
  }
  return std::optional<FileContent>(std::move(content));
}

bool is_temporary_name(const std::string& name) {
  return name.starts_with('.') && name.ends_with(".tmp");
}

std::string temporary_name(std::string_view what) {
  static std::atomic<std::uint64_t> sequence{0};
  thread_local std::mt19937_64 random_bits{std::random_device{}()};
  char random_hex[17];
  std::snprintf(random_hex, sizeof random_hex, "%016llx",
                static_cast<unsigned long long>(random_bits()));
  return "." + std::string(what) + "." + std::to_string(::getpid()) + "." +
         std::to_string(sequence.fetch_add(1)) + "." + random_hex + ".tmp";
}

int move_without_replacing(FileSystem& files, const fs::path& from, const fs::path& to) {
  if (files.rename_no_replace(from.c_str(), to.c_str()) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return errno;
  if (files.link(from.c_str(), to.c_str()) != 0) return errno;
  files.unlink(from.c_str());
  return 0;
}

Status write_temporary(FileSystem& files, const fs::path& path, std::string_view bytes) {
  FileDescriptor fd(files, files.open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return io_error("create", path, errno);
  Status written = write_all(files, fd.get(), bytes, path);
  if (written && files.fsync(fd.get()) != 0) written = io_error("flush", path, errno);
  if (int closed = fd.close(); written && closed != 0) written = io_error("close", path, closed);
  if (!written) files.unlink(path.c_str());
  return written;
}

}  // namespace wgsl_forge::file_io
