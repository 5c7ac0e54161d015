#pragma once
// Manifests for tests of the model and the cache, drawn from a seeded generator so that every
// run exercises fresh values and a failure can be replayed from the seed printed with it.

#include <cstdint>
#include <random>

#include "wgsl_forge/model.hpp"

namespace wgsl_forge::testing {

// A seed from the environment (WGSL_FORGE_TEST_SEED) or fresh from the system; tests print it.
std::uint64_t test_seed();

AdapterIdentity test_adapter();
// A hand-written kernel in the shape the generator produces (the catalog is not needed here).
GeneratedKernel affine_kernel(const Schedule& schedule);
Schedule default_affine_schedule();
CandidateResult certified_candidate(const Schedule& schedule, std::uint64_t median_ns);
// A search that measured one candidate, which won: its record, the finals and the winner.
TuningResult single_winner_result(const CandidateResult& winner);

// Random but coherent manifests: every field and every optional is exercised over many seeds.
TuningManifest random_tuning_manifest(std::mt19937_64& random);
CertificationManifest random_certification_manifest(std::mt19937_64& random);
MeasurementRecord random_measurement_record(std::mt19937_64& random);
std::string random_topology_hash(std::mt19937_64& random);

}  // namespace wgsl_forge::testing
