#!/usr/bin/env bash
# Fuzzes the parsers of untrusted input (tests/fuzz) for longer than the `fuzz` ctests do.
#
#   tools/fuzz/run.sh [-t SECONDS] [TARGET...]
#
# Builds build-fuzz/ (clang, -DHANGSCOPE_FUZZ=ON: libFuzzer + ASan + UBSan), then runs every
# target (or the named ones, e.g. `elf python_frames`) for SECONDS each (default 300), one
# after the other. Each target starts from its kept seeds (tests/fuzz/corpus/<name>) and its
# regressions, and keeps what it finds in build-fuzz/fuzz-work/<name>/corpus across runs;
# crashes, leaks, timeouts (> 10 s per input) and out-of-memory (> 2 GiB; per-target flags such
# as -malloc_limit_mb in tests/fuzz/options/<name>) stop the target and
# leave the reproducer in build-fuzz/fuzz-work/<name>/artifacts/. Prints per target:
# executions, exec/s, corpus size, coverage, crashes; writes tools/fuzz/results.json (the
# targets run this time replace their previous entries), which docs/reliability.md quotes.
#
# A reproducer: build-fuzz/tests/fuzz/<name>_fuzz FILE runs one input; minimise it with
# build-fuzz/tests/fuzz/<name>_fuzz -minimize_crash=1 -runs=10000 FILE. Environment:
# HANGSCOPE_FUZZ_JOBS (build parallelism, default nproc), HANGSCOPE_FUZZ_NO_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

seconds=300
while getopts "t:h" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

all=$(sed -n '/^set(HANGSCOPE_FUZZ_TARGETS/,/CACHE INTERNAL/p' tests/fuzz/CMakeLists.txt |
        sed -e '1d' -e '$d' -e 's/#.*//' | tr -s ' \n' '\n' | sed '/^$/d')
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then mapfile -t targets <<<"$all"; fi
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$all" || { echo "run.sh: no fuzz target $t (known: $(echo $all))" >&2; exit 2; }
done

if [ "${HANGSCOPE_FUZZ_NO_BUILD:-0}" != 1 ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHANGSCOPE_FUZZ=ON -DHANGSCOPE_BUILD_TESTS=OFF >/dev/null
  cmake --build build-fuzz -j "${HANGSCOPE_FUZZ_JOBS:-$(nproc)}" \
    --target $(printf '%s_fuzz ' "${targets[@]}") >/dev/null
fi

export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
printf '%-16s %12s %8s %8s %10s %8s %8s  %s\n' target executions exec/s corpus bytes cov crashes result
for t in "${targets[@]}"; do
  work=build-fuzz/fuzz-work/$t
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ -d "tests/fuzz/corpus/$t" ]; then cp -rn "tests/fuzz/corpus/$t/." "$work/corpus/"; fi
  dirs=("$work/corpus")
  if [ -d "tests/fuzz/regressions/$t" ]; then dirs+=("tests/fuzz/regressions/$t"); fi
  ls "$work/artifacts" | sort >"$work/artifacts.before"
  options=()  # the target's own flags (tests/fuzz/options/README.md)
  if [ -f "tests/fuzz/options/$t" ]; then
    mapfile -t options < <(grep -v '^[[:space:]]*$' "tests/fuzz/options/$t")
  fi
  status=0
  "build-fuzz/tests/fuzz/${t}_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "${options[@]}" -artifact_prefix="$work/artifacts/" "${dirs[@]}" \
    >"$work/log" 2>&1 || status=$?
  # The last status line ("#123 ... cov: 10 ft: 20 corp: 5/1Kb exec/s: 99 ...") and the stats.
  last=$(grep -E '^#[0-9]+' "$work/log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
  [ -n "$execs" ] || execs=$(sed -E -n 's/^#([0-9]+).*/\1/p' <<<"$last")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log")
  [ -n "$rate" ] || rate=$(sed -E -n 's/.*exec\/s: ([0-9]+).*/\1/p' <<<"$last")
  cov=$(sed -E -n 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  features=$(sed -E -n 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  files=$(find "$work/corpus" -type f | wc -l)
  bytes=$(du -sb "$work/corpus" | cut -f1)
  new_artifacts=$(ls "$work/artifacts" | sort | comm -13 "$work/artifacts.before" - |
                    sed "s|^|$work/artifacts/|")
  crashes=$(grep -c . <<<"$new_artifacts" || true)
  result=ok
  if [ "$status" -ne 0 ]; then
    result=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer|UndefinedBehaviorSanitizer)[^(]*|runtime error: .*' "$work/log" || echo "exit $status")
  fi
  printf '%-16s %12s %8s %8s %10s %8s %8s  %s\n' "$t" "${execs:-0}" "${rate:-0}" "$files" "$bytes" \
    "${cov:-?}" "$crashes" "$result"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "${execs:-0}" "${rate:-0}" "$files" \
    "$bytes" "${cov:-0}" "${features:-0}" "$crashes" "$result" \
    "$(tr '\n' ' ' <<<"$new_artifacts")" >>"$summary"
done

python3 - "$summary" "$seconds" "$root" <<'EOF'
import json, os, subprocess, sys, time
summary, seconds, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
path = os.path.join(root, "tools/fuzz/results.json")
try:
    with open(path) as f:
        doc = json.load(f)
except (OSError, ValueError):
    doc = {"targets": {}}
rev = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"],
                     capture_output=True, text=True).stdout.strip()
for line in open(summary):
    name, execs, rate, files, size, cov, ft, crashes, result, artifacts = line.rstrip("\n").split("\t")
    doc["targets"][name] = {
        "seconds": seconds, "executions": int(execs), "exec_per_second": int(rate),
        "corpus_files": int(files), "corpus_bytes": int(size), "coverage_edges": int(cov),
        "features": int(ft), "crashes": int(crashes), "result": result,
        "artifacts": artifacts.split(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "revision": rev,
    }
doc["machine"] = f"{os.cpu_count()} cores, clang 14 libFuzzer + ASan + UBSan, RelWithDebInfo"
doc["targets"] = dict(sorted(doc["targets"].items()))
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
print(f"run.sh: wrote {os.path.relpath(path, root)}")
EOF
