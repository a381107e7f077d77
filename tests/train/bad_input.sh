#!/usr/bin/env bash
# tests/train/bad_input.sh — every bad input of `tessera train` stops with exit 1 and a
# message naming the problem, before any step (no metrics line, no checkpoint).
source "$(dirname "$0")/lib.sh"
need_store
R=$W/run
expect_fail "missing --config" $T train --data "$STORE" --out "$R"
expect_fail "missing --data" $T train --config "$CONF" --out "$R"
expect_fail "exclude each other" $T train --config "$CONF" --data "$STORE" --out "$R" --resume --init x
expect_fail "unknown option" $T train --config "$CONF" --data "$STORE" --out "$R" --bogus
expect_fail "--steps" $T train --config "$CONF" --data "$STORE" --out "$R" --steps 0
# option values refused after the options' buffer is allocated: no leak (LeakSanitizer)
expect_fail "--plan 'bogus'" $T train --config "$CONF" --data "$STORE" --out "$R" --plan bogus
expect_fail "--gpus-per-node" $T train --config "$CONF" --data "$STORE" --out "$R" --gpus-per-node 0
# backend and precision: chosen at the top, refused with what was built / what is allowed.
# --backend cuda with every GPU hidden: a build without the CUDA backend says so, a build
# with it says the backend could not be set up (tests/cli/backend.sh checks the rest)
if grep -q '^backends:.*cuda' <<<"$("$T" --version)"; then
  NOCUDA="this tessera has the CUDA backend, but it could not be set up here"
else
  NOCUDA="this tessera was built without the CUDA backend \(built: cpu"
fi
expect_fail "$NOCUDA" env CUDA_VISIBLE_DEVICES= $T train --config "$CONF" --data "$STORE" --out "$R" --backend cuda
expect_fail "--backend 'gpu'|backend gpu|gpu" $T train --config "$CONF" --data "$STORE" --out "$R" --backend gpu
expect_fail "precision" $T train --config "$CONF" --data "$STORE" --out "$R" --set train.precision=fp16
expect_fail "tessera calibrate: --backend cuda: $NOCUDA" env CUDA_VISIBLE_DEVICES= $T calibrate --config "$CONF" --base "$SRC/configs/cost/h100-dit1b.conf" --out "$W/c.conf" --backend cuda
# store: missing, not a store, corrupt index, corrupt shard
expect_fail "does not exist" $T train --config "$CONF" --data "$W/nostore" --out "$R"
mkdir -p "$W/empty"
expect_fail "not a tessera store" $T train --config "$CONF" --data "$W/empty" --out "$R"
cp -r "$STORE" "$W/badindex"
echo "garbage" > "$W/badindex/index.sqlite"
expect_fail "badindex" $T train --config "$CONF" --data "$W/badindex" --out "$R"
cp -r "$STORE" "$W/badshard"
for s in "$W"/badshard/shards/*; do printf 'XXXXXXXX' | dd of="$s" bs=1 seek=0 conv=notrunc status=none; done
expect_fail "shard" $T train --config "$CONF" --data "$W/badshard" --out "$R" "${SMALL[@]}" --steps 2
rm -rf "$R"
# config: missing, unparsable, unknown key, inconsistent, patch/channels vs store, labels
expect_fail "nope.conf" $T train --config "$W/nope.conf" --data "$STORE" --out "$R"
printf '[model]\nhidden = sixty\n' > "$W/bad.conf"
expect_fail "hidden" $T train --config "$W/bad.conf" --data "$STORE" --out "$R"
expect_fail "bogus" $T train --config "$CONF" --data "$STORE" --out "$R" --set model.bogus=1
expect_fail "heads" $T train --config "$CONF" --data "$STORE" --out "$R" --set model.heads=5
expect_fail "patch 2x16x16.*1x16x16" $T train --config "$CONF" --data "$STORE" --out "$R" --set model.pt=1
expect_fail "labels but model.num_classes is 1" $T train --config "$CONF" --data "$STORE" --out "$R" --set model.num_classes=1
expect_fail "mem_tokens" $T train --config "$CONF" --data "$STORE" --out "$R" --set train.mem_tokens=16
[ ! -e "$R/metrics.jsonl" ] || fail "a refused run wrote metrics"
# checkpoints: --resume with none, existing run without --resume, corrupt/mismatched init
mkdir -p "$R"
expect_fail "no checkpoint" $T train --config "$CONF" --data "$STORE" --out "$R" --resume
$T train --config "$CONF" --data "$STORE" --out "$R" "${SMALL[@]}" --steps 1 2>/dev/null
[ -f "$R/ckpt-1.safetensors" ] || fail "no ckpt-1"
expect_fail "already holds checkpoints" $T train --config "$CONF" --data "$STORE" --out "$R" "${SMALL[@]}" --steps 2
expect_fail "config differs.*hidden" $T train --config "$CONF" --data "$STORE" --out "$R" "${SMALL[@]}" --set model.hidden=32 --set model.heads=2 --steps 2 --resume
expect_fail "config differs.*lr" $T train --config "$CONF" --data "$STORE" --out "$R" "${SMALL[@]}" --set train.lr=1 --steps 2 --resume
expect_fail "--init.*x_embed.weight is F32 \(1536, 64\), expected F32 \(1536, 32\)" $T train --config "$CONF" --data "$STORE" --out "$W/r2" "${SMALL[@]}" --set model.hidden=32 --set model.heads=2 --init "$R/ckpt-1.safetensors"
expect_fail "No such file" $T train --config "$CONF" --data "$STORE" --out "$W/r3" --init "$W/none.safetensors"
head -c 1000 "$R/ckpt-1.safetensors" > "$W/trunc.safetensors"
expect_fail "trunc.safetensors" $T train --config "$CONF" --data "$STORE" --out "$W/r4" "${SMALL[@]}" --init "$W/trunc.safetensors"
cp "$R/ckpt-1.safetensors" "$W/flip.safetensors"
printf '\x7f\x7f\x7f\x7f' | dd of="$W/flip.safetensors" bs=1 seek=0 conv=notrunc status=none
expect_fail "flip.safetensors" $T train --config "$CONF" --data "$STORE" --out "$W/r5" "${SMALL[@]}" --init "$W/flip.safetensors"
# One flipped byte inside the tensor data: caught by the tensor's checksum, named.
cp "$R/ckpt-1.safetensors" "$W/bits.safetensors"
hdr=$(od -An -t u8 -N8 "$W/bits.safetensors" | tr -d ' ')   # weights come first in the data
printf '\x55' | dd of="$W/bits.safetensors" bs=1 seek=$((8 + hdr + 400)) conv=notrunc status=none
expect_fail "bits.safetensors is damaged: tensor x_embed.weight is damaged" $T train --config "$CONF" --data "$STORE" --out "$W/r6" "${SMALL[@]}" --init "$W/bits.safetensors"
# A corrupt newest checkpoint stops --resume with its name.
mkdir -p "$W/r7"
cp "$R/ckpt-1.safetensors" "$W/r7/ckpt-1.safetensors"
head -c 5000 "$R/ckpt-1.safetensors" > "$W/r7/ckpt-2.safetensors"
expect_fail "ckpt-2.safetensors" $T train --config "$CONF" --data "$STORE" --out "$W/r7" "${SMALL[@]}" --steps 3 --resume
# A stale temporary checkpoint from a crash is removed on start, never loaded.
echo partial > "$R/ckpt-5.safetensors.tmp"
$T train --config "$CONF" --data "$STORE" --out "$R" "${SMALL[@]}" --steps 2 --resume 2>/dev/null
[ ! -e "$R/ckpt-5.safetensors.tmp" ] || fail "stale tmp checkpoint left"
[ -f "$R/ckpt-2.safetensors" ] || fail "resume did not write ckpt-2"
echo "bad_input: all refused"
