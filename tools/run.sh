#!/usr/bin/env bash
# tools/run.sh — the main job on an embedded default, from a fresh machine:
#  1. installs and builds (tools/setup.sh), makes a handful of clips of 6 s to 3 min with
#     the ffmpeg CLI's test sources, ingests them into a token store, prints its
#     statistics, lists its clips and prints a Dynamic-CP plan;
#  2. the learning demo, text-to-video: makes 192 short videos of three kinds and a
#     manifest with a caption for each (tools/demo_clips.sh: sunsets, seas, moons; their
#     colours, speeds and positions in words), embeds the captions with all-MiniLM-L6-v2
#     (tools/embed_captions.py, the venv of tools/setup_venv.sh), ingests the manifest
#     small (32x32, 4 fps, patch 1x4x4: 128 to 384 tokens a clip) with the embeddings,
#     trains a small DiT with cross-attention on them on the CPU (docs/demo.md) with 12
#     clips held out for validation, then samples four clips from one training caption
#     of each kind and from a caption it never saw ("an orange moon over a violet sky")
#     and measures them (tools/sample_stats.py): neighbouring-token colour correlation
#     and distance to the nearest training clip, against noise and against the held-out
#     clips, and the samples' colours and layout against the captions' words. Without
#     the venv (or with TESSERA_NO_VENV=1), and on your own videos, it trains on class
#     labels from the clips' folders instead and samples one label at a time. It ends with
#     the run's report (`tessera report`: RUN/report.html) and prints its path.
#   tools/run.sh                 embedded default clips -> out/demo/
#   tools/run.sh SRC...          your own videos (files, folders, @list.txt) for both parts
#   STEPS=N tools/run.sh         train N steps (default 900)
#   TESSERA_NO_VENV=1 tools/run.sh   the demo on class labels, no Python venv
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
  --global-batch 5 --steps 1 --cost configs/cost/h100-dit1b.conf --out "$OUT/plan.json" \
  --timeline "$OUT/plan-timeline.png"
echo "run: store in $OUT/store, plan in $OUT/plan.json, its picture $OUT/plan-timeline.png; look at a clip with:"
echo "  $T index export $OUT/store --clip 1 --out $OUT/clip1.mp4"

$T index list "$OUT/store" --limit 5

# ---- 2. the learning demo (docs/demo.md: what it shows and the measured figures) ----------
# On the default clips it trains text-to-video: each clip's caption (tools/demo_clips.sh's
# manifest) embedded per token by all-MiniLM-L6-v2 (tools/embed_captions.py, the venv's
# python) and read by cross-attention; on your own videos, or without the venv, on class
# labels from the clips' folders.
# The model: tiny.conf at patch 1x4x4 (48 values a token, which the 64-wide model can
# carry), 2 heads of 32 (3D RoPE gets 8 dimensions per spatial axis; rope_theta 100 spreads
# its frequencies over an 8-token grid), the length shift at 64 tokens (more noise in
# training and sampling: the clips' large structure forms first). Batches of 16 clips
# (~4,000 tokens), 900 steps.
STEPS=${STEPS:-900}
# Not in the training captions, of words that are: the moon's shape in a sunset's colours.
UNSEEN="an orange moon over a violet sky"
INGEST=(--fps 4 --short-side 32 --patch 1x4x4 --max-seconds 2 --label-from-dir --quiet)

# The venv's python on stdout (tools/setup_venv.sh, which creates the venv when it is
# missing: ~6 min and 6 GB from PyPI), or a failure saying why there is none.
venv_python() {
  if [ "${TESSERA_NO_VENV:-0}" = 1 ]; then
    echo "run: TESSERA_NO_VENV=1: no caption encoder" >&2; return 1
  fi
  tools/setup_venv.sh && return 0
  echo "run: tools/setup_venv.sh failed (above): no caption encoder" >&2; return 1
}

# embed_captions PY CLIPS: every caption of CLIPS/demo.csv into $EMB/R-0.caption.safetensors
# and the unseen caption into $UNSEEN_EMB/0-0.caption.safetensors (files already there
# are kept: a rerun loads no model)
embed_captions() {
  local py=$1 clips=$2
  echo "run: embedding the captions of $clips/demo.csv -> $EMB (tools/embed_captions.py: all-MiniLM-L6-v2, 384 wide, a row per token)"
  $T manifest "$clips/demo.csv" --jsonl 2>/dev/null | "$py" tools/embed_captions.py - --out "$EMB" &&
    jq -nc --arg c "$UNSEEN" '{row: 0, span: 0, caption: $c}' |
      "$py" tools/embed_captions.py - --out "$UNSEEN_EMB" --quiet
}

# rows FILE: the rows (tokens) of a caption file's text_emb, from its safetensors header
rows() {
  $PY -c 'import json, struct, sys
f = open(sys.argv[1], "rb")
print(json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["text_emb"]["shape"][0])' "$1"
}

PY=python3  # Debian's numpy (tools/setup.sh) is /usr/bin/python3's; a python3 first on PATH may lack it
python3 -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
MODE=labels
if [ "$OWN" -eq 0 ]; then
  CLIPS2="$OUT/demo-clips"
  echo "run: making the demo's training videos and their captions in $CLIPS2 (tools/demo_clips.sh)"
  tools/demo_clips.sh "$CLIPS2"
  set -- "$CLIPS2"
  # one worker: clip ids (the keys of the training noise and of the held-out split) in the
  # order of the clips, so that a rerun trains the same model (192 small clips: seconds)
  INGEST+=(--workers 1)
  EMB="$OUT/caption-emb" UNSEEN_EMB="$OUT/unseen-caption"
  if ! VPY=$(venv_python); then :
  elif ! embed_captions "$VPY" "$CLIPS2"; then echo "run: embedding the captions failed (above)" >&2
  else MODE=text; fi
  [ $MODE = text ] || echo "run: so the demo trains on class labels (the clips' folders) instead of captions"
fi

# Stores and runs of the two modes apart: a run resumes only with the model it started with.
rc=0
if [ $MODE = text ]; then
  STORE="$OUT/text-store" RUN="$OUT/text-run"
  echo "run: ingesting $CLIPS2/demo.csv with its caption embeddings into $STORE (4 fps, short side 32, patch 1x4x4)"
  $T ingest --manifest "$CLIPS2/demo.csv" --caption-embeddings "$EMB" --out "$STORE" "${INGEST[@]}" || rc=$?
else
  STORE="$OUT/train-store" RUN="$OUT/run"
  echo "run: ingesting a training store $STORE (4 fps, short side 32, patch 1x4x4, clips of <= 2 s)"
  $T ingest "$@" --out "$STORE" "${INGEST[@]}" || rc=$?
fi
[ $rc -eq 1 ] && exit 1
DB="$STORE/index.sqlite"
nlabels=$(sqlite3 "$DB" "select count(distinct label) from clips where label is not null and label != ''")
nclips=$(sqlite3 "$DB" "select count(*) from clips")
nval=$((nclips >= 40 ? 12 : nclips / 4))
if [ $MODE = text ]; then
  # cross-attention over 384-wide rows, as many as the longest caption, the unseen one's
  # included (the sampler refuses a longer one); the folders' labels stay in the store for
  # the statistics, unused by the model. Captions are dropped with labels' rate
  # (train.caption_dropout 0.1): the unconditional model of guidance.
  tlen=$(sqlite3 "$DB" "select max(caption_tokens) from clips")
  u=$(rows "$UNSEEN_EMB/0-0.caption.safetensors")
  COND=(--set model.text_dim=384 --set model.text_len=$((u > tlen ? u : tlen)))
else
  COND=(--set model.num_classes="$nlabels")
fi
TRAIN=(--config configs/model/tiny.conf --data "$STORE" --out "$RUN" --steps "$STEPS"
       --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.heads=2
       --set model.rope_theta=100 "${COND[@]}"
       --set train.global_batch=16 --set train.mem_tokens=4096 --set train.steps="$STEPS"
       --set train.warmup=50 --set train.lr=3e-3 --set train.min_lr=3e-4
       --set train.t_shift_tokens=64 --set train.ckpt_every=300 --set train.log_every=10
       --set train.val_clips="$nval" --set train.val_every=150
       --set train.sample_every=150 --set train.sample_cfg=3)
resume=(); ls "$RUN"/ckpt-*.safetensors >/dev/null 2>&1 && resume=(--resume)
# OpenMP threads that wait passively: on a machine shared with other work, spinning
# threads made steps 3x slower (measured: 766 against 2,394 tokens/s at 2 threads).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
echo "run: training ($MODE) for $STEPS steps on the CPU -> $RUN (metrics.jsonl, samples/, checkpoints)"
t0=$(date +%s)
$T train "${TRAIN[@]}" "${resume[@]}"
echo "run: trained in $(($(date +%s) - t0)) s"
CKPT="$RUN/ckpt-$STEPS.safetensors"

# Four samples per label or caption (seeds 0-3; without labels, seeds 0-3 unconditional) at
# the most common grid, as Y4M (exact pixels), measured against the training clips: one
# seed alone can be lucky or not.
IFS='|' read -r gt gh gw < <(sqlite3 "$DB" "select T, H, W from clips group by T, H, W order by count(*) desc, T*H*W limit 1")
SAMPLES=() READING=() SEED0=()  # READING: sample_stats.py options that read captions
sample() {  # sample NAME ARGS...: seeds 0-3 of one label or caption, measured as NAME
  local name=$1 seed; shift
  SEED0+=(-i "$OUT/samples/$name-seed0.y4m")
  for seed in 0 1 2 3; do
    $T sample --ckpt "$CKPT" --frames "$gt" --size "$((gh * 4))x$((gw * 4))" --seed $seed "$@" \
      --out "$OUT/samples/$name-seed$seed.y4m" 2>/dev/null
    SAMPLES+=("$OUT/samples/$name-seed$seed.y4m:$name")
  done
}
mkdir -p "$OUT/samples"
if [ $MODE = text ]; then
  # Each kind's caption seen in training: its first training clip's (SQLite takes the bare
  # columns from the min()'s row); a held-out clip's caption was never trained on.
  held=$(grep -v '^#' "$RUN/val_clips.txt" | cut -d' ' -f1 | paste -sd, -)
  while IFS='|' read -r label row caption; do
    echo "run: sampling $label from a training caption: \"$caption\""
    sample "$label" --caption "$EMB/$row-0.caption.safetensors" --cfg 3
    READING+=(--caption "$label=$caption")
  done < <(sqlite3 "$DB" "select label, min(manifest_row), caption from clips
                          where id not in ($held) group by label order by label")
  echo "run: sampling a caption not seen in training: \"$UNSEEN\""
  sample unseen --caption "$UNSEEN_EMB/0-0.caption.safetensors" --cfg 3
  READING+=(--palette "$CLIPS2/palette.txt" --caption "unseen=$UNSEEN")
  # seed 0 of each caption side by side, as the trainer's samples are
  ffmpeg -v error -y "${SEED0[@]}" -filter_complex "hstack=inputs=$((${#SEED0[@]} / 2))" \
    -c:v libx264 -pix_fmt yuv420p "$OUT/sample.mp4"
elif [ "$nlabels" -gt 0 ]; then
  cp "$RUN/samples/sample-$STEPS.mp4" "$OUT/sample.mp4"
  while IFS= read -r label; do sample "$label" --label "$label" --cfg 3; done \
    < <(sqlite3 "$DB" "select distinct label from clips where label != '' order by label")
else
  cp "$RUN/samples/sample-$STEPS.mp4" "$OUT/sample.mp4"
  sample unlabelled
fi
echo "run: how much the samples look like the training data (tools/sample_stats.py):"
$PY tools/sample_stats.py --tessera "$T" --store "$STORE" --run "$RUN" \
  --json "$OUT/sample_stats.json" "${READING[@]}" "${SAMPLES[@]}"
echo "run: loss $(jq -r 'select(.loss) | "\(.loss) at step \(.step)"' "$RUN/metrics.jsonl" | head -1) -> $(jq -r 'select(.loss) | "\(.loss) at step \(.step)"' "$RUN/metrics.jsonl" | tail -1)"
echo "run: validation loss (held-out clips, fixed noise) $(jq -r 'select(.val_loss) | "\(.val_loss * 1000 | round / 1000) at step \(.step)"' "$RUN/metrics.jsonl" | paste -sd' ' | sed 's/ at step \([0-9]*\) / at step \1 -> /g')"
# The run's report (tools/report.py): curves, the samples of every step, memory, plans and
# config in one page that opens from disk.
$T report "$RUN"
if [ $MODE = text ]; then
  echo "run: samples during training in $RUN/samples/ (unconditional, seeds 0-3 side by side); the captions' samples in $OUT/samples/, seed 0 of each side by side in $OUT/sample.mp4"
else
  echo "run: samples during training in $RUN/samples/ (one clip per kind, side by side), the last as $OUT/sample.mp4"
fi
echo "run: the report of the run: $RUN/report.html (open it in a browser: one file, no server; curves alone $RUN/report.png)"
