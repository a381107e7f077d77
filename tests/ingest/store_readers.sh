#!/usr/bin/env bash
# Readers and writers of a store know of each other (issue 24, item 1). A `tessera train`
# holds a shared lock on its store for as long as it maps the shards, and says who it is in
# STORE/readers/. While it runs (frozen with SIGSTOP, so every writer acts while the
# reader has every shard mapped):
#   - a re-ingest of a changed source only appends (exit 0): its new clips go to a new
#     shard, the superseded blocks stay where the reader may read them;
#   - a second ingest's start-up recovery leaves the now unreferenced shard tail alone and
#     says which reader it waits for (exit 0, the shard's size unchanged);
#   - `index recover` is refused naming the reader (exit 1, nothing changed);
#   - `index merge` into the store only appends (exit 0, the shard unchanged);
# then the trainer finishes with exit 0. After it ended, `index recover` cuts the tail and
# the store verifies clean. (Before the reader lock, the second ingest cut the tail under
# the trainer, which died of SIGBUS when it next read the superseded clip.)
source "$(dirname "$0")/lib.sh"
A=(--fps 4 --short-side 32 --patch 1x4x4 --workers 1 --quiet)
SRC=$WORK/src S=$WORK/store
gen_set "$SRC" 3
# One worker writes the three sources into one shard, largest first: clip-00 (2 s, the
# smallest) is the shard's last block, so once superseded it is the shard's tail.
tsr_ok "$WORK/ingest.log" "ingest of 3 sources" ingest "$SRC" --out "$S" "${A[@]}"
shard=$(sql "$S" "SELECT shard FROM clips c JOIN sources s ON c.source_id = s.id WHERE $(src_is clip-00.mp4);")
size0=$(stat -c %s "$S/$shard")
TRAIN=(train --config "$TESSERA_SRC/configs/model/tiny.conf" --data "$S" --set model.pt=1
       --set model.ph=4 --set model.pw=4 --set train.global_batch=3 --set train.mem_tokens=4096
       --set train.log_every=1 --set train.ckpt_every=100 --set train.warmup=2)
"$TESSERA_BIN" "${TRAIN[@]}" --out "$WORK/run" --steps 8 >"$WORK/train.log" 2>&1 </dev/null &
trainer=$!
bg_register "$trainer"
# After its first step every clip (one batch holds all three) has been read once.
# (up to 2 min: under ASan on a loaded machine a first step takes tens of seconds)
for _ in $(seq 2400); do [ -s "$WORK/run/metrics.jsonl" ] && break; sleep_ms 50; done
kill -STOP "$trainer"
check "the trainer ran a step before it was frozen" test -s "$WORK/run/metrics.jsonl"
check "the trainer names itself in STORE/readers" grep -qs "pid $trainer on host" "$S"/readers/*

touch -d '2021-01-01 00:00:00' "$SRC/clip-00.mp4"
tsr_ok "$WORK/reingest.log" "a re-ingest of a changed source under a reader (appends)" \
  ingest "$SRC" --out "$S" "${A[@]}"
expect_eq "$(sql "$S" "SELECT COUNT(*) FROM clips c WHERE c.shard = '$shard';")" 2 \
  "the changed source's rows moved to a new shard"
tsr_ok "$WORK/second.log" "an ingest under a reader (nothing to do)" ingest "$SRC" --out "$S" "${A[@]}"
check "its recovery names the reader it leaves the shard tail for" \
  grep -q "read by .*pid $trainer on host" "$WORK/second.log"
expect_eq "$(stat -c %s "$S/$shard")" "$size0" "the shard the reader maps keeps its size after the ingests"
tsr "$WORK/recover.log" index recover "$S"
expect_eq "$RC" 1 "index recover under a reader: exit 1"
check "the refusal names the reader" grep -q "being read by .*pid $trainer on host" "$WORK/recover.log"
check "the refusal says nothing was changed" grep -q "Nothing was changed" "$WORK/recover.log"
gen_set "$WORK/other" 1
tsr_ok "$WORK/other.log" "another store" ingest "$WORK/other" --out "$WORK/o" "${A[@]}"
tsr_ok "$WORK/merge.log" "index merge into a store under a reader (appends)" index merge "$S" "$WORK/o"
expect_eq "$(stat -c %s "$S/$shard")" "$size0" "the shard the reader maps keeps its size after the merge"
alive=0; kill -0 "$trainer" 2>/dev/null && alive=1
expect_eq "$alive" 1 "the trainer was alive during the writes"
kill -CONT "$trainer"
RC=0; wait "$trainer" || RC=$?
expect_eq "$RC" 0 "the trainer finishes (exit 0; 135 is SIGBUS)"
[ "$RC" -eq 0 ] || tail -n 5 "$WORK/train.log" >&2
check "the trainer's entry in STORE/readers is gone" test -z "$(ls -A "$S/readers" 2>/dev/null)"
tsr_ok "$WORK/recover2.log" "index recover once the reader ended" index recover "$S"
check "it cuts the superseded tail" test "$(stat -c %s "$S/$shard")" -lt "$size0"
verify_ok "$S" "index verify after all writers"
finish
