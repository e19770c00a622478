#!/usr/bin/env bash
# The built-in demo: a real torch.distributed gloo job (2 ranks) where rank 1 diverged and
# rank 0 waits in dist.barrier(); hangscope dumps both ranks. Cleans up everything it starts.
set -euo pipefail
cd "$(dirname "$0")/.."
hangscope=${HANGSCOPE:-build/src/hangscope}
log=$(mktemp)
setsid /usr/bin/python3 tools/repro/gloo_barrier_hang.py --world-size 2 --diverged-rank 1 >"$log" 2>&1 &
launcher=$!
cleanup() { kill -KILL -- "-$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true; rm -f "$log"; }
trap cleanup EXIT

rank_pid() { awk -v r="$1" '$1 == "rank" && $2 == r {print $4}' "$log"; }
for _ in $(seq 600); do
  [ -n "$(rank_pid 0)" ] && [ -n "$(rank_pid 1)" ] && break
  sleep 0.1
done
waiting=$(rank_pid 0)
diverged=$(rank_pid 1)
if [ -z "$waiting" ] || [ -z "$diverged" ]; then
  echo "demo: the gloo job did not start:" >&2
  cat "$log" >&2
  exit 1
fi
# Rank 0 announces itself just before barrier(): wait until gloo is really waiting.
for _ in $(seq 100); do
  "$hangscope" dump --pid "$waiting" | grep -q 'UnboundBuffer::waitRecv' && break
  sleep 0.1
done

echo "=== hangscope dump of rank 0 (pid $waiting), waiting in dist.barrier() ==="
"$hangscope" dump --pid "$waiting"
echo
echo "=== hangscope dump of rank 1 (pid $diverged), the rank that diverged ==="
"$hangscope" dump --pid "$diverged"
