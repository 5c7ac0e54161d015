#pragma once
// The on-disk form of manifests: canonical JSON.
//
// Grammar (tuning schema_version 3, certification 2, measurement 1). Every manifest is one JSON
// object:
//   tuning:        {"adapter", "backend", "cache_key", "content_hash", "context", "kernel_id",
//                   "kernel_revision", "manifest_kind": "tuning", "result", "schema_version": 3,
//                   "source_hash"}
//                  result: {"candidates": [CandidateRecord...], "finalists", "winner"}, where a
//                  CandidateRecord is {"failure": {"message", "stage"} or null, "finalist": bool,
//                  "origin": "measured" | "resumed" | "failed_before", "schedule", "timing" or
//                  null}; context has "tuned_at" ("2026-12-02T15:33:31Z")
//   certification: {"adapter", "backend", "cache_key" (string or null), "cases", "content_hash",
//                   "kernel_id", "kernel_revision", "manifest_kind": "certification", "schedule",
//                   "schema_version": 2, "source_hash", "tolerance", "topology_hash" (or null),
//                   "verdict": "certified" | "rejected"}; each case has "runs" (>= 1)
//   measurement:   {"cache_key", "candidate" (a CandidateRecord), "content_hash", "kernel_id",
//                   "kernel_revision", "manifest_kind": "measurement", "problem", "recorded_at",
//                   "schema_version": 1, "source_hash", "topology_hash"}
// The nested objects carry the fields of the C++ structs of the same name in model.hpp, under the
// same names; enums are lower_snake_case strings; a Schedule is an object of knob -> integer.
// "content_hash" is the BLAKE3 of the canonical bytes of the object without that field, so that
// any change to a stored file, even one that leaves valid JSON, is detected on reading.
//
// Canonical form, so that the same value always gives the same bytes and the cache can compare
// entries byte for byte:
//   - objects list their keys in byte order; two-space indentation; one trailing newline;
//   - integers are written as integers; every floating-point field is written as the shortest
//     decimal that reads back to the same double, always with a fraction or exponent ("10.0");
//   - non-finite doubles are the strings "NaN", "Infinity" and "-Infinity" (JSON has no literal
//     for them); all NaNs read back as one quiet NaN; -0.0 is kept as "-0.0";
//   - strings are UTF-8; a value holding invalid UTF-8 cannot be serialized (an error, not a
//     replacement character).
// Reading accepts only the canonical bytes of a valid value with a matching content hash: a file
// that parses but is not what serializing its value would write (hand-edited, reordered, extra
// fields) is an error.
//
// Limits, checked before any JSON parser sees the bytes, so that no input can exhaust the stack or
// the memory of a reader:
//   - kMaxManifestBytes: a manifest is a few KiB (a certification with every case about 20 KiB),
//     so a larger input is refused; the cache refuses a larger file from its size, before
//     reading it. Reading a manifest then takes a small, bounded multiple of its size.
//   - kMaxManifestNesting: manifests nest arrays and objects at most 5 levels deep, and the JSON
//     parser and the copies and dumps after it recurse once per level, so an input nested deeper
//     (counted by a linear scan that skips strings) is refused.
//
// Version policy: schema_version is an integer that changes whenever a field is added, removed or
// changes meaning. Readers accept exactly the versions they know (tuning 3, certification 2,
// measurement 1) and name any other; an entry of an older version is re-tuned, never
// reinterpreted. History:
//   - tuning 2 added context.bucket (the size bucket, null for the kernel's main one) to the
//     manifest and to its cache key. A tuning entry of version 1 reads as a corruption naming
//     schema_version: `cache verify` lists it, the library runs the default schedule with that
//     reason, and auto-tune-all tunes the kernel again and replaces the entry (a damaged entry
//     is replaced without --retune).
//   - tuning 3 keeps every candidate the search looked at (result.candidates: its schedule,
//     origin, first timing or failure, and whether it was a finalist; evaluated_candidates,
//     rejected_candidates and failures are now derived from it) and when the search ended
//     (context.tuned_at). Certification 2 records how many times each case ran (runs): a
//     winner's cases run twice and must agree bit for bit. Measurement 1 is new: one candidate's
//     outcome, stored as soon as it is known, from which an interrupted search resumes. Entries
//     of tuning 2 read as corrupt naming schema_version and are re-tuned as above;
//     certification entries of version 1 read as corrupt too (they are evidence only: nothing
//     runs because of one, and auto-tune-all stores new evidence beside the old key's file only
//     when it re-tunes).

#include <cstddef>
#include <string>
#include <string_view>

#include "wgsl_forge/error.hpp"
#include "wgsl_forge/model.hpp"

namespace wgsl_forge {

inline constexpr std::size_t kMaxManifestBytes = std::size_t{16} << 20;
inline constexpr std::size_t kMaxManifestNesting = 64;

Result<std::string> serialize_manifest(const TuningManifest& manifest);
Result<std::string> serialize_manifest(const CertificationManifest& manifest);
Result<std::string> serialize_manifest(const MeasurementRecord& record);

// Parse errors have kind kSerialization and name the field (e.g. "result.winner.timing.source").
Result<TuningManifest> parse_tuning_manifest(std::string_view bytes);
Result<CertificationManifest> parse_certification_manifest(std::string_view bytes);
Result<MeasurementRecord> parse_measurement_record(std::string_view bytes);

// The deepest nesting of arrays and objects in `bytes`, found in one linear pass that skips
// strings (a bracket inside a string, or an escaped quote, does not count): the check that runs
// before any JSON parser sees untrusted bytes (manifests here, bundles in bundle.hpp).
std::size_t json_nesting_depth(std::string_view bytes);

// Canonical JSON of small values, for hashing and for the CLI's --json output.
Result<std::string> canonical_json(const AdapterIdentity& adapter);
Result<std::string> canonical_json(const Schedule& schedule);

}  // namespace wgsl_forge
