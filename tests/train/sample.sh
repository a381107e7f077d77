#!/usr/bin/env bash
# tests/train/sample.sh — `tessera sample` writes a playable H.264 MP4 of the requested
# size and frame count (ffprobe decodes every frame; without --frames and --size the
# store's, said on the log), with EMA or raw weights, with
# guidance by label name or id; the same seed gives the same video; bad options fail.
source "$(dirname "$0")/lib.sh"
need_store
$T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --set model.num_classes=2 --out "$W/run" --steps 3 2>/dev/null
CK=$W/run/ckpt-3.safetensors
probe() { ffprobe -v error -select_streams v:0 -count_frames \
  -show_entries stream=codec_name,width,height,nb_read_frames -of csv=p=0 "$1"; }
$T sample --ckpt "$CK" --frames 8 --size 32x48 --steps 4 --out "$W/a.mp4"
[ "$(probe "$W/a.mp4")" = "h264,48,32,8" ] || fail "a.mp4: $(probe "$W/a.mp4")"
$T sample --ckpt "$CK" --frames 6 --size 64x80 --steps 3 --label scenes --cfg 3 --raw --seed 5 --out "$W/b.mp4"
[ "$(probe "$W/b.mp4")" = "h264,80,64,6" ] || fail "b.mp4: $(probe "$W/b.mp4")"
$T sample --ckpt "$CK" --frames 6 --size 64x80 --steps 3 --label 1 --cfg 3 --raw --seed 5 --out "$W/c.mp4"
cmp "$W/b.mp4" "$W/c.mp4" || fail "label by name and by id differ"
# no --frames, no --size: the store's (4 fps: 2 s = 8 frames; short side 64, 16:9 = 64x112),
# the same video as with them given
$T sample --ckpt "$CK" --steps 3 --seed 2 --out "$W/d.mp4" 2>"$W/d.err"
[ "$(probe "$W/d.mp4")" = "h264,112,64,8" ] || fail "d.mp4 (defaults): $(probe "$W/d.mp4")"
grep -q "sample: --frames 8 --size 64x112 from checkpoint .*'s store (4/1 fps, short side 64" "$W/d.err" ||
  fail "the defaults are not said: $(head -2 "$W/d.err")"
$T sample --ckpt "$CK" --frames 8 --size 64x112 --steps 3 --seed 2 --out "$W/e.mp4" 2>/dev/null
cmp "$W/d.mp4" "$W/e.mp4" || fail "the defaults' video differs from the one with them given"
$T sample --ckpt "$CK" --frames 4 --steps 3 --out "$W/f.mp4" 2>/dev/null
[ "$(probe "$W/f.mp4")" = "h264,112,64,4" ] || fail "f.mp4 (--frames only): $(probe "$W/f.mp4")"
fr=$(ffprobe -v error -select_streams v:0 -show_entries stream=r_frame_rate -of csv=p=0 "$W/a.mp4")
[ "$fr" = "4/1" ] || fail "frame rate $fr, want the store's 4/1"
# .y4m (what a build without media writes): YUV4MPEG2 4:4:4 that ffprobe reads as 8 frames.
$T sample --ckpt "$CK" --frames 8 --size 32x48 --steps 4 --out "$W/a.y4m"
head -c 40 "$W/a.y4m" | head -1 | grep -q "^YUV4MPEG2 W48 H32 F4:1 Ip A1:1 C444$" || fail "a.y4m header: $(head -1 "$W/a.y4m")"
[ "$(stat -c %s "$W/a.y4m")" -eq $(( $(head -1 "$W/a.y4m" | wc -c) + 8 * (6 + 3 * 48 * 32) )) ] || fail "a.y4m size"
[ "$(probe "$W/a.y4m")" = "rawvideo,48,32,8" ] || fail "a.y4m: $(probe "$W/a.y4m")"
expect_fail "multiples" $T sample --ckpt "$CK" --frames 5 --size 32x48 --out "$W/x.mp4"
expect_fail "multiples" $T sample --ckpt "$CK" --frames 4 --size 30x48 --out "$W/x.mp4"
expect_fail "not a class" $T sample --ckpt "$CK" --frames 4 --size 32x48 --label dogs --out "$W/x.mp4"
expect_fail "needs --label or --caption" $T sample --ckpt "$CK" --frames 4 --size 32x48 --cfg 2 --out "$W/x.mp4"
expect_fail "missing --ckpt" $T sample --frames 4 --size 32x48 --out "$W/x.mp4"
expect_fail "nope.safetensors" $T sample --ckpt "$W/nope.safetensors" --frames 4 --size 32x48 --out "$W/x.mp4"
[ ! -e "$W/x.mp4" ] && ! ls "$W"/x.mp4* >/dev/null 2>&1 || fail "a refused sample left a file"
echo "sample: $(probe "$W/a.mp4") and $(probe "$W/b.mp4") decode"
