#!/usr/bin/env bash
# tests/train/resume.sh — resume is bitwise: 12 steps straight == 5 steps, a crash, resume
# to 12. The "crash": a run to step 8 whose ckpt-8 is lost after metrics lines 6-8 were
# written, so the resume starts from ckpt-5 and must drop those lines. Also
# --steps 7 then --steps 12 --resume (a stop between checkpoints). Compares every loss
# in metrics.jsonl (17 significant digits) and the final checkpoints byte for byte.
source "$(dirname "$0")/lib.sh"
need_store
train() { $T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --set train.ckpt_keep=5 "$@" 2>>"$W/log"; }
train --out "$W/a" --steps 12
train --out "$W/b" --steps 8
[ -f "$W/b/ckpt-5.safetensors" ] && [ -f "$W/b/ckpt-8.safetensors" ] || fail "ckpt-5/ckpt-8 missing"
rm "$W/b/ckpt-8.safetensors"
[ "$(wc -l < "$W/b/metrics.jsonl")" -eq 8 ] || fail "expected 8 metric lines before the crash"
train --out "$W/b" --steps 12 --resume
train --out "$W/c" --steps 7
train --out "$W/c" --steps 12 --resume
for r in b c; do
  [ "$(jq -r .step "$W/$r/metrics.jsonl" | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 10 11 12 " ] ||
    fail "$r: metrics steps are $(jq -r .step "$W/$r/metrics.jsonl" | tr '\n' ' ')"
  diff <(losses "$W/a") <(losses "$W/$r") || fail "$r: losses differ from the straight run"
  diff <(jq -r '[.lr,.grad_norm,.clips,.tokens]|@tsv' "$W/a/metrics.jsonl") \
       <(jq -r '[.lr,.grad_norm,.clips,.tokens]|@tsv' "$W/$r/metrics.jsonl") || fail "$r: lr/norm differ"
  cmp "$W/a/ckpt-12.safetensors" "$W/$r/ckpt-12.safetensors" || fail "$r: ckpt-12 differs"
done
# Already done: a rerun to the same step does nothing and leaves the run alone.
train --out "$W/a" --steps 12 --resume
[ "$(wc -l < "$W/a/metrics.jsonl")" -eq 12 ] || fail "a no-op resume changed metrics"
# keep: ckpt_keep=2 leaves the newest two
$T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --out "$W/k" --steps 16 2>/dev/null
[ "$(ls "$W/k" | grep -c '^ckpt-')" -eq 2 ] && [ -f "$W/k/ckpt-16.safetensors" ] && [ -f "$W/k/ckpt-15.safetensors" ] ||
  fail "ckpt_keep: $(ls "$W/k")"
echo "resume: losses $(losses "$W/a" | head -1) .. $(losses "$W/a" | tail -1) identical; checkpoints byte-equal"
