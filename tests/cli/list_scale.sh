#!/usr/bin/env bash
# tests/cli/list_scale.sh — `tessera index list --json` streams (issue 24, 9): its memory
# does not grow with the store. A synthetic index (one real clip's row copied with new ids,
# clip indexes and offsets: rows for the listing, not for training) of 20,000 and of
# 200,000 clips: the peak RSS of the listing grows by less than 16 MB between them (the
# array built whole took ~1.6 KB a clip: ~300 MB more; 2M clips took 3.3 GB), and the
# output is one JSON array of every clip (jq).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad/same/tally
scratch list-scale
ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=64x48:r=8" -t 1 "$W/a.mp4"
"$T" ingest "$W/a.mp4" --out "$W/s" --fps 4 --short-side 32 --patch 1x16x16 --quiet 2>/dev/null ||
  { echo "FAIL: ingest"; exit 1; }
# grow N: the index holds N clips (copies of clip 1)
grow() {
  sqlite3 "$W/s/index.sqlite" "WITH RECURSIVE k(i) AS (SELECT (SELECT count(*) FROM clips)
      UNION ALL SELECT i + 1 FROM k WHERE i + 1 < $1)
    INSERT INTO clips (source_id, clip_index, start_s, duration_s, src_fps, src_w, src_h, rotation,
      sar_num, sar_den, codec, pix_fmt, decoded_frames, frames, dropped_frames, T, H, W, tokens,
      shard, offset, bytes, checksum, label)
    SELECT source_id, clip_index + k.i, start_s, duration_s, src_fps, src_w, src_h, rotation,
      sar_num, sar_den, codec, pix_fmt, decoded_frames, frames, dropped_frames, T, H, W, tokens,
      shard, offset + 4096 * k.i, bytes, checksum, 'label-' || (k.i % 7)
    FROM clips, k WHERE clips.id = 1;"
}
# rss N: RSS = the peak RSS (KB) of `index list --json` on N clips; checks the output
rss() {
  grow "$1"
  /usr/bin/time -f %M -o "$W/rss" "$T" index list "$W/s" --json >"$W/list.json" 2>"$W/err" ||
    bad "index list --json on $1 clips: $(tail -2 "$W/err")"
  local n
  n=$(jq length "$W/list.json")
  [ "$n" = "$1" ] && ok "$1 clips: one JSON array of $n" || bad "$1 clips: the JSON has '$n'"
  RSS=$(tail -1 "$W/rss")
}
rss 20000; small=$RSS
rss 200000; large=$RSS
echo "peak RSS: $small KB for 20,000 clips, $large KB for 200,000"
if [ $((large - small)) -lt 16384 ]; then ok "the listing's memory does not grow with the clips"
else bad "peak RSS grew by $((large - small)) KB from 20,000 to 200,000 clips"; fi
tally "list_scale"
