#!/usr/bin/env bash
# bench/dist/overlap.sh — Ulysses' all-to-all pipelined over head chunks against the blocking
# one (not a test): one microbatch of a CP group of all K ranks in Ulysses mode (and at 4
# ranks in hybrid mode: Ulysses over pairs, the inner ring across them), timed by
# bench_ring three ways in one process, the reps interleaved (each way first in turn) so that
# load drifting on a shared machine hits all alike: pipelined (train.ulysses_chunks = C), the
# blocking baseline (--vs-chunks 1) and the same compute with a communication table that
# moves nothing. Per K, mode and C: the median over REPS of each, the ratio pipelined / blocking of
# the microbatch time (below 1: pipelining is faster), the exposed communication of both
# (with - without the exchange) and the cost model's exposed time of both (sched/cost.h, from
# the cost file that bench/dist/modes.sh calibrated at that K: bench/dist/modes-cost2.conf,
# bench/dist/modes-cost4.conf). ROUNDS such runs, the median of their figures reported.
#   bench/dist/overlap.sh        CPU: tiny model with 8 heads (head dim 8: 2 heads a rank
#                                at 4 ranks, so there are chunks to pipeline), patch 1x4x4,
#                                one clip of 4096 tokens, mpi, one thread a rank
# Env: RANKS ("2 4"), MODES ("ulysses hybrid"; hybrid at 4 ranks and more), CHUNKS ("2"),
# TOKENS (4096), REPS (5), ROUNDS (3), BUILD_DIR (build), OUT_JSON (bench/dist/overlap.json).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${BUILD_DIR:-$ROOT/build}
BIN=$B/bench/bench_ring
TOKENS=${TOKENS:-4096}
REPS=${REPS:-5}
ROUNDS=${ROUNDS:-3}
OUT_JSON=${OUT_JSON:-$ROOT/bench/dist/overlap.json}
SETS=(--config "$ROOT/configs/model/tiny.conf" --set model.pt=1 --set model.ph=4 --set model.pw=4
      --set model.heads=8)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
[ -x "$BIN" ] || { echo "bench: no $BIN (build first)" >&2; exit 1; }
command -v jq >/dev/null || { echo "bench: needs jq" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-overlap.XXXXXX")
trap 'rm -rf "$W"' EXIT
results=()
for k in ${RANKS:-2 4}; do
  cost=$ROOT/bench/dist/modes-cost$k.conf
  [ -f "$cost" ] || { echo "bench: no $cost (bench/dist/modes.sh writes it)" >&2; exit 1; }
  for m in ${MODES:-ulysses hybrid}; do
    [ "$m" = hybrid ] && [ "$k" -lt 4 ] && continue
    for c in ${CHUNKS:-2}; do
      for r in $(seq 1 "$ROUNDS"); do
        t=$k-$m-$c-$r
        mpirun --oversubscribe -np "$k" "$BIN" "${SETS[@]}" --set train.ulysses_chunks="$c" \
          --vs-chunks 1 --tokens "$TOKENS" --reps "$REPS" --comm mpi --mode "$m" --gpus-per-node 2 \
          --cost "$cost" --json "$W/$t.json" >"$W/$t.log" 2>&1 || { cat "$W/$t.log" >&2; exit 1; }
        jq -c --argjson round "$r" '. + {round: $round}' "$W/$t.json" >"$W/run-$t.json"
        results+=("$W/run-$t.json")
      done
    done
  done
done
jq -s --arg commit "$(git -C "$ROOT" rev-parse --short HEAD)" --arg host "$(uname -n)" \
  --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
  --argjson cores "$(nproc)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '
  def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  {what: "bench/dist/overlap.sh: Ulysses all-to-all pipelined over head chunks against blocking (train.ulysses_chunks = 1), one microbatch, interleaved in one process",
   commit: $commit, machine: {host: $host, cpu: $cpu, cores: $cores, load_average_at_end: $load},
   summary: (group_by([.ranks, .mode, .ulysses_chunks]) | map({ranks: .[0].ranks, mode: .[0].mode,
     chunks: .[0].ulysses_chunks,
     microbatch_s: (map(.microbatch_s) | median), microbatch_blocking_s: (map(.microbatch_base_s) | median),
     microbatch_without_s: (map(.microbatch_without_s) | median),
     ratio_vs_blocking: (map(.ratio_vs_base) | median),
     exposed_s: (map(.exposed_ring_s) | median), exposed_blocking_s: (map(.exposed_base_s) | median),
     predicted_exposed_s: .[0].predicted_exposed_s, predicted_exposed_blocking_s: .[0].predicted_exposed_base_s,
     runs: length})),
   runs: .}' "${results[@]}" >"$OUT_JSON"
jq -r '.summary[] | "CP-\(.ranks) \(.mode) over \(.chunks) head chunks: microbatch \(.microbatch_s * 1000 | round / 1000) s against \(.microbatch_blocking_s * 1000 | round / 1000) s blocking: x\(.ratio_vs_blocking * 1000 | round / 1000); exposed \(.exposed_s * 10000 | round / 10000) s against \(.exposed_blocking_s * 10000 | round / 10000) s (model \(.predicted_exposed_s * 10000 | round / 10000) s against \(.predicted_exposed_blocking_s * 10000 | round / 10000) s); compute alone \(.microbatch_without_s * 1000 | round / 1000) s (\(.runs) runs)"' "$OUT_JSON"
echo "wrote $OUT_JSON"
