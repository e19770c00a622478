#!/usr/bin/env bash
# Prints one NODE_IP:PORT line per ready hangscope agent pod (DaemonSet of
# tools/deploy/kubernetes/hangscope-agent.yaml), for `hangscope diagnose --hostfile`:
#
#   hangscope diagnose --hostfile <(tools/deploy/kubernetes/agent-hostfile.sh) --token-file token
#
# Usage: agent-hostfile.sh [-n NAMESPACE] [-l SELECTOR] [-p PORT] [-- KUBECTL_ARGS...]
#   -n  namespace of the DaemonSet (default hangscope)
#   -l  label selector of its pods (default app=hangscope-agent)
#   -p  agent port (default 7447)
#   --  the rest goes to kubectl (e.g. --context prod --kubeconfig ~/.kube/other)
# Pods that are not running and ready are named on stderr, not printed: a node without a
# ready agent cannot answer. Exit: 0 at least one agent printed, 1 none (or kubectl failed),
# 2 bad usage. $KUBECTL overrides the kubectl command.
set -euo pipefail

namespace=hangscope
selector=app=hangscope-agent
port=7447
kubectl_args=()
usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    -n | --namespace) [ $# -ge 2 ] || usage; namespace=$2; shift 2 ;;
    -l | --selector) [ $# -ge 2 ] || usage; selector=$2; shift 2 ;;
    -p | --port) [ $# -ge 2 ] || usage; port=$2; shift 2 ;;
    --) shift; kubectl_args=("$@"); break ;;
    -h | --help) usage ;;
    *) echo "agent-hostfile.sh: unknown argument: $1" >&2; usage ;;
  esac
done
case "$port" in '' | *[!0-9]*) echo "agent-hostfile.sh: bad port: $port" >&2; exit 2 ;; esac

# name|node|host IP|phase|ready of each pod ("|": empty fields survive `read`, tabs would not). With hostNetwork the pod's IP
# is its node's IP; status.hostIP is used because it is set even before the pod is ready.
template='{range .items[*]}{.metadata.name}{"|"}{.spec.nodeName}{"|"}{.status.hostIP}{"|"}{.status.phase}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}'
if ! pods=$(${KUBECTL:-kubectl} "${kubectl_args[@]}" -n "$namespace" get pods -l "$selector" \
  -o jsonpath="$template"); then
  echo "agent-hostfile.sh: kubectl get pods failed (namespace $namespace, selector $selector)" >&2
  exit 1
fi

printed=0
while IFS='|' read -r name node ip phase ready; do
  [ -n "$name" ] || continue
  if [ -z "$ip" ] || [ "$phase" != Running ] || [ "$ready" != True ]; then
    echo "agent-hostfile.sh: skipping pod $name on node ${node:-?}: phase ${phase:-?}, ready ${ready:-?}" >&2
    continue
  fi
  case "$ip" in
    *:*) echo "[$ip]:$port" ;; # IPv6
    *) echo "$ip:$port" ;;
  esac
  printed=$((printed + 1))
done <<<"$pods"

if [ "$printed" -eq 0 ]; then
  echo "agent-hostfile.sh: no ready agent pod (namespace $namespace, selector $selector)" >&2
  exit 1
fi
