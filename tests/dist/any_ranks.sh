#!/usr/bin/env bash
# World sizes that are not powers of two (issue 39; docs/dist.md "Group set"): the groups are
# the aligned power-of-two blocks that fit in N, so at 3, 5 and 6 ranks the ranks past the
# last whole block of a size sit in smaller groups (or idle) in a wave. Against one rank
# (4 steps of the tiny model, relative 1e-5, losses and gradient norms):
#  1. dynamic plans with every group in Ulysses (3 ranks: the model's 2 heads allow groups
#     of up to 2, all there is at 3), ring (5) and hybrid (6 ranks in
#     nodes of 2, mem_tokens 400 so the long clips need the group of 4: hybrid over 2 nodes),
#     each checked to have run that mode;
#  2. train.zero 1, 2 and 3 at 3, 5 and 6 ranks (the shards padded to 16 x N floats);
#  3. resume across world sizes: 6 ranks' (zero 3) step-2 checkpoint on 4 ranks, 4 ranks'
#     on 3 (zero 2), steps 3 and 4 as one rank's;
#  4. validation (1 clip held out, validated at steps 0, 2 and 4) at 1, 3 and 6 ranks.
# About a dozen short mpirun runs of 3 to 6 ranks, oversubscribed.
set -euo pipefail
. "$(dirname "$0")/ranks_store.sh"  # 4 clips of 320, 640, 960 and 1280 tokens
ranks_begin any
CONF+=(--set train.steps=4 --set train.ckpt_every=2 --set train.ckpt_keep=3)
both() { close 1 "$1" loss; close 1 "$1" grad_norm; }
# ran MODE RUN: some clip of RUN ran in a group of CP > 1 in MODE
ran() {
  jq -e -s --arg m "$1" 'any(.cp_modes[$m] > 0)' "$W/$2/metrics.jsonl" >/dev/null ||
    fail "$2: no clip ran in $1 groups: $(head -2 "$W/$2/metrics.jsonl")"
  echo "ok: $2 ran $1 groups"
}

ranks_train 1 1
# 1. CP modes
ranks_train 3u 3 --set train.cp_mode=ulysses
ranks_train 5r 5 --set train.cp_mode=ring
ranks_train 6h 6 --set train.cp_mode=hybrid --gpus-per-node 2 --set train.mem_tokens=400
for r in 3u 5r 6h; do both $r; done
ran ulysses 3u
ran ring 5r
ran hybrid 6h
# 2. ZeRO
ranks_train 3z1 3 --set train.zero=1
ranks_train 5z2 5 --set train.zero=2
ranks_train 6z3 6 --set train.zero=3
for r in 3z1 5z2 6z3; do both $r; done
# 3. resume across world sizes from the step-2 checkpoints
resume() {  # resume NAME FROM RANKS ARGS...: FROM's run directory without its newest checkpoint
  local name=$1 from=$2 n=$3; shift 3
  cp -r "$W/$from" "$W/$name" && rm "$W/$name/ckpt-4.safetensors"
  ranks_train "$name" "$n" --resume "$@"
  close 1 "$name" loss
}
ranks_train 4 4
resume 6to4 6z3 4 --set train.zero=3
resume 4to3 4 3 --set train.zero=2
# 4. validation
for n in 1 3 6; do
  ranks_train "val$n" "$n" --set train.global_batch=3 --set train.val_clips=1 --set train.val_every=2
done
for n in 3 6; do
  paste <(jq -r 'select(.val_loss) | "\(.step) \(.val_loss)"' "$W/val1/metrics.jsonl") \
        <(jq -r 'select(.val_loss) | "\(.step) \(.val_loss)"' "$W/val$n/metrics.jsonl") |
    awk -v n="$n" '{ if ($1 != $3) exit 1; d = $2 - $4; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2)
                     if (r > m) m = r; c++ }
         END { printf "ok: validation at %d ranks: %d points, worst relative difference %.3g\n", n, c, m
               exit !(c == 3 && m <= 1e-5) }' || fail "validation at $n ranks differs from one rank's"
done
echo "any world size: all passed"
