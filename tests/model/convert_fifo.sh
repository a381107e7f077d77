#!/usr/bin/env bash
# tests/model/convert_fifo.sh — `tessera convert` reads only regular files (issue 40, 4;
# core/fs.h "regular files only"): a FIFO where a diffusers folder has config.json, the
# shards' index, the weights file or a shard the index names, and a FIFO given as the LoRA
# file of --merge-lora, are each refused at once, naming the file (config.json was opened
# with a plain open: convert waited for a writer forever). Each command under `timeout 60`,
# so a regression fails (exit 124) instead of hanging the suite.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad, refused (exit 1, grep -F, 60 s)
ML=${MAKE_LATENTS:?set by ctest}
scratch cfifo
mkdir -p "$W/lat"
for i in 0 1; do
  "$ML" "$W/lat/c$i.safetensors" --shape 2,4,4,16 --seed $i --text 3,32 --caption "clip $i"
done
"$T" ingest --latents "$W/lat" --out "$W/store" --workers 1 --quiet >"$W/log" 2>&1
"$T" train --config "$SRC/configs/model/wan-tiny.conf" --data "$W/store" --out "$W/run" --steps 1 \
  --set train.steps=1 --set train.warmup=0 --set train.global_batch=2 >>"$W/log" 2>&1 ||
  { tail -5 "$W/log"; echo "FAIL: training" >&2; exit 1; }
CK=$W/run/ckpt-1.safetensors
"$T" convert "$CK" --to diffusers --out "$W/D" >>"$W/log" 2>&1
WF=diffusion_pytorch_model.safetensors
IX=diffusion_pytorch_model.safetensors.index.json
# fifo_folder NAME...: a copy of D at $W/F with each NAME a FIFO
fifo_folder() {
  rm -rf "$W/F" && cp -r "$W/D" "$W/F"
  for n in "$@"; do rm -f "$W/F/$n"; mkfifo "$W/F/$n"; done
}
fifo_folder config.json
refused "convert of a folder whose config.json is a FIFO" "config.json is a FIFO" "$T" convert "$W/F" --out "$W/x.ckpt"
fifo_folder $IX
refused "convert of a folder whose index is a FIFO" "$IX is a FIFO" "$T" convert "$W/F" --out "$W/x.ckpt"
fifo_folder $WF
refused "convert of a folder whose weights file is a FIFO" "$WF is a FIFO" "$T" convert "$W/F" --out "$W/x.ckpt"
# an index naming a shard that is a FIFO
fifo_folder
mv "$W/F/$WF" "$W/F/real.safetensors"
mkfifo "$W/F/diffusion_pytorch_model-00001-of-00001.safetensors"
python3 - "$W/F/real.safetensors" "$W/F/$IX" <<'P'
import json, struct, sys
f = open(sys.argv[1], "rb")
n = struct.unpack("<Q", f.read(8))[0]
names = [k for k in json.loads(f.read(n)) if k != "__metadata__"]
json.dump({"weight_map": {k: "diffusion_pytorch_model-00001-of-00001.safetensors" for k in names}},
          open(sys.argv[2], "w"))
P
refused "convert of a folder whose shard is a FIFO" "00001-of-00001.safetensors is a FIFO" \
  "$T" convert "$W/F" --out "$W/x.ckpt"
mkfifo "$W/lora.safetensors"
refused "convert --merge-lora of a FIFO" "lora.safetensors is a FIFO" \
  "$T" convert "$CK" --merge-lora "$W/lora.safetensors" --out "$W/x.ckpt"
[ ! -e "$W/x.ckpt" ] && ok "no checkpoint written by a refused convert" || bad "a refused convert wrote $W/x.ckpt"
tally convert_fifo
