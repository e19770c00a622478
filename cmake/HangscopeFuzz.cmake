# HANGSCOPE_FUZZ=ON: libFuzzer targets for the parsers of untrusted input (tests/fuzz).
#
# Every target of the project is compiled with -fsanitize=fuzzer-no-link (coverage
# instrumentation) plus AddressSanitizer and UndefinedBehaviorSanitizer (any UB report aborts);
# each fuzz target links with -fsanitize=fuzzer (libFuzzer's main). Needs clang and the
# libclang_rt.fuzzer runtime (Debian 12: clang, libclang-rt-14-dev; tools/install-deps.sh).
# Build with tools/fuzz/run.sh, or: CC=clang CXX=clang++ cmake -B build-fuzz -DHANGSCOPE_FUZZ=ON.
# The test suite builds with it too: tools/run-tests.sh's build-asan/ is this configuration
# (Debug), and runs the unit and integration tiers on it before the fuzz tier.
option(HANGSCOPE_FUZZ "Build the libFuzzer targets (tests/fuzz; needs clang)" OFF)

if(HANGSCOPE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang" OR NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "HANGSCOPE_FUZZ needs clang (libFuzzer): configure a fresh build "
                        "directory with CC=clang CXX=clang++")
  endif()
  if(HANGSCOPE_SANITIZE)
    message(FATAL_ERROR "HANGSCOPE_FUZZ already builds with ASan + UBSan: leave HANGSCOPE_SANITIZE OFF")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
