#!/usr/bin/env bash
# Checks tools/deploy/systemd/hangscope-agent.service and hangscope-watch.service:
#   1. `systemd-analyze verify` accepts each (ExecStart pointed at the built binary, the man page
#      of its Documentation= found through a temporary MANPATH);
#   2. their hardening exposure (`systemd-analyze security --offline`) stays at or below 4.0
#      for the agent (ptrace, every process's /proc) and 2.0 for the watcher (network only);
#   3. the settings each depends on are there (agent: no PrivateTmp, capabilities, filter;
#      watcher: no capability, its state directory, the defaults of
#      /etc/default/hangscope-watch writing there);
#   4. (root only) the agent's capability set, applied with setpriv, is enough to capture a
#      Python process of another user and read its private log, and an empty set is not; the
#      watcher's empty set reads root's 0600 token (as its owner), not another owner's.
# Usage: tests/deploy/systemd_unit_test.sh HANGSCOPE_BINARY
# Exit: 0 pass, 1 fail, 77 skip (systemd-analyze absent).
set -euo pipefail

binary=$(realpath "${1:?usage: $0 HANGSCOPE_BINARY}")
root=$(cd "$(dirname "$0")/../.." && pwd)
unit=$root/tools/deploy/systemd/hangscope-agent.service
defaults=$root/tools/deploy/systemd/hangscope-agent.default
watch_unit=$root/tools/deploy/systemd/hangscope-watch.service
watch_defaults=$root/tools/deploy/systemd/hangscope-watch.default

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

mkdir -p "$work/unit" "$work/man/man1"
man_option=(--man=no)
if [ -f "$root/docs/hangscope.1" ] && command -v man >/dev/null; then
  cp "$root/docs/hangscope.1" "$work/man/man1/"
  man_option=(--man=yes)
fi
for name in hangscope-agent hangscope-watch; do
  echo "check: systemd-analyze verify $name.service (ExecStart -> $binary)"
  sed "s#^ExecStart=/usr/bin/hangscope #ExecStart=$binary #" "$root/tools/deploy/systemd/$name.service" \
    >"$work/unit/$name.service"
  grep -q "^ExecStart=$binary " "$work/unit/$name.service" || fail "$name: ExecStart is not /usr/bin/hangscope ..."
  if ! (cd "$work/unit" && MANPATH="$work/man" SYSTEMD_LOG_LEVEL=notice \
    systemd-analyze verify "${man_option[@]}" "$name.service") >"$work/verify.log" 2>&1; then
    cat "$work/verify.log"
    fail "systemd-analyze verify $name.service"
  fi
  if [ -s "$work/verify.log" ]; then
    cat "$work/verify.log"
    fail "systemd-analyze verify $name.service printed warnings"
  fi
  echo "  ok (man page check: ${man_option[*]})"
done

for limit in hangscope-agent:4.0 hangscope-watch:2.0; do
  name=${limit%:*} limit=${limit#*:}
  echo "check: hardening exposure of $name.service (systemd-analyze security --offline) <= $limit"
  if systemd-analyze security --help 2>&1 | grep -q -- '--offline'; then
    exposure=$(systemd-analyze security --offline=yes --no-pager "$work/unit/$name.service" 2>&1 |
      sed -n "s/.*Overall exposure level for $name.service: \([0-9.]*\).*/\1/p")
    [ -n "$exposure" ] || fail "$name: no exposure level printed"
    awk -v e="$exposure" -v l="$limit" 'BEGIN { exit !(e <= l) }' || fail "$name: exposure $exposure > $limit"
    echo "  ok ($exposure)"
  else
    echo "  skipped: this systemd-analyze has no --offline"
  fi
done

echo "check: settings the agent depends on"
require() { grep -Eq "^$1\$" "${2:-$unit}" || fail "missing in ${2:-$unit}: $1"; }
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

echo "check: settings the watcher depends on"
require 'ExecStart=/usr/bin/hangscope --log-level \$\{HANGSCOPE_LOG_LEVEL\} watch \$HANGSCOPE_WATCH_ARGS' "$watch_unit"
require 'EnvironmentFile=-/etc/default/hangscope-watch' "$watch_unit"
require 'StateDirectory=hangscope' "$watch_unit"
require 'CapabilityBoundingSet=' "$watch_unit"
require 'AmbientCapabilities=' "$watch_unit"
require 'NoNewPrivileges=yes' "$watch_unit"
require 'ProtectSystem=strict' "$watch_unit"
require 'Restart=on-failure' "$watch_unit"
require 'RestartPreventExitStatus=2' "$watch_unit"
require 'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK' "$watch_unit"
require 'SystemCallFilter=@system-service' "$watch_unit"
require 'MemoryMax=[0-9]+[KMG]' "$watch_unit"
if grep -Eq '^(User|DynamicUser)=' "$watch_unit"; then
  fail "the watcher runs as root without capabilities: it reads root's 0600 token as its owner"
fi
# The defaults, in the unit and in the settings file alike: the agents and token of
# /etc/hangscope, incidents in the state directory (the only place the unit may write), metrics
# on loopback.
defaults_args='--hostfile /etc/hangscope/agents --token-file /etc/hangscope/token -o /var/lib/hangscope/watch --metrics 127.0.0.1:9464'
grep -qxF "Environment=\"HANGSCOPE_WATCH_ARGS=$defaults_args\"" "$watch_unit" ||
  fail "the watcher's unit does not default HANGSCOPE_WATCH_ARGS to: $defaults_args"
grep -qxF "HANGSCOPE_WATCH_ARGS=$defaults_args" "$watch_defaults" ||
  fail "hangscope-watch.default does not set HANGSCOPE_WATCH_ARGS=$defaults_args"
state=$(sed -n 's/^StateDirectory=//p' "$watch_unit")
out=$(sed -n 's/^HANGSCOPE_WATCH_ARGS=.* -o \([^ ]*\).*/\1/p' "$watch_defaults")
case "$out" in "/var/lib/$state"/*) ;; *) fail "-o $out is not under /var/lib/$state" ;; esac
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

echo "check: the watcher's empty capability set still reads root's 0600 token in a 0700 directory"
[ -z "$(sed -n 's/^CapabilityBoundingSet=//p' "$watch_unit")" ] || fail "the watcher has capabilities"
mkdir -m 700 "$work/etc-hangscope"
(umask 077 && echo watcher-test-token >"$work/etc-hangscope/token")
got=$(setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all --no-new-privs \
  cat "$work/etc-hangscope/token") || fail "uid 0 without capabilities cannot read its own 0600 file"
[ "$got" = watcher-test-token ] || fail "read '$got'"
chown nobody "$work/etc-hangscope/token"
if setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all --no-new-privs \
  cat "$work/etc-hangscope/token" >/dev/null 2>&1; then
  fail "uid 0 without capabilities read another user's 0600 file: the check proves nothing"
fi
echo "  ok (and another owner's 0600 file is not read)"
echo "PASS"
