# tests/model/colour_store.sh — sourced by wan_lora_resume.sh and tests/gpu/lora.sh:
# colour_store DIR N makes DIR/store from 4 x N latent files (make_latents: 2x4x4 tokens of
# 16 channels): clip i of colour k (seed k * 100 + i) holds its colour's values plus noise
# 0.2 and the caption "colour k", 3 tokens of 32 (words 0, k + 2, 1). Needs ML (make_latents),
# T (tessera) and fail. Sets COLOUR_CFG, the arguments of the tiny Wan model both train on
# it: text length 16, no recompute, every step logged, warm-up 2, a global batch of 2N.
# colour_latents makes the named colours' files of captions.sh and wan_finetune.sh.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"  # T, SRC, scratch, fail, expect_fail
# colour_begin NAME N: what both start with: ML (make_latents, from ctest), W (scratch NAME),
# the store of 4 x N clips in W and CFG, its model's arguments (COLOUR_CFG).
colour_begin() {
  ML=${MAKE_LATENTS:?set by ctest}
  scratch "$1"
  colour_store "$W" "$2"
  CFG=("${COLOUR_CFG[@]}")
}
colour_store() {
  local dir=$1 n=$2 k i zeros values
  zeros=$(printf ',0%.0s' $(seq 13))
  values=("1.5,-1.5,-1.5$zeros" "-1.5,1.5,-1.5$zeros" "-1.5,-1.5,1.5$zeros" "1.5,1.5,-1.5$zeros")
  mkdir -p "$dir/lat"
  for k in 0 1 2 3; do
    for ((i = 0; i < n; i++)); do
      "$ML" "$dir/lat/c$k-$i.safetensors" --shape 2,4,4,16 --seed $((k * 100 + i)) \
        --value "${values[$k]}" --noise 0.2 --text 3,32 --text-words "0,$((k + 2)),1" \
        --caption "colour $k"
    done
  done
  "$T" ingest --latents "$dir/lat" --out "$dir/store" --workers 1 --quiet 2>"$dir/ingest.log" ||
    { tail -3 "$dir/ingest.log"; fail "ingest"; }
  COLOUR_CFG=(--config "$SRC/configs/model/wan-tiny.conf" --data "$dir/store" --set model.text_len=16
              --set model.recompute=0 --set train.log_every=1 --set train.global_batch=$((2 * n))
              --set train.warmup=2)
}

# colour_latents DIR N C WIDTH [WORDS]: 4 x N latent files DIR/COLOUR-i.safetensors, COLOUR
# the k-th of COLOURS (red green blue yellow), 2x4x4 tokens of C channels (seed k * 100 + i):
# colour k's values in channels 0-2 (+-1.5, the rest 0) plus noise 0.2, captioned "a COLOUR
# clip" with 3 tokens of WIDTH (words 0, k + 2, 1; WORDS: those words for every clip). Needs ML.
COLOURS=(red green blue yellow)
colour_latents() {
  local dir=$1 n=$2 c=$3 width=$4 words=${5:-} k i zeros values
  zeros=$(printf ',0%.0s' $(seq $((c - 3))))
  values=("1.5,-1.5,-1.5$zeros" "-1.5,1.5,-1.5$zeros" "-1.5,-1.5,1.5$zeros" "1.5,1.5,-1.5$zeros")
  mkdir -p "$dir"
  for k in 0 1 2 3; do
    for ((i = 0; i < n; i++)); do
      "$ML" "$dir/${COLOURS[$k]}-$i.safetensors" --shape 2,4,4,$c --seed $((k * 100 + i)) \
        --value "${values[$k]}" --noise 0.2 --text 3,$width \
        --text-words "${words:-0,$((k + 2)),1}" --caption "a ${COLOURS[$k]} clip"
    done
  done
}
