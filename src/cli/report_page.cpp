#include "report_page.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

#include "wgsl_forge/forge.hpp"

namespace wgsl_forge::cli {

namespace {

namespace fs = std::filesystem;

// Styles of the page; marks are told apart by shape and colour (legend under the strips).
constexpr const char* kStyle = R"css(
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 2px solid #444; padding-bottom: 0.2em; margin-top: 2em; }
h3 { margin: 1.4em 0 0.3em; }
h4 { margin: 1em 0 0.3em; }
.meta, .adapter { color: #555; font-size: 0.9em; }
.warning { background: #fff3cd; border: 1px solid #e0c060; padding: 0.4em 0.7em; }
.no-tuning { background: #f3f3f3; border-left: 4px solid #999; padding: 0.5em 0.8em; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.4em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.number { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, pre { font-family: ui-monospace, monospace; font-size: 0.92em; }
pre.message { white-space: pre-wrap; margin: 0.2em 0 0.6em; background: #fafafa;
              border: 1px solid #eee; padding: 0.3em; }
.strips { display: flex; flex-wrap: wrap; gap: 0.6em; }
figure { margin: 0; }
figcaption { font-size: 0.85em; font-weight: 600; text-align: center; }
svg text { font-size: 10px; fill: #333; }
svg .axis { stroke: #888; stroke-width: 1; }
svg .grid { stroke: #e4e4e4; stroke-width: 1; }
svg .band { fill: #fff1e6; }
svg .mark { stroke-width: 1.5; }
svg .candidate { fill: #ffffff; stroke: #777; }
svg .finalist { fill: #777; stroke: #444; }
svg .default { fill: #9ecae1; stroke: #1f77b4; }
svg .winner { fill: #d62728; stroke: #8b0000; }
svg .failed { fill: none; stroke: #e6550d; stroke-width: 2; }
svg .bar-winner { fill: #d62728; }
svg .bar-default { fill: #1f77b4; }
svg .bar-ceiling { fill: #31a354; }
.passed { color: #2b7a2b; }
.rejected { color: #b00020; font-weight: 600; }
.legend svg { vertical-align: middle; }
footer { margin-top: 3em; color: #777; font-size: 0.85em; }
)css";

std::string format_number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string rate_text(const std::pair<double, std::string>& rate) {
  const double value = rate.first;
  const char* format = value >= 100 ? "%.0f" : value >= 10 ? "%.1f" : "%.3g";
  return format_number(format, value) + " " + rate.second;
}

std::string speedup_text(double speedup) {
  return format_number(speedup < 10 ? "%.2fx" : "%.1fx", speedup);
}

// The candidate's place in the search's outcome, for its mark and its row.
enum class Standing { kWinner, kDefault, kFinalist, kCandidate, kFailed };

Standing standing_of(const CandidateRecord& candidate, const TuningManifest& tuning,
                     const Schedule& default_schedule) {
  if (candidate.failure) return Standing::kFailed;
  if (candidate.schedule == tuning.result.winner.schedule) return Standing::kWinner;
  if (candidate.schedule == default_schedule) return Standing::kDefault;
  return candidate.finalist ? Standing::kFinalist : Standing::kCandidate;
}

const char* standing_class(Standing standing) {
  switch (standing) {
    case Standing::kWinner:
      return "winner";
    case Standing::kDefault:
      return "default";
    case Standing::kFinalist:
      return "finalist";
    case Standing::kCandidate:
      return "candidate";
    case Standing::kFailed:
      return "failed";
  }
  return "candidate";
}

// What a candidate's mark says when pointed at.
std::string candidate_title(const CandidateRecord& candidate, Standing standing) {
  std::string title = candidate.schedule.to_string();
  if (candidate.timing) title += "\n" + format_duration(candidate.timing->median_ns) + " median";
  title += std::string("\n") + standing_class(standing);
  if (candidate.finalist && standing != Standing::kFinalist) title += ", finalist";
  if (candidate.failure) {
    title += std::string(" at ") + failure_stage_name(candidate.failure->stage) + ": " +
             candidate.failure->message;
  }
  return title;
}

// A log-scaled time axis over the timed candidates.
struct TimeAxis {
  double low_ns = 1;
  double high_ns = 10;

  // 0 at the top (the slowest), 1 at the bottom (the fastest) of the plot.
  double fraction(double ns) const {
    return (std::log(high_ns) - std::log(std::max(ns, low_ns))) /
           (std::log(high_ns) - std::log(low_ns));
  }
  // Round values (1, 2 and 5 times a power of ten) inside the axis; its ends when there are
  // fewer than two of them.
  std::vector<double> ticks() const {
    std::vector<double> values;
    for (int exponent = static_cast<int>(std::floor(std::log10(low_ns)));
         exponent <= static_cast<int>(std::ceil(std::log10(high_ns))); ++exponent) {
      for (double mantissa : {1.0, 2.0, 5.0}) {
        const double value = mantissa * std::pow(10.0, exponent);
        if (value >= low_ns && value <= high_ns) values.push_back(value);
      }
    }
    if (values.size() < 2) values = {low_ns, high_ns};
    return values;
  }
};

std::optional<TimeAxis> time_axis(const std::vector<CandidateRecord>& candidates) {
  std::optional<TimeAxis> axis;
  for (const CandidateRecord& candidate : candidates) {
    if (!candidate.timing || !(candidate.timing->median_ns > 0)) continue;
    const double ns = candidate.timing->median_ns;
    if (!axis) axis = TimeAxis{ns, ns};
    axis->low_ns = std::min(axis->low_ns, ns);
    axis->high_ns = std::max(axis->high_ns, ns);
  }
  if (axis) {  // a margin, so that no mark sits on the frame
    axis->low_ns /= 1.25;
    axis->high_ns *= 1.25;
  }
  return axis;
}

// The values a knob takes on the strip's horizontal axis: its legal values and any other value a
// candidate has (an entry of an older revision), ascending.
std::vector<std::int64_t> knob_values(const kernels::KnobSpec& knob,
                                      const std::vector<CandidateRecord>& candidates) {
  std::vector<std::int64_t> values = knob.values;
  for (const CandidateRecord& candidate : candidates) {
    if (std::optional<std::int64_t> value = candidate.schedule.get(knob.name)) {
      values.push_back(*value);
    }
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// One strip: a candidate's time against one knob's value.
void write_knob_strip(std::ostringstream& out, const kernels::KnobSpec& knob,
                      const TuningManifest& tuning, const Schedule& default_schedule,
                      const std::optional<TimeAxis>& axis) {
  const std::vector<CandidateRecord>& candidates = tuning.result.candidates;
  const std::vector<std::int64_t> values = knob_values(knob, candidates);
  const bool missing = std::any_of(candidates.begin(), candidates.end(), [&](const auto& one) {
    return !one.schedule.get(knob.name).has_value();
  });
  const std::size_t columns = values.size() + (missing ? 1 : 0);
  constexpr double kWidth = 250, kHeight = 190, kLeft = 56, kRight = 8;
  constexpr double kBandTop = 4, kBandHeight = 16, kTop = 28, kBottom = 30;
  const double plot_width = kWidth - kLeft - kRight;
  const double plot_height = kHeight - kTop - kBottom;
  const double column_width = plot_width / static_cast<double>(std::max<std::size_t>(columns, 1));

  out << "<figure><figcaption>" << escape_html(knob.name) << "</figcaption>"
      << "<svg class=\"knob-strip\" data-knob=\"" << escape_html(knob.name) << "\" width=\""
      << kWidth << "\" height=\"" << kHeight << "\" viewBox=\"0 0 " << kWidth << " " << kHeight
      << "\" role=\"img\" aria-label=\"time against " << escape_html(knob.name) << "\">";
  out << "<rect class=\"band\" x=\"" << kLeft << "\" y=\"" << kBandTop << "\" width=\""
      << plot_width << "\" height=\"" << kBandHeight << "\"/><text x=\"" << kLeft - 4 << "\" y=\""
      << kBandTop + 12 << "\" text-anchor=\"end\">failed</text>";
  if (axis) {
    for (double tick : axis->ticks()) {
      const double y = kTop + axis->fraction(tick) * plot_height;
      out << "<line class=\"grid\" x1=\"" << kLeft << "\" x2=\"" << kWidth - kRight << "\" y1=\""
          << y << "\" y2=\"" << y << "\"/><text x=\"" << kLeft - 4 << "\" y=\"" << y + 3
          << "\" text-anchor=\"end\">" << escape_html(format_duration(tick)) << "</text>";
    }
  }
  out << "<line class=\"axis\" x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop
      << "\" y2=\"" << kTop + plot_height << "\"/><line class=\"axis\" x1=\"" << kLeft << "\" x2=\""
      << kWidth - kRight << "\" y1=\"" << kTop + plot_height << "\" y2=\"" << kTop + plot_height
      << "\"/>";
  for (std::size_t column = 0; column < columns; ++column) {
    const double x = kLeft + (static_cast<double>(column) + 0.5) * column_width;
    const std::string label = column < values.size() ? std::to_string(values[column]) : "none";
    out << "<text x=\"" << x << "\" y=\"" << kHeight - kBottom + 13 << "\" text-anchor=\"middle\">"
        << escape_html(label) << "</text>";
  }
  out << "<text x=\"" << kLeft + plot_width / 2 << "\" y=\"" << kHeight - 4
      << "\" text-anchor=\"middle\">" << escape_html(knob.name) << " (time: log scale)</text>";

  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const CandidateRecord& candidate = candidates[i];
    const std::optional<std::int64_t> value = candidate.schedule.get(knob.name);
    const std::size_t column =
        value ? static_cast<std::size_t>(std::lower_bound(values.begin(), values.end(), *value) -
                                         values.begin())
              : values.size();
    // Spread within the column by the candidate's index, so that equal values stay apart.
    const double spread = (static_cast<double>((i * 7) % 11) / 10.0 - 0.5) * 0.6;
    const double x = kLeft + (static_cast<double>(column) + 0.5 + spread) * column_width;
    const Standing standing = standing_of(candidate, tuning, default_schedule);
    const std::string attributes = " data-candidate=\"" + std::to_string(i) + "\"";
    const std::string title =
        "<title>" + escape_html(candidate_title(candidate, standing)) + "</title>";
    if (!candidate.timing || !axis) {
      const double y = kBandTop + kBandHeight / 2;
      out << "<path class=\"mark failed\"" << attributes << " d=\"M" << x - 4 << " " << y - 4
          << " L" << x + 4 << " " << y + 4 << " M" << x - 4 << " " << y + 4 << " L" << x + 4 << " "
          << y - 4 << "\">" << title << "</path>";
      continue;
    }
    const double y = kTop + axis->fraction(candidate.timing->median_ns) * plot_height;
    const char* shape_class = standing_class(standing);
    if (standing == Standing::kDefault) {
      out << "<rect class=\"mark " << shape_class << "\"" << attributes << " x=\"" << x - 4
          << "\" y=\"" << y - 4 << "\" width=\"8\" height=\"8\">" << title << "</rect>";
    } else {
      out << "<circle class=\"mark " << shape_class << "\"" << attributes << " cx=\"" << x
          << "\" cy=\"" << y << "\" r=\"" << (standing == Standing::kWinner ? 5.5 : 4) << "\">"
          << title << "</circle>";
    }
  }
  out << "</svg></figure>";
}

void write_legend(std::ostringstream& out) {
  out << "<p class=\"legend\">"
      << "<svg width=\"14\" height=\"14\"><circle class=\"winner\" cx=\"7\" cy=\"7\" "
         "r=\"5\"/></svg> winner "
      << "<svg width=\"14\" height=\"14\"><rect class=\"default\" x=\"3\" y=\"3\" width=\"8\" "
         "height=\"8\"/></svg> default schedule "
      << "<svg width=\"14\" height=\"14\"><circle class=\"finalist\" cx=\"7\" cy=\"7\" "
         "r=\"4\"/></svg> finalist "
      << "<svg width=\"14\" height=\"14\"><circle class=\"candidate\" cx=\"7\" cy=\"7\" "
         "r=\"4\"/></svg> other candidate "
      << "<svg width=\"14\" height=\"14\"><circle class=\"failed\" cx=\"7\" cy=\"7\" "
         "r=\"4\"/></svg> failed after its timing "
      << "<svg width=\"14\" height=\"14\"><path class=\"failed\" d=\"M3 3 L11 11 M3 11 L11 "
         "3\"/></svg> failed before a timing (top band). Each mark is a candidate's first "
         "timing (its median), one per candidate in every strip.</p>";
}

// The copy ceiling's time for the entry's bytes, from the rate the copy kernels reached.
std::optional<double> ceiling_ns(const forge::BucketReport& bucket) {
  if (!bucket.copy_ceiling || bucket.copy_ceiling->bytes == 0 || bucket.work.bytes == 0) {
    return std::nullopt;
  }
  return bucket.copy_ceiling->median_ns * static_cast<double>(bucket.work.bytes) /
         static_cast<double>(bucket.copy_ceiling->bytes);
}

// Horizontal bars on a linear time axis: the winner, the default and the copy ceiling.
void write_comparison_bars(std::ostringstream& out, const forge::BucketReport& bucket) {
  struct Bar {
    const char* label;
    const char* css;
    double ns;
  };
  std::vector<Bar> bars = {{"winner", "bar-winner", bucket.tuning.result.winner.timing.median_ns}};
  if (bucket.tuning.context.baseline) {
    bars.push_back({"default", "bar-default", bucket.tuning.context.baseline->timing.median_ns});
  }
  if (std::optional<double> ceiling = ceiling_ns(bucket)) {
    bars.push_back({"copy ceiling", "bar-ceiling", *ceiling});
  }
  double longest = 0;
  for (const Bar& bar : bars) longest = std::max(longest, bar.ns);
  constexpr double kWidth = 560, kLeft = 90, kRowHeight = 22, kTextRoom = 80;
  const double height = kRowHeight * static_cast<double>(bars.size()) + 6;
  out << "<svg class=\"comparison\" width=\"" << kWidth << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << kWidth << " " << height
      << "\" role=\"img\" aria-label=\"winner against the default and the copy ceiling\">";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double y = 4 + kRowHeight * static_cast<double>(i);
    const double length = longest > 0 ? (kWidth - kLeft - kTextRoom) * bars[i].ns / longest : 0.0;
    out << "<text x=\"" << kLeft - 6 << "\" y=\"" << y + 13 << "\" text-anchor=\"end\">"
        << bars[i].label << "</text><rect class=\"" << bars[i].css << "\" x=\"" << kLeft
        << "\" y=\"" << y << "\" width=\"" << length << "\" height=\"" << kRowHeight - 6
        << "\"/><text x=\"" << kLeft + length + 4 << "\" y=\"" << y + 13 << "\">"
        << escape_html(format_duration(bars[i].ns)) << "</text>";
  }
  out << "</svg>";
}

// The rate of `ns` at the entry's problem in the kernel's own unit, when both are known.
std::string rate_of(const forge::BucketReport& bucket, double ns) {
  Result<const kernels::KernelDefinition*> kernel = kernels::find_kernel(bucket.tuning.kernel_id);
  if (!kernel || !bucket.problem || !(ns > 0)) return "";
  return rate_text(forge::throughput(**kernel, *bucket.problem, ns));
}

void write_summary(std::ostringstream& out, const forge::BucketReport& bucket) {
  const TuningManifest& tuning = bucket.tuning;
  const CandidateResult& winner = tuning.result.winner;
  out << "<table class=\"summary\"><tr><th></th><th>schedule</th><th>median</th><th>MAD</th>"
         "<th>rate</th><th></th></tr>";
  out << "<tr><th>winner</th><td><code>" << escape_html(winner.schedule.to_string())
      << "</code></td><td class=\"number winner-time\">"
      << escape_html(format_duration(winner.timing.median_ns)) << "</td><td class=\"number\">"
      << escape_html(format_duration(winner.timing.mad_ns)) << "</td><td class=\"number\">"
      << escape_html(rate_of(bucket, winner.timing.median_ns)) << "</td><td>"
      << winner.timing.sample_count << " samples, "
      << escape_html(timing_source_name(winner.timing.source)) << "</td></tr>";
  if (tuning.context.baseline) {
    const CandidateResult& baseline = *tuning.context.baseline;
    std::string speedup;
    if (std::optional<double> ratio = tuning.speedup_over_baseline()) {
      speedup = "winner " + speedup_text(*ratio) + " faster";
    }
    out << "<tr><th>default</th><td><code>" << escape_html(baseline.schedule.to_string())
        << "</code></td><td class=\"number default-time\">"
        << escape_html(format_duration(baseline.timing.median_ns)) << "</td><td class=\"number\">"
        << escape_html(format_duration(baseline.timing.mad_ns)) << "</td><td class=\"number\">"
        << escape_html(rate_of(bucket, baseline.timing.median_ns)) << "</td><td>"
        << escape_html(speedup) << "</td></tr>";
  } else {
    out << "<tr><th>default</th><td colspan=\"5\">not timed with the finalists (it failed or "
           "the search did not time it)</td></tr>";
  }
  if (std::optional<double> ceiling = ceiling_ns(bucket)) {
    const double copy_rate =
        static_cast<double>(bucket.copy_ceiling->bytes) / bucket.copy_ceiling->median_ns;
    const double winner_rate = static_cast<double>(bucket.work.bytes) / winner.timing.median_ns;
    out << "<tr><th>copy ceiling</th><td>" << escape_html(bucket.copy_ceiling->description)
        << "</td><td class=\"number ceiling-time\">" << escape_html(format_duration(*ceiling))
        << "</td><td></td><td class=\"number\">" << format_number("%.1f GB/s", copy_rate)
        << "</td><td>winner at " << format_number("%.0f%%", 100 * winner_rate / copy_rate)
        << " of the copy ceiling (" << bucket.work.bytes << " bytes moved)</td></tr>";
  } else {
    out << "<tr><th>copy ceiling</th><td colspan=\"5\" class=\"no-ceiling\">not measured: the "
           "cache records no copy rate of the adapter (<code>wgsl-forge report "
           "--copy-ceiling</code> measures it, on the adapter the entry was tuned on)</td></tr>";
  }
  out << "</table>";
  if (!tuning.context.ties.empty()) {
    out << "<p>Within noise of the winner:";
    for (const Schedule& tie : tuning.context.ties) {
      out << " <code>" << escape_html(tie.to_string()) << "</code>";
    }
    out << "</p>";
  }
}

void write_candidate_table(std::ostringstream& out, const TuningManifest& tuning,
                           const Schedule& default_schedule) {
  const std::vector<CandidateRecord>& candidates = tuning.result.candidates;
  out << "<details open><summary>" << candidates.size()
      << " candidates, in the order the search tried them</summary><table class=\"candidates\">"
         "<tr><th>#</th><th>schedule</th><th>origin</th><th>median</th><th>MAD</th>"
         "<th>samples</th><th>outcome</th></tr>";
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const CandidateRecord& candidate = candidates[i];
    const Standing standing = standing_of(candidate, tuning, default_schedule);
    std::string outcome = standing_class(standing);
    if (candidate.finalist && standing != Standing::kFinalist) outcome += ", finalist";
    if (candidate.failure)
      outcome += std::string(" (") + failure_stage_name(candidate.failure->stage) + ")";
    out << "<tr class=\"candidate-row\" data-candidate=\"" << i << "\"><td class=\"number\">" << i
        << "</td><td><code>" << escape_html(candidate.schedule.to_string()) << "</code></td><td>"
        << candidate_origin_name(candidate.origin) << "</td>";
    if (candidate.timing) {
      out << "<td class=\"number\">" << escape_html(format_duration(candidate.timing->median_ns))
          << "</td><td class=\"number\">" << escape_html(format_duration(candidate.timing->mad_ns))
          << "</td><td class=\"number\">" << candidate.timing->sample_count << "</td>";
    } else {
      out << "<td></td><td></td><td></td>";
    }
    out << "<td>" << escape_html(outcome) << "</td></tr>";
  }
  out << "</table></details>";
}

void write_failures(std::ostringstream& out, const TuningManifest& tuning) {
  const std::vector<CandidateFailure> failures = tuning.result.failures();
  if (failures.empty()) {
    out << "<p class=\"no-failures\">No candidate failed.</p>";
    return;
  }
  out << "<div class=\"failures\"><h4>Failures by stage (" << failures.size() << ")</h4>";
  for (FailureStage stage :
       {FailureStage::kCompile, FailureStage::kValidation, FailureStage::kExecution,
        FailureStage::kMismatch, FailureStage::kTimeout, FailureStage::kDeviceLost}) {
    std::vector<const CandidateFailure*> of_stage;
    for (const CandidateFailure& failure : failures) {
      if (failure.stage == stage) of_stage.push_back(&failure);
    }
    if (of_stage.empty()) continue;
    out << "<section class=\"failure-stage\" data-stage=\"" << failure_stage_name(stage)
        << "\"><h5>" << failure_stage_name(stage) << " (" << of_stage.size() << ")</h5>";
    for (const CandidateFailure* failure : of_stage) {
      out << "<div class=\"failure\"><code>" << escape_html(failure->schedule.to_string())
          << "</code><pre class=\"message\">" << escape_html(failure->message) << "</pre></div>";
    }
    out << "</section>";
  }
  out << "</div>";
}

void write_certification(std::ostringstream& out, const forge::BucketReport& bucket) {
  if (!bucket.certification) {
    out << "<p class=\"no-certification\">Certification of the winner: "
        << escape_html(bucket.certification_missing) << "</p>";
    return;
  }
  const CertificationManifest& certification = *bucket.certification;
  std::size_t passed = 0;
  for (const CertificationCase& one : certification.cases) passed += one.passed() ? 1u : 0u;
  const bool certified = certification.verdict == Verdict::kCertified;
  out << "<details class=\"certification\"><summary>Certification of the winner: <span class=\""
      << (certified ? "passed" : "rejected") << "\">" << verdict_name(certification.verdict)
      << "</span>, " << passed << " of " << certification.cases.size()
      << " cases passed (tolerance: " << escape_html(certification.tolerance)
      << ")</summary><table class=\"cases\"><tr><th>case</th><th>elements</th><th>values</th>"
         "<th>seed</th><th>runs</th><th>result</th><th>max abs error</th><th>max rel error</th>"
         "<th>details</th></tr>";
  for (const CertificationCase& one : certification.cases) {
    std::string details;
    for (const std::string& check : one.failed_checks)
      details += (details.empty() ? "" : "; ") + check;
    if (one.report.first_mismatch) {
      const Mismatch& mismatch = *one.report.first_mismatch;
      details += (details.empty() ? "" : "; ") + std::string("first mismatch at ") +
                 std::to_string(mismatch.index) + ": " + format_number("%.9g", mismatch.actual) +
                 ", expected " + format_number("%.9g", mismatch.expected);
    }
    out << "<tr class=\"case\"><td>" << escape_html(one.name) << "</td><td class=\"number\">"
        << one.element_count << "</td><td>" << escape_html(one.value_profile)
        << "</td><td class=\"number\">" << one.seed << "</td><td class=\"number\">" << one.runs
        << "</td><td class=\"" << (one.passed() ? "passed\">passed" : "rejected\">failed")
        << "</td><td class=\"number\">" << format_number("%.3g", one.report.max_absolute_error)
        << "</td><td class=\"number\">" << format_number("%.3g", one.report.max_relative_error)
        << "</td><td>" << escape_html(details) << "</td></tr>";
  }
  out << "</table></details>";
}

std::string anchor_of(std::string_view kernel_id) {
  std::string anchor = "kernel-";
  for (char c : kernel_id) anchor += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return anchor;
}

void write_bucket(std::ostringstream& out, const forge::KernelReport& kernel,
                  const forge::BucketReport& bucket) {
  const TuningManifest& tuning = bucket.tuning;
  out << "<section class=\"bucket\" data-kernel=\"" << escape_html(kernel.kernel_id)
      << "\" data-bucket=\"" << escape_html(bucket.bucket) << "\" data-candidates=\""
      << tuning.result.candidates.size() << "\"><h3>" << escape_html(kernel.kernel_id) << " at "
      << escape_html(bucket.bucket) << (bucket.main_bucket ? " (main bucket)" : "") << "</h3>";
  out << "<p class=\"adapter\">"
      << (bucket.problem ? escape_html(bucket.problem->to_string()) + ", " : std::string())
      << "adapter " << escape_html(tuning.adapter.name) << " ("
      << escape_html(tuning.adapter.device_type) << (tuning.adapter.driver_info.empty() ? "" : ", ")
      << escape_html(tuning.adapter.driver_info) << "), topology "
      << escape_html(tuning.context.topology_hash.value_or("not recorded").substr(0, 16))
      << ", revision " << tuning.kernel_revision << ", tuned "
      << escape_html(tuning.context.tuned_at);
  if (!tuning.context.toggles.empty()) {
    out << ", toggles";
    for (const std::string& toggle : tuning.context.toggles) out << " " << escape_html(toggle);
  }
  out << "</p>";
  if (!bucket.unusable.empty()) {
    out << "<p class=\"warning\">This build does not use this entry: "
        << escape_html(bucket.unusable) << "</p>";
  }
  write_summary(out, bucket);
  write_comparison_bars(out, bucket);
  const std::optional<TimeAxis> axis = time_axis(tuning.result.candidates);
  out << "<div class=\"strips\">";
  for (const kernels::KnobSpec& knob : kernel.knobs) {
    write_knob_strip(out, knob, tuning, kernel.default_schedule, axis);
  }
  out << "</div>";
  write_legend(out);
  write_candidate_table(out, tuning, kernel.default_schedule);
  write_failures(out, tuning);
  write_certification(out, bucket);
  out << "</section>";
}

void write_kernel(std::ostringstream& out, const forge::KernelReport& kernel) {
  out << "<section class=\"kernel\" id=\"" << anchor_of(kernel.kernel_id) << "\" data-kernel=\""
      << escape_html(kernel.kernel_id) << "\"><h2>" << escape_html(kernel.kernel_id) << "</h2><p>"
      << escape_html(kernel.summary) << "</p>";
  if (kernel.buckets.empty()) {
    out << "<p class=\"no-tuning\">No tuning of " << escape_html(kernel.kernel_id)
        << " in this cache";
    if (kernel.journaled_measurements > 0) {
      out << ", but " << kernel.journaled_measurements
          << " candidate measurements are journaled: a search of it was interrupted, and the "
             "next one resumes from them";
    }
    out << ". <code>wgsl-forge tune " << escape_html(kernel.kernel_id)
        << "</code> or <code>wgsl-forge auto-tune-all</code> tunes it.</p>";
  }
  for (const forge::BucketReport& bucket : kernel.buckets) write_bucket(out, kernel, bucket);
  out << "</section>";
}

}  // namespace

std::string escape_html(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default: {
        const auto byte = static_cast<unsigned char>(c);
        const bool control = (byte < 0x20 && c != '\t' && c != '\n' && c != '\r') || byte == 0x7f;
        escaped += control ? std::string("\xEF\xBF\xBD") : std::string(1, c);
      }
    }
  }
  return escaped;
}

std::string format_duration(double ns) {
  if (ns >= 1e9) return format_number("%.3f s", ns / 1e9);
  if (ns >= 1e6) return format_number("%.2f ms", ns / 1e6);
  if (ns >= 1e3) return format_number("%.1f us", ns / 1e3);
  return format_number("%.0f ns", ns);
}

std::string render_report_page(const forge::TuningReport& report, std::string_view version) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
         "<title>wgsl-forge tuning report</title><style>"
      << kStyle << "</style></head><body>";
  out << "<h1>wgsl-forge tuning report</h1><p class=\"meta\">Cache "
      << escape_html(report.cache_root.string()) << ": tuning entries " << report.bucket_count()
      << ", candidates " << report.candidate_count() << ", kernels " << report.kernels.size()
      << ".</p>";
  if (!report.unreadable.empty()) {
    out << "<section class=\"unreadable\"><h2>Files the report could not read</h2><ul>";
    for (const forge::TuningReport::Unreadable& file : report.unreadable) {
      out << "<li><code>" << escape_html(file.path.string())
          << "</code>: " << escape_html(file.reason) << "</li>";
    }
    out << "</ul></section>";
  }
  out << "<nav><ul>";
  for (const forge::KernelReport& kernel : report.kernels) {
    out << "<li><a href=\"#" << anchor_of(kernel.kernel_id) << "\">"
        << escape_html(kernel.kernel_id) << "</a>: ";
    if (kernel.buckets.empty()) out << "no tuning";
    for (std::size_t i = 0; i < kernel.buckets.size(); ++i) {
      out << (i == 0 ? "" : ", ") << escape_html(kernel.buckets[i].bucket);
    }
    out << "</li>";
  }
  out << "</ul></nav>";
  for (const forge::KernelReport& kernel : report.kernels) write_kernel(out, kernel);
  out << "<footer>Written by wgsl-forge " << escape_html(version)
      << ". Times are medians of GPU timestamps (or the timing source shown) from the tuning "
         "manifests; each candidate's mark is its first timing, the winner's and the "
         "default's figures are from the finalists' re-timing.</footer></body></html>\n";
  return out.str();
}

Status write_file_atomically(const fs::path& file, std::string_view bytes, FileSystem& files) {
  const fs::path directory = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::random_device entropy;
  const fs::path temporary =
      directory / ("." + file.filename().string() + "." + std::to_string(::getpid()) + "." +
                   std::to_string(entropy()) + ".tmp");
  auto failure = [&](const char* operation) {
    const int error = errno;
    return Error(ErrorKind::kIo, "Cannot write " + file.string() + " (" + operation + ": " +
                                     std::strerror(error) + "); it is left as it was.");
  };
  const int fd = files.open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return failure("creating a temporary file beside it");
  auto abandon = [&](const char* operation, bool open) {
    Error error = failure(operation);
    if (open) files.close(fd);
    files.unlink(temporary.c_str());
    return error;
  };
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t count = files.write(fd, bytes.data() + written, bytes.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      if (count == 0) errno = ENOSPC;
      return abandon("writing", true);
    }
    written += static_cast<std::size_t>(count);
  }
  if (files.fsync(fd) != 0) return abandon("flushing", true);
  if (files.close(fd) != 0) return abandon("closing", false);
  if (files.rename_replacing(temporary.c_str(), file.c_str()) != 0) {
    return abandon("renaming the temporary file over it", false);
  }
  // The new name made durable. The file is complete by now, so a failure here says so.
  const int directory_fd = files.open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  const bool flushed = directory_fd >= 0 && files.fsync(directory_fd) == 0;
  if (!flushed) {
    const int error = errno;
    if (directory_fd >= 0) files.close(directory_fd);
    return Error(ErrorKind::kIo, "Wrote " + file.string() + ", but cannot flush its directory (" +
                                     std::strerror(error) +
                                     "): a crash of the machine now may lose the new file.");
  }
  files.close(directory_fd);
  return Ok{};
}

}  // namespace wgsl_forge::cli
