#!/usr/bin/env bash
# tests/train/special_files.sh — only regular files are read and replaced (issue 24, 4).
# Reading: a FIFO where tessera expects a file (--ckpt, --init, --caption, --config, --cost,
# --lengths, @LIST, a caption file beside a video, RUN/metrics.jsonl on --resume) is refused
# at once, naming it: opening one for reading waited for a writer, so the command hung. (An
# anonymous pipe, `--lengths <(...)`, is still read where the input is text.)
# Writing: an --out that is a FIFO or a device (sample, index export, --raw) is refused and
# left as it was: it was replaced by a rename (as root, `--out /dev/null` replaced the
# machine's /dev/null; here a private node of the same device), or the write hung; a
# FIFO or a link under an older version's temporary name (PATH.tmp) is neither written
# into nor followed: the writer's own temporary file is a new one (PATH.tmp.PID.RAND).
# Every command runs under `timeout 20`: a hang is a failure (exit 124), not a stuck test.
source "$(dirname "$0")/lib.sh"
need_store
# refused (tests/lib.sh): CMD exits 1 within 20 s with PATTERN (grep -E) on stderr
REFUSE_WAIT=20 REFUSE_MATCH=-E
is_fifo() { if [ -p "$1" ]; then ok "$2: still a FIFO"; else bad "$2: $1 is no FIFO any more"; fi; }

# a checkpoint of a caption model (model.text_dim > 0; the store has no captions: it learns
# its null token) and a FIFO
C=(--config "$CONF" --data "$STORE" --set train.global_batch=2 --set train.mem_tokens=512
   --set train.warmup=1 --set model.text_dim=8 --set model.text_len=4)
timeout 120 "$T" train "${C[@]}" --out "$W/run" --steps 1 >"$W/train.log" 2>&1 ||
  { cat "$W/train.log" >&2; fail "the one-step run failed"; }
CK=$W/run/ckpt-1.safetensors
mkfifo "$W/fifo"
S=(--frames 2 --size 32x32 --steps 1)

# reading
refused "sample --ckpt FIFO" "is a FIFO" "$T" sample --ckpt "$W/fifo" "${S[@]}" --out "$W/a.mp4"
refused "sample --caption FIFO" "is a FIFO" "$T" sample --ckpt "$CK" "${S[@]}" --caption "$W/fifo" --out "$W/a.mp4"
refused "train --init FIFO" "is a FIFO" "$T" train "${C[@]}" --out "$W/init" --steps 1 --init "$W/fifo"
refused "train --config FIFO" "is a FIFO" "$T" train --config "$W/fifo" --data "$STORE" --out "$W/cfg"
refused "train --cost FIFO" "is a FIFO" "$T" train "${C[@]}" --out "$W/cost" --steps 1 --cost "$W/fifo"
refused "plan --lengths FIFO" "is a FIFO" "$T" plan --lengths "$W/fifo" --tokens-per-second 100 --ranks 2 \
  --mem-tokens 4096 --cost "$SRC/configs/cost/h100-dit1b.conf"
refused "ingest @FIFO" "is a FIFO" "$T" ingest "@$W/fifo" --out "$W/st"
# an anonymous pipe (process substitution) is text its writer holds: still read
if timeout 20 "$T" plan --lengths <(printf 'tokens\n100\n300\n') --ranks 2 --mem-tokens 4096 \
     --cost "$SRC/configs/cost/h100-dit1b.conf" --steps 1 --global-batch 2 >"$W/pipe.log" 2>&1; then
  ok "plan --lengths <(...): a pipe is read"
else bad "plan --lengths <(...): $(tail -2 "$W/pipe.log")"; fi
mv "$W/run/metrics.jsonl" "$W/metrics.keep" && mkfifo "$W/run/metrics.jsonl"
refused "train --resume with metrics.jsonl a FIFO" "metrics.jsonl is a FIFO" "$T" train "${C[@]}" --out "$W/run" --steps 2 --resume
rm "$W/run/metrics.jsonl" && mv "$W/metrics.keep" "$W/run/metrics.jsonl"
# a caption file beside a video that is a FIFO fails that video alone
mkdir -p "$W/vid"
cp "$VIDEOS/counter.mp4" "$W/vid/a.mp4" && cp "$VIDEOS/counter.mp4" "$W/vid/b.mp4"
mkfifo "$W/vid/a.mp4.caption.safetensors"
rc=0
timeout 60 "$T" ingest "$W/vid" --out "$W/capst" --captions --fps 1 --short-side 32 --patch 1x16x16 \
  --max-seconds 2 --workers 1 --quiet >"$W/cap.log" 2>&1 </dev/null || rc=$?
if [ $rc -eq 2 ] && grep -q "a.mp4.caption.safetensors is a FIFO" "$W/cap.log" &&
   [ "$(sqlite3 "$W/capst/index.sqlite" "select group_concat(status) from sources order by path")" = "failed,done" ]; then
  ok "a caption file that is a FIFO fails its video alone"
else
  bad "ingest with a caption FIFO: exit $rc ($([ $rc -eq 124 ] && echo hung || tail -3 "$W/cap.log" | tr '\n' ' '))"
fi

# writing
refused "sample --out FIFO" "is a FIFO" "$T" sample --ckpt "$CK" "${S[@]}" --out "$W/fifo"
is_fifo "$W/fifo" "sample --out"
refused "index export --out FIFO" "is a FIFO" "$T" index export "$STORE" --clip 1 --out "$W/fifo"
refused "index export --raw --out FIFO" "is a FIFO" "$T" index export "$STORE" --clip 1 --raw --out "$W/fifo"
is_fifo "$W/fifo" "index export --out"
mkfifo "$W/x.mp4.tmp"
if timeout 20 "$T" index export "$STORE" --clip 1 --out "$W/x.mp4" >/dev/null 2>&1 </dev/null &&
   [ -s "$W/x.mp4" ] && [ -p "$W/x.mp4.tmp" ]; then ok "index export beside a FIFO x.mp4.tmp: written, the FIFO untouched"
else bad "index export beside a FIFO x.mp4.tmp"; fi
echo "precious" >"$W/victim"
ln -s "$W/victim" "$W/y.rgb.tmp"
if timeout 20 "$T" index export "$STORE" --clip 1 --raw --out "$W/y.rgb" >/dev/null 2>&1 </dev/null &&
   [ -s "$W/y.rgb" ] && [ -L "$W/y.rgb.tmp" ]; then ok "index export --raw beside a link y.rgb.tmp: written, the link untouched"
else bad "index export --raw beside a link y.rgb.tmp"; fi
if [ "$(cat "$W/victim")" = precious ]; then ok "the link's target is untouched"; else bad "the link's target was overwritten"; fi
if [ "$(id -u)" = 0 ] && mknod "$W/null" c 1 3 2>/dev/null; then  # /dev/null's device, private
  refused "sample --out a character device" "is a character device" "$T" sample --ckpt "$CK" "${S[@]}" --out "$W/null"
  if [ -c "$W/null" ]; then ok "the device node is still a device"; else bad "the device node was replaced by a file"; fi
else
  echo "skip: the device node case needs root (mknod)"
fi
timeout 60 "$T" sample --ckpt "$CK" "${S[@]}" --out "$W/good.mp4" >"$W/good.log" 2>&1 &&
  [ -s "$W/good.mp4" ] && ok "a regular --out is written as before" || bad "sample to a regular file: $(tail -2 "$W/good.log")"
tally special_files
