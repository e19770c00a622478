#!/usr/bin/env bash
# Checks tools/deploy/kubernetes/:
#   1. hangscope-agent.yaml parses (PyYAML) and holds what the agent needs: Namespace
#      hangscope, a DaemonSet with hostPID, hostNetwork, capabilities drop ALL + add SYS_PTRACE
#      (and nothing beyond DAC_READ_SEARCH), no privilege escalation, the token Secret mounted
#      where --token-file points, port 7447 (listen, containerPort, hostPort, tcpSocket
#      readiness), a memory limit, a GPU toleration, labels matching agent-hostfile.sh;
#      and the watcher: a Deployment of one replica (Recreate) running `hangscope watch` with no
#      host namespace and no capability, its --hostfile and --token-file files of the mounted
#      ConfigMap and Secret, -o on its PersistentVolumeClaim, --metrics on port 9464 with
#      --metrics-token-file from a Secret of its own (not the agents'; no --insecure) behind a
#      Service with Prometheus scrape annotations and a NetworkPolicy;
#   2. agent-hostfile.sh, run against a stand-in `kubectl` on PATH that prints recorded
#      output of the real kubectl's jsonpath (ready, IPv6, pending and not-ready pods), asks
#      kubectl the right question and prints one HOST:7447 line per ready agent;
#   3. with HANGSCOPE_BINARY: `hangscope diagnose --hostfile <(agent-hostfile.sh ...)
#      --token-file F` reaches a real agent on 127.0.0.1 and exits 0 or 3; `hangscope watch
#      --help` has every option the watcher's Deployment gives it.
# Usage: tests/deploy/kubernetes_manifest_test.sh [HANGSCOPE_BINARY]
# Exit: 0 pass, 1 fail, 77 skip (no python3 with PyYAML).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
manifest=$root/tools/deploy/kubernetes/hangscope-agent.yaml
hostfile_script=$root/tools/deploy/kubernetes/agent-hostfile.sh
binary=${1:+$(realpath "$1")}

python=""
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import yaml' 2>/dev/null; then
    python=$p
    break
  fi
done
if [ -z "$python" ]; then
  echo "SKIP: no python3 with PyYAML (apt-get install python3-yaml)"
  exit 77
fi

work=$(mktemp -d)
agent=""
cleanup() {
  if [ -n "$agent" ]; then
    kill "$agent" 2>/dev/null || true
    wait "$agent" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

echo "check: hangscope-agent.yaml parses and has the required fields"
"$python" - "$manifest" "$work/watch-options" <<'EOF' || fail "manifest"
import sys, yaml

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def one(kind):
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]

ns = one("Namespace")
assert ns["metadata"]["name"] == "hangscope", "Namespace is not hangscope"
ds = one("DaemonSet")
assert ds["apiVersion"] == "apps/v1"
assert ds["metadata"]["namespace"] == "hangscope", "DaemonSet not in namespace hangscope"
labels = ds["spec"]["template"]["metadata"]["labels"]
assert labels.get("app") == "hangscope-agent", "pods are not labelled app=hangscope-agent"
assert ds["spec"]["selector"]["matchLabels"] == {"app": "hangscope-agent"}
pod = ds["spec"]["template"]["spec"]
assert pod.get("hostPID") is True, "hostPID is not true"
assert pod.get("hostNetwork") is True, "hostNetwork is not true"
assert pod.get("dnsPolicy") == "ClusterFirstWithHostNet"
assert pod.get("automountServiceAccountToken") is False
assert any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])), \
    "no toleration for nvidia.com/gpu"
(c,) = pod["containers"]
argv = c["command"] + c.get("args", [])
assert argv[0].endswith("hangscope") and "collect" in argv, f"not hangscope collect: {argv}"
assert "--once" not in argv
listen = argv[argv.index("--listen") + 1]
assert listen.endswith(":7447"), f"--listen {listen}"
token_file = argv[argv.index("--token-file") + 1]
sc = c["securityContext"]
caps = sc["capabilities"]
assert caps["drop"] == ["ALL"], f"capabilities.drop {caps['drop']}"
assert "SYS_PTRACE" in caps["add"], "SYS_PTRACE not added"
assert set(caps["add"]) <= {"SYS_PTRACE", "DAC_READ_SEARCH"}, f"extra capabilities {caps['add']}"
assert sc.get("privileged") is False and sc.get("allowPrivilegeEscalation") is False
assert sc.get("readOnlyRootFilesystem") is True
ports = [p for p in c["ports"] if p["containerPort"] == 7447]
assert ports and ports[0].get("hostPort") == 7447 and ports[0].get("protocol", "TCP") == "TCP", "port 7447"
assert c["readinessProbe"]["tcpSocket"]["port"] in (7447, ports[0].get("name")), "readiness not tcpSocket 7447"
assert "memory" in c["resources"]["limits"], "no memory limit"
secret_volumes = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
assert secret_volumes, "no Secret volume"
mounted = False
for m in c["volumeMounts"]:
    if m["name"] not in secret_volumes:
        continue
    assert m.get("readOnly") is True, "token mount not readOnly"
    secret = secret_volumes[m["name"]]
    paths = [i["path"] for i in secret.get("items", [])] or ["token"]
    for path in paths:
        full = m["mountPath"] + "/" + path if "subPath" not in m else m["mountPath"]
        mounted |= full == token_file
assert mounted, f"--token-file {token_file} is not a file of the mounted Secret"
print(f"  ok: Namespace + DaemonSet, hostPID, hostNetwork, caps drop ALL add {caps['add']},"
      f" Secret {list(secret_volumes.values())[0]['secretName']} at {token_file}, port 7447")
agent_secret = list(secret_volumes.values())[0]["secretName"]

# The watcher.
(dep,) = [d for d in docs if d.get("kind") == "Deployment"]
assert dep["apiVersion"] == "apps/v1" and dep["metadata"]["name"] == "hangscope-watch"
assert dep["metadata"]["namespace"] == "hangscope", "watcher not in namespace hangscope"
spec = dep["spec"]
assert spec["replicas"] == 1, "the watcher must have one replica (two would write each incident twice)"
assert spec["strategy"]["type"] == "Recreate", "two watchers would overlap during a rolling update"
wlabels = spec["template"]["metadata"]["labels"]
assert spec["selector"]["matchLabels"] == {"app": "hangscope-watch"} and wlabels.get("app") == "hangscope-watch"
wpod = spec["template"]["spec"]
for host in ("hostPID", "hostNetwork", "hostIPC"):
    assert not wpod.get(host), f"the watcher needs no {host}"
assert wpod.get("automountServiceAccountToken") is False
(w,) = wpod["containers"]
wargv = w["command"] + w.get("args", [])
assert wargv[0].endswith("hangscope") and "watch" in wargv, f"not hangscope watch: {wargv}"
assert "--once" not in wargv and "--insecure" not in wargv, f"watch args: {wargv}"
def arg(name):
    assert name in wargv, f"watch has no {name}: {wargv}"
    return wargv[wargv.index(name) + 1]
metrics = arg("--metrics")
assert metrics.endswith(":9464") and not metrics.startswith("127."), f"--metrics {metrics}"
wsc = w["securityContext"]
assert wsc["capabilities"]["drop"] == ["ALL"] and not wsc["capabilities"].get("add"), "watcher capabilities"
assert wsc.get("privileged") is False and wsc.get("allowPrivilegeEscalation") is False
assert wsc.get("readOnlyRootFilesystem") is True
assert "memory" in w["resources"]["limits"], "watcher: no memory limit"
assert [p for p in w["ports"] if p["containerPort"] == 9464 and p.get("name") == "metrics"], "port 9464"
assert w["readinessProbe"]["tcpSocket"]["port"] in (9464, "metrics"), "readiness not tcpSocket 9464"
# Where each file of the mounted volumes appears.
files, writable = {}, []
volumes = {v["name"]: v for v in wpod["volumes"]}
for m in w["volumeMounts"]:
    v = volumes[m["name"]]
    sources = v["projected"]["sources"] if "projected" in v else [v]
    for source in sources:
        for kind in ("secret", "configMap"):
            if kind in source:
                name = source[kind].get("secretName") or source[kind].get("name")
                for item in source[kind]["items"]:
                    files[m["mountPath"] + "/" + item["path"]] = (kind, name, item["key"])
                assert m.get("readOnly") is True, f"{m['mountPath']} not readOnly"
    if "persistentVolumeClaim" in v:
        writable.append((m["mountPath"], v["persistentVolumeClaim"]["claimName"]))
assert files.get(arg("--token-file")) == ("secret", agent_secret, "token"), \
    f"--token-file {arg('--token-file')} is not the agents' Secret: {files}"
assert files.get(arg("--hostfile")) == ("configMap", "hangscope-agents", "agents"), \
    f"--hostfile {arg('--hostfile')} is not the ConfigMap hangscope-agents: {files}"
metrics_token = files.get(arg("--metrics-token-file"))
assert metrics_token and metrics_token[0] == "secret", \
    f"--metrics-token-file {arg('--metrics-token-file')} is no Secret's file: {files}"
assert metrics_token[1] != agent_secret, \
    "the metrics token is the agents' Secret: Prometheus would hold the token that captures nodes"
out = arg("-o")
claims = [claim for path, claim in writable if out.startswith(path + "/")]
assert claims, f"-o {out} is on no PersistentVolumeClaim: {writable}"
assert any(d.get("kind") == "PersistentVolumeClaim" and d["metadata"]["name"] == claims[0] for d in docs), \
    f"no PersistentVolumeClaim {claims[0]}"
(svc,) = [d for d in docs if d.get("kind") == "Service"]
assert svc["metadata"]["namespace"] == "hangscope" and svc["spec"]["selector"] == {"app": "hangscope-watch"}
assert [p for p in svc["spec"]["ports"] if p["port"] == 9464 and p["targetPort"] in (9464, "metrics")], "Service port"
for where, annotations in (("Service", svc["metadata"].get("annotations", {})),
                           ("pod", spec["template"]["metadata"].get("annotations", {}))):
    assert annotations.get("prometheus.io/scrape") == "true", f"{where}: no prometheus.io/scrape"
    assert annotations.get("prometheus.io/port") == "9464", f"{where}: prometheus.io/port"
(policy,) = [d for d in docs if d.get("kind") == "NetworkPolicy"]
assert policy["spec"]["podSelector"]["matchLabels"] == {"app": "hangscope-watch"}
assert [p for rule in policy["spec"]["ingress"] for p in rule["ports"] if p["port"] == 9464]
print(f"  ok: Deployment hangscope-watch (1 replica, Recreate, no capability), --hostfile from"
      f" ConfigMap hangscope-agents, --token-file from {agent_secret}, -o on PVC {claims[0]},"
      f" --metrics {metrics} with a token from {metrics_token[1]}, behind Service + NetworkPolicy")
with open(sys.argv[2], "w") as f:
    f.write("\n".join(a for a in wargv[wargv.index("watch") + 1:] if a.startswith("-")) + "\n")
EOF

echo "check: agent-hostfile.sh against a stand-in kubectl"
mkdir -p "$work/bin"
# Recorded: the real kubectl's output for agent-hostfile.sh's jsonpath on four pods (ready,
# ready on an IPv6 node, pending without a host IP, running but not ready).
cat >"$work/recorded.txt" <<'EOF'
hangscope-agent-a1|gpu-node-0|10.0.0.11|Running|True
hangscope-agent-b2|gpu-node-1|fd00::12|Running|True
hangscope-agent-c3|gpu-node-2||Pending|False
hangscope-agent-d4|gpu-node-3|10.0.0.14|Running|False
EOF
cat >"$work/bin/kubectl" <<EOF
#!/usr/bin/env bash
printf '%s\n' "\$@" >"$work/kubectl.args"
cat "\${STANDIN_KUBECTL_OUTPUT:-$work/recorded.txt}"
EOF
chmod +x "$work/bin/kubectl"
export PATH="$work/bin:$PATH"
"$hostfile_script" >"$work/hostfile" 2>"$work/hostfile.err" || {
  cat "$work/hostfile.err"
  fail "agent-hostfile.sh exited $?"
}
printf '10.0.0.11:7447\n[fd00::12]:7447\n' | diff -u - "$work/hostfile" || fail "hostfile lines"
grep -q 'skipping pod hangscope-agent-c3 on node gpu-node-2' "$work/hostfile.err" || fail "pending pod not named"
grep -q 'skipping pod hangscope-agent-d4 on node gpu-node-3' "$work/hostfile.err" || fail "unready pod not named"
args=$(tr '\n' ' ' <"$work/kubectl.args")
case "$args" in
  "-n hangscope get pods -l app=hangscope-agent -o jsonpath={range .items[*]}"*) ;;
  *) fail "kubectl asked: $args" ;;
esac
echo "  ok: 2 ready agents printed, 2 skipped pods named on stderr; kubectl $(cut -c1-60 <<<"$args")..."

echo "check: agent-hostfile.sh options and failures"
"$hostfile_script" -n other -l app=x -p 9000 -- --context prod >"$work/hostfile2" 2>/dev/null
[ "$(head -1 "$work/hostfile2")" = 10.0.0.11:9000 ] || fail "-p 9000"
[ "$(head -4 "$work/kubectl.args" | tr '\n' ' ')" = "--context prod -n other " ] || fail "-- args / -n"
: >"$work/empty.txt"
rc=0
STANDIN_KUBECTL_OUTPUT=$work/empty.txt "$hostfile_script" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "no pods: exit $rc, expected 1"
rc=0
"$hostfile_script" --bogus >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "bad usage: exit $rc, expected 2"
echo "  ok"

if [ -z "$binary" ]; then
  echo "check: diagnose --hostfile end to end (skipped: no HANGSCOPE_BINARY argument)"
  echo "PASS"
  exit 0
fi
echo "check: hangscope diagnose --hostfile <(agent-hostfile.sh) --token-file reaches a real agent"
head -c 24 /dev/urandom | base64 >"$work/token"
chmod 600 "$work/token"
"$binary" collect --listen 127.0.0.1:0 --token-file "$work/token" >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/agent.out")
  [ -n "$port" ] && break
  kill -0 "$agent" 2>/dev/null || { cat "$work/agent.err"; fail "agent exited"; }
  sleep 0.1
done
[ -n "$port" ] || fail "agent did not print 'listening on'"
echo "live|$(hostname)|127.0.0.1|Running|True" >"$work/live.txt"
export STANDIN_KUBECTL_OUTPUT=$work/live.txt # read by the stand-in in the <(...) below
rc=0
"$binary" diagnose \
  --hostfile <("$hostfile_script" -p "$port") --token-file "$work/token" \
  --samples 1 --quiet -o "$work/bundle" >"$work/diagnose.out" 2>"$work/diagnose.err" || rc=$?
# The agent discovers this machine's ranks: there may be none, which is exit 1 with its message.
if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ] &&
  ! { [ "$rc" -eq 1 ] && grep -q "no rank process found" "$work/diagnose.err"; }; then
  cat "$work/diagnose.err"
  fail "diagnose exited $rc (expected 0 or 3, or 1 for no rank on this machine)"
fi
[ -f "$work/bundle/report.md" ] || fail "no report.md"
grep -q '"status": *"ok"' "$work/bundle/nodes.json" || fail "the agent's node is not ok in nodes.json"
echo "  ok: diagnose exited $rc, node answered, report.md written"

echo "check: hangscope watch --help has every option of the watcher's Deployment"
"$binary" watch --help >"$work/watch-help" 2>&1 || fail "hangscope watch --help: $(cat "$work/watch-help")"
while read -r option; do
  grep -Eq -- "(^|[ ,])$option([ ,]|$)" "$work/watch-help" || fail "hangscope watch has no $option"
done <"$work/watch-options"
echo "  ok: $(tr '\n' ' ' <"$work/watch-options")"
echo "PASS"
