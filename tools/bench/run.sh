#!/usr/bin/env bash
# The benchmarks (tools/bench/bench.py) in one command: builds hangscope, checks the peers
# (eu-stack, gdb with python3.11-dbg; tools/install-deps.sh installs them) and writes
# docs/performance.md with the ratios from this run. Needs root (ptrace of other processes'
# threads, many loopback ports). Extra arguments go to bench.py (e.g. --runs 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target hangscope >/dev/null
for tool in eu-stack gdb cc; do
  command -v "$tool" >/dev/null || echo "run.sh: $tool missing: its column stays empty" >&2
done
# The scale benchmark opens one connection per simulated node (4,096).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec /usr/bin/python3 tools/bench/bench.py "$@"
