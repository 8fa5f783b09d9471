# bash completion for memplan. The commands and flags come from the installed
# binary itself (`memplan help`, `memplan help COMMAND`), so they never drift.
_memplan() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    local commands
    commands=$(memplan help 2>/dev/null | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF {print $1}')
    COMPREPLY=($(compgen -W "$commands help" -- "$cur"))
    return
  fi
  if [[ $cur == -* ]]; then
    local flags
    flags=$(memplan help "${COMP_WORDS[1]}" 2>/dev/null | grep -o -- '--[a-z][a-z-]*' | sort -u)
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _memplan memplan
