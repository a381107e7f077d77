#!/usr/bin/env bash
# bench/sample/chunked.sh — `tessera sample --chunked` with the K/V cache (model/kvcache.h)
# against the same command with --no-kv-cache (the baseline: every step recomputes the
# context chunks), in the same run, on the same checkpoint, seed and cores.
#
#   bench/sample/chunked.sh        (after tools/setup.sh; CKPT=FILE REPEAT=N STEPS=N FRAMES=N)
#
# The checkpoint: CKPT, else the demo's (tools/demo_chunks.sh: the tiny model, block_causal
# by chunks of 2 frames, 1x4x4 patches), made here in a work folder with 2 training steps
# when absent (the weights do not change the work; the demo's own 300 steps take minutes).
# The sample: FRAMES frames (default 16: 8 chunks of 128 tokens) of 32x32, STEPS Euler steps
# (default 24), seed 0; each mode REPEAT times (default 5), interleaved, the best wall time
# counting (the steadier number on a loaded machine). Also checked: the two modes' pixels
# (Y4M) differ by at most 1 level (fp32 rounding of the cached against the recomputed
# attention). Output: one summary line with the ratio (no cache / cache) and
# bench/sample/chunked.json (OUT_JSON).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TESSERA_BIN:-$ROOT/build/tools/tessera}
OUT_JSON=${OUT_JSON:-$ROOT/bench/sample/chunked.json}
REPEAT=${REPEAT:-5}
STEPS=${STEPS:-24}
FRAMES=${FRAMES:-16}
die() { echo "chunked.sh: $*" >&2; exit 1; }
[ -x "$BIN" ] || die "no tessera binary at $BIN (tools/setup.sh)"
for v in REPEAT STEPS FRAMES; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"; done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-chunked.XXXXXX")
if [ -n "${KEEP:-}" ]; then echo "chunked.sh: work folder $WORK kept" >&2; else trap 'rm -rf "$WORK"' EXIT; fi
CKPT=${CKPT:-}
if [ -z "$CKPT" ]; then
  OUT=$WORK/demo STEPS=2 NCLIPS=8 TESSERA_BIN=$BIN "$ROOT/tools/demo_chunks.sh" >"$WORK/demo.log" 2>&1 ||
    { tail -5 "$WORK/demo.log" >&2; die "tools/demo_chunks.sh failed (log above)"; }
  CKPT=$WORK/demo/run/ckpt-2.safetensors
fi
[ -f "$CKPT" ] || die "no checkpoint $CKPT"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# run MODE I: one sample, its wall seconds on stdout
run() {
  local flags=(--chunked) t0 t1
  [ "$1" = nocache ] && flags+=(--no-kv-cache)
  t0=$(date +%s.%N)
  "$BIN" sample --ckpt "$CKPT" --frames "$FRAMES" --size 32x32 --steps "$STEPS" --seed 0 \
    "${flags[@]}" --out "$WORK/$1.y4m" 2>"$WORK/$1-$2.log" || { cat "$WORK/$1-$2.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}
best() { awk -v a="$1" -v b="${2:-1e30}" 'BEGIN { print (a < b) ? a : b }'; }
cache="" nocache=""
for i in $(seq 1 "$REPEAT"); do
  nocache=$(best "$(run nocache "$i")" "$nocache")
  cache=$(best "$(run cache "$i")" "$cache")
done
kv=$(sed -n 's/.*K\/V cache of \(.*\)$/\1/p' "$WORK/cache-1.log" | head -1)
# the largest pixel difference of the two Y4M files (their headers are equal)
diff=$(python3 -c 'import sys
a, b = (open(f, "rb").read() for f in sys.argv[1:])
print(max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else 256)' \
  "$WORK/cache.y4m" "$WORK/nocache.y4m")
ratio=$(awk -v a="$nocache" -v b="$cache" 'BEGIN { printf "%.2f", a / b }')
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
cat >"$OUT_JSON" <<EOF
{
  "benchmark": "sample_chunked",
  "commit": "$commit",
  "machine": {"nproc": $(nproc)},
  "ckpt": "$( [ -n "${CKPT##$WORK*}" ] && echo "$CKPT" || echo "tools/demo_chunks.sh, 2 steps")",
  "frames": $FRAMES, "size": "32x32", "steps": $STEPS, "repeat": $REPEAT,
  "kv_cache": "$kv",
  "best_s": {"cache": $cache, "no_kv_cache": $nocache},
  "ratio_no_cache_over_cache": $ratio,
  "max_pixel_diff": $diff
}
EOF
echo "chunked.sh: tessera sample --chunked, $FRAMES frames 32x32, $STEPS steps: $cache s with the K/V cache, $nocache s without (--no-kv-cache): ${ratio}x; pixels differ by at most $diff; cache: $kv"
[ "$diff" -le 1 ] || die "the cached sample's pixels differ from the recomputed one's by $diff levels"
