// The report's page drawn from hand-built report data with seeded random timings, without a GPU:
// one mark per candidate in every knob's strip, placed by time; every string from the cache
// escaped; failures grouped by stage; certification cases; the copy ceiling stated or its absence
// said; and the page written atomically.

#include "cli/report_page.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "support/faulty_file_system.hpp"
#include "support/seeded_test.hpp"
#include "support/temp_dir.hpp"

namespace wgsl_forge {
namespace {

namespace fs = std::filesystem;

// The SVG strips of a page, each as its own text, in order.
std::vector<std::string> strips_of(const std::string& page) {
  std::vector<std::string> strips;
  std::size_t at = 0;
  while ((at = page.find("<svg class=\"knob-strip\"", at)) != std::string::npos) {
    const std::size_t end = page.find("</svg>", at);
    strips.push_back(page.substr(at, end - at));
    at = end;
  }
  return strips;
}

struct Mark {
  std::size_t candidate = 0;
  std::string shape;    // circle, rect or path
  std::string classes;  // "mark winner", ...
  double y = 0;         // the centre's vertical position (rect: its top + 4)
};

std::vector<Mark> marks_of(const std::string& strip) {
  std::vector<Mark> marks;
  static const std::regex mark(
      R"re(<(circle|rect|path) class="(mark[^"]*)" data-candidate="(\d+)"([^>]*)>)re");
  static const std::regex cy(R"re(cy="([-0-9.e]+)")re");
  static const std::regex y(R"re( y="([-0-9.e]+)")re");
  for (auto it = std::sregex_iterator(strip.begin(), strip.end(), mark);
       it != std::sregex_iterator(); ++it) {
    Mark one;
    one.shape = (*it)[1];
    one.classes = (*it)[2];
    one.candidate = std::stoul((*it)[3]);
    const std::string rest = (*it)[4];
    std::smatch position;
    if (one.shape == "circle" && std::regex_search(rest, position, cy)) {
      one.y = std::stod(position[1]);
    } else if (one.shape == "rect" && std::regex_search(rest, position, y)) {
      one.y = std::stod(position[1]) + 4;
    }
    marks.push_back(one);
  }
  return marks;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size()))
    ++count;
  return count;
}

class ReportPageTest : public testing::SeededTest {
 protected:
  const kernels::KernelDefinition& kernel() const {
    return *kernels::find_kernel("reduce_sum_f32").value();
  }

  TimingSummary random_timing(double median_ns) {
    TimingSummary timing;
    timing.source = TimingSource::kGpuTimestamp;
    timing.sample_count = 3 + random_() % 30;
    timing.median_ns = median_ns;
    timing.mean_ns = median_ns * 1.01;
    timing.mad_ns = median_ns * 0.02;
    timing.min_ns = static_cast<std::uint64_t>(median_ns * 0.95);
    timing.max_ns = static_cast<std::uint64_t>(median_ns * 1.2);
    timing.p10_ns = median_ns * 0.97;
    timing.p90_ns = median_ns * 1.1;
    return timing;
  }

  // A distinct legal schedule of the kernel, drawn at random.
  Schedule random_schedule(std::set<std::string>& used) {
    for (;;) {
      Schedule schedule;
      for (const kernels::KnobSpec& knob : kernel().knobs()) {
        schedule.set(knob.name, knob.values[random_() % knob.values.size()]);
      }
      if (used.insert(schedule.to_string()).second) return schedule;
    }
  }

  // One bucket's search: the default first, then `count - 1` random schedules, timings spread
  // over three decades, about a fifth failed before a timing; the fastest three timed ones are
  // finalists, the fastest of them the winner.
  forge::BucketReport random_bucket(std::size_t count) {
    forge::BucketReport bucket;
    bucket.bucket = "2^20";
    bucket.main_bucket = true;
    kernels::Problem problem;
    problem.elements = 1 << 20;
    bucket.problem = problem;
    bucket.work = kernel().work(problem);
    TuningManifest& tuning = bucket.tuning;
    tuning.kernel_id = std::string(kernel().id());
    tuning.kernel_revision = kernel().revision();
    tuning.adapter.name = "llvmpipe (LLVM 15.0.6, 256 bits)";
    tuning.adapter.device_type = "Cpu";
    tuning.context.topology_hash = std::string(64, 'a');
    tuning.context.tuned_at = "2026-12-03T07:00:00Z";
    std::set<std::string> used = {kernel().default_schedule().to_string()};
    std::uniform_real_distribution<double> decades(3.0, 6.0);
    const FailureStage stages[] = {FailureStage::kCompile, FailureStage::kMismatch,
                                   FailureStage::kTimeout};
    for (std::size_t i = 0; i < count; ++i) {
      CandidateRecord candidate;
      candidate.schedule = i == 0 ? kernel().default_schedule() : random_schedule(used);
      if (i != 0 && random_() % 5 == 0) {
        candidate.failure = CandidateRecord::Failure{stages[random_() % 3],
                                                     "failure of candidate " + std::to_string(i)};
      } else {
        candidate.timing = random_timing(std::pow(10.0, decades(random_)));
      }
      tuning.result.candidates.push_back(candidate);
    }
    std::vector<std::size_t> timed;
    for (std::size_t i = 0; i < count; ++i) {
      if (tuning.result.candidates[i].timing) timed.push_back(i);
    }
    std::sort(timed.begin(), timed.end(), [&](std::size_t a, std::size_t b) {
      return tuning.result.candidates[a].timing->median_ns <
             tuning.result.candidates[b].timing->median_ns;
    });
    for (std::size_t f = 0; f < std::min<std::size_t>(3, timed.size()); ++f) {
      CandidateRecord& finalist = tuning.result.candidates[timed[f]];
      finalist.finalist = true;
      tuning.result.finalists.push_back({finalist.schedule, {}, *finalist.timing});
    }
    tuning.result.winner = tuning.result.finalists.front();
    tuning.result.winner.oracle.compared = 1000;
    tuning.context.baseline =
        CandidateResult{kernel().default_schedule(), {}, *tuning.result.candidates[0].timing};
    return bucket;
  }

  forge::TuningReport report_of(std::vector<forge::BucketReport> buckets) const {
    forge::TuningReport report;
    report.cache_root = "/tmp/cache";
    forge::KernelReport entry{std::string(kernel().id()), std::string(kernel().summary()),
                              kernel().knobs(),           kernel().default_schedule(),
                              std::move(buckets),         0};
    report.kernels.push_back(std::move(entry));
    return report;
  }
};

TEST_F(ReportPageTest, EveryStripHasOneMarkPerCandidatePlacedByItsTime) {
  const std::size_t count = 5 + random_() % 20;
  const forge::BucketReport bucket = random_bucket(count);
  const std::vector<CandidateRecord>& candidates = bucket.tuning.result.candidates;
  const std::string page = cli::render_report_page(report_of({bucket}), "test");

  const std::vector<std::string> strips = strips_of(page);
  ASSERT_EQ(strips.size(), kernel().knobs().size()) << trace();
  for (const std::string& strip : strips) {
    const std::vector<Mark> marks = marks_of(strip);
    ASSERT_EQ(marks.size(), count) << trace();
    std::set<std::size_t> seen;
    for (const Mark& mark : marks) seen.insert(mark.candidate);
    EXPECT_EQ(seen.size(), count) << "each candidate once; " << trace();
    for (const Mark& mark : marks) {
      const CandidateRecord& candidate = candidates.at(mark.candidate);
      if (!candidate.timing) {
        EXPECT_EQ(mark.shape, "path") << "a failure before any timing is a cross; " << trace();
        EXPECT_EQ(mark.classes, "mark failed") << trace();
        continue;
      }
      const bool winner = candidate.schedule == bucket.tuning.result.winner.schedule;
      EXPECT_EQ(mark.classes.find("winner") != std::string::npos, winner) << trace();
      // Faster is lower on the page: the log axis is monotonic.
      for (const Mark& other : marks) {
        const CandidateRecord& them = candidates.at(other.candidate);
        if (!them.timing || them.timing->median_ns <= candidate.timing->median_ns) continue;
        EXPECT_GT(mark.y, other.y) << "candidate " << mark.candidate << " is faster than "
                                   << other.candidate << "; " << trace();
      }
    }
  }
  // The default is a square, and the winner's time is printed as text.
  EXPECT_EQ(
      count_of(page, "<rect class=\"mark default\""),
      bucket.tuning.result.winner.schedule == kernel().default_schedule() ? 0u : strips.size())
      << trace();
  EXPECT_NE(page.find("<td class=\"number winner-time\">" +
                      cli::format_duration(bucket.tuning.result.winner.timing.median_ns) + "</td>"),
            std::string::npos)
      << trace();
  EXPECT_EQ(count_of(page, "class=\"candidate-row\""), count) << trace();
  // Self-contained: nothing is fetched and nothing runs.
  for (const char* outside : {"http:", "https:", "src=", "href=\"/", "<link", "<script", "@import",
                              "url(", "<img", "<iframe"}) {
    EXPECT_EQ(page.find(outside), std::string::npos) << outside;
  }
}

TEST_F(ReportPageTest, FailuresAreGroupedByStageWithTheirMessages) {
  forge::BucketReport bucket = random_bucket(12);
  std::map<std::string, std::size_t> by_stage;
  for (const CandidateFailure& failure : bucket.tuning.result.failures()) {
    ++by_stage[failure_stage_name(failure.stage)];
  }
  const std::string page = cli::render_report_page(report_of({bucket}), "test");
  for (const auto& [stage, count] : by_stage) {
    const std::string opening = "<section class=\"failure-stage\" data-stage=\"" + stage + "\">";
    const std::size_t at = page.find(opening);
    ASSERT_NE(at, std::string::npos) << stage << "; " << trace();
    const std::string section = page.substr(at, page.find("</section>", at) - at);
    EXPECT_NE(section.find("<h5>" + stage + " (" + std::to_string(count) + ")</h5>"),
              std::string::npos)
        << trace();
    EXPECT_EQ(count_of(section, "<div class=\"failure\">"), count) << trace();
  }
  for (const CandidateFailure& failure : bucket.tuning.result.failures()) {
    EXPECT_NE(page.find("<pre class=\"message\">" + failure.message + "</pre>"), std::string::npos)
        << trace();
  }
  if (by_stage.empty()) {
    EXPECT_NE(page.find("No candidate failed."), std::string::npos);
  }
}

TEST_F(ReportPageTest, EveryStringFromTheCacheShowsAsText) {
  forge::BucketReport bucket = random_bucket(6);
  const std::string script = "<script>alert('x')</script>";
  CandidateRecord& failed = bucket.tuning.result.candidates.back();
  failed.timing.reset();
  failed.finalist = false;
  failed.failure = CandidateRecord::Failure{FailureStage::kCompile, script + "\x01 & \"quoted\""};
  bucket.bucket = "\"><img src=x onerror=alert(1)>";
  bucket.tuning.adapter.name = "<b>adapter</b>";
  bucket.tuning.adapter.driver_info = script;
  bucket.tuning.context.tuned_at = script;
  bucket.tuning.context.toggles = {script};
  bucket.unusable = script;
  bucket.certification_missing = script;
  forge::TuningReport report = report_of({bucket});
  report.cache_root = "/tmp/<script>";
  report.kernels.front().summary = script;
  report.unreadable.push_back({"/tmp/<script>/tuning-x.json", script});

  const std::string page = cli::render_report_page(report, "<script>");
  std::string lower = page;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  EXPECT_EQ(lower.find("<script"), std::string::npos);
  EXPECT_EQ(lower.find("<img"), std::string::npos);
  EXPECT_EQ(lower.find("<b>"), std::string::npos);
  EXPECT_EQ(page.find('\x01'), std::string::npos) << "control characters are not HTML";
  EXPECT_NE(page.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;\xEF\xBF\xBD &amp; "
                      "&quot;quoted&quot;"),
            std::string::npos);
  EXPECT_NE(page.find("data-bucket=\"&quot;&gt;&lt;img src=x onerror=alert(1)&gt;\""),
            std::string::npos);
  EXPECT_EQ(cli::escape_html("a<b>&'\"\tc"), "a&lt;b&gt;&amp;&#39;&quot;\tc");
}

TEST_F(ReportPageTest, CertificationCasesShowSizeSeedAndResult) {
  forge::BucketReport bucket = random_bucket(4);
  CertificationManifest certification;
  certification.kernel_id = bucket.tuning.kernel_id;
  certification.tolerance = "|d| <= 2 n eps sum|x|";
  const std::size_t cases = 3 + random_() % 8;
  for (std::size_t i = 0; i < cases; ++i) {
    CertificationCase one;
    one.name = "case " + std::to_string(i);
    one.element_count = random_() % 100000;
    one.value_profile = "uniform";
    one.seed = random_();
    one.runs = 2;
    one.report.compared = one.element_count;
    certification.cases.push_back(one);
  }
  certification.cases.back().failed_checks = {"the second run differs"};
  certification.verdict = verdict_of(certification.cases);
  bucket.certification = certification;
  const std::string page = cli::render_report_page(report_of({bucket}), "test");
  EXPECT_EQ(count_of(page, "<tr class=\"case\">"), cases) << trace();
  for (const CertificationCase& one : certification.cases) {
    EXPECT_NE(page.find("<td class=\"number\">" + std::to_string(one.element_count) +
                        "</td><td>uniform</td><td class=\"number\">" + std::to_string(one.seed) +
                        "</td>"),
              std::string::npos)
        << one.name << "; " << trace();
  }
  EXPECT_EQ(count_of(page, "<td class=\"rejected\">failed</td>"), 1u) << trace();
  EXPECT_NE(page.find("the second run differs"), std::string::npos);
  EXPECT_NE(page.find(std::to_string(cases - 1) + " of " + std::to_string(cases) + " cases passed"),
            std::string::npos)
      << trace();
}

TEST_F(ReportPageTest, CopyCeilingIsDrawnWhenMeasuredAndItsAbsenceSaid) {
  forge::BucketReport bucket = random_bucket(5);
  const std::string without = cli::render_report_page(report_of({bucket}), "test");
  EXPECT_NE(without.find("class=\"no-ceiling\">not measured"), std::string::npos);
  EXPECT_EQ(without.find("bar-ceiling\" x="), std::string::npos);

  // A copy that moves the kernel's bytes in a third of the winner's time: 300 % of the winner.
  const double winner_ns = bucket.tuning.result.winner.timing.median_ns;
  bucket.copy_ceiling = forge::CopyCeiling{winner_ns / 3, bucket.work.bytes, "vec4 copy"};
  const std::string with = cli::render_report_page(report_of({bucket}), "test");
  EXPECT_EQ(with.find("class=\"no-ceiling\""), std::string::npos);
  EXPECT_NE(with.find("<rect class=\"bar-ceiling\""), std::string::npos);
  EXPECT_NE(with.find("<td class=\"number ceiling-time\">" + cli::format_duration(winner_ns / 3)),
            std::string::npos)
      << trace();
  EXPECT_NE(with.find("winner at 33% of the copy ceiling"), std::string::npos) << trace();
}

TEST_F(ReportPageTest, KernelWithoutTuningSaysSo) {
  forge::TuningReport report = report_of({});
  report.kernels.front().journaled_measurements = 7;
  const std::string page = cli::render_report_page(report, "test");
  EXPECT_NE(page.find("<p class=\"no-tuning\">No tuning of reduce_sum_f32 in this cache, but 7 "
                      "candidate measurements are journaled"),
            std::string::npos);
  EXPECT_TRUE(strips_of(page).empty());
}

// Every file operation of the write failed in turn: the old page stays byte for byte, or (once
// the rename is done) the new one is there whole, no temporary file is left, and the failure is
// reported, up to the flush of the directory (closing the directory after it loses nothing).
TEST_F(ReportPageTest, WriteFileAtomicallyLosesNothingWhenAnyOperationFails) {
  testing::TempDir temp;
  const fs::path page = temp.path() / "report.html";
  const std::string old_page = "old page " + std::to_string(random_());
  testing::write_text(page, old_page);
  const std::string new_page(100000 + random_() % 100000, 'n');
  std::size_t faults = 0;
  for (std::size_t at = 1;; ++at) {
    testing::FaultyFileSystem files(testing::Fault::kNoSpace, at);
    Status written = cli::write_file_atomically(page, new_page, files);
    if (files.faulted_operation().empty()) {
      ASSERT_TRUE(written) << written.error().to_string();
      EXPECT_TRUE(testing::read_text(page) == new_page);
      break;
    }
    ++faults;
    // The operations before the one that failed (the write may clean up after it).
    const std::vector<std::string> before(
        files.operations().begin(),
        files.operations().begin() + static_cast<std::ptrdiff_t>(at) - 1);
    const bool renamed = std::find(before.begin(), before.end(), "rename") != before.end();
    const bool flushed = std::count(before.begin(), before.end(), "fsync") == 2;
    const std::string fault =
        "fault at operation " + std::to_string(at) + " (" + files.faulted_operation() + ")";
    EXPECT_TRUE(testing::read_text(page) == (renamed ? new_page : old_page))
        << fault << ": the page is neither the old one nor the whole new one";
    if (flushed) {
      EXPECT_TRUE(written) << fault;
    } else {
      ASSERT_FALSE(written) << fault << " was not reported";
      EXPECT_EQ(written.error().kind(), ErrorKind::kIo);
      EXPECT_NE(written.error().message().find(page.string()), std::string::npos);
    }
    std::size_t files_left = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(temp.path())) ++files_left;
    EXPECT_EQ(files_left, 1u) << "a temporary file is left after a " << fault;
    testing::write_text(page, old_page);
  }
  EXPECT_GE(faults, 7u) << "open, write, fsync, close, rename, open and fsync each failed once";
  EXPECT_FALSE(cli::write_file_atomically(temp.path() / "missing" / "report.html", new_page,
                                          *posix_file_system()));
}

}  // namespace
}  // namespace wgsl_forge
