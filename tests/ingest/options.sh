#!/usr/bin/env bash
# Options: --max-seconds cuts a 3-minute low-res clip into consecutive clips (count,
# start_s = k * max, duration <= max, frames add up to the whole source's count);
# --label-from-dir (label = parent folder name, on sources and clips); @list.txt;
# recursion into nested directories; `tessera index merge` of two stores (clip and token
# counts add up, same content as one store of all sources, verify passes; a store with
# other settings is refused).
source "$(dirname "$0")/lib.sh"

# --max-seconds: 180 s at 10 fps, 160x90, cut into 30 s clips.
gen_src "$WORK/long/long.mp4" testsrc2 160x90 10 180
CUT=$WORK/cut
tsr_ok "$WORK/cut.log" "ingest with --max-seconds 30" ingest "$WORK/long/long.mp4" --out "$CUT" --max-seconds 30
want=$(source_end_frames "$WORK/long/long.mp4" 8)
n=$(sql "$CUT" "SELECT COUNT(*) FROM clips;")
expect_eq "$n" 6 "180 s cut at 30 s: clips"
for ((k = 0; k < ${n:-0}; k++)); do
  IFS='|' read -r start dur <<<"$(clip_cols "$CUT" long.mp4 "start_s, duration_s" "$k")"
  expect_near "$start" $((30 * k)) 0.13 "clip $k: start_s"
  check "clip $k: duration $dur <= 30 s" awk -v d="$dur" 'BEGIN { exit !(d != "" && d <= 30 + 1e-6) }'
done
expect_near "$(out_frames "$CUT" long.mp4)" "$want" "$n" "cut clips' frames + dropped add up to the source's (one per clip)"
verify_ok "$CUT" "index verify (cut store)"

# Shard rolling (TESSERA_SHARD_ROLL_BYTES, tiny here): a worker starts a new shard only
# between sources, so every source's clips (the long clip cut in 6 included) sit in one
# shard, each source in a shard of its own, and the store verifies.
ROLL=$WORK/roll
gen_src "$WORK/roll-src/short.mp4" testsrc2 160x90 10 4
TESSERA_SHARD_ROLL_BYTES=1 tsr_ok "$WORK/roll.log" "ingest with a tiny shard roll size" ingest \
  "$WORK/long/long.mp4" "$WORK/roll-src/short.mp4" --out "$ROLL" --max-seconds 30 --workers 1
expect_eq "$(sql "$ROLL" "SELECT COUNT(*) FROM (SELECT source_id FROM clips GROUP BY source_id HAVING COUNT(DISTINCT shard) > 1);")" 0 \
  "every source's clips are in one shard"
expect_eq "$(sql "$ROLL" "SELECT COUNT(DISTINCT shard) FROM clips;")" 2 "a shard per source after rolling"
verify_ok "$ROLL" "index verify (rolled shards)"

# Labels, recursion, @list.
D=$WORK/data
gen_src "$D/cats/cat-1.mp4" testsrc2 160x120 25 2
gen_src "$D/cats/cat-2.mp4" mandelbrot 160x120 25 2
gen_src "$D/dogs/deep/er/dog-1.mp4" testsrc2 200x120 30 2
gen_src "$D/dogs/dog-2.mp4" testsrc2 120x160 25 2
A=$WORK/a
tsr_ok "$WORK/a.log" "ingest a directory tree with --label-from-dir" ingest "$D" --out "$A" --label-from-dir
expect_eq "$(sql "$A" "SELECT COUNT(*) FROM sources WHERE status = 'done';")" 4 "recursion finds all 4 clips"
for pair in cat-1.mp4:cats cat-2.mp4:cats dog-1.mp4:er dog-2.mp4:dogs; do
  f=${pair%%:*} l=${pair##*:}
  expect_eq "$(source_col "$A" "$f" label)" "$l" "$f: source label"
  expect_eq "$(clip_cols "$A" "$f" c.label)" "$l" "$f: clip label"
done

printf '%s\n' "$D/cats/cat-1.mp4" "$D/dogs/dog-2.mp4" >"$WORK/list.txt"
L=$WORK/l
tsr_ok "$WORK/l.log" "ingest @list.txt" ingest "@$WORK/list.txt" --out "$L"
expect_eq "$(sql "$L" "SELECT COUNT(*) FROM sources;")" 2 "@list: the 2 listed sources"
check "@list: cat-1 done" [ "$(source_col "$L" cat-1.mp4 status)" = done ]
check "@list: dog-2 done" [ "$(source_col "$L" dog-2.mp4 status)" = done ]

# Merge: cats + dogs stores == one store of both.
tsr_ok "$WORK/c.log" "ingest cats" ingest "$D/cats" --out "$WORK/c"
tsr_ok "$WORK/d.log" "ingest dogs" ingest "$D/dogs" --out "$WORK/d"
tsr_ok "$WORK/all.log" "ingest all" ingest "$D" --out "$WORK/all"
counts() { sql "$1" "SELECT COUNT(*), SUM(tokens) FROM clips;"; }
IFS='|' read -r nc tc <<<"$(counts "$WORK/c")"
IFS='|' read -r nd td <<<"$(counts "$WORK/d")"
tsr_merge "$WORK/merge.log" "$WORK/c" "$WORK/d"
expect_eq "$RC" 0 "merge dogs into cats"; [ "$RC" -eq 0 ] || tail -n 20 "$WORK/merge.log" >&2
expect_eq "$(counts "$WORK/c")" "$((nc + nd))|$((tc + td))" "merged clip and token counts add up"
canonical_dump "$WORK/c" >"$WORK/merged.dump"
canonical_dump "$WORK/all" >"$WORK/all.dump"
check "merged store has the content of one store of all sources" cmp -s "$WORK/merged.dump" "$WORK/all.dump"
check "no duplicate clips after merge" no_duplicate_clips "$WORK/c"
verify_ok "$WORK/c" "index verify (merged store)"
sha=$(sha256sum "$WORK/c/index.sqlite")
tsr_merge "$WORK/merge-bad.log" "$WORK/c" "$CUT"
check "merging a store with other settings (max-seconds) is refused" [ "$RC" -ne 0 ]
expect_eq "$(sha256sum "$WORK/c/index.sqlite")" "$sha" "refused merge leaves the index unchanged"
finish
