#include "wgsl_forge/manifest_json.hpp"

#include <algorithm>

#include "json_codec.hpp"
#include "util/try.hpp"
#include "wgsl_forge/hash.hpp"

namespace wgsl_forge {

using json_codec::FieldReader;
using json_codec::Json;

namespace {

constexpr const char* kContentHashField = "content_hash";

// BLAKE3 of the canonical bytes of `document` without its content_hash field.
Result<std::string> content_hash_of(Json document, std::string_view what) {
  document.erase(kContentHashField);
  WF_TRY_ASSIGN(std::string body, json_codec::dump_canonical(document, what));
  return blake3_hex(body);
}

Result<std::string> serialize_with_content_hash(Json document, const std::string& what) {
  WF_TRY_ASSIGN(std::string hash, content_hash_of(document, what));
  document[kContentHashField] = hash;
  return json_codec::dump_canonical(document, what);
}

}  // namespace

Result<std::string> serialize_manifest(const TuningManifest& manifest) {
  return serialize_with_content_hash(json_codec::encode(manifest),
                                     "the tuning manifest of " + manifest.kernel_id);
}

Result<std::string> serialize_manifest(const CertificationManifest& manifest) {
  return serialize_with_content_hash(json_codec::encode(manifest),
                                     "the certification manifest of " + manifest.kernel_id);
}

Result<std::string> serialize_manifest(const MeasurementRecord& record) {
  return serialize_with_content_hash(json_codec::encode(record),
                                     "the measurement record of " + record.kernel_id);
}

std::size_t json_nesting_depth(std::string_view bytes) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Result<std::string> canonical_json(const AdapterIdentity& adapter) {
  return json_codec::dump_canonical(json_codec::encode(adapter), "an adapter identity");
}

Result<std::string> canonical_json(const Schedule& schedule) {
  return json_codec::dump_canonical(json_codec::encode(schedule), "a schedule");
}

namespace {

// Parses bytes into a JSON object and checks the envelope shared by every manifest kind.
Result<Json> parse_envelope(std::string_view bytes, std::string_view expected_kind,
                            std::uint32_t known_version) {
  if (bytes.size() > kMaxManifestBytes) {
    return Error(ErrorKind::kSerialization,
                 "The manifest is too large (" + std::to_string(bytes.size()) +
                     " bytes, the limit is " + std::to_string(kMaxManifestBytes) + ").");
  }
  if (std::size_t depth = json_nesting_depth(bytes); depth > kMaxManifestNesting) {
    return Error(ErrorKind::kSerialization, "The manifest nests arrays and objects too deeply (" +
                                                std::to_string(depth) + " levels, the limit is " +
                                                std::to_string(kMaxManifestNesting) + ").");
  }
  Json document = Json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    return Error(ErrorKind::kSerialization,
                 "The manifest is not valid JSON (" + std::to_string(bytes.size()) + " bytes).");
  }
  FieldReader envelope(document, "");
  std::string kind = envelope.string("manifest_kind");
  if (!envelope.failed() && kind != expected_kind) {
    envelope.fail("manifest_kind",
                  "is '" + kind + "', expected '" + std::string(expected_kind) + "'");
  }
  std::uint64_t version = envelope.u64("schema_version");
  if (!envelope.failed() && version != known_version) {
    envelope.fail("schema_version",
                  "is " + std::to_string(version) + ", this wgsl-forge reads only version " +
                      std::to_string(known_version) + " (re-tune to replace the entry)");
  }
  if (envelope.failed()) return envelope.take_error();
  return document;
}

// Accepts only what the manifest's create() would make (its invariants are stated once, in
// broken_invariant, which create() also applies): a file that breaks one is refused naming the
// field and the rule, even when its hashes were recomputed after the edit.
template <typename Manifest>
Status require_invariants(const Manifest& manifest, const char* kind) {
  if (std::optional<BrokenInvariant> broken = manifest.broken_invariant()) {
    return Error(ErrorKind::kSerialization, "Field '" + broken->field +
                                                "' breaks an invariant of " + kind +
                                                " manifests: " + broken->rule);
  }
  return Ok{};
}

// Accepts only an unchanged file: the recorded content hash must be that of the document, and the
// bytes must be exactly what serializing the decoded value writes.
template <typename Manifest>
Result<Manifest> require_intact(Manifest manifest, const Json& document,
                                const std::string& recorded_hash, std::string_view bytes) {
  WF_TRY_ASSIGN(std::string actual_hash, content_hash_of(document, "a manifest"));
  if (actual_hash != recorded_hash) {
    return Error(ErrorKind::kSerialization, "Field 'content_hash' (" + recorded_hash +
                                                ") does not match the content (" + actual_hash +
                                                "): the file was changed after it was written.");
  }
  WF_TRY_ASSIGN(std::string rewritten, serialize_manifest(manifest));
  if (rewritten != bytes) {
    return Error(ErrorKind::kSerialization,
                 "The manifest is valid JSON but not in canonical form (edited by hand, or it has "
                 "fields this version does not know); canonical manifests are byte-exact.");
  }
  return manifest;
}

// The fields that say what a manifest is about, the same in both kinds: the kernel, its
// revision, the backend and the generated source's hash.
template <typename Manifest>
void read_kernel_fields(const FieldReader& reader, Manifest& manifest) {
  manifest.kernel_id = reader.string("kernel_id");
  manifest.kernel_revision = reader.u32("kernel_revision");
  const std::string backend = reader.string("backend");
  if (!reader.failed()) {
    if (Result<TargetBackend> parsed = parse_target_backend(backend)) {
      manifest.backend = *parsed;
    } else {
      reader.fail("backend", "has an unknown value ('" + backend + "')");
    }
  }
  manifest.source_hash = reader.hex_digest("source_hash");
}

}  // namespace

Result<TuningManifest> parse_tuning_manifest(std::string_view bytes) {
  WF_TRY_ASSIGN(Json document, parse_envelope(bytes, "tuning", TuningManifest::kSchemaVersion));
  FieldReader reader(document, "");
  TuningManifest manifest;
  const std::string content_hash = reader.hex_digest(kContentHashField);
  manifest.cache_key = reader.hex_digest("cache_key");
  read_kernel_fields(reader, manifest);
  manifest.adapter = json_codec::decode_adapter(reader.object("adapter"));
  manifest.context = json_codec::decode_tuning_context(reader.object("context"));
  manifest.result = json_codec::decode_tuning_result(reader.object("result"));
  if (reader.failed()) return reader.take_error();
  WF_TRY(require_invariants(manifest, "tuning"));
  return require_intact(std::move(manifest), document, content_hash, bytes);
}

Result<CertificationManifest> parse_certification_manifest(std::string_view bytes) {
  WF_TRY_ASSIGN(Json document,
                parse_envelope(bytes, "certification", CertificationManifest::kSchemaVersion));
  FieldReader reader(document, "");
  CertificationManifest manifest;
  const std::string content_hash = reader.hex_digest(kContentHashField);
  manifest.cache_key = reader.optional_hex_digest("cache_key");
  read_kernel_fields(reader, manifest);
  manifest.schedule = json_codec::decode_schedule(reader, "schedule");
  manifest.adapter = json_codec::decode_adapter(reader.object("adapter"));
  manifest.topology_hash = reader.optional_hex_digest("topology_hash");
  manifest.tolerance = reader.string("tolerance");
  for (std::size_t i = 0; i < reader.array("cases").size() && !reader.failed(); ++i) {
    manifest.cases.push_back(json_codec::decode_case(reader.element("cases", i)));
  }
  std::string verdict = reader.string("verdict");
  if (!reader.failed() && verdict != verdict_name(Verdict::kCertified) &&
      verdict != verdict_name(Verdict::kRejected)) {
    reader.fail("verdict", "has an unknown value ('" + verdict + "')");
  }
  if (reader.failed()) return reader.take_error();
  manifest.verdict =
      verdict == verdict_name(Verdict::kCertified) ? Verdict::kCertified : Verdict::kRejected;
  WF_TRY(require_invariants(manifest, "certification"));
  return require_intact(std::move(manifest), document, content_hash, bytes);
}

Result<MeasurementRecord> parse_measurement_record(std::string_view bytes) {
  WF_TRY_ASSIGN(Json document,
                parse_envelope(bytes, "measurement", MeasurementRecord::kSchemaVersion));
  FieldReader reader(document, "");
  MeasurementRecord record;
  const std::string content_hash = reader.hex_digest(kContentHashField);
  record.cache_key = reader.hex_digest("cache_key");
  record.kernel_id = reader.string("kernel_id");
  record.kernel_revision = reader.u32("kernel_revision");
  record.topology_hash = reader.hex_digest("topology_hash");
  record.source_hash = reader.hex_digest("source_hash");
  record.problem = reader.string("problem");
  record.candidate = json_codec::decode_candidate_record(reader.object("candidate"));
  record.recorded_at = reader.string("recorded_at");
  if (reader.failed()) return reader.take_error();
  WF_TRY(require_invariants(record, "measurement"));
  return require_intact(std::move(record), document, content_hash, bytes);
}

}  // namespace wgsl_forge
