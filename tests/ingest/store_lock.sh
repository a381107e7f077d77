#!/usr/bin/env bash
# One writer per store: while an ingest writes to STORE, a second ingest into STORE is
# refused (exit 1, a message naming the holder: pid, host, command, since) and changes
# nothing; `index recover` and `index merge` into it are refused too; `index verify` says
# a writer is active. After the first ingest finishes the store verifies clean and equals
# a store ingested alone. (Before the lock, the second process's start-up recovery cut
# and deleted the shards the first was writing; both exited as if nothing happened.)
source "$(dirname "$0")/lib.sh"
A=(--fps 4 --short-side 32 --patch 1x4x4 --max-seconds 2)

SRC=$WORK/src OTHER=$WORK/other
gen_set "$SRC" 4
gen_set "$OTHER" 2
S=$WORK/store
# The first writer is kept busy for a few seconds by one long clip, one worker, 60 fps.
gen_src "$SRC/long.mp4" testsrc2 320x240 30 40
"$TESSERA_BIN" ingest "$SRC" --out "$S" "${A[@]}" --fps 60 --workers 1 --quiet >"$WORK/first.log" 2>&1 </dev/null &
first=$!
bg_register "$first"
for _ in $(seq 100); do [ -s "$S/lock" ] && break; sleep_ms 50; done
check "the first writer wrote its details into STORE/lock" grep -q "pid $first on host" "$S/lock"
# Freeze the holder while the others knock: the lock must stay held however slowly they
# start (a CUDA build loads cuBLASLt/cuDNN at every start; CI runs tests side by side).
kill -STOP "$first"
ls -l "$S/shards" >"$WORK/shards-before" 2>/dev/null || true
tsr "$WORK/second.log" ingest "$OTHER" --out "$S" "${A[@]}" --fps 60 --quiet
expect_eq "$RC" 1 "second ingest into a store being written: exit 1"
check "refusal names the holder's pid" grep -q "being written by another process (pid $first on host" "$WORK/second.log"
check "refusal names the holder's command and since when" grep -q "command '.*ingest.*', since " "$WORK/second.log"
tsr "$WORK/recover.log" index recover "$S"
expect_eq "$RC" 1 "index recover of a store being written: exit 1"
check "recover refusal names the holder" grep -q "pid $first" "$WORK/recover.log"
tsr "$WORK/verify-busy.log" index verify "$S"
check "index verify notes the active writer" grep -q "note: a writer is active on .*pid $first" "$WORK/verify-busy.log"
still=0; kill -0 "$first" 2>/dev/null && still=1
expect_eq "$still" 1 "the first writer was still alive during the checks"
kill -CONT "$first"
RC=0; wait "$first" || RC=$?
expect_eq "$RC" 0 "first ingest finishes with exit 0"
verify_ok "$S" "index verify after both"
expect_eq "$(sql "$S" "SELECT COUNT(*) FROM sources WHERE status = 'done';")" 5 "the first ingest's 5 sources are all done"
tsr_ok "$WORK/ref.log" "reference ingest alone" ingest "$SRC" --out "$WORK/ref" "${A[@]}" --fps 60 --workers 1 --quiet
canonical_dump "$S" >"$WORK/s.dump"; canonical_dump "$WORK/ref" >"$WORK/ref.dump"
check "store equals one ingested alone" cmp -s "$WORK/s.dump" "$WORK/ref.dump"
# The lock died with its holder: the next writer gets it.
tsr_ok "$WORK/third.log" "an ingest after the first ended takes the lock" ingest "$OTHER" --out "$S" "${A[@]}" --fps 60 --quiet
verify_ok "$S" "index verify after the third ingest"
# A writer killed with -9 does not block the next one.
"$TESSERA_BIN" ingest "$SRC/long.mp4" --out "$WORK/k" "${A[@]}" --fps 60 --quiet >/dev/null 2>&1 </dev/null &
k=$!; bg_register "$k"
for _ in $(seq 100); do [ -s "$WORK/k/lock" ] && break; sleep_ms 50; done
kill -9 "$k"; wait "$k" 2>/dev/null || true
tsr_ok "$WORK/k2.log" "ingest after a writer was killed -9" ingest "$SRC/long.mp4" --out "$WORK/k" "${A[@]}" --fps 60 --quiet
finish
