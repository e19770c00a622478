#!/usr/bin/env bash
# Builds the Debian package and installs it on a clean Debian 12 (bookworm) root:
#   1. `cpack -G DEB` with BUILD_DIR's CPack configuration (output in a temporary directory,
#      nothing written to BUILD_DIR) gives hangscope_<version>_<arch>.deb holding exactly the
#      layout of docs/install.md (no test executable), with Depends computed by dpkg-shlibdeps
#      (naming prometheus-cpp's and civetweb's libraries, of `watch --metrics`),
#      /etc/default/hangscope-agent and /etc/default/hangscope-watch as its conffiles and the
#      maintainer scripts of cmake/debian/ (0755), and hangscope-dbgsym_<version>_<arch>.ddeb
#      with the binary's debug information;
#   2. a fresh minbase root (`debootstrap --variant=minbase bookworm ROOT MIRROR`, MIRROR being
#      the Debian mirror this machine's apt uses), with proc mounted and /dev bound;
#   3. `chroot ROOT apt-get install ./hangscope_*.deb`: apt takes the declared dependencies from
#      the mirror, and `ldd` then finds every library (an undeclared one would be missing);
#   4. in the root: `hangscope --version` prints the package's version and the Python versions;
#      `hangscope dump --pid` of a `sleep` started in the root names its thread and a libc
#      frame (clock_nanosleep / nanosleep); the man page, the bash and zsh completions, the
#      reference rules (each accepted by `hangscope rules check`) and the docs are where
#      docs/install.md says;
#   5. the units, the agent's and the watcher's: /lib/systemd/system/hangscope-{agent,watch}.service
#      and the conffiles /etc/default/hangscope-{agent,watch} are the files of
#      tools/deploy/systemd/, listed by dpkg; no unit is enabled (no link in /etc/systemd/system)
#      but deb-systemd-helper recorded the link enabling would make; nothing runs;
#      `systemd-analyze verify --root=ROOT` accepts each installed unit (its ExecStart is the
#      installed binary, man:hangscope(1) the installed page);
#   6. the unit's ExecStart, expanded as systemd would with /etc/default/hangscope-agent (edited
#      as an administrator would: HANGSCOPE_LISTEN=127.0.0.1:0, HANGSCOPE_AGENT_ARGS naming the
#      node and a sleep in the root) and a token written as docs/deploy-systemd.md says, run by
#      hand in the root (systemd is not PID 1 here): a host-side `hangscope diagnose --agents`
#      with the token gets the node's snapshot of the sleep, one with a wrong token is refused,
#      and SIGTERM stops the agent with exit 0;
#   7. the watcher's unit the same way, with /etc/default/hangscope-watch's defaults edited only
#      where a test must (metrics on port 0, --timeout) and /etc/hangscope/agents naming that
#      agent: its /metrics (loopback, no token by default) counts polls of the node deb-root,
#      reachable; it exits 0 at --timeout, and its incident directory under /var/lib/hangscope
#      holds no incident (a sleep is no rank);
#   8. `dpkg --remove`: the units and binary go, the edited conffiles and the state stay; then,
#      with the links `systemctl enable` would make, `dpkg --purge`: no file of the package is
#      left, nor the links, nor deb-systemd-helper's state; /etc/hangscope/token is kept
#      (cmake/debian/postrm).
# Cache: the pristine debootstrap root is kept as /var/cache/hangscope-test/bookworm-minbase.tar
# (HANGSCOPE_TEST_ROOT_CACHE overrides the path) and each run extracts a fresh copy of it. The
# cache only saves debootstrap's download and unpacking time; a missing cache is rebuilt (and
# deleting it is always safe). apt-get update and the dependencies are fetched on every run.
# Everything started, mounted or created is killed, unmounted or removed on every exit path.
# Each step prints its time.
# Usage: tests/deploy/deb_package_test.sh HANGSCOPE_BINARY BUILD_DIR
# Exit: 0 pass, 1 fail, 77 skip (not root; cpack, dpkg-shlibdeps, debootstrap, ... missing:
# apt-get install dpkg-dev debootstrap; the Debian mirror unreachable).
set -euo pipefail

binary=$(realpath "${1:?usage: $0 HANGSCOPE_BINARY BUILD_DIR}")
build_dir=$(realpath "${2:?usage: $0 HANGSCOPE_BINARY BUILD_DIR}")
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
cache=${HANGSCOPE_TEST_ROOT_CACHE:-/var/cache/hangscope-test/bookworm-minbase.tar}
started=$EPOCHREALTIME

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (debootstrap, mount, chroot)"
  exit 77
fi
# Mounts go into a private mount namespace of this script: the host never sees them, and they
# vanish with the namespace even if the script is killed before its cleanup runs.
if [ -z "${HANGSCOPE_DEB_TEST_NAMESPACE:-}" ] && command -v unshare >/dev/null &&
  unshare --mount --propagation private true 2>/dev/null; then
  HANGSCOPE_DEB_TEST_NAMESPACE=1 exec unshare --mount --propagation private bash "$0" "$@"
fi

export PATH=$PATH:/usr/sbin:/sbin # debootstrap, chroot: not on every root's PATH
missing=()
for tool in cpack dpkg-shlibdeps dpkg-deb file objcopy readelf debootstrap chroot mount umount \
  wget tar flock systemd-analyze curl; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "SKIP: ${missing[*]} not installed (apt-get install dpkg-dev debootstrap file binutils wget systemd curl)"
  exit 77
fi
[ -f "$build_dir/CPackConfig.cmake" ] || {
  echo "FAIL: no $build_dir/CPackConfig.cmake (re-run cmake on the build directory)"
  exit 1
}

# The Debian sources this machine's apt uses for bookworm (main, its updates and security
# suites), so the root is installed from the same mirror; deb.debian.org when it has none.
# shellcheck disable=SC2016 # $(...) are apt's format fields
mapfile -t sources < <(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
  awk '$2 ~ /^bookworm(-updates|-security)?$/' | sort -u)
mirror=""
for s in "${sources[@]}"; do
  [ "${s#* }" = bookworm ] && mirror=${s%% *}
done
if [ -z "$mirror" ]; then
  mirror=http://deb.debian.org/debian/
  sources=("$mirror bookworm" "$mirror bookworm-updates" "http://deb.debian.org/debian-security/ bookworm-security")
fi
if ! wget -q -T 20 -t 2 -O /dev/null "${mirror%/}/dists/bookworm/InRelease"; then
  echo "SKIP: the Debian mirror $mirror is unreachable"
  exit 77
fi

work=$(mktemp -d /var/tmp/hangscope-deb-test.XXXXXX)
root=$work/root
mounted=()       # mount points under $root, unmounted in reverse order
cache_partial="" # a cache tarball being written
mounts_under_root() { # deepest first
  awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}
descendants() { # every live process below this shell
  ps -e -o pid=,ppid=,stat= | awk -v top=$$ '{ parent[$1] = $2; if ($3 !~ /^Z/) live[$1] = 1 }
    END { for (p in live) { if (p == top) continue; q = p
      while (q in parent && q != top && q > 1) q = parent[q]
      if (q == top) print p } }'
}
in_our_root() { # every process whose root directory is in $root (only this test starts any)
  local pid link
  for pid in /proc/[0-9]*; do
    link=$(readlink "$pid/root" 2>/dev/null) || continue
    case "$link" in "$root" | "$root"/*) echo "${pid#/proc/}" ;; esac
  done
}
cleanup() {
  local rc=$? i m procs
  set +e
  trap '' INT TERM HUP # a second signal must not cut the cleanup short
  # What this script started (cpack, debootstrap, apt in the root, the sleep), then anything
  # still running in the root: TERM, then KILL what is left.
  mapfile -t procs < <(descendants; in_our_root)
  [ "${#procs[@]}" -gt 0 ] && kill "${procs[@]}" 2>/dev/null
  for i in 1 2 3; do
    mapfile -t procs < <(descendants; in_our_root)
    [ "${#procs[@]}" -eq 0 ] && break
    sleep 0.5
    kill -9 "${procs[@]}" 2>/dev/null
  done
  wait 2>/dev/null
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    m=${mounted[i]}
    umount "$m" 2>/dev/null || umount -l "$m" || echo "cleanup: cannot unmount $m"
  done
  # Left by an interrupted debootstrap (its own proc and sys mounts), or by a failed umount.
  for m in $(mounts_under_root); do umount -l "$m" || echo "cleanup: cannot unmount $m"; done
  # Never delete through a mount (a bound /dev would be the host's).
  if [ -n "$(mounts_under_root)" ]; then
    echo "FAIL: still mounted, $work left in place: $(mounts_under_root | xargs)"
    rc=1
  else
    rm -rf --one-file-system "$work"
  fi
  [ -n "$cache_partial" ] && rm -f "$cache_partial"
  printf 'took %.1f s\n' "$(seconds_since "$started")"
  exit "$rc"
}
seconds_since() { awk -v a="$EPOCHREALTIME" -v b="$1" 'BEGIN { printf "%.3f", a - b }'; }
trap cleanup EXIT
trap 'echo "interrupted"; exit 1' INT TERM HUP
fail() {
  echo "FAIL: $*"
  exit 1
}
step_start=""
step() { # NAME: ends the previous step (printing its time) and starts NAME
  step_end
  step_name=$1
  step_start=$EPOCHREALTIME
  echo "step: $step_name"
}
step_end() {
  [ -n "$step_start" ] && printf '  time: %.1f s (%s)\n' "$(seconds_since "$step_start")" "$step_name"
  step_start=""
}
run_logged() { # LOG COMMAND...: runs COMMAND, output to LOG; prints LOG's tail on failure
  local log=$1 rc=0
  shift
  # In the background: `wait` returns at once on INT/TERM, and the trap then stops COMMAND (a
  # foreground COMMAND that handles INT itself, as debootstrap does, would run on).
  "$@" >"$log" 2>&1 &
  wait "$!" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 30 "$log"
    fail "$* exited $rc"
  fi
}
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive "$@"; }

step "cpack -G DEB ($build_dir)"
run_logged "$work/cpack.log" cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$work/pkg"
debs=("$work"/pkg/hangscope_*.deb)
if [ "${#debs[@]}" -ne 1 ] || [ ! -f "${debs[0]}" ]; then
  fail "expected one hangscope_*.deb, got: $(ls "$work/pkg")"
fi
deb=${debs[0]}
ddebs=("$work"/pkg/hangscope-dbgsym_*.ddeb)
[ -f "${ddebs[0]}" ] || fail "no hangscope-dbgsym_*.ddeb"
version=$(dpkg-deb -f "$deb" Version)
depends=$(dpkg-deb -f "$deb" Depends)
echo "  $(basename "$deb") ($(du -h "$deb" | cut -f1)), $(basename "${ddebs[0]}") ($(du -h "${ddebs[0]}" | cut -f1))"
echo "  Version: $version"
echo "  Depends: $depends"
[ "$(dpkg-deb -f "$deb" Package)" = hangscope ] || fail "Package is not hangscope"
grep -q "^hangscope $version " <<<"$("$binary" --version)" || fail "the package's version $version is not $binary's: $("$binary" --version | head -1)"
grep -q 'libc6' <<<"$depends" || fail "Depends does not name libc6 (dpkg-shlibdeps did not run?)"
for library in libprometheus-cpp-pull libcivetweb1; do
  grep -q "$library" <<<"$depends" || fail "Depends does not name $library (watch --metrics)"
done
[ -n "$(dpkg-deb -f "$deb" Maintainer)" ] || fail "no Maintainer"
[ -n "$(dpkg-deb -f "$deb" Section)" ] || fail "no Section"
[ "$(dpkg-deb -f "$deb" Description | wc -l)" -ge 2 ] || fail "Description has no extended part"

step "package contents = the documented layout (no test executable)"
{
  echo ./usr/bin/hangscope
  echo ./usr/libexec/hangscope/hangscope
  for f in "$source_dir"/src/rules/builtin/*.json; do echo "./usr/share/hangscope/rules/${f##*/}"; done
  echo ./usr/share/man/man1/hangscope.1.gz
  echo ./usr/share/bash-completion/completions/hangscope
  echo ./usr/share/zsh/vendor-completions/_hangscope
  for f in "$source_dir"/README.md "$source_dir"/LICENSE "$source_dir"/docs/*.md; do
    echo "./usr/share/doc/hangscope/${f##*/}"
  done
  echo ./usr/share/doc/hangscope/copyright
  echo ./lib/systemd/system/hangscope-agent.service
  echo ./lib/systemd/system/hangscope-watch.service
  echo ./etc/default/hangscope-agent
  echo ./etc/default/hangscope-watch
} | sort >"$work/expected.txt"
dpkg-deb --fsys-tarfile "$deb" | tar -t | grep -v '/$' | sort >"$work/contents.txt"
diff -u "$work/expected.txt" "$work/contents.txt" || fail "the package's files differ from the layout (- expected, + packaged)"
[ "$(dpkg-deb -I "$deb" conffiles)" = "$(printf '%s\n' /etc/default/hangscope-agent /etc/default/hangscope-watch)" ] ||
  fail "conffiles are not /etc/default/hangscope-{agent,watch}: $(dpkg-deb -I "$deb" conffiles 2>&1)"
control=$(dpkg-deb --ctrl-tarfile "$deb" | tar -tv)
for script in postinst prerm postrm; do
  grep -Eq "^-rwxr-xr-x .* \./$script\$" <<<"$control" || fail "no 0755 $script in the control archive: $control"
done
echo "  ok: $(wc -l <"$work/contents.txt") files, conffiles, postinst/prerm/postrm 0755"

step "pristine bookworm minbase root (mirror $mirror)"
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9 # one creator at a time; readers wait for a complete tarball
t=$EPOCHREALTIME
if [ -s "$cache" ]; then
  mkdir "$root"
  run_logged "$work/tar.log" tar --numeric-owner -xpf "$cache" -C "$root"
  printf '  extracted the cache %s (%s): %.1f s\n' "$cache" "$(du -h "$cache" | cut -f1)" "$(seconds_since "$t")"
else
  echo "  no cache: debootstrap --variant=minbase bookworm ROOT $mirror"
  run_logged "$work/debootstrap.log" debootstrap --variant=minbase bookworm "$root" "$mirror"
  printf '  debootstrap: %.1f s\n' "$(seconds_since "$t")"
  t=$EPOCHREALTIME
  cache_partial=$cache.tmp
  run_logged "$work/tar.log" tar --numeric-owner -cpf "$cache_partial" -C "$root" .
  mv "$cache_partial" "$cache"
  cache_partial=""
  printf '  cached as %s (%s): %.1f s\n' "$cache" "$(du -h "$cache" | cut -f1)" "$(seconds_since "$t")"
fi
exec 9>&-
[ -x "$root/usr/bin/apt-get" ] || fail "the root has no apt-get"
grep -q '^VERSION_ID="12"' "$root/etc/os-release" || fail "the root is not Debian 12: $(cat "$root/etc/os-release")"

step "mount proc and /dev into the root, apt sources"
mount -t proc proc "$root/proc"
mounted+=("$root/proc")
mount --bind /dev "$root/dev"
mounted+=("$root/dev")
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
: >"$root/etc/apt/sources.list"
for s in "${sources[@]}"; do echo "deb ${s%% *} ${s#* } main" >>"$root/etc/apt/sources.list"; done
sed 's/^/  /' "$root/etc/apt/sources.list"
# No service of a package may start in the root.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

step "chroot ROOT apt-get update"
run_logged "$work/apt-update.log" in_root apt-get update

step "chroot ROOT apt-get install ./$(basename "$deb")"
cp "$deb" "$root/tmp/"
chmod 644 "$root/tmp/$(basename "$deb")"
run_logged "$work/apt-install.log" in_root sh -c "cd /tmp && apt-get install -y --no-install-recommends ./$(basename "$deb")"
new=$(sed -n '/^The following NEW packages will be installed:/,/^[^ ]/{/^ /p}' "$work/apt-install.log" | xargs)
echo "  installed: $new"
in_root dpkg -s hangscope 2>/dev/null | grep -q '^Status: install ok installed' || fail "hangscope is not installed"
# Both programs: the front (dump) and the whole program it execs for every other command.
for program in /usr/bin/hangscope /usr/libexec/hangscope/hangscope; do
  ldd_out=$(in_root ldd "$program") || fail "ldd $program: $ldd_out"
  if grep -q 'not found' <<<"$ldd_out"; then
    fail "libraries the package does not declare ($program): $(grep 'not found' <<<"$ldd_out" | xargs)"
  fi
  echo "  ok: ldd finds all $(grep -c '=>' <<<"$ldd_out") libraries of $program"
done

step "chroot ROOT hangscope --version"
out=$(in_root hangscope --version) || fail "hangscope --version exited $?: $out"
mapfile -t lines <<<"$out"
printf '  %s\n' "${lines[@]}"
grep -q "^hangscope $version " <<<"$out" || fail "--version does not print $version"
grep -Eq 'Python.*3\.1[0-9]' <<<"$out" || fail "--version does not name the Python versions"
[ "$out" = "$("$binary" --version)" ] || fail "the installed binary is not $binary"

step "chroot ROOT hangscope dump --pid (a sleep started in the root)"
chroot "$root" /bin/sleep 60 &
sleeper=$!
sleeping() { # the chroot has exec'd the root's sleep, and it sleeps
  case "$(readlink "/proc/$sleeper/exe" 2>/dev/null)" in "$root"/*/sleep) ;; *) return 1 ;; esac
  [ "$(awk '{print $3}' "/proc/$sleeper/stat" 2>/dev/null)" = S ]
}
for _ in $(seq 50); do sleeping && break; sleep 0.1; done
sleeping || fail "the sleep in the root did not start"
rc=0
in_root hangscope dump --pid "$sleeper" >"$work/dump.txt" 2>"$work/dump.err" || rc=$?
sed 's/^/  /' "$work/dump.txt"
[ "$rc" -eq 0 ] || fail "hangscope dump exited $rc: $(cat "$work/dump.err")"
grep -q "^Thread $sleeper \"sleep\"" "$work/dump.txt" || fail "the dump does not name thread $sleeper \"sleep\""
grep -Eq '(clock_nanosleep|nanosleep).*libc\.so\.6' "$work/dump.txt" || fail "no libc nanosleep frame"
grep -Eq '\((/usr)?/bin/sleep' "$work/dump.txt" || fail "no frame in the root's /usr/bin/sleep"
{ kill -9 "$sleeper" && wait "$sleeper"; } 2>/dev/null || true

step "installed files: man page, completions, rules, docs"
zcat "$root/usr/share/man/man1/hangscope.1.gz" | grep -q '^\.TH HANGSCOPE 1' || fail "man page"
bash_completion=$root/usr/share/bash-completion/completions/hangscope
[ -f "$bash_completion" ] || fail "no bash completion"
in_root bash --norc --noprofile -c 'source /usr/share/bash-completion/completions/hangscope && complete -p hangscope' \
  | grep -q '_hangscope' || fail "the installed bash completion does not register for hangscope"
head -1 "$root/usr/share/zsh/vendor-completions/_hangscope" | grep -q '^#compdef hangscope' || fail "zsh completion"
rules=0
for f in "$root"/usr/share/hangscope/rules/*.json; do
  in_root hangscope rules check "/usr/share/hangscope/rules/${f##*/}" >/dev/null 2>"$work/rules.err" ||
    fail "rules check ${f##*/}: $(cat "$work/rules.err")"
  rules=$((rules + 1))
done
[ "$rules" -gt 0 ] || fail "no rules in /usr/share/hangscope/rules"
cmp -s "$root/usr/share/doc/hangscope/LICENSE" "$source_dir/LICENSE" || fail "LICENSE"
# Debian policy 12.5: every package ships /usr/share/doc/PACKAGE/copyright (machine-readable).
head -1 "$root/usr/share/doc/hangscope/copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
  fail "no machine-readable /usr/share/doc/hangscope/copyright"
grep -q '^License: Expat' "$root/usr/share/doc/hangscope/copyright" || fail "copyright names no licence"
[ -s "$root/usr/share/doc/hangscope/install.md" ] || fail "docs/install.md not installed"
build_ids=()
dbgsym_files=$(dpkg-deb -c "${ddebs[0]}") # listed once: grep -q on a pipe would cut tar short
for program in /usr/bin/hangscope /usr/libexec/hangscope/hangscope; do
  build_id=$(readelf -n "$root$program" | sed -n 's/.*Build ID: *//p')
  grep -q "usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug" <<<"$dbgsym_files" ||
    fail "the dbgsym package has no debug file for $program (build id $build_id)"
  build_ids+=("$build_id")
done
echo "  ok: man page, bash + zsh completions, $rules rules accepted by rules check, docs, dbgsym for ${build_ids[*]}"

unit=/lib/systemd/system/hangscope-agent.service
defaults=/etc/default/hangscope-agent
wants_link=/etc/systemd/system/multi-user.target.wants/hangscope-agent.service
dsh_state=/var/lib/systemd/deb-systemd-helper-enabled/hangscope-agent.service.dsh-also
watch_unit=/lib/systemd/system/hangscope-watch.service
watch_defaults=/etc/default/hangscope-watch
watch_wants_link=/etc/systemd/system/multi-user.target.wants/hangscope-watch.service
watch_dsh_state=/var/lib/systemd/deb-systemd-helper-enabled/hangscope-watch.service.dsh-also
agents_in_root() { # pids of the processes running the root's hangscope (one find, no fork per pid)
  find /proc -mindepth 2 -maxdepth 2 -name exe \( -lname "$root/usr/bin/hangscope*" -o \
    -lname "$root/usr/libexec/hangscope/hangscope*" \) 2>/dev/null |
    cut -d/ -f3 || true
}
step "the units (agent, watcher): installed, conffiles, not enabled, not running"
in_root dpkg -L hangscope >"$work/dpkg-L.txt"
# shellcheck disable=SC2016 # ${...} are dpkg-query's fields
conffiles=$(in_root dpkg-query -W --showformat='${Conffiles}' hangscope)
for name in hangscope-agent hangscope-watch; do
  u=/lib/systemd/system/$name.service d=/etc/default/$name
  link=/etc/systemd/system/multi-user.target.wants/$name.service
  cmp -s "$root$u" "$source_dir/tools/deploy/systemd/$name.service" ||
    fail "$u is not tools/deploy/systemd/$name.service"
  cmp -s "$root$d" "$source_dir/tools/deploy/systemd/$name.default" ||
    fail "$d is not tools/deploy/systemd/$name.default"
  grep -qx "$u" "$work/dpkg-L.txt" || fail "dpkg -L does not list $u"
  grep -qx "$d" "$work/dpkg-L.txt" || fail "dpkg -L does not list $d"
  grep -Eq "^ $d [0-9a-f]{32}\$" <<<"$conffiles" || fail "dpkg's conffiles of hangscope lack $d: '$conffiles'"
  if [ -e "$root$link" ] || [ -L "$root$link" ]; then fail "the unit is enabled: $link"; fi
  enabled=$(find "$root/etc/systemd" -name "$name*" 2>/dev/null || true)
  [ -z "$enabled" ] || fail "$name under /etc/systemd: $enabled"
  # update-state in the postinst: the link enabling would make is recorded, so purge removes it.
  state=/var/lib/systemd/deb-systemd-helper-enabled/$name.service.dsh-also
  grep -qx "$link" "$root$state" 2>/dev/null || fail "no $link in $state"
done
[ -z "$(agents_in_root)" ] || fail "hangscope runs in the root after the install: $(agents_in_root | xargs)"
[ ! -e "$root/etc/hangscope" ] || fail "the package created /etc/hangscope"
[ ! -e "$root/var/lib/hangscope" ] || fail "the package created /var/lib/hangscope (systemd's StateDirectory)"
echo "  ok: $unit, $watch_unit and $defaults, $watch_defaults (conffiles) from tools/deploy/systemd, no link in /etc/systemd, state recorded, nothing runs"

step "systemd-analyze verify --root=ROOT $unit $watch_unit"
# The minbase root has no systemd, so none of the targets the units depend on (sysinit.target,
# network-online.target, ...): they are taken from this machine's systemd, copied into the
# root (SYSTEMD_UNIT_PATH is read under --root), after the root's own unit directory. Installing
# systemd in the root instead adds 12 s (12 packages, 7.6 MB).
units=/run/hangscope-test-units
mkdir -p "$root$units"
cp -a /lib/systemd/system/. "$root$units/"
rm -rf "$root$units"/hangscope-agent* "$root$units"/hangscope-watch*
man_option=(--man=no)
command -v man >/dev/null && man_option=(--man=yes) # the installed page, through MANPATH
for u in "$unit" "$watch_unit"; do
  if ! MANPATH=$root/usr/share/man SYSTEMD_LOG_LEVEL=notice SYSTEMD_UNIT_PATH=/lib/systemd/system:$units \
    systemd-analyze verify --root="$root" "${man_option[@]}" "$u" >"$work/verify.log" 2>&1; then
    cat "$work/verify.log"
    fail "systemd-analyze verify --root=ROOT $u"
  fi
  if [ -s "$work/verify.log" ]; then
    cat "$work/verify.log"
    fail "systemd-analyze verify $u printed warnings"
  fi
done
rm -rf "${root:?}$units"
echo "  ok (${man_option[*]})"

step "the unit's ExecStart by hand in the root, with $defaults and a token"
# As an administrator would: the token as docs/deploy-systemd.md makes it, the settings edited.
in_root sh -c 'install -d -m 0700 /etc/hangscope && (umask 077; head -c 32 /dev/urandom | base64 > /etc/hangscope/token)'
chroot "$root" /bin/sleep 60 &
sleeper=$!
for _ in $(seq 50); do sleeping && break; sleep 0.1; done
sleeping || fail "the sleep in the root did not start"
sed -i -e 's/^HANGSCOPE_LISTEN=.*/HANGSCOPE_LISTEN=127.0.0.1:0/' \
  -e "s/^HANGSCOPE_AGENT_ARGS=.*/HANGSCOPE_AGENT_ARGS=--node-name deb-root --pid $sleeper/" "$root$defaults"
# What systemd runs, as a shell script: the Environment= lines, then the EnvironmentFile read
# as systemd reads one (not sourced: an unquoted value with spaces, as the file's own examples
# are written, is one value for systemd and a command for sh), then ExecStart with ${X} as one
# argument ("${X}") and $X split at whitespace (unquoted, globbing off).
assignments() { # KEY=VALUE lines on stdin -> sh assignments; # and ; lines are comments
  local line key value q="'"
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in '' | '#'* | ';'*) continue ;; esac
    # Environment="KEY=VALUE with spaces": systemd's quotes around a whole assignment.
    if [[ "$line" =~ ^\"(.*)\"$ ]]; then line=${BASH_REMATCH[1]}; fi
    [[ "$line" =~ ^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)=[[:space:]]*(.*[^[:space:]])?[[:space:]]*$ ]] ||
      fail "not KEY=VALUE: $line" >&2
    key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
    if [[ "$value" =~ ^\"(.*)\"$ || "$value" =~ ^\'(.*)\'$ ]]; then value=${BASH_REMATCH[1]}; fi
    printf "export %s='%s'\n" "$key" "${value//$q/$q\\$q$q}"
  done
}
exec_start() { # UNIT DEFAULTS: the shell script that runs UNIT's ExecStart as systemd would
  local environment_file
  environment_file=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$root$1")
  [ "$environment_file" = "$2" ] || fail "$1's EnvironmentFile is '$environment_file', not $2"
  sed -n 's/^Environment=//p' "$root$1" | assignments
  assignments <"$root$2"
  echo 'set -f'
  sed -n 's/^ExecStart=/exec /p' "$root$1" | sed -E 's/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/"${\1}"/g'
}
exec_start "$unit" "$defaults" >"$work/exec-start.sh"
sed 's/^/  | /' "$work/exec-start.sh"
# chroot itself in the background (not through in_root, a function run in a subshell), so
# $! is the agent's pid: chroot, env and sh exec each other. Its output files exist before it
# starts (the child opens them only after the fork).
: >"$work/agent.out"
: >"$work/agent.err"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
  sh -c "$(cat "$work/exec-start.sh")" >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$work/agent.out")
  [ -n "$port" ] && break
  kill -0 "$agent" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || fail "the agent did not listen: $(cat "$work/agent.out" "$work/agent.err")"
# The unit's /usr/bin/hangscope execs the whole program in place: same pid.
[ "$(readlink "/proc/$agent/exe")" = "$root/usr/libexec/hangscope/hangscope" ] ||
  fail "the agent is not the root's hangscope: $(readlink "/proc/$agent/exe")"
echo "  $(head -1 "$work/agent.err")"
rc=0
"$binary" diagnose --agents "127.0.0.1:$port" --token-file "$root/etc/hangscope/token" --samples 1 \
  --quiet -o "$work/diagnose" >"$work/diagnose.out" 2>&1 || rc=$?
# Exit 1: the node's one process, a sleep, is no rank; the node itself answered.
[ "$rc" -le 1 ] || fail "diagnose exited $rc: $(cat "$work/diagnose.out")"
grep -q '"status": "ok"' "$work/diagnose/nodes.json" || fail "the agent did not answer: $(cat "$work/diagnose/nodes.json")"
snapshot=$work/diagnose/snapshots/deb-root.json
[ -f "$snapshot" ] || fail "no snapshot of node deb-root (HANGSCOPE_AGENT_ARGS not applied?): $(ls "$work/diagnose/snapshots")"
grep -q "\"pid\": $sleeper," "$snapshot" || fail "the snapshot has no process $sleeper"
grep -q '"clock_nanosleep"' "$snapshot" || fail "the snapshot has no clock_nanosleep frame"
echo wrong-token >"$work/wrong-token"
"$binary" diagnose --agents "127.0.0.1:$port" --token-file "$work/wrong-token" --samples 1 --quiet \
  -o "$work/diagnose-wrong" >/dev/null 2>&1 || true
grep -q '"status": "refused"' "$work/diagnose-wrong/nodes.json" || fail "a wrong token was not refused"
echo "  ok: port $port, the sleep's stack through the token, a wrong token refused"

step "the watcher's ExecStart by hand in the root, with $watch_defaults, the token and that agent"
# As an administrator would (docs/watch.md): the agents' hostfile beside the token; the settings
# kept but for what a test must change: metrics on a free port (9464 may be taken here) and
# --timeout, so that the watcher ends by itself. /var/lib/hangscope is what systemd makes for
# StateDirectory=hangscope before it starts the unit.
echo "127.0.0.1:$port" >"$root/etc/hangscope/agents"
chmod 600 "$root/etc/hangscope/agents"
in_root install -d -m 0700 /var/lib/hangscope
sed -i 's/ --metrics 127\.0\.0\.1:9464$/ --metrics 127.0.0.1:0 --timeout 8s/' "$root$watch_defaults"
grep -q -- ' -o /var/lib/hangscope/watch --metrics 127.0.0.1:0 --timeout 8s$' "$root$watch_defaults" ||
  fail "$watch_defaults: the default HANGSCOPE_WATCH_ARGS not found to edit"
exec_start "$watch_unit" "$watch_defaults" >"$work/watch-exec-start.sh"
sed 's/^/  | /' "$work/watch-exec-start.sh"
: >"$work/watch.out"
: >"$work/watch.err"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
  sh -c "$(cat "$work/watch-exec-start.sh")" >"$work/watch.out" 2>"$work/watch.err" &
watcher=$!
metrics_port=""
for _ in $(seq 100); do
  metrics_port=$(sed -n 's#.*metrics on http://127\.0\.0\.1:\([0-9][0-9]*\)/metrics.*#\1#p' "$work/watch.err")
  [ -n "$metrics_port" ] && break
  kill -0 "$watcher" 2>/dev/null || break
  sleep 0.1
done
[ -n "$metrics_port" ] || fail "the watcher did not serve metrics: $(cat "$work/watch.out" "$work/watch.err")"
# On loopback without --metrics-token-file: no authentication (docs/watch.md, "Metrics").
scrape() { curl -s -m 5 "http://127.0.0.1:$metrics_port/metrics"; }
value() { awk -v name="$1" '$1 == name { print $2 }'; }
polls=0
for _ in $(seq 60); do
  polls=$(scrape | value hangscope_watch_polls_total)
  [ "${polls:-0}" != 0 ] && break
  sleep 0.1
done
[ "${polls:-0}" != 0 ] || fail "no successful poll in the watcher's metrics: $(scrape)"
scrape >"$work/metrics.txt"
[ "$(value hangscope_watch_nodes_unreachable <"$work/metrics.txt")" = 0 ] ||
  fail "the agent is unreachable for the watcher: $(grep unreachable "$work/metrics.txt")"
grep -q '^hangscope_watch_node_unreachable{node=".*"} 0$' "$work/metrics.txt" ||
  fail "no node in the watcher's metrics: $(grep unreachable "$work/metrics.txt")"
rc=0
wait "$watcher" || rc=$?
[ "$rc" -eq 0 ] || fail "the watcher exited $rc at --timeout: $(tail -5 "$work/watch.err")"
[ ! -s "$work/watch.out" ] || fail "the watcher printed an incident: $(cat "$work/watch.out")"
# -o is made when needed: without an incident it may not exist, and holds nothing if it does.
if [ -d "$root/var/lib/hangscope/watch" ] && [ -n "$(ls -A "$root/var/lib/hangscope/watch")" ]; then
  fail "/var/lib/hangscope/watch is not empty: $(ls -A "$root/var/lib/hangscope/watch")"
fi
echo "  ok: metrics on port $metrics_port ($polls polls, the node reachable), --timeout -> exit 0, no incident"
kill -TERM "$agent"
rc=0
wait "$agent" || rc=$?
[ "$rc" -eq 0 ] || fail "the agent exited $rc on SIGTERM: $(tail -3 "$work/agent.err")"
{ kill -9 "$sleeper" && wait "$sleeper"; } 2>/dev/null || true
[ -z "$(agents_in_root)" ] || fail "hangscope still runs: $(agents_in_root | xargs)"
echo "  ok: the agent's SIGTERM -> exit 0"

step "dpkg --remove hangscope, then dpkg --purge hangscope"
run_logged "$work/dpkg-remove.log" in_root dpkg --remove hangscope
# shellcheck disable=SC2016 # ${Status} is dpkg-query's field
status=$(in_root dpkg-query -W --showformat='${Status}' hangscope)
[ "$status" = "deinstall ok config-files" ] || fail "after dpkg --remove: $status"
for f in /usr/bin/hangscope /usr/libexec/hangscope/hangscope "$unit" "$watch_unit"; do [ ! -e "$root$f" ] || fail "$f left after dpkg --remove"; done
grep -q '^HANGSCOPE_LISTEN=127.0.0.1:0$' "$root$defaults" || fail "the edited $defaults did not survive dpkg --remove"
grep -q -- '--timeout 8s$' "$root$watch_defaults" || fail "the edited $watch_defaults did not survive dpkg --remove"
for f in "$dsh_state" "$watch_dsh_state"; do [ -f "$root$f" ] || fail "$f removed before the purge"; done
# What `systemctl enable hangscope-agent hangscope-watch` would have made (there is no systemctl
# in the root).
mkdir -p "$(dirname "$root$wants_link")"
ln -s "$unit" "$root$wants_link"
ln -s "$watch_unit" "$root$watch_wants_link"
run_logged "$work/dpkg-purge.log" in_root dpkg --purge hangscope
if in_root dpkg-query -W hangscope >/dev/null 2>&1; then fail "dpkg still knows hangscope after the purge"; fi
left=()
while read -r f; do
  # A directory left is one other packages share (/usr/bin, /etc/default, ...).
  if { [ -e "$root$f" ] || [ -L "$root$f" ]; } && [ ! -d "$root$f" ]; then left+=("$f"); fi
done <"$work/dpkg-L.txt"
for f in /usr/share/hangscope /usr/share/doc/hangscope "$wants_link" "$watch_wants_link"; do
  if [ -e "$root$f" ] || [ -L "$root$f" ]; then left+=("$f"); fi
done
[ "${#left[@]}" -eq 0 ] || fail "left after the purge: ${left[*]}"
# (The root's other packages keep theirs: apt-daily.timer, e2scrub_all.timer, ...)
state=$({ find "$root"/var/lib/systemd -path '*/deb-systemd-*' -name 'hangscope-*' 2>/dev/null || true; } |
  sed "s#^$root##")
[ -z "$state" ] || fail "deb-systemd-helper state left after the purge: $state"
[ -s "$root/etc/hangscope/token" ] || fail "the purge removed the administrator's /etc/hangscope/token"
[ -d "$root/var/lib/hangscope" ] || fail "the purge removed the watcher's state directory /var/lib/hangscope"
echo "  ok: remove kept the edited conffiles and the state; purge left nothing of $(wc -l <"$work/dpkg-L.txt") paths, the links or the state; the token and /var/lib/hangscope kept"
step_end
echo "PASS"
