// LocalLeases: the lease files by which processes sharing a cache directory split auto-tune-all
// (leases.hpp). Real files and, for a holder that dies, a real process killed with SIGKILL.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <system_error>
#include <thread>

#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/leases.hpp"
#include "wgsl_forge/remote_store.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::read_text;
using testing::TempDir;
using testing::write_text;

class LocalLeasesTest : public testing::SeededTest {
 protected:
  // A fresh random entry key (64 hex) and holder tokens.
  std::string random_key() {
    std::string key;
    for (int i = 0; i < 64; ++i) key += "0123456789abcdef"[random_() % 16];
    return key;
  }
  std::string random_token(const std::string& who) { return who + ":" + std::to_string(random_()); }

  // A child process that claims `key` for `duration` with `token` (none: its own
  // RemoteStore::unique_token), writes to claimed_mark() whether it got it, and waits to be killed.
  // Returns once the mark is there, text and all (or after 30 s).
  pid_t fork_holder(const std::string& key, const std::optional<std::string>& token,
                    std::chrono::milliseconds duration) {
    const pid_t holder = ::fork();
    if (holder == 0) {
      LocalLeases leases(temp_.path());
      Result<ClaimOutcome> outcome =
          leases.claim(key, token.value_or(RemoteStore::unique_token()), duration);
      const bool claimed = outcome.ok() && *outcome == ClaimOutcome::kClaimed;
      // Written aside and renamed, so that the parent, which kills this process as soon as the
      // mark exists, never reads it before its text is there.
      const fs::path partial = temp_.path() / "claimed.partial";
      write_text(partial, claimed ? "yes" : "no");
      std::error_code renamed;
      fs::rename(partial, claimed_mark(), renamed);
      ::pause();
      ::_exit(0);
    }
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (holder > 0 && !fs::exists(claimed_mark()) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    return holder;
  }
  fs::path claimed_mark() const { return temp_.path() / "claimed"; }

  TempDir temp_;
};

TEST_F(LocalLeasesTest, OneHolderAtATimeUntilReleasedOrExpired) {
  SCOPED_TRACE(trace());
  LocalLeases leases(temp_.path());
  const std::string key = random_key();
  const std::string first = random_token("first");
  const std::string second = random_token("second");
  ASSERT_EQ(leases.claim(key, first, 60s).value(), ClaimOutcome::kClaimed);
  EXPECT_EQ(leases.claim(key, second, 60s).value(), ClaimOutcome::kHeldElsewhere);
  EXPECT_TRUE(leases.renew(key, first, 60s));
  EXPECT_FALSE(leases.renew(key, second, 60s));  // only the holder renews
  leases.release(key, second);                   // nor releases
  EXPECT_EQ(leases.claim(key, second, 60s).value(), ClaimOutcome::kHeldElsewhere);
  leases.release(key, first);
  EXPECT_FALSE(fs::exists(leases.path_of(key)));
  ASSERT_EQ(leases.claim(key, second, 200ms).value(), ClaimOutcome::kClaimed);
  std::this_thread::sleep_for(300ms);
  // Expired: the next claimant takes it over, and the late holder can no longer renew it.
  ASSERT_EQ(leases.claim(key, first, 60s).value(), ClaimOutcome::kClaimed);
  EXPECT_FALSE(leases.renew(key, second, 60s));
  EXPECT_NE(read_text(leases.path_of(key)).find("token " + first + "\n"), std::string::npos);
  // The cache's check of its entries leaves the lease directory alone.
  EXPECT_TRUE(ManifestCache(temp_.path()).verify().value().clean());
}

TEST_F(LocalLeasesTest, AHolderKilledWithSigkillHoldsItsLeaseOnlyUntilItExpires) {
  SCOPED_TRACE(trace());
  const std::string key = random_key();
  const pid_t doomed = fork_holder(key, random_token("doomed"), 1500ms);
  ASSERT_GT(doomed, 0);
  ::kill(doomed, SIGKILL);
  ::waitpid(doomed, nullptr, 0);
  ASSERT_EQ(read_text(claimed_mark()), "yes");

  LocalLeases leases(temp_.path());
  const std::string heir = random_token("heir");
  // Its lease outlives it (the lock it held died with it), until it expires.
  EXPECT_EQ(leases.claim(key, heir, 60s).value(), ClaimOutcome::kHeldElsewhere);
  const auto taken_by = std::chrono::steady_clock::now() + 30s;
  Result<ClaimOutcome> outcome = ClaimOutcome::kHeldElsewhere;
  while (outcome && *outcome == ClaimOutcome::kHeldElsewhere &&
         std::chrono::steady_clock::now() < taken_by) {
    std::this_thread::sleep_for(100ms);
    outcome = leases.claim(key, heir, 60s);
  }
  ASSERT_TRUE(outcome.ok()) << outcome.error().to_string();
  EXPECT_EQ(*outcome, ClaimOutcome::kClaimed);
}

// A holder's token names its host and pid (RemoteStore::unique_token): once that process of this
// host is gone, its lease is free at once, while it lives the lease holds.
TEST_F(LocalLeasesTest, ALeaseOfAProcessOfThisHostThatIsGoneIsFreeAtOnce) {
  SCOPED_TRACE(trace());
  const std::string key = random_key();
  const pid_t doomed = fork_holder(key, std::nullopt, 600s);
  ASSERT_GT(doomed, 0);
  LocalLeases leases(temp_.path());
  const std::string heir = RemoteStore::unique_token();
  EXPECT_EQ(leases.claim(key, heir, 60s).value(), ClaimOutcome::kHeldElsewhere);
  ::kill(doomed, SIGKILL);
  ::waitpid(doomed, nullptr, 0);
  ASSERT_EQ(read_text(claimed_mark()), "yes");
  EXPECT_EQ(leases.claim(key, heir, 60s).value(), ClaimOutcome::kClaimed);
}

TEST_F(LocalLeasesTest, ALeaseFileThatIsNoLeaseIsAnErrorNamingIt) {
  SCOPED_TRACE(trace());
  LocalLeases leases(temp_.path());
  fs::create_directories(LocalLeases::directory_of(temp_.path()));
  const std::string token = random_token("claimant");
  struct Damage {
    std::string what;
    std::string text;
    std::string expected;
  };
  const std::vector<Damage> damages = {
      {"garbage", "\x01\x02 not a lease", "not three lines"},
      {"other header", "some lease 9\ntoken x\nexpires 1\n", "first line"},
      {"no token", "wgsl-forge lease 1\ntoken \nexpires 1\n", "second line"},
      {"negative expiry", "wgsl-forge lease 1\ntoken x\nexpires -5\n", "third line"},
      {"expiry too large", "wgsl-forge lease 1\ntoken x\nexpires 99999999999999999999999\n",
       "third line"},
      {"empty", "", "not three lines"},
      {"too large", std::string(10000, 'x'), "larger than"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    const std::string key = random_key();
    write_text(leases.path_of(key), damage.text);
    Result<ClaimOutcome> outcome = leases.claim(key, token, 60s);
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.error().kind(), ErrorKind::kCorruption);
    EXPECT_NE(outcome.error().message().find(leases.path_of(key).string()), std::string::npos);
    EXPECT_NE(outcome.error().message().find(damage.expected), std::string::npos)
        << outcome.error().message();
    EXPECT_EQ(read_text(leases.path_of(key)), damage.text);  // left as it was
    EXPECT_FALSE(leases.renew(key, token, 60s));
  }
  // Not a regular file: a FIFO (never waited on), a directory, a link.
  const std::string fifo = random_key();
  ASSERT_EQ(::mkfifo(leases.path_of(fifo).c_str(), 0600), 0);
  const std::string directory = random_key();
  fs::create_directory(leases.path_of(directory));
  const std::string link = random_key();
  fs::create_symlink("/dev/zero", leases.path_of(link));
  for (const std::string& key : {fifo, directory, link}) {
    Result<ClaimOutcome> outcome = leases.claim(key, token, 60s);
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.error().kind(), ErrorKind::kCorruption);
    EXPECT_NE(outcome.error().message().find(leases.path_of(key).string()), std::string::npos);
  }
  // A key that is not one is refused before the disk is touched.
  EXPECT_FALSE(leases.claim("../escape", token, 60s).ok());
  EXPECT_FALSE(fs::exists(temp_.path() / "escape.lease"));
}

}  // namespace
}  // namespace wgsl_forge
