#!/usr/bin/env bash
# tests/train/ckpt_meta.sh — checkpoint metadata is validated on read (issue 24, 6). The
# metadata is not covered by the tensor checksums, so a damaged or crafted file may hold any
# string there; copies of a real checkpoint with one value changed (ckpt_edit) must be
# refused naming the key, or work without undefined behaviour where the value is legal:
# - store_fps 2147483647/2147483647 (1 fps, legal): `sample` writes the video (the encoder's
#   fps_num + fps_den overflowed int: UBSan under the sanitize build)
# - sampler_epoch 2^63-1 with the position at the end of the epoch: `--resume` refuses it
#   (the sampler's epoch++ overflowed: UBSan), as an epoch the steps could not reach
# - store_dtype 7, store_channels 2^31, store_max_seconds nan, store_fps 8/0, a patch past
#   int, step 2^63-1, sampler_pos past the clips: refused naming the key (before: accepted,
#   wrapped or read as 0, or the run "already done")
# Run under the sanitize build (label sanitize) a report of UBSan or ASan is a failure.
source "$(dirname "$0")/lib.sh"
need_store
EDIT=${CKPT_EDIT:?ctest sets CKPT_EDIT to the ckpt_edit binary}
clean() { ! grep -qE "runtime error|Sanitizer" "$1"; }
# refused WHAT PATTERN CMD...: CMD exits 1 with PATTERN on stderr and no sanitizer report
refused() {
  local what=$1 pat=$2 rc=0; shift 2
  timeout 120 "$@" >"$W/out" 2>"$W/err" </dev/null || rc=$?
  if [ $rc -eq 1 ] && grep -Eq -- "$pat" "$W/err" && clean "$W/err"; then
    ok "$what: refused ($(grep error "$W/err" | head -c 200))"
  else
    bad "$what: exit $rc: $(grep -E 'error|runtime' "$W/err" | head -3 | cut -c1-300)"
  fi
}
C=(--config "$CONF" --data "$STORE" --set train.global_batch=4 --set train.mem_tokens=512
   --set train.warmup=1 --set train.log_every=1)
"$T" train "${C[@]}" --out "$W/run" --steps 1 >"$W/train.log" 2>&1 ||
  { cat "$W/train.log" >&2; fail "the one-step run failed"; }
CK=$W/run/ckpt-1.safetensors
CLIPS=$(sqlite3 "$STORE/index.sqlite" "SELECT count(*) FROM clips")
S=(--frames 2 --size 32x32 --steps 1)
# crafted NAME KEY=VALUE...: a run directory NAME holding the edited checkpoint as ckpt-1
crafted() {
  local name=$1; shift
  mkdir -p "$W/$name" && cp "$W/run/metrics.jsonl" "$W/$name/"
  "$EDIT" "$CK" "$W/$name/ckpt-1.safetensors" "$@" || fail "ckpt_edit $*"
}

# a legal fps of large terms: the video is written, no overflow
crafted fps store_fps=2147483647/2147483647
rc=0
"$T" sample --ckpt "$W/fps/ckpt-1.safetensors" "${S[@]}" --out "$W/fps.mp4" >"$W/fps.log" 2>&1 || rc=$?
if [ $rc -eq 0 ] && [ -s "$W/fps.mp4" ] && clean "$W/fps.log"; then ok "store_fps 2147483647/2147483647: sampled, no overflow"
else bad "store_fps 2147483647/2147483647: exit $rc $(grep -E 'error|runtime' "$W/fps.log" | head -2)"; fi

# an epoch near 2^63 at the end of its pass: the next draw would count it up
crafted epoch sampler_epoch=9223372036854775807 sampler_pos="$CLIPS"
refused "sampler_epoch 2^63-1 on --resume" "sampler_epoch" "$T" train "${C[@]}" --out "$W/epoch" --steps 2 --resume
crafted epoch2 sampler_epoch=1000000
refused "sampler_epoch 10^6 after one step" "sampler_epoch" "$T" train "${C[@]}" --out "$W/epoch2" --steps 2 --resume
crafted pos sampler_pos=1000000
refused "sampler_pos past the clips" "sampler_pos" "$T" train "${C[@]}" --out "$W/pos" --steps 2 --resume
crafted step step=9223372036854775807
refused "step 2^63-1" "'step'" "$T" train "${C[@]}" --out "$W/step" --steps 2 --resume

# store settings: refused by `sample`, naming the key
for kv in store_dtype=7 store_channels=2147483648 store_max_seconds=nan store_fps=8/0 \
          store_patch=2x16x99999999999 store_fps=2147483648/1; do
  name=$(echo "$kv" | tr '=/' '__')
  crafted "$name" "$kv"
  refused "$kv" "checkpoint .*(${kv%%=*}|store settings)" "$T" sample --ckpt "$W/$name/ckpt-1.safetensors" "${S[@]}" --out "$W/$name.mp4"
done
# the untouched checkpoint still resumes and samples
rc=0
"$T" train "${C[@]}" --out "$W/run" --steps 2 --resume >"$W/resume.log" 2>&1 || rc=$?
[ $rc -eq 0 ] && clean "$W/resume.log" && ok "the real checkpoint resumes" || bad "resume of the real checkpoint: exit $rc"
tally ckpt_meta
