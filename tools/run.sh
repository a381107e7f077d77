#!/usr/bin/env bash
# tools/run.sh — the main job on an embedded default, from a fresh machine:
# installs and builds (tools/setup.sh), makes a handful of clips of different lengths
# (seconds to a few minutes) with the ffmpeg CLI's test sources when no input is given,
# ingests them into a token store and prints the store's statistics.
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
