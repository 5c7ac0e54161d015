#pragma once
// Internal to the model layer: conversion between model values and nlohmann::json, and a reader
// that names the field at fault. The canonical byte form is described in manifest_json.hpp.

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "wgsl_forge/error.hpp"
#include "wgsl_forge/model.hpp"

namespace wgsl_forge::json_codec {

using Json = nlohmann::json;

// Writes a double so that it reads back bit for bit (non-finite values as strings).
Json encode_double(double value);

Json encode(const AdapterIdentity& value);
Json encode(const Schedule& value);
Json encode(const TimingSummary& value);
Json encode(const ComparisonReport& value);
Json encode(const CandidateResult& value);
Json encode(const CandidateRecord& value);
Json encode(const TuningResult& value);
Json encode(const TuningContext& value);
Json encode(const CertificationCase& value);
Json encode(const TuningManifest& value);
Json encode(const CertificationManifest& value);
Json encode(const MeasurementRecord& value);

// Dumps in canonical form; fails only for strings that are not valid UTF-8.
Result<std::string> dump_canonical(const Json& value, std::string_view what);

// Reads fields of one JSON object. The first problem is kept (with the field's dotted path) and
// every later read returns a default, so decoders read straight through and check once at the end.
class FieldReader {
 public:
  FieldReader(const Json& object, std::string path);

  bool failed() const { return state_->error.has_value(); }
  Error take_error() const;
  void fail(const std::string& field, const std::string& problem) const;

  bool is_null(const char* field) const;
  std::string string(const char* field) const;
  std::optional<std::string> optional_string(const char* field) const;
  std::string hex_digest(const char* field) const;
  std::optional<std::string> optional_hex_digest(const char* field) const;
  std::uint64_t u64(const char* field) const;
  std::uint32_t u32(const char* field) const;
  double f64(const char* field) const;
  bool boolean(const char* field) const;
  FieldReader object(const char* field) const;
  // The array under `field`, or an empty one after recording an error.
  const Json& array(const char* field) const;
  // A reader for element `index` of the array under `field` (which must hold objects).
  FieldReader element(const char* field, std::size_t index) const;
  std::string element_string(const char* field, std::size_t index) const;
  const Json& raw(const char* field) const;
  std::string path_of(const std::string& field) const;

 private:
  struct State {
    std::optional<Error> error;
  };
  FieldReader(const Json& object, std::string path, std::shared_ptr<State> state);
  const Json* find(const char* field) const;

  const Json* object_;
  std::string path_;
  std::shared_ptr<State> state_;
};

AdapterIdentity decode_adapter(const FieldReader& reader);
Schedule decode_schedule(const FieldReader& reader, const char* field);
TimingSummary decode_timing(const FieldReader& reader);
ComparisonReport decode_report(const FieldReader& reader);
CandidateResult decode_candidate(const FieldReader& reader);
CandidateRecord decode_candidate_record(const FieldReader& reader);
TuningResult decode_tuning_result(const FieldReader& reader);
TuningContext decode_tuning_context(const FieldReader& reader);
CertificationCase decode_case(const FieldReader& reader);

}  // namespace wgsl_forge::json_codec
