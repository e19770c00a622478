#!/usr/bin/env bash
# Runs tools/deploy/ray/hangscope_ray_agents.py against the stand-in `ray` package of
# tests/deploy/ray_standin (Ray itself cannot be installed here: no PyPI) on a fake cluster of
# two alive nodes at 127.0.0.2 and 127.0.0.3 and one dead node, and checks that:
#   1. it starts one real `hangscope collect` agent per alive node, each in a detached actor
#      pinned to its node (NodeAffinitySchedulingStrategy soft=False, num_cpus=0), and prints
#      NODE_IP:PORT per agent;
#   2. `hangscope diagnose --hostfile <(those lines) --token-file F` gets an answer from both
#      and exits with a documented code (0 or 3); a wrong token is refused;
#   3. running it again reuses the agents; an agent whose actor process was killed is
#      replaced (and died with its actor);
#   4. --stop stops every agent and actor.
# Everything it started is stopped on any exit.
# Usage: tests/deploy/ray_standin_test.sh HANGSCOPE_BINARY
# Exit: 0 pass, 1 fail, 77 skip (no /usr/bin/python3).
set -euo pipefail

binary=$(realpath "${1:?usage: $0 HANGSCOPE_BINARY}")
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/tools/deploy/ray/hangscope_ray_agents.py
python=/usr/bin/python3
started=$(date +%s)
if [ ! -x "$python" ]; then
  echo "SKIP: $python not found"
  exit 77
fi

work=$(mktemp -d /tmp/hangscope-ray-test.XXXXXX)
export RAY_STANDIN_CLUSTER=$work/cluster
export PYTHONPATH=$root/tests/deploy/ray_standin
export PYTHONDONTWRITEBYTECODE=1 # nothing written into the source tree
mkdir -p "$RAY_STANDIN_CLUSTER"

# Actor hosts and agents of this test: processes whose command line names $work.
ours() {
  local p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = $$ ] && continue
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "$work/" && echo "${p#/proc/}"
  done
  return 0
}
cleanup() {
  local rc=$? left
  set +e
  "$python" "$script" --stop >/dev/null 2>&1
  mapfile -t left < <(ours)
  if [ "${#left[@]}" -gt 0 ]; then
    echo "cleanup: killing leftover processes ${left[*]}"
    kill -9 "${left[@]}" 2>/dev/null
  fi
  rm -rf "$work"
  echo "took $(($(date +%s) - started)) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err "$RAY_STANDIN_CLUSTER"/actors/*.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 10 "$f"; }
  done
  exit 1
}

# A port free on both node addresses.
port=$("$python" -c '
import socket
for _ in range(50):
    s = socket.socket(); s.bind(("127.0.0.2", 0)); port = s.getsockname()[1]
    t = socket.socket()
    try:
        t.bind(("127.0.0.3", port))
    except OSError:
        continue
    finally:
        s.close(); t.close()
    print(port); break')
node_a=$(head -c 28 /dev/urandom | od -An -tx1 | tr -d ' \n')
node_b=$(head -c 28 /dev/urandom | od -An -tx1 | tr -d ' \n')
node_dead=$(head -c 28 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat >"$RAY_STANDIN_CLUSTER/nodes.json" <<EOF
[
 {"NodeID": "$node_a", "Alive": true, "NodeManagerAddress": "127.0.0.2",
  "NodeManagerHostname": "ray-node-a", "NodeName": "127.0.0.2", "Resources": {"CPU": 4.0}},
 {"NodeID": "$node_b", "Alive": true, "NodeManagerAddress": "127.0.0.3",
  "NodeManagerHostname": "ray-node-b", "NodeName": "127.0.0.3", "Resources": {"CPU": 4.0}},
 {"NodeID": "$node_dead", "Alive": false, "NodeManagerAddress": "127.0.0.4",
  "NodeManagerHostname": "ray-node-dead", "NodeName": "127.0.0.4", "Resources": {}}
]
EOF
head -c 24 /dev/urandom | base64 >"$work/token"
chmod 600 "$work/token"
start_agents() { # OUT
  "$python" "$script" --hangscope "$binary" --port "$port" --token-file "$work/token" \
    --timeout 30 >"$1" 2>"$work/start.err"
}
agent_pids() { # the hangscope collect processes listening for this test, sorted
  local p
  for p in $(ours); do
    # An agent's stop watchdog (docs/native-capture.md) is a fork with the agent's command line.
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = hangscope-watch ] && continue
    tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q "collect --listen 127.0.0.[23]:$port " && echo "$p"
  done | sort
}

echo "check: start agents on the 2 alive nodes (of 3) at port $port"
start_agents "$work/hosts" || fail "hangscope_ray_agents.py exited $?"
printf '127.0.0.2:%s\n127.0.0.3:%s\n' "$port" "$port" | diff -u - "$work/hosts" || fail "printed addresses"
[ "$(agent_pids | wc -l)" -eq 2 ] || fail "expected 2 running agents, found: $(agent_pids)"
"$python" - "$RAY_STANDIN_CLUSTER/actors" "$node_a" "$node_b" <<'EOF' || fail "actor records"
import glob, json, sys
folder, node_a, node_b = sys.argv[1:]
alive = [json.load(open(f)) for f in glob.glob(folder + "/*.json")]
alive = [a for a in alive if a["state"] == "ALIVE"]
assert len(alive) == 2, f"{len(alive)} alive actors"
by_node = {a["node_id"]: a for a in alive}
assert set(by_node) == {node_a, node_b}, f"actors pinned to {sorted(by_node)}"
for node, ip in ((node_a, "127.0.0.2"), (node_b, "127.0.0.3")):
    a = by_node[node]
    assert a["soft"] is False, "NodeAffinitySchedulingStrategy not soft=False"
    assert a["lifetime"] == "detached" and a["num_cpus"] == 0, a
    assert a["namespace"] == "hangscope" and a["name"] == "hangscope-agent-" + node, a
    assert a["node_ip"] == ip
print("  ok: 2 detached actors, num_cpus=0, pinned (soft=False) to the 2 alive nodes")
EOF

echo "check: hangscope diagnose --hostfile <(printed lines) --token-file reaches both agents"
rc=0
"$binary" diagnose --hostfile "$work/hosts" --token-file "$work/token" --samples 1 --quiet \
  -o "$work/bundle" >"$work/diagnose.out" 2>"$work/diagnose.err" || rc=$?
# The agents discover this machine's ranks: there may be none, which is exit 1 with its message.
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] ||
  { [ "$rc" -eq 1 ] && grep -q "no rank process found" "$work/diagnose.err"; } ||
  fail "diagnose exited $rc (expected 0 or 3, or 1 for no rank on this machine)"
"$python" - "$work/bundle/nodes.json" "$port" <<'EOF' || fail "nodes.json"
import json, sys
nodes = json.load(open(sys.argv[1]))
port = sys.argv[2]
got = sorted((n["address"], n["status"]) for n in nodes)
want = [(f"127.0.0.2:{port}", "ok"), (f"127.0.0.3:{port}", "ok")]
assert got == want, f"nodes {got}"
EOF
[ -s "$work/bundle/report.md" ] || fail "no report.md"
echo "  ok: diagnose exited $rc, both nodes ok, report.md written"
head -c 24 /dev/urandom | base64 >"$work/wrong-token"
rc=0
"$binary" diagnose --hostfile "$work/hosts" --token-file "$work/wrong-token" --samples 1 \
  --quiet -o "$work/bundle-refused" >/dev/null 2>&1 || rc=$?
grep -q '"status": *"refused"' "$work/bundle-refused/nodes.json" || fail "a wrong token was not refused"
echo "  ok: a wrong token is refused (diagnose exit $rc)"

echo "check: a second run reuses the agents"
before=$(agent_pids)
start_agents "$work/hosts2" || fail "second run exited $?"
diff -q "$work/hosts" "$work/hosts2" >/dev/null || fail "second run printed other addresses"
[ "$(agent_pids)" = "$before" ] || fail "second run started new agents"
echo "  ok"

echo "check: an agent dies with its actor, and the next run replaces it"
host=$("$python" -c '
import glob, json, sys
for f in glob.glob(sys.argv[1] + "/*.json"):
    a = json.load(open(f))
    if a["state"] == "ALIVE" and a["node_ip"] == "127.0.0.2":
        print(a["pid"])' "$RAY_STANDIN_CLUSTER/actors")
[ -n "$host" ] || fail "no actor process for 127.0.0.2"
kill -9 "$host"
for _ in $(seq 50); do
  [ "$(agent_pids | wc -l)" -eq 1 ] && break
  sleep 0.1
done
[ "$(agent_pids | wc -l)" -eq 1 ] || fail "the agent of a killed actor is still running"
start_agents "$work/hosts3" || fail "third run exited $?"
diff -q "$work/hosts" "$work/hosts3" >/dev/null || fail "third run printed other addresses"
[ "$(agent_pids | wc -l)" -eq 2 ] || fail "the agent of 127.0.0.2 was not restarted"
echo "  ok"

echo "check: --stop stops every agent and actor"
"$python" "$script" --stop 2>"$work/stop.err" || fail "--stop exited $?"
[ "$(grep -c '^hangscope_ray_agents: stopped ' "$work/stop.err")" -eq 2 ] || fail "--stop: $(cat "$work/stop.err")"
for _ in $(seq 50); do
  [ -z "$(ours)" ] && break
  sleep 0.1
done
[ -z "$(ours)" ] || fail "processes still running after --stop: $(ours)"
echo "  ok"

echo "check: usage and a node whose agent cannot start"
rc=0
"$python" "$script" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "no --token-file: exit $rc, expected 2"
rc=0
"$python" "$script" --hangscope "$binary" --port "$port" --token-file "$work/missing-token" \
  --timeout 30 >"$work/hosts4" 2>"$work/fail.err" || rc=$?
[ "$rc" -eq 1 ] || fail "missing token file: exit $rc, expected 1"
[ ! -s "$work/hosts4" ] || fail "addresses printed for agents that did not start"
grep -q "cannot read token file" "$work/fail.err" || fail "the agent's error is not reported: $(cat "$work/fail.err")"
echo "  ok"
echo "PASS"
