#include "json_codec.hpp"

#include <cmath>
#include <limits>

#include "wgsl_forge/hash.hpp"

namespace wgsl_forge::json_codec {

Json encode_double(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

Json encode(const AdapterIdentity& value) {
  return Json{{"name", value.name},
              {"vendor", value.vendor},
              {"device", value.device},
              {"device_type", value.device_type},
              {"backend", value.backend},
              {"driver", value.driver},
              {"driver_info", value.driver_info}};
}

Json encode(const Schedule& value) {
  Json knobs = Json::object();
  for (const auto& [name, knob_value] : value.knobs()) knobs[name] = knob_value;
  return knobs;
}

Json encode(const TimingSummary& value) {
  return Json{{"source", timing_source_name(value.source)},
              {"sample_count", value.sample_count},
              {"min_ns", value.min_ns},
              {"max_ns", value.max_ns},
              {"median_ns", encode_double(value.median_ns)},
              {"mean_ns", encode_double(value.mean_ns)},
              {"mad_ns", encode_double(value.mad_ns)},
              {"p10_ns", encode_double(value.p10_ns)},
              {"p90_ns", encode_double(value.p90_ns)}};
}

Json encode(const ComparisonReport& value) {
  Json first = nullptr;
  if (value.first_mismatch) {
    first = Json{{"index", value.first_mismatch->index},
                 {"expected", encode_double(value.first_mismatch->expected)},
                 {"actual", encode_double(value.first_mismatch->actual)}};
  }
  return Json{{"compared", value.compared},
              {"mismatch_count", value.mismatch_count},
              {"first_mismatch", first},
              {"max_absolute_error", encode_double(value.max_absolute_error)},
              {"max_relative_error", encode_double(value.max_relative_error)}};
}

Json encode(const CandidateResult& value) {
  return Json{{"schedule", encode(value.schedule)},
              {"oracle", encode(value.oracle)},
              {"timing", encode(value.timing)}};
}

Json encode(const CandidateRecord& value) {
  Json failure = nullptr;
  if (value.failure) {
    failure = Json{{"stage", failure_stage_name(value.failure->stage)},
                   {"message", value.failure->message}};
  }
  return Json{{"schedule", encode(value.schedule)},
              {"origin", candidate_origin_name(value.origin)},
              {"timing", value.timing ? encode(*value.timing) : Json(nullptr)},
              {"failure", failure},
              {"finalist", value.finalist}};
}

Json encode(const TuningResult& value) {
  Json candidates = Json::array();
  for (const CandidateRecord& candidate : value.candidates) candidates.push_back(encode(candidate));
  Json finalists = Json::array();
  for (const CandidateResult& finalist : value.finalists) finalists.push_back(encode(finalist));
  return Json{
      {"candidates", candidates}, {"winner", encode(value.winner)}, {"finalists", finalists}};
}

Json encode(const TuningContext& value) {
  Json ties = Json::array();
  for (const Schedule& schedule : value.ties) ties.push_back(encode(schedule));
  return Json{{"topology_hash", value.topology_hash ? Json(*value.topology_hash) : Json(nullptr)},
              {"problem_size", value.problem_size},
              {"bucket", value.bucket ? Json(*value.bucket) : Json(nullptr)},
              {"toggles", value.toggles},
              {"baseline", value.baseline ? encode(*value.baseline) : Json(nullptr)},
              {"ties", ties},
              {"tuned_at", value.tuned_at}};
}

Json encode(const CertificationCase& value) {
  return Json{{"name", value.name},
              {"element_count", value.element_count},
              {"value_profile", value.value_profile},
              {"seed", value.seed},
              {"allowed_absolute_error", encode_double(value.allowed_absolute_error)},
              {"allowed_relative_error", encode_double(value.allowed_relative_error)},
              {"report", encode(value.report)},
              {"failed_checks", value.failed_checks},
              {"runs", value.runs}};
}

Json encode(const TuningManifest& value) {
  return Json{{"manifest_kind", "tuning"},
              {"schema_version", TuningManifest::kSchemaVersion},
              {"cache_key", value.cache_key},
              {"kernel_id", value.kernel_id},
              {"kernel_revision", value.kernel_revision},
              {"backend", target_backend_name(value.backend)},
              {"source_hash", value.source_hash},
              {"adapter", encode(value.adapter)},
              {"context", encode(value.context)},
              {"result", encode(value.result)}};
}

Json encode(const CertificationManifest& value) {
  Json cases = Json::array();
  for (const CertificationCase& one_case : value.cases) cases.push_back(encode(one_case));
  return Json{{"manifest_kind", "certification"},
              {"schema_version", CertificationManifest::kSchemaVersion},
              {"cache_key", value.cache_key ? Json(*value.cache_key) : Json(nullptr)},
              {"kernel_id", value.kernel_id},
              {"kernel_revision", value.kernel_revision},
              {"backend", target_backend_name(value.backend)},
              {"source_hash", value.source_hash},
              {"schedule", encode(value.schedule)},
              {"adapter", encode(value.adapter)},
              {"topology_hash", value.topology_hash ? Json(*value.topology_hash) : Json(nullptr)},
              {"tolerance", value.tolerance},
              {"cases", cases},
              {"verdict", verdict_name(value.verdict)}};
}

Json encode(const MeasurementRecord& value) {
  return Json{{"manifest_kind", "measurement"},
              {"schema_version", MeasurementRecord::kSchemaVersion},
              {"cache_key", value.cache_key},
              {"kernel_id", value.kernel_id},
              {"kernel_revision", value.kernel_revision},
              {"topology_hash", value.topology_hash},
              {"source_hash", value.source_hash},
              {"problem", value.problem},
              {"candidate", encode(value.candidate)},
              {"recorded_at", value.recorded_at}};
}

Result<std::string> dump_canonical(const Json& value, std::string_view what) {
  try {
    return value.dump(2, ' ', false, Json::error_handler_t::strict) + "\n";
  } catch (const Json::exception& exception) {
    return Error(ErrorKind::kSerialization, std::string("Cannot write ") + std::string(what) +
                                                " as JSON: a text field is not valid UTF-8 (" +
                                                exception.what() + ").");
  }
}

namespace {
const Json& null_json() {
  static const Json kNull = nullptr;
  return kNull;
}
const Json& empty_array() {
  static const Json kEmpty = Json::array();
  return kEmpty;
}
const Json& empty_object() {
  static const Json kEmpty = Json::object();
  return kEmpty;
}
}  // namespace

FieldReader::FieldReader(const Json& object, std::string path)
    : FieldReader(object, std::move(path), std::make_shared<State>()) {
  if (!object.is_object()) fail("", "is not a JSON object");
}

FieldReader::FieldReader(const Json& object, std::string path, std::shared_ptr<State> state)
    : object_(&object), path_(std::move(path)), state_(std::move(state)) {}

std::string FieldReader::path_of(const std::string& field) const {
  if (field.empty()) return path_.empty() ? "the manifest" : path_;
  return path_.empty() ? field : path_ + "." + field;
}

void FieldReader::fail(const std::string& field, const std::string& problem) const {
  if (state_->error) return;
  state_->error =
      Error(ErrorKind::kSerialization, "Field '" + path_of(field) + "' " + problem + ".");
}

Error FieldReader::take_error() const {
  return state_->error.value_or(Error(ErrorKind::kSerialization, "No error recorded."));
}

const Json* FieldReader::find(const char* field) const {
  if (failed() || !object_->is_object()) return nullptr;
  auto it = object_->find(field);
  if (it == object_->end()) {
    fail(field, "is missing");
    return nullptr;
  }
  return &*it;
}

const Json& FieldReader::raw(const char* field) const {
  const Json* value = find(field);
  return value ? *value : null_json();
}

bool FieldReader::is_null(const char* field) const {
  const Json* value = find(field);
  return value != nullptr && value->is_null();
}

std::string FieldReader::string(const char* field) const {
  const Json* value = find(field);
  if (value == nullptr) return {};
  if (!value->is_string()) {
    fail(field, "is not a string");
    return {};
  }
  return value->get<std::string>();
}

std::optional<std::string> FieldReader::optional_string(const char* field) const {
  if (is_null(field)) return std::nullopt;
  if (failed()) return std::nullopt;
  return string(field);
}

std::string FieldReader::hex_digest(const char* field) const {
  std::string text = string(field);
  if (!failed() && !is_hex_digest(text)) {
    fail(field, "is not 64 hexadecimal characters (got '" + text + "')");
  }
  return text;
}

std::optional<std::string> FieldReader::optional_hex_digest(const char* field) const {
  if (is_null(field)) return std::nullopt;
  if (failed()) return std::nullopt;
  return hex_digest(field);
}

std::uint64_t FieldReader::u64(const char* field) const {
  const Json* value = find(field);
  if (value == nullptr) return 0;
  if (value->is_number_unsigned()) return value->get<std::uint64_t>();
  if (value->is_number_integer() && value->get<std::int64_t>() >= 0) {
    return static_cast<std::uint64_t>(value->get<std::int64_t>());
  }
  fail(field, "is not a non-negative integer");
  return 0;
}

std::uint32_t FieldReader::u32(const char* field) const {
  std::uint64_t value = u64(field);
  if (value > std::numeric_limits<std::uint32_t>::max()) {
    fail(field, "is larger than 4294967295");
    return 0;
  }
  return static_cast<std::uint32_t>(value);
}

double FieldReader::f64(const char* field) const {
  const Json* value = find(field);
  if (value == nullptr) return 0;
  if (value->is_number()) return value->get<double>();
  if (value->is_string()) {
    const std::string& text = value->get_ref<const std::string&>();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  fail(field, "is not a number (nor \"NaN\", \"Infinity\", \"-Infinity\")");
  return 0;
}

bool FieldReader::boolean(const char* field) const {
  const Json* value = find(field);
  if (value == nullptr) return false;
  if (!value->is_boolean()) {
    fail(field, "is not true or false");
    return false;
  }
  return value->get<bool>();
}

FieldReader FieldReader::object(const char* field) const {
  const Json* value = find(field);
  if (value != nullptr && !value->is_object()) fail(field, "is not a JSON object");
  if (value == nullptr || !value->is_object())
    return FieldReader(empty_object(), path_of(field), state_);
  return FieldReader(*value, path_of(field), state_);
}

const Json& FieldReader::array(const char* field) const {
  const Json* value = find(field);
  if (value != nullptr && !value->is_array()) fail(field, "is not a JSON array");
  if (value == nullptr || !value->is_array()) return empty_array();
  return *value;
}

FieldReader FieldReader::element(const char* field, std::size_t index) const {
  const Json& items = array(field);
  std::string element_path = std::string(field) + "[" + std::to_string(index) + "]";
  if (index >= items.size() || !items[index].is_object()) {
    fail(element_path, "is not a JSON object");
    return FieldReader(empty_object(), path_of(element_path), state_);
  }
  return FieldReader(items[index], path_of(element_path), state_);
}

std::string FieldReader::element_string(const char* field, std::size_t index) const {
  const Json& items = array(field);
  if (index >= items.size() || !items[index].is_string()) {
    fail(std::string(field) + "[" + std::to_string(index) + "]", "is not a string");
    return {};
  }
  return items[index].get<std::string>();
}

AdapterIdentity decode_adapter(const FieldReader& reader) {
  AdapterIdentity adapter;
  adapter.name = reader.string("name");
  adapter.vendor = reader.u32("vendor");
  adapter.device = reader.u32("device");
  adapter.device_type = reader.string("device_type");
  adapter.backend = reader.string("backend");
  adapter.driver = reader.string("driver");
  adapter.driver_info = reader.string("driver_info");
  return adapter;
}

Schedule decode_schedule(const FieldReader& reader, const char* field) {
  const Json& knobs = reader.raw(field);
  Schedule schedule;
  if (reader.failed()) return schedule;
  if (!knobs.is_object()) {
    reader.fail(field, "is not a JSON object of knob -> integer");
    return schedule;
  }
  for (const auto& [name, value] : knobs.items()) {
    bool fits = value.is_number_integer() &&
                (!value.is_number_unsigned() ||
                 value.get<std::uint64_t>() <=
                     static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    if (!fits) {
      reader.fail(std::string(field) + "." + name, "is not a 64-bit integer");
      return schedule;
    }
    schedule.set(name, value.get<std::int64_t>());
  }
  return schedule;
}

template <typename Enum>
Enum decode_enum(const FieldReader& reader, const char* field,
                 Result<Enum> (*parse)(std::string_view), Enum fallback) {
  std::string text = reader.string(field);
  if (reader.failed()) return fallback;
  Result<Enum> parsed = parse(text);
  if (!parsed) {
    reader.fail(field, "has an unknown value ('" + text + "')");
    return fallback;
  }
  return *parsed;
}

TimingSummary decode_timing(const FieldReader& reader) {
  TimingSummary timing;
  timing.source = decode_enum(reader, "source", &parse_timing_source, TimingSource::kSynthetic);
  timing.sample_count = reader.u64("sample_count");
  timing.min_ns = reader.u64("min_ns");
  timing.max_ns = reader.u64("max_ns");
  timing.median_ns = reader.f64("median_ns");
  timing.mean_ns = reader.f64("mean_ns");
  timing.mad_ns = reader.f64("mad_ns");
  timing.p10_ns = reader.f64("p10_ns");
  timing.p90_ns = reader.f64("p90_ns");
  return timing;
}

ComparisonReport decode_report(const FieldReader& reader) {
  ComparisonReport report;
  report.compared = reader.u64("compared");
  report.mismatch_count = reader.u64("mismatch_count");
  if (!reader.is_null("first_mismatch")) {
    FieldReader first = reader.object("first_mismatch");
    Mismatch mismatch;
    mismatch.index = first.u64("index");
    mismatch.expected = first.f64("expected");
    mismatch.actual = first.f64("actual");
    report.first_mismatch = mismatch;
  }
  report.max_absolute_error = reader.f64("max_absolute_error");
  report.max_relative_error = reader.f64("max_relative_error");
  return report;
}

CandidateResult decode_candidate(const FieldReader& reader) {
  CandidateResult candidate;
  candidate.schedule = decode_schedule(reader, "schedule");
  candidate.oracle = decode_report(reader.object("oracle"));
  candidate.timing = decode_timing(reader.object("timing"));
  return candidate;
}

CandidateRecord decode_candidate_record(const FieldReader& reader) {
  CandidateRecord candidate;
  candidate.schedule = decode_schedule(reader, "schedule");
  candidate.origin =
      decode_enum(reader, "origin", &parse_candidate_origin, CandidateRecord::Origin::kMeasured);
  if (!reader.is_null("timing")) candidate.timing = decode_timing(reader.object("timing"));
  if (!reader.is_null("failure")) {
    FieldReader failure = reader.object("failure");
    candidate.failure = CandidateRecord::Failure{
        decode_enum(failure, "stage", &parse_failure_stage, FailureStage::kCompile),
        failure.string("message")};
  }
  candidate.finalist = reader.boolean("finalist");
  return candidate;
}

TuningResult decode_tuning_result(const FieldReader& reader) {
  TuningResult result;
  for (std::size_t i = 0; i < reader.array("candidates").size() && !reader.failed(); ++i) {
    result.candidates.push_back(decode_candidate_record(reader.element("candidates", i)));
  }
  result.winner = decode_candidate(reader.object("winner"));
  for (std::size_t i = 0; i < reader.array("finalists").size() && !reader.failed(); ++i) {
    result.finalists.push_back(decode_candidate(reader.element("finalists", i)));
  }
  return result;
}

TuningContext decode_tuning_context(const FieldReader& reader) {
  TuningContext context;
  context.topology_hash = reader.optional_hex_digest("topology_hash");
  context.problem_size = reader.u64("problem_size");
  context.bucket = reader.optional_string("bucket");
  for (std::size_t i = 0; i < reader.array("toggles").size() && !reader.failed(); ++i) {
    context.toggles.push_back(reader.element_string("toggles", i));
  }
  if (!reader.is_null("baseline")) context.baseline = decode_candidate(reader.object("baseline"));
  const Json& ties = reader.array("ties");
  for (std::size_t i = 0; i < ties.size() && !reader.failed(); ++i) {
    Json wrapper = {{"schedule", ties[i]}};
    FieldReader tie(wrapper, reader.path_of("ties[" + std::to_string(i) + "]"));
    context.ties.push_back(decode_schedule(tie, "schedule"));
    if (tie.failed()) reader.fail("ties[" + std::to_string(i) + "]", "is not a schedule");
  }
  context.tuned_at = reader.string("tuned_at");
  return context;
}

CertificationCase decode_case(const FieldReader& reader) {
  CertificationCase one_case;
  one_case.name = reader.string("name");
  one_case.element_count = reader.u64("element_count");
  one_case.value_profile = reader.string("value_profile");
  one_case.seed = reader.u64("seed");
  one_case.allowed_absolute_error = reader.f64("allowed_absolute_error");
  one_case.allowed_relative_error = reader.f64("allowed_relative_error");
  one_case.report = decode_report(reader.object("report"));
  for (std::size_t i = 0; i < reader.array("failed_checks").size() && !reader.failed(); ++i) {
    one_case.failed_checks.push_back(reader.element_string("failed_checks", i));
  }
  one_case.runs = reader.u32("runs");
  return one_case;
}

}  // namespace wgsl_forge::json_codec
