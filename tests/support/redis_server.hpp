#pragma once
// A real Redis server for a test: Debian's redis-server, started on a free loopback port with no
// persistence (--save '' --appendonly no), killed when the object goes. Plus a plain hiredis
// client for what a test inspects or damages behind the store's back.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace wgsl_forge::testing {

class RedisServer {
 public:
  // Throws std::runtime_error when the server does not answer PING within 10 s.
  RedisServer();
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // SIGKILL and reap (a server that dies, as far as its clients can tell).
  void kill();

  // Direct commands (a new connection each).
  std::optional<std::string> get(const std::string& key) const;
  void set(const std::string& key, const std::string& value) const;
  std::vector<std::string> keys(const std::string& pattern) const;
  // Milliseconds the key has left (-2: no such key, -1: no expiry).
  long long pttl(const std::string& key) const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// A loopback port nothing listens on now.
int free_loopback_port();

}  // namespace wgsl_forge::testing
