#pragma once
// The page of `wgsl-forge report`: one self-contained HTML document (inline CSS and SVG, no
// script, no font or image fetched) drawn from a forge::TuningReport. Every string that comes from
// the cache is escaped: whoever can write the cache directory can write any text into a manifest
// (a failure message, a bucket label), and it must show as text, never as markup.
//
// What the page shows, per kernel and size bucket: the winner against the default schedule and,
// when measured, the copy ceiling (bars on a linear time axis); one strip per knob with one mark
// per candidate at its first timing on a log time axis (failed candidates without a timing in a
// band above the axis); the candidates as a table; failures grouped by stage with their
// messages; the winner's certification cases (size, profile, seed, runs, result).
//
// Marks carry classes and data attributes that tests (and readers of the DOM) can count: each
// strip is an <svg class="knob-strip" data-knob="NAME"> holding one element of class "mark" per
// candidate, with data-candidate="INDEX" (its index in result.candidates).

#include <filesystem>
#include <string>
#include <string_view>

#include "wgsl_forge/error.hpp"
#include "wgsl_forge/file_system.hpp"
#include "wgsl_forge/tuning_report.hpp"

namespace wgsl_forge::cli {

// The text with &, <, >, " and ' replaced by character references, and control characters
// (other than tab, line feed and carriage return), which HTML does not allow, by U+FFFD: safe in
// element content and in quoted attribute values.
std::string escape_html(std::string_view text);

// A median as the page prints it: "812.4 us", "3.21 ms", "1.234 s".
std::string format_duration(double ns);

// The whole page. `version` is printed in its footer.
std::string render_report_page(const forge::TuningReport& report, std::string_view version);

// Writes `bytes` to `file` so that `file` holds either its old content or all of the new: a
// temporary file in the same directory is written, flushed and renamed over `file`, and the
// directory flushed; on any failure the temporary file is removed and `file` is left as it was.
// The error (kIo) names the file and the operation that failed.
Status write_file_atomically(const std::filesystem::path& file, std::string_view bytes,
                             FileSystem& files);

}  // namespace wgsl_forge::cli
