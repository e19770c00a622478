#!/usr/bin/env bash
# A virtual cluster on one machine: K nodes, each with its own network (veth to a bridge,
# its own address), PID, UTS (hostname) and mount namespace, running a hangscope agent and N
# real torch.distributed gloo ranks (MASTER_ADDR on node 0). One rank diverges; the others
# hang in dist.barrier() (or as --scenario says: tools/repro/gloo_barrier_hang.py --help).
#
#   cluster.sh up   --dir DIR [--nodes K] [--ranks N] [--diverged R] [--hangscope BIN]
#                   [--scenario NAME] [--variety] [--job "ARGS"]
#   cluster.sh cut  --dir DIR --node N   (takes node N's fabric link down: its host-side veth)
#   cluster.sh exec --dir DIR --node N [--log FILE] -- COMMAND...   (COMMAND in node N's network,
#                   PID, mount and UTS namespaces, as its agent and ranks run; with --log in the
#                   background, its output in FILE; ended by `down` with the node)
#   cluster.sh down --dir DIR
#   cluster.sh run  [up options] -- COMMAND...   (up, run COMMAND with AGENTS and TOKEN_FILE
#                                                  set, then down, whatever happens)
# --variety adds identity variety on node 1: local rank 2 retitled VLLM::Worker_TP2, local rank
# 0 with a helper child, a second 2-rank job ("job-b", port 29600) and a Python process that is
# no rank. --scenario compiled-dag adds the compiled graph's driver on node 0 (vLLM's EngineCore,
# title VLLM::EngineCore, no rank variables; gloo_barrier_hang.py --driver), waited for like
# the ranks. --scenario collective-behind gives each node's ranks their flight-recorder fifos and
# dumps under DIR/node<n>/flight-recorder/ (TORCH_NCCL_DEBUG_INFO_PIPE_FILE/_TEMP_FILE) and starts
# the agents with --trigger-fr-dump. --job "ARGS" runs tools/repro/parallel_job.py ARGS instead
# of gloo_barrier_hang.py (--scenario, --diverged and --variety are then ignored): one launcher
# per node (e.g. --job "--launcher spawn --layout tp=2,dp=2 --scenario tp-skip --culprit 3"),
# told its node index, the node count, --ranks and node 0's address; the cluster is up when
# every rank announced itself ("rank R ..."; a rank its launcher left out: "rank R absent") and,
# for --scenario compiled-dag in ARGS, node 0's driver. ARGS starting with another script of
# tools/repro (--job "group_job.py --scenario dp-step-hang --culprit 2") runs that script with
# the same node options; the cluster is up when each node's launcher printed "group job ready
# on node<n>". DIR receives: agents (one HOST:PORT per line), token, node
# logs. --scenario serving-chain (one node) runs a simulated vLLM V1 server on node 0 whose
# --ranks workers hang at worker --diverged (tools/repro/serving_chain.py); up once it says
# "serving chain ready". --scenario sglang-serving runs one node of a multi-node SGLang server
# on every node (tools/repro/sglang_serving.py: `python3 -m sglang.launch_server --tp
# NODES*RANKS --nnodes NODES --node-rank N --dist-init-addr <node 0>:5000`, node 0 with the HTTP
# server and 23 requests in flight), scheduler --diverged stuck; up once every node says
# "sglang serving ready". --fabric gives every node a second network, the fabric (eth1 on its
# own bridge, TEST-NET-3 addresses), that a --job's ranks use (MASTER_ADDR on it,
# GLOO_SOCKET_IFNAME=eth1) while the agents stay on eth0, as a cluster's collectives run on
# their own network (InfiniBand, RoCE) beside the management one: `cut` takes one node's fabric
# link down and its agent still answers. Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

nodes=2 ranks=4 diverged=5 dir="" hangscope="$repo/build/src/hangscope" scenario=store-wait
variety=0 job="" fabric=0 node_arg="" log=""
subnet=${HANGSCOPE_TESTBED_SUBNET:-198.51.100}  # TEST-NET-2: only ever on our own bridge
bridge=hsbr0
fabric_subnet=${HANGSCOPE_TESTBED_FABRIC_SUBNET:-203.0.113}  # TEST-NET-3, on its own bridge
fabric_bridge=hsbr1
port=7447

parse() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) dir=$2; shift 2 ;;
      --nodes) nodes=$2; shift 2 ;;
      --ranks) ranks=$2; shift 2 ;;
      --diverged) diverged=$2; shift 2 ;;
      --hangscope) hangscope=$2; shift 2 ;;
      --scenario) scenario=$2; shift 2 ;;
      --variety) variety=1; shift ;;
      --job) job=$2; shift 2 ;;
      --fabric) fabric=1; shift ;;
      --node) node_arg=$2; shift 2 ;;
      --log) log=$2; shift 2 ;;
      --) shift; command=("$@"); return ;;
      *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
    esac
  done
}

# Namespace and veth names (at most 15 characters) derived from the cluster's directory.
node_ns() { echo "hs$(realpath -m "$dir" | md5sum | cut -c1-6)n$1"; }

up() {
  [ -n "$dir" ] || { echo "cluster.sh: --dir is required" >&2; exit 2; }
  mkdir -p "$dir"
  # 0600: agents on a non-loopback address refuse a token file others can read.
  (umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$dir/token")
  : > "$dir/agents"
  # Never collide with a network this machine really uses: every address must be ours.
  if ip -4 route show | grep -v "dev $bridge" | grep -q "^$subnet\." ||
     ip -4 addr show | grep -v "$bridge" | grep -q "inet $subnet\."; then
    echo "cluster.sh: $subnet.0/24 is already used on this machine; set HANGSCOPE_TESTBED_SUBNET" >&2
    exit 1
  fi
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$subnet.254/24" dev "$bridge"
    ip link set "$bridge" up
  fi
  local master="$subnet.1" ifname=eth0
  if [ "$fabric" = 1 ]; then
    if ip -4 addr show | grep -v "$fabric_bridge" | grep -q "inet $fabric_subnet\."; then
      echo "cluster.sh: $fabric_subnet.0/24 is already used on this machine; set HANGSCOPE_TESTBED_FABRIC_SUBNET" >&2
      exit 1
    fi
    if ! ip link show "$fabric_bridge" >/dev/null 2>&1; then
      ip link add "$fabric_bridge" type bridge
      ip link set "$fabric_bridge" up
    fi
    master="$fabric_subnet.1" ifname=eth1
  fi
  for ((n = 0; n < nodes; n++)); do
    local ns addr
    ns=$(node_ns "$n")
    addr="$subnet.$((n + 1))"
    ip netns add "$ns"
    ip link add "v$ns" type veth peer name eth0 netns "$ns"
    ip link set "v$ns" master "$bridge" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    if [ "$fabric" = 1 ]; then
      ip link add "f$ns" type veth peer name eth1 netns "$ns"
      ip link set "f$ns" master "$fabric_bridge" up
      ip -n "$ns" addr add "$fabric_subnet.$((n + 1))/24" dev eth1
      ip -n "$ns" link set eth1 up
    fi
    echo "$addr:$port" >> "$dir/agents"
    # The node: its own PID, UTS and mount namespaces; pid 1 inside is node.sh, so killing the
    # unshare process ends every process of the node.
    ip netns exec "$ns" unshare --pid --fork --mount-proc --uts \
      "$here/node.sh" "node$n" "$n" "$addr" "$port" "$dir" "$hangscope" "$nodes" "$ranks" \
      "$diverged" "$master" "$scenario" "$variety" "$job" "$ifname" > "$dir/node$n.log" 2>&1 &
    echo $! > "$dir/node$n.pid"
    disown $!  # torn down by `down`, which kills it; no job-control chatter then
  done
  # Wait until every agent answers and every rank (and compiled-dag's driver) has announced
  # itself (a rank announces before its scenario's blocking step, so also a rank that exits or
  # stops itself).
  for _ in $(seq 600); do
    local ready
    ready=$(cat "$dir"/node*.log 2>/dev/null | grep -c '^rank ' || true)
    local extra_ranks
    extra_ranks=$(cat "$dir"/node*.log 2>/dev/null | grep -c '^job-b rank ' || true)
    local drivers
    drivers=$(cat "$dir"/node*.log 2>/dev/null | grep -c '^driver pid ' || true)
    # A job of another script (--job "group_job.py ..."): each node's launcher says when all
    # of its processes announced themselves ("group job ready on node<n>").
    local group_ready=0
    if [[ "$job" == *.py* ]]; then
      group_ready=$(cat "$dir"/node*.log 2>/dev/null | grep -c '^group job ready on node' || true)
      if [ "$group_ready" -ge "$nodes" ]; then ready=$((nodes * ranks)); else ready=0; fi
    fi
    if [ "$ready" -ge $((nodes * ranks)) ] && [ "$(cat "$dir"/node*.log | grep -c 'listening on')" -ge "$nodes" ] &&
       { [ "$variety" = 0 ] || [ "$nodes" -lt 2 ] || [ "$extra_ranks" -ge 2 ]; } &&
       { [ "$scenario" != compiled-dag ] || [ -n "$job" ] || [ "$drivers" -ge 1 ]; } &&
       { [[ " $job " != *" compiled-dag "* ]] || [ "$drivers" -ge 1 ]; } &&
       { [ "$scenario" != serving-chain ] || grep -q '^serving chain ready' "$dir"/node*.log; } &&
       { [ "$scenario" != sglang-serving ] ||
         [ "$(grep -l '^sglang serving ready' "$dir"/node*.log | wc -l)" -ge "$nodes" ]; }; then
      sleep 1  # let the waiting ranks enter the barrier
      return 0
    fi
    # A scenario that cannot run with these options (the ranks refused it): no point waiting.
    if cat "$dir"/node*.log 2>/dev/null | grep -q -e 'gloo_barrier_hang.py: error:' -e 'parallel_job.py: error:' -e 'group_job.py: error:'; then
      break
    fi
    sleep 0.2
  done
  echo "cluster.sh: the cluster did not come up; node logs:" >&2
  cat "$dir"/node*.log >&2
  return 1
}

down() {
  [ -n "$dir" ] || { echo "cluster.sh: --dir is required" >&2; exit 2; }
  for pidfile in "$dir"/node*.pid; do
    [ -e "$pidfile" ] || continue
    kill -KILL "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
  for ((n = 0; n < 64; n++)); do
    local ns
    ns=$(node_ns "$n")
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip link del "v$ns" 2>/dev/null || true
    ip link del "f$ns" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  local b
  for b in "$bridge" "$fabric_bridge"; do
    if ! ip link show master "$b" 2>/dev/null | grep -q . && ip link show "$b" >/dev/null 2>&1; then
      ip link del "$b" 2>/dev/null || true
    fi
  done
}

# Node N's fabric link down (its host-side veth): its ranks' traffic to the other nodes stops
# without a reset, as when a cable or a switch port fails; its agent still answers on eth0.
cut_fabric() {
  [ -n "$dir" ] && [ -n "$node_arg" ] || { echo "cluster.sh: cut needs --dir and --node" >&2; exit 2; }
  ip link set "f$(node_ns "$node_arg")" down
}

# COMMAND inside node N, as if node.sh had started it: nsenter into the namespaces of the
# node's pid 1 (node.sh, the child of DIR/node<n>.pid's unshare), in the caller's working
# directory. A second job on a node (its own MASTER_PORT) is started this way. Every process it
# starts is in the node's network namespace and PID namespace, so `down` ends it with the node.
# In the foreground, cluster.sh becomes the command (its exit status); with --log FILE it
# runs in the background (stdin /dev/null, stdout and stderr to FILE) and cluster.sh returns.
exec_in_node() {
  if [ -z "$dir" ] || [ -z "$node_arg" ] || [ ${#command[@]} -eq 0 ]; then
    echo "cluster.sh: exec needs --dir, --node and -- COMMAND" >&2
    exit 2
  fi
  local unshare_pid="" init=""
  unshare_pid=$(cat "$dir/node$node_arg.pid" 2>/dev/null || true)
  [ -n "$unshare_pid" ] && init=$(pgrep -P "$unshare_pid" | head -n 1 || true)
  [ -n "$init" ] || { echo "cluster.sh: node $node_arg of $dir is not running" >&2; exit 1; }
  local enter=(nsenter --target "$init" --net --pid --mount --uts --wd="$PWD" --)
  if [ -n "$log" ]; then
    "${enter[@]}" "${command[@]}" </dev/null >"$log" 2>&1 &
    disown $!
  else
    exec "${enter[@]}" "${command[@]}"
  fi
}

action=${1:-}
shift || true
command=()
parse "$@"
case "$action" in
  up) trap 'down' ERR; up ;;
  down) down ;;
  cut) cut_fabric ;;
  exec) exec_in_node ;;
  run)
    # One testbed per machine (one bridge, one subnet): `run` holds the machine-wide lock from
    # up to down, as tests/support/virtual_cluster.cpp does around its own up and down, so
    # clusters of other build trees, worktrees or ctest runs wait instead of colliding.
    lock=${HANGSCOPE_TESTBED_LOCK:-/run/lock/hangscope-testbed.lock}
    exec 9>>"$lock"
    flock 9
    trap 'down' EXIT
    up
    AGENTS=$(paste -sd, "$dir/agents") TOKEN_FILE="$dir/token" "${command[@]}"
    ;;
  *) echo "usage: cluster.sh up|down|cut|exec|run --dir DIR [...]" >&2; exit 2 ;;
esac
