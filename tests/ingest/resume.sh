#!/usr/bin/env bash
# Crash safety: ingest a set of generated clips with one worker, kill -9 the process at
# random moments (4 times), then rerun until it finishes. The resumed store must equal
# an uninterrupted run's store (lib.sh canonical_dump: sources with status, clips with
# T, H, W, frames and checksum), hold no duplicate clip, and pass `tessera index verify`.
source "$(dirname "$0")/lib.sh"

SRC=$WORK/src
gen_set "$SRC" 12

REF=$WORK/ref
tsr_ok "$WORK/ref.log" "uninterrupted ingest" ingest "$SRC" --out "$REF" --workers 1
canonical_dump "$REF" >"$WORK/ref.dump"
nref=$(grep -c '^clip|' "$WORK/ref.dump" || true)
check "reference has clips of all 12 sources" [ "$(grep -c '^source|.*|done$' "$WORK/ref.dump")" -eq 12 ]

# Timing of a whole run, to place the kills inside it.
start=$(date +%s%N)
tsr "$WORK/time.log" ingest "$SRC" --out "$WORK/timing" --workers 1
run_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "one run takes ${run_ms} ms"

STORE=$WORK/store
RANDOM=${TEST_SEED:-$$}
for k in 1 2 3 4; do
  at=$(( 20 + RANDOM % (run_ms > 60 ? run_ms - 40 : 20) ))
  "$TESSERA_BIN" ingest "$SRC" --out "$STORE" --workers 1 >"$WORK/kill-$k.log" 2>&1 </dev/null &
  pid=$!
  bg_register "$pid"
  sleep_ms "$at"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  n=$( [ -f "$STORE/index.sqlite" ] && sql "$STORE" "SELECT COUNT(*) FROM sources;" 2>/dev/null || echo 0)
  echo "kill $k at ${at} ms: $n sources recorded"
done
for attempt in 1 2 3; do
  tsr "$WORK/resume-$attempt.log" ingest "$SRC" --out "$STORE" --workers 1
  [ "$RC" -eq 0 ] && break
done
expect_eq "$RC" 0 "resumed run finishes with exit 0"
canonical_dump "$STORE" >"$WORK/store.dump"
if cmp -s "$WORK/ref.dump" "$WORK/store.dump"; then
  pass "resumed store equals the uninterrupted one ($nref clips)"
else
  fail "resumed store differs from the uninterrupted one:"; diff "$WORK/ref.dump" "$WORK/store.dump" >&2 || true
fi
check "no duplicate clips" no_duplicate_clips "$STORE"
verify_ok "$STORE" "index verify after kill -9 and resume"
finish
