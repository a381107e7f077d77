#!/usr/bin/env bash
# bench/gpu/cp_modes.sh — Ulysses and hybrid CP on a GPU, for the GPU lease's `script
# cp_modes` step (tools/gpu_lease.py; BUILD_DIR and OUT set by it): `tessera train --backend
# cuda` on the lease's store (.carry/gpu-store) for 10 steps at 1 rank, and under mpirun
# with every rank on the one GPU through staged MPI (--comm mpi): 2 ranks with every CP
# group in ring mode and in Ulysses mode, 4 ranks in hybrid mode (--gpus-per-node 2: Ulysses
# over pairs, ring across them), and 4 ranks at train.zero = 3 (ZeRO: the weights gathered
# bucket by bucket through the staged all-gather). train.mem_tokens 120 at 2 ranks puts the store's clips of
# more than 120 tokens (it has 96 to 224) in groups of 2, 60 at 4 ranks every clip in a
# group of 2 or 4. Each run's losses against the 1-rank run's (mean
# relative difference, the bf16 bound of tests/dist/gpu_dist.sh: 5e-3) and its median step
# time; one line per run, OUT/cp_modes.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
T=${BUILD_DIR:?}/tools/tessera
OUT=${OUT:?}
STORE=${TESSERA_GPU_STORE:-.carry/gpu-store}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f "$STORE/index.sqlite" ] || { echo "cp_modes: no store $STORE (tools/gpu_prepare.sh makes it)"; exit 1; }
A=(--config configs/model/tiny.conf --set model.pt=1 --set model.ph=4 --set model.pw=4
   --set model.hidden=32 --set model.heads=2 --set train.global_batch=4 --set train.warmup=5
   --set train.steps=10 --set train.lr=2e-3 --set train.log_every=1 --set train.ckpt_every=1000
   --set train.precision=bf16 --backend cuda --data "$STORE")
jget() { python3 tests/json_get.py "$@"; }
timeout 120 "$T" train "${A[@]}" --set train.mem_tokens=1024 --out "$OUT/r1" >"$OUT/r1.log" 2>&1
echo "cp_modes: 1 rank: rc $?"
fail=0
echo "[" >"$OUT/cp_modes.json"
first=1
for r in "2 ring 120 0" "2 ulysses 120 0" "4 hybrid 60 0" "4 auto 60 3"; do
  set -- $r
  out=$OUT/r$1-$2-z$4
  timeout 150 mpirun --oversubscribe --bind-to none -np "$1" "$T" train "${A[@]}" --comm mpi \
    --set train.mem_tokens="$3" --set train.cp_mode="$2" --set train.zero="$4" \
    --gpus-per-node 2 --out "$out" >"$out.log" 2>&1
  rc=$?
  line=$(paste <(jget "$OUT/r1/metrics.jsonl" loss) <(jget "$out/metrics.jsonl" loss) 2>/dev/null |
    awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d; s += d; n++ } END { printf "%d %.3g", n, n ? s / n : 1 }')
  step=$(jget "$out/metrics.jsonl" step_s 2>/dev/null | sort -g | awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : -1 }')
  modes=$(jget "$out/metrics.jsonl" cp_modes 2>/dev/null | tail -1)
  set -- $r $line
  echo "cp_modes: $1 ranks, $2, mem_tokens $3, train.zero $4: rc $rc, $5 steps, mean relative loss difference to 1 rank $6, median step $step s, cp_modes $modes"
  [ "$rc" -eq 0 ] && [ "$5" -eq 10 ] && awk -v d="$6" 'BEGIN { exit !(d <= 5e-3) }' || { fail=1; tail -3 "$out.log"; }
  [ $first -eq 1 ] || echo "," >>"$OUT/cp_modes.json"
  first=0
  printf '{"ranks": %s, "mode": "%s", "mem_tokens": %s, "zero": %s, "rc": %s, "steps": %s, "mean_rel_loss_diff": %s, "median_step_s": %s}\n' \
    "$1" "$2" "$3" "$4" "$rc" "$5" "$6" "$step" >>"$OUT/cp_modes.json"
done
echo "]" >>"$OUT/cp_modes.json"
exit $fail
