# Finds the Debian 12 packages hangscope builds against (see tools/install-deps.sh).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
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
