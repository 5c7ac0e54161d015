#include "wgsl_forge/bundle.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "cache/file_io.hpp"
#include "util/try.hpp"
#include "wgsl_forge/hash.hpp"
#include "wgsl_forge/manifest_json.hpp"

namespace wgsl_forge {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr const char* kContentHashField = "content_hash";
constexpr file_io::FileRole kBundleFile{"Bundle", "a bundle", kMaxBundleBytes};

bool is_lowercase_hex_digest(std::string_view key) {
  return is_hex_digest(key) && file_io::lowercase(key) == key;
}

// A text from an untrusted file, made safe to print: at most 80 characters, anything but
// printable ASCII as '?'.
std::string shown(std::string_view text) {
  std::string safe;
  for (char c : text.substr(0, 80)) safe.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > 80) safe += "...";
  return safe;
}

// Entries in the order a bundle lists them: by kind name, then key, in byte order.
bool bundle_order(const EntryBytes& a, const EntryBytes& b) {
  const std::string_view kind_a = manifest_kind_name(a.kind);
  const std::string_view kind_b = manifest_kind_name(b.kind);
  return kind_a != kind_b ? kind_a < kind_b : a.key < b.key;
}

Result<std::string> dump_canonical(const Json& document) {
  try {
    return document.dump(2, ' ', false, Json::error_handler_t::strict) + "\n";
  } catch (const Json::exception& exception) {
    return Error(ErrorKind::kSerialization,
                 std::string("Cannot write a bundle: an entry is not valid UTF-8 (") +
                     exception.what() + ").");
  }
}

// BLAKE3 of the canonical bytes of `document` without its content_hash field.
Result<std::string> content_hash_of(Json document) {
  document.erase(kContentHashField);
  WF_TRY_ASSIGN(std::string body, dump_canonical(document));
  return blake3_hex(body);
}

Error refused(const std::string& reason) { return Error(ErrorKind::kCorruption, reason); }

// Checks that `object` has exactly the fields `names`, each of the JSON type its check accepts.
Status require_fields(const Json& object, const std::vector<const char*>& names,
                      const std::string& where) {
  for (const char* name : names) {
    if (!object.contains(name)) return refused(where + " has no field '" + name + "'.");
  }
  for (const auto& [name, value] : object.items()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return refused(where + " has a field this format does not know ('" + shown(name) + "').");
    }
  }
  return Ok{};
}

// The kind a bundle entry names; measurement records and unknown kinds are refused.
Result<ManifestKind> bundle_entry_kind(const std::string& kind, const std::string& where) {
  if (kind == manifest_kind_name(ManifestKind::kTuning)) return ManifestKind::kTuning;
  if (kind == manifest_kind_name(ManifestKind::kCertification)) {
    return ManifestKind::kCertification;
  }
  if (kind == manifest_kind_name(ManifestKind::kMeasurement)) {
    return refused(where +
                   " is a measurement record; bundles carry tuning and certification entries "
                   "only (measurements are one machine's search journal).");
  }
  return refused(where + " has kind '" + shown(kind) + "' (expected 'tuning' or 'certification').");
}

// Reads and checks one element of "entries" (everything but duplicates and the bundle's hash).
Result<EntryBytes> read_entry(const Json& element, std::size_t index, std::size_t count) {
  const std::string where = "Entry " + std::to_string(index + 1) + " of " + std::to_string(count);
  if (!element.is_object()) return refused(where + " is not a JSON object.");
  WF_TRY(require_fields(element, {"bytes", "key", "kind"}, where));
  for (const char* field : {"bytes", "key", "kind"}) {
    if (!element[field].is_string()) {
      return refused(where + ": field '" + field + "' is not a string.");
    }
  }
  EntryBytes entry;
  WF_TRY_ASSIGN(entry.kind, bundle_entry_kind(element["kind"].get<std::string>(), where));
  entry.key = element["key"].get<std::string>();
  if (!is_lowercase_hex_digest(entry.key)) {
    return refused(where + " has key '" + shown(entry.key) +
                   "', which is not 64 lowercase hexadecimal characters.");
  }
  entry.bytes = element["bytes"].get<std::string>();
  if (Result<EntrySummary> checked = check_entry_content(entry.kind, entry.key, entry.bytes);
      !checked) {
    return refused(where + " (" + manifest_kind_name(entry.kind) + " " + entry.key +
                   ") fails the check of a cache entry: " + checked.error().message());
  }
  return entry;
}

}  // namespace

Result<std::string> serialize_bundle(std::vector<EntryBytes> entries) {
  if (entries.size() > kMaxBundleEntries) {
    return Error(ErrorKind::kInvalidInput, "A bundle holds at most " +
                                               std::to_string(kMaxBundleEntries) + " entries (" +
                                               std::to_string(entries.size()) + " given).");
  }
  std::sort(entries.begin(), entries.end(), bundle_order);
  Json listed = Json::array();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const EntryBytes& entry = entries[i];
    const char* kind = manifest_kind_name(entry.kind);
    if (entry.kind == ManifestKind::kMeasurement) {
      return Error(ErrorKind::kInvalidInput, "Measurement record " + entry.key +
                                                 " cannot go into a bundle (bundles carry "
                                                 "tuning and certification entries).");
    }
    if (!is_lowercase_hex_digest(entry.key)) {
      return Error(ErrorKind::kInvalidInput, "Bundle entry key (" + shown(entry.key) +
                                                 ") is not 64 lowercase hexadecimal characters.");
    }
    if (i > 0 && entries[i - 1].kind == entry.kind && entries[i - 1].key == entry.key) {
      return Error(ErrorKind::kInvalidInput, "The " + std::string(kind) + " entry " + entry.key +
                                                 " is given twice; a bundle holds it once.");
    }
    listed.push_back({{"bytes", entry.bytes}, {"key", entry.key}, {"kind", kind}});
  }
  Json document = {{"entries", std::move(listed)},
                   {"entry_count", entries.size()},
                   {"format", kBundleFormatName},
                   {"format_version", kBundleFormatVersion}};
  WF_TRY_ASSIGN(std::string hash, content_hash_of(document));
  document[kContentHashField] = hash;
  return dump_canonical(document);
}

Result<std::vector<EntryBytes>> parse_bundle(std::string_view bytes) {
  if (bytes.size() > kMaxBundleBytes) {
    return refused("It is too large (" + std::to_string(bytes.size()) + " bytes, the limit is " +
                   std::to_string(kMaxBundleBytes) + ").");
  }
  if (std::size_t depth = json_nesting_depth(bytes); depth > kMaxBundleNesting) {
    return refused("It nests arrays and objects " + std::to_string(depth) +
                   " levels deep (a bundle nests " + std::to_string(kMaxBundleNesting) + ").");
  }
  Json document;
  try {
    document = Json::parse(bytes.begin(), bytes.end());
  } catch (const Json::parse_error& error) {
    // The parser counts the end of the input as one byte past it.
    return refused("It is not valid JSON (at byte " +
                   std::to_string(std::min<std::size_t>(error.byte, bytes.size())) + " of " +
                   std::to_string(bytes.size()) + ").");
  } catch (const Json::out_of_range&) {
    // A number beyond a double's range, such as 1e400 (found by the bundle parser's fuzzer).
    return refused("It holds a number too large for JSON's doubles.");
  }
  if (!document.is_object()) return refused("It is not a JSON object.");
  WF_TRY(require_fields(
      document, {kContentHashField, "entries", "entry_count", "format", "format_version"}, "It"));
  if (document["format"] != kBundleFormatName) {
    return refused("Field 'format' is " + shown(document["format"].dump()) + ", not \"" +
                   std::string(kBundleFormatName) + "\": it is not a wgsl-forge bundle.");
  }
  if (!document["format_version"].is_number_unsigned() ||
      document["format_version"].get<std::uint64_t>() != kBundleFormatVersion) {
    return refused("Field 'format_version' is " + shown(document["format_version"].dump()) +
                   "; this wgsl-forge reads only bundles of version " +
                   std::to_string(kBundleFormatVersion) + ".");
  }
  const Json& count_field = document["entry_count"];
  if (!count_field.is_number_unsigned()) {
    return refused("Field 'entry_count' is " + shown(count_field.dump()) +
                   ", not a count of entries.");
  }
  const std::uint64_t count = count_field.get<std::uint64_t>();
  if (count > kMaxBundleEntries) {
    return refused("Field 'entry_count' (" + std::to_string(count) +
                   ") exceeds the most entries a bundle holds (" +
                   std::to_string(kMaxBundleEntries) + ").");
  }
  const Json& listed = document["entries"];
  if (!listed.is_array()) return refused("Field 'entries' is not an array.");
  if (listed.size() != count) {
    return refused("It holds " + std::to_string(listed.size()) +
                   " entries, but field 'entry_count' says " + std::to_string(count) + ".");
  }
  const Json& recorded_hash = document[kContentHashField];
  if (!recorded_hash.is_string() || !is_lowercase_hex_digest(recorded_hash.get<std::string>())) {
    return refused("Field 'content_hash' is not 64 lowercase hexadecimal characters.");
  }

  std::vector<EntryBytes> entries;
  entries.reserve(listed.size());
  std::map<std::pair<ManifestKind, std::string>, std::size_t> first_place;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    WF_TRY_ASSIGN(EntryBytes entry, read_entry(listed[i], i, listed.size()));
    auto [place, inserted] = first_place.emplace(std::pair(entry.kind, entry.key), i);
    if (!inserted) {
      return refused("Entry " + std::to_string(i + 1) + " of " + std::to_string(listed.size()) +
                     " repeats entry " + std::to_string(place->second + 1) + " (" +
                     manifest_kind_name(entry.kind) + " " + entry.key +
                     "); a bundle holds each kind and key once.");
    }
    entries.push_back(std::move(entry));
  }

  WF_TRY_ASSIGN(std::string actual_hash, content_hash_of(document));
  if (actual_hash != recorded_hash.get<std::string>()) {
    return refused("Field 'content_hash' (" + recorded_hash.get<std::string>() +
                   ") does not match the content (" + actual_hash +
                   "): the bundle was changed after it was written.");
  }
  WF_TRY_ASSIGN(std::string rewritten, serialize_bundle(entries));
  if (rewritten != bytes) {
    return refused(
        "It is valid JSON but not in canonical form (re-indented, reordered or edited by hand); "
        "a bundle is byte-exact.");
  }
  return entries;
}

Result<BundleExportReport> export_bundle(const ManifestCache& cache, const fs::path& file,
                                         const BundleExportOptions& options) {
  BundleExportReport report;
  std::vector<EntryBytes> entries;
  std::set<std::string> kernels_found;
  WF_TRY_ASSIGN(std::vector<CacheEntry> listed, cache.list());
  for (const CacheEntry& entry : listed) {
    if (entry.kind == ManifestKind::kMeasurement) {
      ++report.measurements_left_out;
      continue;
    }
    Result<ManifestCache::Snapshot> snapshot = cache.snapshot(entry.kind, entry.key);
    if (!snapshot && snapshot.error().kind() != ErrorKind::kCorruption) {
      return std::move(snapshot).error().with_context("exporting " + cache.root().string());
    }
    if (snapshot && !snapshot->bytes) continue;  // removed since it was listed
    Result<EntrySummary> summary =
        snapshot ? check_entry_content(entry.kind, entry.key, *snapshot->bytes)
                 : Result<EntrySummary>(snapshot.error());
    if (!summary) {
      report.damaged.push_back({entry.path, summary.error().message()});
      continue;
    }
    const std::vector<std::string>& wanted = options.kernels;
    if (!wanted.empty() &&
        std::find(wanted.begin(), wanted.end(), summary->kernel_id) == wanted.end()) {
      continue;
    }
    kernels_found.insert(summary->kernel_id);
    ++(entry.kind == ManifestKind::kTuning ? report.tuning : report.certification);
    entries.push_back({entry.kind, entry.key, std::move(*snapshot->bytes)});
  }
  for (const std::string& kernel : options.kernels) {
    if (!kernels_found.contains(kernel)) {
      return Error(ErrorKind::kInvalidInput, "The cache at " + cache.root().string() +
                                                 " holds no valid tuning or certification entry "
                                                 "of kernel " +
                                                 kernel + " to export.");
    }
  }
  WF_TRY_ASSIGN(std::string bytes, serialize_bundle(std::move(entries)));
  report.bytes = bytes.size();

  // A complete, flushed file is renamed over `file`: a failure before the rename leaves `file`
  // as it was, and the temporary file is removed.
  FileSystem& files = *cache.files();
  const fs::path directory = file.has_parent_path() ? file.parent_path() : fs::path(".");
  const fs::path temporary = directory / file_io::temporary_name(file.filename().string());
  auto fail = [&](Error cause) -> Result<BundleExportReport> {
    return std::move(cause).with_context("writing bundle " + file.string());
  };
  if (Status written = file_io::write_temporary(files, temporary, bytes); !written) {
    return fail(std::move(written).error());
  }
  if (files.rename_replacing(temporary.c_str(), file.c_str()) != 0) {
    const int error_number = errno;
    files.unlink(temporary.c_str());
    return fail(file_io::io_error("move into place", file, error_number));
  }
  file_io::FileDescriptor directory_fd(
      files, files.open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0));
  if (directory_fd.get() < 0 || files.fsync(directory_fd.get()) != 0) {
    return fail(file_io::io_error("flush directory", directory, errno));
  }
  return report;
}

Result<StoreAllReport> import_bundle(const ManifestCache& cache, const fs::path& file) {
  WF_TRY_ASSIGN(std::optional<file_io::FileContent> content,
                file_io::read_regular_file(*cache.files(), file, kBundleFile));
  if (!content) {
    return Error(ErrorKind::kInvalidInput, "Bundle " + file.string() + " does not exist.");
  }
  Result<std::vector<EntryBytes>> entries = parse_bundle(content->bytes);
  if (!entries) {
    return refused("Bundle " + file.string() +
                   " is refused and nothing was imported: " + entries.error().message());
  }
  Result<StoreAllReport> stored = cache.store_all_or_none(*entries);
  if (!stored) return std::move(stored).error().with_context("importing bundle " + file.string());
  return stored;
}

}  // namespace wgsl_forge
