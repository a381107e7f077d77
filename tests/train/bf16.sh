#!/usr/bin/env bash
# tests/train/bf16.sh — training with bf16 activations on the CPU (train.precision=bf16,
# the cpu-bf16 kernels) against the same run in fp32, on a small store (the fixture's
# videos at 2 fps, short side 16, patch 1x4x4: 10 clips of 48..336 tokens) and a small
# model (hidden 32, 2 heads, depth 2), 200 steps of 4 clips:
# (1) the loss curves agree: the mean over the last 50 steps of |bf16 - fp32| / fp32 is
#     at most 2e-3, and no step differs by more than 1e-2. Why 2e-3: bf16 keeps 8
#     significant bits (unit roundoff 2^-8 = 3.9e-3), every activation is rounded once
#     when stored, but the weights, gradients and optimizer are fp32 and a step's loss is
#     a mean over ~10^4 values whose independent rounding errors mostly cancel; measured:
#     1.8e-4 mean, 7.1e-4 worst step. A model whose bf16 working copy of the weights
#     were not refreshed after each step would not learn and miss this by far.
# (2) bf16 resumes bitwise: ckpt-150 resumed to 200 gives the straight run's losses and
#     a byte-identical ckpt-200.
# (3) checkpoints cross precisions (the weights, EMA and Adam moments are fp32 masters in
#     either): an fp32 checkpoint resumes in bf16 and a bf16 one in fp32 (the log says
#     so), the next 10 losses within the tolerance of (1) of the run they came from;
#     --init from the fp32 checkpoint gives the same first loss in both precisions
#     within 2e-3.
# (4) metrics.jsonl and the checkpoint's metadata record backend and precision.
source "$(dirname "$0")/lib.sh"
need_store
# One thread: ~20 small runs back to back; under ctest -j2 beside other trainers, OpenMP's
# spinning workers made this test 10x slower (results do not depend on the thread count).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
$T ingest "$FIX/src" --out "$W/small" --fps 2 --short-side 16 --patch 1x4x4 --max-seconds 4 \
  --workers 1 >/dev/null 2>&1
A=(--config "$CONF" --data "$W/small" --set model.pt=1 --set model.ph=4 --set model.pw=4
   --set model.hidden=32 --set model.heads=2 --set train.global_batch=4
   --set train.mem_tokens=1024 --set train.warmup=10 --set train.steps=200 --set train.lr=2e-3
   --set train.log_every=1 --set train.ckpt_every=50 --set train.ckpt_keep=5)
for p in fp32 bf16; do $T train "${A[@]}" --set train.precision=$p --out "$W/$p" 2>/dev/null; done
# close A B FIRST LAST TOL: mean relative difference of the losses of runs A and B over
# steps FIRST..LAST is <= TOL and no step's exceeds 1e-2
close() {
  paste <(losses "$1") <(losses "$2") | awk -v a="$3" -v b="$4" -v tol="$5" '
    NR >= a && NR <= b { d = ($1 - $2) / $2; if (d < 0) d = -d; s += d; n++; if (d > m) m = d }
    END { printf "steps %d-%d: mean relative difference %.3g, worst %.3g\n", a, b, s / n, m
          exit !(n == b - a + 1 && s / n <= tol && m <= 1e-2) }'
}
d=$(close "$W/fp32" "$W/bf16" 151 200 2e-3) || fail "bf16 vs fp32 curve: $d"
echo "bf16 vs fp32, $d"
a=$(losses "$W/bf16" | head -5 | awk '{ s += $1 } END { print s / NR }')
b=$(losses "$W/bf16" | tail -10 | awk '{ s += $1 } END { print s / NR }')
awk -v a="$a" -v b="$b" 'BEGIN { exit !(b < 0.7 * a) }' || fail "bf16 did not learn: $a -> $b"
# (2) bitwise resume in bf16
mkdir -p "$W/r"
cp "$W/bf16/ckpt-150.safetensors" "$W/r/"
head -n 150 "$W/bf16/metrics.jsonl" > "$W/r/metrics.jsonl"
$T train "${A[@]}" --set train.precision=bf16 --out "$W/r" --resume 2>/dev/null
diff <(losses "$W/bf16") <(losses "$W/r") >/dev/null || fail "bf16 resume: losses differ"
cmp "$W/bf16/ckpt-200.safetensors" "$W/r/ckpt-200.safetensors" || fail "bf16 resume: ckpt-200 differs"
echo "bf16 resume from step 150: 50 losses and ckpt-200 bitwise equal"
# (3) across precisions
for x in "fp32 bf16" "bf16 fp32"; do
  set -- $x
  mkdir -p "$W/$1to$2"
  cp "$W/$1/ckpt-150.safetensors" "$W/$1to$2/"
  head -n 150 "$W/$1/metrics.jsonl" > "$W/$1to$2/metrics.jsonl"
  $T train "${A[@]}" --set train.precision=$2 --out "$W/$1to$2" --resume --steps 160 2>"$W/log"
  grep -q "train.precision=$1, continuing in $2" "$W/log" || fail "$1 -> $2 resume: no note in the log"
  d=$(close "$W/$1" "$W/$1to$2" 151 160 2e-3) || fail "$1 checkpoint resumed in $2: $d"
  echo "$1 checkpoint resumed in $2: $d"
done
for p in fp32 bf16; do
  $T train "${A[@]}" --set train.precision=$p --out "$W/init-$p" --steps 1 \
    --init "$W/fp32/ckpt-200.safetensors" 2>/dev/null
done
d=$(close "$W/init-fp32" "$W/init-bf16" 1 1 2e-3) || fail "--init in both precisions: $d"
echo "--init from an fp32 checkpoint, fp32 vs bf16 first loss: $d"
# (4) records
[ "$(jq -r '.backend + " " + .precision' "$W/bf16/metrics.jsonl" | sort -u)" = "cpu-bf16 bf16" ] ||
  fail "bf16 metrics record $(jq -r '.backend + " " + .precision' "$W/bf16/metrics.jsonl" | sort -u)"
[ "$(jq -r '.backend + " " + .precision' "$W/fp32/metrics.jsonl" | sort -u)" = "cpu fp32" ] ||
  fail "fp32 metrics record another backend or precision"
hdr() { head -c "$((8 + $(od -An -t u8 -N8 "$1" | tr -d ' ')))" "$1" | tail -c +9; }
hdr "$W/bf16/ckpt-200.safetensors" | jq -e '.__metadata__ | .backend == "cpu-bf16" and
  (.config | test("precision = bf16"))' >/dev/null || fail "checkpoint metadata lacks backend/precision"
echo "bf16: metrics and checkpoint metadata record backend cpu-bf16, precision bf16"
