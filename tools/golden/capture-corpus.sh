#!/bin/bash
# Recaptures the golden corpus (tests/fixtures/golden/<case>/snapshots/*.json.gz): real jobs of
# tools/repro hung (or healthy) on this machine, captured by `hangscope diagnose` as a user
# would, their snapshots kept. tools/check-golden.py then diagnoses every kept case and compares
# report.json with the case's expected.json.
#
#   tools/golden/capture-corpus.sh HANGSCOPE [CASE...]     (root; Debian's python3-torch)
#
# Recapture a case only when capture itself changed on purpose (the snapshot holds new data):
# the analysis is what the golden check guards, and it must see the same inputs before and
# after a change. Then run tools/check-golden.py --update and say in the commit why the
# expected reports moved.
set -uo pipefail
hangscope=$(realpath "${1:?usage: capture-corpus.sh HANGSCOPE [CASE...]}")
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
corpus=$root/tests/fixtures/golden
python=/usr/bin/python3
job=$root/tools/repro/parallel_job.py

# case name | seconds to let it reach its hang (or its rhythm) | the job's command line
# [| diagnose's extra options]
cases=(
  "tp-skip-spawn|14|$python $job --launcher spawn --layout tp=2,pp=2 --scenario tp-skip --culprit 2"
  "pp-chain-torchrun|14|$python $job --launcher torchrun --layout tp=2,pp=2 --scenario pp-chain --culprit 1"
  "dp-stall-vllm|16|$python $job --launcher vllm-worker --layout tp=2,dp=2 --scenario dp-stall --culprit 3"
  "init-hang-ray|10|$python $job --launcher ray-actor --layout tp=2,pp=2 --scenario init-hang --culprit 3"
  "init-missing-torchrun|10|$python $job --launcher torchrun --layout tp=4 --scenario init-missing --culprit 2"
  "loop-early-exit-spawn|14|$python $job --launcher spawn --layout tp=2,pp=2 --scenario loop-early-exit --culprit 1"
  "busy-healthy-20ms|12|$python $job --launcher torchrun --layout tp=2,pp=2 --scenario busy-healthy --step-ms 20"
  "slow-healthy|12|$python $job --launcher vllm-worker --layout tp=2,pp=2 --scenario slow-healthy"
  "compiled-dag-seed|16|$python $root/tools/repro/gloo_barrier_hang.py --world-size 4 --scenario compiled-dag --diverged-rank 0"
  "autotune-cache-seed|16|$python $root/tools/repro/gloo_barrier_hang.py --world-size 4 --scenario autotune-cache --diverged-rank 2"
  "dp-dummy-desync|16|$python $root/tools/repro/gloo_barrier_hang.py --world-size 4 --scenario dp-dummy-desync --diverged-rank 1"
  "stopped-rank|10|$python $root/tools/repro/gloo_barrier_hang.py --world-size 3 --scenario stopped --diverged-rank 1"
  "collective-behind-fr|14|$python $root/tools/repro/gloo_barrier_hang.py --world-size 4 --scenario collective-behind --diverged-rank 3|--trigger-fr-dump"
  "serving-chain-vllm|25|$python $root/tools/repro/serving_chain.py --tp 2 --stuck-rank 1"
)

wanted=("$@")
run_case() {
  local name=$1 settle=$2 command=$3 extra=$4 log out pid rc
  log=$(mktemp) out=$(mktemp -d)
  setsid bash -c "exec $command" >"$log" 2>&1 &
  pid=$!
  sleep "$settle"
  rm -rf "$out"
  # shellcheck disable=SC2086 # the extra options are words
  "$hangscope" diagnose -o "$out" --quiet $extra >/dev/null
  rc=$?
  kill -TERM -- -"$pid" 2>/dev/null
  sleep 1
  kill -KILL -- -"$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if ! ls "$out"/snapshots/*.json >/dev/null 2>&1; then
    echo "capture-corpus: $name: no snapshot (diagnose exit $rc); the job said:" >&2
    tail -5 "$log" >&2
    rm -rf "$out" "$log"
    return 1
  fi
  rm -rf "${corpus:?}/$name/snapshots"
  mkdir -p "$corpus/$name/snapshots"
  for file in "$out"/snapshots/*.json; do
    gzip -9n <"$file" >"$corpus/$name/snapshots/$(basename "$file").gz"
  done
  echo "capture-corpus: $name: diagnose exit $rc; $(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verdicts"]; print(v[0]["id"] if v else "no verdict")' "$out/report.json" 2>&1)"
  rm -rf "$out" "$log"
}

status=0
for entry in "${cases[@]}"; do
  IFS='|' read -r name settle command extra <<<"$entry"
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " == *" $name "* ]]; then continue; fi
  run_case "$name" "$settle" "$command" "$extra" || status=1
done
exit $status
