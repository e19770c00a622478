# Finds the Debian 12 packages hangscope builds against (see tools/install-deps.sh).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
# spdlog and fmt compiled into hangscope (header-only; Debian's spdlog formats through its
# external fmt): neither libspdlog.so nor libfmt.so is loaded, and with them not libstdc++.so
# either for the front program, which links libstdc++ statically (src/CMakeLists.txt: a
# one-shot `dump` paid about 0.9 ms of start-up for loading the three).
add_library(hangscope_logging INTERFACE)
target_compile_definitions(hangscope_logging INTERFACE SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY=1)
target_include_directories(hangscope_logging SYSTEM INTERFACE
  $<TARGET_PROPERTY:spdlog::spdlog_header_only,INTERFACE_INCLUDE_DIRECTORIES>
  $<TARGET_PROPERTY:fmt::fmt-header-only,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(hangscope_logging INTERFACE Threads::Threads)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)  # SHA-256 of cache files
# The watcher's /metrics endpoint: prometheus-cpp's core and pull (pull serves HTTP through
# Debian's shared civetweb, whose civetweb::civetweb targets its package config finds too).
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
# libunwind's remote (generic) API: unwinding a copied stack through our own accessors.
pkg_check_modules(LIBUNWIND REQUIRED IMPORTED_TARGET libunwind-generic)
# RE2: signature-rule regexes matched in linear time (docs/rules.md). gRPC depends on it too,
# and its package config already defines re2::re2 (pkg-config re2); RE2 is linked through
# hangscope_rpc_libs (HangscopeStaticRpc.cmake) like the rest of the gRPC stack, so the
# executable holds one copy: libre2.a when gRPC is static, libre2.so otherwise.
if(NOT TARGET re2::re2)
  pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
  add_library(re2::re2 ALIAS PkgConfig::RE2)
endif()
