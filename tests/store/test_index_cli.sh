#!/usr/bin/env bash
# `tessera index` front end: help, exit codes (0 ok, 1 fatal, 3 corrupt), stats text and
# JSON, verify, merge (refusal writes nothing), recover. Stores come from
# ./test_store_ops make (run from the test's build directory by ctest).
set -u
T=${TESSERA_BIN:?}
MAKE=./test_store_ops
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail=0
check() {  # check DESCRIPTION EXPECTED_RC ACTUAL_RC
  if [ "$2" != "$3" ]; then echo "FAIL: $1: exit $3, expected $2"; fail=1; else echo "ok: $1"; fi
}
has() {  # has DESCRIPTION FILE PATTERN
  if grep -q -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: no '$3' in:"; cat "$2"; fail=1; fi
}

$MAKE make "$D/a" 0 >/dev/null && $MAKE make "$D/b" 1 >/dev/null && $MAKE make "$D/c" 2 >/dev/null \
  || { echo "FAIL: cannot make stores"; exit 1; }

$T index --help >"$D/o" 2>&1; check "index --help" 0 $?
has "help lists subcommands" "$D/o" "merge IN... --out OUT"
for s in stats verify merge recover export; do
  $T index $s --help >"$D/o" 2>&1; check "index $s --help" 0 $?
  has "$s help" "$D/o" "usage: tessera index $s"
done
$T index >/dev/null 2>&1; check "no subcommand" 1 $?
$T index frobnicate >/dev/null 2>&1; check "unknown subcommand" 1 $?
$T index stats "$D/missing" >"$D/o" 2>&1; check "missing store" 1 $?
has "missing store message" "$D/o" "does not exist"
head -c 10000 /dev/urandom >"$D/junk"
$T index stats "$D/junk" >"$D/o" 2>&1; check "file as store" 1 $?
mkdir "$D/fake" && cp "$D/junk" "$D/fake/index.sqlite"
$T index verify "$D/fake" >"$D/o" 2>&1; check "random index" 1 $?
has "random index message" "$D/o" "not a tessera index"

$T index stats "$D/a" >"$D/o" 2>&1; check "stats" 0 $?
has "stats sources" "$D/o" "sources: 2 done (0 partial), 1 failed"
has "stats clips" "$D/o" "clips: 3, tokens: 96"
has "stats histogram" "$D/o" "clip length in tokens"
has "stats failed" "$D/o" "/videos/broken0.mp4: no video stream"
$T index stats "$D/a" --json >"$D/o" 2>&1; check "stats --json" 0 $?
has "json clips" "$D/o" '"clips": 3'
has "json failed" "$D/o" '"path": "/videos/broken0.mp4"'

$T index verify "$D/a" >"$D/o" 2>&1; check "verify clean" 0 $?
has "verify summary" "$D/o" "3 clips (0 bad).*OK"

$T index merge "$D/m" "$D/a" "$D/c" >"$D/o" 2>&1; check "merge mismatch" 1 $?
has "merge mismatch message" "$D/o" "fps 8/1 vs 12/1"
[ ! -e "$D/m" ] && echo "ok: refused merge wrote nothing" || { echo "FAIL: $D/m exists"; fail=1; }
$T index merge "$D/m" "$D/a" "$D/b" >"$D/o" 2>&1; check "merge" 0 $?
$T index stats "$D/m" >"$D/o" 2>&1
has "merged counts" "$D/o" "sources: 4 done (0 partial), 2 failed"
$T index verify "$D/m" >"$D/o" 2>&1; check "merged store verifies" 0 $?

# Corrupt one payload byte of b (a copy, so the merged store's hard links are untouched).
cp -r "$D/b" "$D/b2"
printf '\xff' | dd of="$D/b2/shards/w1.tshard" bs=1 seek=$((4096 + 64 + 7)) conv=notrunc 2>/dev/null
$T index verify "$D/b2" >"$D/o" 2>&1; check "verify corrupt" 3 $?
has "corrupt line" "$D/o" "CORRUPT: clip 3 (source /videos/s1-1.mp4).*w1.tshard.*offset 4096"

# Recover: an uncommitted tail and an unreferenced shard are tidied (on a copy: a's shards
# are hard-linked into m, and recovery never cuts shared files).
cp -r "$D/a" "$D/a2"
head -c 5000 /dev/zero >>"$D/a2/shards/w0.tshard"
cp "$D/a2/shards/w1.tshard" "$D/a2/shards/orphan.tshard"
$T index verify "$D/a2" >"$D/o" 2>&1; check "verify with notes only" 0 $?
has "tail note" "$D/o" "5000 bytes past its committed end"
$T index recover "$D/a2" >"$D/o" 2>&1; check "recover" 0 $?
has "recover summary" "$D/o" "1 shard tails cut (5000 bytes), 1 shards"
[ ! -e "$D/a2/shards/orphan.tshard" ] && echo "ok: orphan removed" || { echo "FAIL: orphan kept"; fail=1; }

$T index export "$D/a" --clip 1 >/dev/null 2>&1; check "export without --out" 1 $?
$T index export "$D/a" --clip x --out "$D/x.mp4" >/dev/null 2>&1; check "export bad id" 1 $?
exit $fail
