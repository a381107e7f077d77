#!/usr/bin/env bash
# tests/model/wan_lora_train.sh — LoRA training (issue 28): a tiny Wan model (wan-tiny.conf,
# 30 steps of full training from the seed as the base: its output layer starts at zero) trained with lora.rank = 4 for 40 steps
# on latents with captions (as wan_finetune.sh): the loss falls (mean of the last 5 steps
# below 0.8 x the first 5's), the base is bitwise unchanged (the adapter file's
# tessera.base_weights equals the base checkpoint's xxh3_weights) and the adapters changed
# (lora_B, zero at the start, is not). No Python venv needed (python3 with the stdlib only).
set -euo pipefail
T=${TESSERA_BIN:?set by ctest}
ML=${MAKE_LATENTS:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-loratrain.XXXXXX")
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

zeros=$(printf ',0%.0s' $(seq 13))
values=("1.5,-1.5,-1.5$zeros" "-1.5,1.5,-1.5$zeros" "-1.5,-1.5,1.5$zeros" "1.5,1.5,-1.5$zeros")
colours=(red green blue yellow)
mkdir -p "$W/lat"
for k in 0 1 2 3; do
  for i in 0 1 2 3; do
    "$ML" "$W/lat/${colours[$k]}-$i.safetensors" --shape 2,4,4,16 --seed $((k * 100 + i)) \
      --value "${values[$k]}" --noise 0.2 --text 3,32 --text-words "0,$((k + 2)),1" \
      --caption "a ${colours[$k]} clip"
  done
done
"$T" ingest --latents "$W/lat" --out "$W/store" --workers 1 --quiet 2>"$W/ingest.log"
CFG=(--config "$SRC/configs/model/wan-tiny.conf" --set model.text_len=16 --set model.recompute=0
     --set train.log_every=1 --set train.global_batch=8 --set train.warmup=2)
"$T" train "${CFG[@]}" --data "$W/store" --out "$W/base" --steps 30 --set train.steps=30 --set train.lr=2e-3 \
  2>"$W/base.log" || { tail -5 "$W/base.log"; fail "the base's training step"; }
"$T" train "${CFG[@]}" --data "$W/store" --init "$W/base/ckpt-30.safetensors" --out "$W/run" \
  --steps 40 --set train.steps=40 --set train.lr=1e-2 --set train.ckpt_every=20 \
  --set lora.rank=4 --set lora.alpha=4 --set lora.targets=to_q,to_k,to_v,to_out.0,ffn.net.0.proj,ffn.net.2 \
  2>"$W/train.log" || { tail -5 "$W/train.log"; fail "train with lora.rank=4"; }
first=$(jq -s '[.[0:5][].loss] | add / 5' "$W/run/metrics.jsonl")
last=$(jq -s '[.[-5:][].loss] | add / 5' "$W/run/metrics.jsonl")
jq -n --argjson a "$first" --argjson b "$last" -e '$b < 0.8 * $a' >/dev/null ||
  fail "loss did not fall: first 5 steps $first, last 5 $last"
echo "ok: LoRA training: loss (mean of 5 steps) $first -> $last"
[ -f "$W/run/lora-20.safetensors" ] && [ -f "$W/run/lora-40.safetensors" ] ||
  fail "the adapter files lora-20, lora-40 were not written"
python3 - "$W/base/ckpt-30.safetensors" "$W/run/lora-40.safetensors" <<'PYEOF' || fail "base or adapters"
import json, struct, sys
def open_st(path):
    f = open(path, 'rb'); n = struct.unpack('<Q', f.read(8))[0]
    return f, json.loads(f.read(n)), 8 + n
_, base, _ = open_st(sys.argv[1])
f, lora, off = open_st(sys.argv[2])
want, got = base['__metadata__']['xxh3_weights'], lora['__metadata__']['tessera.base_weights']
assert want == got, f"the base changed: its weights' checksum {want}, after training {got}"
changed = 0
for name, t in lora.items():
    if name.endswith('lora_B.weight'):
        f.seek(off + t['data_offsets'][0])
        b = f.read(t['data_offsets'][1] - t['data_offsets'][0])
        changed += any(b)
nb = sum(k.endswith('lora_B.weight') for k in lora)
assert changed == nb, f"{nb - changed} of {nb} lora_B tensors are still zero"
print(f"ok: base weights bitwise unchanged ({got}); all {nb} lora_B tensors trained")
PYEOF
