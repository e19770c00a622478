#!/usr/bin/env bash
# Checks tools/completions/hangscope.bash and tools/completions/_hangscope (zsh):
#   bash: the file is sourced in a clean shell and _hangscope is called with COMP_WORDS as bash
#         would: `hangscope dia` -> diagnose, `hangscope diagnose --ag` -> --agents, a few values
#         (--log-level, --stop-mode, rules subcommands), and, for every command, every option that
#         `HANGSCOPE_BINARY COMMAND --help` prints today;
#   zsh (when installed): the file parses, and in an interactive zsh driven through zpty the
#         same words complete the same way;
#   docs/hangscope.1 renders with `man -l` without warnings (when man is installed).
# Usage: tests/deploy/completions_test.sh HANGSCOPE_BINARY
# Exit: 0 pass, 1 fail.
set -euo pipefail

binary=$(realpath "${1:?usage: $0 HANGSCOPE_BINARY}")
root=$(cd "$(dirname "$0")/../.." && pwd)
bash_file=$root/tools/completions/hangscope.bash
zsh_dir=$root/tools/completions
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# Options of `hangscope [COMMAND...] --help`: the first column of the Options section.
help_options() {
  "$binary" "$@" --help | sed -n '/^Options:/,/^$/p' | grep -E '^  -' | awk '{print $1}' |
    tr ',' '\n' | sed 's/{.*//' | sort -u
}
help_subcommands() {
  "$binary" "$@" --help | sed -n '/^Subcommands:/,/^$/p' | grep -E '^  [a-z]' | awk '{print $1}'
}

# Completes WORDS... (the last one being completed) with bash; prints the candidates.
bash_complete() {
  bash --norc --noprofile -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _hangscope 2>/dev/null
    printf "%s\n" "${COMPREPLY[@]}"' _ "$bash_file" "$@"
}

expect() { # TOOL WANTED WORDS... : the candidates of WORDS must include WANTED
  local tool=$1 wanted=$2 got
  shift 2
  got=$("${tool}_complete" "$@")
  grep -qxF -- "$wanted" <<<"$got" || fail "$tool: '$*' does not offer '$wanted' (got: $(tr '\n' ' ' <<<"$got"))"
}

commands=$(help_subcommands)
[ -n "$commands" ] || fail "no subcommands in '$binary --help'"

check_shell() { # TOOL
  local tool=$1 cmd opt got
  expect "$tool" diagnose hangscope dia
  expect "$tool" --agents hangscope diagnose --ag
  got=$("${tool}_complete" hangscope dia)
  [ "$(grep -c . <<<"$(sort -u <<<"$got")")" -eq 1 ] || fail "$tool: 'hangscope dia' offers more than diagnose: $got"
  expect "$tool" --listen hangscope collect --li
  expect "$tool" debug hangscope --log-level ""
  expect "$tool" all hangscope dump --stop-mode ""
  expect "$tool" check hangscope rules ch
  for cmd in $commands; do
    expect "$tool" "$cmd" hangscope ""
  done
  for cmd in $commands; do
    [ "$cmd" = rules ] && continue
    got=$("${tool}_complete" hangscope "$cmd" -)
    for opt in $(help_options "$cmd"); do
      grep -qxF -- "$opt" <<<"$got" || fail "$tool: 'hangscope $cmd -' does not offer $opt (from --help)"
    done
  done
  for cmd in $(help_subcommands rules); do
    expect "$tool" "$cmd" hangscope rules ""
    got=$("${tool}_complete" hangscope rules "$cmd" -)
    for opt in $(help_options rules "$cmd"); do
      grep -qxF -- "$opt" <<<"$got" || fail "$tool: 'hangscope rules $cmd -' does not offer $opt (from --help)"
    done
  done
  got=$("${tool}_complete" hangscope -)
  for opt in $(help_options); do
    grep -qxF -- "$opt" <<<"$got" || fail "$tool: 'hangscope -' does not offer $opt (from --help)"
  done
}

echo "check: bash completion (hangscope dia, diagnose --ag, values, every option of --help)"
bash -n "$bash_file" || fail "bash syntax"
check_shell bash
echo "  ok: commands $(tr '\n' ' ' <<<"$commands")"

if command -v zsh >/dev/null; then
  echo "check: zsh completion (same cases, through zpty)"
  zsh -n "$zsh_dir/_hangscope" || fail "zsh syntax"
  cat >"$work/probe.zsh" <<'EOF'
# zsh -f probe.zsh COMPLETION_DIR OUT WORDS...: completes WORDS in an interactive zsh (zpty),
# recording every candidate compadd is given that matches (compadd -O) into OUT.
zmodload zsh/zpty || exit 3
dir=$1 out=$2
shift 2
zpty z zsh -f -i
zpty -w z "PROMPT=''; RPROMPT=''; unsetopt beep"
zpty -w z "fpath=($dir \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "compadd() { local -a m; builtin compadd -O m \"\$@\"; print -rl -- \$m >> $out; builtin compadd \"\$@\" }"
zpty -w z "bindkey '^I' complete-word"
zpty -w -n z "$*"$'\t'
size=-1
for i in {1..60}; do
  sleep 0.1
  now=$(wc -c < $out 2>/dev/null || echo 0)
  (( now > 0 && now == size )) && break
  size=$now
done
zpty -d z
EOF
  zsh_complete() {
    local out=$work/zsh.out
    rm -f "$out"
    : >"$out"
    zsh -f "$work/probe.zsh" "$zsh_dir" "$out" "$@" || fail "zsh probe exited $?"
    grep -v '^$' "$out" | sort -u || true
  }
  check_shell zsh
  echo "  ok"
else
  echo "check: zsh completion (skipped: zsh not installed)"
fi

if command -v man >/dev/null; then
  echo "check: man -l docs/hangscope.1 renders without warnings"
  LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$root/docs/hangscope.1" >"$work/man.txt" 2>"$work/man.err" ||
    fail "man -l exited $?: $(cat "$work/man.err")"
  [ ! -s "$work/man.err" ] || fail "man warnings: $(cat "$work/man.err")"
  for section in NAME SYNOPSIS COMMANDS 'EXIT STATUS' ENVIRONMENT FILES EXAMPLES; do
    grep -q "^$section" "$work/man.txt" || fail "section $section missing"
  done
  for cmd in $commands; do
    grep -q "hangscope $cmd" "$work/man.txt" || fail "the man page does not cover $cmd"
  done
  for cmd in $commands; do
    [ "$cmd" = rules ] && continue
    for opt in $(help_options "$cmd"); do
      grep -q -- "$opt" "$work/man.txt" || fail "the man page does not mention $cmd $opt"
    done
  done
  echo "  ok ($(wc -l <"$work/man.txt") lines)"
else
  echo "check: man page (skipped: man not installed)"
fi
echo "PASS"
