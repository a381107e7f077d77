#!/usr/bin/env bash
# tests/gpu/memory.sh — the trainer's memory model (model/train/memory.h) on a GPU, the
# twin of tests/train/memory.sh (label gpu: tests/gpu/run.sh skips it without a GPU).
#   (a) --backend cuda, bf16, mem_tokens 4096: the backend's allocation high-water mark
#       equals the model's count of the same buffers within 4 KiB, and the device's free
#       memory (cudaMemGetInfo) falls by at least that and at most the model's total
#       (allocations + attention workspace + the 1 GiB reserve).
#   (b) train.mem_tokens = 0 without --mem-bytes: the limit derived from the GPU's free
#       memory trains two steps without running out of memory, and the free memory falls by
#       no more than the model's total.
#   (c) as (a) with model.recompute = 2 (the cheap layers recomputed) and recorded graphs
#       (TESSERA_CUDA_GRAPHS=1): peak == model within 4 KiB, and no recording failed (no
#       "recording it as a graph failed" line).
# The store comes as in tests/gpu/train.sh ($TESSERA_GPU_STORE, an ingest when this build
# has media, or $TESSERA_SRC/.carry/gpu-store); without one the test is skipped (77).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad/tally
scratch gpu-memory
STORE=""
if [ -n "${TESSERA_GPU_STORE:-}" ] && [ -f "$TESSERA_GPU_STORE/index.sqlite" ]; then
  STORE=$TESSERA_GPU_STORE
elif bash "$SRC/tests/gpu/train.sh" --make-store "$W/store" >"$W/store.log" 2>&1; then
  STORE=$W/store
elif [ -f "$SRC/.carry/gpu-store/index.sqlite" ]; then
  STORE=$SRC/.carry/gpu-store
else
  echo "SKIP: no training store (see tests/gpu/train.sh): $(head -c 200 "$W/store.log" | tr '\n' ' ')"
  exit 77
fi
A=(--backend cuda --config "$SRC/configs/model/tiny.conf" --data "$STORE" --set model.pt=1
   --set model.ph=4 --set model.pw=4 --set model.hidden=256 --set model.heads=4
   --set model.depth=4 --set train.precision=bf16 --set train.global_batch=4
   --set train.steps=2 --set train.warmup=1)
num() { sed -n "$2" "$1" | head -1; }
peak='s/.*allocations peaked at [0-9.]* GiB (\([0-9]*\) bytes).*/\1/p'
model='s/.*the model counts [0-9.]* GiB (\([0-9]*\) bytes,.*/\1/p'
fell='s/.*device free memory fell by [0-9.]* GiB (\([0-9]*\) bytes.*/\1/p'
total='s/.*memory per rank (model): [0-9.]* [GM]iB (\([0-9]*\) bytes) for.*/\1/p'

# (a)
if "$T" train "${A[@]}" --set train.mem_tokens=4096 --out "$W/a" >"$W/a.log" 2>&1; then
  p=$(num "$W/a.log" "$peak"); m=$(num "$W/a.log" "$model"); f=$(num "$W/a.log" "$fell")
  t=$(num "$W/a.log" "$total")
  echo "measured peak $p bytes, model $m; device free memory fell by $f, model total $t"
  [ -n "$p" ] && [ -n "$m" ] && [ $((p > m ? p - m : m - p)) -le 4096 ] && ok "peak == model" \
    || bad "peak $p vs model $m"
  [ -n "$f" ] && [ "$f" -ge $((m - 4096)) ] && [ "$f" -le "$t" ] && ok "device memory within the model" \
    || bad "device free memory fell by $f, outside [$m, $t]"
else
  bad "(a) training failed: $(tail -3 "$W/a.log")"
fi
# (b)
if "$T" train "${A[@]}" --set train.mem_tokens=0 --out "$W/b" >"$W/b.log" 2>&1; then
  f=$(num "$W/b.log" "$fell"); t=$(num "$W/b.log" "$total")
  grep -m1 "memory per rank (model)" "$W/b.log"
  [ -n "$f" ] && [ -n "$t" ] && [ "$f" -le "$t" ] && ok "derived limit: free memory fell by $f <= model $t" \
    || bad "derived limit: fell by $f, model $t"
else
  bad "(b) training with the derived limit failed: $(tail -3 "$W/b.log")"
fi
# (c)
if TESSERA_CUDA_GRAPHS=1 "$T" train "${A[@]}" --set train.mem_tokens=4096 --set model.recompute=2 \
     --set train.steps=4 --out "$W/c" >"$W/c.log" 2>&1; then
  p=$(num "$W/c.log" "$peak"); m=$(num "$W/c.log" "$model")
  [ -n "$p" ] && [ -n "$m" ] && [ $((p > m ? p - m : m - p)) -le 4096 ] \
    && ok "recompute 2, graphs: peak $p == model $m" || bad "recompute 2: peak $p vs model $m"
  if grep -q "recording it as a graph failed" "$W/c.log"; then
    bad "a graph recording failed: $(grep -m1 'recording it as a graph failed' "$W/c.log")"
  else
    ok "recompute 2, graphs: no recording failed"
  fi
else
  bad "(c) training with recompute 2 and graphs failed: $(tail -3 "$W/c.log")"
fi
tally gpu_memory
