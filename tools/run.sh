#!/usr/bin/env bash
# tools/run.sh — the main job on an embedded default, from a fresh machine:
#  1. installs and builds (tools/setup.sh), makes a handful of clips of 6 s to 3 min with
#     the ffmpeg CLI's test sources, ingests them into a token store, prints its
#     statistics, lists its clips and prints a Dynamic-CP plan;
#  2. the learning demo: makes 192 short videos of three kinds (tools/demo_clips.sh:
#     sunsets, seas, moons), ingests them small (32x32, 4 fps, patch 1x4x4: 128 to 384
#     tokens a clip),
#     trains a small DiT on the CPU (80 s on 2 quiet cores, README "Demo") with 12 clips held out
#     for validation and samples every 150 steps, then samples one clip per kind and
#     measures how much they look like the training data (tools/sample_stats.py):
#     neighbouring-token colour correlation and distance to the nearest training clip,
#     against noise and against the held-out clips.
#   tools/run.sh                 embedded default clips -> out/demo/
#   tools/run.sh SRC...          your own videos (files, folders, @list.txt) for both parts
#   STEPS=N tools/run.sh         train N steps (default 900)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
T=build/tools/tessera
OUT=${OUT:-out/demo}
OWN=$#  # 0: the embedded default videos, else the user's SRC... for both parts
mkdir -p "$OUT"

if [ $# -eq 0 ]; then
  CLIPS="$OUT/clips"
  mkdir -p "$CLIPS/patterns" "$CLIPS/nature"
  # name | lavfi source | seconds   (low resolution keeps the demo quick on 2 cores)
  make_clip() {
    local path=$1 src=$2 secs=$3
    [ -s "$path" ] && return 0
    echo "run: making $path ($secs s) with ffmpeg's $src test source"
    ffmpeg -v error -y -f lavfi -i "$src" -t "$secs" -c:v libx264 -preset veryfast -pix_fmt yuv420p "$path.tmp.mp4"
    mv "$path.tmp.mp4" "$path"
  }
  make_clip "$CLIPS/patterns/testsrc2-6s.mp4" "testsrc2=s=320x240:r=25" 6
  make_clip "$CLIPS/patterns/smptehdbars-15s.mp4" "smptehdbars=s=320x180:r=30,hue=H=t" 15
  make_clip "$CLIPS/nature/mandelbrot-40s.mp4" "mandelbrot=s=320x180:r=24" 40
  make_clip "$CLIPS/nature/life-90s.mp4" "life=s=320x180:r=24:mold=10:ratio=0.1:death_color=#C83232:life_color=#00ff00" 90
  make_clip "$CLIPS/patterns/cellauto-180s.mp4" "cellauto=s=256x144:r=24:rule=110" 180
  set -- "$CLIPS"
fi

echo "run: ingesting $* into $OUT/store"
rc=0
$T ingest "$@" --out "$OUT/store" --label-from-dir || rc=$?
[ $rc -eq 1 ] && exit 1   # 2 = some sources failed: they are listed above, go on
$T index stats "$OUT/store"
$T index verify "$OUT/store"
# What the Dynamic-CP scheduler would do with this store on 8 GPUs (h100-dit1b cost
# model, 16k tokens per rank), against static CP: docs/plan.md.
$T plan --data "$OUT/store" --ranks 8 --gpus-per-node 8 --mem-tokens 16384 \
  --global-batch 5 --steps 1 --cost configs/cost/h100-dit1b.conf --json "$OUT/plan.json"
echo "run: store in $OUT/store, plan in $OUT/plan.json; look at a clip with:"
echo "  $T index export $OUT/store --clip 1 --out $OUT/clip1.mp4"

$T index list "$OUT/store" --limit 5

# ---- 2. the learning demo (README "Demo": what it shows and the measured figures) ----------
# The model: tiny.conf at patch 1x4x4 (48 values a token, which the 64-wide model can
# carry), 2 heads of 32 (3D RoPE gets 8 dimensions per spatial axis; rope_theta 100 spreads
# its frequencies over an 8-token grid), the length shift at 64 tokens (more noise in
# training and sampling: the clips' large structure forms first). Batches of 16 clips
# (~4,000 tokens), 900 steps.
STEPS=${STEPS:-900}
if [ "$OWN" -eq 0 ]; then
  echo "run: making the demo's training videos in $OUT/demo-clips (tools/demo_clips.sh)"
  tools/demo_clips.sh "$OUT/demo-clips"
  set -- "$OUT/demo-clips"
fi
echo "run: ingesting a training store $OUT/train-store (4 fps, short side 32, patch 1x4x4, clips of <= 2 s)"
rc=0
$T ingest "$@" --out "$OUT/train-store" --fps 4 --short-side 32 --patch 1x4x4 --max-seconds 2 \
  --label-from-dir --quiet || rc=$?
[ $rc -eq 1 ] && exit 1
DB="$OUT/train-store/index.sqlite"
nlabels=$(sqlite3 "$DB" "select count(distinct label) from clips where label is not null and label != ''")
nclips=$(sqlite3 "$DB" "select count(*) from clips")
nval=$((nclips >= 40 ? 12 : nclips / 4))
TRAIN=(--config configs/model/tiny.conf --data "$OUT/train-store" --out "$OUT/run" --steps "$STEPS"
       --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.heads=2
       --set model.rope_theta=100 --set model.num_classes="$nlabels"
       --set train.global_batch=16 --set train.mem_tokens=4096 --set train.steps="$STEPS"
       --set train.warmup=50 --set train.lr=3e-3 --set train.min_lr=3e-4
       --set train.t_shift_tokens=64 --set train.ckpt_every=300 --set train.log_every=10
       --set train.val_clips="$nval" --set train.val_every=150
       --set train.sample_every=150 --set train.sample_cfg=3)
resume=(); ls "$OUT/run"/ckpt-*.safetensors >/dev/null 2>&1 && resume=(--resume)
# OpenMP threads that wait passively: on a machine shared with other work, spinning
# threads made steps 3x slower (measured: 766 against 2,394 tokens/s at 2 threads).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
echo "run: training for $STEPS steps on the CPU -> $OUT/run (metrics.jsonl, samples/, checkpoints)"
t0=$(date +%s)
$T train "${TRAIN[@]}" "${resume[@]}"
echo "run: trained in $(($(date +%s) - t0)) s"
CKPT="$OUT/run/ckpt-$STEPS.safetensors"
cp "$OUT/run/samples/sample-$STEPS.mp4" "$OUT/sample.mp4"

# Four samples per label (seeds 0-3; without labels, seeds 0-3 unconditional) at the most common
# grid, as Y4M (exact pixels), measured against the training clips: one seed alone can be
# lucky or not.
IFS='|' read -r gt gh gw < <(sqlite3 "$DB" "select T, H, W from clips group by T, H, W order by count(*) desc, T*H*W limit 1")
SAMPLES=()
sample() {  # sample NAME LABEL-ARGS...: seeds 0-3 of one label
  local name=$1 seed; shift
  for seed in 0 1 2 3; do
    $T sample --ckpt "$CKPT" --frames "$gt" --size "$((gh * 4))x$((gw * 4))" --seed $seed "$@" \
      --out "$OUT/samples/$name-seed$seed.y4m" 2>/dev/null
    SAMPLES+=("$OUT/samples/$name-seed$seed.y4m${2:+:$2}")
  done
}
mkdir -p "$OUT/samples"
if [ "$nlabels" -gt 0 ]; then
  while IFS= read -r label; do sample "$label" --label "$label" --cfg 3; done \
    < <(sqlite3 "$DB" "select distinct label from clips where label != '' order by label")
else
  sample unlabelled
fi
echo "run: how much the samples look like the training data (tools/sample_stats.py):"
PY=python3  # Debian's numpy (tools/setup.sh) is /usr/bin/python3's; a python3 first on PATH may lack it
python3 -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
$PY tools/sample_stats.py --tessera "$T" --store "$OUT/train-store" --run "$OUT/run" \
  --json "$OUT/sample_stats.json" "${SAMPLES[@]}"
echo "run: loss $(jq -r 'select(.loss) | "\(.loss) at step \(.step)"' "$OUT/run/metrics.jsonl" | head -1) -> $(jq -r 'select(.loss) | "\(.loss) at step \(.step)"' "$OUT/run/metrics.jsonl" | tail -1)"
echo "run: validation loss (held-out clips, fixed noise) $(jq -r 'select(.val_loss) | "\(.val_loss * 1000 | round / 1000) at step \(.step)"' "$OUT/run/metrics.jsonl" | paste -sd' ' | sed 's/ at step \([0-9]*\) / at step \1 -> /g')"
echo "run: samples during training in $OUT/run/samples/ (one clip per kind, side by side), the last as $OUT/sample.mp4"
