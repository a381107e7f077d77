#!/usr/bin/env bash
# Multi-rank Dynamic-CP training end to end (`mpirun -np N tessera train`):
#  1. twenty steps give the same losses (within 1e-5 relative) at world sizes 1, 2 and 4
#     (at 2 and 4 ranks mem_tokens forces clips of 960 and 1280 tokens across CP groups),
#     and with static-CP plans (--plan static) at 2 ranks, with every CP group in Ulysses
#     mode at 2 ranks and in hybrid mode at 4 (train.cp_mode, --gpus-per-node 2); with 4
#     heads (2 a rank) Ulysses pipelined over 2 head chunks (train.ulysses_chunks) gives
#     the blocking all-to-all's losses at 2 ranks (6 steps; not bitwise: the planner prices
#     the two differently, so their plans may sum the clips in another order; the attention
#     itself is bitwise, tests/dist/test_ring_attention.c);
#  2. a checkpoint written by a 4-rank run resumes in a 2-rank run at the same step with
#     the same next loss;
#  3. a rank killed mid-run makes the job end within 60 s with a message naming the rank,
#     and the checkpoints left are whole (a resume from the newest works);
#  4. bad launches stop with a clear error: ranks given different configs (world sizes
#     that are not powers of two run: tests/dist/any_ranks.sh).
set -euo pipefail
. "$(dirname "$0")/ranks_store.sh"  # tests/lib.sh (ok, bad, tally); 4 clips of 320 ... 1280 tokens
scratch dist-train
MPI=(mpirun --oversubscribe)
ranks_store "$W"
CONF=("${RANKS_MODEL[@]}" --set train.steps=20 --set train.warmup=5
      --set train.lr=2e-3 --set train.ckpt_every=10 --set train.ckpt_keep=5 --set train.log_every=1)
losses() { jq -r '.loss' "$1/metrics.jsonl"; }
# same_losses A B [FIRST]: every loss of A's metrics (from line FIRST) within 1e-5 relative of B's
same_losses() {
  paste <(losses "$1" | tail -n +"${3:-1}") <(losses "$2" | tail -n +"${3:-1}") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > m) m = r; n++ }
         END { printf "%d steps, worst relative difference %.3g\n", n, m; exit !(n > 0 && m <= 1e-5) }'
}

# 1. world sizes 1, 2, 4 (one rank holds whole clips: mem 2048; 2 and 4 ranks: mem 700)
"$T" train "${CONF[@]}" --set train.mem_tokens=2048 --out "$W/r1" 2>"$W/r1.log" \
  && ok "1 rank trained" || bad "1 rank: $(tail -3 "$W/r1.log")"
for n in 2 4; do
  "${MPI[@]}" -np $n "$T" train "${CONF[@]}" --set train.mem_tokens=700 --out "$W/r$n" 2>"$W/r$n.log" \
    && ok "$n ranks trained" || bad "$n ranks: $(tail -3 "$W/r$n.log")"
done
"${MPI[@]}" -np 2 "$T" train "${CONF[@]}" --set train.mem_tokens=700 --plan static --out "$W/r2s" 2>"$W/r2s.log" \
  && ok "2 ranks, static CP plans, trained" || bad "2 ranks static: $(tail -3 "$W/r2s.log")"
# train.cp_mode forces Ulysses, or hybrid over blocks of 2 ranks (--gpus-per-node 2)
# (Ulysses at 2 ranks: the model's 2 heads allow groups of up to 2, sched/cost.h)
"${MPI[@]}" -np 2 "$T" train "${CONF[@]}" --set train.mem_tokens=700 --set train.cp_mode=ulysses \
  --out "$W/r2u" 2>"$W/r2u.log" && ok "2 ranks, Ulysses, trained" || bad "2 ranks Ulysses: $(tail -3 "$W/r2u.log")"
"${MPI[@]}" -np 4 "$T" train "${CONF[@]}" --set train.mem_tokens=700 --set train.cp_mode=hybrid \
  --gpus-per-node 2 --out "$W/r4h" 2>"$W/r4h.log" && ok "4 ranks, hybrid, trained" || bad "4 ranks hybrid: $(tail -3 "$W/r4h.log")"
for n in 2 4 2s 2u 4h; do
  if d=$(same_losses "$W/r1" "$W/r$n"); then ok "losses 1 vs $n ranks: $d"; else bad "losses 1 vs $n ranks: $d"; fi
done
# pipelined against blocking Ulysses
for c in 1 2; do
  "${MPI[@]}" -np 2 "$T" train "${CONF[@]}" --set train.mem_tokens=700 --set train.cp_mode=ulysses \
    --set model.heads=4 --set train.steps=6 --set train.ulysses_chunks=$c --out "$W/r2u4c$c" \
    2>"$W/r2u4c$c.log" || bad "2 ranks Ulysses, 4 heads, chunks $c: $(tail -3 "$W/r2u4c$c.log")"
done
if d=$(same_losses "$W/r2u4c1" "$W/r2u4c2") && [ "$(losses "$W/r2u4c1" | wc -l)" -eq 6 ] &&
   jq -e -s 'any(.cp_modes.ulysses > 0)' "$W/r2u4c2/metrics.jsonl" >/dev/null; then
  ok "Ulysses pipelined over 2 head chunks against blocking: $d"
else
  bad "pipelined vs blocking Ulysses losses: ${d:-}: $(paste <(losses "$W/r2u4c1") <(losses "$W/r2u4c2") | head -3)"
fi
jq -e -s 'any(.cp_modes.ulysses > 0) and all(.cp_modes.ring == null)' "$W/r2u/metrics.jsonl" >/dev/null \
  && ok "train.cp_mode=ulysses ran Ulysses groups (metrics: cp_modes)" || bad "ulysses: $(head -2 "$W/r2u/metrics.jsonl")"
jq -e -s 'any(.cp_modes.hybrid > 0) and all(.cp_modes.ring == null)' "$W/r4h/metrics.jsonl" >/dev/null \
  && ok "train.cp_mode=hybrid ran hybrid groups" || bad "hybrid: $(head -2 "$W/r4h/metrics.jsonl")"
jq -e -s 'all(.plan == "static-balanced" and .predicted_s > 0)' "$W/r2s/metrics.jsonl" >/dev/null \
  && ok "--plan static ran static plans (metrics: plan, predicted_s)" || bad "--plan static: $(head -2 "$W/r2s/metrics.jsonl")"
[ "$(losses "$W/r1" | wc -l)" -eq 20 ] && ok "20 steps logged" || bad "steps logged: $(losses "$W/r1" | wc -l)"

# 2. the 4-rank checkpoint of step 10 resumes on 2 ranks
mkdir -p "$W/r4to2"
cp "$W/r4/ckpt-10.safetensors" "$W/r4to2/"
head -n 10 "$W/r4/metrics.jsonl" >"$W/r4to2/metrics.jsonl"
"${MPI[@]}" -np 2 "$T" train "${CONF[@]}" --set train.mem_tokens=700 --out "$W/r4to2" --resume \
  --steps 11 2>"$W/r4to2.log" && ok "4-rank checkpoint resumed on 2 ranks" || bad "resume 4->2: $(tail -3 "$W/r4to2.log")"
a=$(losses "$W/r4to2" | sed -n 11p); b=$(losses "$W/r4" | sed -n 11p)
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * (b < 0 ? -b : b)) }' \
  && ok "step 11 after the 4->2 resume: loss $a, uninterrupted 4-rank run $b" || bad "step 11 after 4->2 resume: '$a' vs '$b'"

# 3. a rank dies: the job ends, naming it, within a bounded time
"${MPI[@]}" -np 2 "$T" train "${CONF[@]}" --set train.mem_tokens=700 --set train.steps=100000 \
  --set train.ckpt_every=2 --out "$W/dead" >"$W/dead.log" 2>&1 &
job=$!
# (up to 120 s: two steps of 2 ranks take far longer than usual on a loaded machine)
for _ in $(seq 600); do [ -s "$W/dead/metrics.jsonl" ] && [ -f "$W/dead/ckpt-2.safetensors" ] && break; sleep 0.2; done
victim=$(rank1_pid "$W/dead")
if [ ! -f "$W/dead/ckpt-2.safetensors" ]; then
  kill $job 2>/dev/null || true
  bad "the 2-rank run wrote no ckpt-2 in 120 s: $(tail -3 "$W/dead.log")"
elif [ -n "$victim" ]; then
  ranks_kill "$victim" "$job"
  [ $RC -ne 0 ] && [ $TOOK -le 60 ] && ok "job ended (exit $RC) ${TOOK}s after rank 1 was killed" \
    || bad "job after kill: exit $RC after ${TOOK}s"
  grep -Eqi "rank 1|process rank 1" "$W/dead.log" && ok "the message names rank 1: $(grep -Ei 'rank 1' "$W/dead.log" | head -1)" \
    || bad "no message naming rank 1: $(tail -5 "$W/dead.log")"
  # the newest step in numeric order (the scratch folder's name holds dashes too)
  n=$(ls "$W/dead"/ckpt-*.safetensors 2>/dev/null | sed 's/.*ckpt-\([0-9]*\)\.safetensors$/\1/' | sort -n | tail -1 || true)
  "$T" train "${CONF[@]}" --set train.mem_tokens=2048 --set train.steps=100000 --set train.ckpt_every=2 \
    --out "$W/dead" --resume --steps $((n + 1)) 2>"$W/dead-resume.log" \
    && ok "resumed from the newest checkpoint left (ckpt-$n)" || bad "resume after the kill: $(tail -3 "$W/dead-resume.log")"
else
  kill $job 2>/dev/null || true
  bad "could not find rank 1's process"
fi

# 4. bad launches
rc=0
"${MPI[@]}" -np 1 "$T" train "${CONF[@]}" --set train.mem_tokens=700 --out "$W/mixed" --set train.lr=1e-3 : \
  -np 1 "$T" train "${CONF[@]}" --set train.mem_tokens=700 --out "$W/mixed" --set train.lr=2e-3 >"$W/mixed.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "different configs" "$W/mixed.log" && ok "different configs refused" \
  || bad "different configs: exit $rc: $(tail -3 "$W/mixed.log")"

tally "dist train"
