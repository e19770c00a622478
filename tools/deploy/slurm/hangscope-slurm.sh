#!/usr/bin/env bash
# Diagnoses a hung Slurm job: captures every node of its allocation with
# `hangscope collect --once` (one task per node, a step that overlaps the job's own), then runs
# `hangscope diagnose` on the snapshots. No agent needs to be running.
#
# Usage: hangscope-slurm.sh JOBID [--samples N] [--interval D] [--out DIR] [--hangscope PATH]
#                           [--timeout SECONDS] [-- COLLECT_ARGS...]
#   --samples N       samples per node (default 3)
#   --interval D      time between samples: 500ms, 2s, 1m (default 1s)
#   --out DIR         where snapshots (DIR/<node>.json) and the bundle (DIR/bundle) go
#                     (default ./hangscope-JOBID-<UTC time>). Every node writes its own file
#                     there: DIR must be on a file system all nodes of the job see.
#   --hangscope PATH  the hangscope binary, on this host and on every node (default: hangscope
#                     from PATH)
#   --timeout S       give up on the capture step after S seconds (default 120 + samples x
#                     interval): a step can wait forever when the job's nodes are down
#   --                the rest goes to `hangscope collect --once` on every node (e.g.
#                     --select 'vllm|torchrun' --trigger-fr-dump --log '/scratch/logs/*.log')
# Run it as the job's user (ptrace of one's own processes needs no privilege) or as root.
# Exit: diagnose's code (0 nothing wrong found, 3 a verdict was reached, 1 failed), 1 when no
# node could be captured, 2 bad usage.
set -euo pipefail

me="hangscope-slurm.sh"
usage() {
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() {
  echo "$me: error: $*" >&2
  exit 1
}

[ $# -ge 1 ] || usage
case "$1" in -h | --help) usage ;; esac
jobid=$1
shift
case "$jobid" in '' | *[!0-9_]*) echo "$me: JOBID must be a job id, got '$jobid'" >&2; exit 2 ;; esac
samples=3
interval=1s
out=""
hangscope=hangscope
timeout_s=""
collect_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --samples) [ $# -ge 2 ] || usage; samples=$2; shift 2 ;;
    --interval) [ $# -ge 2 ] || usage; interval=$2; shift 2 ;;
    --out | -o) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --hangscope) [ $# -ge 2 ] || usage; hangscope=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift 2 ;;
    --) shift; collect_args=("$@"); break ;;
    -h | --help) usage ;;
    *) echo "$me: unknown argument: $1" >&2; usage ;;
  esac
done
case "$samples" in '' | *[!0-9]*) echo "$me: --samples must be a number" >&2; exit 2 ;; esac
case "$timeout_s" in *[!0-9]*) echo "$me: --timeout must be a number of seconds" >&2; exit 2 ;; esac

for tool in squeue scontrol srun; do
  command -v "$tool" >/dev/null || die "$tool not found: run this on a Slurm login or compute node"
done
command -v "$hangscope" >/dev/null || die "$hangscope not found (give --hangscope PATH)"
hangscope=$(command -v "$hangscope")
case "$hangscope" in /*) ;; *) hangscope=$PWD/$hangscope ;; esac

# The job must be running: its allocation is where the step goes.
if ! info=$(squeue -h -j "$jobid" -o '%T|%D|%N' 2>&1); then
  die "job $jobid not found (squeue: $info)"
fi
IFS='|' read -r state node_count nodelist <<<"$info"
[ -n "${state:-}" ] || die "job $jobid not found (finished, or another cluster: set SLURM_CONF)"
[ "$state" = RUNNING ] || die "job $jobid is $state, not RUNNING: there is nothing to capture"
mapfile -t nodes < <(scontrol show hostnames "$nodelist")
[ "${#nodes[@]}" -eq "$node_count" ] || die "job $jobid: $node_count node(s) but '$nodelist' expands to ${#nodes[@]}"

[ -n "$out" ] || out=$PWD/hangscope-$jobid-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
out=$(cd "$out" && pwd)
for node in "${nodes[@]}"; do rm -f "$out/$node.json"; done # no stale snapshot counts as fresh
seconds=$(awk -v d="$interval" 'BEGIN { n = d + 0; if (d ~ /ms$/) n /= 1000; else if (d ~ /m$/) n *= 60; print int(n + 1) }')
[ -n "$timeout_s" ] || timeout_s=$((120 + samples * seconds))

echo "$me: job $jobid: capturing $node_count node(s) ($nodelist), $samples sample(s) each, into $out" >&2
# The job's own SLURM_* variables (when run from inside the job) would shape the step: drop the
# ones that size it. --overlap: the step shares the job's CPUs, memory and GPUs instead of
# waiting for them. One task per node; each writes DIR/<its node name>.json.
step_env=(env -u SLURM_NTASKS -u SLURM_NPROCS -u SLURM_NTASKS_PER_NODE -u SLURM_CPUS_PER_TASK
  -u SLURM_MEM_PER_CPU -u SLURM_MEM_PER_NODE -u SLURM_MEM_PER_GPU -u SLURM_GPUS
  -u SLURM_GPUS_PER_NODE -u SLURM_GPUS_PER_TASK -u SLURM_DISTRIBUTION -u SLURM_CPU_BIND)
rc=0
# shellcheck disable=SC2016 # expanded by the task's shell on each node
"${step_env[@]}" timeout --kill-after=10 "$timeout_s" \
  srun --jobid="$jobid" --overlap --nodes="$node_count" --ntasks="$node_count" \
  --ntasks-per-node=1 --cpus-per-task=1 --job-name=hangscope --kill-on-bad-exit=0 \
  /bin/sh -c 'node=${SLURMD_NODENAME:-$(hostname -s)} samples=$1 interval=$2 out=$3
    shift 3
    exec "$0" collect --once --samples "$samples" --interval "$interval" --node-name "$node" \
      -o "$out/$node.json" "$@"' \
  "$hangscope" "$samples" "$interval" "$out" "${collect_args[@]}" || rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "$me: warning: the capture step did not finish within ${timeout_s}s" >&2
elif [ "$rc" -ne 0 ]; then
  echo "$me: warning: the capture step exited $rc (some nodes may be missing)" >&2
fi

files=()
missing=()
for node in "${nodes[@]}"; do
  if [ -s "$out/$node.json" ]; then files+=("$out/$node.json"); else missing+=("$node"); fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "$me: warning: no snapshot from ${#missing[@]} node(s): ${missing[*]}" \
    "(is $out on a file system those nodes see? is $hangscope installed there?)" >&2
fi
[ "${#files[@]}" -gt 0 ] || die "no node could be captured"

rc=0
"$hangscope" diagnose "${files[@]}" -o "$out/bundle" || rc=$?
if [ -f "$out/bundle/report.md" ]; then
  echo "$me: report: $out/bundle/report.md (snapshots: $out/*.json)" >&2
fi
exit "$rc"
