// auto-tune-all --adapters: the real `wgsl-forge` starting its real worker processes on the
// real adapter (lavapipe in CI: two workers on the one adapter), splitting the work by the
// lease files of their shared cache directory. A few small kernels at one CPU size bucket with a
// budget of one candidate keep it short.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "gpu/gpu_test_support.hpp"
#include "support/child_process.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "wgsl_forge/forge.hpp"
#include "wgsl_forge/leases.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;
using testing::finish_child;
using testing::read_text;
using testing::start_shell;
using testing::TempDir;
using testing::write_text;

class AdapterWorkersTest : public testing::SeededTest {
 protected:
  fs::path cache() const { return temp_.path() / "cache"; }
  // `wgsl-forge --cache CACHE ARGUMENTS`, stdout and stderr to files named after `name`.
  pid_t start(const std::string& name, const std::string& arguments) {
    return start_shell("exec " + std::string(WGSL_FORGE_CLI_PATH) + " --cache " + cache().string() +
                       " " + arguments + " > " + (temp_.path() / (name + ".out")).string() +
                       " 2> " + (temp_.path() / (name + ".err")).string());
  }
  int run(const std::string& name, const std::string& arguments) {
    return finish_child(start(name, arguments));
  }
  std::string output(const std::string& name) const {
    return read_text(temp_.path() / (name + ".out"));
  }
  std::string errors(const std::string& name) const {
    return read_text(temp_.path() / (name + ".err"));
  }
  std::string small_tune(const std::string& kernels) const {
    return "auto-tune-all " + kernels + " --sizes 2^16 --budget 1 --seed " + std::to_string(seed_);
  }
  // The lease files in the cache directory.
  std::vector<fs::path> leases() const {
    std::vector<fs::path> found;
    std::error_code error;
    for (fs::directory_iterator it(LocalLeases::directory_of(cache()), error), end;
         !error && it != end; it.increment(error)) {
      if (it->path().extension() == ".lease") found.push_back(it->path());
    }
    return found;
  }

  TempDir temp_;
};

TEST_F(AdapterWorkersTest, TwoWorkersOnOneAdapterTuneEachEntryOnce) {
  SCOPED_TRACE(trace());
  const std::string kernels = "affine_f32 gather_f32";
  ASSERT_EQ(run("split", small_tune(kernels) + " --json --adapters 0,0"), 0) << errors("split");
  const nlohmann::json result = nlohmann::json::parse(output("split"));
  ASSERT_EQ(result.at("workers").size(), 2u);
  EXPECT_EQ(result.at("workers")[0].at("topology_hash"),
            result.at("workers")[1].at("topology_hash"));
  std::map<std::string, std::vector<nlohmann::json>> rows;  // kernel -> its row of each worker
  for (const nlohmann::json& row : result.at("kernels")) {
    rows[row.at("kernel").get<std::string>()].push_back(row);
  }
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& [kernel, both] : rows) {
    SCOPED_TRACE(kernel + ": " + nlohmann::json(both).dump());
    ASSERT_EQ(both.size(), 2u);
    EXPECT_NE(both[0].at("worker"), both[1].at("worker"));
    // Tuned by exactly one worker; the other used its entry without searching (a search that
    // lost the race to store would say "while this one searched").
    EXPECT_EQ((both[0].at("status") == "tuned") + (both[1].at("status") == "tuned"), 1);
    for (const nlohmann::json& row : both) {
      if (row.at("status") == "tuned") continue;
      EXPECT_TRUE(row.at("status") == "cached" || row.at("status") == "tuned by another process");
      EXPECT_EQ(row.value("decision", "").find("while this one searched"), std::string::npos);
      EXPECT_FALSE(row.contains("time_breakdown_s"));
    }
    EXPECT_EQ(both[0].at("cache_key"), both[1].at("cache_key"));
  }
  EXPECT_TRUE(leases().empty());  // every lease released
  EXPECT_TRUE(ManifestCache(cache()).verify().value().clean());
  EXPECT_EQ(run("verify", "cache verify"), 0) << output("verify") << errors("verify");

  // Again, as a table: everything is cached now, and one table names each worker's rows.
  ASSERT_EQ(run("again", small_tune(kernels) + " --adapters 0,0"), 0) << errors("again");
  const std::string table = output("again");
  EXPECT_NE(table.find("2 workers"), std::string::npos) << table;
  EXPECT_NE(table.find("worker 1: adapter 0"), std::string::npos) << table;
  EXPECT_EQ(table.find("tuned"), std::string::npos) << table;
}

TEST_F(AdapterWorkersTest, ALeaseOfAWorkerKilledMidTuneIsTakenOverAtOnce) {
  SCOPED_TRACE(trace());
  pid_t doomed = start("doomed", small_tune("affine_f32") + " --json --lease 600");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (leases().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(leases().size(), 1u) << errors("doomed");
  ::kill(doomed, SIGKILL);
  ::waitpid(doomed, nullptr, 0);
  ASSERT_EQ(leases().size(), 1u);  // its file outlives it; its holder's pid tells it is gone

  // A lease of 10 minutes: the heir tunes at once, without waiting for it to expire.
  ASSERT_EQ(run("heir", small_tune("affine_f32") + " --json --lease 600 --adapters 0"), 0)
      << errors("heir");
  const nlohmann::json row = nlohmann::json::parse(output("heir")).at("kernels").at(0);
  EXPECT_EQ(row.at("status"), "tuned") << row.dump();
  EXPECT_TRUE(leases().empty());
  EXPECT_TRUE(ManifestCache(cache()).verify().value().clean());
}

TEST_F(AdapterWorkersTest, ACorruptLeaseFileFailsItsWorkerWithTheFileNamed) {
  SCOPED_TRACE(trace());
  gpu::Device& device = testing::shared_device();
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  const std::vector<kernels::SizeBucket> buckets =
      forge::selected_buckets(device, affine, {"2^16"});
  ASSERT_EQ(buckets.size(), 1u);
  LocalLeases local(cache());
  const fs::path lease = local.path_of(ManifestCache::bucket_key(
      device.adapter().topology_hash, affine.id(), buckets.front().key_label()));
  fs::create_directories(lease.parent_path());
  write_text(lease, "wgsl-forge lease 1\ntoken \x7f\x01\n");

  EXPECT_EQ(run("corrupt", small_tune("affine_f32") + " --adapters 0"), 3) << errors("corrupt");
  const std::string said = errors("corrupt");
  EXPECT_NE(said.find("wgsl-forge: error: worker 0 (adapter 0) failed (exit status 3)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("Lease file " + lease.string() + " is not a lease of wgsl-forge"),
            std::string::npos)
      << said;
  EXPECT_NE(output("corrupt").find("FAILED"), std::string::npos) << output("corrupt");
  // Nothing was tuned past the lease that could not be read.
  EXPECT_FALSE(ManifestCache(cache())
                   .load_tuning_for_topology(device.adapter().topology_hash, "affine_f32", "2^16")
                   .value());
}

TEST_F(AdapterWorkersTest, AnAdapterListThatNamesNoAdapterIsRefused) {
  SCOPED_TRACE(trace());
  EXPECT_EQ(run("letters", small_tune("affine_f32") + " --adapters 0,x"), 2);
  EXPECT_NE(errors("letters").find("'x' is not an index"), std::string::npos) << errors("letters");
  EXPECT_EQ(run("missing", small_tune("affine_f32") + " --adapters 9,9"), 2);
  EXPECT_NE(errors("missing").find("worker 1 (adapter 9) failed (exit status 2): Adapter 9 "
                                   "does not exist"),
            std::string::npos)
      << errors("missing");
}

}  // namespace
}  // namespace wgsl_forge
