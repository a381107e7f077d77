#!/usr/bin/env bash
# tests/ingest/manifest_ingest.sh — `tessera ingest --manifest` on real clips:
#  - each span gives a clip of the frames the ffmpeg CLI's `-ss S -to E` (after the input,
#    fps filter, -fps_mode passthrough) writes, cut down to whole tubelets, with its row,
#    span, span times, caption and scores in the index;
#  - a span past the video's end is cut there and flagged; one after the end, end <= start,
#    a missing video, a repeated video and a filtered span are each counted by reason and
#    named, and nothing else is lost; the filter is recorded and another one refused;
#  - a rerun skips what is done; a kill -9 mid-manifest and a rerun give the store a
#    one-shot run gives;
#  - --scene-cuts on real shots joined end to end finds the joins and cuts clips there.
. "$(dirname "$0")/lib.sh"
need_clips
V=$VIDEOS
FPS=8
SET=(--fps $FPS --short-side 64 --patch 2x16x16 --quiet)

# cli_frames SRC START END: frames the CLI writes for the span at $FPS.
cli_frames() {
  ffmpeg -nostdin -v error -i "$1" -ss "$2" -to "$3" -vf "fps=$FPS" -fps_mode passthrough -an \
    -f framecrc - | grep -vc '^#'
}

M=$WORK/clips.csv
cat >"$M" <<CSV
path,start,end,caption,aesthetic_score
$V/testvideo.mp4,1.5,4.25,"an orange, sunny scene",5.5
$V/testvideo.mp4,10.0,12.0,second,4.0
$V/mmaction2__demo.mp4,0.3,3.3,"a ""quoted"" caption",6.125
$V/mmaction2__demo.mp4,8.0,15.0,past the end,5.0
$V/issue-134-rotate.mp4,11.5,12.5,after the end,5.0
$V/fades.mp4,2,1,end before start,5
$WORK/missing.mp4,0,1,missing,5
$V/testvideo.mp4,20,22,repeated video,5
CSV
S=$WORK/store
tsr "$WORK/ingest.log" ingest --manifest "$M" --out "$S" "${SET[@]}" --where "aesthetic_score >= 4.5"
expect_eq "$RC" 2 "a manifest with bad rows exits 2"
grep -q "row 6 (line 7), column 'end'" "$WORK/ingest.log" && pass "end <= start named by row and column" \
  || fail "end <= start not named: $(grep -i 'row 6' "$WORK/ingest.log")"
grep -q "row 8 .*testvideo.mp4 had rows before" "$WORK/ingest.log" && pass "a repeated video named" \
  || fail "repeated video not named"
grep -q "1 filtered" "$WORK/ingest.log" && pass "the filtered span counted" || fail "filtered count"
grep -q "where aesthetic_score >= 4.5: 1" "$WORK/ingest.log" && pass "filtered by reason" \
  || fail "filter reason missing: $(grep -A3 'filtered by' "$WORK/ingest.log")"
grep -q "span 0: .*starts at or after the end" "$WORK/ingest.log" && pass "a span after the end named" \
  || fail "span after the end not named"
expect_eq "$(sql "$S" "SELECT count(*) FROM clips;")" 3 "three spans became clips"

# row, span: frames against the CLI, span columns, caption, scores
check_span() {  # ROW SRC START END CAPTION SCORE
  local want n pt=2 got
  n=$(cli_frames "$2" "$3" "$4")
  want=$((n / pt * pt))
  got=$(sql "$S" "SELECT frames || ' ' || dropped_frames || ' ' || manifest_span || ' ' ||
                  span_start || ' ' || span_end FROM clips WHERE manifest_row = $1;")
  expect_eq "$got" "$want $((n % pt)) 0 $3 $4" "row $1: frames, dropped, span as the CLI's -ss $3 -to $4 ($n frames)"
  expect_eq "$(sql "$S" "SELECT caption FROM clips WHERE manifest_row = $1;")" "$5" "row $1: caption"
  expect_eq "$(sql "$S" "SELECT json_extract(scores, '$.aesthetic_score') FROM clips WHERE manifest_row = $1;")" \
    "$6" "row $1: score"
}
check_span 1 "$V/testvideo.mp4" 1.5 4.25 "an orange, sunny scene" 5.5
check_span 3 "$V/mmaction2__demo.mp4" 0.3 3.3 'a "quoted" caption' 6.125
n=$(cli_frames "$V/mmaction2__demo.mp4" 8.0 15.0)
expect_eq "$(sql "$S" "SELECT frames + dropped_frames, span_cut FROM clips WHERE manifest_row = 4;")" \
  "$n|1" "row 4: past the end, cut at the end as the CLI does ($n frames) and flagged"
expect_eq "$(sql "$S" "SELECT status FROM sources WHERE path LIKE '%missing.mp4';")" failed \
  "a missing video is a failed source"
expect_eq "$(sql "$S" "SELECT status FROM sources WHERE path LIKE '%issue-134-rotate.mp4';")" failed \
  "a video none of whose spans could be cut is a failed source"
expect_eq "$(sql "$S" "SELECT value FROM settings WHERE key = 'filters';")" \
  "where aesthetic_score >= 4.5" "the filter recorded in the store"
verify_ok "$S" "the store verifies"

# rerun: nothing new; another filter: refused, nothing changed
before=$(canonical_dump "$S")
tsr "$WORK/rerun.log" ingest --manifest "$M" --out "$S" "${SET[@]}" --where "aesthetic_score >= 4.5"
expect_eq "$(canonical_dump "$S")" "$before" "a rerun changes nothing"
grep -q "skipped as already in the store" "$WORK/rerun.log" && pass "a rerun skips the done units" || fail "rerun log"
tsr "$WORK/other.log" ingest --manifest "$M" --out "$S" "${SET[@]}" --where "aesthetic_score >= 5"
expect_eq "$RC" 1 "another filter is refused"
grep -q "other manifest filters" "$WORK/other.log" && pass "the refusal names the filters" \
  || fail "refusal: $(tail -2 "$WORK/other.log")"
expect_eq "$(canonical_dump "$S")" "$before" "the refused run changed nothing"

# kill -9 mid-manifest, rerun: the store of a one-shot run
BIG=$WORK/big.csv
echo "path,start,end,caption" >"$BIG"
for f in testvideo.mp4 mmaction2__demo.mp4 fades.mp4 issue-134-rotate.mp4 issue-195-aspect-ratio.mp4 \
         decord__flipping_a_pancake.mkv; do
  for t in 0 2 4 6; do echo "$V/$f,$t,$((t + 2)),clip of $f at $t" >>"$BIG"; done
done
tsr "$WORK/one.log" ingest --manifest "$BIG" --out "$WORK/one" "${SET[@]}" --workers 1
expect_eq "$RC" 0 "the big manifest in one run"
"$TESSERA_BIN" ingest --manifest "$BIG" --out "$WORK/killed" "${SET[@]}" --workers 1 \
  >"$WORK/killed.log" 2>&1 </dev/null &
pid=$!
bg_register $pid
for _ in $(seq 1 600); do
  c=$(sql "$WORK/killed" "SELECT count(*) FROM sources;" 2>/dev/null || echo 0)
  [ "${c:-0}" -ge 1 ] && break
  sleep 0.05
done
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
done_before=$(sql "$WORK/killed" "SELECT count(*) FROM sources;")
expect_ge "$done_before" 1 "killed after the first unit's commit"
tsr "$WORK/resume.log" ingest --manifest "$BIG" --out "$WORK/killed" "${SET[@]}" --workers 1
expect_eq "$RC" 0 "the rerun after kill -9 finishes"
expect_eq "$(canonical_dump "$WORK/killed")" "$(canonical_dump "$WORK/one")" \
  "after kill -9 and a rerun: the one-shot store"
expect_eq "$(sql "$WORK/killed" "SELECT group_concat(manifest_row || ':' || manifest_span, ',') FROM
           (SELECT manifest_row, manifest_span FROM clips ORDER BY manifest_row);")" \
  "$(sql "$WORK/one" "SELECT group_concat(manifest_row || ':' || manifest_span, ',') FROM
           (SELECT manifest_row, manifest_span FROM clips ORDER BY manifest_row);")" \
  "the same rows and spans"
no_duplicate_clips "$WORK/killed" && pass "no duplicate clip" || fail "duplicate clips"

# scene cuts: three shots of 4 s joined end to end (cuts at 4 and 8 s)
J=$WORK/joined.mp4
ffmpeg -nostdin -v error -y -ss 0 -t 4 -i "$V/decord__flipping_a_pancake.mkv" \
  -ss 0 -t 4 -i "$V/mmaction2__test.avi" -ss 0 -t 4 -i "$V/fades.mp4" -filter_complex \
  "[0:v]fps=25,scale=320:180,setsar=1[a];[1:v]fps=25,scale=320:180,setsar=1[b];[2:v]fps=25,scale=320:180,setsar=1[c];[a][b][c]concat=n=3:v=1[v]" \
  -map "[v]" -c:v libx264 -pix_fmt yuv420p "$J"
tsr "$WORK/scenes.log" ingest "$J" --out "$WORK/scenes" "${SET[@]}" --scene-cuts
expect_eq "$RC" 0 "ingest --scene-cuts"
cuts=$(sql "$WORK/scenes" "SELECT scene_cuts FROM sources;")
ok=$(echo "$cuts" | tr -d '[]' | awk -F, -v f=$FPS '{ n = 0; for (i = 1; i <= NF; i++) {
  if (($i - 4 < 1 / f && 4 - $i < 1 / f) || ($i - 8 < 1 / f && 8 - $i < 1 / f)) n++; else bad = 1 }
  print (n == 2 && NF == 2 && !bad) ? "yes" : "no" }')
expect_eq "$ok" yes "cuts found within a frame of the joins, none elsewhere ($cuts)"
expect_eq "$(sql "$WORK/scenes" "SELECT count(*) FROM clips;")" 3 "a clip per shot"
expect_eq "$(sql "$WORK/scenes" "SELECT group_concat(round(start_s, 2), ' ') FROM (SELECT start_s FROM clips ORDER BY clip_index);")" \
  "$(sql "$WORK/scenes" "SELECT '0.0 ' || group_concat(round(value, 2), ' ') FROM json_each((SELECT scene_cuts FROM sources));")" \
  "clips start at the cuts"

# index lost: `index recover` rebuilds every manifest and scene column from the shards
full_dump() {
  sql "$1" "SELECT s.path, s.status, s.scene_cuts, s.manifest_key FROM sources s WHERE s.status = 'done'
            ORDER BY s.path;"
  sql "$1" "SELECT s.path, c.clip_index, c.start_s, c.frames, c.checksum, c.manifest_row,
            c.manifest_span, c.span_start, c.span_end, c.span_cut, c.scores, c.caption
            FROM clips c JOIN sources s ON c.source_id = s.rowid ORDER BY s.path, c.clip_index;"
}
for st in "$S" "$WORK/scenes"; do
  want=$(full_dump "$st")
  rm -f "$st/index.sqlite"
  tsr "$WORK/recover.log" index recover "$st"
  expect_eq "$(full_dump "$st")" "$want" "$(basename "$st"): rebuilt from the shards, every column"
done
finish
