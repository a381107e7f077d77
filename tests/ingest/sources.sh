#!/usr/bin/env bash
# tests/ingest/sources.sh — sources are what they are (issue 24, 5):
# - a symbolic link back to a directory above (a loop) is walked once: the video in it is
#   ingested once (it was ingested 41 times, once per level until ELOOP)
# - a hard link and a symbolic link to a video already listed are the same file (device and
#   inode): ingested once, under the first name in path order, and the links are noted
# - a name that is not UTF-8 fails that source alone, with the reason (it failed the whole
#   directory: the clip metadata could not be encoded)
# - with --captions, a caption file added after its video was ingested, and one changed
#   since, is taken on the next run (the video is ingested again with it); one removed
#   is reported
# - labels and paths with ANSI escapes and newlines are printed escaped by `index list`,
#   `index stats`, `index verify` and ingest's report: no escape byte, no forged line
source "$(dirname "$0")/lib.sh"
ML=${MAKE_LATENTS:?ctest sets MAKE_LATENTS to the make_latents binary}
ESC=$(printf '\033')
A=(--fps 4 --short-side 32 --patch 1x16x16 --workers 1)  # + --quiet where the log is not read

# 1. a loop: a/loop -> .. (and a/self -> .)
D=$WORK/loop
gen_src "$D/a/v.mp4" testsrc2 64x48 8 1
ln -s .. "$D/a/loop"
ln -s . "$D/a/self"
# (bounded: with two such links the old walk grew as 2^40 and ran out of memory)
RC=0
timeout 60 "$TESSERA_BIN" ingest "$D" --out "$WORK/s1" "${A[@]}" >"$WORK/1.log" 2>&1 </dev/null || RC=$?
expect_eq "$RC" 0 "a directory with link loops: exit 0 within 60 s"
expect_eq "$(sql "$WORK/s1" "SELECT count(*) FROM sources")" 1 "the video in a loop: one source"

# 2. links to one file: a hard link and a symbolic link beside it
D=$WORK/links
gen_src "$D/a.mp4" testsrc2 64x48 8 1
ln "$D/a.mp4" "$D/b-hard.mp4"
ln -s a.mp4 "$D/c-soft.mp4"
tsr "$WORK/2.log" ingest "$D" "$D/a.mp4" --out "$WORK/s2" "${A[@]}"
expect_eq "$RC" 0 "links to one file: exit 0"
expect_eq "$(sql "$WORK/s2" "SELECT count(*) || ' ' || group_concat(substr(path, -5), ',') FROM sources")" \
  "1 a.mp4" "a file and its links: one source, under the first name"
check "the links are noted" grep -q "named a file listed under another name" "$WORK/2.log"

# 3. a name that is not UTF-8 fails alone
D=$WORK/utf
gen_src "$D/good.mp4" testsrc2 64x48 8 1
gen_src "$D/zz.mp4" mandelbrot 64x48 8 1
BAD=$D/$(printf 'bad\377name.mp4')
cp "$D/zz.mp4" "$BAD"
tsr "$WORK/3.log" ingest "$D" --out "$WORK/s3" "${A[@]}"
expect_eq "$RC" 2 "a non-UTF-8 name: exit 2 (some sources failed), not 1"
expect_eq "$(sql "$WORK/s3" "SELECT status, count(*) FROM sources GROUP BY status ORDER BY status")" \
  "done|2
failed|1" "the two other videos are done, the bad name failed"
check "its reason says why" grep -q "not valid UTF-8" <<<"$(sql "$WORK/s3" "SELECT error FROM sources WHERE status = 'failed'")"
check "the report shows the name escaped" grep -qF 'bad\xffname.mp4' "$WORK/3.log"
if LC_ALL=C grep -q "$(printf '\377')" "$WORK/3.log"; then fail "the raw byte reached the terminal"; else pass "no raw byte on the terminal"; fi

# 4. captions added, changed and removed after the video was ingested
D=$WORK/cap
gen_src "$D/v.mp4" testsrc2 64x48 8 1
gen_src "$D/w.mp4" mandelbrot 64x48 8 1
"$ML" "$D/w.mp4.caption.safetensors" --shape 1,1,1,1 --text 3,8 --caption "first words"
tsr_ok "$WORK/4a.log" "ingest --captions (v without a caption file)" ingest "$D" --out "$WORK/s4" --captions "${A[@]}"
"$ML" "$D/v.mp4.caption.safetensors" --shape 1,1,1,1 --text 4,8 --caption "added later"
tsr_ok "$WORK/4b.log" "ingest --captions again" ingest "$D" --out "$WORK/s4" --captions "${A[@]}"
expect_eq "$(sql "$WORK/s4" "SELECT c.caption FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is v.mp4)")" \
  "added later" "a caption file added after the ingest is taken"
check "and said so" grep -q "caption file (VIDEO.caption.safetensors) was added or changed" "$WORK/4b.log"
sleep 1.1  # the next write gets a later mtime than the record on every file system
"$ML" "$D/w.mp4.caption.safetensors" --shape 1,1,1,1 --text 3,8 --caption "second words"
tsr_ok "$WORK/4c.log" "ingest --captions after a change" ingest "$D" --out "$WORK/s4" --captions "${A[@]}"
expect_eq "$(sql "$WORK/s4" "SELECT group_concat(c.caption, ',') FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is w.mp4)")" \
  "second words" "a changed caption file is taken"
expect_eq "$(sql "$WORK/s4" "SELECT count(*) FROM sources")" 2 "still one record per video"
tsr_ok "$WORK/4d.log" "ingest --captions with nothing new" ingest "$D" --out "$WORK/s4" --captions "${A[@]}"
check "nothing taken again" grep -q "2 skipped as already in the store" "$WORK/4d.log"
rm "$D/w.mp4.caption.safetensors"
tsr_ok "$WORK/4e.log" "ingest --captions after a removal" ingest "$D" --out "$WORK/s4" --captions "${A[@]}"
check "a removed caption file is reported" grep -q "no caption file any more" "$WORK/4e.log"
verify_ok "$WORK/s4" "index verify: clean after the captions were taken again"

# 5. labels and paths with escapes and newlines (a folder named so, taken as the label)
D=$WORK/esc
LAB=$(printf 'red\033[31m\nerror: forged')
gen_src "$D/$LAB/v.mp4" testsrc2 64x48 8 1
echo "not a video" >"$D/$LAB/x.mp4"  # a failed source, its reason naming its path
tsr "$WORK/5.log" ingest "$D" --out "$WORK/s5" --label-from-dir "${A[@]}"
expect_eq "$RC" 2 "ingest of the escape folder: the video done, the other failed"
"$TESSERA_BIN" index list "$WORK/s5" >"$WORK/list.txt" 2>&1
"$TESSERA_BIN" index stats "$WORK/s5" >"$WORK/stats.txt" 2>&1
"$TESSERA_BIN" index stats "$WORK/s3" >"$WORK/stats3.txt" 2>&1
"$TESSERA_BIN" index verify "$WORK/s5" >"$WORK/verify.txt" 2>&1
for f in 5.log list.txt stats.txt verify.txt; do
  if grep -q "$ESC" "$WORK/$f"; then fail "$f: an escape byte reached the terminal"; else pass "$f: no escape byte"; fi
  if grep -q "^error: forged" "$WORK/$f"; then fail "$f: a forged line"; else pass "$f: no forged line"; fi
done
check "index list shows the label escaped" grep -qF 'red\e[31m\nerror: forged' "$WORK/list.txt"
check "index stats shows a failed path escaped" grep -qF 'red\e[31m\nerror: forged/x.mp4' "$WORK/stats.txt"
check "and one that is not UTF-8" grep -qF 'bad\xffname.mp4' "$WORK/stats3.txt"
expect_eq "$("$TESSERA_BIN" index list "$WORK/s5" --json | jq -r '.[0].label')" "$LAB" "JSON keeps the label as it is"
finish
