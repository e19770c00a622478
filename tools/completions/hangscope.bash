# bash completion for hangscope(1)
# Install: cp tools/completions/hangscope.bash /usr/share/bash-completion/completions/hangscope
# (or `source` it from ~/.bashrc). Options as `hangscope COMMAND --help` prints them.
# shellcheck shell=bash disable=SC2207 # COMPREPLY=($(compgen ...)) is the completion idiom
# Self-contained: does not need the bash-completion package's helpers.

_hangscope_pids() {
  local pids
  pids=$(ps -e -o pid= 2>/dev/null) || pids=$(cd /proc && printf '%s\n' [0-9]*)
  COMPREPLY+=($(compgen -W "$pids" -- "$1"))
}

_hangscope_files() { # PREFIX [dirs]
  local IFS=$'\n'
  if [ "${2:-}" = dirs ]; then
    COMPREPLY+=($(compgen -d -- "$1"))
  else
    COMPREPLY+=($(compgen -f -- "$1"))
  fi
  # complete directory names without a trailing space so one can go on into them
  compopt -o filenames 2>/dev/null
}

_hangscope() {
  local cur prev words cword
  COMPREPLY=()
  words=("${COMP_WORDS[@]}")
  cword=$COMP_CWORD
  cur=${words[cword]}
  prev=""
  [ "$cword" -gt 0 ] && prev=${words[cword - 1]}

  local global_opts="-h --help --version -v --verbose --log-level"
  local commands="dump collect diagnose report rules watch"

  # The command (and, for rules, its subcommand) is the first word that is not an option or
  # the value of --log-level.
  local command="" sub="" i w
  for ((i = 1; i < cword; i++)); do
    w=${words[i]}
    case "$w" in
      --log-level) ((i++)) ;;
      -*) ;;
      *)
        if [ -z "$command" ]; then
          command=$w
        elif [ "$command" = rules ] && [ -z "$sub" ]; then
          sub=$w
        fi
        ;;
    esac
  done

  # Values of options.
  case "$prev" in
    --log-level)
      COMPREPLY=($(compgen -W "error warn info debug" -- "$cur"))
      return 0
      ;;
    --stop-mode)
      COMPREPLY=($(compgen -W "each all" -- "$cur"))
      return 0
      ;;
    -p | --pid)
      _hangscope_pids "$cur"
      return 0
      ;;
    --token-file | --tls-cert | --tls-key | --tls-ca | --hostfile | --metrics-token-file | \
      --metrics-tls-cert | --metrics-tls-key)
      _hangscope_files "$cur"
      return 0
      ;;
    --rules | --sysroot)
      _hangscope_files "$cur" dirs
      return 0
      ;;
    -o | --output)
      case "$command" in
        diagnose | watch) _hangscope_files "$cur" dirs ;;
        *) _hangscope_files "$cur" ;;
      esac
      return 0
      ;;
    --log | --flight-records | --core | --cores | --exe)
      _hangscope_files "$cur"
      return 0
      ;;
    --interval)
      COMPREPLY=($(compgen -W "500ms 1s 2s 5s 1m" -- "$cur"))
      return 0
      ;;
    --after)
      COMPREPLY=($(compgen -W "30s 1m 5m 10m 30m" -- "$cur"))
      return 0
      ;;
    --poll)
      COMPREPLY=($(compgen -W "1s 2s 5s 10s" -- "$cur"))
      return 0
      ;;
    --timeout)
      COMPREPLY=($(compgen -W "1m 10m 1h" -- "$cur"))
      return 0
      ;;
    --on-hang)
      COMPREPLY=($(compgen -c -- "$cur"))
      return 0
      ;;
    --samples | --max-stack-kib | --stop-timeout-ms | --listen | --agents | --node-name | --select | \
      --max-input-mib | --metrics | --keep)
      return 0 # free values
      ;;
  esac

  local opts=""
  case "$command" in
    "")
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$global_opts" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
      fi
      return 0
      ;;
    dump)
      opts="-h --help -p --pid --core --exe --sysroot --json --native-only --python-only --locals
            --tasks --sockets --stop-mode --max-stack-kib --stop-timeout-ms"
      ;;
    collect)
      opts="-h --help --once -o --output --samples --interval --listen --token-file --insecure
            --tls-cert --tls-key --tls-ca --node-name --pid --select --locals --trigger-fr-dump
            --query-store --replay --log"
      ;;
    diagnose)
      opts="-h --help --agents --hostfile --token-file --tls-ca --tls-cert --tls-key --samples
            --interval -o --output --json --ticket --quiet --rules --locals --no-locals --pid
            --trigger-fr-dump --query-store --select --force --max-input-mib --flight-records
            --cores --exe --sysroot --log"
      if [[ $cur != -* ]]; then
        # snapshot files from `hangscope collect --once`
        local IFS=$'\n'
        COMPREPLY=($(compgen -f -X '!*.json' -- "$cur") $(compgen -f -X '!*.pb' -- "$cur")
          $(compgen -d -- "$cur"))
        compopt -o filenames 2>/dev/null
        return 0
      fi
      ;;
    report)
      opts="-h --help --json --ticket --rules --max-input-mib"
      if [[ $cur != -* ]]; then
        _hangscope_files "$cur" dirs
        return 0
      fi
      ;;
    watch)
      opts="-h --help --agents --hostfile --token-file --tls-ca --tls-cert --tls-key --pid --select
            --samples --interval --rules --locals --no-locals --quiet --after --poll -o --output
            --on-hang --once --timeout --metrics --metrics-token-file --metrics-tls-cert
            --metrics-tls-key --insecure --keep"
      ;;
    rules)
      case "$sub" in
        "")
          if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-h --help" -- "$cur"))
          else
            COMPREPLY=($(compgen -W "list check" -- "$cur"))
          fi
          return 0
          ;;
        list) opts="-h --help --rules --json --max-input-mib" ;;
        check)
          opts="-h --help --json --max-input-mib"
          if [[ $cur != -* ]]; then
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -X '!*.json' -- "$cur") $(compgen -d -- "$cur"))
            compopt -o filenames 2>/dev/null
            return 0
          fi
          ;;
        *) return 0 ;;
      esac
      ;;
    *) return 0 ;;
  esac
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  return 0
}

complete -F _hangscope hangscope
