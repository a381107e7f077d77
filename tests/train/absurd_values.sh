#!/usr/bin/env bash
# tests/train/absurd_values.sh — legal but absurd values (issue 24, 6):
# - latents: an f32 value past bf16's range (finite in the file) into a bf16 store fails its
#   file, naming the value and where it is (it was stored as +Inf: ingest exit 0, verify OK);
#   the same file goes into an f32 store, and 3.38e38 (bf16's largest, rounded) into bf16
# - train.adam_eps = 0 is refused before anything runs (the first step divided 0 by 0 and a
#   checkpoint of NaN weights was written, exit 0 for a one-step run); so is
#   train.lr * train.weight_decay >= 1; adam_eps = 1e-20 (the smallest taken) trains
# - a run whose loss overflows stops with exit 1 naming the step, and writes no checkpoint
# - train.mem_tokens = 0 on the CPU (no --mem-bytes) is the most tokens a batch holds (the
#   sum of the global_batch longest clips), not half of the machine's memory allocated and
#   touched (12 GB peak RSS for the tiny model on a 23 GB machine)
source "$(dirname "$0")/lib.sh"
need_store
ML=${MAKE_LATENTS:?ctest sets MAKE_LATENTS to the make_latents binary}
clean() { ! grep -qE "runtime error|Sanitizer" "$1"; }
# run NAME CMD...: CMD's exit status in RC, its output in $W/NAME.log
run() { local name=$1; shift; RC=0; timeout 300 "$@" >"$W/$name.log" 2>&1 </dev/null || RC=$?; }

# latents past bf16
mkdir -p "$W/lat"
"$ML" "$W/lat/over.safetensors" --shape 2,4,4,4 --dtype f32 --value 1,2,3.4e38,4 --noise 0
"$ML" "$W/lat/edge.safetensors" --shape 2,4,4,4 --dtype f32 --value 1,2,3.38e38,4 --noise 0 --seed 2
run lat16 "$T" ingest --latents "$W/lat" --out "$W/s16" --dtype bf16 --quiet
st=$(sqlite3 "$W/s16/index.sqlite" "SELECT group_concat(status, ',') FROM (SELECT status FROM sources ORDER BY path)")
if [ $RC -eq 2 ] && [ "$st" = "done,failed" ] &&
   sqlite3 "$W/s16/index.sqlite" "SELECT error FROM sources WHERE status = 'failed'" |
   grep -q "over.safetensors: tensor 'latents' has 3.4e+38 at \[t 0, y 0, x 0, c 2\], past the largest bf16"; then
  ok "an f32 value past bf16 fails its file, naming it; bf16's largest goes in"
else bad "latents past bf16: exit $RC, statuses '$st': $(tail -3 "$W/lat16.log")"; fi
run lat32 "$T" ingest --latents "$W/lat" --out "$W/s32" --dtype f32 --quiet
[ $RC -eq 0 ] && ok "into an f32 store both go in" || bad "f32 store: exit $RC $(tail -2 "$W/lat32.log")"

C=(--config "$CONF" --data "$STORE" --set train.global_batch=4 --set train.mem_tokens=512
   --set train.warmup=1 --set train.log_every=1 --set train.ckpt_every=1)
# adam_eps = 0 and a decay that flips the weights: refused before anything runs
run eps0 "$T" train "${C[@]}" --out "$W/eps0" --steps 1 --set train.adam_eps=0
if [ $RC -eq 1 ] && grep -q "train.adam_eps = 0 is out of range" "$W/eps0.log" &&
   ! ls "$W"/eps0/ckpt-* >/dev/null 2>&1; then ok "train.adam_eps = 0: refused, no checkpoint"
else bad "train.adam_eps = 0: exit $RC, checkpoints: $(ls "$W/eps0" 2>/dev/null | tr '\n' ' ')"; fi
run wd "$T" train "${C[@]}" --out "$W/wd" --steps 1 --set train.lr=1 --set train.weight_decay=2
[ $RC -eq 1 ] && grep -q "train.lr \* train.weight_decay" "$W/wd.log" && ok "lr * weight_decay = 2: refused" ||
  bad "lr * weight_decay = 2: exit $RC"
run eps20 "$T" train "${C[@]}" --out "$W/eps20" --steps 2 --set train.adam_eps=1e-20
[ $RC -eq 0 ] && clean "$W/eps20.log" && ok "train.adam_eps = 1e-20 trains" || bad "adam_eps 1e-20: exit $RC $(grep error "$W/eps20.log")"

# a loss that overflows (f32 latents of 1e30: squares past float): exit 1, no checkpoint
mkdir -p "$W/huge"
"$ML" "$W/huge/a.safetensors" --shape 4,4,4,4 --dtype f32 --value 1e30,1e30,1e30,1e30 --noise 0
run huge_ingest "$T" ingest --latents "$W/huge" --out "$W/shuge" --dtype f32 --patch 1x2x2 --quiet
run huge "$T" train --config "$CONF" --data "$W/shuge" --out "$W/rhuge" --steps 3 --set model.channels=4 \
  --set model.pt=1 --set model.ph=2 --set model.pw=2 --set train.global_batch=1 --set train.mem_tokens=64 \
  --set train.warmup=1 --set train.ckpt_every=1
if [ $RC -eq 1 ] && grep -q "step 0: the loss or the gradient .* is not finite" "$W/huge.log" &&
   ! ls "$W"/rhuge/ckpt-* >/dev/null 2>&1; then ok "a loss that overflows: exit 1 at step 0, no checkpoint"
else bad "overflowing loss: exit $RC, $(grep error "$W/huge.log" | head -c 300), checkpoints: $(ls "$W/rhuge" 2>/dev/null | tr '\n' ' ')"; fi

# mem_tokens = 0 on the CPU: the batch's tokens
want=$(sqlite3 "$STORE/index.sqlite" "SELECT sum(tokens) FROM (SELECT tokens FROM clips ORDER BY tokens DESC LIMIT 4)")
run mem0 "$T" train "${C[@]/train.mem_tokens=512/train.mem_tokens=0}" --out "$W/mem0" --steps 1
got=$(sed -n 's/.*mem_tokens \([0-9]*\), steps.*/\1/p' "$W/mem0.log" | head -1)
rss=$(sed -n 's/.*process peak RSS \([0-9.]*\) GiB.*/\1/p' "$W/mem0.log" | head -1)
if [ $RC -eq 0 ] && [ "$got" = "$want" ] && awk -v r="$rss" 'BEGIN { exit !(r != "" && r < 1.5) }'; then
  ok "train.mem_tokens = 0 on the CPU: $got tokens (the 4 longest clips), peak RSS $rss GiB"
else bad "train.mem_tokens = 0: exit $RC, $got tokens (want $want), peak RSS $rss GiB"; fi
tally absurd_values
