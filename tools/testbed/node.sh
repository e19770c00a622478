#!/usr/bin/env bash
# One node of the virtual cluster (pid 1 of its PID namespace): sets its hostname, starts the
# agent and this node's gloo ranks, and waits. Started by cluster.sh.
set -u
name=$1 index=$2 addr=$3 port=$4 dir=$5 hangscope=$6 nodes=$7 ranks=$8 diverged=$9 master=${10}
repo=$(cd "$(dirname "$0")/../.." && pwd)
hostname "$name"
"$hangscope" collect --listen "$addr:$port" --token-file "$dir/token" --node-name "$name" &
world=$((nodes * ranks))
for ((local = 0; local < ranks; local++)); do
  rank=$((index * ranks + local))
  RANK=$rank LOCAL_RANK=$local WORLD_SIZE=$world MASTER_ADDR=$master MASTER_PORT=29500 \
    GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 "$repo/tools/repro/gloo_barrier_hang.py" \
    --rank-worker --diverged-rank "$diverged" &
done
wait
