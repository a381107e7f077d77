# tools/tessera-completion.bash — bash completion of tessera's commands, `index`
# subcommands, options and presets, read from the binary's own `--help` at completion time
# (so it never lists an option the binary lacks). Installed as
# PREFIX/share/bash-completion/completions/tessera; or `source` it.
_tessera() {
  local bin=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local cmd=${COMP_WORDS[1]:-} words
  COMPREPLY=()
  if [ "$COMP_CWORD" -eq 1 ]; then
    words=$("$bin" --help 2>/dev/null | sed -n 's/^  \([a-z]\+\) .*/\1/p')
  elif [ "$cmd" = index ] && [ "$COMP_CWORD" -eq 2 ]; then
    words=$("$bin" index --help 2>/dev/null | sed -n 's/^  \([a-z]\+\) .*/\1/p')
  elif [ "$prev" = --config ]; then
    local data f
    data=$("$bin" --version 2>/dev/null | sed -n 's/^data: \(.*\) (presets.*/\1/p')
    for f in "$data"/configs/model/*.conf; do [ -f "$f" ] && f=${f##*/} && words+=" ${f%.conf}"; done
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return 0  # a file of one's own: -o default adds the paths
  elif [[ $cur == -* ]]; then
    local h=$cmd
    [ "$cmd" = index ] && h="index ${COMP_WORDS[2]}"
    # shellcheck disable=SC2086
    words=$("$bin" $h --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u)
  else
    return 0  # files: -o default
  fi
  # shellcheck disable=SC2207
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _tessera tessera
