#!/usr/bin/env bash
# tests/train/lora_samples.sh — samples during LoRA training (issue 28): the frozen base
# with the EMA of the adapters (model/train/samples.h).
#  1. a LoRA run with train.sample_every writes RUN/samples/sample-STEP.mp4 at every
#     sample_every steps and at the last, and says it samples the adapters' EMA;
#  2. sampling leaves training alone: losses, gradient norms, ckpt-6 and lora-6 are bitwise
#     those of the LoRA run without samples, also when the sampled run stopped and resumed
#     in between (whose samples are the same bytes); a sample that failed is written by
#     the --resume from its checkpoint (as samples_state.sh), the same bytes;
#  3. the samples are those of the merged model: with train.ema_decay = 0 the EMA equals
#     the adapters (ema * 0 + w * 1, exactly), so lora-6 merged into the base
#     (convert --merge-lora) is the model sampled at step 6. Its samples are drawn by the
#     same code path (a run --init MERGED with train.lr = 0, ema_decay = 0: its EMA is the
#     merged weights, sampled after one step that changes nothing), so the two videos see
#     the same encoder on the same layout: they must decode to the same pixels within a
#     mean of 0.05 levels (the merge rounds W + s A^T B^T, x W + s (x A^T) B^T rounds
#     otherwise: ~1e-7 relative, a pixel off by one where a value sits on a rounding edge;
#     measured: byte-identical files), while the base's samples differ by more than a level
#     on average (the adapters changed what is sampled; measured 3.0);
#  4. it is the EMA that is sampled: with the default ema_decay the step-6 sample differs.
source "$(dirname "$0")/lib.sh"
need_store
COMMON=(--config "$CONF" --data "$STORE" "${SMALL[@]}" --set model.num_classes=2
        --set train.sample_steps=2 --set train.sample_cfg=3)
$T train "${COMMON[@]}" --out "$W/base" --steps 4 2>"$W/base.log" || { tail -3 "$W/base.log"; fail "the base"; }
BASE=$W/base/ckpt-4.safetensors
LORA=("${COMMON[@]}" --init "$BASE" --set lora.rank=4 --set lora.alpha=8 --set train.lr=2e-2
      --set lora.targets=to_q,to_k,to_v,to_out.0,ffn.net.0.proj,ffn.net.2 --set train.ckpt_every=3
      --set train.ckpt_keep=5 --set train.ema_decay=0)

# 1.
$T train "${LORA[@]}" --set train.sample_every=3 --out "$W/s" --steps 6 2>"$W/s.log" ||
  { tail -5 "$W/s.log"; fail "LoRA training with samples"; }
[ "$(ls "$W/s/samples" | grep -v '^samples\.jsonl$' | tr '\n' ' ')" = "sample-3.mp4 sample-6.mp4 " ] ||
  fail "samples written: $(ls "$W/s/samples")"
grep -q "step 6: samples of the EMA adapters on the base (2 labels, 2 Euler steps" "$W/s.log" ||
  fail "log: $(grep samples "$W/s.log")"
ok "a LoRA run writes its samples: $(ls "$W/s/samples" | tr '\n' ' ')"

# 2.
$T train "${LORA[@]}" --out "$W/plain" --steps 6 2>/dev/null || fail "the LoRA run without samples"
$T train "${LORA[@]}" --set train.sample_every=3 --out "$W/r" --steps 3 2>/dev/null || fail "3 steps"
$T train "${LORA[@]}" --set train.sample_every=3 --out "$W/r" --steps 6 --resume 2>/dev/null ||
  fail "the resume to 6"
for f in sample-3.mp4 sample-6.mp4; do
  cmp "$W/s/samples/$f" "$W/r/samples/$f" || fail "$f differs between the run and the resumed run"
done
for r in s r; do same_run "$W/plain" "$W/$r" ckpt-6 lora-6; done
ok "losses, gradient norms, ckpt-6 and lora-6 bitwise those without samples (straight and resumed)"
# a sample that could not be written: the checkpoint records it as due, and a --resume (which
# reloads the base and the adapters' state) writes it first, the undisturbed run's bytes
mkdir -p "$W/p/samples/sample-6.mp4"
$T train "${LORA[@]}" --set train.sample_every=3 --out "$W/p" --steps 6 2>"$W/p.log" ||
  { tail -3 "$W/p.log"; fail "the run whose last sample fails"; }
rmdir "$W/p/samples/sample-6.mp4"
$T train "${LORA[@]}" --set train.sample_every=3 --out "$W/p" --steps 6 --resume 2>"$W/p2.log" ||
  { tail -3 "$W/p2.log"; fail "the resume that writes the missing sample"; }
grep -q "the samples of step 6 are missing: writing them first" "$W/p2.log" ||
  fail "the resume did not redo the sample: $(grep -i sample "$W/p2.log")"
cmp "$W/p/samples/sample-6.mp4" "$W/s/samples/sample-6.mp4" || fail "the rewritten sample-6 differs"
ok "a --resume writes the missing sample of its LoRA checkpoint, the undisturbed run's bytes"

# 3. the merged model's samples, through the same sampling code and encoder
$T convert "$BASE" --merge-lora "$W/s/lora-6.safetensors" --out "$W/merged.ckpt" 2>"$W/merge.log" ||
  { cat "$W/merge.log"; fail "--merge-lora"; }
for m in merged base; do
  ck=$W/merged.ckpt; [ $m = base ] && ck=$BASE
  $T train "${COMMON[@]}" --init "$ck" --set train.lr=0 --set train.min_lr=0 --set train.ema_decay=0 \
    --set train.sample_every=1 --out "$W/of-$m" --steps 1 2>"$W/of-$m.log" ||
    { tail -3 "$W/of-$m.log"; fail "the $m model's samples"; }
done
rgb() { ffmpeg -nostdin -v error -i "$1" -f rawvideo -pix_fmt rgb24 -; }
python3 - <(rgb "$W/s/samples/sample-6.mp4") <(rgb "$W/of-merged/samples/sample-1.mp4") \
  <(rgb "$W/of-base/samples/sample-1.mp4") <<'PYEOF' || fail "the samples are not the merged model's"
import sys
lora, merged, base = (open(p, 'rb').read() for p in sys.argv[1:4])
assert lora and len(lora) == len(merged) == len(base), (len(lora), len(merged), len(base))
def diff(a, b):
    d = [abs(x - y) for x, y in zip(a, b)]
    return sum(d) / len(d), max(d), sum(1 for x in d if x)
m, b = diff(lora, merged), diff(lora, base)
print(f"ok: LoRA sample vs the merged model's: mean {m[0]:.4f} levels, max {m[1]}, {m[2]} of "
      f"{len(lora)} values differ; vs the base's: mean {b[0]:.2f}, max {b[1]}")
assert m[0] <= 0.05, "the LoRA run's samples are not the merged model's"
assert b[0] >= 1.0, "the adapters did not change the samples (the test shows nothing)"
PYEOF
if cmp -s "$W/s/samples/sample-6.mp4" "$W/of-merged/samples/sample-1.mp4"; then
  ok "sample-6 is byte-identical to the merged model's"
else
  ok "sample-6 within tolerance of the merged model's (not byte-identical)"
fi

# 4. the adapters' EMA, not the adapters, is sampled
LORA_EMA=("${LORA[@]::${#LORA[@]}-2}")  # without train.ema_decay = 0: the default
$T train "${LORA_EMA[@]}" --set train.sample_every=6 --out "$W/e" --steps 6 2>/dev/null || fail "EMA run"
diff <(losses "$W/s") <(losses "$W/e") >/dev/null || fail "ema_decay changed the losses"
! cmp -s "$W/s/samples/sample-6.mp4" "$W/e/samples/sample-6.mp4" ||
  fail "the sample of the adapters' EMA equals that of the adapters"
ok "with ema_decay 0.999 the sample differs (the EMA is sampled), the losses do not"
echo "lora_samples: $passed passed, 0 failed"
