#!/usr/bin/env bash
# Frame counts at 8 fps of real clips (../shared/videos) against ffprobe's decoded
# timestamps (lib.sh: source_end_frames), within one frame: constant rate
# (testvideo.mp4, 29.97 fps), variable rate with dropped frames (goldeneye-vfr-drop3),
# video starting ~1 s after the container (delayed_start.mp4), Matroska with a slightly
# negative start (decord pancake) and Matroska without duration or frame count
# (issue-236-split-copy.mkv). Also: decoded_frames equals ffprobe's decoded count and
# start_s equals the first frame's timestamp.
source "$(dirname "$0")/lib.sh"
need_clips

FILES=(testvideo.mp4 goldeneye-vfr-drop3.mp4 delayed_start.mp4 decord__flipping_a_pancake.mkv
       issue-236-split-copy.mkv)
LIST=$WORK/list.txt
for f in "${FILES[@]}"; do echo "$VIDEOS/$f"; done >"$LIST"
STORE=$WORK/store
tsr_ok "$WORK/ingest.log" "ingest real clips" ingest "@$LIST" --out "$STORE" --workers 2

for f in "${FILES[@]}"; do
  want=$(source_end_frames "$VIDEOS/$f" 8)
  expect_eq "$(source_col "$STORE" "$f" status)" done "$f: status"
  expect_near "$(out_frames "$STORE" "$f")" "$want" 1 "$f: frames + dropped at 8 fps vs ffprobe"
  ndec=$(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$VIDEOS/$f")
  expect_eq "$(clip_cols "$STORE" "$f" c.decoded_frames)" "$ndec" "$f: decoded_frames"
  t0=$(ffprobe -v error -select_streams v:0 -show_entries frame=best_effort_timestamp_time \
         -read_intervals '%+#1' -of csv=p=0 "$VIDEOS/$f" | head -n 1)
  expect_near "$(clip_cols "$STORE" "$f" start_s)" "$t0" 0.05 "$f: start_s = first frame's timestamp"
done
verify_ok "$STORE" "index verify"
finish
