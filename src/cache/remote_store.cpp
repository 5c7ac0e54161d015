#include "wgsl_forge/remote_store.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <vector>

#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/model.hpp"

namespace wgsl_forge {

namespace {

constexpr std::string_view kScheme = "redis://";

// Sets the value only while the key holds what the caller saw: nothing (false) or ARGV[1].
// Returns 1 when it set it, else the value there (so the caller need not read it again).
constexpr const char* kCompareAndSetScript = R"lua(
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
if current == false then return 0 end
return current
)lua";

// A lease is renewed or released only by the token that holds it: after it expired and another
// node claimed it, a late renewal or release of the first node must not touch the new claim.
constexpr const char* kRenewScript = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
)lua";
constexpr const char* kReleaseScript = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
)lua";

timeval to_timeval(std::chrono::milliseconds duration) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(duration.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((duration.count() % 1000) * 1000);
  return tv;
}

Error malformed(std::string_view url, const std::string& why) {
  return Error(ErrorKind::kInvalidInput, "Remote URL (" + std::string(url) +
                                             ") is not redis://HOST[:PORT][/DB]: " + why + ".");
}

// A decimal number in [low, high], the whole of `text`.
std::optional<int> number_in(std::string_view text, int low, int high) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < low || value > high) return std::nullopt;
  return value;
}

std::string schema_namespace(ManifestKind kind) {
  const std::uint32_t version = kind == ManifestKind::kCertification
                                    ? CertificationManifest::kSchemaVersion
                                    : TuningManifest::kSchemaVersion;
  return "wgsl-forge:v" + std::to_string(version) + ":";
}

}  // namespace

Result<RemoteAddress> RemoteAddress::parse(std::string_view url) {
  if (!url.starts_with(kScheme)) return malformed(url, "it does not start with redis://");
  std::string_view rest = url.substr(kScheme.size());
  RemoteAddress address;
  if (std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::optional<int> database = number_in(rest.substr(slash + 1), 0, 1 << 20);
    if (!database) {
      return malformed(
          url, "the database (" + std::string(rest.substr(slash + 1)) + ") is not a number from 0");
    }
    address.database = *database;
    rest = rest.substr(0, slash);
  }
  if (std::size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    std::optional<int> port = number_in(rest.substr(colon + 1), 1, 65535);
    if (!port) {
      return malformed(url, "the port (" + std::string(rest.substr(colon + 1)) +
                                ") is not a number from 1 to 65535");
    }
    address.port = *port;
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return malformed(url, "it names no host");
  for (char c : rest) {
    const bool allowed = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    if (!allowed) {
      return malformed(url, "the host (" + std::string(rest) + ") has a character ('" +
                                std::string(1, c) + "') a host name or IPv4 address cannot have");
    }
  }
  address.host = std::string(rest);
  return address;
}

std::string RemoteAddress::to_string() const {
  return std::string(kScheme) + host + ":" + std::to_string(port) + "/" + std::to_string(database);
}

struct RemoteStore::Reply {
  int type = 0;
  long long integer = 0;
  std::string text;  // a string, status or error reply
};

RemoteStore::RemoteStore(RemoteAddress address, RemoteStoreOptions options)
    : address_(std::move(address)), options_(std::move(options)) {
  if (!options_.on_warning) {
    options_.on_warning = [](const std::string& message) {
      std::cerr << "wgsl-forge: warning: " << message << "\n";
    };
  }
}

RemoteStore::~RemoteStore() {
  if (context_ != nullptr) redisFree(context_);
}

std::shared_ptr<RemoteStore> RemoteStore::connect(RemoteAddress address,
                                                  RemoteStoreOptions options) {
  std::shared_ptr<RemoteStore> store(new RemoteStore(std::move(address), std::move(options)));
  const RemoteAddress& where = store->address_;
  redisContext* context = redisConnectWithTimeout(where.host.c_str(), where.port,
                                                  to_timeval(store->options_.connect_timeout));
  if (context == nullptr || context->err != 0) {
    const std::string why = context != nullptr ? context->errstr : "out of memory";
    if (context != nullptr) redisFree(context);
    store->go_offline("cannot connect (" + why + ")");
    return store;
  }
  redisSetTimeout(context, to_timeval(store->options_.command_timeout));
  store->context_ = context;
  // PING proves that a Redis answers within the command timeout (a port that accepts and then
  // says nothing is as unusable as a closed one); SELECT picks the database.
  if (std::optional<Reply> pong = store->command({"PING"}); pong && where.database != 0) {
    store->command({"SELECT", std::to_string(where.database)});
  }
  return store;
}

Result<std::shared_ptr<RemoteStore>> RemoteStore::from_environment(RemoteStoreOptions options) {
  const char* url = std::getenv("WGSL_FORGE_REMOTE");
  if (url == nullptr || *url == '\0') return std::shared_ptr<RemoteStore>();
  Result<RemoteAddress> address = RemoteAddress::parse(url);
  if (!address) return std::move(address).error().with_context("reading WGSL_FORGE_REMOTE");
  return connect(std::move(*address), std::move(options));
}

bool RemoteStore::online() const {
  std::lock_guard lock(mutex_);
  return context_ != nullptr;
}

void RemoteStore::go_offline(const std::string& why) {
  if (context_ != nullptr) {
    redisFree(context_);
    context_ = nullptr;
  }
  options_.on_warning("the remote store " + address_.to_string() + " " + why +
                      "; this process goes on with its local cache only");
}

std::optional<RemoteStore::Reply> RemoteStore::command(
    std::initializer_list<std::string_view> arguments) {
  std::lock_guard lock(mutex_);
  if (context_ == nullptr) return std::nullopt;
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  for (std::string_view argument : arguments) {
    pointers.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  auto* raw = static_cast<redisReply*>(redisCommandArgv(context_, static_cast<int>(pointers.size()),
                                                        pointers.data(), lengths.data()));
  if (raw == nullptr) {
    go_offline(std::string("does not answer ") + std::string(*arguments.begin()) + " (" +
               context_->errstr + ")");
    return std::nullopt;
  }
  Reply reply;
  reply.type = raw->type;
  reply.integer = raw->integer;
  if (raw->str != nullptr) reply.text.assign(raw->str, raw->len);
  freeReplyObject(raw);
  if (reply.type == REDIS_REPLY_ERROR) {
    go_offline(std::string("refuses ") + std::string(*arguments.begin()) + " (" + reply.text + ")");
    return std::nullopt;
  }
  return reply;
}

std::string RemoteStore::entry_name(ManifestKind kind, std::string_view key) {
  return schema_namespace(kind) + manifest_kind_name(kind) + ":" + std::string(key);
}

std::string RemoteStore::lease_name(std::string_view key) {
  return schema_namespace(ManifestKind::kTuning) + "lease:" + std::string(key);
}

std::optional<std::string> RemoteStore::fetch(ManifestKind kind, std::string_view key) {
  std::optional<Reply> reply = command({"GET", entry_name(kind, key)});
  if (!reply || reply->type != REDIS_REPLY_STRING) return std::nullopt;
  return std::move(reply->text);
}

RemoteStore::PublishResult RemoteStore::publish(ManifestKind kind, std::string_view key,
                                                const std::string& bytes) {
  const std::string name = entry_name(kind, key);
  std::optional<Reply> set = command({"SET", name, bytes, "NX"});
  if (!set) return {};
  if (set->type == REDIS_REPLY_STATUS) return {Outcome::kStored, ""};
  std::optional<Reply> existing = command({"GET", name});
  if (!existing) return {};
  // Deleted in between (a flush): nothing to collide with; the next store publishes again.
  if (existing->type != REDIS_REPLY_STRING) return {Outcome::kDifferent, ""};
  if (existing->text == bytes) return {Outcome::kSame, ""};
  return {Outcome::kDifferent, std::move(existing->text)};
}

RemoteStore::PublishResult RemoteStore::replace(ManifestKind kind, std::string_view key,
                                                const std::string& bytes,
                                                const std::string& expected) {
  std::optional<Reply> reply =
      command({"EVAL", kCompareAndSetScript, "1", entry_name(kind, key), expected, bytes});
  if (!reply) return {};
  if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) return {Outcome::kStored, ""};
  if (reply->type == REDIS_REPLY_STRING && reply->text == bytes) return {Outcome::kSame, ""};
  if (reply->type == REDIS_REPLY_STRING) return {Outcome::kDifferent, std::move(reply->text)};
  return publish(kind, key, bytes);  // it was deleted meanwhile: a plain store
}

bool RemoteStore::claim(std::string_view key, const std::string& token,
                        std::chrono::milliseconds duration) {
  std::optional<Reply> reply =
      command({"SET", lease_name(key), token, "NX", "PX", std::to_string(duration.count())});
  return reply && reply->type == REDIS_REPLY_STATUS;
}

bool RemoteStore::renew(std::string_view key, const std::string& token,
                        std::chrono::milliseconds duration) {
  std::optional<Reply> reply = command(
      {"EVAL", kRenewScript, "1", lease_name(key), token, std::to_string(duration.count())});
  return reply && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
}

void RemoteStore::release(std::string_view key, const std::string& token) {
  command({"EVAL", kReleaseScript, "1", lease_name(key), token});
}

std::string RemoteStore::unique_token() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device entropy;
  char random_hex[17];
  std::snprintf(random_hex, sizeof random_hex, "%08x%08x", entropy(), entropy());
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + random_hex;
}

}  // namespace wgsl_forge
