#!/usr/bin/env bash
# tests/train/profile.sh — TESSERA_PROFILE=1 (kernels/profile.h wrapped around the chosen
# tables in tools/cmd_train.c): the run is bitwise the unprofiled one (every loss and
# gradient norm of metrics.jsonl, the final checkpoint byte for byte), and it ends with the
# profile table on stderr: the attention, GEMM and optimizer classes were called (the
# optimizer once per step, 3 steps), and the entries the model uses appear.
source "$(dirname "$0")/lib.sh"
need_store
train() { $T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --steps 3 "$@"; }
train --out "$W/plain" 2>/dev/null
TESSERA_PROFILE=1 train --out "$W/prof" 2>"$W/err"
diff <(jq -r '[.step,.loss,.grad_norm]|@tsv' "$W/plain/metrics.jsonl") \
     <(jq -r '[.step,.loss,.grad_norm]|@tsv' "$W/prof/metrics.jsonl") ||
  fail "profiled run's losses or gradient norms differ from the plain run's"
cmp "$W/plain/ckpt-3.safetensors" "$W/prof/ckpt-3.safetensors" || fail "profiled ckpt-3 differs"
grep -q '^profile (cpu' "$W/err" || { cat "$W/err" >&2; fail "no profile table on stderr"; }
for c in gemm attention elementwise optimizer 'framework overhead' step; do
  grep -Eq "^  $c +[0-9]" "$W/err" || { cat "$W/err" >&2; fail "profile lacks the $c line"; }
done
# adamw_update_multi: one call per step (calls column of the totals: 3)
grep -Eq '^  adamw_update_multi +optimizer +[0-9.]+ +[0-9.]+% +3\.0( |$)' "$W/err" ||
  { cat "$W/err" >&2; fail "adamw_update_multi not counted once per step"; }
grep -Eq '^  attention_forward +attention ' "$W/err" || fail "attention_forward not listed"
# Without the variable there is no table.
train --out "$W/plain2" 2>"$W/err2"
! grep -q '^profile' "$W/err2" || fail "a profile table without TESSERA_PROFILE"
echo "profile: TESSERA_PROFILE=1 run bitwise the plain run, table with every class"
