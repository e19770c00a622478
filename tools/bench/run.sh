#!/usr/bin/env bash
# The benchmarks (tools/bench/bench.py) in one command: builds hangscope, checks the peers
# (eu-stack, gdb with python3.11-dbg; tools/install-deps.sh installs them) and writes
# docs/performance.md with the ratios from this run. Needs root (ptrace of other processes'
# threads, many loopback ports, namespaces). Extra arguments go to bench.py (e.g. --runs 3);
# then tools/bench/false_alarms.sh appends the false-alarm rate on healthy jobs.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target hangscope >/dev/null
for tool in eu-stack gdb cc; do
  command -v "$tool" >/dev/null || echo "run.sh: $tool missing: its column stays empty" >&2
done
# The scale benchmark opens one connection per simulated node (4,096).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
/usr/bin/python3 tools/bench/bench.py "$@"
# Then the false-alarm benchmark (issue 32; about 15 minutes: 6 rhythms x 50 diagnoses through
# a virtual cluster's agents), its section appended to what bench.py wrote.
echo >> docs/performance.md
tools/bench/false_alarms.sh 50 build/src/hangscope >> docs/performance.md
