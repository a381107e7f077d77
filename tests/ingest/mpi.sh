#!/usr/bin/env bash
# Multi-process ingest: `mpirun -np 2 tessera ingest` splits the sources across two ranks
# and produces one store equal (lib.sh canonical_dump) to the single-process one, which
# verifies and has no duplicate clip. The clip ids are the same in both and in an ingest
# by 3 workers: 1.. in the order of the sources' paths (store/index.h index_order_settle),
# not the order in which ranks and workers finished (largest source first).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "FAIL: mpirun is required (tools/setup.sh installs openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

SRC=$WORK/src
gen_set "$SRC" 6
tsr_ok "$WORK/one.log" "single-process ingest" ingest "$SRC" --out "$WORK/one" --workers 1
RC=0
mpirun --oversubscribe -np 2 "$TESSERA_BIN" ingest "$SRC" --out "$WORK/two" --workers 1 \
  >"$WORK/two.log" 2>&1 </dev/null || RC=$?
expect_eq "$RC" 0 "mpirun -np 2 ingest"; [ "$RC" -eq 0 ] || tail -n 20 "$WORK/two.log" >&2
canonical_dump "$WORK/one" >"$WORK/one.dump"
canonical_dump "$WORK/two" >"$WORK/two.dump"
if cmp -s "$WORK/one.dump" "$WORK/two.dump"; then pass "2-rank store equals the 1-process store"
else fail "2-rank store differs:"; diff "$WORK/one.dump" "$WORK/two.dump" >&2 || true; fi
check "no duplicate clips" no_duplicate_clips "$WORK/two"
check "no per-rank index left behind" [ -z "$(ls -A "$WORK/two/parts" 2>/dev/null)" ]
verify_ok "$WORK/two" "index verify (2-rank store)"

tsr_ok "$WORK/three.log" "ingest by 3 workers" ingest "$SRC" --out "$WORK/three" --workers 3
ids() { sql "$1" "SELECT c.id, s.path, c.clip_index FROM clips c JOIN sources s
                  ON c.source_id = s.id ORDER BY c.id;"; }
ids "$WORK/one" >"$WORK/one.ids"
check "the 2-rank store numbers its clips as the 1-process one" cmp -s <(ids "$WORK/two") "$WORK/one.ids"
check "the 3-worker store numbers its clips as the 1-process one" \
  cmp -s <(ids "$WORK/three") "$WORK/one.ids"
out_of_order=$(sql "$WORK/one" "SELECT count(*) FROM (SELECT c.id, ROW_NUMBER() OVER (ORDER BY
  s.path, c.clip_index) AS k FROM clips c JOIN sources s ON c.source_id = s.id) WHERE id <> k;")
expect_eq "$out_of_order" 0 "clips out of path order (ids 1..)"
check "no clip order mark left after the job" \
  [ -z "$(sql "$WORK/one" "SELECT value FROM settings WHERE key = 'order_from';")" ]
finish
