#!/usr/bin/env bash
# tests/ingest/captions.sh — captions of videos: `tessera ingest --captions` takes
# VIDEO.caption.safetensors (a text_emb (N, D) tensor and a 'caption' text; written here by
# make_latents) beside each video as the caption of its clips:
# - a video with a caption file: every clip (cut at max seconds) points at one caption
#   block with the file's tokens, width and text; `index verify` is clean
# - a video without one: no caption; a malformed caption file fails its video, naming the
#   caption file and what is wrong, and leaves nothing in the shard (verify clean)
# - without --captions the files are ignored; --captions with --latents is refused
# - a pixel model with captions trains on the store and samples with --caption
source "$(dirname "$0")/lib.sh"
ML=${MAKE_LATENTS:?ctest sets MAKE_LATENTS to the make_latents binary}
SRCD=$WORK/src
gen_src "$SRCD/a.mp4" testsrc2 96x64 8 3
gen_src "$SRCD/b.mp4" mandelbrot 96x64 8 2
gen_src "$SRCD/c.mp4" testsrc2 96x64 8 2
"$ML" "$SRCD/a.mp4.caption.safetensors" --shape 1,1,1,1 --text 5,16 --caption "a test pattern"
echo "not a caption" >"$SRCD/c.mp4.caption.safetensors"
S=$WORK/store
tsr "$WORK/i.log" ingest "$SRCD" --out "$S" --fps 4 --short-side 32 --patch 1x8x8 --max-seconds 1 --captions --quiet
expect_eq "$RC" 2 "one caption file is malformed: exit 2"
expect_eq "$(sql "$S" "SELECT count(*) || ' ' || count(DISTINCT c.caption_offset) || ' ' || min(c.caption_tokens) || 'x' || min(c.caption_dim) || ' ' || min(c.caption) FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is a.mp4)")" \
  "3 1 5x16 a test pattern" "a.mp4: 3 clips, one caption block of 5x16 with its text"
expect_eq "$(sql "$S" "SELECT count(*) || ' ' || count(c.caption) FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is b.mp4)")" \
  "2 0" "b.mp4 (no caption file): 2 clips without caption"
r=$(source_col "$S" c.mp4 error)
if [[ $r == *"$SRCD/c.mp4.caption.safetensors"* ]] && [[ $r == *"header size"* || $r == *"safetensors"* ]]; then
  pass "c.mp4 failed, naming its caption file: $r"
else fail "c.mp4: reason '$r'"; fi
expect_eq "$(source_col "$S" c.mp4 status)" failed "c.mp4 failed"
verify_ok "$S" "index verify: clean (the failed video left nothing)"
tsr_ok "$WORK/n.log" "ingest without --captions" ingest "$SRCD/a.mp4" --out "$WORK/plain" --fps 4 --short-side 32 --patch 1x8x8 --quiet
expect_eq "$(sql "$WORK/plain" "SELECT count(caption) FROM clips")" 0 "without --captions: no caption"
tsr "$WORK/l.log" ingest --latents "$SRCD" --out "$WORK/x" --captions
expect_eq "$RC" 1 "--captions with --latents: refused"
# a pixel model with captions: trains on them, samples for one
C=(--config "$TESSERA_SRC/configs/model/tiny.conf" --set model.pt=1 --set model.ph=8
   --set model.pw=8 --set model.text_dim=16 --set model.text_len=8 --set train.global_batch=4
   --set train.log_every=1 --set train.warmup=1)
tsr_ok "$WORK/t.log" "a pixel text model trains 3 steps" train "${C[@]}" --data "$S" --out "$WORK/run" --steps 3
tsr_ok "$WORK/s.log" "and samples with --caption" sample --ckpt "$WORK/run/ckpt-3.safetensors" \
  --frames 2 --size 32x48 --steps 2 --caption "$SRCD/a.mp4.caption.safetensors" --cfg 2 --out "$WORK/s.mp4"
check "the sample is a video" test -s "$WORK/s.mp4"
finish
