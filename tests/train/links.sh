#!/usr/bin/env bash
# tests/train/links.sh — no write follows a link out of a store or run directory (issue 40,
# 4; core/fs.h "no link followed"). A store or run directory received from someone else is
# untrusted input: each kind of link is planted in turn, pointing at a file or folder
# outside, and the command that would write there must refuse, naming the link, and leave
# the outside untouched (before, the lock was truncated and overwritten with the holder's
# line, metrics.jsonl and train.log written through, a shared tensorboard folder's event
# files deleted, shards moved into whatever quarantine named).
#   store: lock (ingest, index recover, index merge), index.sqlite, shards/, quarantine/, readers/ (a
#          reader's entry is best effort: none made, nothing written outside);
#   run:   lock, metrics.jsonl, train.log, tensorboard/, samples/ (the sample refused, a
#          warning), a checkpoint's name (checkpoints are renamed into place, which replaces
#          a link rather than follows it; a planted one makes the run directory a run's).
# Every command runs under `timeout 60`: a hang is a failure, not a stuck test.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad, refused (grep -F, 60 s)
ML=${MAKE_LATENTS:?set by ctest}
scratch links
REFUSE_ANY_EXIT=1  # refused: CMD exits non-zero (not 124, a hang) within 60 s
LINKMSG="is a symbolic link: tessera does not write through a link"
# the outside: a file and a folder whose contents must survive
OUT=$W/outside
mkdir -p "$OUT/dir"
echo precious >"$OUT/file"
echo "another run's events" >"$OUT/dir/events.out.tfevents.1.other"
untouched() {
  if [ "$(cat "$OUT/file")" = precious ] && [ "$(ls "$OUT/dir")" = events.out.tfevents.1.other ] &&
     [ "$(cat "$OUT/dir/events.out.tfevents.1.other")" = "another run's events" ]; then
    ok "$1: the outside file and folder are untouched"
  else
    bad "$1: the outside was changed: file '$(cat "$OUT/file")', folder: $(ls "$OUT/dir" | tr '\n' ' ')"
    echo precious >"$OUT/file"
    find "$OUT/dir" -mindepth 1 ! -name events.out.tfevents.1.other -exec rm -rf {} +
    echo "another run's events" >"$OUT/dir/events.out.tfevents.1.other"
  fi
}

mkdir -p "$W/lat"
for i in 0 1 2 3; do
  "$ML" "$W/lat/c$i.safetensors" --shape 2,4,4,16 --seed $i --text 3,32 --caption "clip $i"
done
"$T" ingest --latents "$W/lat" --out "$W/store" --workers 1 --quiet >"$W/log" 2>&1
S=$W/store

# ---- store ----
# plant NAME TARGET: STORE/NAME becomes a link to TARGET (the original kept aside)
plant() { [ -e "$S/$1" ] && mv "$S/$1" "$S/$1.keep"; ln -s "$2" "$S/$1"; }
unplant() { rm "$S/$1"; [ -e "$S/$1.keep" ] && mv "$S/$1.keep" "$S/$1"; return 0; }
plant lock "$OUT/file"
refused "ingest into a store whose lock is a link" "$S/lock $LINKMSG" \
  "$T" ingest --latents "$W/lat" --out "$S" --workers 1 --quiet
refused "index recover with the lock a link" "$S/lock $LINKMSG" "$T" index recover "$S"
mkdir -p "$W/m"
ln -s "$OUT/file" "$W/m/lock"
refused "index merge into a folder whose lock is a link" "$W/m/lock $LINKMSG" "$T" index merge "$S" --out "$W/m"
untouched "store lock"
unplant lock
for d in shards quarantine; do
  plant $d "$OUT/dir"
  refused "index recover with $d/ a link" "$S/$d $LINKMSG" "$T" index recover "$S"
  refused "ingest with $d/ a link" "$S/$d $LINKMSG" "$T" ingest --latents "$W/lat" --out "$S" --workers 1 --quiet
  untouched "store $d/"
  unplant $d
done
# the index a link to a copy outside: a writer refuses it, the copy keeps its bytes
cp "$S/index.sqlite" "$W/index.copy"
sum=$(md5sum <"$W/index.copy")
plant index.sqlite "$W/index.copy"
refused "ingest with index.sqlite a link" "$S/index.sqlite $LINKMSG" \
  "$T" ingest --latents "$W/lat" --out "$S" --workers 1 --quiet
refused "index recover with index.sqlite a link" "$S/index.sqlite $LINKMSG" "$T" index recover "$S"
[ "$(md5sum <"$W/index.copy")" = "$sum" ] && ok "the index's outside copy is untouched" ||
  bad "the index's outside copy was changed"
unplant index.sqlite
plant readers "$OUT/dir"
timeout 60 "$T" index verify "$S" >"$W/out" 2>&1 && ok "a reader of a store whose readers/ is a link still reads" ||
  bad "index verify with readers/ a link: $(tail -2 "$W/out")"
untouched "store readers/"
unplant readers

# ---- run directory ----
CFG=(--config "$SRC/configs/model/wan-tiny.conf" --data "$S" --set train.warmup=0
     --set train.global_batch=4 --set train.log_every=1)
R=$W/run
for f in lock metrics.jsonl train.log; do
  rm -rf "$R" && mkdir -p "$R" && ln -s "$OUT/file" "$R/$f"
  refused "train with RUN/$f a link" "$R/$f $LINKMSG" "$T" train "${CFG[@]}" --out "$R" --steps 1
  untouched "run $f"
done
rm -rf "$R" && mkdir -p "$R" && ln -s "$OUT/dir" "$R/tensorboard"
refused "train with RUN/tensorboard a link" "$R/tensorboard $LINKMSG" \
  "$T" train "${CFG[@]}" --out "$R" --steps 1 --set train.tensorboard=1
untouched "run tensorboard/"
# samples/ a link: the sample is refused (a failed sample is a warning), nothing written outside
rm -rf "$R" && mkdir -p "$R" && ln -s "$OUT/dir" "$R/samples"
timeout 120 "$T" train "${CFG[@]}" --out "$R" --steps 1 --set train.sample_every=1 \
  --set train.sample_steps=1 >"$W/out" 2>&1 || true
grep -Fq "$R/samples $LINKMSG" "$W/out" && ok "train with RUN/samples a link: the sample refused" ||
  bad "train with RUN/samples a link: $(grep -i sample "$W/out" | tail -2)"
untouched "run samples/"
# a checkpoint's name a link: the run directory is taken for a run's (never written through)
rm -rf "$R" && mkdir -p "$R" && ln -s "$OUT/file" "$R/ckpt-1.safetensors"
refused "train with RUN/ckpt-1.safetensors a link" "already holds checkpoints" \
  "$T" train "${CFG[@]}" --out "$R" --steps 1
untouched "run checkpoint"
tally links
