#!/usr/bin/env bash
# tests/ingest/manifest_limits.sh — a row past what a store holds is a bad row (issue 40,
# 6): a caption over 8,192 bytes, more than 64 scores, a score name over 128 bytes, scores
# whose text passes 4 KiB, and a NUL byte in a CSV field (it cut the field: `L.mp4\0.evil`
# was read as L.mp4) are each counted by reason by `tessera manifest` and named by row;
# `ingest --manifest` skips them like every other bad row (exit 2) and ingests the rows
# before and after them (it stopped fatally at the first, at every rerun).
. "$(dirname "$0")/lib.sh"
need_clips
V=$VIDEOS/testvideo.mp4
M=$WORK/m.csv
long=$(head -c 8193 /dev/zero | tr '\0' a)
name=$(head -c 129 /dev/zero | tr '\0' n)
# 65 score columns for the row with too many scores (the others leave them empty)
hdr="path,start,end,caption"
for i in $(seq 65); do hdr="$hdr,s$i"; done
empty=$(printf ',%.0s' $(seq 65))
many=""
for i in $(seq 65); do many="$many,$i"; done
{
  echo "$hdr,$name"
  echo "$V,0,1,first good$empty,"
  echo "$V,1,2,$long$empty,"
  echo "$V,2,3,many scores$many,"
  echo "$V,3,4,a long score name${empty},5"
  printf '%s,4,5,nul in the path%s,\n' "$V" "$empty" | sed 's|testvideo.mp4|testvideo.mp4\x00.evil|'
  echo "$V,5,6,last good$empty,"
} >"$M"
grep -qaP 'testvideo.mp4\x00\.evil' "$M" || fail "the manifest has no NUL byte"
# scores whose text passes 4 KiB: 64 scores of 120-byte names (a JSONL row)
J=$WORK/m.jsonl
python3 - "$J" "$V" <<'PYEOF'
import json, sys
path, v = sys.argv[1], sys.argv[2]
with open(path, 'w') as f:
    f.write(json.dumps({"path": v, "start": 0, "end": 1, "caption": "ok"}) + "\n")
    row = {"path": v, "start": 1, "end": 2}
    for i in range(64):
        row[("k%02d" % i) * 40] = 1.25
    f.write(json.dumps(row) + "\n")
    f.write(json.dumps({"path": v, "start": 2, "end": 3, "caption": "a\u0000b"}) + "\n")
    f.write(json.dumps({"path": v, "start": 3, "end": 4, "caption": "ok too"}) + "\n")
PYEOF

tsr "$WORK/m.log" manifest "$M"
expect_eq "$RC" 2 "tessera manifest: bad rows give exit 2"
for r in "caption length: 1" "scores: 2" "encoding: 1"; do
  check "tessera manifest counts '$r'" grep -qx "  $r" "$WORK/m.log"
done
check "the long caption named by row and column" grep -q "row 2 (line 3), column 'caption'.*8193 bytes, a store holds at most 8192" "$WORK/m.log"
check "65 scores named" grep -q "row 3 (line 4).*65 scores, a clip holds at most 64" "$WORK/m.log"
check "the long score name named" grep -q "row 4 (line 5).*longer than 128" "$WORK/m.log"
check "the NUL byte named by row and column" grep -q "row 5 (line 6), column 'path'.*a NUL byte" "$WORK/m.log"
tsr "$WORK/j.log" manifest "$J"
expect_eq "$RC" 2 "tessera manifest (JSONL): bad rows give exit 2"
check "scores past 4 KiB counted" grep -qx "  scores: 1" "$WORK/j.log"
check "scores past 4 KiB named" grep -q "row 2 (line 2).*longer than 4096 bytes" "$WORK/j.log"
check "a NUL escape in JSONL is a bad row" grep -qx "  json: 1" "$WORK/j.log"

SET=(--fps 4 --short-side 32 --patch 1x4x4 --quiet)
for run in 1 2; do  # the rerun gets as far: nothing is left to do
  tsr "$WORK/i$run.log" ingest --manifest "$M" --out "$WORK/store" "${SET[@]}"
  expect_eq "$RC" 2 "ingest --manifest (run $run): the bad rows skipped, exit 2"
done
expect_eq "$(sql "$WORK/store" "SELECT group_concat(manifest_row) FROM (SELECT manifest_row FROM clips ORDER BY manifest_row);")" \
  "1,6" "the rows before and after the bad ones are ingested"
expect_eq "$(sql "$WORK/store" "SELECT count(*) FROM sources WHERE path LIKE '%.evil%';")" 0 \
  "the path cut at its NUL byte was not read as another"
tsr "$WORK/ij.log" ingest --manifest "$J" --out "$WORK/store-j" "${SET[@]}"
expect_eq "$RC" 2 "ingest --manifest (JSONL): exit 2"
expect_eq "$(sql "$WORK/store-j" "SELECT count(*) FROM clips;")" 2 "the two good JSONL rows are ingested"
finish
