#pragma once
// BLAKE3 (the official C implementation) behind a small, std-only interface.

#include <string>
#include <string_view>

namespace wgsl_forge {

// BLAKE3 of `bytes`, 32 bytes written as 64 lowercase hexadecimal characters.
std::string blake3_hex(std::string_view bytes);

// True when `text` is exactly 64 hexadecimal characters (either case).
bool is_hex_digest(std::string_view text);

}  // namespace wgsl_forge
