#pragma once
// Leases by which processes split auto-tune-all's (kernel, size bucket) work, so that each entry
// is tuned once: on the fleet's Redis (RemoteStore's claim, renew and release) or, without one,
// in files of the cache directory that the processes share (LocalLeases): the workers of
// `auto-tune-all --adapters`, or any two runs on one cache. A lease names its holder's unique
// token and expires by itself unless renewed, so a holder that dies (SIGKILL) blocks its entry
// only until then; it is renewed and released only by the token that holds it.

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

#include "wgsl_forge/error.hpp"

namespace wgsl_forge {

enum class ClaimOutcome {
  kClaimed,        // this token holds the lease for the duration asked
  kHeldElsewhere,  // another token holds it and it has not expired
  kUnavailable,    // the store cannot be asked (a remote gone offline): go on without it
};

class LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  // Takes the lease on `key` when it is free or expired. An error when what holds it cannot be
  // read (a damaged lease file), naming it.
  virtual Result<ClaimOutcome> claim(std::string_view key, const std::string& token,
                                     std::chrono::milliseconds duration) = 0;
  // True while `token` still holds it; its expiry is then `duration` from now.
  virtual bool renew(std::string_view key, const std::string& token,
                     std::chrono::milliseconds duration) = 0;
  // Ends it, only if `token` still holds it.
  virtual void release(std::string_view key, const std::string& token) = 0;
};

// Lease files: `<cache root>/leases/<key>.lease` (ManifestCache::verify leaves that directory
// alone), three lines of text:
//   wgsl-forge lease 1
//   token <holder's token>
//   expires <milliseconds since 1970, UTC>
// Every read-modify-write holds flock(2) on `<cache root>/leases/lock`, which the kernel drops
// when its process dies, so a claim, a renewal or a release never races another; a lease is
// written whole (a temporary file, flushed, renamed over). Expiry is wall-clock time, which the
// processes of one host share; a lease whose holder's token names a process of this host that no
// longer exists is free at once (a killed tune holds nothing up). A lease file that is not a
// regular file or not three such lines is an error naming it and what is wrong (remove it), never a
// crash or a wait.
class LocalLeases final : public LeaseStore {
 public:
  explicit LocalLeases(const std::filesystem::path& cache_root);
  static std::filesystem::path directory_of(const std::filesystem::path& cache_root);
  std::filesystem::path path_of(std::string_view key) const;

  Result<ClaimOutcome> claim(std::string_view key, const std::string& token,
                             std::chrono::milliseconds duration) override;
  bool renew(std::string_view key, const std::string& token,
             std::chrono::milliseconds duration) override;
  void release(std::string_view key, const std::string& token) override;

 private:
  std::filesystem::path directory_;
};

}  // namespace wgsl_forge
