#!/usr/bin/env bash
# tests/sched/timeline.sh — `tessera plan --timeline FILE.png` (sched/plan_timeline.h,
# tools/plan_timeline.py): the picture's boxes are the plan of --json's step 0 with its
# predicted times (tests/sched/timeline_check.py), on 32 ranks and on 4,096 (the summary of
# many ranks: drawn from the same data, in seconds), under 200 KB, and at train.zero = 2
# (ZeRO's time after the boxes at most its exposed time); --timeline refuses a
# name that is not FILE.png, and a python without matplotlib is named.
set -euo pipefail
BIN=${TESSERA_BIN:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}
. "$SRC/tests/shared.sh"
need_shared lengths
LEN=$TESSERA_SHARED/lengths
PY=/usr/bin/python3
"$PY" -c 'import matplotlib, PIL' 2>/dev/null ||
  { echo "SKIP: $PY lacks matplotlib (Debian's python3-matplotlib, tools/setup.sh)"; exit 77; }
W=$(mktemp -d /tmp/tsr_timeline.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
MIX="$LEN/ucf101_clips.csv:0.8,$LEN/youcook2_videos.csv:0.2"
BASE=(--lengths "$MIX" --tokens-per-second 1800 --max-seconds 120 --gpus-per-node 8
      --cost "$SRC/configs/cost/h100-dit1b.conf")
for ranks in 32 4096; do
  batch=$((ranks * 2))
  t0=$(date +%s.%N)
  "$BIN" plan "${BASE[@]}" --ranks $ranks --mem-tokens 32768 --global-batch $batch \
    --json "$W/p$ranks.json" --timeline "$W/t$ranks.png" >"$W/out" ||
    { cat "$W/out"; fail "plan --timeline on $ranks ranks"; }
  grep -q "plan_timeline: $W/t$ranks.png (" "$W/out" || fail "no line of the picture: $(tail -2 "$W/out")"
  "$PY" "$SRC/tests/sched/timeline_check.py" "$W/p$ranks.json" "$W/t$ranks.json" "$W/t$ranks.png"
  size=$(stat -c %s "$W/t$ranks.png")
  [ "$size" -lt 200000 ] || fail "t$ranks.png is $size bytes (>= 200 KB)"
  echo "ok: $ranks ranks, $size bytes, $(echo "$(date +%s.%N) - $t0" | bc) s"
done
# train.zero = 2 (the model's sizes from --config): waves in lockstep, ZeRO's exposed time
# between and after the boxes, in the timeline and its title
"$BIN" plan "${BASE[@]}" --ranks 32 --mem-bytes 80000000000 --config "$SRC/configs/model/dit-1b.conf" \
  --set train.zero=2 --global-batch 64 --json "$W/pz.json" --timeline "$W/tz.png" >"$W/out" ||
  { cat "$W/out"; fail "plan --timeline at train.zero = 2"; }
"$PY" "$SRC/tests/sched/timeline_check.py" "$W/pz.json" "$W/tz.json" "$W/tz.png"
"$PY" -c 'import json, sys; assert all(p["zero_s"] > 0 for p in json.load(open(sys.argv[1]))["plans"])' \
  "$W/tz.json" || fail "train.zero = 2: no ZeRO time in the timeline's plans"
# the check can fail: a picture drawn from another batch's plan is caught
"$BIN" plan "${BASE[@]}" --ranks 32 --mem-tokens 32768 --global-batch 64 --seed 9 \
  --timeline "$W/other.png" >/dev/null
if "$PY" "$SRC/tests/sched/timeline_check.py" "$W/p32.json" "$W/other.json" "$W/other.png" \
     >/dev/null 2>&1; then fail "another batch's picture passed the check"; fi
# refusals
rc=0; "$BIN" plan "${BASE[@]}" --ranks 32 --mem-tokens 32768 --timeline "$W/t.jpg" 2>"$W/err" || rc=$?
[ $rc = 1 ] && grep -q -- "--timeline $W/t.jpg: give a FILE.png" "$W/err" || fail "t.jpg: $(cat "$W/err")"
printf '#!/bin/sh\nexec %s -S -I "$@"\n' "$PY" >"$W/py" && chmod +x "$W/py"
rc=0; TESSERA_SYSTEM_PYTHON="$W/py" "$BIN" plan "${BASE[@]}" --ranks 32 --mem-tokens 32768 \
  --timeline "$W/n.png" >/dev/null 2>"$W/err" || rc=$?
[ $rc = 1 ] && grep -q "lacks matplotlib" "$W/err" || fail "no matplotlib: rc $rc $(cat "$W/err")"
echo "timeline: the pictures' boxes are the plans they were drawn from"
