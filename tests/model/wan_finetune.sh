#!/usr/bin/env bash
# tests/model/wan_finetune.sh — fine-tuning a Wan model end to end (issue 27, 5), on
# generated data: a tiny WanTransformer3DModel of wan-tiny.conf's shape made with diffusers
# (random init, nothing downloaded) -> `tessera convert` -> `tessera train --init` on a
# latent store with captions (32 clips of 4 colours, 16 channels, each captioned "a COLOUR
# clip" as one-hot words) -> the loss falls (the mean of the last 5 steps below 0.7 x that
# of the first 5) -> `tessera sample --raw` of the converted checkpoint and a sample of the
# trained one run -> `tessera convert --to diffusers` of the weights (fp32) and of the EMA
# (bf16) load with from_pretrained and give a finite output.
# Needs the venv of tools/setup_venv.sh (TESSERA_PYTHON): without it, skipped (exit 77).
set -euo pipefail
. "$(dirname "$0")/colour_store.sh"  # tests/lib.sh (T, SRC, scratch, fail), colour_latents
ML=${MAKE_LATENTS:?set by ctest}
. "$(dirname "$0")/../venv.sh"
need_venv torch diffusers
scratch wanft

# wan-tiny.conf's shape: dim 48 = 2 x 24, 2 layers, ffn 112, 16 channels, captions of 32
"$PY" - "$W/src" <<'PYEOF'
import sys, torch
from diffusers import WanTransformer3DModel
torch.manual_seed(0)
WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24,
                      in_channels=16, out_channels=16, text_dim=32, freq_dim=256, ffn_dim=112,
                      num_layers=2).save_pretrained(sys.argv[1])
PYEOF
"$T" convert "$W/src" --out "$W/init.ckpt" --set model.text_len=16 --set model.recompute=0
colour_latents "$W/lat" 8 16 32
"$ML" "$W/red.safetensors" --shape 1,1,1,16 --text 3,32 --text-words "0,2,1" --caption "a red clip"
"$T" ingest --latents "$W/lat" --out "$W/store" --workers 1 --quiet 2>"$W/ingest.log"

# the converted model's own sample, before training (weights only: --raw)
"$T" sample --ckpt "$W/init.ckpt" --raw --frames 2 --size 4x4 --steps 8 \
  --caption "$W/red.safetensors" --out "$W/init.mp4" 2>"$W/sample.log" || fail "sample --raw of the converted checkpoint"
"$T" train --config "$SRC/configs/model/wan-tiny.conf" --data "$W/store" --init "$W/init.ckpt" \
  --out "$W/run" --steps 60 --set train.log_every=1 --set train.global_batch=16 \
  --set train.warmup=5 --set train.steps=60 --set train.lr=2e-3 2>"$W/train.log" ||
  { tail -5 "$W/train.log"; fail "train --init from the converted checkpoint"; }
first=$(jq -s '[.[0:5][].loss] | add / 5' "$W/run/metrics.jsonl")
last=$(jq -s '[.[-5:][].loss] | add / 5' "$W/run/metrics.jsonl")
jq -n --argjson a "$first" --argjson b "$last" -e '$b < 0.7 * $a' >/dev/null ||
  fail "loss did not fall: first 5 steps $first, last 5 $last"
echo "ok: train --init from a converted diffusers model: loss (mean of 5 steps) $first -> $last"
"$T" sample --ckpt "$W/run/ckpt-60.safetensors" --frames 2 --size 4x4 --steps 8 \
  --caption "$W/red.safetensors" --out "$W/trained.mp4" 2>>"$W/sample.log" || fail "sample of the trained model"

"$T" convert "$W/run/ckpt-60.safetensors" --to diffusers --out "$W/back"
"$T" convert "$W/run/ckpt-60.safetensors" --to diffusers --ema --dtype bf16 --out "$W/back-ema"
"$PY" - "$W/back" "$W/back-ema" <<'PYEOF'
import sys, torch
from diffusers import WanTransformer3DModel
for path, dt in [(sys.argv[1], torch.float32), (sys.argv[2], torch.bfloat16)]:
    m = WanTransformer3DModel.from_pretrained(path, torch_dtype=dt)
    with torch.no_grad():
        o = m(hidden_states=torch.randn(1, 16, 2, 4, 4, dtype=dt), timestep=torch.tensor([500.0]),
              encoder_hidden_states=torch.randn(1, 3, 32, dtype=dt)).sample
    assert o.shape == (1, 16, 2, 4, 4) and torch.isfinite(o).all(), path
    print(f"ok: exported {path.rsplit('/', 1)[1]} ({dt}) loads with from_pretrained, output finite")
PYEOF
