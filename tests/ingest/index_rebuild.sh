#!/usr/bin/env bash
# A store whose index.sqlite is missing, empty (0 bytes) or garbage: ingest refuses it
# (exit 1, says to run `tessera index recover`) and deletes no shard (it used to delete
# every shard as "unreferenced", exit 0); `tessera index recover` rebuilds the index from
# the clip blocks' metadata: every done source and clip comes back with the same shard,
# offset, bytes, checksum, grid, labels and metadata; the store verifies; a rerun of
# ingest skips every done source. Real clips, small settings.
source "$(dirname "$0")/lib.sh"
need_clips
A=(--fps 4 --short-side 32 --patch 1x4x4 --max-seconds 2 --quiet)
S=$WORK/store
mkdir -p "$WORK/v/cats" "$WORK/v/dogs"
for f in counter.mp4 delayed_start.mp4 decord__corrupted.mp4; do ln -s "$VIDEOS/$f" "$WORK/v/cats/$f"; done
for f in fades.mp4 androidx-media__bear-vp9-odd-dimensions.webm jcodec__test.mkv; do ln -s "$VIDEOS/$f" "$WORK/v/dogs/$f"; done
tsr "$WORK/ingest.log" ingest "$WORK/v" --out "$S" "${A[@]}" --label-from-dir
check "first ingest runs (exit 0 or 2)" [ "$RC" -eq 0 -o "$RC" -eq 2 ]
ndone=$(sql "$S" "SELECT COUNT(*) FROM sources WHERE status = 'done';")
# Everything the index records about done sources and their clips, ids left out.
dump() {
  sql "$1" "SELECT path, size, mtime, status, error, partial, decoded_frames, label, clips
            FROM sources WHERE status = 'done' ORDER BY path;"
  sql "$1" "SELECT s.path, c.clip_index, c.start_s, c.duration_s, c.src_fps, c.src_w, c.src_h,
            c.rotation, c.sar_num, c.sar_den, c.codec, c.pix_fmt, c.decoded_frames, c.frames,
            c.dropped_frames, c.T, c.H, c.W, c.tokens, c.shard, c.offset, c.bytes, c.checksum,
            c.label FROM clips c JOIN sources s ON s.id = c.source_id ORDER BY s.path, c.clip_index;"
}
dump "$S" >"$WORK/ref.dump"
check "reference has several clips" [ "$(grep -c '|' "$WORK/ref.dump")" -gt 10 ]
shards() { (cd "$S/shards" && ls -l --time-style=+ . | sha256sum); }
ref_shards=$(shards)

for kind in missing empty garbage; do
  case $kind in
    missing) rm "$S/index.sqlite" ;;
    empty) : >"$S/index.sqlite" ;;
    garbage) head -c 5000 /dev/urandom >"$S/index.sqlite" ;;
  esac
  tsr "$WORK/refused-$kind.log" ingest "$WORK/v" --out "$S" "${A[@]}" --label-from-dir
  expect_eq "$RC" 1 "$kind index: ingest refuses (exit 1)"
  check "$kind index: the refusal says to run index recover" grep -q "tessera index recover $S" "$WORK/refused-$kind.log"
  expect_eq "$(shards)" "$ref_shards" "$kind index: no shard deleted or changed"
  tsr_ok "$WORK/recover-$kind.log" "$kind index: index recover" index recover "$S"
  check "$kind index: recover says failed sources are not recovered" grep -q "failed sources are not recorded in shards" "$WORK/recover-$kind.log"
  dump "$S" >"$WORK/$kind.dump"
  if cmp -s "$WORK/ref.dump" "$WORK/$kind.dump"; then pass "$kind index: rebuilt index equals the original"
  else fail "$kind index: rebuilt index differs:"; diff "$WORK/ref.dump" "$WORK/$kind.dump" >&2 | head -20 || true; fi
  verify_ok "$S" "$kind index: verify after rebuild"
done
check "the unusable index is kept aside" [ -n "$(ls "$S"/index.sqlite.unusable-* 2>/dev/null)" ]
tsr "$WORK/rerun.log" ingest "$WORK/v" --out "$S" "${A[@]}" --label-from-dir
check "rerun after rebuild skips every done source" grep -q "$ndone skipped as already in the store" "$WORK/rerun.log"
dump "$S" >"$WORK/rerun.dump"
check "rerun adds no clip" cmp -s "$WORK/ref.dump" "$WORK/rerun.dump"
# An index emptied of its clips while the shards hold blocks is unusable too.
sql "$S" "DELETE FROM clips; DELETE FROM sources;"
tsr "$WORK/refused-noclips.log" ingest "$WORK/v" --out "$S" "${A[@]}" --label-from-dir
expect_eq "$RC" 1 "index without clips over full shards: ingest refuses"
expect_eq "$(shards)" "$ref_shards" "no-clip index: no shard deleted"
# A first ingest killed before its first commit leaves complete clip blocks and an index
# that never committed anything: those blocks are garbage, and a rerun resumes (the
# no-clip rule above must not refuse it; it did in ingest_resume).
gen_src "$WORK/long/long.mp4" testsrc2 320x240 30 40
K=$WORK/killed
"$TESSERA_BIN" ingest "$WORK/long/long.mp4" --out "$K" "${A[@]}" --fps 30 --max-seconds 1 --workers 1 >/dev/null 2>&1 </dev/null &
k=$!; bg_register "$k"
for _ in $(seq 200); do
  sz=$(stat -c %s "$K"/shards/*.tshard 2>/dev/null | head -n 1 || true)
  [ "${sz:-0}" -gt 20000 ] && break
  sleep_ms 20
done
kill -9 "$k" 2>/dev/null || true; wait "$k" 2>/dev/null || true
expect_eq "$(sql "$K" "SELECT COUNT(*) FROM clips;")" 0 "killed before its first commit"
tsr_ok "$WORK/killed-rerun.log" "rerun after a kill before the first commit resumes" ingest "$WORK/long/long.mp4" --out "$K" "${A[@]}" --fps 30 --max-seconds 1 --workers 1
verify_ok "$K" "verify after that rerun"
finish
