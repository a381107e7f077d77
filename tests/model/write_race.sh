#!/usr/bin/env bash
# tests/model/write_race.sh — every output written whole and alone (issue 40, 1; core/fs.h
# fs_atomic, fs_atomic_dir). Two writers race on one output, RACES times each, and the
# output must be byte for byte one of them, whole, every time, with no temporary left:
#  1. `convert DIFFUSERS --out X.ckpt` of two models (depth 1, depth 2) into one checkpoint;
#  2. `convert CKPT --to diffusers --out D` of the two into one folder (config.json and the
#     weights of ONE model: a mixed folder was the bug);
#  3. `index export --out ex.mp4` of two clips into one MP4 (needs media: the ffmpeg CLI).
# Then an export over a folder of the other layout: D holds model 1 sharded (two shards and
# diffusion_pytorch_model.safetensors.index.json, made by splitting its file) and a README;
# `convert --to diffusers --out D` of model 2 leaves D with model 2 alone (the README kept):
# read back by tessera (convert D: model 2's tensors) and, where the venv has diffusers, by
# WanTransformer3DModel.from_pretrained (model 2's tensors, 2 blocks, not the stale index's 1).
set -euo pipefail
T=${TESSERA_BIN:?set by ctest}
ML=${MAKE_LATENTS:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}
RACES=${RACES:-30}
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-race.XXXXXX")
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# two tiny Wan checkpoints of different shapes (depth 1 and 2), one training step each
mkdir -p "$W/lat"
for i in 0 1 2 3; do
  "$ML" "$W/lat/c$i.safetensors" --shape 2,4,4,16 --seed $i --text 3,32 --caption "clip $i"
done
"$T" ingest --latents "$W/lat" --out "$W/store" --workers 1 --quiet >"$W/log" 2>&1
for d in 1 2; do
  "$T" train --config "$SRC/configs/model/wan-tiny.conf" --data "$W/store" --out "$W/run$d" \
    --steps 1 --set train.steps=1 --set train.warmup=0 --set train.global_batch=4 --set model.depth=$d 2>>"$W/log" ||
    { tail -5 "$W/log"; fail "training model $d"; }
  "$T" convert "$W/run$d/ckpt-1.safetensors" --to diffusers --out "$W/D$d" >>"$W/log" 2>&1
  "$T" convert "$W/D$d" --out "$W/ref$d.ckpt" >>"$W/log" 2>&1
done
# tensors FILE: a safetensors file's tensor bytes (without its header, which names the source)
tensors() { local n; n=$(od -An -t u8 -N 8 "$1" | tr -d ' '); tail -c +$((9 + n)) "$1"; }
# leftovers DIR: temporary files or folders of an atomic write
leftovers() { find "$1" -name '*.tmp*' | head -3; }

# race A B: runs the commands A and B (strings) at once; both must exit 0
race() {
  local ra=0 rb=0
  bash -c "$1" >/dev/null 2>"$W/ea" & local pa=$!
  bash -c "$2" >/dev/null 2>"$W/eb" & local pb=$!
  wait $pa || ra=$?
  wait $pb || rb=$?
  [ $ra -eq 0 ] && [ $rb -eq 0 ] || fail "a racing writer failed ($ra, $rb): $(cat "$W/ea" "$W/eb")"
}

# 1. one checkpoint; the references: each writer alone, to the same name (the metadata names
# the source folder, so the whole file tells the writer)
mkdir -p "$W/c"
for d in 1 2; do
  "$T" convert "$W/D$d" --out "$W/c/x.ckpt" >>"$W/log" 2>&1
  cp "$W/c/x.ckpt" "$W/c$d.ckpt"
done
cmp -s "$W/c1.ckpt" "$W/c2.ckpt" && fail "the two models' checkpoints are the same"
for i in $(seq "$RACES"); do
  rm -f "$W/c/x.ckpt"
  race "'$T' convert '$W/D1' --out '$W/c/x.ckpt'" "'$T' convert '$W/D2' --out '$W/c/x.ckpt'"
  cmp -s "$W/c/x.ckpt" "$W/c1.ckpt" || cmp -s "$W/c/x.ckpt" "$W/c2.ckpt" ||
    fail "race $i: the checkpoint is neither writer's whole file"
  [ -z "$(leftovers "$W/c")" ] || fail "race $i: temporary files left: $(leftovers "$W/c")"
done
echo "ok: $RACES races of two convert --out into one checkpoint: one writer's whole file each time"

# 2. one diffusers folder
for i in $(seq "$RACES"); do
  race "'$T' convert '$W/run1/ckpt-1.safetensors' --to diffusers --out '$W/f/D'" \
       "'$T' convert '$W/run2/ckpt-1.safetensors' --to diffusers --out '$W/f/D'"
  got=""
  for d in 1 2; do
    cmp -s "$W/f/D/config.json" "$W/D$d/config.json" &&
      cmp -s "$W/f/D/diffusion_pytorch_model.safetensors" "$W/D$d/diffusion_pytorch_model.safetensors" &&
      got=$d
  done
  [ -n "$got" ] || fail "race $i: the folder is neither model's whole (mixed or damaged): $(ls "$W/f/D")"
  [ "$(ls "$W/f/D" | wc -l)" -eq 2 ] || fail "race $i: the folder holds $(ls "$W/f/D")"
  [ -z "$(leftovers "$W/f")" ] || fail "race $i: temporary folders left: $(leftovers "$W/f")"
done
echo "ok: $RACES races of two convert --to diffusers into one folder: one model's whole folder each time"

# 3. one MP4
if command -v ffmpeg >/dev/null && "$T" --version 2>/dev/null | grep -q '^media: FFmpeg'; then
  mkdir -p "$W/vid"
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=64x48:r=8" -t 2 "$W/vid/a.mp4"
  ffmpeg -nostdin -v error -y -f lavfi -i "rgbtestsrc=s=64x48:r=8" -t 2 "$W/vid/b.mp4"
  "$T" ingest "$W/vid" --out "$W/px" --fps 4 --short-side 32 --patch 1x16x16 --max-seconds 2 \
    --workers 1 --quiet >>"$W/log" 2>&1
  ids=($(sqlite3 "$W/px/index.sqlite" "select id from clips order by id"))
  [ ${#ids[@]} -ge 2 ] || fail "the pixel store has ${#ids[@]} clips"
  mkdir -p "$W/e"
  for k in 0 1; do
    "$T" index export "$W/px" --clip "${ids[$k]}" --out "$W/e/x.mp4" >>"$W/log" 2>&1
    mv "$W/e/x.mp4" "$W/ex$k.mp4"
  done
  cmp -s "$W/ex0.mp4" "$W/ex1.mp4" && fail "the two clips' exports are the same"
  for i in $(seq "$RACES"); do
    race "'$T' index export '$W/px' --clip ${ids[0]} --out '$W/e/x.mp4'" \
         "'$T' index export '$W/px' --clip ${ids[1]} --out '$W/e/x.mp4'"
    cmp -s "$W/e/x.mp4" "$W/ex0.mp4" || cmp -s "$W/e/x.mp4" "$W/ex1.mp4" ||
      fail "race $i: the MP4 is neither clip's export"
    [ -z "$(leftovers "$W/e")" ] || fail "race $i: temporary files left: $(leftovers "$W/e")"
  done
  echo "ok: $RACES races of two index export into one MP4: one clip's whole file each time"
else
  echo "skip: index export races need media (the ffmpeg CLI and a tessera built with FFmpeg)"
fi

# 4. an export over a folder of the other layout: model 1 sharded, then model 2 written there
mkdir -p "$W/s/D"
python3 - "$W/D1/diffusion_pytorch_model.safetensors" "$W/s/D" <<'P'
import json, os, struct, sys
src, out = sys.argv[1:]
f = open(src, "rb")
n = struct.unpack("<Q", f.read(8))[0]
head = json.loads(f.read(n))
meta = head.pop("__metadata__", None)
data = f.read()
names = sorted(head)
halves = [names[: len(names) // 2], names[len(names) // 2:]]
weight_map = {}
for k, part in enumerate(halves):
    fname = "diffusion_pytorch_model-%05d-of-00002.safetensors" % (k + 1)
    h, blob = {}, b""
    for t in part:
        a, b = head[t]["data_offsets"]
        h[t] = dict(head[t], data_offsets=[len(blob), len(blob) + b - a])
        blob += data[a:b]
        weight_map[t] = fname
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(os.path.join(out, fname), "wb").write(struct.pack("<Q", len(hb)) + hb + blob)
json.dump({"metadata": {}, "weight_map": weight_map},
          open(os.path.join(out, "diffusion_pytorch_model.safetensors.index.json"), "w"))
P
cp "$W/D1/config.json" "$W/s/D/config.json"
echo "notes" >"$W/s/D/README.md"
"$T" convert "$W/s/D" --out "$W/s/old.ckpt" >>"$W/log" 2>&1  # the sharded folder reads as model 1
[ "$(tensors "$W/s/old.ckpt" | md5sum)" = "$(tensors "$W/ref1.ckpt" | md5sum)" ] ||
  fail "the hand-sharded folder does not read as model 1"
"$T" convert "$W/run2/ckpt-1.safetensors" --to diffusers --out "$W/s/D" >>"$W/log" 2>&1
[ "$(cd "$W/s/D" && ls | tr '\n' ' ')" = "README.md config.json diffusion_pytorch_model.safetensors " ] ||
  fail "after the export the folder holds: $(ls "$W/s/D")"
[ "$(cat "$W/s/D/README.md")" = notes ] || fail "the folder's README was not kept"
"$T" convert "$W/s/D" --out "$W/s/new.ckpt" >>"$W/log" 2>&1
[ "$(tensors "$W/s/new.ckpt" | md5sum)" = "$(tensors "$W/ref2.ckpt" | md5sum)" ] ||
  fail "tessera reads back another model than the one exported"
[ -z "$(leftovers "$W/s")" ] || fail "temporary folders left: $(leftovers "$W/s")"
echo "ok: an export over a sharded folder: no stale index or shard, tessera reads model 2"
. "$SRC/tests/venv.sh"
venv_python   # PY: the venv's python (warm where the pywarm fixture is up)
if [ -x "$PY" ] && "$PY" -c 'import diffusers, torch, safetensors' 2>/dev/null; then
  OMP_NUM_THREADS=1 "$PY" - "$W/s/D" "$W/D2" <<'P' || fail "diffusers reads back another model"
import sys, torch
from diffusers import WanTransformer3DModel
got = WanTransformer3DModel.from_pretrained(sys.argv[1]).state_dict()
want = WanTransformer3DModel.from_pretrained(sys.argv[2]).state_dict()
assert sorted(got) == sorted(want), "tensor names differ"
assert all(torch.equal(got[k], want[k]) for k in want), "tensor values differ"
assert any(k.startswith("blocks.1.") for k in got), "one block: the stale model 1's"
print("ok: diffusers reads model 2 back from the folder (%d tensors, 2 blocks)" % len(got))
P
else
  echo "skip: the diffusers read-back needs the venv with diffusers at $PY (tools/setup_venv.sh)"
fi
echo "write_race: every output whole and one writer's"
