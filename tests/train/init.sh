#!/usr/bin/env bash
# tests/train/init.sh — fine-tuning with --init: weights come from the checkpoint (the
# first loss is that of the trained model, below a fresh model's on the same batch),
# optimizer and schedule start over (step 1, warmup learning rate), the run counts from 0.
source "$(dirname "$0")/lib.sh"
need_store
$T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --out "$W/base" --steps 30 2>/dev/null
$T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --out "$W/ft" --steps 4 \
  --init "$W/base/ckpt-30.safetensors" --set train.lr=5e-4 2>/dev/null
$T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --out "$W/fresh" --steps 4 --set train.lr=5e-4 2>/dev/null
ft1=$(losses "$W/ft" | head -1); fresh1=$(losses "$W/fresh" | head -1)
awk -v a="$ft1" -v b="$fresh1" 'BEGIN { exit !(a < 0.95 * b) }' ||
  fail "fine-tuned first loss $ft1 not below fresh $fresh1"
[ "$(jq -r .step "$W/ft/metrics.jsonl" | head -1)" = 1 ] || fail "fine-tune does not start at step 1"
lr1=$(jq -r .lr "$W/ft/metrics.jsonl" | head -1)
awk -v a="$lr1" 'BEGIN { exit !(a > 0.99e-4 && a < 1.01e-4) }' || fail "lr at step 1 is $lr1, want 5e-4/5"
[ -f "$W/ft/ckpt-4.safetensors" ] || fail "no ckpt-4 in the fine-tune run"
echo "init: first loss $ft1 (fine-tuned) vs $fresh1 (fresh); new schedule lr $lr1"
