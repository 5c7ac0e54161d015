#pragma once
// RemoteStore: a store on Redis shared by a fleet, behind each node's local ManifestCache
// (cache.hpp, ManifestCache::set_remote), and the leases by which nodes split auto-tune-all.
//
// Address: `redis://HOST[:PORT][/DB]` (PORT 6379, DB 0 when left out), from the `--remote` flag
// or $WGSL_FORGE_REMOTE; anything else is a kInvalidInput error naming the URL and the part.
//
// Key layout, namespaced by each kind's manifest schema version (model.hpp kSchemaVersion), so
// that builds of different schema versions share a server without reading each other's entries:
//   wgsl-forge:v<tuning version>:tuning:<64 hex key>               a tuning manifest's bytes
//   wgsl-forge:v<certification version>:certification:<64 hex key> a certification's bytes
//   wgsl-forge:v<tuning version>:lease:<64 hex key>                who is tuning that entry
// e.g. `wgsl-forge:v3:tuning:<key>`. The value of an entry is exactly the bytes of the local
// cache's file (canonical JSON, manifest_json.hpp); the keys are the local cache's keys, which
// include the topology hash, so nodes of different topologies never share an entry or a lease.
// Measurement records (a search's journal) stay local.
//
// Contract, as the local cache's (cache.hpp):
//   - an entry is published with SET NX: it never replaces. A value already there with the same
//     bytes is success; with other bytes it is a collision (kDifferent), except that one that is
//     damaged (ManifestCache's own parse and checks refuse it) is replaced, as the local cache
//     replaces a damaged entry, and an explicit re-tune replaces the value it replaced locally;
//     both replacements are compare-and-set scripts (EVAL), so they never replace a value they
//     did not see;
//   - whatever a node reads from the server is checked by ManifestCache exactly as a file of its
//     own root (content hash, invariants, key and topology) before it is used or stored locally.
//
// Failure: connecting waits at most `connect_timeout` and every command at most
// `command_timeout` (defaults 1 s each; so a server that is down costs a refused connection, one
// that accepts and never answers at most 2 s: the connection, then the PING that proves it). The
// first failure (refused, timed out, an error reply) is reported once through `on_warning` and
// the store goes offline for the rest of the process: every later call answers at once as
// "offline", so a node whose remote is down or slow works with its local cache only and never
// fails to start.
//
// Leases: `wgsl-forge:v3:lease:<key>` holds the claiming node's unique token, set with
// SET NX PX (it expires by itself when its node dies), renewed with PEXPIRE and released with
// DEL, both through a script that acts only when the key still holds the caller's token.
//
// Thread-safe: calls are serialised on one connection (a lease's renewal runs on its own thread).

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "wgsl_forge/error.hpp"

struct redisContext;

namespace wgsl_forge {

enum class ManifestKind;

struct RemoteAddress {
  std::string host;
  int port = 6379;
  int database = 0;

  // Parses `redis://HOST[:PORT][/DB]`.
  static Result<RemoteAddress> parse(std::string_view url);
  std::string to_string() const;  // redis://host:port/db
};

struct RemoteStoreOptions {
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{1000};
  // Told once, when the store goes offline: why, and that the node goes on with its local cache.
  // Default: a line "wgsl-forge: warning: ..." on stderr.
  std::function<void(const std::string&)> on_warning;
};

class RemoteStore {
 public:
  // Connects; never fails: an unreachable server gives an offline store (and the warning).
  static std::shared_ptr<RemoteStore> connect(RemoteAddress address,
                                              RemoteStoreOptions options = {});
  // The address in $WGSL_FORGE_REMOTE, connected; nullptr when the variable is unset or empty; a
  // malformed URL is an error.
  static Result<std::shared_ptr<RemoteStore>> from_environment(RemoteStoreOptions options = {});
  ~RemoteStore();
  RemoteStore(const RemoteStore&) = delete;
  RemoteStore& operator=(const RemoteStore&) = delete;

  const RemoteAddress& address() const { return address_; }
  bool online() const;

  // The server key of an entry or a lease (the layout above).
  static std::string entry_name(ManifestKind kind, std::string_view key);
  static std::string lease_name(std::string_view key);

  // An entry's bytes; nullopt when the server has none or the store is offline.
  std::optional<std::string> fetch(ManifestKind kind, std::string_view key);

  enum class Outcome {
    kStored,     // the server now holds the offered bytes (new, or replacing what was expected)
    kSame,       // it held them already
    kDifferent,  // it holds other bytes (in `existing`), left alone
    kOffline,
  };
  struct PublishResult {
    Outcome outcome = Outcome::kOffline;
    std::string existing;  // with kDifferent
  };
  // SET NX of `bytes`; when another value is there, it is returned (kDifferent).
  PublishResult publish(ManifestKind kind, std::string_view key, const std::string& bytes);
  // Sets `bytes` only if the entry still holds `expected` (compare-and-set); kDifferent with
  // what it holds otherwise.
  PublishResult replace(ManifestKind kind, std::string_view key, const std::string& bytes,
                        const std::string& expected);

  // Leases. claim: true when this token now holds the lease (SET NX PX); false when another
  // token holds it or the store is offline (check online()). renew: true while the key still
  // holds this token (its expiry pushed to `duration` from now). release: deletes it only if it
  // still holds this token.
  bool claim(std::string_view key, const std::string& token, std::chrono::milliseconds duration);
  bool renew(std::string_view key, const std::string& token, std::chrono::milliseconds duration);
  void release(std::string_view key, const std::string& token);
  // A token no other process or lease picks: host name, process id and random bits.
  static std::string unique_token();

 private:
  RemoteStore(RemoteAddress address, RemoteStoreOptions options);
  struct Reply;
  // Runs one command (argv form) under the lock; nullopt after a failure, which takes the
  // store offline.
  std::optional<Reply> command(std::initializer_list<std::string_view> arguments);
  void go_offline(const std::string& why);

  RemoteAddress address_;
  RemoteStoreOptions options_;
  mutable std::mutex mutex_;
  redisContext* context_ = nullptr;  // null when offline
};

}  // namespace wgsl_forge
