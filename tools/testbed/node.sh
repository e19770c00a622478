#!/usr/bin/env bash
# One node of the virtual cluster (pid 1 of its PID namespace): sets its hostname, starts the
# agent and this node's gloo ranks (with --scenario compiled-dag, node 0 also the compiled
# graph's driver, vLLM's EngineCore process), and waits. Started by cluster.sh. With --scenario
# collective-behind the ranks' flight-recorder fifos and dumps go to DIR/NAME/flight-recorder/
# and the agent asks for fresh dumps (collect --trigger-fr-dump); with store-exit and store-wait
# the agent asks the store which awaited keys exist (collect --query-store). With a job (JOB,
# cluster.sh --job) the node runs tools/repro/parallel_job.py's launcher instead (or the job
# script JOB starts with, e.g. "group_job.py --scenario spg-broadcast"): one per node,
# the ranks its launcher starts (no rank variables here; GLOO_SOCKET_IFNAME=eth0 and a fresh
# VLLM_CACHE_ROOT for the node, as a user's job script sets them), the agent without options.
# --scenario serving-chain runs a simulated vLLM V1 server on node 0 (tools/repro/serving_chain.py:
# API server, engine core, the node's ranks as its workers, worker DIVERGED stuck);
# --scenario sglang-serving one node of a multi-node SGLang server on each node
# (tools/repro/sglang_serving.py: scheduler DIVERGED stuck).
set -u
name=$1 index=$2 addr=$3 port=$4 dir=$5 hangscope=$6 nodes=$7 ranks=$8 diverged=$9 master=${10}
scenario=${11:-store-wait} variety=${12:-0} job=${13:-} ifname=${14:-eth0}
repo=$(cd "$(dirname "$0")/../.." && pwd)
hostname "$name"
agent_flags=()
if [ -n "$job" ]; then scenario=job; fi
if [ "$scenario" = collective-behind ]; then agent_flags=(--trigger-fr-dump); fi
# Store waits: the agent asks the job's store (read-only) which awaited keys exist.
if [ "$scenario" = store-exit ] || [ "$scenario" = store-wait ]; then agent_flags=(--query-store); fi
"$hangscope" collect --listen "$addr:$port" --token-file "$dir/token" --node-name "$name" \
  "${agent_flags[@]}" &
world=$((nodes * ranks))
if [ -n "$job" ]; then
  # This node's launcher of the job (its ranks die with it); word splitting of JOB intended.
  export VLLM_CACHE_ROOT="$dir/$name/vllm-cache"
  rm -rf "$VLLM_CACHE_ROOT"
  mkdir -p "$VLLM_CACHE_ROOT"
  # JOB may start with another job script of tools/repro (e.g. "group_job.py --scenario ..."),
  # which takes the same node options; by default parallel_job.py.
  job_script=parallel_job.py
  read -r first_word rest <<<"$job"
  if [[ "$first_word" == *.py ]]; then job_script=$first_word job=$rest; fi
  # shellcheck disable=SC2086
  GLOO_SOCKET_IFNAME=$ifname /usr/bin/python3 "$repo/tools/repro/$job_script" --nodes "$nodes" \
    --node-index "$index" --ranks-per-node "$ranks" --master-addr "$master" --master-port 29500 \
    $job &
  wait
  exit 0
fi
if [ "$scenario" = serving-chain ]; then
  # A vLLM V1 serving deployment on node 0 (tools/repro/serving_chain.py): the API server, its
  # engine core and RANKS workers (gloo over loopback), worker DIVERGED stuck; killed with the
  # node.
  if [ "$index" = 0 ]; then
    GLOO_SOCKET_IFNAME=lo /usr/bin/python3 "$repo/tools/repro/serving_chain.py" --tp "$ranks" \
      --stuck-rank "$diverged" --requests 37 &
  fi
  wait
  exit 0
fi
if [ "$scenario" = sglang-serving ]; then
  # One node of a multi-node SGLang deployment (tools/repro/sglang_serving.py): `python3 -m
  # sglang.launch_server --tp NODES*RANKS --nnodes NODES --node-rank INDEX --dist-init-addr
  # MASTER:5000` (node 0: the HTTP server, the detokenizer and its RANKS schedulers; the others:
  # their RANKS schedulers, gloo over eth0), scheduler DIVERGED stuck; killed with the node.
  GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 "$repo/tools/repro/sglang_serving.py" \
    --node-rank "$index" --nnodes "$nodes" --tp "$world" --dist-init-addr "$master:5000" \
    --stuck-rank "$diverged" --requests 23 &
  wait
  exit 0
fi
script="$repo/tools/repro/gloo_barrier_hang.py"
if [ "$scenario" = autotune-cache ]; then
  # This node's vLLM cache (its FlashInfer autotune cache), fresh for every cluster.
  export VLLM_CACHE_ROOT="$dir/$name/vllm-cache"
  rm -rf "$VLLM_CACHE_ROOT"
  mkdir -p "$VLLM_CACHE_ROOT"
fi
if [ "$scenario" = collective-behind ]; then
  # This node's flight-recorder fifos (<prefix><rank>.pipe) and dumps (<prefix><rank>), fresh
  # for every cluster; exported for this job's ranks only (unset after them).
  fr_dir="$dir/$name/flight-recorder"
  rm -rf "$fr_dir"
  mkdir -p "$fr_dir"
  export TORCH_NCCL_DEBUG_INFO_PIPE_FILE="$fr_dir/nccl_trace_rank_"
  export TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$fr_dir/nccl_trace_rank_"
fi
for ((local = 0; local < ranks; local++)); do
  rank=$((index * ranks + local))
  extra=()
  # Identity variety (--variety) on node 1: a rank retitled like a vLLM worker (its /proc
  # environ reads empty), and a rank with a helper child.
  if [ "$variety" = 1 ] && [ "$index" = 1 ]; then
    if [ "$local" = 2 ]; then extra=(--title "VLLM::Worker_TP2"); fi
    if [ "$local" = 0 ]; then extra=(--helper); fi
  fi
  RANK=$rank LOCAL_RANK=$local LOCAL_WORLD_SIZE=$ranks WORLD_SIZE=$world MASTER_ADDR=$master \
    MASTER_PORT=29500 GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 "$script" --rank-worker --scenario "$scenario" \
    --diverged-rank "$diverged" "${extra[@]}" &
done
if [ "$scenario" = collective-behind ]; then
  unset TORCH_NCCL_DEBUG_INFO_PIPE_FILE TORCH_NCCL_DEBUG_INFO_TEMP_FILE
fi
if [ "$scenario" = compiled-dag ] && [ "$index" = 0 ]; then
  # The compiled graph's driver, vLLM's EngineCore process (title VLLM::EngineCore): no rank, so
  # none of the rank variables (whatever this node inherited); killed with the node.
  env -u RANK -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
    /usr/bin/python3 "$script" --driver --scenario "$scenario" --world-size "$world" \
    --diverged-rank "$diverged" &
fi
if [ "$variety" = 1 ] && [ "$index" = 1 ]; then
  # A second job on this node (its own rendezvous; always the default store-wait scenario), and
  # a Python process that is no rank.
  for rank in 0 1; do
    RANK=$rank LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 WORLD_SIZE=2 MASTER_ADDR=$addr MASTER_PORT=29600 \
      GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 "$script" --rank-worker --diverged-rank 1 \
      | sed -u 's/^rank /job-b rank /' &
  done
  /usr/bin/python3 -c 'import time; time.sleep(3600)' &
fi
wait
