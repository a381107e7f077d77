#!/usr/bin/env bash
# tests/train/val.sh — validation on held-out clips (train.val_clips, docs/train.md):
#  1. the same numbers (every level, every length bucket; within 1e-5 relative, the
#     tolerance of tests/dist/plan_invariance.sh) at 1, 2 and 4 ranks (at 2 and 4,
#     mem_tokens 700 splits the 960- and 1280-token clips over CP groups) and with static-CP
#     plans (--plan static), before training and after 2 and 4 steps;
#  2. the split: 3 held-out clips, one per length bucket, never trained on (the batches'
#     clip counts add up to the 5 training clips per epoch), and the same split on a rerun;
#  3. validating does not change training: val_every 1 and val_every 1000 give bitwise
#     the same losses and the same final weights, and a resume across validations too;
#  4. bad settings: val_clips leaving nothing to train on is refused, naming the store;
#  5. with a level per chunk (train.noise_per_chunk) validation scores whole clips at each
#     level: before training the same numbers as without it.
source "$(dirname "$0")/lib.sh"
MPI=(mpirun --oversubscribe)
export OMP_NUM_THREADS=1
# 8 clips of 1..4 s at 4 fps, 40x32 pixels, patch 1x4x4: 320, 640, 960, 1280 tokens, two
# of each (testsrc2 and smptebars)
for s in 1 2 3 4; do
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=160x128:r=12" -t $s "$W/a$s.mp4"
  ffmpeg -nostdin -v error -y -f lavfi -i "smptebars=s=160x128:r=12" -t $s "$W/b$s.mp4"
done
$T ingest "$W"/a*.mp4 "$W"/b*.mp4 --out "$W/store" --fps 4 --short-side 32 --patch 1x4x4 \
  --workers 1 --quiet 2>/dev/null
CONF=(--config "$SRC/configs/model/tiny.conf" --data "$W/store"
      --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.hidden=32
      --set model.heads=2 --set train.global_batch=4 --set train.steps=20 --set train.warmup=2
      --set train.lr=2e-3 --set train.ckpt_every=2 --set train.ckpt_keep=5 --set train.log_every=1
      --set train.val_clips=3 --set train.val_every=2)
# vals RUN: one line per validation: step, loss, the 5 levels, the 3 buckets
vals() { jq -r 'select(.val_loss) | [.step, .val_loss, .val_t[], .val_bucket[]] | @tsv' "$1/metrics.jsonl"; }

# 1. ranks and plans
$T train "${CONF[@]}" --set train.mem_tokens=2048 --out "$W/r1" --steps 4 2>"$W/r1.log" ||
  { cat "$W/r1.log"; fail "1 rank"; }
grep -q "validation on 3 held-out clips (1 short (320-320 tokens), 1 medium (640-960 tokens), 1 long (960-1280 tokens))" "$W/r1.log" ||
  fail "the split's log line: $(grep validation "$W/r1.log")"
[ "$(vals "$W/r1" | cut -f1 | tr '\n' ' ')" = "0 2 4 " ] || fail "validations at $(vals "$W/r1" | cut -f1 | tr '\n' ' ')"
for n in 2 4; do
  "${MPI[@]}" -np $n $T train "${CONF[@]}" --set train.mem_tokens=700 --out "$W/r$n" --steps 4 \
    2>"$W/r$n.log" || { tail -5 "$W/r$n.log"; fail "$n ranks"; }
done
"${MPI[@]}" -np 2 $T train "${CONF[@]}" --set train.mem_tokens=700 --plan static --out "$W/r2s" \
  --steps 4 2>"$W/r2s.log" || { tail -5 "$W/r2s.log"; fail "2 ranks, static plans"; }
jq -e -s 'map(select(.plan)) | all(.plan == "static-balanced")' "$W/r2s/metrics.jsonl" >/dev/null ||
  fail "--plan static did not run static plans"
for r in r2 r4 r2s; do
  paste <(vals "$W/r1") <(vals "$W/$r") | awk -v r=$r '
    { n = NF / 2; if ($1 != $(n + 1)) { print r ": steps differ: " $1 " vs " $(n + 1); bad = 1 }
      for (i = 2; i <= n; i++) { a = $i; b = $(i + n); d = a - b; if (d < 0) d = -d;
        rel = d / (b < 0 ? -b : b); if (rel > m) m = rel; k++ } }
    END { printf "val %s: %d numbers, worst relative difference %.3g\n", r, k, m;
          exit !(k == 27 && m <= 1e-5 && !bad) }' || fail "validation at 1 rank vs $r"
done

# 2. the split: 5 clips train (one epoch = batches of 4 + 1), every bucket has a clip held out
jq -e -s '[.[] | select(.clips)] | .[0].clips == 4 and .[1].clips == 1' "$W/r1/metrics.jsonl" >/dev/null ||
  fail "an epoch is not the 5 training clips: $(jq -c -s '[.[] | .clips]' "$W/r1/metrics.jsonl")"
jq -e -s '.[0].val_clips == 3 and (.[0].val_bucket | [.short, .medium, .long] | all(. != null))' \
  "$W/r1/metrics.jsonl" >/dev/null || fail "held-out clips per bucket: $(head -1 "$W/r1/metrics.jsonl")"

# 3. validating changes nothing of the training
$T train "${CONF[@]}" --set train.mem_tokens=2048 --set train.val_every=1 --out "$W/e1" --steps 4 2>/dev/null
$T train "${CONF[@]}" --set train.mem_tokens=2048 --set train.val_every=1000 --out "$W/e1000" --steps 4 2>/dev/null
$T train "${CONF[@]}" --set train.mem_tokens=2048 --set train.val_every=1000 --out "$W/res" --steps 2 2>/dev/null
$T train "${CONF[@]}" --set train.mem_tokens=2048 --set train.val_every=1 --out "$W/res" --steps 4 --resume 2>/dev/null
for r in e1 e1000 res; do
  diff <(losses_only "$W/r1") <(losses_only "$W/$r") >/dev/null || fail "$r: losses differ from r1"
  cmp <(ckpt_tensors "$W/r1/ckpt-4.safetensors") <(ckpt_tensors "$W/$r/ckpt-4.safetensors") ||
    fail "$r: the weights after 4 steps differ"
done
[ "$(vals "$W/e1" | cut -f1 | tr '\n' ' ')" = "0 1 2 3 4 " ] || fail "val_every 1: $(vals "$W/e1" | cut -f1 | tr '\n' ' ')"
[ "$(vals "$W/e1000" | cut -f1 | tr '\n' ' ')" = "0 4 " ] || fail "val_every 1000: $(vals "$W/e1000" | cut -f1 | tr '\n' ' ')"
diff <(vals "$W/r1" | grep -v '^0') <(vals "$W/e1" | awk '$1 == 2 || $1 == 4') ||
  fail "validation at steps 2 and 4 differs between runs"

# 5. diffusion forcing (a level per chunk) is scored per clip at each fixed level: before
# training, a block_causal model validates the same with and without train.noise_per_chunk
BC=(--set model.attn_mask=block_causal --set model.mask_chunk=1 --set train.mem_tokens=2048 --steps 1)
$T train "${CONF[@]}" "${BC[@]}" --out "$W/bc0" 2>/dev/null || fail "block_causal run"
$T train "${CONF[@]}" "${BC[@]}" --set train.noise_per_chunk=1 --out "$W/bc1" 2>/dev/null ||
  fail "block_causal run with train.noise_per_chunk = 1"
[ -n "$(vals "$W/bc0" | grep '^0')" ] && diff <(vals "$W/bc0" | grep '^0') <(vals "$W/bc1" | grep '^0') ||
  fail "step 0's validation differs with train.noise_per_chunk = 1"

# 4. bad settings
expect_fail "val_clips = 8 holds out all of the 8 clips of store .*store: keep at least one" \
  $T train "${CONF[@]}" --set train.val_clips=8 --out "$W/bad"
echo "val: 1, 2, 4 ranks and static plans agree; split and training untouched"
