#!/usr/bin/env bash
# The built-in demo: a two-node virtual cluster (network, PID, UTS and mount namespaces; see
# tools/testbed/cluster.sh) running 4 real torch.distributed gloo ranks hung like seed bug A
# (vLLM issue #52907): the ranks of node1 fail vLLM's symmetric-memory rendezvous fast and move
# on to in_the_same_node_as, while node0's ranks wait inside the rendezvous for them. (The vLLM
# code is simulated with its real module paths: tools/repro/sim.) Each node runs a real
# `hangscope collect` agent; `hangscope diagnose` asks both over gRPC, names the known bug and
# the ranks, and prints the report. Cleans up everything it starts.
#
# Without root (no namespaces), seed bug B (autotune cache hit on rank 3 only) runs on this
# machine and is diagnosed locally. HANGSCOPE_DEMO_SCENARIO picks another scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
hangscope=$(realpath "${HANGSCOPE:-build/src/hangscope}")
scenario=${HANGSCOPE_DEMO_SCENARIO:-}
work=$(mktemp -d)
launcher=""
cleanup() {
  if [ -n "$launcher" ]; then
    kill -KILL -- "-$launcher" 2>/dev/null || true
    wait "$launcher" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

show() {
  echo
  echo "=== report.md (first 60 lines; the bundle also holds report.json, tree.dot, stacks.folded) ==="
  head -60 "$work/bundle/report.md"
}

if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && command -v unshare >/dev/null; then
  scenario=${scenario:-symmetric-memory}
  echo "=== two nodes x two gloo ranks, scenario $scenario; agents on 198.51.100.1-2:7447 ==="
  rc=0
  tools/testbed/cluster.sh run --dir "$work/cluster" --nodes 2 --ranks 2 --diverged 3 \
    --scenario "$scenario" --hangscope "$hangscope" -- \
    bash -c "\"$hangscope\" diagnose --agents \"\$AGENTS\" --token-file \"\$TOKEN_FILE\" \
      --samples 3 --interval 500ms -o \"$work/bundle\"" || rc=$?
else
  scenario=${scenario:-autotune-cache}
  echo "=== not root: a local 4-rank gloo job, scenario $scenario, diagnosed on this machine ==="
  log="$work/job.log"
  setsid /usr/bin/python3 tools/repro/gloo_barrier_hang.py --world-size 4 --diverged-rank 3 \
    --scenario "$scenario" >"$log" 2>&1 &
  launcher=$!
  for _ in $(seq 600); do
    [ "$(grep -c '^rank ' "$log" || true)" -ge 4 ] && break
    sleep 0.1
  done
  sleep 1
  rc=0
  "$hangscope" diagnose --select 'gloo_barrier_hang|RayWorkerWrapper' --samples 3 --interval 500ms \
    -o "$work/bundle" || rc=$?
fi
# diagnose: 3 = a divergence was found (expected here), 0 = none; anything else failed.
if [ "$rc" -ne 3 ] && [ "$rc" -ne 0 ]; then
  echo "demo: diagnose failed (exit $rc)" >&2
  exit 1
fi
show
