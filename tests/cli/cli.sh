#!/usr/bin/env bash
# tests/cli/cli.sh — one voice (tools/cli.h): every command and subcommand, given an
# unknown option, an option or argument missing, and a bad value, exits 1 with
#   error: tessera CMD: MESSAGE
#   hint: `tessera CMD --help` lists the options and arguments
# (the hint for usage errors; a bad value that only the run can find, such as a missing
# store, is a failure without it), where MESSAGE names the option or argument and never
# repeats a prefix ("sample: sample:", "x: x:"). Also: an unknown command, --version,
# `help CMD`, and a missing source leaving no store behind.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad/same/tally
scratch cli

# check KIND CMD PATTERN ARGS...: `tessera ARGS` exits 1; the first stderr line is
# "error: tessera CMD: " + a message matching PATTERN (grep -E) without a doubled prefix;
# for KIND usage the second line is the hint, for KIND fail there is none.
check() {
  local kind=$1 cmd=$2 pat=$3; shift 3
  local rc=0
  "$T" "$@" >"$W/out" 2>"$W/err" </dev/null || rc=$?
  local first msg second
  first=$(sed -n 1p "$W/err"); second=$(sed -n 2p "$W/err")
  msg=${first#"error: tessera $cmd: "}
  if [ $rc -ne 1 ]; then bad "tessera $*: exit $rc, want 1 ($(head -c 200 "$W/err"))"; return; fi
  if [ "$msg" = "$first" ]; then bad "tessera $*: first line is not 'error: tessera $cmd: ...': $first"; return; fi
  if ! grep -Eq -- "$pat" <<<"$msg"; then bad "tessera $*: message lacks /$pat/: $msg"; return; fi
  if grep -Eq "^(error|tessera|${cmd##* })[: ]|(^| )([^ ]+): \\3:" <<<"$msg"; then
    bad "tessera $*: doubled prefix: $first"; return
  fi
  if [ "$kind" = usage ] && [ "$second" != "hint: \`tessera $cmd --help\` lists the options and arguments" ]; then
    bad "tessera $*: no hint after the usage error: '$second'"; return
  fi
  if [ "$kind" = fail ] && [ -n "$second" ] && [[ $second == hint:* ]]; then
    bad "tessera $*: a hint after a failure that is not a usage error"; return
  fi
  ok
}

NOSTORE=$W/nostore
MEDIA=1; "$T" --version | grep -q '^media: none' && MEDIA=0
if [ $MEDIA = 1 ]; then
check usage ingest "unknown option '--bogus'" ingest x --out "$W/s" --bogus
check usage ingest "option '--fps' needs a value" ingest x --out "$W/s" --fps
check usage ingest "--fps: 'abc'" ingest x --out "$W/s" --fps abc
check usage ingest "missing --out STORE" ingest x
check usage ingest "missing SRC" ingest --out "$W/s"
else  # a build without media: video ingest refuses, in the same format
  check fail ingest "built without media" ingest "$T" --out "$W/s"
fi
check usage index "unknown subcommand 'bogus'" index bogus
check usage index "missing the subcommand" index
for sub in stats verify recover; do
  check usage "index $sub" "unknown option '--bogus'" index $sub --bogus "$NOSTORE"
  check usage "index $sub" "missing STORE" index $sub
  check fail "index $sub" "store $NOSTORE does not exist" index $sub "$NOSTORE"
  check usage "index $sub" "unexpected argument 'extra'" index $sub "$NOSTORE" extra
done
check usage "index list" "unknown option '--bogus'" index list "$NOSTORE" --bogus
check usage "index list" "option '--limit' needs a value" index list "$NOSTORE" --limit
check usage "index list" "--limit: '0'" index list "$NOSTORE" --limit 0
check usage "index list" "--row: '0'" index list "$NOSTORE" --row 0
check usage "index list" "missing STORE" index list
check fail "index list" "store $NOSTORE does not exist" index list "$NOSTORE"
check usage "index merge" "unknown option '--bogus'" index merge --bogus "$NOSTORE" --out "$W/m"
check usage "index merge" "missing IN" index merge --out "$W/m"
check usage "index merge" "missing IN" index merge "$W/m"
check usage "index merge" "option '--out' needs a value" index merge "$NOSTORE" --out
check fail "index merge" "$NOSTORE" index merge "$NOSTORE" --out "$W/m"
# the older order (OUT first) is still taken, with a warning naming the new spelling
rc=0; "$T" index merge "$W/m" "$NOSTORE" >"$W/out" 2>"$W/err" || rc=$?
if [ $rc = 1 ] && sed -n 1p "$W/err" | grep -qF "deprecated order, accepted for one release: use \`tessera index merge IN... --out $W/m\`" &&
   sed -n 2p "$W/err" | grep -qF "error: tessera index merge:"; then ok
else bad "index merge OUT IN...: exit $rc, $(head -c 300 "$W/err")"; fi
check usage "index export" "unknown option '--bogus'" index export "$NOSTORE" --clip 1 --out "$W/x.mp4" --bogus
check usage "index export" "option '--clip' needs a value" index export "$NOSTORE" --out "$W/x.mp4" --clip
check usage "index export" "--clip: 'abc'" index export "$NOSTORE" --clip abc --out "$W/x.mp4"
check usage "index export" "missing --clip ID" index export "$NOSTORE" --out "$W/x.mp4"
check usage plan "unknown option '--bogus'" plan --bogus
check usage plan "option '--ranks' needs a value" plan --data "$NOSTORE" --ranks
check usage plan "--ranks: '3x'" plan --data "$NOSTORE" --ranks 3x --mem-tokens 10 --cost c
check usage plan "missing --ranks" plan --data "$NOSTORE"
check usage train "unknown option '--bogus'" train --bogus
check usage train "option '--steps' needs a value" train --config c --data d --out o --steps
check usage train "--steps: 'abc'" train --config c --data d --out o --steps abc
check usage train "--plan 'sideways'" train --config c --data d --out o --plan sideways
check usage train "missing --config FILE" train --data d --out o
check usage train "unexpected argument 'extra'" train --config c --data d --out o extra
check fail train "config file $W/nope.conf: cannot open \(No such file" train --config "$W/nope.conf" --data d --out "$W/o"
check usage sample "unknown option '--bogus'" sample --bogus
check usage sample "option '--frames' needs a value" sample --ckpt c --size 8x8 --out o.mp4 --frames
check usage sample "--frames: '-1'" sample --ckpt c --frames -1 --size 8x8 --out o.mp4
check usage sample "--size '8'" sample --ckpt c --frames 4 --size 8 --out o.mp4
check usage sample "missing --ckpt FILE" sample --frames 4 --size 8x8 --out o.mp4
check fail sample "$W/nope.safetensors" sample --ckpt "$W/nope.safetensors" --frames 4 --size 8x8 --out "$W/o.mp4"
check usage manifest "unknown option '--bogus'" manifest x.csv --bogus
check usage manifest "option '--where' needs a value" manifest x.csv --where
check usage manifest "--where 'a 1': no comparison" manifest x.csv --where "a 1"
check usage manifest "missing FILE" manifest
check fail manifest "$W/none.csv" manifest "$W/none.csv"
check usage calibrate "unknown option '--bogus'" calibrate --bogus
check usage calibrate "option '--reps' needs a value" calibrate --config c --out o --reps
check usage calibrate "--reps: '0'" calibrate --config c --out o --reps 0
check usage calibrate "missing --out FILE" calibrate --config c
check usage train "--backend bogus: not a backend" train --config c --data d --out o --backend bogus
check usage convert "unknown option '--bogus'" convert src --out o --bogus
check usage convert "option '--out' needs a value" convert src --out
check usage convert "missing SRC" convert --out o
check usage convert "missing --out DST" convert src
check usage convert "--to onnx: use tessera or diffusers" convert src --out o --to onnx
check usage convert "--dtype fp16: use fp32 or bf16" convert src --out o --to diffusers --dtype fp16
check fail convert "$W/none/config.json" convert "$W/none" --out "$W/none.ckpt"
check usage report "missing RUN" report
check usage report "--max-videos" report "$W" --max-videos x
check fail report "$W/none is not a run directory" report "$W/none"

# the dispatcher
rc=0; "$T" frobnicate >"$W/out" 2>"$W/err" || rc=$?
[ $rc -eq 1 ] && [ "$(sed -n 1p "$W/err")" = "error: tessera: unknown command 'frobnicate'" ] &&
  [ "$(sed -n 2p "$W/err")" = 'hint: `tessera --help` lists the commands' ] && ok || bad "unknown command: $(cat "$W/err")"
"$T" --version >"$W/out" && grep -Eq '^tessera [0-9]+\.[0-9]+\.[0-9]+$' <(head -1 "$W/out") &&
  grep -q '^backends: cpu, cpu-bf16' "$W/out" && ok || bad "--version: $(cat "$W/out")"
"$T" help train >"$W/out" && grep -q '^usage: tessera train' "$W/out" && ok || bad "help train"
for c in ingest index manifest plan train sample calibrate convert report; do
  "$T" $c --help >"$W/out" 2>&1 && grep -q "^usage: tessera $c" "$W/out" && ok || bad "$c --help"
done

# a missing source creates nothing
[ $MEDIA = 1 ] && {
check fail ingest "source $W/missing.mp4: No such file or directory; nothing was ingested" \
  ingest "$W/missing.mp4" --out "$W/new-store"
[ ! -e "$W/new-store" ] && ok || bad "a missing source left $W/new-store behind"
check fail ingest "source list $W/list.txt: No such file" ingest "@$W/list.txt" --out "$W/new-store"
[ ! -e "$W/new-store" ] && ok || bad "a missing @list left $W/new-store behind"
}

tally "cli"
