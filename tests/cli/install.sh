#!/usr/bin/env bash
# tests/cli/install.sh — `cmake --install` of the build that made TESSERA_BIN into a fresh
# prefix gives a tessera that works from anywhere: the installed binary finds its presets
# and scripts under PREFIX/share/tessera (not the source tree: TESSERA_DATA_DIR unset, run
# from another folder), its man page holds every command, subcommand and option of
# `--help` (the same check as docs_cli.sh), and the bash completion completes commands,
# subcommands, options and preset names as `--help` and configs/model/ list them.
set -uo pipefail
T=${TESSERA_BIN:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}
BUILD=$(cd "$(dirname "$T")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-install.XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0 failn=0
ok() { if eval "$2"; then pass=$((pass + 1)); else failn=$((failn + 1)); echo "FAIL: $1" >&2; fi; }
unset TESSERA_DATA_DIR

cmake --install "$BUILD" --prefix "$W/prefix" >"$W/install.txt" 2>&1 ||
  { cat "$W/install.txt" >&2; echo "FAIL: cmake --install" >&2; exit 1; }
I=$W/prefix/bin/tessera
ok "bin/tessera installed" '[ -x "$I" ]'
cd "$W" || exit 1
ok "the installed binary's data folder is PREFIX/share/tessera" \
  '"$I" --version | grep -qx "data: $(cd "$W/prefix/share/tessera" && pwd -P) (presets, cost files, scripts)\|data: $W/prefix/bin/../share/tessera (presets, cost files, scripts)"'
# presets by name: a bare name is the installed preset (the error of a missing store names the store, so the config was read), and a preset
# removed from the install is no longer found (so the source tree is not what answered)
"$I" train --config tiny --data "$W/no-store" --out "$W/run" >"$W/t.txt" 2>&1
ok "--config tiny found in the install (got: $(head -c 300 "$W/t.txt"))" 'grep -q "no-store" "$W/t.txt"'
mv "$W/prefix/share/tessera/configs/model/tiny.conf" "$W/tiny.conf"
"$I" train --config tiny --data "$W/no-store" --out "$W/run" >"$W/u.txt" 2>&1
ok "without the installed tiny.conf, --config tiny is a file that does not exist (got: $(head -c 300 "$W/u.txt"))" \
  'grep -q "tiny" "$W/u.txt" && ! grep -q "no-store" "$W/u.txt"'
mv "$W/tiny.conf" "$W/prefix/share/tessera/configs/model/tiny.conf"
ok "the scripts installed" '[ -f "$W/prefix/share/tessera/tools/report.py" ] && [ -f "$W/prefix/share/tessera/tools/plan_timeline.py" ]'
# the installed report script runs (its helpers installed beside it) on a run of two lines
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  mkdir -p "$W/run2"
  printf '{"step": 1, "loss": 0.5, "lr": 0.001}\n{"step": 2, "loss": 0.4, "lr": 0.001}\n' >"$W/run2/metrics.jsonl"
  "$I" report "$W/run2" >"$W/r.txt" 2>&1
  ok "the installed tessera report writes report.html ($(tail -c 300 "$W/r.txt"))" '[ -s "$W/run2/report.html" ] && [ -s "$W/run2/report.png" ]'
fi

# the man page: every command, subcommand and option of --help
MAN=$W/prefix/share/man/man1/tessera.1
ok "share/man/man1/tessera.1 installed" '[ -s "$MAN" ]'
cmds=$("$I" --help | sed -n 's/^  \([a-z]\+\) .*/\1/p' | grep -vx help)
subs=$("$I" index --help | sed -n 's/^  \([a-z]\+\) .*/\1/p')
missing=0 n=0
for h in "" $cmds $(printf 'index/%s ' $subs); do
  h=${h/\// }
  # shellcheck disable=SC2086
  for o in $("$I" $h --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
    n=$((n + 1))
    grep -qF -- "$o" "$MAN" || { missing=$((missing + 1)); echo "  man page lacks $o of 'tessera $h'" >&2; }
  done
done
ok "the man page holds all $n options of --help" '[ "$missing" = 0 ] && [ "$n" -gt 100 ]'
for c in $cmds; do ok "man page section of $c" "grep -q '^.SH \"TESSERA ${c^^}\"' '$MAN'"; done
if command -v groff >/dev/null; then
  ok "groff renders the man page" 'groff -man -Tutf8 "$MAN" 2>/dev/null | grep -q "tessera train"'
fi

# the bash completion, driven as bash drives it
COMP=$W/prefix/share/bash-completion/completions/tessera
ok "bash completion installed" '[ -f "$COMP" ]'
complete_words() {  # complete_words WORD... : COMPREPLY for the last word, one a line
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tessera; printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP" "$I" "$@"
}
ok "tessera tr<TAB> -> train" '[ "$(complete_words tr)" = train ]'
ok "tessera index v<TAB> -> verify" '[ "$(complete_words index v)" = verify ]'
ok "tessera train --st<TAB> -> --steps" '[ "$(complete_words train --st)" = --steps ]'
ok "tessera index export --c<TAB> -> --clip --crf" '[ "$(complete_words index export --c | paste -sd" ")" = "--clip --crf" ]'
ok "tessera train --config di<TAB> -> the dit presets" '[ "$(complete_words train --config di | sort | paste -sd" ")" = "dit-1b dit-b dit-s" ]'
echo "install: $pass passed, $failn failed"
[ "$failn" -eq 0 ]
