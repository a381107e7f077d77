#!/usr/bin/env bash
# tests/train/memorise.sh (label slow: not in tools/test.sh's run; `ctest -L slow`) — the
# end-to-end proof that objective, sampler, positions and unpatchify agree: a store of ONE
# short clip (a yellow disc crossing a blue-violet gradient, 4 frames of 32x32, patch
# 1x4x4: 256 tokens), trained until the sampler reproduces it: a model of width 128 and
# depth 4 (the tiny preset's 64 x 2 gets to ~22 dB in 4,000 steps), batches of the one clip,
# constant learning rate 1e-3 for 3,000 steps, EMA decay 0.99. Every one of three seeds'
# sample, from the EMA weights, must match the clip (as `tessera index export --raw`
# rebuilds it from its tokens) at a PSNR of at least $PSNR_MIN dB, measured by the ffmpeg
# CLI's psnr filter on RGB. A sampler that put a token in the wrong place, a position
# encoding that disagreed between training and sampling, or an unpatchify that swapped
# pixels could not pass: the clip is not symmetric in time, height or width.
# Time (2-core VM shared with other work, see docs/demo.md "Memorisation check"): the run's own
# line "memorise: N steps in S s" says.
source "$(dirname "$0")/lib.sh"
STEPS=${STEPS:-3000}
PSNR_MIN=${PSNR_MIN:-30}
t0=$(date +%s)
ffmpeg -nostdin -v error -y -f lavfi -i "color=black:s=64x64:r=8:d=1,format=rgb24,geq=r='if(lt(hypot(X-(20+16*T),Y-(28+8*T)),14),230,30+X)':g='if(lt(hypot(X-(20+16*T),Y-(28+8*T)),14),200,40)':b='if(lt(hypot(X-(20+16*T),Y-(28+8*T)),14),60,90+Y)'" \
  -c:v libx264 -crf 0 -pix_fmt yuv444p "$W/one.mp4"
$T ingest "$W/one.mp4" --out "$W/store" --fps 4 --short-side 32 --patch 1x4x4 --quiet 2>/dev/null
[ "$(sqlite3 "$W/store/index.sqlite" "select T || 'x' || H || 'x' || W from clips")" = 4x8x8 ] ||
  fail "the clip is not 4x8x8 tokens"
$T train --config "$CONF" --data "$W/store" --out "$W/run" --steps "$STEPS" \
  --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.hidden=128 --set model.depth=4 \
  --set train.global_batch=1 --set train.mem_tokens=512 --set train.steps="$STEPS" \
  --set train.warmup=50 --set train.lr=1e-3 --set train.min_lr=1e-3 --set train.ema_decay=0.99 \
  --set train.ckpt_every=100000 --set train.log_every=100 2>"$W/train.log" ||
  { tail -5 "$W/train.log"; fail "training"; }
t1=$(date +%s)
$T index export "$W/store" --clip 1 --out "$W/clip.rgb" --raw >/dev/null
worst=999
for seed in 0 1 2; do
  $T sample --ckpt "$W/run/ckpt-$STEPS.safetensors" --frames 4 --size 32x32 --seed $seed \
    --out "$W/s$seed.y4m" 2>/dev/null || fail "sample seed $seed"
  p=$(ffmpeg -hide_banner -nostdin -i "$W/s$seed.y4m" -f rawvideo -pix_fmt rgb24 -s 32x32 -framerate 4 -i "$W/clip.rgb" \
        -lavfi "[0:v]format=rgb24[a];[1:v]format=rgb24[b];[a][b]psnr" -f null - 2>&1 |
      sed -n 's/.*PSNR.* average:\([0-9.inf]*\).*/\1/p')
  [ -n "$p" ] || fail "no PSNR for seed $seed"
  echo "memorise: seed $seed: PSNR $p dB against the clip"
  worst=$(awk -v a="$worst" -v b="$p" 'BEGIN { print (b == "inf" || a + 0 < b + 0) ? a : b }')
done
echo "memorise: $STEPS steps in $((t1 - t0)) s (loss $(jq -r 'select(.loss) | .loss' "$W/run/metrics.jsonl" | head -1) -> $(jq -r 'select(.loss) | .loss' "$W/run/metrics.jsonl" | tail -1)); worst PSNR $worst dB (threshold $PSNR_MIN)"
awk -v p="$worst" -v m="$PSNR_MIN" 'BEGIN { exit !(p + 0 >= m) }' || fail "the sampler does not reproduce the clip: $worst dB < $PSNR_MIN dB"
