#!/usr/bin/env bash
# tools/run.sh — the main job on an embedded default, from a fresh machine:
# installs and builds (tools/setup.sh), makes a handful of clips of different lengths
# (seconds to a few minutes) with the ffmpeg CLI's test sources when no input is given,
# ingests them into a token store, prints the store's statistics and a Dynamic-CP plan,
# then trains the `tiny` DiT for about 3 minutes on the CPU and samples a video from it.
#   tools/run.sh                 embedded default clips -> out/demo/store
#   tools/run.sh SRC...          your own videos (files, folders, @list.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
T=build/tools/tessera
OUT=${OUT:-out/demo}
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

# Train the tiny DiT on the CPU (docs/train.md). Its own store of the same videos: 2 s
# clips at 4 fps, short side 32, patch 1x4x4 (48 values per token, so the 64-wide model
# can carry them; 896 tokens a clip), labelled by folder. 200 steps of 4 clips take 2-4
# minutes on 2 cores (STEPS=N to change); a rerun resumes (or finds the run done).
STEPS=${STEPS:-200}
echo "run: ingesting a training store $OUT/train-store (4 fps, short side 32, patch 1x4x4, 2 s clips)"
rc=0
$T ingest "$@" --out "$OUT/train-store" --fps 4 --short-side 32 --patch 1x4x4 --max-seconds 2 \
  --label-from-dir || rc=$?
[ $rc -eq 1 ] && exit 1
nlabels=$(sqlite3 "$OUT/train-store/index.sqlite" "select count(distinct label) from clips where label is not null and label != ''")
TRAIN=(--config configs/model/tiny.conf --data "$OUT/train-store" --out "$OUT/run" --steps "$STEPS"
       --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.num_classes="$nlabels"
       --set train.global_batch=4 --set train.mem_tokens=4096 --set train.steps="$STEPS"
       --set train.warmup=20 --set train.lr=2e-3 --set train.min_lr=2e-4
       --set train.ckpt_every=100 --set train.log_every=10)
resume=(); ls "$OUT/run"/ckpt-*.safetensors >/dev/null 2>&1 && resume=(--resume)
echo "run: training the tiny DiT for $STEPS steps on the CPU -> $OUT/run (metrics.jsonl, checkpoints)"
$T train "${TRAIN[@]}" "${resume[@]}"
CKPT="$OUT/run/ckpt-$STEPS.safetensors"
label=(); [ "$nlabels" -gt 0 ] && label=(--label "$(sqlite3 "$OUT/train-store/index.sqlite" "select min(label) from clips where label != ''")" --cfg 2)
echo "run: sampling 16 frames of 32x56 from $CKPT (EMA weights${label:+, label ${label[1]}, guidance 2})"
$T sample --ckpt "$CKPT" --frames 16 --size 32x56 --steps 32 "${label[@]}" --out "$OUT/sample.mp4"
echo "run: loss $(jq -r '"\(.loss) at step \(.step)"' "$OUT/run/metrics.jsonl" | head -1) -> $(jq -r '"\(.loss) at step \(.step)"' "$OUT/run/metrics.jsonl" | tail -1)"
echo "run: sample video $OUT/sample.mp4; checkpoints and metrics in $OUT/run"
