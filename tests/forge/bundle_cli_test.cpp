// Bundles through the command line with real evidence: a kernel tuned on the test adapter, its
// entries exported, imported into an empty cache byte for byte and listed with their fields; a
// damaged bundle refused with exit 1 and nothing stored.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "support/temp_dir.hpp"
#include "support/test_manifests.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult run_cli(const std::string& arguments) {
  const std::string command = std::string(WGSL_FORGE_CLI_PATH) + " " + arguments + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  CommandResult result;
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (std::size_t count = std::fread(buffer, 1, sizeof buffer, pipe)) {
    result.output.append(buffer, count);
  }
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The entry files (tuning-*, certification-*, measurement-*) of a cache, with their bytes.
std::map<std::string, std::string> entries_of(const fs::path& root, bool with_measurements) {
  std::map<std::string, std::string> files;
  if (!fs::exists(root)) return files;
  for (const auto& item : fs::directory_iterator(root)) {
    const std::string name = item.path().filename().string();
    if (!item.is_regular_file()) continue;  // auto-tune-all's lease directory
    if (!with_measurements && name.starts_with("measurement-")) continue;
    files[name] = testing::read_text(item.path());
  }
  return files;
}

class BundleCliTest : public ::testing::Test {
 protected:
  std::string cache_flag(const std::string& name) const {
    return "--cache " + (temp_.path() / name).string();
  }
  testing::TempDir temp_;
};

TEST_F(BundleCliTest, TunedEntriesTravelThroughABundleAndAreListedWithTheirFields) {
  const std::uint64_t seed = testing::test_seed();
  RecordProperty("seed", std::to_string(seed));
  CommandResult tuned = run_cli("tune affine_f32 --budget 1 --size 4099 --seed " +
                                std::to_string(seed) + " " + cache_flag("tuned"));
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;

  const fs::path bundle = temp_.path() / "affine.bundle";
  CommandResult exported =
      run_cli("cache export " + bundle.string() + " --kernel affine_f32 " + cache_flag("tuned"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("exported 1 tuning and 1 certification entries ("),
            std::string::npos)
      << exported.output;
  EXPECT_NE(exported.output.find("measurement records left out"), std::string::npos)
      << exported.output;

  CommandResult imported = run_cli("cache import " + bundle.string() + " " + cache_flag("fresh"));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_NE(imported.output.find(": 2 entries stored, 0 already present in "), std::string::npos)
      << imported.output;
  EXPECT_EQ(entries_of(temp_.path() / "fresh", true),
            entries_of(temp_.path() / "tuned", false));  // byte for byte, no measurements
  CommandResult verified = run_cli("cache verify " + cache_flag("fresh"));
  EXPECT_EQ(verified.exit_code, 0) << verified.output;
  CommandResult again = run_cli("cache import " + bundle.string() + " " + cache_flag("fresh"));
  EXPECT_NE(again.output.find(": 0 entries stored, 2 already present in "), std::string::npos)
      << again.output;

  // The list: each field of each kind, as JSON and in the table.
  CommandResult listed = run_cli("cache list --json " + cache_flag("tuned"));
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const nlohmann::json rows = nlohmann::json::parse(listed.output);
  ASSERT_EQ(rows.size(), 3u) << listed.output;
  std::map<std::string, nlohmann::json> by_kind;
  for (const nlohmann::json& row : rows) by_kind[row["kind"]] = row;
  const nlohmann::json& tuning = by_kind["tuning"];
  EXPECT_EQ(tuning["kernel"], "affine_f32");
  EXPECT_GE(tuning["revision"].get<int>(), 1);
  EXPECT_TRUE(tuning["bucket"].is_string());
  EXPECT_TRUE(tuning["schedule"].contains("workgroup_size")) << tuning.dump();
  EXPECT_GT(tuning["median_ns"].get<double>(), 0.0);
  EXPECT_EQ(tuning["date_source"], "tuned_at");
  EXPECT_EQ(tuning["date"].get<std::string>().size(), 20u);  // 2026-12-02T15:33:31Z
  const nlohmann::json& certification = by_kind["certification"];
  EXPECT_EQ(certification["verdict"], "certified");
  EXPECT_EQ(certification["date_source"], "stored");
  EXPECT_EQ(certification["schedule"], tuning["schedule"]);
  const nlohmann::json& measurement = by_kind["measurement"];
  EXPECT_EQ(measurement["problem"], "n=4099");
  EXPECT_EQ(measurement["date_source"], "recorded_at");

  CommandResult table = run_cli("cache list " + cache_flag("tuned"));
  ASSERT_EQ(table.exit_code, 0) << table.output;
  for (const std::string& expected :
       {std::string("kind  "), std::string("kernel  "), std::string("size  "),
        std::string("schedule  "), std::string("certified, "), std::string(" (stored)"),
        std::string("n=4099"), tuning["bucket"].get<std::string>() + "  ",
        tuning["date"].get<std::string>(), tuning["key"].get<std::string>()}) {
    EXPECT_NE(table.output.find(expected), std::string::npos) << expected << "\n" << table.output;
  }

  // One damaged byte, at a seeded offset: refused whole, with the reason, nothing stored.
  std::string bytes = testing::read_text(bundle);
  std::mt19937_64 random(seed);
  const std::size_t offset = random() % bytes.size();
  const auto flip = static_cast<unsigned char>(1 + random() % 255);
  bytes[offset] = static_cast<char>(static_cast<unsigned char>(bytes[offset]) ^ flip);
  testing::write_text(bundle, bytes);
  CommandResult refused = run_cli("cache import " + bundle.string() + " " + cache_flag("other"));
  EXPECT_EQ(refused.exit_code, 1) << "offset " << offset << ": " << refused.output;
  EXPECT_NE(refused.output.find("is refused and nothing was imported: "), std::string::npos)
      << refused.output;
  EXPECT_TRUE(entries_of(temp_.path() / "other", true).empty());

  CommandResult unknown =
      run_cli("cache export " + bundle.string() + " --kernel affine_f33 " + cache_flag("tuned"));
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("did you mean 'affine_f32'?"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace wgsl_forge
