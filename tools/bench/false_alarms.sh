#!/usr/bin/env bash
# The false-alarm benchmark: a healthy 2-rank gloo job (tools/repro/gloo_barrier_hang.py
# --scenario allreduce-loop) at each step rhythm, diagnosed locally RUNS times per rhythm.
# A healthy job must exit 0 ("no hang"); exit 3 is a false alarm. Prints one line per rhythm
# and the total, e.g. "busy (0 s): 0 of 5 runs called hung".
#   tools/bench/false_alarms.sh [RUNS] [HANGSCOPE]   (defaults: 5, build/src/hangscope)
set -euo pipefail
[ -x /usr/bin/python3 ] || { echo "false_alarms.sh: needs Debian's python3 with python3-torch (tools/install-deps.sh)" >&2; exit 1; }
cd "$(dirname "$0")/../.."
runs=${1:-5}
hangscope=${2:-build/src/hangscope}
rhythms=("busy:0" "20ms:0.02" "slow:0.5" "idle:5")
total=0 alarms=0
for rhythm in "${rhythms[@]}"; do
  name=${rhythm%%:*} pause=${rhythm#*:} hung=0
  for _ in $(seq "$runs"); do
    out=$(mktemp -d)
    HANGSCOPE_STEP_SECONDS=$pause setsid /usr/bin/python3 tools/repro/gloo_barrier_hang.py \
      --scenario allreduce-loop --world-size 2 >"$out/job.log" 2>&1 &
    job=$!
    for _ in $(seq 600); do
      [ "$(grep -c ' progressing' "$out/job.log" || true)" -ge 2 ] && break
      sleep 0.1
    done
    pids=$(grep -o 'rank [0-9]* pid [0-9]*' "$out/job.log" | awk '{printf " --pid %s", $4}')
    rc=0
    # shellcheck disable=SC2086
    "$hangscope" diagnose $pids --quiet -o "$out/bundle" >/dev/null 2>&1 || rc=$?
    kill -KILL -- -"$job" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
    total=$((total + 1))
    if [ "$rc" -ne 0 ]; then
      hung=$((hung + 1))
      alarms=$((alarms + 1))
      echo "  $name: exit $rc: $(head -n 1 "$out/bundle/report.md" 2>/dev/null)" >&2
    fi
    rm -rf "$out"
  done
  echo "$name ($pause s between steps): $hung of $runs runs called hung"
done
echo "total: $alarms of $total healthy runs called hung"
