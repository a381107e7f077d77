#!/usr/bin/env bash
# Reruns and settings: a rerun on a finished store skips everything (exit 0, no new
# source or clip rows, same canonical dump); ingesting with other settings (--fps 4 on an
# fps-8 store, then another patch size) is refused with exit 1 and a message naming the
# setting, and writes nothing (index.sqlite's sha256 and the shard listing unchanged).
source "$(dirname "$0")/lib.sh"

SRC=$WORK/src
gen_set "$SRC" 3
STORE=$WORK/store
tsr_ok "$WORK/first.log" "first ingest" ingest "$SRC" --out "$STORE"
canonical_dump "$STORE" >"$WORK/first.dump"
maxid=$(sql "$STORE" "SELECT MAX(id) FROM clips;")
nsrc=$(sql "$STORE" "SELECT COUNT(*) FROM sources;")

tsr_ok "$WORK/rerun.log" "rerun on a finished store" ingest "$SRC" --out "$STORE"
expect_eq "$(sql "$STORE" "SELECT MAX(id) FROM clips;")" "$maxid" "rerun adds no clip"
expect_eq "$(sql "$STORE" "SELECT COUNT(*) FROM sources;")" "$nsrc" "rerun adds no source"
canonical_dump "$STORE" >"$WORK/rerun.dump"
check "rerun leaves the store's content unchanged" cmp -s "$WORK/first.dump" "$WORK/rerun.dump"

snapshot() { sha256sum "$STORE/index.sqlite"; ls -l "$STORE/shards"; }
snapshot >"$WORK/before"
gen_src "$SRC/new.mp4" testsrc2 160x120 25 2   # a new source: nothing may be ingested
tsr "$WORK/fps.log" ingest "$SRC" --out "$STORE" --fps 4
expect_eq "$RC" 1 "--fps 4 on an fps-8 store: exit status"
check "message names fps" grep -qi 'fps' "$WORK/fps.log"
snapshot >"$WORK/after"
check "index and shards unchanged after the refused run" cmp -s "$WORK/before" "$WORK/after"

tsr "$WORK/patch.log" ingest "$SRC" --out "$STORE" --patch 1x8x8
expect_eq "$RC" 1 "--patch 1x8x8 on a 2x16x16 store: exit status"
check "message names the patch" grep -qi 'patch\|pt\b\|ph\b' "$WORK/patch.log"
snapshot >"$WORK/after2"
check "index and shards unchanged after the refused run" cmp -s "$WORK/before" "$WORK/after2"

tsr "$WORK/bad.log" ingest "$SRC" --out "$STORE" --fps 0
expect_eq "$RC" 1 "--fps 0: bad argument, exit 1"
verify_ok "$STORE" "index verify"
finish
