#!/usr/bin/env bash
# tests/ingest/hold_limit.sh — no input makes ingest write without bound (issue 40, 3): a
# source frame is held at most 10 s (DECODE_MAX_HOLD_S, docs/ingest.md), files made by the
# ffmpeg CLI:
# - a Y4M of 3 frames at 1 frame per 11.6 days (F1:1000000; it ingested for 98 s into a
#   36.9 GB shard) stores 10 s, ends as partial with a warning naming the file and the time;
# - an MKV whose timestamps jump by 3,600 s (it stored 14,392 copies of one frame) stores
#   the frames before the jump (the CLI's count) and 10 s of the last, cut there likewise;
# - a jump of 8 s (below the limit) is not cut: the clip has the CLI's frame count.
. "$(dirname "$0")/lib.sh"
FPS=4
SET=(--fps $FPS --short-side 32 --patch 1x4x4 --quiet)
# cli_frames SRC [-to E]: frames the CLI's fps filter writes at $FPS
cli_frames() {
  local src=$1
  shift
  ffmpeg -nostdin -v error -i "$src" "$@" -vf "fps=$FPS" -fps_mode passthrough -an -f framecrc - |
    grep -vc '^#'
}
gen "$WORK/slow.y4m" -f lavfi -i testsrc2=s=64x48:r=1:d=3 -pix_fmt yuv420p \
  -vf "settb=1/1,setpts=N*1000000" -r 1/1000000 -f yuv4mpegpipe
check "the Y4M says F1:1000000" grep -aq "^YUV4MPEG2 .*F1:1000000 " "$WORK/slow.y4m"
gen "$WORK/gap.mkv" -f lavfi -i testsrc2=s=64x48:r=4:d=4 -vf "setpts='if(gte(N,8),PTS+3600/TB,PTS)'" \
  -c:v libx264 -fps_mode vfr
gen "$WORK/gap8.mkv" -f lavfi -i testsrc2=s=64x48:r=4:d=4 -vf "setpts='if(gte(N,8),PTS+8/TB,PTS)'" \
  -c:v libx264 -fps_mode vfr

# tsr60 LOG ARGS...: tsr, ended after 60 s (the unbounded write took minutes)
tsr60() { local log=$1; shift; RC=0; timeout 60 "$TESSERA_BIN" "$@" >"$log" 2>&1 </dev/null || RC=$?; }
t0=$(date +%s)
tsr60 "$WORK/slow.log" ingest "$WORK/slow.y4m" --out "$WORK/s1" "${SET[@]}"
expect_eq "$RC" 0 "the Y4M ingests (a partial source)"
expect_eq "$(sql "$WORK/s1" "SELECT sum(frames + dropped_frames) FROM clips;")" $((10 * FPS)) \
  "the Y4M's first frame stored for 10 s"
expect_eq "$(sql "$WORK/s1" "SELECT partial FROM sources;")" 1 "the Y4M is a partial source"
check "the warning names the file and the time" \
  grep -q "partial: $WORK/slow.y4m: cut at 0.00 s: the frame there lasts 1000000 s" "$WORK/slow.log"
bytes=$(du -sb "$WORK/s1" | cut -f1)
check "the store stays small ($bytes bytes)" [ "$bytes" -lt 4000000 ]

before=$(cli_frames "$WORK/gap.mkv" -to 1.75)
tsr60 "$WORK/gap.log" ingest "$WORK/gap.mkv" --out "$WORK/s2" "${SET[@]}"
expect_eq "$RC" 0 "the MKV with a 3,600 s gap ingests (a partial source)"
expect_eq "$(sql "$WORK/s2" "SELECT sum(frames + dropped_frames) FROM clips;")" $((before + 10 * FPS)) \
  "the frames before the gap ($before, the CLI's) and 10 s of the last one"
check "the warning names the file and the time of the gap" \
  grep -q "partial: $WORK/gap.mkv: cut at 1.75 s: the frame there lasts 3600 s" "$WORK/gap.log"
check "both took seconds, not minutes ($(($(date +%s) - t0)) s)" [ $(($(date +%s) - t0)) -lt 60 ]

whole=$(cli_frames "$WORK/gap8.mkv")
tsr "$WORK/gap8.log" ingest "$WORK/gap8.mkv" --out "$WORK/s3" "${SET[@]}"
expect_eq "$RC" 0 "the MKV with an 8 s gap ingests"
expect_eq "$(sql "$WORK/s3" "SELECT sum(frames + dropped_frames) || ' ' || max(partial) FROM clips, sources;")" \
  "$whole 0" "an 8 s gap is kept whole: the CLI's $whole frames, not partial"
finish
