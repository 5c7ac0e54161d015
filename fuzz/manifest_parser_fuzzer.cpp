// libFuzzer target for the manifest parser: any bytes, as a tuning manifest, a certification
// manifest and a measurement record. The parser must never crash, what it accepts must be exactly
// what serializing the parsed value writes (a manifest file has one spelling), and it must be a
// manifest create() could have made (no broken invariant).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "wgsl_forge/manifest_json.hpp"

namespace {

template <typename Manifest>
void check_round_trip(const wgsl_forge::Result<Manifest>& parsed, std::string_view bytes) {
  if (!parsed) {
    if (parsed.error().message().empty()) std::abort();  // every refusal says why
    return;
  }
  if (parsed->broken_invariant()) std::abort();
  wgsl_forge::Result<std::string> written = wgsl_forge::serialize_manifest(*parsed);
  if (!written || *written != bytes) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check_round_trip(wgsl_forge::parse_tuning_manifest(bytes), bytes);
  check_round_trip(wgsl_forge::parse_certification_manifest(bytes), bytes);
  check_round_trip(wgsl_forge::parse_measurement_record(bytes), bytes);
  return 0;
}
