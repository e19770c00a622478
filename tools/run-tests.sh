#!/usr/bin/env bash
# Command 2 of the README: the whole test suite. Every tier on the normal build, then the unit
# and integration tiers again on an AddressSanitizer + UndefinedBehaviorSanitizer build.
# Tiers (ctest labels) are described in docs/testing.md. Set HANGSCOPE_SKIP_SANITIZE=1 to skip
# the sanitizer pass while iterating.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs" -L 'unit|integration|torch|cluster|slow|deploy')

if [ "${HANGSCOPE_SKIP_SANITIZE:-0}" != 1 ]; then
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DHANGSCOPE_SANITIZE=ON >/dev/null
  cmake --build build-sanitize -j "$jobs"
  (cd build-sanitize &&
    LSAN_OPTIONS="suppressions=$PWD/../tests/lsan.supp:print_suppressions=0" \
      ctest --output-on-failure -j "$jobs" -L 'unit|integration')
fi
