#!/usr/bin/env bash
# One `fuzz` ctest (tests/fuzz/CMakeLists.txt): replays a target's regressions and seed corpus,
# then fuzzes a copy of the corpus (the kept one is never written) for SECONDS. Fails on any
# crash, leak, timeout (> 10 s per input), out-of-memory (> 2 GiB, or one allocation past the
# target's -malloc_limit_mb) or sanitizer report; the
# reproducer is left in ARTIFACTS.
# Usage: ctest_fuzz.sh TARGET_BINARY CORPUS_DIR REGRESSION_DIR ARTIFACTS_DIR SECONDS [OPTIONS_FILE]
# OPTIONS_FILE (tests/fuzz/options/<target>, when it exists) adds libFuzzer flags, one a line.
set -euo pipefail
binary=$1 corpus=$2 regressions=$3 artifacts=$4 seconds=$5 options_file=${6:-}
options=()
if [ -n "$options_file" ] && [ -f "$options_file" ]; then
  mapfile -t options < <(grep -v '^[[:space:]]*$' "$options_file")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$artifacts"
if [ -d "$corpus" ]; then cp -r "$corpus/." "$work/corpus/"; fi
dirs=("$work/corpus")
if [ -d "$regressions" ]; then dirs+=("$regressions"); fi
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
status=0
"$binary" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  "${options[@]}" -artifact_prefix="$artifacts/" "${dirs[@]}" >"$work/log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  tail -n 80 "$work/log"
  echo "ctest_fuzz.sh: $(basename "$binary") failed (exit $status); reproducer(s):" >&2
  ls -l "$artifacts" >&2
  exit 1
fi
grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^Done ' "$work/log" || true
