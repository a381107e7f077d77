#!/usr/bin/env bash
# tests/gpu/train.sh — the CUDA backend trains, resumes and samples like the CPU-bf16 backend
# (issue 11; label gpu: tests/gpu/run.sh skips it with the reason when no GPU is visible).
#   (a) 100 steps of a tiny model, --backend cuda vs --backend cpu, both train.precision=bf16:
#       mean relative difference of the losses of steps 51-100 <= 5e-3, no step > 2e-2.
#   (b) ckpt-50 written on CUDA resumes on the CPU, and ckpt-50 written on the CPU resumes
#       on CUDA: steps 51-60 within the tolerance of (a) of the run the checkpoint came from.
#   (c) `tessera sample` of the CPU run's ckpt-100 on CUDA vs on the CPU (both bf16, same
#       seed, Y4M): mean absolute difference of the 8-bit Y/U/V samples <= 1.5 (PSNR shown).
#   (d) one training step of a 65,536-token clip of dit-b (bf16, model.recompute=1) on one
#       GPU via bench_train_step (synthetic batch, no store needed): the loss is finite;
#       the peak GPU memory (nvidia-smi memory.used, sampled every 100 ms: the arena) and
#       the backend's own peak (bench_train_step's backend_peak_bytes) are printed.
#   (e) LoRA (rank 4 on to_q, to_v and ffn.net.2, the base frozen) from the CPU run's
#       ckpt-100, 30 steps on each device (bf16): the loss curves within (a)'s tolerance over
#       steps 11-30 (on the emulated device the same comparison gave 1.1e-6 over 3 steps).
# Why 5e-3 in (a)/(b): both runs keep fp32 weights, gradients, AdamW and EMA and store
# activations in bf16 (unit roundoff 2^-8 = 3.9e-3), but they round in different places
# (cuBLASLt/attention kernels vs the CPU kernels) and sum in different orders, so the two
# trajectories drift apart like two bf16 runs with different seeds of rounding. The CPU
# bf16-vs-fp32 gap is 1.8e-4 mean (tests/train/bf16.sh, bound 2e-3); 5e-3 allows ~25x
# that, about one bf16 rounding of the whole loss, while a wrong kernel (a bad gradient,
# weights not refreshed, a wrong attention mask) moves the curve by 1e-1 or more.
# Why 1.5 in (c): 16 Euler steps in fp32 with bf16 activations on both devices; the
# per-step velocity differs by ~1e-3 relative, the decoded video then by well under one
# 8-bit level on average, plus +-1 flips where RGB->YUV rounding sits on a boundary.
#
# The store: a media-off build (the GPU machine's) cannot ingest, so the
# store comes from, in this order: $TESSERA_GPU_STORE; an ingest of $TESSERA_SHARED/videos
# when this tessera has media; $TESSERA_SRC/.carry/gpu-store (made by tools/gpu_prepare.sh
# with `bash tests/gpu/train.sh --make-store .carry/gpu-store` on a media build). Without
# one, (a)-(c) are skipped, (d) still runs, and the test exits 77 (skipped) with the reason.
# Prints "ok: ..." / "FAIL: ..." per check and "N passed, N failed" at the end.
set -uo pipefail
T=${TESSERA_BIN:?}
SRC=${TESSERA_SRC:?}
BENCH=${TESSERA_BENCH_STEP:-$(dirname "$T")/../bench/bench_train_step}
VIDEOS=${TESSERA_SHARED:-$SRC/../shared}/videos

# --make-store DIR: the small store of (a)-(c) (10 clips of 48-336 tokens, patch 1x4x4).
make_store() {
  local out=$1 src
  src=$(mktemp -d "${TMPDIR:-/tmp}/tessera-gpu-src.XXXXXX")
  for v in mmaction2__demo.mp4 decord__flipping_a_pancake.mkv fades.mp4 \
           androidx-media__roadtrip-vp92-10bit.webm; do
    [ -f "$VIDEOS/$v" ] || { rm -rf "$src"; echo "no $VIDEOS/$v"; return 1; }
    ln -s "$VIDEOS/$v" "$src/$v"
  done
  rm -rf "$out"
  "$T" ingest "$src" --out "$out" --fps 2 --short-side 16 --patch 1x4x4 --max-seconds 4 \
    --workers 1 >/dev/null 2>"$src/log" || { cat "$src/log"; rm -rf "$src" "$out"; return 1; }
  rm -rf "$src"
}
if [ "${1:-}" = --make-store ]; then
  make_store "${2:?--make-store DIR}" && echo "store: $2" && exit 0
  exit 1
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-gpu-train.XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0 failn=0 skip_reason=""
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; failn=$((failn + 1)); }
# JSON through python3 (tests/json_get.py): the GPU machine has no jq.
jget() { python3 "$SRC/tests/json_get.py" "$@"; }
losses() { jget "$1/metrics.jsonl" loss; }
# close A B FIRST LAST: mean and worst relative difference of the losses of runs A and B
# over steps FIRST..LAST; exit 0 when mean <= 5e-3 and worst <= 2e-2 and all steps exist.
close() {
  paste <(losses "$1") <(losses "$2") | awk -v a="$3" -v b="$4" '
    NR >= a && NR <= b { d = ($1 - $2) / $2; if (d < 0) d = -d; s += d; n++; if (d > m) m = d }
    END { if (n == 0) { print "no steps to compare"; exit 1 }
          printf "steps %d-%d (%d): mean relative difference %.3g (<= 5e-3), worst %.3g (<= 2e-2)\n",
                 a, b, n, s / n, m
          exit !(n == b - a + 1 && s / n <= 5e-3 && m <= 2e-2) }'
}

# ---- the store ----------------------------------------------------------------------
STORE=""
if [ -n "${TESSERA_GPU_STORE:-}" ] && [ -f "$TESSERA_GPU_STORE/index.sqlite" ]; then
  STORE=$TESSERA_GPU_STORE
elif make_store "$W/store" >"$W/store.log" 2>&1; then
  STORE=$W/store
elif [ -f "$SRC/.carry/gpu-store/index.sqlite" ]; then
  STORE=$SRC/.carry/gpu-store
else
  skip_reason="no training store: this tessera cannot ingest ($(head -c 200 "$W/store.log" | tr '\n' ' ')) and neither \$TESSERA_GPU_STORE nor $SRC/.carry/gpu-store holds one (make it on a media build: tools/gpu_prepare.sh)"
fi

if [ -n "$STORE" ]; then
  echo "store: $STORE"
  A=(--config "$SRC/configs/model/tiny.conf" --data "$STORE" --set model.pt=1 --set model.ph=4
     --set model.pw=4 --set model.hidden=32 --set model.heads=2 --set train.global_batch=4
     --set train.mem_tokens=1024 --set train.warmup=10 --set train.steps=100 --set train.lr=2e-3
     --set train.log_every=1 --set train.ckpt_every=50 --set train.ckpt_keep=5
     --set train.precision=bf16)
  # ---- (a) 100 steps on each device ---------------------------------------------------
  for dev in cpu cuda; do
    s=$SECONDS
    if ! $T train "${A[@]}" --backend $dev --out "$W/$dev" 2>"$W/$dev.log"; then
      tail -5 "$W/$dev.log"; bad "(a) 100-step bf16 run on $dev failed"
    else
      echo "$dev: 100 steps in $((SECONDS - s)) s, loss $(losses "$W/$dev" | head -1) -> $(losses "$W/$dev" | tail -1), backend $(jget "$W/$dev/metrics.jsonl" backend | sort -u | tr '\n' ' ')"
    fi
  done
  if [ -f "$W/cpu/ckpt-100.safetensors" ] && [ -f "$W/cuda/ckpt-100.safetensors" ]; then
    if d=$(close "$W/cpu" "$W/cuda" 51 100); then ok "(a) cuda vs cpu bf16 loss curve, $d"
    else bad "(a) cuda vs cpu bf16 loss curve, $d"; fi
    be=$(jget "$W/cuda/metrics.jsonl" backend | sort -u | tr '\n' ' ')
    [ "$be" = "cuda " ] && ok "(a) the CUDA run's metrics record backend cuda" ||
      bad "(a) the CUDA run's metrics record backend '$be', want cuda"
    # ---- (b) checkpoints cross devices ------------------------------------------------
    for x in "cuda cpu" "cpu cuda"; do
      set -- $x
      r=$W/$1to$2
      mkdir -p "$r"
      cp "$W/$1/ckpt-50.safetensors" "$r/"
      head -n 50 "$W/$1/metrics.jsonl" > "$r/metrics.jsonl"
      if ! $T train "${A[@]}" --backend $2 --out "$r" --resume --steps 60 2>"$r.log"; then
        tail -5 "$r.log"; bad "(b) ckpt-50 from $1 did not resume on $2"; continue
      fi
      if d=$(close "$W/$1" "$r" 51 60); then ok "(b) $1 checkpoint resumed on $2 vs the $1 run, $d"
      else bad "(b) $1 checkpoint resumed on $2 vs the $1 run, $d"; fi
    done
    # ---- (c) sampling -------------------------------------------------------------------
    for dev in cpu cuda; do
      $T sample --ckpt "$W/cpu/ckpt-100.safetensors" --frames 8 --size 32x32 --steps 16 --seed 3 \
        --backend $dev --precision bf16 --out "$W/s-$dev.y4m" 2>"$W/s-$dev.log" ||
        { tail -5 "$W/s-$dev.log"; bad "(c) sample on $dev failed"; }
    done
    if [ -f "$W/s-cpu.y4m" ] && [ -f "$W/s-cuda.y4m" ]; then
      # Y4M: one header line, then per frame "FRAME\n" + the planes (8-bit, 4:4:4).
      if d=$(python3 - "$W/s-cpu.y4m" "$W/s-cuda.y4m" <<'PY'
import math, sys
def frames(p):
    b = open(p, "rb").read()
    h = b[:b.index(b"\n")].split()
    w, hh = [int(t[1:]) for t in h if t[:1] in (b"W", b"H")]
    n, pos, out = 3 * w * hh, b.index(b"\n") + 1, []
    while pos < len(b):
        pos = b.index(b"\n", pos) + 1
        out.append(b[pos:pos + n]); pos += n
    return h, out
ha, fa = frames(sys.argv[1]); hb, fb = frames(sys.argv[2])
if ha != hb or len(fa) != len(fb) or not fa:
    print("headers or frame counts differ: %s %d vs %s %d" % (ha, len(fa), hb, len(fb))); sys.exit(1)
a = b"".join(fa); b = b"".join(fb)
sad = sum(abs(x - y) for x, y in zip(a, b)); sse = sum((x - y) ** 2 for x, y in zip(a, b))
mad = sad / len(a); mx = max(abs(x - y) for x, y in zip(a, b))
psnr = float("inf") if sse == 0 else 10 * math.log10(255 ** 2 * len(a) / sse)
print("%d frames %dx%d: mean absolute difference %.3f of 255 (<= 1.5), max %d, PSNR %.1f dB"
      % (len(fa), int(ha[1][1:]), int(ha[2][1:]), mad, mx, psnr))
sys.exit(0 if mad <= 1.5 else 1)
PY
      ); then ok "(c) sample on cuda vs cpu (bf16, seed 3, 16 steps): $d"
      else bad "(c) sample on cuda vs cpu: $d"; fi
    fi
    # ---- (e) LoRA on the frozen base -------------------------------------------------------
    for dev in cpu cuda; do
      $T train "${A[@]}" --backend $dev --init "$W/cpu/ckpt-100.safetensors" --set lora.rank=4 \
        --set lora.targets=to_q,to_v,ffn.net.2 --set train.steps=30 --steps 30 \
        --out "$W/lora-$dev" 2>"$W/lora-$dev.log" ||
        { tail -5 "$W/lora-$dev.log"; bad "(e) LoRA run on $dev failed"; }
    done
    if [ -f "$W/lora-cpu/metrics.jsonl" ] && [ -f "$W/lora-cuda/metrics.jsonl" ]; then
      if d=$(close "$W/lora-cpu" "$W/lora-cuda" 11 30); then ok "(e) LoRA, cuda vs cpu bf16: $d"
      else bad "(e) LoRA, cuda vs cpu bf16: $d"; fi
    fi
  else
    bad "(b), (c), (e) not run: a 100-step run is missing"
  fi
else
  echo "skip: (a)-(c): $skip_reason"
fi

# ---- (d) dit-b, one 65,536-token clip, one step on one GPU -------------------------------
mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "${CUDA_VISIBLE_DEVICES%%,*}" 2>/dev/null | head -1; }
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
base=$(mem); smi_pid=""
if [ -n "$base" ]; then
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "${CUDA_VISIBLE_DEVICES%%,*}" \
    -lms 100 >"$W/mem" 2>/dev/null &
  smi_pid=$!
fi
s=$SECONDS
rc=0
timeout 400 "$BENCH" --config "$SRC/configs/model/dit-b.conf" --set model.recompute=1 \
  --set train.precision=bf16 --backend cuda --one-clip-tokens 65536 --warmup 0 --steps 1 \
  --json "$W/ditb.json" >"$W/ditb.log" 2>&1 || rc=$?
t=$((SECONDS - s))
[ -n "$smi_pid" ] && { kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null; }
peak=n/a
[ -s "$W/mem" ] && peak=$(awk -v b="$base" '$1 + 0 > m { m = $1 + 0 } END { printf "%d MiB (%d MiB above the %d MiB before)", m, m - b, b }' "$W/mem")
echo "dit-b 65,536 tokens: peak GPU memory.used $peak; $t s"
loss=$(jget "$W/ditb.json" losses.0 "" 2>/dev/null)
# nvidia-smi sees the CUDA backend's arena (one allocation per run, kernels.h), not what the
# step used: the backend's own peak is the figure for the planner.
arena=""
if bp=$(jget "$W/ditb.json" backend_peak_bytes 2>/dev/null) && bc=$(jget "$W/ditb.json" backend_capacity_bytes 2>/dev/null); then
  arena="$((bp / 1048576)) MiB of the arena's $((bc / 1048576)) MiB"
fi
[ -n "$arena" ] && { peak="$peak; backend peak $arena"; echo "dit-b 65,536 tokens: backend peak $arena"; }
if [ $rc -eq 0 ] && [ -n "$loss" ] && awk -v l="$loss" 'BEGIN { exit !(l == l + 0 && l > -1e30 && l < 1e30) }'; then
  ok "(d) dit-b, one 65,536-token clip, recompute, bf16: one step on cuda in $t s, loss $loss, peak GPU memory $peak"
else
  tail -5 "$W/ditb.log"
  bad "(d) dit-b 65,536-token step on cuda: exit $rc, loss '${loss}', peak GPU memory $peak"
fi

echo "$pass passed, $failn failed"
[ $failn -eq 0 ] || exit 1
if [ -n "$skip_reason" ]; then echo "SKIP: (a)-(c): $skip_reason"; exit 77; fi
exit 0
