#!/usr/bin/env bash
# tests/ingest/manifest_scale.sh — a manifest is streamed (ingest/manifest.h): `tessera
# manifest` reads a generated 2,000,000-row CSV (about 110 MB) with a peak RSS at most 64 MiB
# above that of the same binary reading a 3-row manifest. The growth allowed is the duplicate
# check's table (8 bytes a slot, at most 3/4 full: 32 MiB for 2 million spans, 48 MiB while it
# doubles) and the reader's buffers; a reader that held the file, or its rows, would pass it.
# Prints the rows per second (not checked: the machine's speed varies). Not run under the
# sanitizers (label "ingest" only): their shadow memory and quarantine change the RSS.
INGEST_NO_MEDIA=1
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/time ] || { echo "FAIL: /usr/bin/time is required (tools/setup.sh installs it)" >&2; exit 1; }
ROWS=${ROWS:-2000000}
BOUND_KB=$((64 * 1024))

# measure OUT ARGS...: runs `tessera manifest ARGS...` (summary in OUT, stderr in OUT.err);
# sets PEAK (peak RSS, kB) and SECS (wall seconds).
measure() {
  local out=$1; shift
  /usr/bin/time -f '%M %e' -o "$out.time" "$TESSERA_BIN" manifest "$@" >"$out" 2>"$out.err" </dev/null || true
  read -r PEAK SECS <"$out.time"
}

printf 'path,start,end,caption,aesthetic\na.mp4,0,1,x,1\nb.mp4,0,1,y,2\nc.mp4,0,1,z,3\n' >"$WORK/small.csv"
# 50,000 sources with 40 spans each, every (path, start) once
awk -v n="$ROWS" 'BEGIN {
  print "path,start,end,caption,aesthetic"
  for (i = 0; i < n; i++) {
    s = int(i / 50000) * 7.5
    printf "clips/v%d.mp4,%.1f,%.2f,\"a dog runs, clip %d\",%.2f\n", i % 50000, s, s + 3.25, i, (i % 700) / 100
  }
}' >"$WORK/big.csv"
measure "$WORK/small.out" "$WORK/small.csv"
base=$PEAK
measure "$WORK/big.out" "$WORK/big.csv" --where "aesthetic < 6.9"
big=$PEAK
expect_eq "$(grep '^rows:' "$WORK/big.out")" "rows: $ROWS (0 with errors)" "every row read"
drop=$((ROWS / 700 * 10 + (ROWS % 700 > 690 ? ROWS % 700 - 690 : 0)))
expect_eq "$(grep '^spans:' "$WORK/big.out")" "spans: $((ROWS - drop)) kept, $drop filtered, 0 duplicates" \
  "the filter drops aesthetic 6.90 .. 6.99 (10 of every 700 rows)"
expect_eq "$(grep -c '^filtered: ' "$WORK/big.out.err")" "$drop" "one stderr line per filtered span"
bytes=$(stat -c %s "$WORK/big.csv")
echo "manifest of $ROWS rows ($((bytes / 1048576)) MiB): ${SECS} s, $(awk -v n="$ROWS" -v s="$SECS" 'BEGIN { printf "%.0f", n / s }') rows/s; peak RSS ${big} kB, ${base} kB for 3 rows"
expect_ge "$((BOUND_KB - (big - base)))" 0 "peak RSS growth $((big - base)) kB within $BOUND_KB kB"
expect_ge "$((bytes / 1024 - (big - base)))" 1 "the growth is below the file's size ($((bytes / 1024)) kB)"
finish
