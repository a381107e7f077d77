#!/usr/bin/env bash
# tests/cli/demo_chunks.sh — tools/demo_chunks.sh at 8 clips and 20 steps (docs/demo.md
# "Chunk by chunk"): it ends, writes the chunk-by-chunk and whole-clip samples (Y4M, MP4,
# strips) and the loss curve, its chunked sample has the clip's 16 frames, and the
# training loss at step 20 is below step 10's; the chunked sample with the context
# recomputed every step (--no-kv-cache, the K/V cache's reference) has the same pixels
# within a level, and --no-kv-cache without --chunked is refused naming it.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, fail
scratch demo-chunks
command -v ffmpeg >/dev/null || { echo "SKIP: no ffmpeg CLI (the demo makes its clips with it)"; exit 77; }
OUT="$W/demo" STEPS=20 NCLIPS=8 TESSERA_BIN="$T" "$SRC/tools/demo_chunks.sh" >"$W/log" 2>&1 ||
  fail "demo_chunks.sh failed: $(tail -5 "$W/log")"
for f in chunked.y4m chunked.mp4 chunked-strip.png whole.mp4 whole-strip.png run/metrics.jsonl; do
  [ -s "$W/demo/$f" ] || fail "no $f: $(tail -3 "$W/log")"
done
python3 -c 'import matplotlib' 2>/dev/null && { [ -s "$W/demo/loss.png" ] || fail "no loss.png"; }
frames=$(python3 -c 'import sys; print(open(sys.argv[1], "rb").read().count(b"FRAME\n"))' "$W/demo/chunked.y4m")
[ "$frames" = 16 ] || fail "the chunked sample has $frames frames, not 16"
S=("$T" sample --ckpt "$W/demo/run/ckpt-20.safetensors" --frames 16 --size 32x32 --steps 24
   --seed 0)
"${S[@]}" --chunked --no-kv-cache --out "$W/nocache.y4m" 2>"$W/nocache.log" ||
  fail "sample --chunked --no-kv-cache: $(tail -3 "$W/nocache.log")"
d=$(python3 -c 'import sys
a, b = (open(f, "rb").read() for f in sys.argv[1:])
print(max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else 256)' \
  "$W/demo/chunked.y4m" "$W/nocache.y4m")
[ "$d" -le 1 ] || fail "the K/V cache's sample differs from the recomputed one's by $d levels"
"${S[@]}" --no-kv-cache --out "$W/whole.y4m" 2>"$W/err" && fail "--no-kv-cache alone was taken"
grep -q -- "--chunked" "$W/err" || fail "--no-kv-cache alone: $(cat "$W/err")"
l=($(jq -r 'select(.loss != null) | .loss' "$W/demo/run/metrics.jsonl"))
[ "${#l[@]}" = 2 ] || fail "expected the losses of steps 10 and 20, got ${l[*]}"
awk -v a="${l[0]}" -v b="${l[1]}" 'BEGIN { exit !(b < a) }' || fail "loss ${l[0]} -> ${l[1]}: no fall"
echo "demo_chunks: files made, loss ${l[0]} -> ${l[1]}: passed"
