#!/usr/bin/env bash
# Index rows are untrusted input. A clip row whose shard path leaves the store
# (../../../../etc/passwd, /etc/passwd, shards/../x) is refused by `tessera train` (a
# message naming the clip and the path; it used to open the file), by `index verify`
# (CORRUPT naming the clip and the store) and by `index export`. A row whose T*H*W
# overflows int (the product used to be computed in int) or whose sizes disagree is
# refused with its clip id and store. Ingest options outside their ranges (--fps 1000000
# used to write 16 GB from a 3 s clip and exit 0) are refused before anything is written.
source "$(dirname "$0")/lib.sh"
need_clips
A=(--fps 4 --short-side 32 --patch 1x4x4 --max-seconds 2 --quiet)
S=$WORK/store
tsr_ok "$WORK/ingest.log" "ingest two real clips" ingest "$VIDEOS/counter.mp4" "$VIDEOS/fades.mp4" --out "$S" "${A[@]}"
verify_ok "$S" "verify before any edit"
id=$(sql "$S" "SELECT min(id) FROM clips;")
orig=$(sql "$S" "SELECT shard FROM clips WHERE id = $id;")
train() {
  tsr "$1" train --data "$S" --config "$TESSERA_SRC/configs/model/tiny.conf" --out "$WORK/run-$2" \
    --set train.steps=1 --set train.warmup=1 --set train.global_batch=2 --set train.mem_tokens=1024 \
    --set model.pt=1 --set model.ph=4 --set model.pw=4
}
for bad in ../../../../etc/passwd /etc/passwd shards/../index.sqlite shards/x.tshard/../../y.tshard; do
  sql "$S" "UPDATE clips SET shard = $(sq "$bad") WHERE id = $id;"
  train "$WORK/train.log" bad
  check "train refuses shard path '$bad' (exit $RC)" [ "$RC" -ne 0 ]
  check "train's message names clip $id and the path '$bad'" grep -qF "clip $id (shard '$bad'" "$WORK/train.log"
  check "train's message says the path is not inside the store" grep -q "is not a shard inside the store" "$WORK/train.log"
  tsr "$WORK/verify.log" index verify "$S"
  expect_eq "$RC" 3 "verify: '$bad' is corruption (exit 3)"
  check "verify names clip $id, the store and the path" grep -qF "CORRUPT: clip $id (source" "$WORK/verify.log"
  tsr "$WORK/export.log" index export "$S" --clip "$id" --out "$WORK/x.raw" --raw
  check "export refuses clip $id with '$bad' (exit $RC)" [ "$RC" -eq 1 ] && grep -q "is not a shard inside the store" "$WORK/export.log"
done
sql "$S" "UPDATE clips SET shard = $(sq "$orig") WHERE id = $id;"
verify_ok "$S" "verify after the path is restored"

# T*H*W past 2^31 (and past 2^63 with bytes), tokens/bytes inconsistent: refused by clip id.
for edit in "T = 65536, H = 65536, W = 2, tokens = 8589934592, bytes = 8589934592*48" \
            "T = 4294967297" "tokens = tokens + 1" "bytes = -4096" "offset = 4097" \
            "T = 16777216, H = 16777216, W = 16777216, tokens = 0" \
            "offset = 9223372036854771712, bytes = 9223372036854775000"; do
  cp "$S/index.sqlite" "$WORK/keep.sqlite"
  sql "$S" "UPDATE clips SET $edit WHERE id = $id;"
  tsr "$WORK/verify.log" index verify "$S"
  check "verify refuses row edit '$edit' (exit $RC)" [ "$RC" -eq 3 -o "$RC" -eq 1 ]
  check "verify names clip $id for '$edit'" grep -q "clip $id" "$WORK/verify.log"
  train "$WORK/train.log" row
  check "train refuses row edit '$edit' naming clip $id" grep -q "clip $id" "$WORK/train.log"
  cp "$WORK/keep.sqlite" "$S/index.sqlite"
done
# Recovery trusts rows for committed shard ends: a row whose sizes wrap past 2^63 (found
# by fuzz_index: the end read as -2^63) stops it instead of cutting shards.
sizes() { stat -c '%n %s' "$S"/shards/* | sort; }
before=$(sizes)
cp "$S/index.sqlite" "$WORK/keep.sqlite"
sql "$S" "UPDATE clips SET offset = 9223372036854771712, bytes = 9223372036854775000 WHERE id = $id;"
tsr "$WORK/recover.log" index recover "$S"
expect_eq "$RC" 1 "recover refuses rows giving an impossible shard end"
check "recover names the invalid committed end" grep -q "invalid committed end" "$WORK/recover.log"
expect_eq "$(sizes)" "$before" "no shard cut on the word of a wrapped row"
cp "$WORK/keep.sqlite" "$S/index.sqlite"

# Option ranges, checked before the store is created.
for opt in "--fps 1000000" "--fps 241" "--fps 1/7200" "--short-side 4" "--short-side 5000" \
           "--patch 1x65x4" "--patch 65x4x4" "--max-seconds 100000" "--workers 5000" \
           "--patch 1x16x16 --short-side 8"; do
  # shellcheck disable=SC2086
  tsr "$WORK/opt.log" ingest "$VIDEOS/counter.mp4" --out "$WORK/o" $opt --quiet
  expect_eq "$RC" 1 "ingest $opt refused"
  check "ingest $opt wrote nothing" [ ! -e "$WORK/o" ]
done
check "--help prints the fps range" grep -q "1/3600..240" <("$TESSERA_BIN" ingest --help)
finish
