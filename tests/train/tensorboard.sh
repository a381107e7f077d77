#!/usr/bin/env bash
# tests/train/tensorboard.sh — train.tensorboard = 1 (model/train/tensorboard.h), read back
# with TensorBoard's own reader (tests/train/tensorboard_check.py, the venv's `tensorboard`
# of tools/setup_venv.sh) against metrics.jsonl, every value equal as float32:
#  1. a fresh run with validation (step-0 line, per-level and per-bucket losses);
#  2. a torn last record (the file cut inside it, as a crash mid-write leaves it): the
#     reader still reads every whole record (its CRCs are checked: a flipped byte is caught);
#  3. that run resumed: the torn record and the steps after its checkpoint are cut, the
#     file reads as one run;
#  4. a run killed with SIGKILL at an arbitrary step, then resumed: the same;
#  5. without train.tensorboard no event file is written;
#  6. with train.sample_every, each sample is an image at its step (4 of its frames, checked
#     against the video's frames decoded by ffmpeg).
source "$(dirname "$0")/lib.sh"
need_store
. "$(dirname "$0")/../venv.sh"
need_venv tensorboard  # TensorBoard's own reader
CHECK=("$PY" "$SRC/tests/train/tensorboard_check.py")
RUN=(--config "$CONF" --data "$STORE" "${SMALL[@]}" --set train.ckpt_every=2
     --set train.val_clips=3 --set train.val_every=3 --set train.tensorboard=1)
events() { ls "$1"/tensorboard/events.out.tfevents.*; }

$T train "${RUN[@]}" --out "$W/a" --steps 6 2>/dev/null
[ "$(jq -s length "$W/a/metrics.jsonl")" = 7 ] || fail "metrics.jsonl: expected 7 lines (step 0 and 1-6)"

# 2. torn: the file cut 5 bytes before its end, inside the last record (step 6), as a crash
#    while writing it leaves it: before step 6's checkpoint, which comes after its metrics
cp -r "$W/a" "$W/t"
rm "$W/t/ckpt-6.safetensors"
ev=$(events "$W/t")
truncate -s -5 "$ev"
cp -r "$W/t" "$W/t0"  # checked below, with the others (one import of TensorBoard)
# ... and a flipped byte is caught by TensorBoard's CRC check (the check can fail)
cp -r "$W/a" "$W/c"
printf '\xff' | dd of="$(events "$W/c")" bs=1 seek=100 conv=notrunc status=none
if "${CHECK[@]}" "$W/c" >/dev/null 2>&1; then fail "a corrupted record was read as valid"; fi

# 3. resume from ckpt-4 after the torn write: step 5 and the torn record are cut, 5-10 appended
$T train "${RUN[@]}" --out "$W/t" --steps 10 --resume 2>/dev/null
# the same numbers as a run straight to 10 (timings aside: they are measured)
$T train "${RUN[@]}" --out "$W/s" --steps 10 2>/dev/null
same() { jq -c '{step, loss, lr, grad_norm, val_loss, val_t, val_bucket}' "$1/metrics.jsonl"; }
diff <(same "$W/s") <(same "$W/t") || fail "the resumed run's metrics differ from the straight run's"

# 4. SIGKILL at some step (after at least 5 metric lines), resumed from its last checkpoint
train_bg "$W/k" 6 "${RUN[@]}" --set train.steps=400 --out "$W/k" --steps 400
pid=$BG
kill -9 $pid; wait $pid 2>/dev/null || true
killed_at=$(tail -1 "$W/k/metrics.jsonl" | jq .step)
$T train "${RUN[@]}" --set train.steps=400 --out "$W/k" --steps $((killed_at + 3)) --resume 2>/dev/null
echo "killed after step $killed_at, resumed to $((killed_at + 3))"
# 6. samples as images (steps 2 and 4)
$T train "${RUN[@]}" --set train.sample_every=2 --set train.sample_steps=4 --out "$W/i" --steps 4 2>/dev/null
[ "$(ls "$W/i/samples" | grep -c '\.mp4$')" -eq 2 ] || fail "samples: $(ls "$W/i/samples")"
"${CHECK[@]}" "$W/a" "$W/t0:torn" "$W/t" "$W/s" "$W/k" "$W/i" | tee "$W/check.out"
grep -q "$W/i: .* 2 sample images" "$W/check.out" || fail "the samples' images were not checked"

# 5. off by default
$T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --out "$W/off" --steps 2 2>/dev/null
[ ! -e "$W/off/tensorboard" ] || fail "train.tensorboard = 0 wrote $W/off/tensorboard"
echo "tensorboard: event files equal metrics.jsonl (fresh, torn, resumed, killed and resumed)"
