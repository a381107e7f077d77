#!/usr/bin/env bash
# tests/cli/docs_cli.sh — docs/cli.md (the command line reference) lists every command,
# subcommand and option that `tessera --help` and each `--help` print: the CLI and its
# documentation cannot drift.
set -uo pipefail
T=${TESSERA_BIN:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}
README=$SRC/docs/cli.md
missing=()
# the commands of `tessera --help`, and the index subcommands of `tessera index --help`
cmds=$("$T" --help | sed -n 's/^  \([a-z]\+\) .*/\1/p' | grep -v '^help$')
subs=$("$T" index --help | sed -n 's/^  \([a-z]\+\) .*/\1/p')
[ -n "$cmds" ] && [ -n "$subs" ] || { echo "FAIL: could not read the command lists" >&2; exit 1; }
for c in $cmds; do grep -q "tessera $c" "$README" || missing+=("command 'tessera $c'"); done
for s in $subs; do grep -q "tessera index $s" "$README" || missing+=("subcommand 'tessera index $s'"); done
helps=("--help")
for c in $cmds; do helps+=("$c --help"); done
for s in $subs; do helps+=("index $s --help"); done
n=0
for h in "${helps[@]}"; do
  # shellcheck disable=SC2086
  for o in $("$T" $h 2>&1 | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
    n=$((n + 1))
    grep -q -- "$o\b" "$README" || missing+=("option $o of 'tessera $h'")
  done
done
if [ ${#missing[@]} -gt 0 ]; then
  printf 'FAIL: docs/cli.md does not mention %s\n' "${missing[@]}" >&2
  exit 1
fi
echo "docs_cli: $(wc -w <<<"$cmds") commands, $(wc -w <<<"$subs") index subcommands and $n options of --help are all in docs/cli.md"
