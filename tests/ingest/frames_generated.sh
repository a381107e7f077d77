#!/usr/bin/env bash
# Frame counts at the target rate (8 fps) for clips generated with the ffmpeg CLI, against
# (1) the closed form from the generator's known frame count and rate, and (2) ffprobe's
# decoded timestamps (lib.sh: source_end_frames). Asserted per source: frames +
# dropped_frames within one frame of ffprobe's count; frames = T*pt; dropped < pt;
# decoded_frames = the number of frames ffprobe decodes.
# Clips: constant 25 and 30000/1001 fps (testsrc2), mandelbrot at 12 fps, a variable
# frame rate clip (10 fps then 30 fps, concatenated), a clip jittered with setpts, and
# a clip with a non-zero start time (-output_ts_offset 2.5).
source "$(dirname "$0")/lib.sh"

SRC=$WORK/src
gen_src "$SRC/cfr25.mp4" testsrc2 160x120 25 4            # 100 frames, 4.0 s -> 32
gen_src "$SRC/ntsc.mp4" testsrc2 160x120 30000/1001 3     # 90 frames, 3.003 s -> 25
gen_src "$SRC/mandel.mp4" mandelbrot 160x120 12 3         # 36 frames, 3.0 s -> 24
gen "$SRC/vfr.mp4" -f lavfi -i testsrc2=size=160x120:rate=10:duration=2 \
  -f lavfi -i testsrc2=size=160x120:rate=30:duration=2 \
  -filter_complex "[0:v][1:v]concat=n=2:v=1[v]" -map "[v]" -fps_mode vfr \
  -c:v libx264 -preset ultrafast -pix_fmt yuv420p          # 20 + 60 frames, 4.0 s -> 32
gen "$SRC/jitter.mp4" -f lavfi -i testsrc2=size=160x120:rate=25:duration=3 \
  -vf "setpts='(N/25+0.012*sin(N))/TB'" -fps_mode vfr -video_track_timescale 1000 \
  -c:v libx264 -preset ultrafast -pix_fmt yuv420p
gen "$SRC/offset.mp4" -f lavfi -i testsrc2=size=160x120:rate=25:duration=4 \
  -c:v libx264 -preset ultrafast -pix_fmt yuv420p -output_ts_offset 2.5

# Closed forms (frames at 8 fps over the clip's span) for the constant-rate clips.
declare -A CLOSED=([cfr25.mp4]=32 [ntsc.mp4]=25 [mandel.mp4]=24 [vfr.mp4]=32 [offset.mp4]=32)

STORE=$WORK/store
tsr_ok "$WORK/ingest.log" "ingest generated clips" ingest "$SRC" --out "$STORE" --workers 2

for f in cfr25.mp4 ntsc.mp4 mandel.mp4 vfr.mp4 jitter.mp4 offset.mp4; do
  want=$(source_end_frames "$SRC/$f" 8)
  [ -n "${CLOSED[$f]:-}" ] && expect_eq "$want" "${CLOSED[$f]}" "$f: ffprobe-derived count matches the closed form"
  expect_eq "$(source_col "$STORE" "$f" status)" done "$f: status"
  expect_near "$(out_frames "$STORE" "$f")" "$want" 1 "$f: frames + dropped at 8 fps vs ffprobe"
  IFS='|' read -r T frames dropped dec <<<"$(clip_cols "$STORE" "$f" "c.T, c.frames, c.dropped_frames, c.decoded_frames")"
  expect_eq "$frames" $((T * 2)) "$f: frames = T*pt"
  check "$f: dropped ($dropped) < pt" [ "$dropped" -lt 2 ]
  ndec=$(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$SRC/$f")
  expect_eq "$dec" "$ndec" "$f: decoded_frames = frames ffprobe decodes"
done
# The offset clip starts at 2.5 s in its own timeline: start_s records that.
expect_near "$(clip_cols "$STORE" offset.mp4 start_s)" 2.5 0.05 "offset.mp4: start_s is the first frame's time"
verify_ok "$STORE" "index verify"
finish
