#!/usr/bin/env bash
# Output geometry after the display transform and the sample aspect ratio: for each
# source, the stored token grid (H, W) must equal the closed form of lib.sh's
# expected_grid (display width = w * SAR, swap for 90/270 rotation, short side -> 128,
# other side rounded to nearest, floor to 16-pixel patches) within one patch (the
# rounding of the resize may differ by a pixel), and the source columns (src_w, src_h,
# sar, rotation, pix_fmt) must match ffprobe.
# Sources: issue-134-rotate.mp4 (rotation -90 -> portrait), a generated clip with a
# 90-degree display rotation, issue-195-aspect-ratio.mp4 (704x576, SAR 16:11 -> 1024x576
# display), mmaction2__demo.mp4 (SAR 64:51), bear-vp9 (161x121, odd), roadtrip VP9
# 10-bit, generated yuv422p10le and yuv444p H.264 clips.
source "$(dirname "$0")/lib.sh"
need_clips

SRC=$WORK/src
mkdir -p "$SRC"
gen_src "$WORK/plain.mp4" testsrc2 320x180 10 2
gen_rotated "$SRC/gen-rot90.mp4" "$WORK/plain.mp4" 90
gen_src "$SRC/gen-422p10.mp4" testsrc2 320x240 10 2 -pix_fmt yuv422p10le
gen_src "$SRC/gen-444p.mp4" testsrc2 200x360 10 2 -pix_fmt yuv444p
REAL=(issue-134-rotate.mp4 issue-195-aspect-ratio.mp4 mmaction2__demo.mp4
      androidx-media__bear-vp9-odd-dimensions.webm androidx-media__roadtrip-vp92-10bit.webm)
PATHS=("$SRC"/*.mp4)
for f in "${REAL[@]}"; do PATHS+=("$VIDEOS/$f"); done

STORE=$WORK/store
tsr_ok "$WORK/ingest.log" "ingest" ingest "$SRC" "${REAL[@]/#/$VIDEOS/}" --out "$STORE" --workers 2

for p in "${PATHS[@]}"; do
  f=$(basename "$p")
  IFS='|' read -r w h pix <<<"$(probe "$p" width,height,pix_fmt)"
  read -r sn sd <<<"$(probe_sar "$p")"
  rot=$(probe_rotation "$p")
  read -r eH eW sh sw <<<"$(expected_grid "$w" "$h" "$sn" "$sd" "$rot" 128 16 16)"
  expect_eq "$(source_col "$STORE" "$f" status)" done "$f: status"
  IFS='|' read -r H W cw ch csn csd crot cpix <<<"$(clip_cols "$STORE" "$f" \
    "H, W, src_w, src_h, sar_num, sar_den, rotation, pix_fmt")"
  echo "$f: ${w}x${h} SAR $sn:$sd rot $rot -> scaled ${sw}x${sh}, grid want ${eH}x${eW} got ${H}x${W}"
  expect_near "$H" "$eH" 1 "$f: H (patches)"
  expect_near "$W" "$eW" 1 "$f: W (patches)"
  expect_eq "$cw x $ch" "$w x $h" "$f: src size"
  check "$f: SAR $csn:$csd = $sn:$sd" ratio_eq "$csn" "$csd" "$sn" "$sd"
  expect_eq "$crot" "$rot" "$f: rotation"
  expect_eq "$cpix" "$pix" "$f: pix_fmt"
done
# Orientation must follow the display: portrait for the rotated sources.
for f in issue-134-rotate.mp4 gen-rot90.mp4; do
  IFS='|' read -r H W <<<"$(clip_cols "$STORE" "$f" "H, W")"
  check "$f: portrait output (H=$H > W=$W)" [ "${H:-0}" -gt "${W:-0}" ]
done
# Display aspect of the SAR clip: 1024x576 -> 228x128 -> 14x8 patches.
expect_eq "$(clip_cols "$STORE" issue-195-aspect-ratio.mp4 "H || 'x' || W")" 8x14 "issue-195: 8x14 patches"
verify_ok "$STORE" "index verify"
finish
