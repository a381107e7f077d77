# tests/dist/ranks_store.sh — sourced by train_ranks.sh and lora_ranks.sh: ranks_store DIR
# makes their store in DIR/store: 4 clips of 1..4 s at 4 fps, 40x32 pixels, patch 1x4x4
# (80 tokens a frame: 320, 640, 960 and 1280 tokens), so that a mem_tokens of 700 splits the
# longer clips across ranks (ring attention). Needs T (tessera) and ffmpeg.
ranks_store() {
  local w=$1 s
  for s in 1 2 3 4; do
    ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=160x128:r=12:d=$s" "$w/c$s.mp4"
  done
  "$T" ingest "$w"/c*.mp4 --out "$w/store" --fps 4 --short-side 32 --patch 1x4x4 --quiet
}
