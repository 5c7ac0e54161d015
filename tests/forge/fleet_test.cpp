// A fleet: processes of the real `wgsl-forge auto-tune-all` on the real adapter (lavapipe in CI)
// sharing one real Redis that the test starts on a free loopback port. A few small kernels at
// one CPU size bucket with a budget of one candidate keep it short.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gpu/gpu_test_support.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "wgsl_forge/forge.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;
using testing::finish_child;
using testing::read_text;
using testing::RedisServer;
using testing::start_shell;
using testing::TempDir;

class FleetTest : public testing::SeededTest {
 protected:
  // One node: `wgsl-forge auto-tune-all` with its own cache; stdout (JSON) and stderr to files.
  pid_t start_node(const std::string& name, const std::string& remote, const std::string& kernels,
                   const std::string& extra = "") {
    const fs::path root = temp_.path() / name;
    const std::string command = "exec " + std::string(WGSL_FORGE_CLI_PATH) + " --cache " +
                                root.string() + " --remote " + remote + " auto-tune-all " +
                                kernels + " --sizes 2^16 --budget 1 --json --seed " +
                                std::to_string(seed_) + " " + extra + " > " +
                                (root.string() + ".json") + " 2> " + (root.string() + ".err");
    return start_shell(command);
  }
  // kernel -> status of the node's rows.
  std::map<std::string, std::string> statuses(const std::string& name) const {
    std::map<std::string, std::string> found;
    const nlohmann::json output = nlohmann::json::parse(read_text(temp_.path() / (name + ".json")));
    for (const nlohmann::json& row : output.at("kernels")) {
      found[row.at("kernel").get<std::string>()] = row.at("status").get<std::string>();
    }
    return found;
  }
  nlohmann::json row_of(const std::string& name, const std::string& kernel) const {
    const nlohmann::json output = nlohmann::json::parse(read_text(temp_.path() / (name + ".json")));
    for (const nlohmann::json& row : output.at("kernels")) {
      if (row.at("kernel") == kernel) return row;
    }
    return {};
  }
  std::string topology(const std::string& name) const {
    return nlohmann::json::parse(read_text(temp_.path() / (name + ".json")))
        .at("topology_hash")
        .get<std::string>();
  }
  std::string errors(const std::string& name) const {
    return read_text(temp_.path() / (name + ".err"));
  }
  // Waits (at most 120 s) until a node holds a lease; false if none appeared.
  static bool lease_appears(const RedisServer& server) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      if (!server.keys("wgsl-forge:v3:lease:*").empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  static std::size_t count(const std::string& text, const std::string& what) {
    std::size_t found = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
      ++found;
    return found;
  }

  TempDir temp_;
};

TEST_F(FleetTest, TwoNodesSplitTheWorkAndAThirdFindsEverythingCached) {
  SCOPED_TRACE(trace());
  RedisServer server;
  const std::string kernels = "affine_f32 reduce_sum_u32";
  pid_t first = start_node("first", server.url(), kernels);
  pid_t second = start_node("second", server.url(), kernels);
  ASSERT_EQ(finish_child(first), 0) << errors("first");
  ASSERT_EQ(finish_child(second), 0) << errors("second");

  // Each (kernel, bucket) tuned exactly once in the fleet; the other node used that entry.
  const std::map<std::string, std::string> a = statuses("first");
  const std::map<std::string, std::string> b = statuses("second");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (const auto& [kernel, status] : a) {
    SCOPED_TRACE(kernel + ": first " + status + ", second " + b.at(kernel));
    EXPECT_EQ((status == "tuned") + (b.at(kernel) == "tuned"), 1);
    for (const std::string& either : {status, b.at(kernel)}) {
      EXPECT_TRUE(either == "tuned" || either == "cached" || either == "tuned by another process");
    }
    EXPECT_EQ(row_of("first", kernel).at("cache_key"), row_of("second", kernel).at("cache_key"));
  }
  EXPECT_EQ(server.keys("wgsl-forge:v3:tuning:*").size(), 2u);
  EXPECT_TRUE(server.keys("wgsl-forge:v3:lease:*").empty());  // every lease released

  // A third node with an empty cache tunes nothing: everything comes from the remote, checked,
  // and its own cache then holds it.
  ASSERT_EQ(finish_child(start_node("third", server.url(), kernels)), 0) << errors("third");
  for (const auto& [kernel, status] : statuses("third")) EXPECT_EQ(status, "cached") << kernel;
  EXPECT_TRUE(ManifestCache(temp_.path() / "third").verify().value().clean());
  // A database's start-up on an empty cache with the remote behind it runs the tuned schedule.
  ManifestCache startup(temp_.path() / "startup");
  startup.set_remote(RemoteStore::connect(RemoteAddress::parse(server.url()).value()));
  forge::KernelLibrary library(testing::shared_device(), startup);
  Result<forge::KernelLibrary::ReadyKernel> affine =
      library.load("affine_f32", kernels::Problem{.elements = 1u << 16});
  ASSERT_TRUE(affine.ok()) << affine.error().to_string();
  EXPECT_TRUE(affine->tuned) << affine->origin;
}

TEST_F(FleetTest, ANodeKilledWhileHoldingALeaseIsTakenOverWhenTheLeaseEnds) {
  SCOPED_TRACE(trace());
  RedisServer server;
  pid_t doomed = start_node("doomed", server.url(), "affine_f32", "--lease 3");
  ASSERT_TRUE(lease_appears(server)) << errors("doomed");
  ::kill(doomed, SIGKILL);
  ::waitpid(doomed, nullptr, 0);
  const std::vector<std::string> leases = server.keys("wgsl-forge:v3:lease:*");
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_GT(server.pttl(leases.front()), 0);  // it outlives its node, until it expires

  ASSERT_EQ(finish_child(start_node("heir", server.url(), "affine_f32", "--lease 3")), 0)
      << errors("heir");
  const nlohmann::json row = row_of("heir", "affine_f32");
  EXPECT_EQ(row.at("status"), "tuned");
  EXPECT_NE(row.value("decision", "").find("after another process's lease ended"),
            std::string::npos)
      << row.dump();
  EXPECT_EQ(server.keys("wgsl-forge:v3:tuning:*").size(), 1u);
  EXPECT_TRUE(server.keys("wgsl-forge:v3:lease:*").empty());
}

TEST_F(FleetTest, ARemoteStoppedMidRunLeavesEveryNodeWorkingLocally) {
  SCOPED_TRACE(trace());
  RedisServer server;
  // One entry: the first node to claim it tunes it, the other waits for it, until the remote
  // dies; then each finishes on its own.
  const std::string kernels = "affine_f32";
  pid_t first = start_node("first", server.url(), kernels);
  pid_t second = start_node("second", server.url(), kernels);
  ASSERT_TRUE(lease_appears(server));
  server.kill();
  ASSERT_EQ(finish_child(first), 0) << errors("first");
  ASSERT_EQ(finish_child(second), 0) << errors("second");
  for (const std::string node : {"first", "second"}) {
    SCOPED_TRACE(node + ": " + errors(node));
    // One warning each, then local work: every entry is in the node's own cache, whole.
    EXPECT_EQ(count(errors(node), "goes on with its local cache only"), 1u);
    for (const auto& [kernel, status] : statuses(node)) {
      EXPECT_TRUE(status == "tuned" || status == "cached" || status == "tuned by another process")
          << kernel << ": " << status;
    }
    ManifestCache cache(temp_.path() / node);
    EXPECT_TRUE(cache.verify().value().clean());
    EXPECT_TRUE(cache.load_tuning_for_topology(topology(node), "affine_f32", "2^16").value());
  }
}

}  // namespace
}  // namespace wgsl_forge
