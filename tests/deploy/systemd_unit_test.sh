#!/usr/bin/env bash
# Checks tools/deploy/systemd/hangscope-agent.service:
#   1. `systemd-analyze verify` accepts it (ExecStart pointed at the built binary, the man page
#      of its Documentation= found through a temporary MANPATH);
#   2. its hardening exposure (`systemd-analyze security --offline`) stays at or below 4.0;
#   3. the settings the agent depends on are there (no PrivateTmp, capabilities, filter);
#   4. (root only) the unit's capability set, applied with setpriv, is enough to capture a
#      Python process of another user and read its private log, and an empty set is not.
# Usage: tests/deploy/systemd_unit_test.sh HANGSCOPE_BINARY
# Exit: 0 pass, 1 fail, 77 skip (systemd-analyze absent).
set -euo pipefail

binary=$(realpath "${1:?usage: $0 HANGSCOPE_BINARY}")
root=$(cd "$(dirname "$0")/../.." && pwd)
unit=$root/tools/deploy/systemd/hangscope-agent.service
defaults=$root/tools/deploy/systemd/hangscope-agent.default

if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not installed (apt-get install systemd)"
  exit 77
fi

work=$(mktemp -d)
target=""
cleanup() {
  if [ -n "$target" ]; then kill "$target" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*"
  exit 1
}

echo "check: systemd-analyze verify (ExecStart -> $binary)"
mkdir -p "$work/unit" "$work/man/man1"
sed "s#^ExecStart=/usr/bin/hangscope #ExecStart=$binary #" "$unit" >"$work/unit/hangscope-agent.service"
grep -q "^ExecStart=$binary " "$work/unit/hangscope-agent.service" || fail "ExecStart is not /usr/bin/hangscope ..."
man_option=(--man=no)
if [ -f "$root/docs/hangscope.1" ] && command -v man >/dev/null; then
  cp "$root/docs/hangscope.1" "$work/man/man1/"
  man_option=(--man=yes)
fi
if ! (cd "$work/unit" && MANPATH="$work/man" SYSTEMD_LOG_LEVEL=notice \
  systemd-analyze verify "${man_option[@]}" hangscope-agent.service) >"$work/verify.log" 2>&1; then
  cat "$work/verify.log"
  fail "systemd-analyze verify"
fi
if [ -s "$work/verify.log" ]; then
  cat "$work/verify.log"
  fail "systemd-analyze verify printed warnings"
fi
echo "  ok (man page check: ${man_option[*]})"

echo "check: hardening exposure (systemd-analyze security --offline) <= 4.0"
if systemd-analyze security --help 2>&1 | grep -q -- '--offline'; then
  exposure=$(systemd-analyze security --offline=yes --no-pager "$work/unit/hangscope-agent.service" 2>&1 |
    sed -n 's/.*Overall exposure level for hangscope-agent.service: \([0-9.]*\).*/\1/p')
  [ -n "$exposure" ] || fail "no exposure level printed"
  awk -v e="$exposure" 'BEGIN { exit !(e <= 4.0) }' || fail "exposure $exposure > 4.0"
  echo "  ok ($exposure)"
else
  echo "  skipped: this systemd-analyze has no --offline"
fi

echo "check: settings the agent depends on"
require() { grep -Eq "^$1\$" "$unit" || fail "missing: $1"; }
require 'ExecStart=/usr/bin/hangscope .*collect --listen \$\{HANGSCOPE_LISTEN\} --token-file /etc/hangscope/token.*'
require 'EnvironmentFile=-/etc/default/hangscope-agent'
require 'Environment=HANGSCOPE_LISTEN=0.0.0.0:7447'
require 'CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH'
require 'AmbientCapabilities=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH'
require 'PrivateTmp=no'
require 'ProtectSystem=strict'
require 'ProtectHome=read-only'
require 'NoNewPrivileges=yes'
require 'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK'
require 'SystemCallArchitectures=native'
require 'SystemCallFilter=@system-service @debug'
require 'MemoryMax=[0-9]+[KMG]'
if grep -Eq '^(PrivateUsers|PrivateDevices|ProtectClock)=yes' "$unit"; then
  fail "PrivateUsers/PrivateDevices/ProtectClock would take away ptrace over the host or /dev/nvidia*"
fi
grep -q '^HANGSCOPE_LISTEN=0.0.0.0:7447$' "$defaults" || fail "hangscope-agent.default has no HANGSCOPE_LISTEN"
echo "  ok"

if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null || ! id nobody >/dev/null 2>&1; then
  echo "check: capability set (skipped: needs root, setpriv and the user nobody)"
  echo "PASS"
  exit 0
fi
echo "check: the unit's capabilities capture another user's process and read its private log"
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr '[:upper:]' '[:lower:]' | sed 's/cap_/+/g; s/ /,/g')
# A rank of user nobody, logging into a 0700 directory; the marker is built at run time so
# only the log (not the command line) holds it.
chmod 755 "$work"
mkdir "$work/private"
chown nobody "$work/private"
chmod 700 "$work/private"
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups /bin/sh -c \
  "umask 077; exec /usr/bin/python3 -u -c '
import time
def rank_waits_here():
    print(\"ERROR \" + \"systemd-unit-test\" + \"-marker\", flush=True)
    time.sleep(60)
rank_waits_here()' >'$work/private/rank.log' 2>&1" &
target=$!
for _ in $(seq 50); do
  [ -s "$work/private/rank.log" ] && break
  sleep 0.1
done
capture() { # CAPS OUT
  setpriv --bounding-set="-all$1" --inh-caps="-all$1" --ambient-caps="-all$1" --no-new-privs \
    "$binary" collect --once --pid "$target" -o "$2" 2>"$work/capture.log" ||
    { cat "$work/capture.log"; fail "collect --once with capabilities '${1:-none}'"; }
}
capture ",$caps" "$work/with.json"
grep -q '"rank_waits_here"' "$work/with.json" || fail "with $caps: no Python frame of the other user's process"
grep -q 'systemd-unit-test-marker' "$work/with.json" || fail "with $caps: the private log was not read"
capture "" "$work/without.json"
if grep -q '"rank_waits_here"' "$work/without.json"; then
  fail "without capabilities the other user's stack was read: the check proves nothing"
fi
echo "  ok (with ${caps//+/}: stack and log read; with none: not)"
echo "PASS"
