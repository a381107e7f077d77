#!/usr/bin/env bash
# tools/demo_chunks.sh — block-causal training with diffusion forcing, and chunk-by-chunk
# sampling, on the CPU (docs/demo.md "Chunk by chunk"):
# 1. NCLIPS synthetic clips of 16 frames (4 s at 4 fps, 32x32): a yellow square crossing a dark
#    blue field left to right at a speed and height of its own (the ffmpeg CLI's lavfi).
# 2. Ingested at patch 1x4x4 (64 tokens a frame, 1,024 a clip).
# 3. The tiny model trained with model.attn_mask = block_causal (chunks of 2 frames) and
#    train.noise_per_chunk = 1 (a noise level per chunk) for STEPS steps.
# 4. `tessera sample --chunked` (chunk 0 alone, then each chunk with the ones before it as
#    clean context) and a whole-clip sample of the same seed, as MP4 and a strip picture
#    of their frames; the loss curve as loss.png.
#   tools/demo_chunks.sh                 (OUT=out/chunk-demo, STEPS=300, NCLIPS=24)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${TESSERA_BIN:-build/tools/tessera}
OUT=${OUT:-out/chunk-demo}
STEPS=${STEPS:-300}
NCLIPS=${NCLIPS:-24}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=/usr/bin/python3
mkdir -p "$OUT/clips"
t0=$(date +%s)
for i in $(seq 0 $((NCLIPS - 1))); do  # speed 4..11 px/s, height 2..22 px: fixed, so reruns match
  f="$OUT/clips/square-$i.mp4"
  [ -f "$f" ] && continue
  v=$((4 + i % 8)) y=$((2 + (i * 7) % 21))
  ffmpeg -loglevel error -y -f lavfi -i "color=c=0x182050:s=32x32:r=4:d=4" \
    -f lavfi -i "color=c=0xffd040:s=8x8:r=4:d=4" \
    -filter_complex "[0][1]overlay=x='t*$v-2':y=$y" -frames:v 16 -pix_fmt yuv420p "$f"
done
if [ ! -f "$OUT/store/index.sqlite" ]; then
  $T ingest "$OUT/clips" --out "$OUT/store" --fps 4 --short-side 32 --patch 1x4x4 \
    --workers 1 >"$OUT/ingest.log" 2>&1 || { tail -5 "$OUT/ingest.log" >&2; exit 1; }
fi
echo "demo_chunks: clips and store in $(($(date +%s) - t0)) s"
RUN="$OUT/run"
TRAIN=(--config configs/model/tiny.conf --data "$OUT/store" --out "$RUN" --steps "$STEPS"
       --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.heads=2
       --set model.rope_theta=100 --set model.attn_mask=block_causal --set model.mask_chunk=2
       --set train.noise_per_chunk=1 --set train.global_batch=8 --set train.mem_tokens=8192
       --set train.steps="$STEPS" --set train.warmup=$((STEPS < 30 ? STEPS : 30))
       --set train.lr=3e-3 --set train.min_lr=3e-4 --set train.t_shift_tokens=64
       --set train.ckpt_every="$STEPS" --set train.log_every=10 --set train.class_dropout=0
       --set train.ema_decay=0.99)
resume=(); ls "$RUN"/ckpt-*.safetensors >/dev/null 2>&1 && resume=(--resume)
t1=$(date +%s)
$T train "${TRAIN[@]}" "${resume[@]}" >"$OUT/train.log" 2>&1 || { tail -5 "$OUT/train.log" >&2; exit 1; }
echo "demo_chunks: trained $STEPS steps in $(($(date +%s) - t1)) s"
CKPT="$RUN/ckpt-$STEPS.safetensors"
t2=$(date +%s)
for mode in chunked whole; do
  flag=(); [ $mode = chunked ] && flag=(--chunked)
  $T sample --ckpt "$CKPT" --frames 16 --size 32x32 --steps 24 --seed 0 "${flag[@]}" \
    --out "$OUT/$mode.y4m" 2>>"$OUT/sample.log"
  ffmpeg -loglevel error -y -i "$OUT/$mode.y4m" -vf "scale=128:128:flags=neighbor" \
    -pix_fmt yuv420p "$OUT/$mode.mp4"
  ffmpeg -loglevel error -y -i "$OUT/$mode.y4m" -vf "scale=64:64:flags=neighbor,tile=16x1:padding=2" \
    -frames:v 1 "$OUT/$mode-strip.png"
done
echo "demo_chunks: sampled in $(($(date +%s) - t2)) s"
$PY - "$RUN/metrics.jsonl" "$OUT/loss.png" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
s = [r["step"] for r in rows if "loss" in r]
l = [r["loss"] for r in rows if "loss" in r]
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.figure(figsize=(5, 3)); plt.plot(s, l); plt.yscale("log")
    plt.xlabel("step"); plt.ylabel("training loss"); plt.title("block_causal, a level per chunk")
    plt.tight_layout(); plt.savefig(sys.argv[2], dpi=100)
except ImportError:
    print("demo_chunks: no matplotlib: loss.png not drawn", file=sys.stderr)
k = max(1, len(l) // 10)
print("demo_chunks: loss %.4f (step %d) -> %.4f (mean of the last %d logged)" % (l[0], s[0], sum(l[-k:]) / k, k))
EOF
echo "demo_chunks: $OUT/chunked.mp4, chunked-strip.png (chunk by chunk), whole.mp4, whole-strip.png, loss.png"
