# Finds the Debian 12 packages hangscope builds against (see tools/install-deps.sh).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)  # SHA-256 of cache files
find_package(PkgConfig REQUIRED)
# libunwind's remote (generic) API: unwinding a copied stack through our own accessors.
pkg_check_modules(LIBUNWIND REQUIRED IMPORTED_TARGET libunwind-generic)
