#!/usr/bin/env bash
# Compiles every target in each CMake build type (Debug, Release, RelWithDebInfo, MinSizeRel)
# with each compiler (GCC, clang), warnings as errors: the matrix docs/install.md promises.
# Each build is a unity build in build-types/<compiler>-<type>/ (a fraction of the time; CI's
# build/ checks that every source compiles on its own). Not part of CI (about 25 minutes on
# 2 cores); run it after changing compile options, warnings or a compiler-sensitive header.
#   tools/check-build-types.sh [gcc|clang] [TYPE...]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
compilers=(gcc clang)
types=(Debug Release RelWithDebInfo MinSizeRel)
if [ $# -gt 0 ]; then
  compilers=("$1")
  shift
fi
[ $# -gt 0 ] && types=("$@")

mkdir -p build-types
results=()
failed=0
for compiler in "${compilers[@]}"; do
  case "$compiler" in
    gcc) cc=gcc cxx=g++ ;;
    clang) cc=clang cxx=clang++ ;;
    *)
      echo "check-build-types.sh: unknown compiler '$compiler' (gcc or clang)" >&2
      exit 2
      ;;
  esac
  for type in "${types[@]}"; do
    dir=build-types/$compiler-$type
    started=$SECONDS
    if CC=$cc CXX=$cxx cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DHANGSCOPE_WERROR=ON \
      -DCMAKE_UNITY_BUILD=ON >"$dir.log" 2>&1 &&
      cmake --build "$dir" -j "$jobs" >>"$dir.log" 2>&1; then
      results+=("$(printf 'ok      %-6s %-15s %4d s' "$compiler" "$type" $((SECONDS - started)))")
    else
      results+=("$(printf 'FAILED  %-6s %-15s %4d s  (%s)' "$compiler" "$type" $((SECONDS - started)) "$dir.log")")
      grep -m 20 -E 'error|warning' "$dir.log" || tail -n 20 "$dir.log"
      failed=1
    fi
  done
done
printf '%s\n' "${results[@]}"
exit "$failed"
