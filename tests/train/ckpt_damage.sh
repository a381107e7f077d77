#!/usr/bin/env bash
# tests/train/ckpt_damage.sh — a checkpoint is trusted whole or not at all (model/io/checkpoint.h):
# one flipped byte in any kind of tensor (weights, EMA, Adam m, Adam v), appended garbage
# or a truncation makes EVERY load path refuse it — --resume, --init, sample --raw,
# sample --ema — naming the file and the damaged tensor, whichever tensors that path loads.
source "$(dirname "$0")/lib.sh"
need_store
R=$W/run
$T train --config "$CONF" --data "$STORE" --out "$R" "${SMALL[@]}" --steps 1 2>/dev/null
CK=$R/ckpt-1.safetensors
[ -f "$CK" ] || fail "no ckpt-1"
hdr=$(od -An -t u8 -N8 "$CK" | tr -d ' ')
header() { dd if="$CK" bs=1 skip=8 count="$hdr" status=none; }

# try FILE PATTERN: every load path refuses FILE with "FILE ... PATTERN" on stderr (for
# --resume the file is RUN/ckpt-1.safetensors).
try() {
  local f=$1 pat=$2 d n
  n=$(basename "$f")
  d=$W/resume-${n%.safetensors}
  mkdir -p "$d" && cp "$f" "$d/ckpt-1.safetensors"
  expect_fail "$d/ckpt-1.safetensors.*$pat" $T train --config "$CONF" --data "$STORE" --out "$d" "${SMALL[@]}" --steps 2 --resume
  expect_fail "$n.*$pat" $T train --config "$CONF" --data "$STORE" --out "$W/init-$RANDOM" "${SMALL[@]}" --steps 2 --init "$f"
  expect_fail "$n.*$pat" $T sample --ckpt "$f" --frames 4 --size 32x32 --steps 1 --raw --out "$W/x.mp4"
  expect_fail "$n.*$pat" $T sample --ckpt "$f" --frames 4 --size 32x32 --steps 1 --ema --out "$W/x.mp4"
}

# One byte flipped in the middle of the first tensor of each kind.
for name in x_embed.weight ema.x_embed.weight adam_m.x_embed.weight adam_v.x_embed.weight; do
  read -r b e <<<"$(header | jq -r --arg n "$name" '.[$n].data_offsets | "\(.[0]) \(.[1])"')"
  pos=$((8 + hdr + (b + e) / 2))
  f=$W/flip-$name.safetensors
  cp "$CK" "$f"
  v=$(od -An -tu1 -j$pos -N1 "$f" | tr -d ' ')
  printf "\\x$(printf %02x $((v ^ 16)))" | dd of="$f" bs=1 seek=$pos conv=notrunc status=none
  try "$f" "is damaged: tensor $name is damaged.*older checkpoint"
done
# Garbage appended after the last tensor, and a file cut short.
cp "$CK" "$W/tail.safetensors"
printf 'GARBAGE!' >>"$W/tail.safetensors"
try "$W/tail.safetensors" "8 bytes after the last tensor's data"
head -c $(($(stat -c %s "$CK") - 4)) "$CK" >"$W/short.safetensors"
try "$W/short.safetensors" "data_offsets outside"
# The good checkpoint still loads on every path.
$T sample --ckpt "$CK" --frames 4 --size 32x32 --steps 1 --out "$W/ok.mp4"
$T sample --ckpt "$CK" --frames 4 --size 32x32 --steps 1 --raw --out "$W/ok2.mp4"
echo "ckpt_damage: every damaged checkpoint refused on every load path"
