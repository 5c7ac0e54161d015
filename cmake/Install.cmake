# The installable library and its packages: one shared libwgsl_forge.so made of every static
# layer, `cmake --install` of the headers, libraries, tool and Dawn, a CMake package
# (find_package(wgsl_forge CONFIG) -> wgsl_forge::wgsl_forge) and a pkg-config file (wgsl_forge.pc).
#
# Installed layout (GNUInstallDirs):
#   include/wgsl_forge/*.hpp, *.h, version.hpp
#   lib/libwgsl_forge.so.0.1.0 (SONAME libwgsl_forge.so.0), libwgsl_forge_<layer>.a
#   lib/wgsl_forge/libwebgpu_wrapper.so        Dawn, found relative to the wgsl_forge code
#   lib/cmake/wgsl_forge/, lib/pkgconfig/wgsl_forge.pc
#   bin/wgsl-forge
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Every layer, each before the layers it uses (see the link below); the C API joins when it
# exists (src/capi), above the forge.
set(WGSL_FORGE_LAYERS
  wgsl_forge_forge wgsl_forge_kernels wgsl_forge_gpu wgsl_forge_cache wgsl_forge_model
  wgsl_forge_util)
if(TARGET wgsl_forge_capi)
  list(PREPEND WGSL_FORGE_LAYERS wgsl_forge_capi)
endif()
# The layers end up inside a shared library.
set_target_properties(${WGSL_FORGE_LAYERS} PROPERTIES POSITION_INDEPENDENT_CODE ON)

# Where an installation keeps Dawn, relative to the directory of the wgsl_forge code that looks
# for it (the shared library or a program linking the layers, in the library directory), and the
# way from the program directory to the library directory (the tool, in bin/). Both are relative
# so that an installed tree still works when it is moved or copied elsewhere.
set(WGSL_FORGE_INSTALLED_WEBGPU_LIB "wgsl_forge/libwebgpu_wrapper.so")
file(RELATIVE_PATH WGSL_FORGE_BIN_TO_LIB
  "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
target_compile_definitions(wgsl_forge_gpu PRIVATE
  WGSL_FORGE_INSTALLED_WEBGPU_LIB="${WGSL_FORGE_INSTALLED_WEBGPU_LIB}"
  WGSL_FORGE_BIN_TO_LIB="${WGSL_FORGE_BIN_TO_LIB}")

# One shared library with every layer in it, whole: a layer's object that nothing else in the
# library calls (a public function only programs use) must still be there.
# BLAKE3's C objects are its sources: the layers call BLAKE3, and a shared library needs at
# least one source of its own.
add_library(wgsl_forge_shared SHARED $<TARGET_OBJECTS:blake3>)
list(JOIN WGSL_FORGE_LAYERS "," WGSL_FORGE_LAYERS_CSV)
target_link_libraries(wgsl_forge_shared PRIVATE
  "$<LINK_LIBRARY:WHOLE_ARCHIVE,${WGSL_FORGE_LAYERS_CSV}>")
# The layers also reach the link through each other's usage requirements, without the feature;
# this makes every mention of them the whole archive, which CMake otherwise refuses as a conflict.
# Listed users first, each layer is mentioned once: a second mention of a whole archive would
# define every symbol in it twice.
set_target_properties(wgsl_forge_shared PROPERTIES
  LINK_LIBRARY_OVERRIDE "WHOLE_ARCHIVE,${WGSL_FORGE_LAYERS_CSV}")
# A symbol missing from the library (a layer not listed) fails here, not in a consumer's link.
# Not under sanitizers: clang leaves their runtime to the executable, so a sanitized shared
# library always has undefined symbols.
if(NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  target_link_options(wgsl_forge_shared PRIVATE LINKER:--no-undefined)
endif()
set_target_properties(wgsl_forge_shared PROPERTIES
  OUTPUT_NAME wgsl_forge
  EXPORT_NAME wgsl_forge
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR})
# What a consumer needs: the headers and C++20 (they use std::span). No third-party header is
# public (nlohmann-json, BLAKE3 and Dawn are inside the library; hiredis is a NEEDED entry of the
# shared library), so nothing else is required.
target_include_directories(wgsl_forge_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(wgsl_forge_shared INTERFACE cxx_std_20)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/wgsl_forge
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/generated/wgsl_forge/version.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/wgsl_forge)

install(TARGETS wgsl_forge_shared EXPORT wgsl_forgeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The static layers, for programs that link them by hand (they also need BLAKE3's archive,
# installed under a name of ours, nlohmann-json's headers, -lhiredis, -ldl and -pthread). They are not
# exported as a CMake target: their usage requirements name build-tree targets (BLAKE3, the
# warnings) and paths.
set_target_properties(blake3 PROPERTIES OUTPUT_NAME wgsl_forge_blake3)
install(TARGETS ${WGSL_FORGE_LAYERS} blake3 ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS wgsl-forge RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Dawn, the prebuilt library of the npm package setup installs, where the code looks for it.
cmake_path(GET WGSL_FORGE_INSTALLED_WEBGPU_LIB PARENT_PATH WGSL_FORGE_INSTALLED_WEBGPU_DIR)
install(PROGRAMS ${WGSL_FORGE_BUILD_TREE_WEBGPU_LIB}
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/${WGSL_FORGE_INSTALLED_WEBGPU_DIR})

set(WGSL_FORGE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/wgsl_forge)
install(EXPORT wgsl_forgeTargets NAMESPACE wgsl_forge:: DESTINATION ${WGSL_FORGE_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/wgsl_forgeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/wgsl_forgeConfig.cmake
  INSTALL_DESTINATION ${WGSL_FORGE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wgsl_forgeConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wgsl_forgeConfig.cmake
  ${PROJECT_BINARY_DIR}/wgsl_forgeConfigVersion.cmake
  DESTINATION ${WGSL_FORGE_CMAKE_DIR})

# The prefix is found from the .pc file's own place (${pcfiledir}), so that the file stays right
# for `cmake --install --prefix DIR` and for an installed tree that is moved.
file(RELATIVE_PATH WGSL_FORGE_PC_TO_PREFIX
  "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/wgsl_forge.pc.in
  ${PROJECT_BINARY_DIR}/wgsl_forge.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/wgsl_forge.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
