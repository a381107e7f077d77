#!/usr/bin/env bash
# tests/train/samples.sh — sample videos during training (train.sample_every):
#  1. RUN/samples/sample-STEP.mp4 at every sample_every steps and at the last step: H.264
#     of the store's frame rate, one clip per label side by side (2 labels here: the width
#     is 2 clips of the store's most common grid plus a one-token gap), as many frames as
#     that grid; the same file from a rerun (fixed seeds);
#  2. sampling leaves training alone: the losses and the final weights are bitwise those
#     of a run without samples, also when the sampled run stopped and resumed in between;
#  3. without labels: 4 clips of seeds 0-3; a .y4m when asked for by a build without media
#     is covered by tests/train/sample.sh (the same writer, tools/video.c);
#  4. on a terminal, the log line of a sample clears the progress line first.
source "$(dirname "$0")/lib.sh"
need_store
RUN=(--config "$CONF" --data "$STORE" "${SMALL[@]}" --set model.num_classes=2
     --set train.ckpt_keep=5 --set train.sample_steps=2)
$T train "${RUN[@]}" --out "$W/plain" --steps 7 2>/dev/null
$T train "${RUN[@]}" --set train.sample_every=3 --out "$W/s" --steps 7 2>"$W/s.log" ||
  { cat "$W/s.log"; fail "training with samples"; }
$T train "${RUN[@]}" --set train.sample_every=3 --out "$W/r" --steps 4 2>/dev/null
$T train "${RUN[@]}" --set train.sample_every=3 --out "$W/r" --steps 7 --resume 2>/dev/null
[ "$(ls "$W/s/samples" | grep -v '^samples\.jsonl$' | tr '\n' ' ')" = "sample-3.mp4 sample-6.mp4 sample-7.mp4 " ] ||
  fail "samples written: $(ls "$W/s/samples")"
# RUN/samples/samples.jsonl: one line per file, what it holds (model/train/samples.h)
[ "$(jq -c '[.step, .file, .labels, .seed, .frames, .height, .width, .steps]' "$W/s/samples/samples.jsonl" | tr '\n' ' ')" = \
  '[3,"sample-3.mp4",[0,1],0,16,64,96,2] [6,"sample-6.mp4",[0,1],0,16,64,96,2] [7,"sample-7.mp4",[0,1],0,16,64,96,2] ' ] ||
  fail "samples.jsonl: $(cat "$W/s/samples/samples.jsonl")"
grep -q "samples of the EMA weights (2 labels, 2 Euler steps, 8x4x6 tokens each)" "$W/s.log" ||
  fail "log: $(grep samples "$W/s.log")"
# the store's most common grid is 8x4x6 (pt 2, 16x16 patches): 16 frames of 64x96 each,
# side by side with a 16-pixel gap: 208 wide
probe() { ffprobe -v error -select_streams v:0 -count_frames \
  -show_entries stream=codec_name,width,height,nb_read_frames,r_frame_rate -of csv=p=0 "$1"; }
[ "$(probe "$W/s/samples/sample-6.mp4")" = "h264,208,64,4/1,16" ] ||
  fail "sample-6.mp4: $(probe "$W/s/samples/sample-6.mp4")"
for f in sample-3.mp4 sample-6.mp4 sample-7.mp4; do
  cmp "$W/s/samples/$f" "$W/r/samples/$f" || fail "$f differs between the run and the resumed run"
done
for r in s r; do same_run "$W/plain" "$W/$r" ckpt-7; done
# no labels: seeds 0-3 side by side
$T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --set train.sample_every=2 \
  --set train.sample_steps=1 --out "$W/u" --steps 2 2>"$W/u.log"
grep -q "samples of the EMA weights (seeds 0-3," "$W/u.log" || fail "unlabelled: $(grep samples "$W/u.log")"
[ "$(probe "$W/u/samples/sample-2.mp4")" = "h264,432,64,4/1,16" ] ||
  fail "unlabelled sample-2.mp4: $(probe "$W/u/samples/sample-2.mp4")"
# On a terminal the progress line is redrawn in place: the log line of a sample must first
# clear it (carriage return, erase line), not land after it (`script` gives a terminal).
# Which step's line is up when a sample is logged depends on timing (the line is redrawn
# at most every 0.2 s, core/log.c; the last step's is always drawn), so any step's.
script -qec "$T train --config $CONF --data $STORE ${SMALL[*]} --set train.sample_every=1 \
  --set train.sample_steps=1 --out $W/tty --steps 2" "$W/tty.txt" >/dev/null ||
  fail "training on a terminal"
grep -qE $'\r\033\[Ktrain: step [0-9]+/2 loss.*\r\033\[Ktrain: step [0-9]+: samples' "$W/tty.txt" ||
  fail "a log line did not clear the progress line: $(grep -a samples "$W/tty.txt" | cat -v)"
echo "samples: $(ls "$W/s/samples" | tr '\n' ' ')decode; losses and weights bitwise those without samples"
