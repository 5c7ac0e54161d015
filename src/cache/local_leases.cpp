#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <random>

#include "util/try.hpp"
#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/leases.hpp"

namespace wgsl_forge {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kHeader = "wgsl-forge lease 1";
constexpr std::size_t kLargestLease = 4096;

struct Lease {
  std::string token;
  std::int64_t expires_ms = 0;
};

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// True when `token` (RemoteStore::unique_token: "<host>:<pid>:<random>") names a process of this
// host that no longer exists: its lease is stale at once, not only when it expires, so that a
// killed tune never holds up the next one on the same machine. A recycled pid looks alive, and a
// token of another host or of another form is left to expire: both err on the side of waiting.
bool holder_is_gone(std::string_view token) {
  const std::size_t last = token.rfind(':');
  if (last == std::string_view::npos || last == 0) return false;
  const std::size_t before = token.rfind(':', last - 1);
  if (before == std::string_view::npos) return false;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || token.substr(0, before) != host) return false;
  const std::string_view digits = token.substr(before + 1, last - before - 1);
  pid_t pid = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (error != std::errc() || end != digits.data() + digits.size() || pid <= 0) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

Error io_error(const std::string& what, const fs::path& path, int error) {
  return Error(ErrorKind::kIo,
               "Cannot " + what + " " + path.string() + " (" + std::strerror(error) + ").");
}

// Closes a descriptor when it goes out of scope.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// The lease directory's lock, held until destroyed (closing the descriptor drops it).
Result<std::unique_ptr<Descriptor>> lock_directory(const fs::path& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) return io_error("create the lease directory", directory, error.value());
  const fs::path path = directory / "lock";
  auto lock = std::make_unique<Descriptor>();
  lock->fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (lock->fd < 0) return io_error("open the lease lock", path, errno);
  struct stat status {};
  if (::fstat(lock->fd, &status) != 0) return io_error("inspect the lease lock", path, errno);
  if (!S_ISREG(status.st_mode)) {
    return Error(ErrorKind::kCorruption,
                 "Lease lock " + path.string() + " is not a regular file; remove it.");
  }
  while (::flock(lock->fd, LOCK_EX) != 0) {
    if (errno != EINTR) return io_error("lock", path, errno);
  }
  return lock;
}

Error not_a_lease(const fs::path& path, const std::string& why) {
  return Error(ErrorKind::kCorruption,
               "Lease file " + path.string() + " is not a lease of wgsl-forge (" + why +
                   "); remove it to let auto-tune-all claim that entry again.");
}

// The lease in `text`, or why it is none.
Result<Lease> parse_lease(std::string_view text, const fs::path& path) {
  auto damaged = [&](const std::string& why) { return not_a_lease(path, why); };
  auto next_line = [&](std::string_view& rest) -> std::optional<std::string_view> {
    const std::size_t end = rest.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end + 1);
    return line;
  };
  std::string_view rest = text;
  const std::optional<std::string_view> header = next_line(rest);
  const std::optional<std::string_view> token = next_line(rest);
  const std::optional<std::string_view> expires = next_line(rest);
  if (!header || !token || !expires || !rest.empty()) {
    return damaged("it is not three lines of text");
  }
  if (*header != kHeader) return damaged("its first line is not '" + std::string(kHeader) + "'");
  if (!token->starts_with("token ") || token->size() == 6 ||
      token->find_first_of(" \t\r", 6) != std::string_view::npos) {
    return damaged("its second line is not 'token <holder>'");
  }
  Lease lease;
  lease.token = std::string(token->substr(6));
  const std::string_view digits = expires->starts_with("expires ") ? expires->substr(8) : "";
  auto [end, error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), lease.expires_ms);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() ||
      lease.expires_ms < 0) {
    return damaged("its third line is not 'expires <milliseconds since 1970>'");
  }
  return lease;
}

// The lease at `path` (nullopt when there is none); read without following a link or waiting
// on a FIFO.
Result<std::optional<Lease>> read_lease(const fs::path& path) {
  Descriptor file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (file.fd < 0) {
    if (errno == ENOENT) return std::optional<Lease>();
    if (errno == ELOOP) {
      return Error(ErrorKind::kCorruption,
                   "Lease file " + path.string() + " is a symbolic link, not a lease; remove it.");
    }
    return io_error("open the lease file", path, errno);
  }
  struct stat status {};
  if (::fstat(file.fd, &status) != 0) return io_error("inspect the lease file", path, errno);
  if (!S_ISREG(status.st_mode)) {
    return Error(ErrorKind::kCorruption,
                 "Lease file " + path.string() + " is not a regular file, not a lease; remove it.");
  }
  if (status.st_size > static_cast<off_t>(kLargestLease)) {
    return not_a_lease(path, "it is larger than " + std::to_string(kLargestLease) + " bytes");
  }
  std::string text(static_cast<std::size_t>(status.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t got = ::read(file.fd, text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return io_error("read the lease file", path, errno);
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  text.resize(done);
  WF_TRY_ASSIGN(Lease lease, parse_lease(text, path));
  return std::optional<Lease>(std::move(lease));
}

// Writes the lease whole: a temporary file, flushed, renamed over `path`.
Status write_lease(const fs::path& path, const Lease& lease) {
  std::random_device entropy;
  const fs::path temporary =
      path.parent_path() / ("." + path.filename().string() + "." + std::to_string(entropy()) +
                            std::to_string(::getpid()) + ".tmp");
  const std::string text = std::string(kHeader) + "\ntoken " + lease.token + "\nexpires " +
                           std::to_string(lease.expires_ms) + "\n";
  Descriptor file;
  file.fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (file.fd < 0) return io_error("create the lease file", temporary, errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t wrote = ::write(file.fd, text.data() + done, text.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) {
      const int error = errno;
      ::unlink(temporary.c_str());
      return io_error("write the lease file", temporary, error);
    }
    done += static_cast<std::size_t>(wrote);
  }
  if (::fsync(file.fd) != 0 || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    return io_error("write the lease file", path, error);
  }
  return Ok{};
}

}  // namespace

LocalLeases::LocalLeases(const fs::path& cache_root) : directory_(directory_of(cache_root)) {}

fs::path LocalLeases::directory_of(const fs::path& cache_root) { return cache_root / "leases"; }

fs::path LocalLeases::path_of(std::string_view key) const {
  return directory_ / (std::string(key) + ".lease");
}

Result<ClaimOutcome> LocalLeases::claim(std::string_view key, const std::string& token,
                                        std::chrono::milliseconds duration) {
  WF_TRY(validate_cache_key(key));
  WF_TRY_ASSIGN(std::unique_ptr<Descriptor> lock, lock_directory(directory_));
  const fs::path path = path_of(key);
  WF_TRY_ASSIGN(std::optional<Lease> held, read_lease(path));
  if (held && held->token != token && held->expires_ms > now_ms() && !holder_is_gone(held->token)) {
    return ClaimOutcome::kHeldElsewhere;
  }
  WF_TRY(write_lease(path, Lease{token, now_ms() + duration.count()}));
  return ClaimOutcome::kClaimed;
}

bool LocalLeases::renew(std::string_view key, const std::string& token,
                        std::chrono::milliseconds duration) {
  Result<std::unique_ptr<Descriptor>> lock = lock_directory(directory_);
  if (!lock) return false;
  const fs::path path = path_of(key);
  Result<std::optional<Lease>> held = read_lease(path);
  if (!held || !held->has_value() || (*held)->token != token) return false;
  return write_lease(path, Lease{token, now_ms() + duration.count()}).ok();
}

void LocalLeases::release(std::string_view key, const std::string& token) {
  Result<std::unique_ptr<Descriptor>> lock = lock_directory(directory_);
  if (!lock) return;
  const fs::path path = path_of(key);
  Result<std::optional<Lease>> held = read_lease(path);
  if (held && held->has_value() && (*held)->token == token) ::unlink(path.c_str());
}

}  // namespace wgsl_forge
