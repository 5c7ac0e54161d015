// libFuzzer target for the bundle parser (bundle.hpp): any bytes as a bundle. The parser must
// never crash, every refusal must say why, and what it accepts must be exactly what serializing
// its entries writes (a bundle has one spelling), each entry one that the cache's own reader
// accepts under its key. Through the entries it also reaches the manifest parsers.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "wgsl_forge/bundle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  wgsl_forge::Result<std::vector<wgsl_forge::EntryBytes>> entries = wgsl_forge::parse_bundle(bytes);
  if (!entries) {
    if (entries.error().message().empty()) std::abort();
    return 0;
  }
  for (const wgsl_forge::EntryBytes& entry : *entries) {
    if (!wgsl_forge::check_entry_content(entry.kind, entry.key, entry.bytes)) std::abort();
  }
  wgsl_forge::Result<std::string> written = wgsl_forge::serialize_bundle(*entries);
  if (!written || *written != bytes) std::abort();
  return 0;
}
