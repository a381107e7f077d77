#!/usr/bin/env bash
# tests/model/captions.sh — text conditioning end to end, on generated data (no VAE, no
# text encoder): 32 latent files (2 x 4 x 4 latents, 4 channels) of four colours, each
# clip's channels 0-2 near its colour's (+-1.5) with noise 0.2, captioned "a COLOUR clip"
# with a one-hot embedding of its three words (vocabulary: a, clip, red, green, blue,
# yellow; width 8).
# 1. `tessera ingest --latents` stores them with their captions.
# 2. A tiny text model (model.text_dim 8) trains 200 steps (at 50 its samples met check 3
#    for 1 of 6 training seeds, at 200 for 14 of 14, farthest 0.62); resume is bitwise with
#    captions: the run's checkpoint of step 180, resumed to 200, gives the straight run's
#    losses and final checkpoint.
# 2b. train.null_caption: with every caption dropped (caption_dropout 1) and the red caption
#    as the null caption, 4 steps give bitwise the losses and checkpoint of the same clips
#    stored with the red caption and kept (caption_dropout 0), and not those without a
#    null caption (the learned null token); the key is in the
#    checkpoint's config and a resume from step 2 is bitwise (the losses; with 4 steps
#    equal the weights are too); a missing null caption file, and one of another width,
#    are refused by name.
# 3. It follows the caption: `tessera sample --caption` of each colour's caption (guidance
#    3) gives latents whose mean over channels 0-2 is nearest to that colour, within 1.0
#    of it (the colours are >= 3 apart), for all four; the unconditional sample is not
#    nearest to all of them (it cannot be). Printed: each mean and its distances.
# 4. Memory: the trainer's memory model counts the latent values and the captions
#    (backend peak = model within 4 KiB).
# 5. Errors: --caption on a model without text, a caption of another width, a caption
#    longer than model.text_len, training a text model whose text_len is below a stored
#    caption's length.
set -euo pipefail
# tests/lib.sh (T, SRC, scratch, fail, expect_fail: exit 1 with PATTERN on stderr) and
# colour_latents, the clips
. "$(dirname "$0")/colour_store.sh"
ML=${MAKE_LATENTS:?set by ctest}
scratch captions

colour_latents "$W/src" 8 4 8
mkdir -p "$W/caps"
for k in 0 1 2 3; do
  # the caption alone, as a text encoder would write it for the sampler
  "$ML" "$W/caps/${COLOURS[$k]}.safetensors" --shape 1,1,1,4 --text 3,8 \
    --text-words "0,$((k + 2)),1" --caption "a ${COLOURS[$k]} clip"
done
# clip ids (the objective's random keys) in path order whatever the workers (docs/store-format.md
# "Clip ids"), so the run is the same every time
"$T" ingest --latents "$W/src" --out "$W/store" --quiet 2>"$W/ingest.log"
[ "$(sqlite3 "$W/store/index.sqlite" "SELECT count(*) FROM clips WHERE caption_tokens = 3")" = 32 ] ||
  fail "32 captioned clips expected"

MODEL=(--set model.pt=1 --set model.ph=2 --set model.pw=2 --set model.channels=4
       --set model.text_dim=8 --set model.text_len=4 --set train.global_batch=16
       --set train.warmup=5 --set train.steps=200 --set train.lr=4e-3 --set train.ema_decay=0.9
       --set train.log_every=1 --set train.ckpt_every=20 --set train.ckpt_keep=5)
train() { "$T" train --config "$SRC/configs/model/tiny.conf" --data "${DATA:-$W/store}" "${MODEL[@]}" "$@" 2>>"$W/train.log"; }
train --out "$W/a" --steps 200
# the memory model counts a latent store's bf16/f32 values and the uploaded captions: the
# backend's peak equals its count within 4 KiB (tests/train/memory.sh does pixel stores)
peak=$(sed -n 's/.*allocations peaked at [0-9.]* GiB (\([0-9]*\) bytes).*/\1/p' "$W/train.log" | head -1)
model=$(sed -n 's/.*the model counts [0-9.]* GiB (\([0-9]*\) bytes,.*/\1/p' "$W/train.log" | head -1)
[ -n "$peak" ] && [ -n "$model" ] && [ $((peak > model ? peak - model : model - peak)) -le 4096 ] ||
  fail "memory: measured peak '$peak' bytes vs model '$model'"
echo "ok: memory: measured backend peak $peak bytes, model $model"
# a run that stopped after step 180 (its checkpoint and metrics up to there), resumed
mkdir -p "$W/b"
cp "$W/a/ckpt-180.safetensors" "$W/b/" 2>/dev/null || fail "no ckpt-180 (ckpt_keep?)"
head -n 180 "$W/a/metrics.jsonl" >"$W/b/metrics.jsonl"
train --out "$W/b" --steps 200 --resume
diff <(jq -r .loss "$W/a/metrics.jsonl") <(jq -r .loss "$W/b/metrics.jsonl") >/dev/null ||
  fail "resume with captions: losses differ from the straight run"
cmp -s "$W/a/ckpt-200.safetensors" "$W/b/ckpt-200.safetensors" || fail "resume with captions: ckpt-200 differs"
echo "ok: resume with captions bitwise (loss $(jq -r .loss "$W/a/metrics.jsonl" | head -1) -> $(jq -r .loss "$W/a/metrics.jsonl" | tail -1))"

# train.null_caption: dropped captions are the null caption given as their caption
colour_latents "$W/src_red" 8 4 8 0,2,1  # the same files but for the embedding: red's for every clip
"$T" ingest --latents "$W/src_red" --out "$W/store_red" --workers 1 --quiet 2>>"$W/ingest.log"
NULLRUN=(--set train.steps=4 --set train.warmup=2 --set train.ckpt_every=2)
DATA=$W/store_red train --out "$W/n_given" "${NULLRUN[@]}" --set train.caption_dropout=0
train --out "$W/n_drop" "${NULLRUN[@]}" --set train.caption_dropout=1 \
  --set train.null_caption="$W/caps/red.safetensors"
diff <(jq -r .loss "$W/n_given/metrics.jsonl") <(jq -r .loss "$W/n_drop/metrics.jsonl") >/dev/null ||
  fail "null caption: the losses differ from the clips given it as their caption"
train --out "$W/n_none" "${NULLRUN[@]}" --set train.caption_dropout=1  # the learned null token
[ "$(jq -r .loss "$W/n_none/metrics.jsonl" | tail -1)" != "$(jq -r .loss "$W/n_drop/metrics.jsonl" | tail -1)" ] ||
  fail "null caption: the same loss as without it"
grep -aF "null_caption = $W/caps/red.safetensors" "$W/n_drop/ckpt-4.safetensors" >/dev/null ||
  fail "null caption: not in the checkpoint's config"
mkdir -p "$W/n_res"
cp "$W/n_drop/ckpt-2.safetensors" "$W/n_res/"
head -n 2 "$W/n_drop/metrics.jsonl" >"$W/n_res/metrics.jsonl"
train --out "$W/n_res" "${NULLRUN[@]}" --set train.caption_dropout=1 \
  --set train.null_caption="$W/caps/red.safetensors" --resume
diff <(jq -r .loss "$W/n_drop/metrics.jsonl") <(jq -r .loss "$W/n_res/metrics.jsonl") >/dev/null &&
  cmp -s "$W/n_drop/ckpt-4.safetensors" "$W/n_res/ckpt-4.safetensors" ||
  fail "null caption: resume not bitwise"
echo "ok: null caption: dropped = given bitwise (losses $(jq -r .loss "$W/n_drop/metrics.jsonl" | tr '\n' ' ')), without it $(jq -r .loss "$W/n_none/metrics.jsonl" | tail -1); resume bitwise"
expect_fail "train.null_caption: .*nothere.safetensors" \
  "$T" train --config "$SRC/configs/model/tiny.conf" --data "$W/store" "${MODEL[@]}" --out "$W/n_bad" \
  --steps 1 --set train.null_caption="$W/nothere.safetensors"
"$ML" "$W/null9.safetensors" --shape 1,1,1,4 --text 2,9
expect_fail "train.null_caption: .*null9.safetensors.*9 wide" \
  "$T" train --config "$SRC/configs/model/tiny.conf" --data "$W/store" "${MODEL[@]}" --out "$W/n_bad" \
  --steps 1 --set train.null_caption="$W/null9.safetensors"

CK=$W/a/ckpt-200.safetensors
sample() {  # NAME [ARGS]: samples with ARGS; prints the channel means of the latents
  local name=$1; shift
  "$T" sample --ckpt "$CK" --frames 2 --size 4x4 --steps 16 --out "$W/$name.mp4" "$@" 2>>"$W/sample.log"
  [ -s "$W/$name.mp4" ] && [ -s "$W/$name.safetensors" ] || fail "sample $name: no preview or latents"
  "$ML" --mean "$W/$name.safetensors"
}
# nearest NAME MEANS: the colour nearest to channels 0-2 of MEANS, and the distance to NAME's
nearest() {
  awk -v want="$1" -v m="$2" 'BEGIN {
    split(m, v, " "); split("red green blue yellow", name, " ")
    split("1.5 -1.5 -1.5 -1.5 1.5 -1.5 -1.5 -1.5 1.5 1.5 1.5 -1.5", c, " ")
    best = ""; bd = 1e9
    for (k = 1; k <= 4; k++) {
      d = sqrt((v[1] - c[3*k-2])^2 + (v[2] - c[3*k-1])^2 + (v[3] - c[3*k])^2)
      if (d < bd) { bd = d; best = name[k] }
      if (name[k] == want) dw = d
    }
    printf "%s %.3f\n", best, dw
  }'
}
right=0
for k in 0 1 2 3; do
  c=${COLOURS[$k]}
  m=$(sample "$c" --caption "$W/caps/$c.safetensors" --cfg 3)
  read -r got dist <<<"$(nearest "$c" "$m")"
  echo "caption 'a $c clip': channel means $m -> nearest $got, distance to $c $dist"
  [ "$got" = "$c" ] && awk -v d="$dist" 'BEGIN { exit !(d < 1.0) }' && right=$((right + 1))
done
m=$(sample none)
echo "no caption: channel means $m -> nearest $(nearest red "$m" | cut -d' ' -f1)"
[ $right -eq 4 ] || fail "the samples follow $right of 4 captions"
grep -q "PREVIEW of latent channels 0, 1, 2" "$W/sample.log" || fail "sample does not say the video is a preview"
echo "ok: the samples follow all 4 captions"
# the sampled latents are a latent file: they ingest again (same fps, VAE stride, channels)
"$T" ingest --latents "$W/red.safetensors" --out "$W/back" --quiet 2>"$W/back.log" ||
  { cat "$W/back.log" >&2; fail "the sampled latents do not ingest"; }
[ "$(sqlite3 "$W/back/index.sqlite" "SELECT T || 'x' || H || 'x' || W FROM clips")" = 2x2x2 ] ||
  fail "the sampled latents ingest to another grid"

# errors
"$T" train --config "$SRC/configs/model/tiny.conf" --data "$W/store" --out "$W/plain" --steps 1 \
  --set model.pt=1 --set model.ph=2 --set model.pw=2 --set model.channels=4 2>"$W/plain.log"
grep -q "captioned clips but model.text_dim = 0: captions are not used" "$W/plain.log" ||
  fail "no warning that a model without text ignores the captions"
expect_fail "the checkpoint's model has no captions" \
  "$T" sample --ckpt "$W/plain/ckpt-1.safetensors" --frames 2 --size 4x4 --out "$W/x.mp4" --caption "$W/caps/red.safetensors"
"$ML" "$W/wide.safetensors" --shape 1,1,1,4 --text 3,9
expect_fail "text_emb is 9 wide; the model takes model.text_dim = 8" \
  "$T" sample --ckpt "$CK" --frames 2 --size 4x4 --out "$W/x.mp4" --caption "$W/wide.safetensors"
"$ML" "$W/long.safetensors" --shape 1,1,1,4 --text 6,8
expect_fail "6 tokens, the model takes at most model.text_len = 4" \
  "$T" sample --ckpt "$CK" --frames 2 --size 4x4 --out "$W/x.mp4" --caption "$W/long.safetensors"
expect_fail "a caption of 3 tokens of width 8; the model takes model.text_dim = 8 and at most model.text_len = 2" \
  "$T" train --config "$SRC/configs/model/tiny.conf" --data "$W/store" "${MODEL[@]}" --out "$W/short" \
  --steps 1 --set model.text_len=2
expect_fail "needs --label or --caption" \
  "$T" sample --ckpt "$CK" --frames 2 --size 4x4 --out "$W/x.mp4" --cfg 2
echo "captions: ingest, bitwise resume, caption following and errors: ok"
