#include "support/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

namespace wgsl_forge::testing {

namespace {

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// One command on a new connection; null when the server does not answer.
Reply run(int port, const std::vector<std::string>& arguments) {
  const timeval timeout{2, 0};
  std::unique_ptr<redisContext, ContextDeleter> context(
      redisConnectWithTimeout("127.0.0.1", port, timeout));
  if (!context || context->err != 0) return nullptr;
  redisSetTimeout(context.get(), timeout);
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  for (const std::string& argument : arguments) {
    pointers.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  return Reply(static_cast<redisReply*>(redisCommandArgv(
      context.get(), static_cast<int>(pointers.size()), pointers.data(), lengths.data())));
}

}  // namespace

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("cannot find a free loopback port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

RedisServer::RedisServer() : port_(free_loopback_port()) {
  const std::string port = std::to_string(port_);
  pid_ = ::fork();
  if (pid_ == 0) {
    // Its start-up banner and warnings (memory overcommit) are not the test's output.
    const int null_device = ::open("/dev/null", O_WRONLY);
    ::dup2(null_device, STDOUT_FILENO);
    ::dup2(null_device, STDERR_FILENO);
    ::execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--loglevel", "warning", nullptr);
    ::_exit(127);
  }
  if (pid_ < 0) throw std::runtime_error("cannot fork redis-server");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    Reply pong = run(port_, {"PING"});
    if (pong && pong->type == REDIS_REPLY_STATUS) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill();
  throw std::runtime_error("redis-server on port " + port + " does not answer PING within 10 s");
}

RedisServer::~RedisServer() { kill(); }

void RedisServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::optional<std::string> RedisServer::get(const std::string& key) const {
  Reply reply = run(port_, {"GET", key});
  if (!reply || reply->type != REDIS_REPLY_STRING) return std::nullopt;
  return std::string(reply->str, reply->len);
}

void RedisServer::set(const std::string& key, const std::string& value) const {
  Reply reply = run(port_, {"SET", key, value});
  if (!reply || reply->type != REDIS_REPLY_STATUS) throw std::runtime_error("SET failed");
}

std::vector<std::string> RedisServer::keys(const std::string& pattern) const {
  std::vector<std::string> found;
  Reply reply = run(port_, {"KEYS", pattern});
  if (!reply || reply->type != REDIS_REPLY_ARRAY) return found;
  for (std::size_t i = 0; i < reply->elements; ++i)
    found.emplace_back(reply->element[i]->str, reply->element[i]->len);
  return found;
}

long long RedisServer::pttl(const std::string& key) const {
  Reply reply = run(port_, {"PTTL", key});
  return reply && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -2;
}

}  // namespace wgsl_forge::testing
