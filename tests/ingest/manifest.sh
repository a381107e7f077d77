#!/usr/bin/env bash
# tests/ingest/manifest.sh — `tessera manifest` (ingest/manifest.h) from the command line:
# - each preset from a small sample in its real shape (panda70m's Python list cells with
#   single quotes, openvid's spaced score names, opensora's timecodes and frame ranges,
#   tessera's JSONL with spans): --jsonl writes one object per kept span with exactly the
#   keys row, span, path, start, end, caption, scores; starts and ends equal the timecodes'
#   H*3600 + M*60 + S computed here with awk
# - bad rows: one stderr line each naming the file, row, line and column; the summary counts
#   them by reason; exit 2; the good rows around them are all written
# - filters: --where on a score (spaces or underscores), clip length, a missing score counted
#   as its own reason; the summary shows the canonical filter
# - usage errors exit 1 with the hint; a header without a column the format needs exits 1
#   naming it
INGEST_NO_MEDIA=1
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "FAIL: jq is required (tools/setup.sh installs it)" >&2; exit 1; }
D=$WORK/m
mkdir -p "$D"

# man OUT ERR ARGS...: `tessera manifest ARGS...` with stdout in OUT, stderr in ERR; sets RC.
man() {
  local out=$1 err=$2; shift 2
  RC=0
  "$TESSERA_BIN" manifest "$@" >"$out" 2>"$err" </dev/null || RC=$?
}
# seconds TIMECODE: H:MM:SS.fff (or M:SS.fff, or seconds) by closed form.
seconds() { awk -v t="$1" 'BEGIN { n = split(t, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.6f\n", s }'; }
# keys_ok FILE: every line of FILE has exactly the schema's keys.
keys_ok() {
  [ -s "$1" ] && jq -e -s 'all(.[]; (keys == ["caption","end","path","row","scores","span","start"])
    and (.row | type) == "number" and (.span | type) == "number" and (.path | type) == "string"
    and ((.start | type) == "number" or .start == null) and ((.end | type) == "number" or .end == null)
    and ((.caption | type) == "string" or .caption == null) and (.scores | type) == "object")' "$1" >/dev/null
}
# field FILE ROW SPAN JQ: a value of span (ROW, SPAN) of a JSONL output.
field() { jq -r --argjson r "$2" --argjson k "$3" "select(.row == \$r and .span == \$k) | $4" "$1"; }

# ---- panda70m ------------------------------------------------------------------------------
cat >"$D/panda70m_training_2m.csv" <<'EOF'
videoID,url,timestamp,caption,matching_score
--0ET3wmu_o,https://www.youtube.com/watch?v=--0ET3wmu_o,"[['0:00:00.000', '0:00:05.005'], ['0:00:05.005', '0:00:13.347'], ['0:01:59.036', '0:02:07.211']]","['A man in a dark suit is talking to the camera in an office.', ""A woman's hands fold a paper crane on a wooden table."", 'Cars drive along a highway at night, their lights streaking.']","[0.4619140625, 0.43603515625, 0.38916015625]"
-0AMsMAGbSs,https://www.youtube.com/watch?v=-0AMsMAGbSs,"[['1:02:03.500', '1:02:10.000']]","['Waves crash on dark rocks, with ""spray"" in the air.']",[0.51123046875]
-1HzbWE0yjk,https://www.youtube.com/watch?v=-1HzbWE0yjk,"[['0:00:10.000', '0:00:08.000']]","['A backwards span.']",[0.3]
-2WXdgxp2Ls,https://www.youtube.com/watch?v=-2WXdgxp2Ls,"[['0:00:00.000', '0:00:02.000'], ['0:00:02.000', '0:00:04.000']]","['Only one caption for two spans.']","[0.1, 0.2]"
-3kdoi2z1uE,https://www.youtube.com/watch?v=-3kdoi2z1uE,"[['0:00:01.250', '0:00:03.750']]","['A dog runs on grass.']",[0.47]
EOF
P=$D/panda70m_training_2m.csv
man "$WORK/p.jsonl" "$WORK/p.err" "$P" --manifest-format panda70m --jsonl
expect_eq "$RC" 2 "panda70m with 2 bad rows: exit 2"
check "panda70m: every line has the schema's keys and types" keys_ok "$WORK/p.jsonl"
expect_eq "$(wc -l <"$WORK/p.jsonl")" 5 "panda70m: 5 spans written (3 + 1 + 1)"
expect_eq "$(field "$WORK/p.jsonl" 1 2 .path)" "$D/--0ET3wmu_o.mp4" "path: videoID + .mp4 in the manifest's folder"
for rk in "1 0 0:00:00.000 0:00:05.005" "1 1 0:00:05.005 0:00:13.347" "1 2 0:01:59.036 0:02:07.211" \
          "2 0 1:02:03.500 1:02:10.000" "5 0 0:00:01.250 0:00:03.750"; do
  set -- $rk
  expect_eq "$(field "$WORK/p.jsonl" "$1" "$2" '.start, .end' | xargs printf '%.6f ')" \
    "$(seconds "$3") $(seconds "$4") " "row $1 span $2: $3 - $4 in seconds"
done
expect_eq "$(field "$WORK/p.jsonl" 1 1 .caption)" "A woman's hands fold a paper crane on a wooden table." "a caption with an apostrophe"
expect_eq "$(field "$WORK/p.jsonl" 2 0 .caption)" 'Waves crash on dark rocks, with "spray" in the air.' "a caption with quotes"
expect_eq "$(field "$WORK/p.jsonl" 1 2 '.scores.matching_score')" 0.38916015625 "the third span's own score"
check "row 3: end <= start on stderr with file, row, line, column" \
  grep -qF "error: $P: row 3 (line 4), column 'timestamp', span 0: end 8 s is not after start 10 s" "$WORK/p.err"
check "row 4: list length on stderr with file, row, line, column" \
  grep -qF "error: $P: row 4 (line 5), column 'caption': 1 entries for 2 spans" "$WORK/p.err"
check "summary: rows and errors" grep -q "^rows: 5 (2 with errors)" "$WORK/p.err"
check "summary: errors by reason" grep -qx "  end <= start: 1" "$WORK/p.err"

# ---- openvid -------------------------------------------------------------------------------
cat >"$D/OpenVid-1M.csv" <<'EOF'
video,caption,aesthetic score,motion score,temporal consistency score,camera motion,frame,fps,seconds
celebv_--5kJ3Ol6Zk_0.mp4,"The video features a woman with long, dark hair speaking in front of a white wall.",5.123,0.89,0.987,static,99,25.0,3.96
pexels_3059_2.mp4,A drone flies slowly over a green valley with a river.,4.25,12.5,0.9921875,pan_right,240,29.97,8.008
mixkit_17_0.mp4,A candle flickers in the dark.,4.75,,0.95,static,120,30,4
EOF
man "$WORK/o.jsonl" "$WORK/o.out" "$D/OpenVid-1M.csv" --manifest-format openvid --jsonl --where "aesthetic score >= 4.5" \
  --where 'motion_score>0.5'
expect_eq "$RC" 0 "openvid: exit 0 (filtered spans are no errors)"
check "openvid: schema" keys_ok "$WORK/o.jsonl"
expect_eq "$(jq -c '[.row, .start, .end, .scores.aesthetic_score, .scores.seconds, (.scores | length)]' "$WORK/o.jsonl")" \
  "[1,null,null,5.123,3.96,6]" "openvid: only row 1 passes; whole file; six scores (camera motion is text)"
check "openvid: row 2 filtered by the aesthetic clause, naming its column" \
  grep -qF "filtered: $D/OpenVid-1M.csv: row 2 (line 3), span 0, column 'aesthetic_score': where aesthetic_score >= 4.5 fails: 4.25" "$WORK/o.out"
check "openvid: row 3 has no motion score" grep -qF "row 3 (line 4), span 0, column 'motion_score': missing score motion_score" "$WORK/o.out"
check "openvid: the canonical filter" grep -qx "filter: where aesthetic_score >= 4.5; where motion_score > 0.5" "$WORK/o.out"
check "openvid: kept and filtered counts" grep -qx "spans: 1 kept, 2 filtered, 0 duplicates" "$WORK/o.out"

# ---- opensora ------------------------------------------------------------------------------
cat >"$D/meta_clips.csv" <<'EOF'
path,text,num_frames,height,width,aspect_ratio,resolution,fps,start,end
/data/raw/a.mp4,A cat sleeps on a sofa.,120,720,1280,0.5625,921600,24,0:00:01.500,00:00:06.500
/data/raw/a.mp4,A cat wakes up.,96,720,1280,0.5625,921600,24,6.5,10.5
/data/raw/b.mp4,A short one.,12,480,854,0.5620608899,409920,30,00:00:00.000,00:00:00.400
EOF
man "$WORK/s.jsonl" "$WORK/s.out" "$D/meta_clips.csv" --manifest-format opensora --jsonl --min-clip-seconds 1
expect_eq "$RC" 0 "opensora: exit 0"
expect_eq "$(jq -c '[.row, .start, .end, .caption, .scores.num_frames]' "$WORK/s.jsonl" | tr '\n' ' ')" \
  '[1,1.5,6.5,"A cat sleeps on a sofa.",120] [2,6.5,10.5,"A cat wakes up.",96] ' "opensora: timecodes and seconds"
check "opensora: a 0.4 s span filtered by min_clip_seconds" grep -qF "row 3 (line 4), span 0: min_clip_seconds 1 fails: 0.4" "$WORK/s.out"

# ---- tessera JSONL with --root ---------------------------------------------------------------
mkdir -p "$D/videos"
cat >"$D/clips.jsonl" <<'EOF'
{"path": "long/talk.mp4", "spans": [{"start": 0, "end": 12.5, "caption": "a talk begins"}, {"start": "0:00:12.500", "caption": "the talk goes on", "clarity": 0.75}], "aesthetic": 5.5}
{"path": "/abs/x.mp4", "caption": 12}
{"path": "short.mp4", "caption": null}
EOF
man "$WORK/t.jsonl" "$WORK/t.err" "$D/clips.jsonl" --root "$D/videos" --jsonl
expect_eq "$RC" 2 "tessera JSONL with a numeric caption: exit 2"
check "tessera: schema" keys_ok "$WORK/t.jsonl"
expect_eq "$(jq -c '[.path, .start, .end, .caption, .scores]' "$WORK/t.jsonl" | tr '\n' ' ')" \
  "[\"$D/videos/long/talk.mp4\",0,12.5,\"a talk begins\",{\"aesthetic\":5.5}] [\"$D/videos/long/talk.mp4\",12.5,null,\"the talk goes on\",{\"aesthetic\":5.5,\"clarity\":0.75}] [\"$D/videos/short.mp4\",null,null,null,{}] " \
  "tessera: spans, open end, scores of the row and the span, paths under --root"
check "tessera: a caption of the wrong type names row and column" \
  grep -qF "error: $D/clips.jsonl: row 2 (line 2), column 'caption': a caption must be text, not a number" "$WORK/t.err"

# ---- a broken quote in CSV: the rows after it are read --------------------------------------
printf 'path,start,end,caption\r\na.mp4,0,1,"fine"\r\nb.mp4,0,1,"never closed\r\nc.mp4,0,1,ok\r\nd.mp4,0,1,"multi\r\nline"\r\n' >"$D/q.csv"
man "$WORK/q.jsonl" "$WORK/q.err" "$D/q.csv" --jsonl
expect_eq "$(jq -r '.path | sub(".*/"; "")' "$WORK/q.jsonl" | tr '\n' ' ')" "a.mp4 c.mp4 d.mp4 " \
  "an unterminated quote costs its own row only"
expect_eq "$(field "$WORK/q.jsonl" 4 0 .caption)" "multi
line" "a caption over two CRLF lines"
check "the quote error names row, lines and column" \
  grep -qF "row 2 (lines 3-5), column 'caption': a quoted field runs over 3 lines and is followed by text on line 5 (an unterminated quote?); reading resumes at line 4" "$WORK/q.err"

# ---- usage and whole-file errors -------------------------------------------------------------
man "$WORK/u.out" "$WORK/u.err" "$P" --where "aesthetic 4.5"
expect_eq "$RC" 1 "a --where without comparison: exit 1"
check "... named, with the hint" grep -q "^error: tessera manifest: --where 'aesthetic 4.5': no comparison" "$WORK/u.err"
check "... hint" grep -qF 'hint: `tessera manifest --help`' "$WORK/u.err"
man "$WORK/u.out" "$WORK/u.err" "$P" --manifest-format sideways
check "an unknown format is named" grep -q "^error: tessera manifest: --manifest-format: 'sideways' is not a manifest format" "$WORK/u.err"
man "$WORK/u.out" "$WORK/u.err" "$D/OpenVid-1M.csv" --manifest-format panda70m
expect_eq "$RC" 1 "openvid read as panda70m: exit 1"
check "... naming the missing column and those found" \
  grep -qF "the panda70m format needs a column 'videoID'; the header (line 1) has 'video', 'caption', 'aesthetic score'" "$WORK/u.err"
man "$WORK/u.out" "$WORK/u.err" "$D/missing.csv"
expect_eq "$RC" 1 "a missing file: exit 1"
finish
