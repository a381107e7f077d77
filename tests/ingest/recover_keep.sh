#!/usr/bin/env bash
# Recovery never destroys intact data (issue 24, item 2).
#  1. A shard damaged twice (a flipped byte in a clip of its first source, then cut in the
#     middle of its last source's second clip) and its index lost: `index recover` records
#     every complete source, also the one after the damaged block (the rebuild used to stop
#     at the first bad block and recovery then cut everything after it), and moves what it
#     cannot use (the last source's intact first clip and the cut block) into the
#     quarantine folder it names, as a shard file that holds them; no byte is deleted.
#  2. A shard with no index rows is read before anything is done to it: one of a store with
#     other settings, copied into shards/, is moved into quarantine by ingest's start-up
#     recovery, named in its log (it used to be deleted unread).
#  3. With the index intact and a shard truncated, `train --skip-bad-clips` trains on the
#     clips that are left, naming those it skips (it used to stop at start, as without the
#     option); without it the run stops naming the clip and the option.
source "$(dirname "$0")/lib.sh"
A=(--fps 4 --short-side 32 --patch 1x4x4 --workers 1 --max-seconds 1 --quiet)
SRC=$WORK/src S=$WORK/store
gen_set "$SRC" 3
# one shard, largest source first: clip-02 (4 clips), clip-01 (3), clip-00 (2)
tsr_ok "$WORK/ingest.log" "ingest of 3 sources" ingest "$SRC" --out "$S" "${A[@]}"
shard=$(sql "$S" "SELECT shard FROM clips LIMIT 1;")
off() { sql "$S" "SELECT c.offset FROM clips c JOIN sources s ON c.source_id = s.id WHERE $(src_is "$1") AND c.clip_index = $2;"; }
bad=$(( $(off clip-02.mp4 1) + 64 + 100 ))   # a payload byte of clip-02's clip 1
cut=$(( $(off clip-00.mp4 1) + 8192 ))       # the middle of clip-00's clip 1
cp -r "$S" "$WORK/pristine"

damage() {  # damage STORE: the byte flipped, the shard cut, the index lost
  local f=$1/$shard b
  b=$(od -An -tu1 -j "$bad" -N1 "$f" | tr -d ' ')
  printf "$(printf '\\%03o' $(( b ^ 255 )))" | dd of="$f" bs=1 seek="$bad" conv=notrunc status=none
  truncate -s "$cut" "$f"
  rm -f "$1/index.sqlite"
}
damage "$S"
tsr_ok "$WORK/recover.log" "index recover of a damaged shard without index" index recover "$S"
expect_eq "$(sql "$S" "SELECT s.path FROM sources s ORDER BY s.path;" | sed 's|.*/||' | tr '\n' ' ')" \
  "clip-01.mp4 " "the complete source after the damaged block is recorded"
expect_eq "$(sql "$S" "SELECT COUNT(*) FROM clips;")" 3 "its 3 clips are recorded"
q=$(sed -n 's/.*moved into the quarantine folder \([^ ;]*\).*/\1/p' "$WORK/recover.log" | head -n1)
check "recover names its quarantine folder" test -n "$q"
check "the quarantine folder is inside the store" test -d "$q"
qfiles=$(ls "$q" 2>/dev/null | tr '\n' ' ' || true)
check "the quarantine folder holds a shard file ($qfiles)" test -n "$qfiles"
# bytes: what is left of the shard plus the quarantined tail (behind a copy of the 4096-byte
# header) is what the damaged shard held: nothing was deleted
left=$(stat -c %s "$S/$shard" 2>/dev/null || echo 0)
qbytes=0
if [ -n "$q" ]; then
  for f in "$q"/*; do [ ! -f "$f" ] || qbytes=$((qbytes + $(stat -c %s "$f") - 4096)); done
fi
expect_eq "$((left + qbytes))" "$cut" "shard + quarantine = the damaged shard's bytes"
verify_ok "$S" "index verify of the recovered store"
# the quarantined shard holds clip-00's intact clip 0: a store made of it rebuilds it
mkdir -p "$WORK/q/shards"
[ -z "$q" ] || cp "$q"/* "$WORK/q/shards/" 2>/dev/null || true
tsr_ok "$WORK/q.log" "index recover of a store made of the quarantined shard" index recover "$WORK/q"
check "the quarantined shard reads as clip-00's clip 0 (an incomplete source)" \
  grep -q "clip-00.mp4: 1 clips in shard" "$WORK/q.log"

# 2. a shard of a store with other settings copied into shards/
tsr_ok "$WORK/o.log" "a store with other settings" ingest "$SRC/clip-00.mp4" --out "$WORK/other" \
  --fps 4 --short-side 64 --patch 1x4x4 --quiet
S2=$WORK/s2
cp -r "$WORK/pristine" "$S2"
foreign=$(ls "$WORK/other/shards")
cp "$WORK/other/shards/$foreign" "$S2/shards/zz-foreign.tshard"
tsr_ok "$WORK/i2.log" "ingest into a store with a foreign shard" ingest "$SRC" --out "$S2" "${A[@]}"
check "the foreign shard is no longer in shards/" test ! -e "$S2/shards/zz-foreign.tshard"
check "ingest's log names the foreign shard and where it went" \
  grep -q "zz-foreign.tshard.*quarantine" "$WORK/i2.log"
moved=$(find "$S2" -path "*quarantine*" -name zz-foreign.tshard | head -n1 || true)
check "the foreign shard is in the quarantine, whole" cmp -s "$moved" "$WORK/other/shards/$foreign"

# 3. a truncated shard under an intact index: train skips what is lost
S3=$WORK/s3
cp -r "$WORK/pristine" "$S3"
truncate -s "$cut" "$S3/$shard"
TRAIN=(train --config "$TESSERA_SRC/configs/model/tiny.conf" --data "$S3" --set model.pt=1
       --set model.ph=4 --set model.pw=4 --set train.global_batch=4 --set train.mem_tokens=1024
       --set train.log_every=1 --steps 3)
tsr "$WORK/t1.log" "${TRAIN[@]}" --out "$WORK/run1"
expect_eq "$RC" 1 "train without --skip-bad-clips on a truncated shard: exit 1"
cut_id=$(sql "$S3" "SELECT c.id FROM clips c JOIN sources s ON c.source_id = s.id WHERE $(src_is clip-00.mp4) AND c.clip_index = 1;")
check "it names the clip past the shard's end and the option" \
  grep -q "clip $cut_id lies past the end of shard.*--skip-bad-clips" "$WORK/t1.log"
tsr "$WORK/t2.log" "${TRAIN[@]}" --out "$WORK/run2" --skip-bad-clips
expect_eq "$RC" 0 "train --skip-bad-clips on a truncated shard: exit 0"
[ "$RC" -eq 0 ] || tail -n 5 "$WORK/t2.log" >&2
check "it names the clip it skips" grep -q "skipping bad clip $cut_id " "$WORK/t2.log"
expect_eq "$(jq -r .bad_clips "$WORK/run2/metrics.jsonl" 2>/dev/null | tail -n1)" 1 "metrics count the skipped clip"
finish
