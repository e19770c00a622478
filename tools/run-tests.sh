#!/usr/bin/env bash
# Command 2 of the README: the whole test suite. Every tier on the normal build, then the unit
# and integration tiers again on an AddressSanitizer + UndefinedBehaviorSanitizer build, then
# the fuzz tier on a clang + libFuzzer build, then the unit and integration tiers on a
# ThreadSanitizer build. Tiers (ctest labels) are described in docs/testing.md. Set
# HANGSCOPE_SKIP_SANITIZE=1, HANGSCOPE_SKIP_FUZZ=1 or HANGSCOPE_SKIP_TSAN=1 to skip those passes
# while iterating.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANGSCOPE_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs" -L 'unit|integration|torch|cluster|slow|deploy')

if [ "${HANGSCOPE_SKIP_SANITIZE:-0}" != 1 ]; then
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DHANGSCOPE_SANITIZE=ON -DHANGSCOPE_WERROR=ON >/dev/null
  cmake --build build-sanitize -j "$jobs"
  (cd build-sanitize &&
    LSAN_OPTIONS="suppressions=$PWD/../tests/lsan.supp:print_suppressions=0" \
      ctest --output-on-failure -j "$jobs" -L 'unit|integration')
fi

if [ "${HANGSCOPE_SKIP_FUZZ:-0}" != 1 ]; then
  # Only the fuzz targets (tests/fuzz): each replays its regressions and seeds, then fuzzes for
  # HANGSCOPE_FUZZ_SECONDS (15). tools/fuzz/run.sh fuzzes for longer.
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHANGSCOPE_FUZZ=ON -DHANGSCOPE_BUILD_TESTS=OFF -DHANGSCOPE_WERROR=ON >/dev/null
  cmake --build build-fuzz -j "$jobs" --target hangscope_fuzz_targets
  (cd build-fuzz && ctest --output-on-failure -j "$jobs" -L fuzz)
fi

if [ "${HANGSCOPE_SKIP_TSAN:-0}" != 1 ]; then
  # hangscope's own concurrency under ThreadSanitizer: the unit and integration tiers again,
  # among them the concurrency tests (shared symbol tables, module caches, frame lists), parallel
  # node captures and every agent test (gRPC server threads, the busy queue, diagnose's worker
  # pool), whose agents and diagnose runs are this build's binary too. Every process writes its
  # reports to $reports (log_path): a race in a spawned agent fails the pass even when the test
  # that started it passed. tests/tsan.supp says why ignore_noninstrumented_modules replaces
  # suppressions for Debian's gRPC, abseil and OpenSSL.
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DHANGSCOPE_TSAN=ON -DHANGSCOPE_WERROR=ON >/dev/null
  cmake --build build-tsan -j "$jobs" --target unit_tests integration_tests
  reports="$PWD/build-tsan/tsan-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  (cd build-tsan &&
    TSAN_OPTIONS="suppressions=$PWD/../tests/tsan.supp:ignore_noninstrumented_modules=1:log_path=$reports/report:exitcode=66" \
      ctest --output-on-failure -j "$jobs" -L 'unit|integration')
  if compgen -G "$reports/report.*" >/dev/null; then
    cat "$reports"/report.*
    echo "run-tests.sh: ThreadSanitizer reported the above ($reports)" >&2
    exit 1
  fi
fi
