// The remote store against a real Redis (started by each test on a free loopback port): what
// one node publishes another finds, checked by the cache's own decoding before it is used or
// stored; a damaged or different remote value is refused; a remote that is unreachable, silent
// or killed mid-use costs one warning and the node works with its local cache; leases are
// touched only by their own token.

#include "wgsl_forge/remote_store.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "support/redis_server.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"
#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::RedisServer;
using testing::TempDir;

TEST(RemoteAddressTest, ParsesTheUrlAndNamesWhatIsWrong) {
  RemoteAddress full = RemoteAddress::parse("redis://cache-1.example:7000/3").value();
  EXPECT_EQ(full.host, "cache-1.example");
  EXPECT_EQ(full.port, 7000);
  EXPECT_EQ(full.database, 3);
  RemoteAddress plain = RemoteAddress::parse("redis://10.0.0.7").value();
  EXPECT_EQ(plain.to_string(), "redis://10.0.0.7:6379/0");
  const std::pair<const char*, const char*> malformed[] = {
      {"http://host:6379", "does not start with redis://"},
      {"redis://", "names no host"},
      {"redis://:6379", "names no host"},
      {"redis://host:0", "the port (0)"},
      {"redis://host:65536", "the port (65536)"},
      {"redis://host:6x", "the port (6x)"},
      {"redis://host:6379/", "the database ()"},
      {"redis://host:6379/one", "the database (one)"},
      {"redis://user@host", "character ('@')"},
  };
  for (const auto& [url, why] : malformed) {
    Result<RemoteAddress> parsed = RemoteAddress::parse(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.error().kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(parsed.error().message().find(std::string("Remote URL (") + url + ")"),
              std::string::npos)
        << parsed.error().message();
    EXPECT_NE(parsed.error().message().find(why), std::string::npos) << parsed.error().message();
  }
}

class RemoteStoreTest : public testing::SeededTest {
 protected:
  // A store whose warnings are counted and kept.
  std::shared_ptr<RemoteStore> connect(
      const std::string& url, std::chrono::milliseconds timeout = std::chrono::seconds(1)) {
    RemoteStoreOptions options;
    options.connect_timeout = timeout;
    options.command_timeout = timeout;
    options.on_warning = [this](const std::string& message) {
      ++warnings_;
      last_warning_ = message;
    };
    return RemoteStore::connect(RemoteAddress::parse(url).value(), options);
  }
  ManifestCache node(const std::string& name, std::shared_ptr<RemoteStore> remote) {
    ManifestCache cache(temp_.path() / name);
    cache.set_remote(std::move(remote));
    return cache;
  }

  TempDir temp_;
  std::atomic<int> warnings_{0};
  std::string last_warning_;
};

TEST_F(RemoteStoreTest, AnEntryOneNodeStoresIsFoundCheckedAndKeptLocallyByAnother) {
  SCOPED_TRACE(trace());
  RedisServer server;
  ManifestCache first = node("first", connect(server.url()));
  ManifestCache second = node("second", connect(server.url()));
  TuningManifest tuning = testing::random_tuning_manifest(random_);
  CertificationManifest certification = testing::random_certification_manifest(random_);
  while (!certification.cache_key) certification = testing::random_certification_manifest(random_);
  const fs::path stored = first.store_tuning(tuning).value();
  first.store_certification(certification).value();

  // The key layout of remote_store.hpp, holding the local file's bytes.
  EXPECT_EQ(server.get("wgsl-forge:v3:tuning:" + tuning.cache_key), read_text(stored));
  EXPECT_TRUE(server.get("wgsl-forge:v2:certification:" + *certification.cache_key).has_value());

  EXPECT_EQ(second.load_tuning(tuning.cache_key).value(), std::optional(tuning));
  EXPECT_EQ(second.load_certification(*certification.cache_key).value(),
            std::optional(certification));
  EXPECT_EQ(read_text(second.path_for(ManifestKind::kTuning, tuning.cache_key)), read_text(stored));
  // The same bytes again, from either node, are success (SET NX found them).
  EXPECT_TRUE(second.store_tuning(tuning).ok());
  EXPECT_EQ(warnings_, 0) << last_warning_;
}

TEST_F(RemoteStoreTest, ARemoteEntryWithOneDamagedByteIsRefusedAndNotStoredLocally) {
  SCOPED_TRACE(trace());
  RedisServer server;
  ManifestCache cache = node("node", connect(server.url()));
  TuningManifest tuning = testing::random_tuning_manifest(random_);
  std::string bytes = serialize_manifest(tuning).value();
  const std::size_t at = random_() % bytes.size();
  bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
  SCOPED_TRACE("byte " + std::to_string(at) + " of " + std::to_string(bytes.size()));
  server.set(RemoteStore::entry_name(ManifestKind::kTuning, tuning.cache_key), bytes);

  Result<std::optional<TuningManifest>> loaded = cache.load_tuning(tuning.cache_key);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().kind(), ErrorKind::kCorruption);
  EXPECT_NE(loaded.error().message().find("Remote entry wgsl-forge:v3:tuning:" + tuning.cache_key +
                                          " on " + server.url() + "/0 is refused"),
            std::string::npos)
      << loaded.error().message();
  EXPECT_FALSE(fs::exists(cache.path_for(ManifestKind::kTuning, tuning.cache_key)));
  // A plain store does not overwrite it (immutable: the damage is reported, as a damaged local
  // file is); the replacing store that a tune uses does, by compare-and-set of what it saw.
  Result<fs::path> stored = cache.store_tuning(tuning);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().kind(), ErrorKind::kCorruption);
  EXPECT_EQ(server.get(RemoteStore::entry_name(ManifestKind::kTuning, tuning.cache_key)), bytes);
}

TEST_F(RemoteStoreTest, DifferentBytesUnderAKeyTheFleetHasAreACollision) {
  SCOPED_TRACE(trace());
  RedisServer server;
  ManifestCache first = node("first", connect(server.url()));
  ManifestCache second = node("second", connect(server.url()));
  TuningManifest tuning = testing::random_tuning_manifest(random_);
  TuningManifest other = tuning;
  other.context.problem_size += 1 + random_() % 1000;
  const std::string name = RemoteStore::entry_name(ManifestKind::kTuning, tuning.cache_key);
  first.store_tuning(tuning).value();

  Result<fs::path> collided = second.store_tuning(other);
  ASSERT_FALSE(collided.ok());
  EXPECT_EQ(collided.error().kind(), ErrorKind::kCollision);
  EXPECT_NE(collided.error().message().find("Remote entry " + name), std::string::npos)
      << collided.error().message();
  EXPECT_EQ(server.get(name), serialize_manifest(tuning).value());
  EXPECT_FALSE(fs::exists(second.path_for(ManifestKind::kTuning, tuning.cache_key)));
  // The node that lost the race now reads the fleet's entry.
  EXPECT_EQ(second.load_tuning(tuning.cache_key).value(), std::optional(tuning));
}

TEST_F(RemoteStoreTest, AnUnreachableRemoteCostsOneWarningAndTheNodeWorksLocally) {
  SCOPED_TRACE(trace());
  const int port = testing::free_loopback_port();  // nothing listens there
  std::shared_ptr<RemoteStore> remote = connect("redis://127.0.0.1:" + std::to_string(port));
  EXPECT_FALSE(remote->online());
  EXPECT_EQ(warnings_, 1);
  EXPECT_NE(last_warning_.find("cannot connect"), std::string::npos) << last_warning_;
  EXPECT_NE(last_warning_.find("goes on with its local cache only"), std::string::npos);
  ManifestCache cache = node("node", remote);
  TuningManifest tuning = testing::random_tuning_manifest(random_);
  EXPECT_EQ(cache.load_tuning(tuning.cache_key).value(), std::nullopt);
  cache.store_tuning(tuning).value();
  EXPECT_EQ(cache.load_tuning(tuning.cache_key).value(), std::optional(tuning));
  EXPECT_FALSE(remote->claim(tuning.cache_key, RemoteStore::unique_token(),
                             std::chrono::milliseconds(1000)));
  EXPECT_EQ(warnings_, 1);
}

TEST_F(RemoteStoreTest, ARemoteThatNeverAnswersTimesOutAndGoesOffline) {
  // A socket that accepts connections (the kernel's backlog) and never says a word.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::shared_ptr<RemoteStore> remote =
      connect("redis://127.0.0.1:" + std::to_string(ntohs(address.sin_port)),
              std::chrono::milliseconds(200));
  EXPECT_FALSE(remote->online());
  EXPECT_EQ(warnings_, 1);
  EXPECT_NE(last_warning_.find("does not answer PING"), std::string::npos) << last_warning_;
  ::close(listener);
}

TEST_F(RemoteStoreTest, ARemoteKilledMidUseLeavesTheNodeWorkingLocally) {
  SCOPED_TRACE(trace());
  RedisServer server;
  std::shared_ptr<RemoteStore> remote = connect(server.url());
  ManifestCache cache = node("node", remote);
  TuningManifest before = testing::random_tuning_manifest(random_);
  cache.store_tuning(before).value();
  ASSERT_TRUE(server.get(RemoteStore::entry_name(ManifestKind::kTuning, before.cache_key)));
  server.kill();
  TuningManifest after = testing::random_tuning_manifest(random_);
  EXPECT_EQ(cache.load_tuning(after.cache_key).value(), std::nullopt);
  EXPECT_FALSE(remote->online());
  cache.store_tuning(after).value();
  EXPECT_EQ(cache.load_tuning(after.cache_key).value(), std::optional(after));
  EXPECT_EQ(cache.load_tuning(before.cache_key).value(), std::optional(before));
  EXPECT_EQ(warnings_, 1) << last_warning_;
}

TEST_F(RemoteStoreTest, ALeaseIsRenewedAndReleasedOnlyByItsOwnToken) {
  SCOPED_TRACE(trace());
  RedisServer server;
  std::shared_ptr<RemoteStore> remote = connect(server.url());
  const std::string key = testing::random_tuning_manifest(random_).cache_key;
  const std::string mine = RemoteStore::unique_token();
  const std::string theirs = RemoteStore::unique_token();
  ASSERT_NE(mine, theirs);
  const std::chrono::milliseconds duration(5000 + random_() % 5000);
  const std::string lease = RemoteStore::lease_name(key);
  EXPECT_EQ(lease, "wgsl-forge:v3:lease:" + key);

  ASSERT_TRUE(remote->claim(key, mine, duration));
  EXPECT_FALSE(remote->claim(key, theirs, duration));
  EXPECT_GT(server.pttl(lease), 0);
  EXPECT_LE(server.pttl(lease), duration.count());
  EXPECT_FALSE(remote->renew(key, theirs, duration));
  remote->release(key, theirs);
  EXPECT_EQ(server.get(lease), mine);
  EXPECT_TRUE(remote->renew(key, mine, std::chrono::milliseconds(60000)));
  EXPECT_GT(server.pttl(lease), duration.count());
  remote->release(key, mine);
  EXPECT_EQ(server.get(lease), std::nullopt);
  EXPECT_TRUE(remote->claim(key, theirs, duration));
  EXPECT_EQ(warnings_, 0) << last_warning_;
}

}  // namespace
}  // namespace wgsl_forge
