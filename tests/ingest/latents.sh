#!/usr/bin/env bash
# tests/ingest/latents.sh — `tessera ingest --latents` from the command line (no media
# needed), with latent files written by make_latents (tests/ingest/make_latents.c):
# - good files (bf16 and f32, with and without captions) in a directory: done, the store's
#   settings come from the files (fps, VAE stride, channels; short side 0; patch 1x2x2 by
#   default), `index stats` names a latent store, `index verify` is clean, a rerun skips
#   every file, `index recover` rebuilds the index with the captions
# - malformed files fail one by one with reasons naming the file and the key; exit 2
# - options: --fps/--short-side refused with --latents, --dtype without it, another patch
#   into the store (settings mismatch, nothing written), a file of another fps or channel
#   count into the store, a truncated file and a text file named .safetensors
# (The values stored, captions block by block and rebuild details: test_latents.c.)
INGEST_NO_MEDIA=1
source "$(dirname "$0")/lib.sh"
ML=${MAKE_LATENTS:?ctest sets MAKE_LATENTS to the make_latents binary}
S=$WORK/store
mkdir -p "$WORK/good" "$WORK/bad"

for i in 1 2 3; do
  "$ML" "$WORK/good/a$i.safetensors" --shape 5,6,8,4 --seed "$i" --fps 16 --vae 4x8x8 \
    --source "/videos/a$i.mp4"
done
"$ML" "$WORK/good/f32.safetensors" --shape 4,6,6,4 --dtype f32 --seed 9 --fps 16 --vae 4x8x8
"$ML" "$WORK/good/cap.safetensors" --shape 3,4,4,4 --seed 7 --fps 16 --vae 4x8x8 \
  --text 3,8 --text-words 0,2,1 --caption "a red clip"
tsr_ok "$WORK/i1.log" "ingest --latents of 5 good files" ingest --latents "$WORK/good" --out "$S" --quiet
expect_eq "$(sql "$S" "SELECT count(*) FROM sources WHERE status = 'done'")" 5 "5 done sources"
expect_eq "$(sql "$S" "SELECT group_concat(key || '=' || value, ' ') FROM settings WHERE key IN ('fps_num','fps_den','short_side','pt','ph','pw','channels','dtype','vae_t','vae_s') ORDER BY key")" \
  "channels=4 dtype=bf16 fps_den=1 fps_num=16 ph=2 pt=1 pw=2 short_side=0 vae_s=8 vae_t=4" \
  "settings from the files, default patch 1x2x2, bf16"
# a (5, 6, 8) latent grid: 5 tubelets of 1 frame, 3x4 tokens; duration 5 * 4 / 16 s
expect_eq "$(sql "$S" "SELECT c.T || 'x' || c.H || 'x' || c.W || ' ' || c.duration_s || ' ' || c.src_w || 'x' || c.src_h || ' ' || c.codec || ' ' || c.pix_fmt FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is a1.safetensors)")" \
  "5x3x4 1.25 64x48 latents bf16" "clip row: grid, duration, source size, codec, dtype"
expect_eq "$(source_col "$S" a1.safetensors error)" "latents of /videos/a1.mp4" "the source's note names the video"
expect_eq "$(sql "$S" "SELECT c.caption || ' ' || c.caption_tokens || 'x' || c.caption_dim FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is cap.safetensors)")" \
  "a red clip 3x8" "the caption in the index"
tsr "$WORK/stats.log" index stats "$S"
check "index stats names a latent store" grep -q "latents of a VAE of stride 4x8x8, video at 16/1 fps, patch 1x2x2, 4 channels bf16" "$WORK/stats.log"
verify_ok "$S" "index verify: clean"
tsr_ok "$WORK/i2.log" "rerun" ingest --latents "$WORK/good" --out "$S" --quiet
check "a rerun skips all 5" grep -q "5 skipped as already in the store" "$WORK/i2.log"
# index recover rebuilds the index from the shards, the caption included
mv "$S/index.sqlite" "$WORK/index.old"
tsr_ok "$WORK/rec.log" "index recover" index recover "$S"
expect_eq "$(sql "$S" "SELECT c.caption || ' ' || c.caption_tokens || 'x' || c.caption_dim FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is cap.safetensors)")" \
  "a red clip 3x8" "the rebuilt index has the caption"
verify_ok "$S" "index verify after recover: clean"

# malformed files: each fails alone, naming the file and what is wrong
for k in nan inf-text ndim text-ndim no-format bad-fps bad-vae caption-only no-latents; do
  "$ML" "$WORK/bad/$k.safetensors" --shape 2,4,4,4 --text 2,8 --fps 16 --vae 4x8x8 --bad "$k"
done
"$ML" "$WORK/bad/i32.safetensors" --shape 2,4,4,4 --dtype i32 --fps 16 --vae 4x8x8
"$ML" "$WORK/bad/fps.safetensors" --shape 2,4,4,4 --fps 12 --vae 4x8x8
"$ML" "$WORK/bad/channels.safetensors" --shape 2,4,4,3 --fps 16 --vae 4x8x8
"$ML" "$WORK/bad/small.safetensors" --shape 2,1,4,4 --fps 16 --vae 4x8x8
"$ML" "$WORK/bad/trunc.safetensors" --shape 2,4,4,4 --fps 16 --vae 4x8x8
truncate -s -5 "$WORK/bad/trunc.safetensors"
echo "not a safetensors file" > "$WORK/bad/text.safetensors"
tsr "$WORK/bad.log" ingest --latents "$WORK/bad" --out "$S" --quiet
expect_eq "$RC" 2 "malformed files: exit 2"
reason() { sql "$S" "SELECT error FROM sources s WHERE $(src_is "$1")"; }
expect_reason() {  # FILE PATTERN: the failure reason names the file and matches PATTERN
  local r; r=$(reason "$1")
  if [[ $r == *"$WORK/bad/$1"* ]] && grep -Eq -- "$2" <<<"$r"; then pass "$1: $r"
  else fail "$1: reason '$r' lacks the file or /$2/"; fi
}
expect_reason nan.safetensors "tensor 'latents' has a non-finite value \(NaN\) at \[t 0, y 0, x 1, c 1\]"
expect_reason inf-text.safetensors "tensor 'text_emb' has a non-finite value at \[token 1, 7\]"
expect_reason ndim.safetensors "tensor 'latents' has 3 dimensions; it must be \(T, H, W, C\)"
expect_reason text-ndim.safetensors "tensor 'text_emb' must be \(N, D\)"
expect_reason no-format.safetensors "metadata 'format' is missing"
expect_reason bad-fps.safetensors "metadata 'fps' is 'sixteen'"
expect_reason bad-vae.safetensors "metadata 'vae_stride' is '4x8x16'"
expect_reason caption-only.safetensors "metadata 'caption' without a tensor 'text_emb'"
expect_reason no-latents.safetensors "no tensor 'latents'"
expect_reason i32.safetensors "tensor 'latents' is I32; write bf16 or f32"
expect_reason fps.safetensors "fps 12/1, the store's is 16/1"
expect_reason channels.safetensors "3 channels, the store's latents have 4"
expect_reason small.safetensors "too small: 2 latent frames of 1x4"
expect_reason trunc.safetensors "data_offsets outside|after the last tensor|truncated"
expect_reason text.safetensors "header size .* exceeds the file|not a safetensors file"
verify_ok "$S" "index verify after the failures: clean (nothing of a failed file stays)"
expect_eq "$(sql "$S" "SELECT count(*) FROM clips")" 5 "still the 5 good clips"

# options
tsr "$WORK/o1.log" ingest --latents "$WORK/good" --out "$WORK/s2" --fps 8
expect_eq "$RC" 1 "--fps with --latents: refused"
check "... saying why" grep -q "latent files carry their frame rate" "$WORK/o1.log"
tsr "$WORK/o2.log" ingest "$WORK/good" --out "$WORK/s3" --dtype f32
expect_eq "$RC" 1 "--dtype without --latents: refused"
tsr "$WORK/o3.log" ingest --latents "$WORK/good" --out "$S" --patch 1x4x4
expect_eq "$RC" 1 "another patch into the store: refused"
check "... naming the patches" grep -q "patch 1x2x2x.* vs 1x4x4\|patch 1x2x2 vs 1x4x4" "$WORK/o3.log"
tsr "$WORK/o4.log" ingest --latents "$WORK/bad/nan.safetensors" --out "$WORK/s4"
expect_eq "$RC" 1 "no valid latent file at all: exit 1"
check "... with the first file's error" grep -q "no valid latent file among the 1 sources; the first error: .*non-finite" "$WORK/o4.log"
"$ML" "$WORK/f32a.safetensors" --shape 2,4,4,4 --dtype f32 --fps 16 --vae 4x8x8
tsr_ok "$WORK/o5.log" "--dtype f32 store" ingest --latents "$WORK/f32a.safetensors" --out "$WORK/s5" --dtype f32 --quiet
expect_eq "$(sql "$WORK/s5" "SELECT value FROM settings WHERE key = 'dtype'")" f32 "an f32 store"
check "--dtype f32 (the old spelling): a deprecation note" grep -q "f32: deprecated spelling.*use fp32" "$WORK/o5.log"
for d in fp32 float32; do  # one voice: the canonical name and PyTorch's, without a note
  tsr_ok "$WORK/o5$d.log" "--dtype $d store" ingest --latents "$WORK/f32a.safetensors" --out "$WORK/s5$d" --dtype $d --quiet
  expect_eq "$(sql "$WORK/s5$d" "SELECT value FROM settings WHERE key = 'dtype'")" f32 "--dtype $d: an f32 store"
  check "--dtype $d: no note" bash -c "! grep -q deprecated '$WORK/o5$d.log'"
done
tsr "$WORK/o6.log" ingest --latents "$WORK/f32a.safetensors" --out "$WORK/s6" --dtype fp16
check "--dtype fp16: refused with the names" grep -q "use fp32 or bf16 (or float32, bfloat16)" "$WORK/o6.log"

# An index of schema version 1 (before captions): read as it is where it cannot be written,
# upgraded (the columns of versions 2 and 3 added, NULL) by a writer, and merged from.
v1() {  # STORE: turn its index into a version-1 one (the columns of versions 2 and 3 dropped)
  local c drop=""
  for c in caption caption_offset caption_tokens caption_dim caption_checksum manifest_row \
           manifest_span span_start span_end span_cut scores; do
    drop="$drop ALTER TABLE clips DROP COLUMN $c;"
  done
  sqlite3 "$1/index.sqlite" "$drop ALTER TABLE sources DROP COLUMN scene_cuts; ALTER TABLE sources DROP COLUMN manifest_key; PRAGMA user_version = 1;"
}
"$ML" "$WORK/old1.safetensors" --shape 2,4,4,4 --fps 16 --vae 4x8x8 --seed 31
"$ML" "$WORK/old2.safetensors" --shape 2,4,4,4 --fps 16 --vae 4x8x8 --seed 32 --text 2,8 --caption "new"
tsr_ok "$WORK/v1a.log" "a store to age" ingest --latents "$WORK/old1.safetensors" --out "$WORK/v1" --quiet
cp -r "$WORK/v1" "$WORK/v1ro"
v1 "$WORK/v1"
v1 "$WORK/v1ro"
chmod a-w "$WORK/v1ro/index.sqlite" "$WORK/v1ro"
if [ "$(id -u)" != 0 ]; then  # root writes read-only files: the read-only case needs a user
  tsr_ok "$WORK/v1s.log" "stats of a read-only version-1 index" index stats "$WORK/v1ro"
  expect_eq "$(sqlite3 "$WORK/v1ro/index.sqlite" "PRAGMA user_version")" 1 "... left at version 1"
fi
chmod u+w "$WORK/v1ro/index.sqlite" "$WORK/v1ro"
tsr_ok "$WORK/v1m.log" "merge from a version-1 index" index merge "$WORK/v1ro" --out "$WORK/v1m"
tsr_ok "$WORK/v1i.log" "ingest into a version-1 store" ingest --latents "$WORK/old2.safetensors" --out "$WORK/v1" --quiet
expect_eq "$(sqlite3 "$WORK/v1/index.sqlite" "PRAGMA user_version")" 3 "the writer upgraded it to version 3"
expect_eq "$(sql "$WORK/v1" "SELECT count(*) || ' ' || count(caption) || ' ' || max(coalesce(caption, '-')) FROM clips")" \
  "2 1 new" "the old clip has no caption, the new one has"
verify_ok "$WORK/v1" "index verify of the upgraded store"
verify_ok "$WORK/v1m" "index verify of the merge from version 1"
finish
