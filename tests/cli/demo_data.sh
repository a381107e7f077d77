#!/usr/bin/env bash
# tests/cli/demo_data.sh — the learning demo's data and its reading of captions (docs/demo.md,
# without training: tools/demo_clips.sh at 2 clips a kind
# 1. makes the same files in two folders (its draws once ran in subshells, which bash
#    reseeds), and a rerun remakes only a file whose recorded draws changed;
# 2. writes a manifest that `tessera manifest` reads whole (6 rows, each with a caption)
#    and `tessera ingest --manifest --label-from-dir` turns into 6 clips, each with its
#    caption's text and its folder's label, and a palette of every colour word;
# 3. tools/sample_stats.py --palette/--caption reads a made-up sample, an orange band over
#    a violet one, as the caption "an orange moon over a violet sky" names it: both words
#    found, rows explaining all of its luma variance.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, fail
scratch demo-data
PY=python3  # Debian's numpy is /usr/bin/python3's (tools/run.sh does the same)
python3 -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3

# 1. the same files twice; a rerun keeps them; a changed draw remakes that file alone
"$SRC/tools/demo_clips.sh" "$W/a" 2 || fail "demo_clips.sh failed"
"$SRC/tools/demo_clips.sh" "$W/b" 2 || fail "demo_clips.sh failed (second folder)"
diff -r "$W/a" "$W/b" >/dev/null || fail "two runs made different files: $(diff -rq "$W/a" "$W/b" | head -3)"
stamp() { stat -c '%n %y' "$W"/a/*/*.mp4; }  # modification times to the nanosecond
before=$(stamp)
"$SRC/tools/demo_clips.sh" "$W/a" 2
[ "$(stamp)" = "$before" ] || fail "a rerun remade files"
sed -i 's#^sea/w1.mp4|1|#sea/w1.mp4|1.5|#' "$W/a/recipes.txt"
"$SRC/tools/demo_clips.sh" "$W/a" 2
changed=$(diff <(echo "$before") <(stamp) | sed -n 's#^> .*/a/\([a-z]*/[a-z0-9]*\.mp4\) .*#\1#p')
[ "$changed" = sea/w1.mp4 ] || fail "a changed recipe remade '$changed', not sea/w1.mp4 alone"
cmp -s "$W/a/sea/w1.mp4" "$W/b/sea/w1.mp4" || fail "the remade file differs from the first run's"
echo "ok: the same 6 files in two folders; a rerun keeps them; a changed draw remakes its file"

# 2. the manifest, its ingest and the palette
[ "$(head -1 "$W/a/demo.csv")" = "path,start,end,caption" ] || fail "manifest header: $(head -1 "$W/a/demo.csv")"
"$T" manifest "$W/a/demo.csv" --jsonl >"$W/spans.jsonl" 2>"$W/manifest.log" ||
  { cat "$W/manifest.log" >&2; fail "tessera manifest refused demo.csv"; }
[ "$(jq -s 'length' "$W/spans.jsonl")" = 6 ] || fail "manifest: $(jq -s length "$W/spans.jsonl") spans, want 6"
[ "$(jq -s '[.[] | select(.caption | length > 10)] | length' "$W/spans.jsonl")" = 6 ] ||
  fail "a span without a caption: $(jq -c . "$W/spans.jsonl")"
"$T" ingest --manifest "$W/a/demo.csv" --out "$W/store" --fps 4 --short-side 32 --patch 1x4x4 \
  --label-from-dir --workers 1 --quiet 2>"$W/ingest.log" || { cat "$W/ingest.log" >&2; fail "ingest"; }
got=$(sqlite3 "$W/store/index.sqlite" "SELECT label || ': ' || caption FROM clips ORDER BY manifest_row")
want=$(tail -n +2 "$W/a/demo.csv" | sed 's#^\([a-z]*\)/[^,]*,,,"\(.*\)"$#\1: \2#')
[ "$got" = "$want" ] || fail "clips' labels and captions:
$got
want
$want"
while read -r w r g b; do
  [ -n "$w" ] && [ "$r" -le 255 ] && [ "$g" -le 255 ] && [ "$b" -le 255 ] || fail "palette line '$w $r $g $b'"
done <"$W/a/palette.txt"
for w in $(jq -r .caption "$W/spans.jsonl" | tr -s ' ,' '\n\n' | sort -u); do
  case $w in red | orange | golden | violet | indigo | purple | blue | cyan | turquoise | pale | yellow | dark | black)
    grep -q "^$w " "$W/a/palette.txt" || fail "caption word '$w' is not in the palette" ;;
  esac
done
echo "ok: manifest of 6 captioned rows; 6 clips with their labels and captions; palette"

# 3. the reading of a caption: orange above violet, 4 frames of 32x32 at 4 fps
ffmpeg -v error -f lavfi -i "color=c=0xF08228:s=32x16:r=4:d=1" -f lavfi -i "color=c=0x5A1E8C:s=32x16:r=4:d=1" \
  -filter_complex vstack -pix_fmt yuv444p -f yuv4mpegpipe -strict -1 "$W/band.y4m" || fail "ffmpeg"
mkdir -p "$W/run"
$PY "$SRC/tools/sample_stats.py" --tessera "$T" --store "$W/store" --run "$W/run" \
  --palette "$W/a/palette.txt" --caption "unseen=an orange moon over a violet sky" \
  --json "$W/stats.json" "$W/band.y4m:unseen" >"$W/stats.txt" 2>&1 || { cat "$W/stats.txt" >&2; fail "sample_stats.py"; }
cat "$W/stats.txt"
[ "$(jq -r '.[0].caption.found | "\(.orange) \(.violet)"' "$W/stats.json")" = "1 1" ] ||
  fail "orange and violet not both found: $(jq -c '.[0].caption' "$W/stats.json")"
jq -e '.[0].caption.samples[0].row_share > 0.999' "$W/stats.json" >/dev/null || fail "bands: row share below 1"
# within 10 levels: Y4M is YUV, and the round trip moves violet by 5.6 (words are >= 24 apart)
jq -e '.[0].caption.distance.orange < 10 and .[0].caption.distance.violet < 10' "$W/stats.json" >/dev/null ||
  fail "colour distances: $(jq -c '.[0].caption.distance' "$W/stats.json")"
echo "demo data: deterministic clips, manifest, ingest with captions and labels, caption reading: ok"
