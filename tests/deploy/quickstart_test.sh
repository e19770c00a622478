#!/usr/bin/env bash
# docs/quickstart-vllm.md followed as a new user would, with the packaged binary on the
# two-node virtual cluster (tools/testbed/cluster.sh: network, PID, UTS and mount namespaces,
# real gloo ranks hung like seed bug A, vLLM #52907, an agent with a token on each node):
#   1. the .deb built by `cpack -G DEB` (section 1), its binary taken from the package
#      (dpkg-deb -x), `hangscope --version`;
#   3.2 `diagnose --hostfile nodes.txt --token-file ... -o hang`, with --ticket (section 6):
#      exit code 3, the known bug named in the ticket's first line, the ticket equal to the
#      bundle's report.md, under GitHub's 65,536-character limit, without the token;
#   6. `hangscope report hang --ticket` gives the same verdict later;
#   7. the exit-code script: --quiet, exit 3, the verdict id read from report.json.
# Usage: quickstart_test.sh BUILD_DIR. Exit: 0 pass, 1 fail, 77 skip (not root; cpack,
# dpkg-deb, ip or unshare missing).
set -euo pipefail

build_dir=$(realpath "${1:?usage: $0 BUILD_DIR}")
source_dir=$(cd "$(dirname "$0")/../.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (namespaces)"
  exit 77
fi
for tool in cpack dpkg-deb ip unshare python3; do
  command -v "$tool" >/dev/null || {
    echo "SKIP: $tool not installed"
    exit 77
  }
done

work=$(mktemp -d /var/tmp/hangscope-quickstart.XXXXXX)
cleanup() {
  local rc=$?
  # cluster.sh run tears its cluster down itself; a leftover one (this script killed mid-run)
  # is torn down here.
  [ -d "$work/cluster" ] && "$source_dir/tools/testbed/cluster.sh" down --dir "$work/cluster" \
    >/dev/null 2>&1
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
step() { echo "== $*"; }

step "1. install: the .deb, and the hangscope it installs"
cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$work/pkg" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack -G DEB"; }
deb=$(ls "$work"/pkg/hangscope_*.deb)
dpkg-deb -x "$deb" "$work/root"
hangscope=$work/root/usr/bin/hangscope
version=$("$hangscope" --version)
echo "$version"
grep -Eq '^hangscope [0-9.]+ \(git [0-9a-f]{12}(-dirty)?\)$' <<<"$(head -1 <<<"$version")" ||
  fail "--version names no git revision: $version"

step "3.2 + 6. diagnose the two-node cluster through its agents, --ticket"
# Everything runs inside `cluster.sh run`, which sets AGENTS (host:port,...) and TOKEN_FILE.
cat >"$work/user.sh" <<'EOF'
set -u
cd "$WORK"
tr , '\n' <<<"$AGENTS" >nodes.txt                   # quickstart 3.2: one agent per line
rc=0
"$HANGSCOPE" diagnose --hostfile nodes.txt --token-file "$TOKEN_FILE" -o hang --ticket \
  >issue.md 2>diagnose.err || rc=$?
echo "$rc" >diagnose.rc
cp "$TOKEN_FILE" token.copy
# quickstart 7: the exit-code script
dir=$WORK/shared-hang/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$WORK/shared-hang"
rc=0
"$HANGSCOPE" diagnose --hostfile nodes.txt --token-file "$TOKEN_FILE" --quiet -o "$dir" \
  >quiet.out 2>quiet.err || rc=$?
echo "$rc $dir" >quiet.rc
EOF
WORK=$work HANGSCOPE=$hangscope "$source_dir/tools/testbed/cluster.sh" run --dir "$work/cluster" \
  --nodes 2 --ranks 2 --diverged 3 --scenario symmetric-memory --hangscope "$hangscope" -- \
  bash "$work/user.sh" >"$work/cluster.log" 2>&1 || { cat "$work/cluster.log"; fail "cluster.sh run"; }

cd "$work"
[ "$(cat diagnose.rc)" = 3 ] || { cat diagnose.err; fail "diagnose exit $(cat diagnose.rc), not 3 (hang found)"; }
head -1 issue.md
head -1 issue.md | grep -q 'symmetric-memory' || fail "the ticket's first line names no known bug"
cmp -s issue.md hang/report.md || fail "--ticket printed something other than hang/report.md"
[ "$(wc -c <issue.md)" -lt 65536 ] || fail "the ticket is over GitHub's issue body limit"
! grep -qF "$(cat token.copy)" issue.md hang/* 2>/dev/null || fail "the agent token is in the bundle"
python3 - <<'EOF' || fail "report.json's first verdict"
import json
verdict = json.load(open("hang/report.json"))["verdicts"][0]
assert verdict["id"] == "symmetric-memory-rendezvous", verdict["id"]
# --diverged 3: node1 (ranks 2 and 3) fails the rendezvous, node0's ranks wait inside it
assert verdict["diverged_ranks"] == [2, 3], verdict
assert verdict["waiting_ranks"] == [0, 1], verdict
print("  verdict", verdict["id"], "diverged", verdict["diverged_ranks"],
      "waiting", verdict["waiting_ranks"])
EOF

step "6. later, from the bundle: hangscope report hang --ticket"
rc=0
"$hangscope" report hang --ticket >again.md 2>report.err || rc=$?
[ "$rc" = 3 ] || { cat report.err; fail "report exit $rc, not 3"; }
[ "$(head -1 again.md)" = "$(head -1 issue.md)" ] || fail "report --ticket gives another verdict"

step "7. the exit-code script"
read -r rc dir <quiet.rc
[ "$rc" = 3 ] || { cat quiet.err; fail "diagnose --quiet exit $rc, not 3"; }
[ ! -s quiet.err ] || { cat quiet.err; fail "--quiet printed progress on stderr"; }
python3 -c 'import json,sys; print("  verdict:", json.load(open(sys.argv[1]))["verdicts"][0]["id"])' \
  "$dir/report.json" | grep -q 'symmetric-memory-rendezvous' || fail "report.json of the scripted run"
echo "PASS"
