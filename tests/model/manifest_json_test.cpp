#include "wgsl_forge/manifest_json.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "support/test_manifests.hpp"
#include "wgsl_forge/hash.hpp"
#include "wgsl_forge/kernels.hpp"

namespace wgsl_forge {
namespace {

using nlohmann::json;
using testing::affine_kernel;
using testing::certified_candidate;
using testing::default_affine_schedule;
using testing::test_adapter;

std::string canonical_dump(const json& document) { return document.dump(2) + "\n"; }

TuningResult single_winner_result(const Schedule& schedule) {
  return testing::single_winner_result(certified_candidate(schedule, 1000));
}

TuningManifest full_tuning_manifest() {
  Schedule schedule = default_affine_schedule();
  TuningResult result = single_winner_result(schedule);
  result.candidates.push_back(
      {Schedule({{"workgroup_size", 2048}}), CandidateRecord::Origin::kMeasured, std::nullopt,
       CandidateRecord::Failure{FailureStage::kValidation,
                                "Workgroup size (2048) exceeds maxComputeInvocationsPerWorkgroup"},
       false});
  TuningContext context{std::string(64, 'c'),
                        1u << 20,
                        {"b", "a"},
                        certified_candidate(schedule, 2000),
                        {Schedule({{"workgroup_size", 128}})},
                        "2^20",
                        "2026-12-02T15:33:31Z"};
  return TuningManifest::create(affine_kernel(schedule), test_adapter(), result, context).value();
}

TEST(ManifestJsonTest, RandomManifestsRoundTripToEqualValuesAndIdenticalBytes) {
  std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with WGSL_FORGE_TEST_SEED)");
  std::mt19937_64 random(seed);
  for (int round = 0; round < 300; ++round) {
    TuningManifest tuning = testing::random_tuning_manifest(random);
    std::string bytes = serialize_manifest(tuning).value();
    Result<TuningManifest> parsed = parse_tuning_manifest(bytes);
    ASSERT_TRUE(parsed.ok()) << parsed.error().to_string() << "\n" << bytes;
    EXPECT_EQ(*parsed, tuning);
    EXPECT_EQ(serialize_manifest(*parsed).value(), bytes);

    CertificationManifest certification = testing::random_certification_manifest(random);
    bytes = serialize_manifest(certification).value();
    Result<CertificationManifest> parsed_certification = parse_certification_manifest(bytes);
    ASSERT_TRUE(parsed_certification.ok()) << parsed_certification.error().to_string();
    EXPECT_EQ(*parsed_certification, certification);
    EXPECT_EQ(serialize_manifest(*parsed_certification).value(), bytes);

    MeasurementRecord measurement = testing::random_measurement_record(random);
    bytes = serialize_manifest(measurement).value();
    Result<MeasurementRecord> parsed_measurement = parse_measurement_record(bytes);
    ASSERT_TRUE(parsed_measurement.ok()) << parsed_measurement.error().to_string();
    EXPECT_EQ(*parsed_measurement, measurement);
    EXPECT_EQ(serialize_manifest(*parsed_measurement).value(), bytes);
  }
}

TEST(ManifestJsonTest, AMeasurementBelongsToTheKeyOfItsOutcome) {
  std::mt19937_64 random(testing::test_seed());
  MeasurementRecord record = testing::random_measurement_record(random);
  MeasurementRecord::Code code{record.topology_hash, record.kernel_id, record.kernel_revision,
                               record.candidate.schedule, record.source_hash};
  const std::string timing_key = MeasurementRecord::timing_key(code, record.problem);
  const std::string failure_key = MeasurementRecord::failure_key(code);
  EXPECT_NE(timing_key, failure_key);
  EXPECT_EQ(record.cache_key, record.is_failure() ? failure_key : timing_key);
  // A timing is keyed by its problem; a failure is not: it counts at every size.
  EXPECT_NE(timing_key, MeasurementRecord::timing_key(code, record.problem + "0"));
  // Both are of the code that ran: other WGSL for the same schedule is another key.
  MeasurementRecord::Code other_source = code;
  other_source.source_hash = blake3_hex("other WGSL");
  EXPECT_NE(failure_key, MeasurementRecord::failure_key(other_source));
  // An outcome moved to the other kind's key, or marked a finalist, is refused.
  MeasurementRecord moved = record;
  moved.cache_key = record.is_failure() ? timing_key : failure_key;
  Result<MeasurementRecord> parsed = parse_measurement_record(serialize_manifest(moved).value());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message().find("cache key"), std::string::npos)
      << parsed.error().message();
  MeasurementRecord finalist = record;
  finalist.candidate.finalist = true;
  EXPECT_FALSE(parse_measurement_record(serialize_manifest(finalist).value()).ok());
}

TEST(ManifestJsonTest, SameValueGivesSameBytesWhateverTheConstructionOrder) {
  TuningManifest first = full_tuning_manifest();
  // Same knobs, inserted in the opposite order; same toggles, given in another order.
  Schedule reordered;
  reordered.set("vector_width", 1);
  reordered.set("items_per_invocation", 1);
  reordered.set("workgroup_size", 256);
  TuningResult result = first.result;
  result.winner.schedule = reordered;
  result.finalists = {result.winner};
  TuningContext context = first.context;
  context.toggles = {"a", "b", "a"};
  TuningManifest second =
      TuningManifest::create(affine_kernel(reordered), test_adapter(), result, context).value();
  EXPECT_EQ(serialize_manifest(first).value(), serialize_manifest(second).value());
}

TEST(ManifestJsonTest, KeysAreInByteOrderAndTheTextEndsWithOneNewline) {
  std::string bytes = serialize_manifest(full_tuning_manifest()).value();
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(bytes.back(), '\n');
  EXPECT_NE(bytes[bytes.size() - 2], '\n');
  std::size_t previous = 0;
  for (const char* key :
       {"\"adapter\"", "\"backend\"", "\"cache_key\"", "\"content_hash\"", "\"context\"",
        "\"kernel_id\"", "\"kernel_revision\"", "\"manifest_kind\"", "\"result\"",
        "\"schema_version\"", "\"source_hash\""}) {
    std::size_t position = bytes.find("\n  " + std::string(key));
    ASSERT_NE(position, std::string::npos) << key;
    EXPECT_GT(position, previous) << key;
    previous = position;
  }
}

TEST(ManifestJsonTest, NonFiniteValuesAndNegativeZeroAreWrittenAsDocumented) {
  Schedule schedule = default_affine_schedule();
  GeneratedKernel generated = affine_kernel(schedule);
  CertificationCase one_case;
  one_case.name = "specials";
  one_case.report.compared = 4;
  one_case.report.mismatch_count = 1;
  one_case.report.first_mismatch = Mismatch{3, std::numeric_limits<double>::quiet_NaN(),
                                            -std::numeric_limits<double>::infinity()};
  one_case.report.max_absolute_error = std::numeric_limits<double>::infinity();
  one_case.report.max_relative_error = -0.0;
  one_case.allowed_absolute_error = 10.0;
  CertificationManifest manifest =
      CertificationManifest::create(generated, test_adapter(), std::string(64, 'a'), "exact",
                                    {one_case})
          .value();
  std::string bytes = serialize_manifest(manifest).value();
  EXPECT_NE(bytes.find("\"expected\": \"NaN\""), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("\"actual\": \"-Infinity\""), std::string::npos);
  EXPECT_NE(bytes.find("\"max_absolute_error\": \"Infinity\""), std::string::npos);
  EXPECT_NE(bytes.find("\"max_relative_error\": -0.0"), std::string::npos);
  EXPECT_NE(bytes.find("\"allowed_absolute_error\": 10.0"), std::string::npos);
  CertificationManifest parsed = parse_certification_manifest(bytes).value();
  EXPECT_EQ(parsed, manifest);
  EXPECT_TRUE(std::signbit(parsed.cases[0].report.max_relative_error));
  EXPECT_EQ(parsed.verdict, Verdict::kRejected);
}

// Calls `visit(path, parent, key)` for every object member outside schedules (whose knobs are
// free-form), depth first.
void for_each_field(
    json& node, const std::string& path,
    const std::function<void(const std::string&, json&, const std::string&)>& visit) {
  if (node.is_object()) {
    std::vector<std::string> keys;
    for (auto& [key, value] : node.items()) keys.push_back(key);
    for (const std::string& key : keys) {
      std::string child_path = path.empty() ? key : path + "." + key;
      visit(child_path, node, key);
      if (key != "schedule" && key != "ties") for_each_field(node[key], child_path, visit);
    }
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      for_each_field(node[i], path + "[" + std::to_string(i) + "]", visit);
    }
  }
}

TEST(ManifestJsonTest, EachMissingFieldIsAnErrorNamingIt) {
  const std::string bytes = serialize_manifest(full_tuning_manifest()).value();
  json document = json::parse(bytes);
  int checked = 0;
  for_each_field(document, "", [&](const std::string& path, json& parent, const std::string& key) {
    json saved = parent[key];
    parent.erase(key);
    Result<TuningManifest> parsed = parse_tuning_manifest(canonical_dump(document));
    parent[key] = saved;
    ASSERT_FALSE(parsed.ok()) << "removing " << path << " was accepted";
    EXPECT_EQ(parsed.error().kind(), ErrorKind::kSerialization);
    EXPECT_EQ(parsed.error().message(), "Field '" + path + "' is missing.");
    ++checked;
  });
  EXPECT_GT(checked, 60);
  EXPECT_EQ(canonical_dump(document), bytes);  // the walk restored everything
}

TEST(ManifestJsonTest, EachMissingCertificationFieldIsAnErrorNamingIt) {
  std::mt19937_64 random(testing::test_seed());
  CertificationManifest manifest = testing::random_certification_manifest(random);
  json document = json::parse(serialize_manifest(manifest).value());
  for_each_field(document, "", [&](const std::string& path, json& parent, const std::string& key) {
    json saved = parent[key];
    parent.erase(key);
    Result<CertificationManifest> parsed = parse_certification_manifest(canonical_dump(document));
    parent[key] = saved;
    ASSERT_FALSE(parsed.ok()) << "removing " << path << " was accepted";
    EXPECT_EQ(parsed.error().message(), "Field '" + path + "' is missing.");
  });
}

TEST(ManifestJsonTest, UnknownSchemaVersionIsNamed) {
  // Version 1 is the tuning schema before size buckets, 2 before every candidate was kept: such
  // entries are re-tuned, never reinterpreted.
  for (int version : {1, 2, 4}) {
    json document = json::parse(serialize_manifest(full_tuning_manifest()).value());
    document["schema_version"] = version;
    Result<TuningManifest> parsed = parse_tuning_manifest(canonical_dump(document));
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.error().message(),
              "Field 'schema_version' is " + std::to_string(version) +
                  ", this wgsl-forge reads only version 3 (re-tune to replace the entry).");
  }
  // Certification 1 had no runs per case.
  std::mt19937_64 random(testing::test_seed());
  json certification =
      json::parse(serialize_manifest(testing::random_certification_manifest(random)).value());
  certification["schema_version"] = 1;
  Result<CertificationManifest> parsed =
      parse_certification_manifest(canonical_dump(certification));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message(),
            "Field 'schema_version' is 1, this wgsl-forge reads only version 2 (re-tune to replace "
            "the entry).");
}

TEST(ManifestJsonTest, TheSizeBucketIsPartOfTheTuningIdentity) {
  const TuningManifest bucketed = full_tuning_manifest();
  ASSERT_EQ(bucketed.context.bucket, std::optional<std::string>("2^20"));
  TuningManifest main = bucketed;
  main.context.bucket.reset();
  EXPECT_NE(main.compute_cache_key(), bucketed.cache_key);
  // A bucket label changed without recomputing the key (the content hash is recomputed: a
  // careful hand edit) is refused.
  TuningManifest moved = bucketed;
  moved.context.bucket = "2^24";
  Result<TuningManifest> parsed = parse_tuning_manifest(serialize_manifest(moved).value());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message().find("cache key"), std::string::npos)
      << parsed.error().message();
}

TEST(ManifestJsonTest, ABucketLabelOutsideItsGrammarIsRefused) {
  for (const std::string& label :
       std::vector<std::string>{"", "../x", "2^20 ", std::string(33, '1'), "main"}) {
    TuningManifest manifest = full_tuning_manifest();
    manifest.context.bucket = label;
    manifest.cache_key = manifest.compute_cache_key();
    Result<std::string> bytes = serialize_manifest(manifest);
    ASSERT_TRUE(bytes.ok()) << bytes.error().message();
    Result<TuningManifest> parsed = parse_tuning_manifest(*bytes);
    ASSERT_FALSE(parsed.ok()) << "label '" << label << "' was accepted";
    EXPECT_NE(parsed.error().message().find("context.bucket"), std::string::npos)
        << parsed.error().message();
  }
}

// The labels the catalog's kernels make, on a GPU and on a CPU adapter, are all in the grammar
// (a label outside it fails every tune of its bucket when the manifest is built).
TEST(ManifestJsonTest, EveryBuiltinBucketLabelIsInTheGrammar) {
  for (const kernels::KernelDefinition* kernel : kernels::builtin_kernels()) {
    for (bool cpu : {false, true}) {
      for (const kernels::SizeBucket& bucket : kernel->size_buckets(cpu)) {
        TuningManifest manifest = full_tuning_manifest();
        manifest.context.bucket = bucket.label;
        manifest.cache_key = manifest.compute_cache_key();
        Result<std::string> bytes = serialize_manifest(manifest);
        ASSERT_TRUE(bytes.ok()) << bytes.error().message();
        Result<TuningManifest> parsed = parse_tuning_manifest(*bytes);
        EXPECT_TRUE(parsed.ok()) << kernel->id() << " " << bucket.label << ": "
                                 << parsed.error().message();
      }
    }
  }
}

TEST(ManifestJsonTest, WrongManifestKindIsNamed) {
  std::string bytes = serialize_manifest(full_tuning_manifest()).value();
  Result<CertificationManifest> parsed = parse_certification_manifest(bytes);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message(),
            "Field 'manifest_kind' is 'tuning', expected 'certification'.");
}

TEST(ManifestJsonTest, WrongFieldTypesAreNamed) {
  json document = json::parse(serialize_manifest(full_tuning_manifest()).value());
  document["adapter"]["vendor"] = "0x10de";
  EXPECT_EQ(parse_tuning_manifest(canonical_dump(document)).error().message(),
            "Field 'adapter.vendor' is not a non-negative integer.");
  document = json::parse(serialize_manifest(full_tuning_manifest()).value());
  document["result"]["finalists"][0]["timing"]["source"] = "sundial";
  EXPECT_EQ(parse_tuning_manifest(canonical_dump(document)).error().message(),
            "Field 'result.finalists[0].timing.source' has an unknown value ('sundial').");
  document = json::parse(serialize_manifest(full_tuning_manifest()).value());
  document["result"]["winner"]["schedule"]["workgroup_size"] = 1.5;
  EXPECT_EQ(parse_tuning_manifest(canonical_dump(document)).error().message(),
            "Field 'result.winner.schedule.workgroup_size' is not a 64-bit integer.");
  document = json::parse(serialize_manifest(full_tuning_manifest()).value());
  document["context"]["topology_hash"] = "../../etc/passwd";
  EXPECT_EQ(parse_tuning_manifest(canonical_dump(document)).error().message(),
            "Field 'context.topology_hash' is not 64 hexadecimal characters (got "
            "'../../etc/passwd').");
}

TEST(ManifestJsonTest, NonJsonAndNonObjectsAreErrors) {
  for (const char* bytes : {"", "{", "nul", "[1,2]", "42", "\"tuning\"", "{\"a\":1}\n{"}) {
    Result<TuningManifest> parsed = parse_tuning_manifest(bytes);
    ASSERT_FALSE(parsed.ok()) << bytes;
    EXPECT_EQ(parsed.error().kind(), ErrorKind::kSerialization);
  }
  EXPECT_EQ(parse_tuning_manifest("[1]").error().message(),
            "Field 'the manifest' is not a JSON object.");
}

// A manifest with one extra field nested `depth` levels deep, about 2 * depth bytes: before the
// nesting limit, 100,000 levels overflowed the stack of every reader (the parser accepts it, then
// the recursive copy and dump of the document crash).
std::string deeply_nested_manifest(std::size_t depth) {
  std::string bytes = serialize_manifest(full_tuning_manifest()).value();
  return "{\"deep\": " + std::string(depth, '[') + std::string(depth, ']') + "," + bytes.substr(1);
}

TEST(ManifestJsonTest, InputsNestedDeeperThanTheLimitAreRefusedBeforeParsing) {
  const std::string deep = deeply_nested_manifest(100000);
  Result<TuningManifest> tuning = parse_tuning_manifest(deep);
  ASSERT_FALSE(tuning.ok());
  EXPECT_EQ(tuning.error().kind(), ErrorKind::kSerialization);
  EXPECT_EQ(tuning.error().message(),
            "The manifest nests arrays and objects too deeply (100001 levels, the limit is 64).");
  EXPECT_FALSE(parse_certification_manifest(deep).ok());

  // At the limit the input reaches the parser (and is refused for its extra field); brackets
  // inside strings, and escaped quotes before them, do not count.
  std::string at_limit = deeply_nested_manifest(kMaxManifestNesting - 1);
  EXPECT_EQ(parse_tuning_manifest(at_limit).error().message().find("deeply"), std::string::npos)
      << parse_tuning_manifest(at_limit).error().message();
  std::string in_strings = "{\"s\": \"\\\"" + std::string(1000, '[') + "\"}";
  EXPECT_EQ(parse_tuning_manifest(in_strings).error().message().find("deeply"), std::string::npos)
      << parse_tuning_manifest(in_strings).error().message();
}

TEST(ManifestJsonTest, InputsLargerThanTheLimitAreRefusedBeforeParsing) {
  const std::string large(kMaxManifestBytes + 1, ' ');
  Result<TuningManifest> tuning = parse_tuning_manifest(large);
  ASSERT_FALSE(tuning.ok());
  EXPECT_EQ(tuning.error().message(), "The manifest is too large (16777217 bytes, the limit is " +
                                          std::to_string(kMaxManifestBytes) + ").");
}

TEST(ManifestJsonTest, ValidJsonNotInCanonicalFormIsRejected) {
  json document = json::parse(serialize_manifest(full_tuning_manifest()).value());
  Result<TuningManifest> parsed = parse_tuning_manifest(document.dump(4));
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message().find("not in canonical form"), std::string::npos);
  document["unexpected_field"] = true;
  EXPECT_FALSE(parse_tuning_manifest(canonical_dump(document)).ok());
}

TEST(ManifestJsonTest, EditedIdentityNoLongerMatchesItsCacheKey) {
  json document = json::parse(serialize_manifest(full_tuning_manifest()).value());
  document["adapter"]["name"] = "a faster card";
  Result<TuningManifest> parsed = parse_tuning_manifest(canonical_dump(document));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message().rfind(
                "Field 'cache_key' breaks an invariant of tuning manifests: The cache key (", 0),
            0u)
      << parsed.error().message();
}

// The bytes a writer who knows the format makes of `edited`: the cache key and the content hash
// are recomputed, so only the invariants of create() can refuse it.
template <typename Manifest>
std::string with_recomputed_hashes(Manifest edited) {
  edited.cache_key = edited.compute_cache_key();
  return serialize_manifest(edited).value();
}

struct HostileTuningEdit {
  const char* name;
  std::function<void(TuningManifest&)> edit;
  const char* field;    // the field the parser names
  bool create_refuses;  // create() refuses the same evidence (it sorts toggles instead)
};

TEST(ManifestJsonTest, TheParserRefusesWhatCreateRefusesEvenWithRecomputedHashes) {
  const Schedule other({{"workgroup_size", 64}, {"items_per_invocation", 1}, {"vector_width", 1}});
  const std::vector<HostileTuningEdit> edits = {
      {"a winner that is not among the finalists",
       [&](TuningManifest& m) { m.result.finalists = {certified_candidate(other, 900)}; },
       "result.finalists", true},
      {"a winner with 5 mismatches",
       [](TuningManifest& m) {
         m.result.winner.oracle.mismatch_count = 5;
         m.result.winner.oracle.first_mismatch = Mismatch{7, 1.0, 2.0};
         m.result.finalists = {m.result.winner};
       },
       "result.winner.oracle", true},
      {"a winner compared on nothing",
       [](TuningManifest& m) {
         m.result.winner.oracle.compared = 0;
         m.result.finalists = {m.result.winner};
       },
       "result.winner.oracle", true},
      // The edit the issue saw run at start-up as 'tuned'.
      {"a winner outside the finalists with 5 mismatches and a made-up source hash",
       [&](TuningManifest& m) {
         m.result.winner.oracle.mismatch_count = 5;
         m.result.finalists = {certified_candidate(other, 900)};
         m.source_hash = std::string(64, 'f');
       },
       "result.winner.oracle", true},
      {"a candidate listed twice",
       [](TuningManifest& m) { m.result.candidates.push_back(m.result.candidates.front()); },
       "result.candidates[2]", true},
      {"a candidate with neither a timing nor a failure",
       [](TuningManifest& m) { m.result.candidates[1].failure.reset(); }, "result.candidates[1]",
       true},
      {"a candidate that failed before with a timing",
       [](TuningManifest& m) {
         m.result.candidates[1].origin = CandidateRecord::Origin::kFailedBefore;
         m.result.candidates[1].timing = m.result.winner.timing;
       },
       "result.candidates[1]", true},
      {"a finalist that is not marked as one",
       [](TuningManifest& m) { m.result.candidates[0].finalist = false; }, "result.finalists[0]",
       true},
      {"a finalist that failed",
       [](TuningManifest& m) {
         m.result.candidates[0].failure =
             CandidateRecord::Failure{FailureStage::kMismatch, "case 'n=1': element 0 is 3"};
       },
       "result.finalists[0]", true},
      {"a time that is not UTC", [](TuningManifest& m) { m.context.tuned_at = "yesterday"; },
       "context.tuned_at", true},
      {"unsorted toggles",
       [](TuningManifest& m) {
         m.context.toggles = {"b", "a"};
       },
       "context.toggles", false},
      {"repeated toggles",
       [](TuningManifest& m) {
         m.context.toggles = {"a", "a"};
       },
       "context.toggles", false},
      {"an empty kernel id", [](TuningManifest& m) { m.kernel_id.clear(); }, "kernel_id", true},
  };
  for (const HostileTuningEdit& hostile : edits) {
    SCOPED_TRACE(hostile.name);
    TuningManifest edited = full_tuning_manifest();
    hostile.edit(edited);
    const std::optional<BrokenInvariant> broken = edited.broken_invariant();
    ASSERT_TRUE(broken.has_value());
    EXPECT_EQ(broken->field, hostile.field);

    Result<TuningManifest> parsed = parse_tuning_manifest(with_recomputed_hashes(edited));
    ASSERT_FALSE(parsed.ok()) << "the edited manifest was accepted";
    EXPECT_EQ(parsed.error().kind(), ErrorKind::kSerialization);
    EXPECT_EQ(parsed.error().message(),
              "Field '" + std::string(hostile.field) +
                  "' breaks an invariant of tuning manifests: " + broken->rule);

    GeneratedKernel generated = affine_kernel(edited.result.winner.schedule);
    generated.kernel_id = edited.kernel_id;
    Result<TuningManifest> created =
        TuningManifest::create(generated, edited.adapter, edited.result, edited.context);
    EXPECT_EQ(!created.ok(), hostile.create_refuses);
    if (!created.ok()) {
      EXPECT_EQ(created.error().message(), broken->rule);
    }
  }
}

TEST(ManifestJsonTest, TheCertificationParserRefusesWhatCreateRefuses) {
  std::mt19937_64 random(testing::test_seed());
  CertificationManifest edited = testing::random_certification_manifest(random);
  edited.kernel_id.clear();
  Result<CertificationManifest> parsed =
      parse_certification_manifest(with_recomputed_hashes(edited));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message(),
            "Field 'kernel_id' breaks an invariant of certification manifests: The kernel id is "
            "empty.");

  edited = testing::random_certification_manifest(random);
  edited.verdict = edited.verdict == Verdict::kCertified ? Verdict::kRejected : Verdict::kCertified;
  parsed = parse_certification_manifest(with_recomputed_hashes(edited));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message().rfind(
                "Field 'verdict' breaks an invariant of certification manifests: The verdict (", 0),
            0u)
      << parsed.error().message();
}

TEST(ManifestJsonTest, CertificationVerdictMustFollowFromTheCases) {
  std::mt19937_64 random(testing::test_seed());
  CertificationManifest manifest = testing::random_certification_manifest(random);
  json document = json::parse(serialize_manifest(manifest).value());
  document["verdict"] = manifest.verdict == Verdict::kCertified ? "rejected" : "certified";
  Result<CertificationManifest> parsed = parse_certification_manifest(canonical_dump(document));
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message().find("contradicts the cases"), std::string::npos);
}

TEST(ManifestJsonTest, InvalidUtf8CannotBeSerialized) {
  TuningManifest manifest = full_tuning_manifest();
  manifest.adapter.name = "bad \xff byte";
  Result<std::string> bytes = serialize_manifest(manifest);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.error().kind(), ErrorKind::kSerialization);
  EXPECT_NE(bytes.error().message().find("not valid UTF-8"), std::string::npos);
}

TEST(TuningManifestTest, CacheKeyCoversIdentityButNotTimings) {
  TuningManifest base = full_tuning_manifest();
  EXPECT_EQ(base.cache_key.size(), 64u);
  EXPECT_EQ(base.cache_key, base.compute_cache_key());

  TuningManifest slower = base;
  slower.result.winner.timing.median_ns *= 2;
  EXPECT_EQ(slower.compute_cache_key(), base.cache_key);

  TuningManifest other_adapter = base;
  other_adapter.adapter.driver_info = "2";
  EXPECT_NE(other_adapter.compute_cache_key(), base.cache_key);
  TuningManifest other_topology = base;
  other_topology.context.topology_hash = std::string(64, 'd');
  EXPECT_NE(other_topology.compute_cache_key(), base.cache_key);
  TuningManifest other_revision = base;
  other_revision.kernel_revision += 1;
  EXPECT_NE(other_revision.compute_cache_key(), base.cache_key);
  TuningManifest other_source = base;
  other_source.source_hash = std::string(64, 'e');
  EXPECT_NE(other_source.compute_cache_key(), base.cache_key);
}

TEST(TuningManifestTest, RecordsSpeedupOverTheBaseline) {
  TuningManifest manifest = full_tuning_manifest();
  ASSERT_TRUE(manifest.speedup_over_baseline().has_value());
  EXPECT_NEAR(*manifest.speedup_over_baseline(), 2.0, 1e-9);
  EXPECT_EQ(manifest.context.toggles, (std::vector<std::string>{"a", "b"}));
}

TEST(TuningManifestTest, RefusesIncoherentEvidence) {
  Schedule schedule = default_affine_schedule();
  GeneratedKernel generated = affine_kernel(schedule);

  TuningResult uncertified = single_winner_result(schedule);
  uncertified.winner.oracle.mismatch_count = 3;
  uncertified.finalists = {uncertified.winner};
  Result<TuningManifest> manifest = TuningManifest::create(generated, test_adapter(), uncertified);
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.error().to_string(),
            "The winner {items_per_invocation=1, vector_width=1, workgroup_size=256} is not "
            "certified (3 mismatches in 1024 compared elements); only certified schedules can "
            "win. (while building the tuning manifest of affine_f32)");

  Schedule other = schedule;
  other.set("workgroup_size", 64);
  manifest =
      TuningManifest::create(affine_kernel(other), test_adapter(), single_winner_result(schedule));
  ASSERT_FALSE(manifest.ok());
  EXPECT_NE(manifest.error().message().find("is not the winner's"), std::string::npos);

  TuningResult absent_winner = single_winner_result(schedule);
  absent_winner.finalists.clear();
  EXPECT_FALSE(TuningManifest::create(generated, test_adapter(), absent_winner).ok());

  GeneratedKernel stale = generated;
  stale.source += "// edited\n";
  manifest = TuningManifest::create(stale, test_adapter(), single_winner_result(schedule));
  ASSERT_FALSE(manifest.ok());
  EXPECT_NE(manifest.error().message().find("is not the BLAKE3 of its source"), std::string::npos);

  TuningContext bad_topology;
  bad_topology.topology_hash = "xyz";
  manifest = TuningManifest::create(generated, test_adapter(), single_winner_result(schedule),
                                    bad_topology);
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.error().message(), "Topology hash (xyz) is not 64 hexadecimal characters.");
}

TEST(CertificationManifestTest, VerdictAndCacheKeyFollowTheEvidence) {
  GeneratedKernel generated = affine_kernel(default_affine_schedule());
  CertificationCase passing;
  passing.name = "n=257 uniform";
  passing.report.compared = 257;
  CertificationCase failing = passing;
  failing.failed_checks = {"count differs"};

  auto certified = CertificationManifest::create(generated, test_adapter(), std::string(64, 'a'),
                                                 "exact", {passing})
                       .value();
  EXPECT_EQ(certified.verdict, Verdict::kCertified);
  ASSERT_TRUE(certified.cache_key.has_value());
  EXPECT_EQ(certified.cache_key->size(), 64u);

  auto rejected = CertificationManifest::create(generated, test_adapter(), std::string(64, 'a'),
                                                "exact", {passing, failing})
                      .value();
  EXPECT_EQ(rejected.verdict, Verdict::kRejected);
  auto empty =
      CertificationManifest::create(generated, test_adapter(), std::string(64, 'a'), "exact", {})
          .value();
  EXPECT_EQ(empty.verdict, Verdict::kRejected);

  auto keyless =
      CertificationManifest::create(generated, test_adapter(), std::nullopt, "exact", {passing})
          .value();
  EXPECT_FALSE(keyless.cache_key.has_value());
  EXPECT_EQ(parse_certification_manifest(serialize_manifest(keyless).value()).value(), keyless);
}

}  // namespace
}  // namespace wgsl_forge
