#!/usr/bin/env bash
# The false-alarm benchmark (issue 32): one virtual cluster per step rhythm (tools/testbed/
# cluster.sh, 2 nodes x 2 real gloo ranks, tools/repro/parallel_job.py --scenario busy-healthy:
# vLLM model steps over TP 2 x PP 2, torchrun, with --step-ms of host work between steps), and
# RUNS `hangscope diagnose` through the agents against the healthy job, as an on-call engineer
# runs it (--samples 3 --interval 1s). A healthy job must exit 0; any other exit is a false
# alarm (the verdict is printed). Prints a Markdown section: one row per rhythm, the total.
#   tools/bench/false_alarms.sh [RUNS] [HANGSCOPE]   (defaults: 50, build/src/hangscope)
# Needs root (namespaces). About RUNS x 3 s per rhythm.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-50}
hangscope=$(realpath "${2:-build/src/hangscope}")
rhythms=("0:no pause" "2:2 ms" "10:10 ms" "20:20 ms" "50:50 ms" "500:slow, 500 ms")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/diagnose.sh" <<'INNER'
#!/usr/bin/env bash
# Runs inside `cluster.sh run` (AGENTS, TOKEN_FILE set): RUNS diagnoses, one line per run.
for i in $(seq "$RUNS"); do
  rc=0
  "$HANGSCOPE" diagnose --agents "$AGENTS" --token-file "$TOKEN_FILE" --samples 3 \
    --interval 1s --quiet -o "$OUT/run$i" >/dev/null 2>&1 || rc=$?
  echo "run $i exit $rc $(head -n 1 "$OUT/run$i/report.md" 2>/dev/null)"
  [ "$rc" -eq 0 ] && rm -rf "$OUT/run$i"
done
INNER
chmod +x "$work/diagnose.sh"
total=0 alarms=0 rows=""
for rhythm in "${rhythms[@]}"; do
  ms=${rhythm%%:*} name=${rhythm#*:}
  mkdir -p "$work/$ms"
  RUNS=$runs HANGSCOPE=$hangscope OUT=$work/$ms tools/testbed/cluster.sh run --dir "$work/cluster" \
    --nodes 2 --ranks 2 --hangscope "$hangscope" \
    --job "--launcher torchrun --layout tp=2,pp=2 --scenario busy-healthy --step-ms $ms" \
    -- "$work/diagnose.sh" >"$work/$ms.log" 2>&1 || true
  done_runs=$(grep -c '^run ' "$work/$ms.log" || true)
  hung=$(grep '^run ' "$work/$ms.log" | grep -vc ' exit 0 ' || true)
  grep '^run ' "$work/$ms.log" | grep -v ' exit 0 ' | sed "s/^/  $name: /" >&2 || true
  [ "$done_runs" -eq "$runs" ] || echo "  $name: only $done_runs of $runs runs (cluster log: $(tail -n 3 "$work/$ms.log"))" >&2
  total=$((total + done_runs))
  alarms=$((alarms + hung))
  rows+="| $name | $done_runs | $hung |"$'\n'
done
echo "## False alarms on healthy jobs"
echo
echo "\`tools/bench/false_alarms.sh $runs\` ($(date -u +%Y-%m-%d), $("$hangscope" --version | head -n 1)): a healthy"
echo "2-node job of 4 gloo ranks (vLLM model steps, TP 2 x PP 2, torchrun) at each step rhythm,"
echo "diagnosed through the agents with \`--samples 3 --interval 1s\`; a run that does not exit 0"
echo "is a false alarm."
echo
echo "| rhythm (host work between steps) | runs | false alarms |"
echo "|---|---|---|"
printf '%s' "$rows"
echo "| **total** | $total | $alarms |"
