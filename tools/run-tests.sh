#!/usr/bin/env bash
# Command 2 of the README: the whole test suite, in three builds (docs/testing.md):
#   build/        GCC, RelWithDebInfo (-O2 -g; the build tools/setup.sh makes, configured the
#                 same way so CI compiles it once): every tier (unit, integration, torch,
#                 cluster, slow, deploy);
#   build-asan/   clang, Debug, AddressSanitizer + UndefinedBehaviorSanitizer + libFuzzer
#                 coverage: the unit and integration tiers, then the fuzz tier, from one build;
#   build-tsan/   GCC, Release (-O3), ThreadSanitizer: the unit and integration tiers.
# The two sanitizer builds are unity builds (CMAKE_UNITY_BUILD: 8 sources a translation unit,
# a third of the compile time; build/ stays one source a unit, so each stays self-contained) and
# compile in the background, at idle priority, while build/'s tiers run. Each phase prints its time; the summary at the end is the breakdown docs/testing.md quotes.
#
#   tools/run-tests.sh           everything (CI runs this)
#   tools/run-tests.sh --quick   the inner loop: build/ only, unit + integration tiers
#
# HANGSCOPE_SKIP_SANITIZE=1 (the unit and integration tiers under ASan), HANGSCOPE_SKIP_FUZZ=1
# (the fuzz tier) and HANGSCOPE_SKIP_TSAN=1 skip those passes while iterating.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  -h | --help)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "run-tests.sh: unknown argument '$1' (use --quick, or no argument for every tier)" >&2
    exit 2
    ;;
esac

timings=()
phase_started=0
phase_name=""
begin() {
  phase_name=$1
  phase_started=$SECONDS
  echo "=== run-tests.sh: $phase_name"
}
end() {
  local took=$((SECONDS - phase_started))
  timings+=("$(printf '%5d s  %s' "$took" "$phase_name")")
  echo "=== run-tests.sh: $phase_name took ${took} s"
}
# Each phase's budget in seconds on this machine kind (2 cores), so that an issue that adds tests
# sees what it spends: CI's target is 2100 s for the whole .ci/run, setup's ~460 s included.
# A phase over its budget is called out in the summary, never failed (timings are not tests).
budget_of() {
  case "$1" in
    "build/ (GCC RelWithDebInfo): compile"*) echo 120 ;; # incremental after tools/setup.sh
    "build/: the area graph"*) echo 15 ;;
    "build/: unit + integration tiers"*) echo 240 ;;
    "build/: unit, integration, torch, cluster, slow, deploy tiers"*) echo 720 ;;
    "waiting for the sanitizer builds"*) echo 300 ;;
    "build-asan/ (clang Debug"*) echo 900 ;; # in the background
    "build-tsan/ (GCC Release"*) echo 400 ;;  # in the background
    "build-asan/: unit + integration tiers"*) echo 240 ;;
    "build-asan/: fuzz tier"*) echo 150 ;;
    "build-tsan/: unit + integration tiers"*) echo 200 ;;
    *) echo 0 ;;
  esac
}
# "  123 s  name" -> "  123 s  name (budget 240 s)", with "OVER BUDGET" when over it.
with_budget() {
  local line=$1 took name budget
  took=$(awk '{print $1}' <<<"$line")
  name=${line#*s  }
  budget=$(budget_of "$name")
  if [ "$budget" -eq 0 ]; then
    printf '%s\n' "$line"
  elif [ "$took" -gt "$budget" ]; then
    printf '%s (budget %d s) OVER BUDGET by %d s\n' "$line" "$budget" $((took - budget))
  else
    printf '%s (budget %d s)\n' "$line" "$budget"
  fi
}
summary() { # [EXIT_STATUS]: the script's, when a trap ran something before
  local rc=${1:-$?} line over=()
  if [ "${#timings[@]}" -gt 0 ]; then
    local annotated=()
    for line in "${timings[@]}"; do
      annotated+=("$(with_budget "$line")")
      [[ "${annotated[-1]}" == *"OVER BUDGET"* ]] && over+=("${annotated[-1]}")
    done
    timings=("${annotated[@]}")
    echo "=== run-tests.sh: time per phase (total ${SECONDS} s)"
    printf '%s\n' "${timings[@]}"
    if [ "${#over[@]}" -gt 0 ]; then
      echo "=== run-tests.sh: ${#over[@]} phase(s) over budget (not a failure; see docs/testing.md):"
      printf '%s\n' "${over[@]}"
    fi
    # .ci/run keeps each CI run's breakdown (HANGSCOPE_TIMINGS_FILE), also when a phase failed.
    if [ -n "${HANGSCOPE_TIMINGS_FILE:-}" ]; then
      {
        echo "run-tests.sh: total ${SECONDS} s, exit $rc"
        printf '%s\n' "${timings[@]}"
        # The phase that failed, with the time it had run.
        [ -n "$phase_name" ] &&
          printf '%5d s  %s (failed)\n' $((SECONDS - phase_started)) "$phase_name"
      } >>"$HANGSCOPE_TIMINGS_FILE" 2>/dev/null || true
    fi
  fi
  [ "$rc" -ne 0 ] && [ -n "$phase_name" ] && echo "=== run-tests.sh: failed in: $phase_name" >&2
  return "$rc"
}
trap summary EXIT

# build/: configured exactly as tools/setup.sh does, so CI's second command reuses its objects.
begin "build/ (GCC RelWithDebInfo): compile"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANGSCOPE_WERROR=ON >/dev/null
if [ "$quick" = 1 ]; then
  cmake --build build -j "$jobs" --target hangscope unit_tests integration_tests
else
  cmake --build build -j "$jobs"
fi
end
# The layering as CMake itself draws it: one library per area, each linking only the areas below
# it, as docs/architecture.md shows (tools/check-layers.py; the unit tier checks the includes).
begin "build/: the area graph (cmake --graphviz)"
cmake --graphviz=build/graph/hangscope.dot build >/dev/null
python3 tools/check-layers.py build/areas.txt . --graphviz build/graph/hangscope.dot
end
if [ "$quick" = 1 ]; then
  begin "build/: unit + integration tiers"
  (cd build && ctest --output-on-failure -j "$jobs" -L 'unit|integration')
  end
  phase_name=""
  exit 0
fi
# The sanitizer builds compile in the background at idle priority while build/'s tiers run:
# those spend most of their time waiting on hung ranks, agents, namespaces and apt, and a
# SCHED_IDLE compiler only takes the CPU time they leave. Each build's time is in the summary.
asan=1
fuzz=1
tsan=1
[ "${HANGSCOPE_SKIP_SANITIZE:-0}" = 1 ] && asan=0
[ "${HANGSCOPE_SKIP_FUZZ:-0}" = 1 ] && fuzz=0
[ "${HANGSCOPE_SKIP_TSAN:-0}" = 1 ] && tsan=0
asan_targets=()
[ "$asan" = 1 ] && asan_targets+=(hangscope unit_tests integration_tests)
[ "$fuzz" = 1 ] && asan_targets+=(hangscope_fuzz_targets)
background_log=$PWD/build/sanitizer-builds.log
background_times=$PWD/build/sanitizer-builds.times
idle=()
command -v chrt >/dev/null && chrt --idle 0 true 2>/dev/null && idle=(chrt --idle 0)
compile_sanitizer_builds() {
  local t
  set -e
  : >"$background_times"
  if [ "${#asan_targets[@]}" -gt 0 ]; then
    # build-asan/: one clang build serves the sanitizer pass and the fuzz tier. HANGSCOPE_FUZZ
    # compiles every target with ASan + UBSan (any UB report aborts) and libFuzzer's coverage
    # instrumentation; the fuzz targets link libFuzzer's main. Debug (-O0): cheapest to compile.
    t=$SECONDS
    CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHANGSCOPE_FUZZ=ON \
      -DCMAKE_UNITY_BUILD=ON -DHANGSCOPE_WERROR=ON >/dev/null
    "${idle[@]}" nice -n 19 cmake --build build-asan -j "$jobs" --target "${asan_targets[@]}"
    printf '%5d s  %s\n' $((SECONDS - t)) \
      "build-asan/ (clang Debug, ASan + UBSan + libFuzzer): compile, in the background" \
      >>"$background_times"
  fi
  if [ "$tsan" = 1 ]; then
    # build-tsan/: Release (-O3), the optimisation level users' Release builds get, with GCC's
    # -O3-only warnings (-Wrestrict, ...) as errors.
    t=$SECONDS
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DHANGSCOPE_TSAN=ON \
      -DCMAKE_UNITY_BUILD=ON -DHANGSCOPE_WERROR=ON >/dev/null
    "${idle[@]}" nice -n 19 cmake --build build-tsan -j "$jobs" --target unit_tests integration_tests
    printf '%5d s  %s\n' $((SECONDS - t)) "build-tsan/ (GCC Release -O3, TSan): compile, in the background" \
      >>"$background_times"
  fi
}
compile_sanitizer_builds >"$background_log" 2>&1 &
background=$!
kill_tree() { # a process and everything below it, children first stopped from forking
  local child
  kill -STOP "$1" 2>/dev/null || return 0
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill -KILL "$1" 2>/dev/null || true
}
stop_background() { kill_tree "$background"; }
trap 'rc=$?; stop_background; summary "$rc"' EXIT

begin "build/: unit, integration, torch, cluster, slow, deploy tiers"
(cd build && ctest --output-on-failure -j "$jobs" -L 'unit|integration|torch|cluster|slow|deploy')
end

begin "waiting for the sanitizer builds (log: build/sanitizer-builds.log)"
if ! wait "$background"; then
  tail -n 60 "$background_log"
  echo "run-tests.sh: a sanitizer build failed; its whole log is $background_log" >&2
  exit 1
fi
end
while IFS= read -r line; do timings+=("$line"); done <"$background_times"

if [ "$asan" = 1 ]; then
  begin "build-asan/: unit + integration tiers"
  (cd build-asan &&
    LSAN_OPTIONS="suppressions=$PWD/../tests/lsan.supp:print_suppressions=0" \
      ctest --output-on-failure -j "$jobs" -L 'unit|integration')
  end
fi
if [ "$fuzz" = 1 ]; then
  # Each fuzz target replays its regressions and seeds, then fuzzes for
  # HANGSCOPE_FUZZ_SECONDS (15). tools/fuzz/run.sh fuzzes for longer.
  begin "build-asan/: fuzz tier"
  (cd build-asan && ctest --output-on-failure -j "$jobs" -L fuzz)
  end
fi

if [ "$tsan" = 1 ]; then
  # hangscope's own concurrency under ThreadSanitizer: the unit and integration tiers again,
  # among them the concurrency tests (shared symbol tables, module caches, frame lists), parallel
  # node captures and every agent test (gRPC server threads, the busy queue, diagnose's worker
  # pool), whose agents and diagnose runs are this build's binary too. Every process writes its
  # reports to $reports (log_path): a race in a spawned agent fails the pass even when the test
  # that started it passed. tests/tsan.supp says why ignore_noninstrumented_modules replaces
  # suppressions for Debian's gRPC, abseil and OpenSSL.
  begin "build-tsan/: unit + integration tiers"
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
  end
fi
phase_name=""
