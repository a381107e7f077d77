#!/usr/bin/env bash
# Bad input: every broken source gets its own row with a clear reason, the run goes on
# (exit 2), the good sources are ingested, nothing crashes, the store verifies.
#   decord__corrupted.mp4  corrupt NAL units: done with the damage noted, or failed
#   jcodec__test.mkv       truncated at 100 KiB: 1 decodable frame of 0.04 s, shorter than
#                          half an output frame at 8 fps (the ffmpeg CLI's fps filter gives
#                          0 frames too) -> failed, the reason says it is truncated
#   half.mkv               a generated 6 s clip cut in half -> done, partial=1, prefix kept
#   audio.mp4              audio only (lavfi sine) -> failed
#   text.mp4               a text file -> failed
#   empty.mp4              0 bytes -> failed
#   dangling.mp4           directory entry that is a dangling symlink (tests run as root,
#                          so chmod 000 would not make a file unreadable) -> failed
#   missing.mp4            listed in @list but does not exist -> failed
#   huge.mp4               640x480 with --max-pixels 100000 (absurd size guard) -> failed
# Then --retry-failed retries the failed ones (still failed, no duplicate rows).
source "$(dirname "$0")/lib.sh"
need_clips

BAD=$WORK/bad
gen_src "$BAD/good-a.mp4" testsrc2 160x120 25 2
gen_src "$BAD/good-b.mp4" mandelbrot 160x120 25 2
gen "$BAD/audio.mp4" -f lavfi -i sine=frequency=440:duration=1 -c:a aac
echo "this is not a video" >"$BAD/text.mp4"
: >"$BAD/empty.mp4"
ln -s "$WORK/does-not-exist.mp4" "$BAD/dangling.mp4"
gen "$WORK/full.mkv" -f lavfi -i testsrc2=s=160x120:r=24:d=6 -g 12
head -c $(( $(stat -c %s "$WORK/full.mkv") / 2 )) "$WORK/full.mkv" >"$BAD/half.mkv"
LIST=$WORK/list.txt
printf '%s\n' "$VIDEOS/decord__corrupted.mp4" "$VIDEOS/jcodec__test.mkv" "$WORK/missing.mp4" >"$LIST"

STORE=$WORK/store
tsr "$WORK/ingest.log" ingest "$BAD" "@$LIST" --out "$STORE" --patch 1x16x16 --workers 2
expect_eq "$RC" 2 "exit status with some sources failed"
cat "$WORK/ingest.log"

for f in good-a.mp4 good-b.mp4; do
  expect_eq "$(source_col "$STORE" "$f" status)" done "$f: ingested"
  check "$f: has clips" [ "$(sql "$STORE" "SELECT COUNT(*) FROM clips c JOIN sources s ON c.source_id = s.rowid WHERE $(src_is "$f");")" -ge 1 ]
done
for f in audio.mp4 text.mp4 empty.mp4 dangling.mp4 missing.mp4; do
  IFS='|' read -r status err <<<"$(sql "$STORE" "SELECT s.status, REPLACE(s.error, char(10), ' ') FROM sources s WHERE $(src_is "$f");")"
  expect_eq "$status" failed "$f: status"
  check "$f: reason recorded ('$err')" [ -n "$err" ]
  check "$f: named in the summary" grep -q "$f" "$WORK/ingest.log"
  expect_eq "$(sql "$STORE" "SELECT COUNT(*) FROM clips c JOIN sources s ON c.source_id = s.rowid WHERE $(src_is "$f");")" 0 "$f: no clips"
done
check "audio.mp4: reason says there is no video stream" \
  grep -qi 'video' <<<"$(source_col "$STORE" audio.mp4 error)"

IFS='|' read -r status err <<<"$(sql "$STORE" "SELECT s.status, REPLACE(COALESCE(s.error, ''), char(10), ' ') FROM sources s WHERE $(src_is jcodec__test.mkv);")"
expect_eq "$status" failed "jcodec__test.mkv (truncated to one frame): status"
check "jcodec__test.mkv: reason says truncated ('$err')" grep -q truncated <<<"$err"
IFS='|' read -r status partial nclips frames <<<"$(sql "$STORE" "SELECT s.status, s.partial, (SELECT COUNT(*) FROM clips c WHERE c.source_id = s.rowid), (SELECT SUM(frames) FROM clips c WHERE c.source_id = s.rowid) FROM sources s WHERE $(src_is half.mkv);")"
expect_eq "$status" done "half.mkv (truncated): status"
expect_eq "$partial" 1 "half.mkv: partial"
check "half.mkv: decodable prefix kept ($nclips clips, $frames of 48 frames)" [ "${frames:-0}" -ge 8 -a "${frames:-0}" -lt 48 ]

IFS='|' read -r status partial err <<<"$(sql "$STORE" "SELECT s.status, s.partial, REPLACE(COALESCE(s.error, ''), char(10), ' ') FROM sources s WHERE $(src_is decord__corrupted.mp4);")"
echo "decord__corrupted.mp4: status=$status partial=$partial note='$err'"
check "decord__corrupted.mp4: recorded as failed, or done with its damage noted" \
  [ "$status" = failed -o \( "$status" = done -a \( -n "$err" -o "$partial" = 1 \) \) ]
verify_ok "$STORE" "index verify with failed sources"

nsrc=$(sql "$STORE" "SELECT COUNT(*) FROM sources;")
tsr "$WORK/retry.log" ingest "$BAD" "@$LIST" --out "$STORE" --patch 1x16x16 --retry-failed
expect_eq "$RC" 2 "--retry-failed: the broken sources fail again"
expect_eq "$(sql "$STORE" "SELECT COUNT(*) FROM sources;")" "$nsrc" "--retry-failed adds no source row"
check "no duplicate clips" no_duplicate_clips "$STORE"
verify_ok "$STORE" "index verify after --retry-failed"

# Absurd size: a frame larger than --max-pixels (640x480 > 100000 pixels) is refused
# before decoding; a small clip beside it is ingested.
gen_src "$WORK/big/huge.mp4" testsrc2 640x480 25 1
gen_src "$WORK/big/small.mp4" testsrc2 160x120 25 1
tsr "$WORK/big.log" ingest "$WORK/big" --out "$WORK/big-store" --max-pixels 100000
expect_eq "$RC" 2 "huge.mp4: run reports a failed source"
expect_eq "$(source_col "$WORK/big-store" huge.mp4 status)" failed "huge.mp4 (over --max-pixels): status"
check "huge.mp4: reason recorded" [ -n "$(source_col "$WORK/big-store" huge.mp4 error)" ]
expect_eq "$(source_col "$WORK/big-store" small.mp4 status)" done "small.mp4 beside it: done"
finish
