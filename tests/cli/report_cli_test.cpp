// `wgsl-forge report` end to end: a kernel tuned for real on the adapter into a fresh cache, with
// a failure journaled by "an attacker" who wrote markup into its message, the page
// written, then rendered by headless Chromium, and what the browser's DOM shows checked against
// the manifests: the kernels, one mark per candidate in every strip, the winner's time, the
// failure as text. Also the errors: an unknown kernel, an empty cache, a kernel with no tuning.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/report_page.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"
#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/hash.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;

constexpr const char* kChromium = "/usr/bin/chromium";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // what the command wrote to its standard output
};

CommandResult run_shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  CommandResult result;
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (std::size_t count = std::fread(buffer, 1, sizeof buffer, pipe))
    result.output.append(buffer, count);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size()))
    ++count;
  return count;
}

class ReportCliTest : public testing::SeededTest {
 protected:
  CommandResult cli(const std::string& arguments) const {
    return run_shell(std::string(WGSL_FORGE_CLI_PATH) + " " + arguments + " --cache " +
                     cache_root().string() + " 2>&1");
  }
  fs::path cache_root() const { return temp_.path() / "cache"; }

  // The page as Chromium's DOM holds it once loaded and laid out (scripts would have run).
  std::string rendered(const fs::path& page) const {
    const CommandResult dumped =
        run_shell("timeout 60 " + std::string(kChromium) +
                  " --headless --no-sandbox --disable-gpu --no-first-run " +
                  "--user-data-dir=" + (temp_.path() / "chromium").string() +
                  " --dump-dom file://" + page.string() + " 2>/dev/null");
    EXPECT_EQ(dumped.exit_code, 0);
    return dumped.output;
  }

  // A failure of `schedule` stored in the cache's journal, as a search that saw it fail would
  // have stored it, with markup in its message: the next search records it as failed before.
  void journal_failure(const kernels::KernelDefinition& kernel, const Schedule& schedule,
                       const std::string& topology_hash, const std::string& message) const {
    MeasurementRecord::Code code{topology_hash, std::string(kernel.id()), kernel.revision(),
                                 schedule, blake3_hex(kernel.generate_wgsl(schedule))};
    CandidateRecord failed;
    failed.schedule = schedule;
    failed.failure = CandidateRecord::Failure{FailureStage::kMismatch, message};
    Result<MeasurementRecord> record =
        MeasurementRecord::create(code, "n=65536", failed, "2026-12-03T07:00:00Z");
    ASSERT_TRUE(record) << record.error().to_string();
    ASSERT_TRUE(ManifestCache(cache_root()).store_measurement(*record));
  }

  std::vector<TuningManifest> tunings() const {
    std::vector<TuningManifest> found;
    ManifestCache cache(cache_root());
    const std::vector<CacheEntry> entries = cache.list().value();
    for (const CacheEntry& entry : entries) {
      if (entry.kind == ManifestKind::kTuning)
        found.push_back(*cache.load_tuning(entry.key).value());
    }
    return found;
  }

  testing::TempDir temp_;
};

TEST_F(ReportCliTest, ChromiumShowsEveryCandidateTheWinnerAndTheFailures) {
  if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " is absent (CI installs chromium)";
  const CommandResult adapter = cli("adapters --json");
  ASSERT_EQ(adapter.exit_code, 0) << adapter.output;
  const std::string topology =
      nlohmann::json::parse(adapter.output.substr(adapter.output.find('{')))["topology_hash"];
  const kernels::KernelDefinition& affine = *kernels::find_kernel("affine_f32").value();
  const Schedule failing = kernels::parse_schedule_overrides(affine, "vector_width=4").value();
  const std::string attack =
      "<script>document.title='pwned'</script> seed " + std::to_string(seed_);
  journal_failure(affine, failing, topology, attack);

  const CommandResult tuned =
      cli("auto-tune-all affine_f32 --budget 2 --sizes 2^16 --seed " + std::to_string(seed_));
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output << trace();
  const std::vector<TuningManifest> manifests = tunings();
  ASSERT_EQ(manifests.size(), 1u) << tuned.output;

  const fs::path page = temp_.path() / "report.html";
  const CommandResult written = cli("report --copy-ceiling --samples 3 --html " + page.string());
  ASSERT_EQ(written.exit_code, 0) << written.output;
  EXPECT_NE(written.output.find("tuning entries 1, candidates " +
                                std::to_string(manifests[0].result.candidates.size())),
            std::string::npos)
      << written.output;
  const std::string dom = rendered(page);
  ASSERT_NE(dom.find("</html>"), std::string::npos) << dom.substr(0, 2000);

  EXPECT_NE(dom.find("<title>wgsl-forge tuning report</title>"), std::string::npos)
      << "a script from the cache ran";
  EXPECT_EQ(dom.find("<script"), std::string::npos);
  for (const TuningManifest& manifest : manifests) {
    SCOPED_TRACE(manifest.kernel_id);
    EXPECT_NE(dom.find("<h2>" + manifest.kernel_id + "</h2>"), std::string::npos);
    // This bucket's section, as the browser holds it.
    const std::string opening = "<section class=\"bucket\" data-kernel=\"" + manifest.kernel_id;
    const std::size_t at = dom.find(opening);
    ASSERT_NE(at, std::string::npos);
    const std::string section = dom.substr(at, dom.find("<section class=\"", at + 1) - at);
    const std::size_t candidates = manifest.result.candidates.size();
    const std::size_t knobs = kernels::find_kernel(manifest.kernel_id).value()->knobs().size();
    EXPECT_EQ(count_of(section, "<svg class=\"knob-strip\""), knobs);
    EXPECT_EQ(count_of(section, "class=\"mark "), candidates * knobs)
        << "one mark per candidate in every strip";
    EXPECT_NE(section.find("data-candidates=\"" + std::to_string(candidates) + "\""),
              std::string::npos);
    EXPECT_NE(section.find("<td class=\"number winner-time\">" +
                           cli::format_duration(manifest.result.winner.timing.median_ns) + "</td>"),
              std::string::npos);
    EXPECT_NE(section.find("<rect class=\"bar-ceiling\""), std::string::npos)
        << "--copy-ceiling measured the copy on this adapter";
  }
  // The winner's certification, every case a row, seeds as the manifest has them.
  ManifestCache cache(cache_root());
  const std::vector<CacheEntry> entries = cache.list().value();
  std::size_t certifications = 0;
  for (const CacheEntry& entry : entries) {
    if (entry.kind != ManifestKind::kCertification) continue;
    ++certifications;
    const CertificationManifest certification = *cache.load_certification(entry.key).value();
    EXPECT_EQ(count_of(dom, "<tr class=\"case\">"), certification.cases.size());
    EXPECT_NE(dom.find("certified</span>, " + std::to_string(certification.cases.size()) + " of " +
                       std::to_string(certification.cases.size()) + " cases passed"),
              std::string::npos);
    for (const CertificationCase& one : certification.cases) {
      EXPECT_NE(dom.find("<td class=\"number\">" + std::to_string(one.seed) + "</td>"),
                std::string::npos)
          << one.name;
    }
  }
  EXPECT_EQ(certifications, 1u);
  // The journaled failure: a candidate of affine_f32's search, shown under its stage as text.
  ASSERT_EQ(manifests[0].result.failures().size(), 1u);
  const std::size_t stage = dom.find("<section class=\"failure-stage\" data-stage=\"mismatch\">");
  ASSERT_NE(stage, std::string::npos);
  // The DOM's text, serialized: only <, > and & are escaped there.
  EXPECT_NE(dom.find("<code>" + failing.to_string() +
                         "</code><pre class=\"message\">&lt;script&gt;document.title='pwned'&lt;/"
                         "script&gt; seed " +
                         std::to_string(seed_) + "</pre>",
                     stage),
            std::string::npos)
      << dom.substr(stage, 2000);

  // Only the kernels asked for; one without tuning beside one with gets a page that says so.
  const CommandResult partly = cli("report gemm_f32 affine_f32 --html " + page.string());
  ASSERT_EQ(partly.exit_code, 0) << partly.output;
  EXPECT_NE(partly.output.find("note: gemm_f32 has no tuning in the cache"), std::string::npos)
      << partly.output;
  const std::string partly_dom = rendered(page);
  EXPECT_NE(partly_dom.find("<p class=\"no-tuning\">No tuning of gemm_f32 in this cache"),
            std::string::npos);
  EXPECT_NE(partly_dom.find("<h2>affine_f32</h2>"), std::string::npos);
  EXPECT_EQ(partly_dom.find("<h2>reduce_sum_f32</h2>"), std::string::npos);
  // Only kernels without tuning: no page, and the one written before is left as it was.
  const CommandResult none = cli("report gemm_f32 --html " + page.string());
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_NE(none.output.find("holds no tuning of gemm_f32; nothing to report"), std::string::npos)
      << none.output;
  EXPECT_NE(testing::read_text(page).find("<h2>affine_f32</h2>"), std::string::npos);
}

TEST_F(ReportCliTest, NothingToReportIsAnErrorAndWritesNoPage) {
  const fs::path page = temp_.path() / "report.html";
  const CommandResult empty = cli("report --html " + page.string());
  EXPECT_EQ(empty.exit_code, 1) << empty.output;
  EXPECT_NE(empty.output.find("holds no tuning of any kernel; nothing to report, no page written"),
            std::string::npos)
      << empty.output;
  EXPECT_FALSE(fs::exists(page));

  // A damaged entry is named, not skipped silently, and is no tuning to report.
  const fs::path damaged = cache_root() / ("tuning-" + std::string(64, 'e') + ".json");
  fs::create_directories(cache_root());
  testing::write_text(damaged, "{\"schema_version\": <script>");
  const CommandResult corrupt = cli("report --html " + page.string());
  EXPECT_EQ(corrupt.exit_code, 1) << corrupt.output;
  EXPECT_NE(corrupt.output.find("wgsl-forge: warning: " + damaged.string() + ": "),
            std::string::npos)
      << corrupt.output;
  EXPECT_FALSE(fs::exists(page));

  const CommandResult misspelled = cli("report affine_f3 --html " + page.string());
  EXPECT_EQ(misspelled.exit_code, 2);
  EXPECT_NE(misspelled.output.find("Unknown kernel 'affine_f3'; did you mean 'affine_f32'?"),
            std::string::npos)
      << misspelled.output;
  const CommandResult no_file = cli("report");
  EXPECT_EQ(no_file.exit_code, 2);
  EXPECT_NE(no_file.output.find("--html is required"), std::string::npos) << no_file.output;
  const CommandResult subcommand = cli("reprot --html " + page.string());
  EXPECT_NE(subcommand.output.find("did you mean 'report'?"), std::string::npos)
      << subcommand.output;
  EXPECT_FALSE(fs::exists(page));
}

}  // namespace
}  // namespace wgsl_forge
