#include <gtest/gtest.h>

#include <string>

#include "wgsl_forge/hash.hpp"

namespace wgsl_forge {
namespace {

// The official BLAKE3 test vectors: input byte i is (i % 251); hash is the default 32-byte output.
struct Blake3Vector {
  std::size_t input_length;
  const char* hash;
};

constexpr Blake3Vector kOfficialVectors[] = {
    {0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
    {1, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213"},
    {63, "e9bc37a594daad83be9470df7f7b3798297c3d834ce80ba85d6e207627b7db7b"},
    {64, "4eed7141ea4a5cd4b788606bd23f46e212af9cacebacdc7d1f4c6dc7f2511b98"},
    {65, "de1e5fa0be70df6d2be8fffd0e99ceaa8eb6e8c93a63f2d8d1c30ecb6b263dee"},
    {1023, "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11"},
    {1024, "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7"},
    {1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444"},
    {2048, "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a"},
    {8193, "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b"},
    {31744, "62b6960e1a44bcc1eb1a611a8d6235b6b4b78f32e7abc4fb4c6cdcce94895c47"},
    {102400, "bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085"},
};

TEST(Blake3Test, MatchesOfficialTestVectors) {
  for (const Blake3Vector& vector : kOfficialVectors) {
    std::string input(vector.input_length, '\0');
    for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<char>(i % 251);
    EXPECT_EQ(blake3_hex(input), vector.hash) << "input length " << vector.input_length;
  }
}

TEST(Blake3Test, IsHexDigestAcceptsOnly64HexCharacters) {
  EXPECT_TRUE(is_hex_digest(std::string(64, 'a')));
  EXPECT_TRUE(is_hex_digest(std::string(64, 'F')));
  EXPECT_FALSE(is_hex_digest(std::string(63, 'a')));
  EXPECT_FALSE(is_hex_digest(std::string(65, 'a')));
  EXPECT_FALSE(is_hex_digest(std::string(63, 'a') + "g"));
  EXPECT_FALSE(is_hex_digest(""));
}

}  // namespace
}  // namespace wgsl_forge
