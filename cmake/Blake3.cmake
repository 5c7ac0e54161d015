# BLAKE3's official C implementation, as Debian ships it inside librust-blake3-dev.
# We compile it from the installed path rather than vendoring a copy.
set(WGSL_FORGE_BLAKE3_DIR "/usr/share/cargo/registry/blake3-1.3.1/c"
    CACHE PATH "Directory holding BLAKE3's C sources (blake3.c, blake3.h, ...)")

if(NOT EXISTS "${WGSL_FORGE_BLAKE3_DIR}/blake3.h")
  message(FATAL_ERROR
    "BLAKE3 C sources not found in ${WGSL_FORGE_BLAKE3_DIR}. "
    "Install them with 'apt-get install librust-blake3-dev' (scripts/setup.sh does this) "
    "or set -DWGSL_FORGE_BLAKE3_DIR=<dir>.")
endif()

add_library(blake3 STATIC
  ${WGSL_FORGE_BLAKE3_DIR}/blake3.c
  ${WGSL_FORGE_BLAKE3_DIR}/blake3_dispatch.c
  ${WGSL_FORGE_BLAKE3_DIR}/blake3_portable.c)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  target_sources(blake3 PRIVATE
    ${WGSL_FORGE_BLAKE3_DIR}/blake3_sse2_x86-64_unix.S
    ${WGSL_FORGE_BLAKE3_DIR}/blake3_sse41_x86-64_unix.S
    ${WGSL_FORGE_BLAKE3_DIR}/blake3_avx2_x86-64_unix.S
    ${WGSL_FORGE_BLAKE3_DIR}/blake3_avx512_x86-64_unix.S)
else()
  target_compile_definitions(blake3 PRIVATE BLAKE3_NO_SSE2 BLAKE3_NO_SSE41 BLAKE3_NO_AVX2 BLAKE3_NO_AVX512)
endif()
set_target_properties(blake3 PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(blake3 SYSTEM PUBLIC ${WGSL_FORGE_BLAKE3_DIR})
