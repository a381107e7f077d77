#!/usr/bin/env bash
# The memory model (model/train/memory.h) against measured runs of `tessera train` on the
# CPU. The trainer counts its backend's allocations (train_memory_counter) and prints the
# high-water mark beside the model's count of the same buffers:
#   (a) one rank, fp32, mem_tokens 512 and 4096; bf16; model.recompute = 1 and 2: the measured
#       peak equals the model within 4 KiB (what the model leaves out: one loss float per
#       wave); and the peak RSS grows from 512 to 4096 tokens by the model's growth of its
#       total within 10% (RSS also holds pages of the store and of OpenBLAS).
#   (b) two ranks: the model (every CP size's ring buffers, full blocks) bounds the
#       measured peak from above, and no more than its ring buffers above it; the same with
#       every group in Ulysses mode (its head-layout tensors and the staging of the
#       all-to-alls pipelined over 2 head chunks, train.ulysses_chunks).
#   (c) train.mem_tokens = 0 with --mem-bytes 100 MB: the derived limit's model fits 100 MB
#       and one token more would not; an explicit mem_tokens above it is refused naming
#       what takes the memory; a model that does not fit at all is refused.
#   (d) validation (train.val_clips) is counted exactly (within 4 KiB); samples during
#       training (train.sample_every) are counted as an upper bound (a sample clip of at
#       most mem_tokens / 2 tokens): the model bounds the measured peak from above and
#       counts at least what the samples added to the run without them.
#   (e) LoRA (lora.rank 4 on a frozen base, --init the f512 run; fp32 and bf16): counted
#       exactly, the memory line says so, and the base's gradients and optimizer state are
#       gone: the model is smaller than the full run's by at least 3 x the base's weights.
#       With bf16 the frozen base keeps fp32 masters of what the kernels read in fp32 only:
#       bitwise the run that keeps them all (TESSERA_FROZEN_FP32=1), at a lower peak.
#   (f) samples of a LoRA run (train.sample_every: a second, frozen model holding the base
#       and the adapters' EMA, fp32 and bf16): bounded as (d), the model above the measured
#       peak, which the samples raised (test_train_memory_model holds the sampler's adapters
#       to dit_lora_memory exactly).
. "$(dirname "$0")/lib.sh"
need_store
R=(--config "$CONF" --data "$STORE" --set train.global_batch=4 --set train.steps=2
   --set train.warmup=1 --set train.log_every=1)
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# field LOG NAME: measured peak (peak), modelled allocations (model), RSS GiB (rss),
# model total GiB (total), mem_tokens
field() {
  case $2 in
    peak) sed -n 's/.*allocations peaked at [0-9.]* GiB (\([0-9]*\) bytes).*/\1/p' "$1" ;;
    model) sed -n 's/.*the model counts [0-9.]* GiB (\([0-9]*\) bytes,.*/\1/p' "$1" ;;
    rss) sed -n 's/.*process peak RSS \([0-9.]*\) GiB.*/\1/p' "$1" ;;
    total) sed -n 's/.*memory per rank (model): [0-9.]* [GM]iB (\([0-9]*\) bytes) for.*/\1/p' "$1" ;;
    ring) sed -n 's/.*bytes, ring buffers \([0-9]*\)) of them.*/\1/p' "$1" ;;
    tokens) sed -n 's/.*mem_tokens \([0-9]*\), steps.*/\1/p' "$1" ;;
  esac | head -1
}
run() {  # run NAME ARGS...: one training run, its log in $W/NAME.log
  local name=$1; shift
  "$@" --out "$W/$name" >"$W/$name.log" 2>&1 || { cat "$W/$name.log" >&2; fail "$name"; }
}
exact() {  # the measured peak equals the model's count within 4 KiB
  local p m
  p=$(field "$W/$1.log" peak); m=$(field "$W/$1.log" model)
  [ -n "$p" ] && [ -n "$m" ] && [ $((p > m ? p - m : m - p)) -le 4096 ] \
    || fail "$1: measured peak $p bytes vs model $m"
  echo "ok: $1: measured backend peak $p bytes, model $m"
}

# (a)
run f512 "$T" train "${R[@]}" --set train.mem_tokens=512
run f4096 "$T" train "${R[@]}" --set train.mem_tokens=4096
run bf16 "$T" train "${R[@]}" --set train.mem_tokens=1024 --set train.precision=bf16
run recompute "$T" train "${R[@]}" --set train.mem_tokens=1024 --set model.recompute=1
run cheap "$T" train "${R[@]}" --set train.mem_tokens=1024 --set model.recompute=2
for n in f512 f4096 bf16 recompute cheap; do exact $n; done
awk -v r1="$(field "$W/f512.log" rss)" -v r2="$(field "$W/f4096.log" rss)" \
    -v m1="$(field "$W/f512.log" model)" -v m2="$(field "$W/f4096.log" model)" 'BEGIN {
  dr = (r2 - r1) * 2^30; dm = m2 - m1
  printf "peak RSS grew by %.0f bytes from 512 to 4096 tokens, the model by %.0f (ratio %.3f)\n", dr, dm, dr / dm
  exit !(dr >= 0.9 * dm && dr <= 1.1 * dm) }' || fail "RSS growth vs model"
echo "ok: RSS growth within 10% of the model's"

# (b)
for mode in auto ulysses; do
  mpirun --oversubscribe --bind-to none -np 2 "$T" train "${R[@]}" --set train.mem_tokens=128 \
    --set train.global_batch=8 --set train.cp_mode=$mode --out "$W/two$mode" >"$W/two$mode.log" 2>&1 ||
    { cat "$W/two$mode.log" >&2; fail "two ranks ($mode)"; }
  p=$(field "$W/two$mode.log" peak); m=$(field "$W/two$mode.log" model); ring=$(field "$W/two$mode.log" ring)
  awk -v p="$p" -v m="$m" -v ring="$ring" -v mode=$mode 'BEGIN {
    printf "two ranks (%s): measured peak %d bytes, model %d (ring buffers %d bytes)\n", mode, p, m, ring
    exit !(ring > 0 && p <= m + 4096 && p >= m - ring - 4096) }' || fail "two ranks ($mode): peak $p vs model $m"
  echo "ok: two ranks ($mode): the model bounds the measured peak"
done

# (c)
run derived "$T" train "${R[@]}" --set train.mem_tokens=0 --mem-bytes 100000000
L=$(field "$W/derived.log" tokens)
[ -n "$L" ] && [ "$L" -gt 512 ] || fail "derived mem_tokens '$L'"
exact derived
awk -v t="$(field "$W/derived.log" total)" 'BEGIN { exit !(t <= 100000000) }' \
  || fail "derived: model total above 100 MB"
expect_fail "train.mem_tokens = $((L + 1)) needs .* activations .* more than the 0.093 GiB of --mem-bytes" \
  "$T" train "${R[@]}" --set train.mem_tokens=$((L + 1)) --mem-bytes 100000000 --out "$W/over"
expect_fail "does not fit .* even with 1 token" \
  "$T" train "${R[@]}" --set train.mem_tokens=0 --mem-bytes 2000000 --out "$W/tiny"
echo "ok: derived mem_tokens $L for 100 MB; one more refused"

# (d)
run val "$T" train "${R[@]}" --set train.mem_tokens=1024 --set train.val_clips=2 --set train.val_every=1
exact val
run samples "$T" train "${R[@]}" --set train.mem_tokens=1024 --set train.val_clips=2 \
  --set train.val_every=1 --set train.sample_every=1 --set train.sample_steps=1
p0=$(field "$W/val.log" peak); p=$(field "$W/samples.log" peak); m=$(field "$W/samples.log" model)
awk -v p0="$p0" -v p="$p" -v m="$m" 'BEGIN {
  printf "samples: measured peak %d bytes (%d without samples), model %d\n", p, p0, m
  exit !(p > p0 && p <= m + 4096) }' || fail "samples: peak $p (without $p0) vs model $m"
grep -q "validation [0-9.]* [KMG]*i*B, samples [0-9.]* [KMG]*i*B" "$W/samples.log" ||
  fail "the memory line does not name validation and samples: $(grep 'memory per rank (model)' "$W/samples.log")"
echo "ok: validation counted exactly, samples bounded"

# (e)
run lora "$T" train "${R[@]}" --set train.mem_tokens=512 --init "$W/f512/ckpt-2.safetensors" \
  --set lora.rank=4 --set lora.targets=attn1.to_q,attn1.to_v,ffn.net.2
run lora16 "$T" train "${R[@]}" --set train.mem_tokens=512 --init "$W/f512/ckpt-2.safetensors" \
  --set lora.rank=4 --set lora.targets=attn1.to_q,ffn.net.0.proj --set train.precision=bf16
for n in lora lora16; do exact $n; done
grep -q "LoRA: [0-9]* adapter parameters on a frozen base" "$W/lora.log" ||
  fail "the memory line does not name the adapters: $(grep 'memory per rank (model)' "$W/lora.log")"
w=$(sed -n 's/.*train: \([0-9]*\) parameters, .*/\1/p' "$W/f512.log" | head -1)
awk -v full="$(field "$W/f512.log" model)" -v lora="$(field "$W/lora.log" model)" -v w="$w" 'BEGIN {
  printf "LoRA: model %d bytes, full fine-tuning %d, base %d parameters\n", lora, full, w
  exit !(w > 0 && full - lora >= 3 * 4 * w) }' || fail "LoRA: the base's gradients or optimizer are still counted"
echo "ok: LoRA counted exactly, without the base's gradients and optimizer state"
# the bf16 base keeps fp32 masters of the tensors read in fp32 only (dit_create_frozen_base):
# with all of them kept (TESSERA_FROZEN_FP32=1) the losses and adapters are the same bits
# and the measured peak is higher by what the model left out
TESSERA_FROZEN_FP32=1 run lora16f "$T" train "${R[@]}" --set train.mem_tokens=512 \
  --init "$W/f512/ckpt-2.safetensors" --set lora.rank=4 --set lora.targets=attn1.to_q,ffn.net.0.proj \
  --set train.precision=bf16
cmp -s <(jq -r .loss "$W/lora16/metrics.jsonl") <(jq -r .loss "$W/lora16f/metrics.jsonl") &&
  cmp -s "$W/lora16/lora-2.safetensors" "$W/lora16f/lora-2.safetensors" ||
  fail "lora16: the act-dtype base changed the losses or the adapters"
p=$(field "$W/lora16.log" peak) pf=$(field "$W/lora16f.log" peak) w=$(field "$W/bf16.log" model)
awk -v p="$p" -v pf="$pf" 'BEGIN { printf "ok: bf16 LoRA bitwise with the base in bf16 only: peak %d bytes, %d with all its fp32 masters\n", p, pf
  exit !(pf > p) }' || fail "lora16: the act-dtype base saved nothing ($p vs $pf)"


# (f)
for p in fp32 bf16; do
  n=lora; [ $p = bf16 ] && n=lora16
  tg=attn1.to_q,attn1.to_v,ffn.net.2; [ $p = bf16 ] && tg=attn1.to_q,ffn.net.0.proj
  run ${n}s "$T" train "${R[@]}" --set train.mem_tokens=512 --init "$W/f512/ckpt-2.safetensors" \
    --set lora.rank=4 --set lora.targets=$tg --set train.precision=$p --set train.sample_every=1 \
    --set train.sample_steps=1
  p0=$(field "$W/$n.log" peak); pk=$(field "$W/${n}s.log" peak); m=$(field "$W/${n}s.log" model)
  awk -v p0="$p0" -v p="$pk" -v m="$m" -v n="$n" 'BEGIN {
    printf "%s with samples: measured peak %d bytes (%d without samples), model %d\n", n, p, p0, m
    exit !(p > p0 && p <= m + 4096) }' || fail "${n} samples: peak $pk (without $p0) vs model $m"
done
echo "ok: samples of LoRA runs bounded"
