#!/usr/bin/env bash
# tests/train/report.sh — `tessera report RUN` (tools/report.py, docs/report.md), each page
# checked by tests/train/report_check.py: the HTML parses, every inlined image and video
# decodes, the plotted numbers equal metrics.jsonl's, a still strip per sample file, the
# memory report and the config on the page:
#  1. a finished run (validation, samples);
#  2. a run in progress (the trainer still writing: the page shows a prefix of its lines and
#     says it is training), and its metrics.jsonl with a torn last line (skipped, counted)
#     and a killed sample writer's temporary (left out);
#  3. that run killed and resumed: one run's steps, none twice;
#  4. a 2-rank run (mpirun): rank 0's files, the log's "[rank 0]" lines;
#  5. refusals: a directory that is not a run; a python without matplotlib says so.
source "$(dirname "$0")/lib.sh"
need_store
PY=/usr/bin/python3
"$PY" -c 'import matplotlib' 2>/dev/null ||
  { echo "SKIP: $PY lacks matplotlib (Debian's python3-matplotlib, tools/setup.sh)"; exit 77; }
CHECK=("$PY" "$SRC/tests/train/report_check.py")
RUN=(--config "$CONF" --data "$STORE" "${SMALL[@]}" --set model.num_classes=2
     --set train.val_clips=3 --set train.val_every=3 --set train.sample_every=3
     --set train.sample_steps=1 --set train.ckpt_every=3)

# 1. finished
$T train "${RUN[@]}" --out "$W/a" --steps 6 2>/dev/null
$T report "$W/a" | tee "$W/out"
grep -q "report: $W/a/report.html (up to step 6, 2 sample strips, 2 videos inline)" "$W/out" ||
  fail "report's line: $(cat "$W/out")"
"${CHECK[@]}" "$W/a" --state "not running"
# --out, --png and --max-videos 0: no video, the strips stay
$T report "$W/a" --out "$W/a.html" --png "$W/a.png" --max-videos 0 >/dev/null
[ -s "$W/a.png" ] && ! grep -q "<video" "$W/a.html" && grep -q "class='strip'" "$W/a.html" ||
  fail "--out/--png/--max-videos 0"

# 2. in progress: a long run, reported while it trains
train_bg "$W/p" 5 "${RUN[@]}" --set train.steps=400 --out "$W/p" --steps 400
pid=$BG
$T report "$W/p" >/dev/null
"${CHECK[@]}" "$W/p" --prefix --state training
kill -9 $pid; wait $pid 2>/dev/null || true
# a torn last line, as a crash mid-write leaves it
cp -r "$W/p" "$W/torn"
printf '{"step": 99, "loss": 0.5, "l' >>"$W/torn/metrics.jsonl"
# and the temporary of a sample writer killed mid-write (core/fs.h fs_atomic): not a sample
mkdir -p "$W/torn/samples" && printf partial >"$W/torn/samples/sample-99.mp4.tmp.4242.abcdef"
$T report "$W/torn" >/dev/null
"${CHECK[@]}" "$W/torn" --torn 1

# 3. resumed after the kill: from its last checkpoint, 3 steps on
last=$(ls "$W/p"/ckpt-*.safetensors | sed 's/.*ckpt-\([0-9]*\).*/\1/' | sort -n | tail -1)
$T train "${RUN[@]}" --set train.steps=400 --out "$W/p" --steps $((last + 3)) --resume 2>/dev/null
$T report "$W/p" >/dev/null
"${CHECK[@]}" "$W/p" --state "not running"
grep -c "memory per rank (model)" "$W/p/train.log" | grep -qx 2 ||
  fail "train.log should hold both starts: $(grep -c 'memory per rank (model)' "$W/p/train.log")"

# 4. two ranks
mpirun --oversubscribe -np 2 $T train "${RUN[@]}" --out "$W/m" --steps 3 2>/dev/null
grep -q '^\[rank 0\] train: memory per rank (model)' "$W/m/train.log" || fail "2-rank train.log"
$T report "$W/m" >/dev/null
"${CHECK[@]}" "$W/m" --state "not running"

# 5. refusals
expect_fail "tessera report: $W/none is not a run directory" $T report "$W/none"
mkdir -p "$W/empty"
expect_fail "has no metrics.jsonl" $T report "$W/empty"
mkdir -p "$W/nompl" && printf '#!/bin/sh\nexec %s -S -I "$@"\n' "$PY" >"$W/nompl/python3" &&
  chmod +x "$W/nompl/python3"
TESSERA_SYSTEM_PYTHON="$W/nompl/python3" expect_fail "lacks matplotlib: install Debian's python3-matplotlib" \
  $T report "$W/a"
echo "report: finished, in progress, torn, resumed and 2-rank runs reported and checked"
