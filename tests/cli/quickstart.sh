#!/usr/bin/env bash
# tests/cli/quickstart.sh — the README's quick start runs as written: the block between
# its `quickstart` markers, run line by line in a fresh folder with `tessera` on PATH and
# a `my-videos/` folder of three clips made by the ffmpeg CLI (2, 5 and 13 s: the last is
# split by --max-seconds 10). Then its outputs are checked against what they must be: the
# store's clips and tokens against the index read with the sqlite3 CLI, a checkpoint at the
# step the command names, a report, and a sample whose frames and size ffprobe reads back
# as the command asked.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad/same/tally
scratch quickstart
ok() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1 ($2)" >&2; fi; }

block=$(sed -n '/<!-- quickstart/,/<!-- \/quickstart -->/p' "$SRC/README.md" | grep -v '^<!--' | grep -v '^```')
[ -n "$block" ] || { echo "FAIL: README.md has no quickstart block" >&2; exit 1; }
mkdir -p "$W/bin" "$W/my-videos"
ln -s "$T" "$W/bin/tessera"
ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=112x64:r=12" -t 2 "$W/my-videos/a.mp4"
ffmpeg -nostdin -v error -y -f lavfi -i "smptebars=s=112x64:r=25" -t 5 "$W/my-videos/b.mkv"
ffmpeg -nostdin -v error -y -f lavfi -i "mandelbrot=s=112x64:r=10" -t 13 "$W/my-videos/c.mp4"

cd "$W" || exit 1
while IFS= read -r line; do
  [ -n "$line" ] || continue
  echo "+ $line"
  if ! PATH="$W/bin:$PATH" bash -c "$line" >"$W/out.txt" 2>&1; then
    failed=$((failed + 1))
    echo "FAIL: the README's command failed: $line" >&2
    tail -n 20 "$W/out.txt" >&2
    break
  fi
  passed=$((passed + 1))
done <<<"$block"

sql() { sqlite3 "$W/store/index.sqlite" "$1" 2>/dev/null; }
# 2 s + 5 s + 13 s (split at 10 s) = 4 clips of 4 frames a second
ok "four clips in the store" '[ "$(sql "SELECT count(*) FROM clips")" = 4 ]'
ok "index stats agrees with the index" \
  '"$T" index stats store --json | jq -e --argjson n "$(sql "SELECT sum(tokens) FROM clips")" ".tokens == \$n" >/dev/null'
ckpt=$(grep -o 'run/ckpt-[0-9]*\.safetensors' <<<"$block" | head -n 1)
ok "the checkpoint the sample command reads ($ckpt)" '[ -s "$ckpt" ]'
ok "metrics with finite losses" '[ "$(jq -s "[.[] | select(.loss != null) | .loss | isinfinite or isnan] | length > 0 and all(. == false)" run/metrics.jsonl)" = true ]'
ok "report.html and report.png" '[ -s run/report.html ] && [ -s run/report.png ]'
frames=$(grep -o -- '--frames [0-9]*' <<<"$block" | awk '{print $2}')
size=$(grep -o -- '--size [0-9]*x[0-9]*' <<<"$block" | awk '{print $2}')
probe=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=codec_name,height,width,nb_read_frames -of csv=p=0 sample.mp4 2>/dev/null)
ok "sample.mp4: h264, ${size}, ${frames} frames (ffprobe: $probe)" '[ "$probe" = "h264,${size#*x},${size%x*},$frames" ]'
tally "quickstart"
