#!/usr/bin/env bash
# Runs tools/deploy/slurm/hangscope-slurm.sh against a real one-node Slurm cluster started here:
# slurmctld and slurmd in the foreground on private ports, with spool, state and logs in a
# temporary directory (auth/none when this Slurm still has it, else munge with a temporary key
# and socket). A batch job runs a Python process sleeping in a function; the script must write
# one snapshot per node holding that process and its frame, and a bundle with report.md, and
# exit with one of diagnose's documented codes (0 or 3). Everything it started is stopped and
# removed on any exit; a leftover process fails the test.
# Usage: tests/deploy/slurm_test.sh HANGSCOPE_BINARY
# Exit: 0 pass, 1 fail, 77 skip (Slurm not installed: apt-get install slurm-wlm).
# HANGSCOPE_TEST_SLURM_AUTH=munge forces munge even where auth/none exists.
set -euo pipefail

binary=$(realpath "${1:?usage: $0 HANGSCOPE_BINARY}")
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/tools/deploy/slurm/hangscope-slurm.sh
started=$(date +%s)

for tool in slurmctld slurmd sbatch srun squeue scontrol scancel sinfo; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool not installed (apt-get install slurm-wlm)"
    exit 77
  fi
done
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (slurmd runs jobs as their user)"
  exit 77
fi

plugin_dir=""
for d in /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib/*/slurm-wlm /usr/lib64/slurm /usr/lib/slurm; do
  if [ -f "$d/auth_munge.so" ] || [ -f "$d/auth_none.so" ]; then
    plugin_dir=$d
    break
  fi
done
auth=${HANGSCOPE_TEST_SLURM_AUTH:-}
if [ -z "$auth" ]; then
  if [ -n "$plugin_dir" ] && [ -f "$plugin_dir/auth_none.so" ]; then auth=none; else auth=munge; fi
fi
if [ "$auth" = munge ] && ! command -v munged >/dev/null; then
  echo "SKIP: this Slurm has no auth/none and munged is not installed (apt-get install munge)"
  exit 77
fi

work=$(mktemp -d /tmp/hangscope-slurm-test.XXXXXX)
chmod 755 "$work"
export SLURM_CONF=$work/slurm.conf
pids=() # daemons started here, stopped in reverse order
job=""
# Processes of this test's cluster: the daemons, slurmstepd and the job inherit SLURM_CONF.
ours() {
  local p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = $$ ] && continue
    grep -qzx "SLURM_CONF=$SLURM_CONF" "$p/environ" 2>/dev/null && echo "${p#/proc/}"
  done
  return 0
}
cleanup() {
  local rc=$?
  set +e
  if [ -n "$job" ]; then
    scancel "$job" 2>/dev/null
    for _ in $(seq 50); do
      [ -z "$(squeue -h -j "$job" -o %T 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  local left
  mapfile -t left < <(ours)
  if [ "${#left[@]}" -gt 0 ]; then
    echo "FAIL: processes left behind (killed now):"
    ps -o pid,ppid,args -p "$(IFS=,; echo "${left[*]}")"
    kill -9 "${left[@]}" 2>/dev/null
    rc=1
  fi
  rm -rf "$work"
  echo "took $(($(date +%s) - started)) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
  echo "FAIL: $*"
  for f in "$work"/log/*; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }
  done
  exit 1
}
wait_for() { # SECONDS DESCRIPTION COMMAND...
  local seconds=$1 what=$2
  shift 2
  for _ in $(seq $((seconds * 10))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "timed out after ${seconds}s waiting for $what"
}

read -r ctld_port slurmd_port < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
node=$(hostname -s)
mkdir -p "$work/state" "$work/spool" "$work/log" "$work/out"

auth_lines="AuthType=auth/none
CredType=cred/none"
if [ "$auth" = munge ]; then
  echo "setup: munged with a temporary key and socket"
  mkdir -m 700 "$work/munge"
  head -c 1024 /dev/urandom >"$work/munge/munge.key"
  chmod 400 "$work/munge/munge.key"
  munged --foreground --force --key-file="$work/munge/munge.key" \
    --socket="$work/munge/munge.sock" --pid-file="$work/munge/munged.pid" \
    --seed-file="$work/munge/munged.seed" --log-file="$work/log/munged.log" \
    >"$work/log/munged.out" 2>&1 &
  pids+=($!)
  wait_for 10 "munged's socket" test -S "$work/munge/munge.sock"
  auth_lines="AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
CredType=cred/munge"
fi

cat >"$SLURM_CONF" <<EOF
ClusterName=hangscopetest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
$auth_lines
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=hangscope Nodes=$node Default=YES MaxTime=10 State=UP
EOF
echo "setup: slurmctld + slurmd ($(slurmctld -V), auth/$auth) on 127.0.0.1:$ctld_port/$slurmd_port, node $node"
slurmctld -D -i -f "$SLURM_CONF" >"$work/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/log/slurmd.out" 2>&1 &
pids+=($!)
node_idle() { [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ]; }
wait_for 30 "node $node idle in sinfo" node_idle

echo "setup: a batch job whose Python process sleeps in a function"
cat >"$work/job.sh" <<EOF
#!/bin/bash
echo \$\$ >"$work/rank.pid"
export RANK=0 WORLD_SIZE=1   # a rank of a one-rank job: diagnose exits 0 or 3, not 1 (no rank)
exec /usr/bin/python3 -c '
import time
def slurm_rank_waits_in_collective():
    time.sleep(300)
slurm_rank_waits_in_collective()
'
EOF
chmod +x "$work/job.sh"
job=$(sbatch --parsable --nodes=1 --time=5 --output="$work/log/job.out" "$work/job.sh")
job_running() { [ "$(squeue -h -j "$job" -o %T)" = RUNNING ] && [ -s "$work/rank.pid" ]; }
wait_for 30 "job $job RUNNING" job_running
rank_pid=$(cat "$work/rank.pid")
in_function() { grep -q slurm_rank_waits "/proc/$rank_pid/cmdline" && sleep 0.3; }
wait_for 10 "the job's python" in_function

echo "check: hangscope-slurm.sh $job --samples 2 --interval 500ms --out OUT --hangscope BINARY"
rc=0
"$script" "$job" --samples 2 --interval 500ms --out "$work/out" --hangscope "$binary" --timeout 60 \
  >"$work/log/hangscope-slurm.out" 2>"$work/log/hangscope-slurm.err" || rc=$?
cat "$work/log/hangscope-slurm.err"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then fail "hangscope-slurm.sh exited $rc (expected 0 or 3)"; fi
echo "  ok: exit $rc (diagnose's)"

echo "check: one snapshot per node, holding the job's python and its frame"
snapshot=$work/out/$node.json
[ -s "$snapshot" ] || fail "no $snapshot"
[ "$(find "$work/out" -maxdepth 1 -name '*.json' | wc -l)" -eq 1 ] || fail "expected exactly one snapshot"
/usr/bin/python3 - "$snapshot" "$rank_pid" "$node" <<'EOF' || fail "snapshot content"
import json, sys
path, pid, node = sys.argv[1], int(sys.argv[2]), sys.argv[3]
doc = json.load(open(path))
snapshots = doc["snapshots"]
assert len(snapshots) == 2, f"{len(snapshots)} samples, expected 2"
for s in snapshots:
    assert s["node_name"] == node, f"node_name {s['node_name']}"
    procs = [p for p in s.get("processes", []) if int(p["pid"]) == pid]
    assert procs, f"pid {pid} not in a sample"
    assert "slurm_rank_waits_in_collective" in s["strings"], "the Python frame is missing"
print(f"  ok: {path.rsplit('/', 1)[1]}: 2 samples of node {node}, pid {pid} in slurm_rank_waits_in_collective")
EOF

echo "check: the bundle and where the report is"
[ -s "$work/out/bundle/report.md" ] || fail "no bundle/report.md"
[ -s "$work/out/bundle/report.json" ] || fail "no bundle/report.json"
grep -q "report: $work/out/bundle/report.md" "$work/log/hangscope-slurm.err" || fail "report location not printed"
echo "  ok"

echo "check: usage errors and a job that is not running"
rc=0
"$script" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "no arguments: exit $rc, expected 2"
rc=0
"$script" 999999 --hangscope "$binary" --out "$work/none" >/dev/null 2>"$work/log/nojob.err" || rc=$?
[ "$rc" -eq 1 ] || fail "unknown job: exit $rc, expected 1"
grep -q "not found" "$work/log/nojob.err" || fail "unknown job: $(cat "$work/log/nojob.err")"
echo "  ok"

elapsed=$(($(date +%s) - started))
[ "$elapsed" -lt 120 ] || fail "took ${elapsed}s (limit 120)"
echo "PASS"
