#!/usr/bin/env bash
# tests/train/store.sh — fixture: a small labelled store of real clips for the train tests.
source "$(dirname "$0")/lib.sh"
rm -rf "$FIX"
mkdir -p "$FIX/src/people" "$FIX/src/scenes"
ln -s "$VIDEOS/mmaction2__demo.mp4" "$FIX/src/people/demo.mp4"
ln -s "$VIDEOS/decord__flipping_a_pancake.mkv" "$FIX/src/people/pancake.mkv"
ln -s "$VIDEOS/fades.mp4" "$FIX/src/scenes/fades.mp4"
ln -s "$VIDEOS/androidx-media__roadtrip-vp92-10bit.webm" "$FIX/src/scenes/roadtrip.webm"
$T ingest "$FIX/src" --out "$STORE" --fps 4 --short-side 64 --patch 2x16x16 --max-seconds 4 \
  --label-from-dir --workers 2
$T index stats "$STORE"
n=$(sqlite3 "$STORE/index.sqlite" "select count(*) from clips")
[ "$n" -ge 8 ] || fail "expected >= 8 clips, got $n"
echo "store fixture: $n clips"
