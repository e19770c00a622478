#!/usr/bin/env bash
# A real Prometheus server scrapes `hangscope watch --metrics` while a real job hangs:
#   1. a torch.distributed gloo job of two ranks on this machine, hung (rank 1 waits for a
#      TCPStore key nobody sets, rank 0 in the barrier: tools/repro/gloo_barrier_hang.py
#      --scenario store-wait), in a process group of its own;
#   2. `hangscope watch --pid RANK0 --pid RANK1 --after 6s --poll 1s -o DIR --metrics
#      127.0.0.1:PORT` on this node (no agent: the local node, only the job's two ranks, so other
#      tests' ranks on this machine are neither watched nor sampled); no --metrics-token-file,
#      so the loopback endpoint needs no authentication;
#   3. Debian's /usr/bin/prometheus on 127.0.0.1 with a temporary --storage.tsdb.path and
#      scrape_interval 1s on that endpoint;
#   4. watch prints the incident line (its bundle under DIR, with report.md, report.json and
#      watch.json), then Prometheus' query API (/api/v1/query?query=hangscope_watch_incidents_total) returns the
#      kind="hang" series at 1 or more within 60 s;
#   5. SIGTERM ends watch with exit 0.
# Every process it started (the job's process group, watch, prometheus) is killed on every exit
# path; none is left running or stopped.
# Usage: tests/deploy/watch_prometheus_test.sh HANGSCOPE_BINARY
# Exit: 0 pass, 1 fail, 77 skip (not root; prometheus, curl or python3-torch missing).
set -euo pipefail

binary=$(realpath "${1:?usage: $0 HANGSCOPE_BINARY}")
root=$(cd "$(dirname "$0")/../.." && pwd)
python=/usr/bin/python3
prometheus=/usr/bin/prometheus

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (watching the local node ptraces the job's ranks)"
  exit 77
fi
[ -x "$prometheus" ] || { echo "SKIP: $prometheus not installed (apt-get install prometheus)"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl not installed (apt-get install curl)"; exit 77; }
"$python" -c 'import torch.distributed' 2>/dev/null ||
  { echo "SKIP: no torch.distributed for $python (apt-get install python3-torch)"; exit 77; }

work=$(mktemp -d /tmp/hangscope-watch-prometheus.XXXXXX)
job="" watcher="" server=""
stop() { # PID [GROUP]: TERM, then KILL after 5 s, and reap (a stopped process is continued)
  local pid=$1 target=$1 i
  [ -n "$pid" ] || return 0
  [ "${2:-}" = group ] && target=-$pid
  kill -TERM -- "$target" 2>/dev/null || true
  kill -CONT -- "$target" 2>/dev/null || true
  for i in $(seq 50); do
    kill -0 -- "$target" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "$target" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  set +e
  trap '' INT TERM HUP
  stop "$watcher"
  stop "$server"
  stop "$job" group
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 1' INT TERM HUP
fail() {
  echo "FAIL: $*"
  for log in watch.out watch.err prometheus.log job.out; do
    [ -s "$work/$log" ] && { echo "--- $log (last lines)"; tail -n 20 "$work/$log"; }
  done
  exit 1
}
free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

echo "step: a hung gloo job (2 ranks, store-wait)"
# setsid: the launcher leads a process group of its own; its ranks die with it
# (PR_SET_PDEATHSIG), and killing the group ends them all.
setsid "$python" "$root/tools/repro/gloo_barrier_hang.py" --world-size 2 --diverged-rank 1 \
  --scenario store-wait >"$work/job.out" 2>&1 &
job=$!
for _ in $(seq 600); do
  [ "$(grep -c '^rank [0-9]* pid [0-9]* ' "$work/job.out")" -ge 2 ] && break
  kill -0 "$job" 2>/dev/null || fail "the job exited before it hung"
  sleep 0.1
done
[ "$(grep -c '^rank [0-9]* pid [0-9]* ' "$work/job.out")" -ge 2 ] || fail "the ranks did not announce their wait in 60 s"
sed 's/^/  /' "$work/job.out"
mapfile -t ranks < <(sed -n 's/^rank [0-9]* pid \([0-9]*\) .*/\1/p' "$work/job.out")
[ "${#ranks[@]}" -eq 2 ] || fail "expected two rank pids, got: ${ranks[*]}"

echo "step: hangscope watch --pid ${ranks[0]} --pid ${ranks[1]} --after 6s --poll 1s --metrics on loopback"
metrics_port=$(free_port)
: >"$work/watch.out"
"$binary" watch --pid "${ranks[0]}" --pid "${ranks[1]}" --after 6s --poll 1s \
  -o "$work/incidents" --metrics "127.0.0.1:$metrics_port" >"$work/watch.out" 2>"$work/watch.err" &
watcher=$!
for _ in $(seq 100); do
  curl -s -m 2 -o /dev/null "http://127.0.0.1:$metrics_port/metrics" && break
  kill -0 "$watcher" 2>/dev/null || fail "watch exited"
  sleep 0.1
done
curl -s -m 2 "http://127.0.0.1:$metrics_port/metrics" | grep -q '^hangscope_watch_incidents_total{kind="hang"} 0$' ||
  fail "watch's /metrics has no hangscope_watch_incidents_total{kind=\"hang\"} 0 at start"
echo "  ok: metrics on 127.0.0.1:$metrics_port"

echo "step: prometheus scraping it every second"
server_port=$(free_port)
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: hangscope-watch
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
EOF
"$prometheus" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$server_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
server=$!
api=http://127.0.0.1:$server_port
for _ in $(seq 300); do
  curl -s -m 2 -o /dev/null -f "$api/-/ready" && break
  kill -0 "$server" 2>/dev/null || fail "prometheus exited"
  sleep 0.1
done
curl -s -m 2 -o /dev/null -f "$api/-/ready" || fail "prometheus not ready in 30 s"
echo "  ok: prometheus $("$prometheus" --version 2>&1 | head -1 | awk '{print $3}') on 127.0.0.1:$server_port"

echo "step: the incident line on watch's stdout"
started=$SECONDS
for _ in $(seq 900); do
  grep -q ' incident ' "$work/watch.out" && break
  kill -0 "$watcher" 2>/dev/null || fail "watch exited before an incident"
  sleep 0.1
done
grep -q ' incident ' "$work/watch.out" || fail "no incident line in 90 s"
line=$(grep -m1 ' incident ' "$work/watch.out")
echo "  $line"
echo "  after $((SECONDS - started)) s"
# <UTC time> incident <job> <top verdict id> <bundle path>: <summary's first line>
bundle=$(awk '{ sub(/:$/, "", $5); print $5 }' <<<"$line")
case "$bundle" in "$work/incidents/"*) ;; *) fail "the incident's bundle '$bundle' is not under -o $work/incidents" ;; esac
for f in report.md report.json watch.json; do
  [ -f "$bundle/$f" ] || fail "the incident's bundle $bundle has no $f: $(ls -A "$bundle" 2>&1)"
done

echo "step: prometheus' query API returns hangscope_watch_incidents_total{kind=\"hang\"} >= 1"
query() { # the value of the kind="hang" series, or nothing
  curl -s -m 2 "$api/api/v1/query?query=hangscope_watch_incidents_total" | "$python" -c '
import json, sys
try:
    answer = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for series in answer.get("data", {}).get("result", []):
    if series["metric"].get("kind") == "hang":
        print(series["value"][1])'
}
value=""
for _ in $(seq 120); do
  value=$(query)
  [ -n "$value" ] && awk -v v="$value" 'BEGIN { exit !(v >= 1) }' && break
  sleep 0.5
done
[ -n "$value" ] && awk -v v="$value" 'BEGIN { exit !(v >= 1) }' ||
  fail "prometheus answered '${value:-no kind=\"hang\" series}' in 60 s: $(curl -s -m 2 "$api/api/v1/query?query=hangscope_watch_incidents_total")"
up=$(curl -s -m 2 "$api/api/v1/query?query=up" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
echo "  ok: hangscope_watch_incidents_total{kind=\"hang\"} = $value (target up = $up)"

echo "step: SIGTERM ends watch with exit 0"
kill -TERM "$watcher"
rc=0
wait "$watcher" || rc=$?
watcher=""
[ "$rc" -eq 0 ] || fail "watch exited $rc on SIGTERM"
echo "  ok"
echo "PASS"
