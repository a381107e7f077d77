#!/usr/bin/env bash
# tests/model/bad_values.sh — values checked where they enter (issue 40, 2), on a tiny Wan
# base trained 2 steps (no venv: files are edited with the standard library's struct/json):
# - `convert` of a diffusers folder with a NaN or an Inf weight fails naming the tensor, and
#   writes nothing (it wrote a checkpoint that every later load called damaged);
# - an original Wan file whose patch embedding has hidden size 0 is refused naming the
#   tensor (it died of SIGFPE: hidden / 128 heads = 0, then hidden % heads); config.json's
#   num_heads 0 too; `--set model.heads=0` is refused by convert, train and plan;
# - `convert --merge-lora` with a NaN in an adapter, a NaN or absurd alpha, or adapters
#   whose merge overflows: refused naming the tensor or key, nothing written; the sound
#   adapters merge;
# - a LoRA adapters file given to `train --init` is named as such, with the merge command;
# - model.depth = 1024 (the documented maximum) plans; 1025 is refused.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, fail, expect_fail
ML=${MAKE_LATENTS:?set by ctest}
scratch badvalues
# poke FILE TENSOR VALUE [DROP_SUM]: element 0 of F32 tensor TENSOR of safetensors FILE set
# to VALUE (nan, inf, 1e20 ...: with "all", every element); DROP_SUM=1 also removes its
# recorded checksum (as a file PEFT wrote has none), so that the value check is what fails.
poke() {
  python3 - "$@" <<'PYEOF'
import json, struct, sys
path, name, value = sys.argv[1], sys.argv[2], sys.argv[3]
drop = len(sys.argv) > 4 and sys.argv[4] == "1"
data = open(path, 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
head = json.loads(data[8:8 + n])
body = bytearray(data[8 + n:])
t = head[name]
assert t['dtype'] == 'F32', t
a, b = t['data_offsets']
v = float(value.split(':')[0])
count = (b - a) // 4 if value.endswith(':all') else 1
for i in range(count):
    body[a + 4 * i:a + 4 * i + 4] = struct.pack('<f', v)
if drop:
    head.get('__metadata__', {}).pop('xxh3:' + name, None)
text = json.dumps(head).encode()
text += b' ' * (-len(text) % 8)
open(path, 'wb').write(struct.pack('<Q', len(text)) + text + bytes(body))
PYEOF
}
# meta FILE KEY VALUE: metadata KEY of safetensors FILE set to VALUE
meta() {
  python3 - "$@" <<'PYEOF'
import json, struct, sys
path, key, value = sys.argv[1:4]
data = open(path, 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
head = json.loads(data[8:8 + n])
head['__metadata__'][key] = value
text = json.dumps(head).encode()
text += b' ' * (-len(text) % 8)
open(path, 'wb').write(struct.pack('<Q', len(text)) + text + data[8 + n:])
PYEOF
}

. "$SRC/tests/model/colour_store.sh"
colour_store "$W" 1
CFG=(--config "$SRC/configs/model/wan-tiny.conf" --data "$W/store" --set model.text_len=16
     --set train.log_every=1 --set train.global_batch=4 --set train.warmup=1)
"$T" train "${CFG[@]}" --out "$W/base" --steps 2 --set train.steps=2 --set train.ckpt_every=2 \
  2>"$W/base.log" || { tail -5 "$W/base.log"; fail "the base's training"; }
BASE=$W/base/ckpt-2.safetensors

# diffusers folders with a NaN and an Inf weight
"$T" convert "$BASE" --to diffusers --out "$W/dif" >/dev/null 2>"$W/dif.log" || fail "export: $(cat "$W/dif.log")"
"$T" convert "$W/dif" --out "$W/sound.ckpt" >/dev/null 2>&1 || fail "the sound folder's convert"
for v in nan inf -inf; do
  rm -rf "$W/dif-$v" && cp -r "$W/dif" "$W/dif-$v"
  poke "$W/dif-$v/diffusion_pytorch_model.safetensors" blocks.1.attn1.to_q.weight "$v"
  expect_fail "tensor blocks\.1\.attn1\.to_q\.weight has a non-finite value" \
    "$T" convert "$W/dif-$v" --out "$W/bad-$v.ckpt"
  [ ! -e "$W/bad-$v.ckpt" ] || fail "a checkpoint was written from a model with $v"
done

# orig_file FILE D: an original Wan file of hidden size D (its tensors zero)
orig_file() {
  python3 - "$1" "$2" <<'PYEOF'
import json, struct, sys
D = int(sys.argv[2])
shapes = {"patch_embedding.weight": [D, 16, 1, 2, 2], "text_embedding.0.weight": [D, 32],
          "time_embedding.0.weight": [D, 256], "blocks.0.ffn.0.weight": [112, D],
          "head.head.weight": [64, D], "head.modulation": [1, 2, D],
          "blocks.0.modulation": [1, 6, D]}
head, off = {}, 0
for k, s in shapes.items():
    n = 4
    for d in s: n *= d
    head[k] = {"dtype": "F32", "shape": s, "data_offsets": [off, off + n]}
    off += n
text = json.dumps(head).encode()
text += b' ' * (-len(text) % 8)
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(text)) + text + bytes(off))
PYEOF
}
# an original Wan file of hidden size 0, and num_heads 0
orig_file "$W/orig0.safetensors" 0
expect_fail "patch_embedding\.weight has shape \(0, 16, 1, 2, 2\)" "$T" convert "$W/orig0.safetensors" --out "$W/o.ckpt"
expect_fail "patch_embedding\.weight has shape \(0, 16, 1, 2, 2\)" \
  "$T" convert "$W/orig0.safetensors" --out "$W/o.ckpt" --set model.heads=0
mkdir -p "$W/orig-heads0"
cp "$W/orig0.safetensors" "$W/orig-heads0/diffusion_pytorch_model.safetensors"
echo '{"num_heads": 0}' >"$W/orig-heads0/config.json"
# the shape check comes first for this file: a sound hidden size with num_heads 0
orig_file "$W/orig-heads0/diffusion_pytorch_model.safetensors" 48
expect_fail "num_heads is out of \[1, 1024\]|num_heads is not a positive integer" \
  "$T" convert "$W/orig-heads0" --out "$W/o.ckpt"
expect_fail "model\.heads = 0 is out of range" "$T" convert "$W/dif" --out "$W/o.ckpt" --set model.heads=0
expect_fail "model\.heads = 0 is out of range" "$T" train "${CFG[@]}" --out "$W/h0" --steps 1 --set model.heads=0
[ ! -e "$W/o.ckpt" ] || fail "a refused convert wrote its output"

# adapters: a LoRA run of 1 step on the base gives RUN/lora-1.safetensors
# shellcheck disable=SC2054  # lora.targets is a comma-separated list, one element
"$T" train "${CFG[@]}" --init "$BASE" --out "$W/lora" --steps 1 --set train.steps=1 \
  --set train.ckpt_every=1 --set lora.rank=2 --set lora.alpha=2 --set lora.targets=to_q,to_v \
  2>"$W/lora.log" || { tail -5 "$W/lora.log"; fail "the LoRA run"; }
AD=$W/lora/lora-1.safetensors
[ -f "$AD" ] || fail "no adapter file: $(ls "$W/lora")"
"$T" convert "$BASE" --merge-lora "$AD" --out "$W/merged.ckpt" >/dev/null 2>"$W/m.log" ||
  fail "the sound merge: $(cat "$W/m.log")"
echo "ok: the sound adapters merge"
cp "$AD" "$W/ad-nan.safetensors"
poke "$W/ad-nan.safetensors" transformer.blocks.0.attn1.to_q.lora_B.weight nan 1
expect_fail "tensor transformer\.blocks\.0\.attn1\.to_q\.lora_B\.weight has a non-finite value" \
  "$T" convert "$BASE" --merge-lora "$W/ad-nan.safetensors" --out "$W/m-nan.ckpt"
for a in nan inf 1e30 0; do
  cp "$AD" "$W/ad-alpha.safetensors"
  meta "$W/ad-alpha.safetensors" tessera.lora.alpha "$a"
  expect_fail "the LoRA alpha in its metadata is .*not a finite number in \[1e-06, 1e\+06\]" \
    "$T" convert "$BASE" --merge-lora "$W/ad-alpha.safetensors" --out "$W/m-alpha.ckpt"
done
cp "$AD" "$W/ad-rank.safetensors"
meta "$W/ad-rank.safetensors" tessera.lora.rank 0
expect_fail "the LoRA rank in its metadata is not a whole number in \[1, 4096\]" \
  "$T" convert "$BASE" --merge-lora "$W/ad-rank.safetensors" --out "$W/m-rank.ckpt"
# finite adapters whose product overflows a float: every A and B value 1e20
cp "$AD" "$W/ad-big.safetensors"
for m in lora_A lora_B; do poke "$W/ad-big.safetensors" "transformer.blocks.0.attn1.to_q.$m.weight" 1e20:all 1; done
expect_fail "merged tensor blocks\.0\.q\.weight has a non-finite value" \
  "$T" convert "$BASE" --merge-lora "$W/ad-big.safetensors" --out "$W/m-big.ckpt"
for f in m-nan m-alpha m-rank m-big; do [ ! -e "$W/$f.ckpt" ] || fail "$f.ckpt was written"; done

# a LoRA file where a checkpoint is expected
expect_fail "is a LoRA adapters file, not a checkpoint: .*tessera convert BASE --merge-lora" \
  "$T" train "${CFG[@]}" --init "$AD" --out "$W/init-lora" --steps 1

# model.depth's maximum
C=$(ls "$SRC"/configs/cost/*.conf | head -1)
printf 'tokens\n100\n200\n300\n' >"$W/len.csv"
PLAN=("$T" plan --lengths "$W/len.csv" --ranks 2 --config "$SRC/configs/model/tiny.conf"
      --mem-bytes 8000000000 --cost "$C" --steps 1)
"${PLAN[@]}" --set model.depth=1024 >"$W/plan.log" 2>&1 || fail "model.depth = 1024: $(tail -2 "$W/plan.log")"
echo "ok: model.depth = 1024 plans"
expect_fail "model\.depth = 1025 is out of range \[1, 1024\]" "${PLAN[@]}" --set model.depth=1025
expect_fail "model\.heads = 0 is out of range" "${PLAN[@]}" --set model.heads=0
echo "bad values: all passed"
