# tests/dist/ranks_store.sh — sourced by train_ranks.sh, lora_ranks.sh and zero_ranks.sh:
# ranks_store DIR makes their store in DIR/store: 4 clips of 1..4 s at 4 fps, 40x32 pixels,
# patch 1x4x4 (80 tokens a frame: 320, 640, 960 and 1280 tokens), so that a mem_tokens of
# 700 splits the longer clips across ranks (ring attention), and sets RANKS_MODEL, the
# arguments of the model they train on it (tiny with the store's patch, hidden 32, 2 heads,
# all 4 clips a step). Needs T (tessera), SRC (the source tree) and ffmpeg.
ranks_store() {
  local w=$1 s
  for s in 1 2 3 4; do
    ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=160x128:r=12:d=$s" "$w/c$s.mp4"
  done
  "$T" ingest "$w"/c*.mp4 --out "$w/store" --fps 4 --short-side 32 --patch 1x4x4 --quiet
  RANKS_MODEL=(--config "$SRC/configs/model/tiny.conf" --data "$w/store"
               --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.hidden=32
               --set model.heads=2 --set train.global_batch=4)
}
