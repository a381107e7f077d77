#!/usr/bin/env bash
# tests/cli/docs_cli.sh — docs/cli.md (the command line reference) lists every command,
# subcommand and option that `tessera --help` and each `--help` print; the flag tables of
# docs/train.md and docs/plan.md are those commands' option tables (tools/opt.h, whose rows
# make both the parser and --help): the CLI and its documentation cannot drift.
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
# The flags of a --help's option list (its left column: tools/opt.h's table), and the flags
# of a docs table's first column (rows "| `--flag ARG` | ...").
help_flags() {
  "$T" "$1" --help | sed -n 's/^  \(--[a-z].*\)/\1/p' | sed 's/  .*//' |
    grep -oE -- '--[a-z][a-z0-9-]+' | sort -u
}
table_flags() { sed -n 's/^| `\(--[^|]*\)|.*/\1/p' "$1" | sed 's/`.*//' | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u; }
# The flag tables of docs/train.md and docs/plan.md have a row for every flag of the
# command's table and none for a flag it lacks.
for pair in train:docs/train.md plan:docs/plan.md; do
  d=$(diff <(help_flags "${pair%%:*}") <(table_flags "$SRC/${pair#*:}")) ||
    { echo "FAIL: ${pair#*:}'s flag table against \`tessera ${pair%%:*} --help\` (<: a row missing, >: no such flag):" >&2
      echo "$d" >&2; exit 1; }
done
echo "docs_cli: $(wc -w <<<"$cmds") commands, $(wc -w <<<"$subs") index subcommands and $n options of --help are all in docs/cli.md; the flag tables of docs/train.md and docs/plan.md are train's and plan's"
