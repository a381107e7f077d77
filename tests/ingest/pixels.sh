#!/usr/bin/env bash
# Pixels: `tessera index export` of a stored clip against the ffmpeg CLI's own
# fps + scale + crop output of the same source at the same size; PSNR >= 30 dB (ffmpeg's
# psnr filter over RGB planes, all frames).
#
# Alignment choices of the reference (so both sides show the same source frame):
# - time: `setpts=PTS-STARTPTS` puts the first frame at 0 (tessera's t_0), then
#   `fps=8` (round=near) is exactly ingest/decode.h's rule (tessera selects frames like the
#   fps filter);
#   `trim=end_frame=FRAMES` keeps the stored frames only (tessera drops the rest);
# - space: the CLI applies the display rotation itself (autorotate); the scale size is
#   lib.sh's closed form (SAR applied, short side 128, nearest), then conversion to RGB
#   (before the crop: cropping YUV 4:2:0 at an odd offset shifts chroma) and a centred
#   crop to the stored H*16 x W*16 with tessera's offsets (floor((in-out)/2); ffmpeg's
#   default rounds 5.5 to 6);
# - colour: the CLI converts with the source's tagged matrix/range (BT.601 when untagged),
#   and reads tessera's BT.709-tagged export back with its tags.
# The tolerance covers the scaler's filter differences, the export's lossy H.264 encode
# and a possible one-pixel difference of the resize rounding.
source "$(dirname "$0")/lib.sh"
need_clips

FILES=(testvideo.mp4 issue-134-rotate.mp4 issue-195-aspect-ratio.mp4
       androidx-media__roadtrip-vp92-10bit.webm)
STORE=$WORK/store
tsr_ok "$WORK/ingest.log" "ingest" ingest "${FILES[@]/#/$VIDEOS/}" --out "$STORE" --workers 2

for f in "${FILES[@]}"; do
  src=$VIDEOS/$f
  IFS='|' read -r id H W frames <<<"$(clip_cols "$STORE" "$f" "c.id, H, W, frames")"
  if [ -z "$id" ]; then fail "$f: no clip in the store"; continue; fi
  out=$WORK/$f.export.mp4
  tsr_ok "$WORK/export.log" "$f: export clip $id" index export "$STORE" --clip "$id" --out "$out"
  [ -f "$out" ] || { fail "$f: no exported file"; continue; }
  IFS='|' read -r w h <<<"$(probe "$src" width,height)"
  read -r sn sd <<<"$(probe_sar "$src")"
  read -r _ _ sh sw <<<"$(expected_grid "$w" "$h" "$sn" "$sd" "$(probe_rotation "$src")" 128 16 16)"
  expect_eq "$(probe "$out" width,height)" "$((W * 16))|$((H * 16))" "$f: exported frame size"
  nout=$(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$out")
  expect_eq "$nout" "$frames" "$f: exported frame count"
  ref="setpts=PTS-STARTPTS,fps=8,scale=$sw:$sh:flags=bicubic,format=rgb24"
  ref="$ref,crop=$((W * 16)):$((H * 16)):$(((sw - W * 16) / 2)):$(((sh - H * 16) / 2))"
  ref="$ref,setsar=1,trim=end_frame=$frames,format=gbrp"
  ffmpeg -nostdin -v info -i "$out" -i "$src" -filter_complex \
    "[1:v]$ref[ref];[0:v]setsar=1,format=gbrp[tsr];[tsr][ref]psnr=shortest=1" \
    -f null - >"$WORK/psnr.log" 2>&1 || { fail "$f: ffmpeg psnr run failed"; tail -n 5 "$WORK/psnr.log" >&2; continue; }
  expect_ge "$(psnr_avg "$WORK/psnr.log")" 30 "$f: PSNR (dB) of the export vs ffmpeg fps+scale+crop"
done
finish
