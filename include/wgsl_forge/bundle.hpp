#pragma once
// Bundles: the entries of a manifest cache in one file, to ship a fleet's tuning with a release or
// to carry it to another machine (`wgsl-forge cache export FILE` and `cache import FILE`).
//
// Format (format_version 1). One JSON object in canonical form: keys in byte order, two-space
// indentation, one trailing newline, exactly what serialize_bundle writes:
//   {"content_hash":   BLAKE3, hex, of the canonical bytes of this object without content_hash,
//    "entries":        [{"bytes": the entry file's exact bytes, as a JSON string,
//                        "key":   64 lowercase hexadecimal characters,
//                        "kind":  "certification" | "tuning"}, ...]
//                      in (kind, key) byte order, each (kind, key) once,
//    "entry_count":    the number of entries,
//    "format":         "wgsl-forge-bundle",
//    "format_version": 1}
// There is no creation time, so the same entries always make the same bytes.
//
// Tuning and certification entries are carried; measurement records are not. They are one
// machine's journal of its searches: the timings from which its interrupted search resumes, and
// the schedules that failed there once, which it never runs again. Shipped, one node's passing
// failure (a timeout under load) would ban a schedule on every node that imports it, and another
// machine's timings would mix into a local search; the tuning manifest already records every
// candidate of the search that made it.
//
// Reading trusts nothing, and refuses the whole bundle, naming the check (and the entry, by its
// place, kind and key), when any of these fails, in this order: the size and nesting limits
// below (before a parser sees the bytes), valid JSON (the byte where it is not), the envelope's
// fields (no field missing or unknown, the format and its version, an entry_count within the
// limit that counts the entries), then each entry: its fields, its kind, a key of 64 lowercase
// hexadecimal characters (no path can be formed from it), no (kind, key) twice, and exactly the
// checks the cache makes when it reads an entry's file (check_entry_content in cache.hpp:
// canonical bytes, content hash, invariants, the key belongs to the content); then the bundle's
// content hash, and last that the bytes are the canonical form of what was read. A single
// changed byte anywhere fails one of these.
//
// Version policy: format_version changes whenever the envelope changes, and readers accept
// exactly the versions they know. The entries carry their own schema versions
// (manifest_json.hpp): an entry of a version this build does not read is refused, as the cache
// refuses its file.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "wgsl_forge/cache.hpp"
#include "wgsl_forge/error.hpp"

namespace wgsl_forge {

inline constexpr std::uint32_t kBundleFormatVersion = 1;
inline constexpr std::string_view kBundleFormatName = "wgsl-forge-bundle";
// A manifest is a few KiB (at most 16 MiB, kMaxManifestBytes); a whole catalog tuned at every
// size bucket with its certifications is well under 10 MiB.
inline constexpr std::size_t kMaxBundleBytes = std::size_t{256} << 20;
inline constexpr std::size_t kMaxBundleEntries = 65536;
// The object, its entries array and each entry; a manifest inside is a string.
inline constexpr std::size_t kMaxBundleNesting = 3;

// The canonical bytes of a bundle of `entries`, which it sorts into (kind, key) order.
// kInvalidInput for a measurement entry, a key that is not 64 lowercase hexadecimal characters,
// a (kind, key) given twice or more than kMaxBundleEntries entries; kSerialization for bytes
// that are not UTF-8. The entries are not checked here: export_bundle takes them from the cache
// after check_entry_content.
Result<std::string> serialize_bundle(std::vector<EntryBytes> entries);

// The entries of a bundle, after every check above; otherwise a kCorruption error naming the
// check that failed.
Result<std::vector<EntryBytes>> parse_bundle(std::string_view bytes);

struct BundleExportOptions {
  std::vector<std::string> kernels;  // only entries of these kernels; empty: every entry
};

struct BundleExportReport {
  struct Skipped {
    std::filesystem::path path;
    std::string reason;
  };
  std::size_t tuning = 0;  // entries written to the bundle, by kind
  std::size_t certification = 0;
  std::size_t measurements_left_out = 0;
  std::vector<Skipped> damaged;  // entries that fail check_entry_content: never shipped
  std::uint64_t bytes = 0;       // the bundle's size
};

// Writes the cache's valid tuning and certification entries (of `options.kernels`) to `file`:
// to a temporary file beside it, flushed, then renamed over `file`, so that a failed or killed
// export leaves `file` as it was (whatever was there, or nothing). Damaged entries are left out
// and reported. A kernel of `options.kernels` with no entry is a kInvalidInput error. Every file
// operation goes through the cache's FileSystem.
Result<BundleExportReport> export_bundle(const ManifestCache& cache,
                                         const std::filesystem::path& file,
                                         const BundleExportOptions& options = {});

// Reads `file` (a regular file of at most kMaxBundleBytes), checks every entry (parse_bundle)
// and then stores them all or none (ManifestCache::store_all_or_none): a damaged or hostile
// bundle (kCorruption), an entry that differs from the one the cache holds under its key
// (kCollision) or a failure of the disk (kIo) leaves the cache as it was. A missing file is a
// kInvalidInput error.
Result<StoreAllReport> import_bundle(const ManifestCache& cache, const std::filesystem::path& file);

}  // namespace wgsl_forge
