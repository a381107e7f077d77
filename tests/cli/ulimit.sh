#!/usr/bin/env bash
# tests/cli/ulimit.sh — resource limits fail cleanly (issue 40, 5), every command under
# `ulimit -v` and `timeout`:
# - the CPU-only commands map neither cuBLASLt, NCCL nor OpenBLAS (they are opened at their
#   first use, core/lazylib.h, kernels/cpu/blas.h): `tessera --version`, `plan`, `ingest`
#   and `manifest` work under 1 GB of address space (every command died of SIGSEGV in
#   cuBLASLt's initializer there), and `--version` exits under 400 MB (it hung at exit:
#   OpenBLAS's worker retried a failing 128 MiB allocation for ever);
# - a training step under 1 GB runs, OpenBLAS given the threads the limit holds (64 asked:
#   a warning says how many); a model whose buffers do not fit exits 1 with "out of memory:
#   ..., how much" instead of spinning or hanging.
# Not under the sanitizers (ASan reserves terabytes of shadow address space): skipped.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad/same/tally
if ldd "$T" 2>/dev/null | grep -qE 'libasan|libtsan|libubsan'; then
  echo "skip: a sanitizer build (its shadow memory needs more address space than any ulimit -v here)"
  exit 77
fi
scratch ulimit
# lim KB LOG CMD...: CMD under ulimit -v KB and a 60 s timeout; its exit status in RC
lim() {
  local kb=$1 log=$2
  shift 2
  RC=0
  (ulimit -v "$kb" && exec timeout 60 "$@") >"$log" 2>&1 </dev/null || RC=$?
}
GB=1000000

# which libraries a command that reads a manifest from a pipe has mapped while it waits
# (the pipe's writer holds it open until the maps are read; they are read once the process
# is tessera and blocks reading the pipe, however long a loaded machine takes to get there)
(while [ ! -e "$W/maps.read" ]; do sleep 0.05; done) | "$T" manifest /dev/stdin --manifest-syntax csv >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1200); do
  [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$T")" ] &&
    grep -q pipe_read "/proc/$pid/wchan" 2>/dev/null && break
  sleep 0.05
done
maps=$(cat "/proc/$pid/maps" 2>/dev/null)
touch "$W/maps.read"
libs=$(awk '{print $6}' <<<"$maps" | grep -oE 'lib(cublasLt|nccl|openblas)[^/]*' | sort -u | tr '\n' ' ')
wait $pid
if grep -q libc.so <<<"$maps" && [ -z "$libs" ]; then ok "a CPU-only command maps no cuBLASLt, NCCL or OpenBLAS"
else bad "a CPU-only command's maps ($(wc -l <<<"$maps") lines) hold: ${libs:-?}"; fi

lim $GB "$W/version.log" "$T" --version
[ $RC -eq 0 ] && ok "--version under 1 GB" || bad "--version under 1 GB: exit $RC: $(tail -2 "$W/version.log")"
lim 400000 "$W/version4.log" "$T" --version
[ $RC -eq 0 ] && ok "--version under 400 MB exits" || bad "--version under 400 MB: exit $RC: $(tail -2 "$W/version4.log")"
printf 'tokens\n100\n200\n300\n' >"$W/len.csv"
cost=$(ls "$SRC"/configs/cost/*.conf | head -1)
lim $GB "$W/plan.log" "$T" plan --lengths "$W/len.csv" --ranks 2 --mem-tokens 1024 --cost "$cost" --steps 1
[ $RC -eq 0 ] && ok "plan under 1 GB" || bad "plan under 1 GB: exit $RC: $(tail -2 "$W/plan.log")"
ffmpeg -nostdin -v error -f lavfi -i testsrc2=s=160x128:r=12:d=2 "$W/c.mp4"
lim $GB "$W/ingest.log" "$T" ingest "$W/c.mp4" --out "$W/store" --fps 4 --short-side 32 --patch 1x4x4 --quiet
[ $RC -eq 0 ] && ok "ingest under 1 GB" || bad "ingest under 1 GB: exit $RC: $(tail -2 "$W/ingest.log")"
printf 'path,start,end\n%s,0,1\n' "$W/c.mp4" >"$W/m.csv"
lim $GB "$W/manifest.log" "$T" manifest "$W/m.csv"
[ $RC -eq 0 ] && ok "manifest under 1 GB" || bad "manifest under 1 GB: exit $RC: $(tail -2 "$W/manifest.log")"

M=(train --config "$SRC/configs/model/tiny.conf" --data "$W/store" --set model.pt=1 --set model.ph=4
   --set model.pw=4 --set model.hidden=32 --set model.heads=2 --set train.global_batch=1
   --set train.mem_tokens=1024 --set train.warmup=1 --steps 1)
lim $GB "$W/train.log" env OPENBLAS_NUM_THREADS=64 "$T" "${M[@]}" --out "$W/run"
if [ $RC -eq 0 ] && [ -f "$W/run/ckpt-1.safetensors" ] &&
   grep -q "warning: OpenBLAS: [0-9]* threads\?: the address-space limit" "$W/train.log"; then
  ok "a step under 1 GB with 64 OpenBLAS threads asked: $(grep -m1 'OpenBLAS' "$W/train.log")"
else bad "train under 1 GB: exit $RC: $(tail -3 "$W/train.log")"; fi
lim 700000 "$W/big.log" "$T" "${M[@]}" --out "$W/big" --set model.hidden=1024 --set model.heads=8 \
  --set model.depth=4
if [ $RC -eq 1 ] && grep -q "error: .*out of memory: a host buffer of [0-9]* bytes ([0-9.]* MiB)" "$W/big.log"; then
  ok "a model past the limit: exit 1, $(grep -m1 -o 'out of memory.*' "$W/big.log" | head -c 160)"
else bad "a model past the limit: exit $RC: $(tail -3 "$W/big.log")"; fi

tally "ulimit"
